"""Causal-language-model pretraining (next-token prediction) of a decoder on the one loop: `sentkit train --method
clm`, continued from a decoder checkpoint or built from scratch (a base for `--method mntp` / `llm2vec` when no
pretrained decoder can be had).

Sequences are packed from the token store as for `--method mlm` and `--method mntp` (the end-of-sequence token
between documents, the tokenizer's own tokens around each sequence), with causal attention and nothing masked: every
token but the first is predicted from the output before it through the LM head (`sentkit.models.decoder.mntp_sum`
with every label kept: the shifted loss transformers' causal LMs compute). From scratch, the architecture is the
default config of `family` (``gpt2``, ``llama``, ``qwen2``, ...: transformers' own, nothing downloaded) resized by
layers / hidden / heads / intermediate / max_positions, with the vocabulary of `tokenizer` (or of `model`); a
tokenizer without an end-of-sequence token (a BERT WordPiece one) uses its separator ([SEP]) as one, and its
[CLS] as the beginning-of-sequence token, saved with the model. The output is the causal LM with its head and a
sentence encoder (`pooling`, mean by default)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sentkit.core.config import ConfigError
from sentkit.objectives.mlm import IGNORE_INDEX
from sentkit.training.config import TrainConfig
from sentkit.training.recipe import Recipe, TrainModule
from sentkit.training.recipes.mntp import MNTP, MNTPBatch, MNTPModule

log = logging.getLogger(__name__)


@dataclass
class CLMConfig(TrainConfig):
    """Packed sequences of `seq_len` tokens, `batch_size` sequences a step. From scratch: the default architecture
    of `family` (None: `model`'s own, which must then be a decoder) resized by the architecture keys, with the
    vocabulary of `tokenizer` (None: `model`'s)."""

    seq_len: int = 128
    batch_size: int = 32
    family: str | None = None
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    intermediate: int | None = None
    max_positions: int | None = None
    tokenizer: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.seq_len < 3:
            raise ConfigError(f"seq_len must be at least 3, got {self.seq_len}")
        scratch_only = sorted(self.arch()) + [k for k in ("family", "tokenizer") if getattr(self, k) is not None]
        if scratch_only and not self.from_scratch:
            raise ConfigError(
                f"{', '.join(scratch_only)} only apply to a model built from scratch: add --set from_scratch=true"
            )
        for k, v in self.arch().items():
            if v < 1:
                raise ConfigError(f"{k} must be at least 1, got {v}")
        if self.attention == "bidirectional":
            raise ConfigError(
                "--method clm predicts the next token: it needs causal attention (leave attention "
                "unset); --method mntp trains a decoder with bidirectional attention"
            )
        if self.family is not None:
            from transformers import CONFIG_MAPPING

            from sentkit.core.registry import suggest
            from sentkit.models.decoder import is_decoder_config

            if self.family not in CONFIG_MAPPING or not is_decoder_config(CONFIG_MAPPING[self.family]()):
                from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

                raise ConfigError(
                    f"family {self.family!r} is not a decoder language model family of transformers."
                    f"{suggest(self.family, list(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES))}"
                )

    def arch(self) -> dict[str, int]:
        keys = ("layers", "hidden", "heads", "intermediate", "max_positions")
        return {k: int(getattr(self, k)) for k in keys if getattr(self, k) is not None}


def decoder_tokens(tokenizer: Any) -> None:
    """Give a tokenizer without an end-of-sequence token its separator as one (and its [CLS] as the
    beginning-of-sequence token): what packing puts between documents and last-token pooling reads."""
    if tokenizer.eos_token is None:
        if tokenizer.sep_token is None:
            raise ConfigError(
                "--method clm: the tokenizer has neither an end-of-sequence nor a separator token to put "
                "between packed documents"
            )
        tokenizer.eos_token = tokenizer.sep_token
    if tokenizer.bos_token is None and tokenizer.cls_token is not None:
        tokenizer.bos_token = tokenizer.cls_token


def scratch_decoder(cfg: CLMConfig) -> tuple[Any, Any]:
    """A causal LM with random weights (torch's global generator: seed it first) and its tokenizer (see the module
    docstring)."""
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    from sentkit.core.logs import quiet_transformers
    from sentkit.models.decoder import is_decoder_config
    from sentkit.models.hub import load_tokenizer, resize_config, scratch_config

    tok = load_tokenizer(cfg.tokenizer or cfg.model)
    decoder_tokens(tok)
    arch = cfg.arch()
    if cfg.family is not None:
        config = resize_config(CONFIG_MAPPING[cfg.family](), tok, arch)
    else:
        config = scratch_config(cfg.model, tok, arch)
        if not is_decoder_config(config):
            raise ConfigError(
                f"model {cfg.model!r} is a {config.model_type!r} model, not a decoder: name the decoder "
                "architecture to build with --set family=gpt2 (or llama, qwen2, ...)"
            )
    heads = getattr(config, "num_attention_heads", None)
    if heads and hasattr(config, "num_key_value_heads"):  # Llama-style defaults were set for the default heads
        config.num_key_value_heads = heads
    if heads and getattr(config, "head_dim", None) is not None:
        config.head_dim = config.hidden_size // heads
    config.bos_token_id, config.eos_token_id = tok.bos_token_id, tok.eos_token_id
    config.use_cache = False
    with quiet_transformers():
        model = AutoModelForCausalLM.from_config(config)
    log.info(
        "initialised a %s causal LM from scratch (%s, the vocabulary of %s)",
        config.model_type,
        arch or "default size",
        cfg.tokenizer or cfg.model,
    )
    return model, tok


class CLM(MNTP):
    """MNTP's packing and next-token loss with causal attention and nothing masked."""

    name = "clm"
    config_cls = CLMConfig  # type: ignore[assignment]
    unit_name = "sequence"

    def __init__(self, cfg: CLMConfig, mlm_model: Any, tokenizer: Any, max_len: int) -> None:
        Recipe.__init__(self, cfg, mlm_model, tokenizer, max_len)
        self.cfg: CLMConfig = cfg  # type: ignore[assignment]
        self.seq_len = min(cfg.seq_len, max_len)
        if self.seq_len < cfg.seq_len:
            log.info("seq_len lowered to %d to fit the model's positions", self.seq_len)
        decoder_tokens(tokenizer)
        self.sep_id = int(tokenizer.eos_token_id)  # between packed documents
        self.special = torch.tensor([], dtype=torch.long)  # unused: nothing is masked
        self.packing = None
        self.loss_names = ("clm",)

    @classmethod
    def load_model(cls, cfg: Any, out: Path) -> tuple[Any, Any]:
        from sentkit.models.hub import load_mlm

        if cfg.from_scratch:
            return scratch_decoder(cfg)
        model, tok = load_mlm(cfg.model, causal=True)
        decoder_tokens(tok)
        return model, tok

    def mask(self, ids: torch.Tensor, lengths: list[int], seeds: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Nothing masked: every token of a row is its own label (padding past its length is not)."""
        inside = torch.arange(ids.shape[1]).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
        return ids, ids.masked_fill(~inside, IGNORE_INDEX)

    def batch(self, store: Any, units: list[int], step: int) -> MNTPBatch:
        packed = super().batch(store, units, step)
        return MNTPBatch(
            packed.num_units,
            {"clm": packed.counts["mntp"]},
            packed.tokens,
            packed.ids,
            packed.labels,
            packed.pad_id,
            packed.padded,
            packed.mask,
        )

    def module(self) -> TrainModule:
        return MNTPModule(self.mlm_model, loss_name="clm")

    def card(self, steps: int, store: Any) -> str:
        c = self.cfg
        start = (
            f"built from scratch ({c.family or c.model} architecture{f', {c.arch()}' if c.arch() else ''}, the "
            f"vocabulary of `{c.tokenizer or c.model}`)"
            if c.from_scratch
            else f"continued from `{c.model}`"
        )
        params = sum(int(np.prod(p.shape)) for p in self.mlm_model.parameters())
        return (
            f"Causal-language-model training (next-token prediction) of a decoder {start}, {params:,} parameters, for "
            f"{steps} steps on `{c.corpus}` ({store.meta.get('num_tokens', 0):,} tokens packed into sequences of "
            f"{self.seq_len}).\n\n"
            f"- causal attention, every token but the first predicted from the output before it\n"
            f"- batch {c.batch_size} sequences, lr {c.lr} ({c.schedule}); the encoder pools {c.pooling}\n"
        )
