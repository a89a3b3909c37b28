"""Masked next-token prediction (MNTP, LLM2Vec's second step) of a decoder language model on the one loop:
`sentkit train --method mntp --model DECODER`.

Sequences are packed from the token store as for `--method mlm` (the end-of-sequence token between documents) and
masked anew at every step with MLM's rule (LLM2Vec's default collator: `mlm_probability` 20 % of the tokens, of those
80 % the mask token, 10 % a random token, 10 % kept; special tokens never chosen). The decoder has no mask token:
as LLM2Vec, "_" (``mask_token=blank``), its EOS (``eos``) or a new token (``new``). A masked token at position i is
predicted from the output at position i-1 through the model's LM head (`sentkit.models.decoder.mntp_sum`), with
bidirectional attention on (``attention=bidirectional``, saved in the model's config.json). The output is the causal
LM with its head (a checkpoint to continue from) and a sentence encoder (mean pooling over every token; LLM2Vec's mean
leaves the BOS out: load it with ``--pooling mean-no-specials``). A tokenizer without an end-of-sequence token takes
the config's (`sentkit.models.decoder.ensure_eos`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from sentkit.core.config import ConfigError
from sentkit.models.decoder import check_mask_token, mntp_sum
from sentkit.objectives.mlm import IGNORE_INDEX
from sentkit.training.config import TrainConfig
from sentkit.training.recipe import Batch, Recipe, Seeds, StepOut, TrainModule
from sentkit.training.recipes.mlm import MLM, PackedBatch

log = logging.getLogger(__name__)


@dataclass
class MNTPConfig(TrainConfig):
    """LLM2Vec's MNTP settings (its train_configs/mntp: mlm_probability 0.2, mask token "_", batch 32, lr 5e-5, no
    weight decay), with packed sequences of `seq_len` tokens (LLM2Vec: 512; 128 here, for a CPU)."""

    seq_len: int = 128
    batch_size: int = 32
    mlm_probability: float = 0.2
    mask_token: str = "blank"  # blank ("_"), eos or new ("<mask>"), used when the tokenizer has no mask token
    attention: str | None = "bidirectional"
    weight_decay: float = 0.0
    schedule: Literal["slanted_triangular", "linear", "constant"] = "linear"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.seq_len < 3:
            raise ConfigError(f"seq_len must be at least 3, got {self.seq_len}")
        if not 0 < self.mlm_probability < 1:
            raise ConfigError(f"mlm_probability must be in (0, 1), got {self.mlm_probability}")
        check_mask_token(self.mask_token)


@dataclass
class MNTPBatch(PackedBatch):
    """Packed masked sequences, their labels (-100 where not masked, and at position 0, which nothing predicts) and
    the attention mask of the lone short sequence a corpus shorter than one sequence gives (None: no padding)."""

    mask: torch.Tensor | None = None


class MNTPModule(TrainModule):
    def __init__(self, lm_model: Any, loss_name: str = "mntp") -> None:
        super().__init__()
        self.loss_name = loss_name  # "clm" for `--method clm`, the same loss with nothing masked
        self.mlm_model = lm_model  # the causal LM, saved with its head at the end
        self.base = lm_model.base_model
        self.head = lm_model.get_output_embeddings()

    def forward(self, batch: Batch, group: Sequence[int], seeds: Seeds) -> StepOut:
        """The summed MNTP loss of sequences `group`, chunk by chunk (each under its own dropout seed)."""
        assert isinstance(batch, MNTPBatch) and batch.ids is not None and batch.labels is not None
        device = next(self.parameters()).device
        rows = torch.as_tensor(list(group))
        ids, labels = batch.ids[rows].to(device), batch.labels[rows].to(device)
        mask = batch.mask[rows].to(device) if batch.mask is not None else None
        parts = self.run_chunks(
            [ids.shape[1]] * len(group),
            seeds,
            lambda chunk: self.chunk_loss(ids, labels, mask, torch.as_tensor(chunk, device=device)),
        )
        return StepOut(None, {self.loss_name: torch.stack([loss for _, loss in parts]).sum()})

    def chunk_loss(
        self, ids: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor | None, rows: torch.Tensor
    ) -> torch.Tensor:
        kw = {} if mask is None else {"attention_mask": mask[rows]}
        hidden = self.base(input_ids=ids[rows], use_cache=False, **kw).last_hidden_state  # [c, L, d]
        return mntp_sum(hidden, labels[rows], self.head)[0]


class MNTP(MLM):
    """MLM's packing and masking, a decoder's causal LM, the next-token shift (see the module docstring)."""

    name = "mntp"
    config_cls = MNTPConfig  # type: ignore[assignment]  # not an MLMConfig: no vocabulary or architecture keys
    unit_name = "sequence"

    def __init__(self, cfg: MNTPConfig, mlm_model: Any, tokenizer: Any, max_len: int) -> None:
        Recipe.__init__(self, cfg, mlm_model, tokenizer, max_len)  # not MLM's: it asks for a masked LM's head
        self.cfg: MNTPConfig = cfg  # type: ignore[assignment]
        self.seq_len = min(cfg.seq_len, max_len)
        self.sep_id = int(tokenizer.eos_token_id)  # between packed documents
        self.special = torch.tensor(sorted(set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}))
        self.packing = None
        self.loss_names = ("mntp",)

    @classmethod
    def prepare(cls, cfg: Any, out: Path) -> None:
        """Nothing to prepare (MLM's trained vocabulary is for masked LMs)."""

    @classmethod
    def load_model(cls, cfg: Any, out: Path) -> tuple[Any, Any]:
        """The decoder's causal LM (with its LM head) and tokenizer, given a mask token."""
        from sentkit.models.decoder import ensure_eos, set_mask_token
        from sentkit.models.hub import load_mlm

        model, tokenizer = load_mlm(cfg.model, from_scratch=cfg.from_scratch, causal=True)
        ensure_eos(model, tokenizer)  # packed documents are separated by it (none: the config's)
        set_mask_token(model, tokenizer, cfg.mask_token)
        return model, tokenizer

    def batch(self, store: Any, units: list[int], step: int) -> MNTPBatch:
        """MLM's masked packed sequences (`MLM.batch`), position 0 unlabelled, the short sequence's mask."""
        packed = super().batch(store, units, step)
        assert packed.ids is not None and packed.labels is not None and self.packing is not None
        labels = packed.labels.clone()
        labels[:, 0] = IGNORE_INDEX  # no output before it predicts it
        mask = None
        if packed.padded:  # from lengths, never from ids: the padding token may be the EOS between documents
            extra = len(self.prefix) + len(self.suffix)
            lengths = torch.tensor([len(self.packing.sequence(u, store.tokens)) + extra for u in units])
            mask = (torch.arange(packed.ids.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)).long()
        return MNTPBatch(
            packed.num_units,
            {"mntp": float((labels != IGNORE_INDEX).sum())},
            packed.tokens,
            packed.ids,
            labels,
            packed.pad_id,
            packed.padded,
            mask,
        )

    def module(self) -> TrainModule:
        return MNTPModule(self.mlm_model)

    def encoder_settings(self) -> dict[str, Any]:
        return {"pooling": self.cfg.pooling}

    def card(self, steps: int, store: Any) -> str:
        c = self.cfg
        attention = c.attention or "the model's own"
        return (
            f"Masked next-token prediction (LLM2Vec's MNTP) of the decoder `{c.model}` for {steps} steps on "
            f"`{c.corpus}` ({store.meta.get('num_tokens', 0):,} tokens packed into sequences of {self.seq_len}).\n\n"
            f"- masking {c.mlm_probability:.0%} of tokens (80 % the mask token {self.tokenizer.mask_token!r}, 10 % "
            f"random, 10 % kept); token i predicted from the output at i-1 through the LM head\n"
            f"- attention: {attention}; batch {c.batch_size} sequences, lr {c.lr} ({c.schedule}); "
            f"the encoder pools {c.pooling}\n"
        )
