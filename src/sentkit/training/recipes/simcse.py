"""Unsupervised SimCSE (Gao, Yao & Chen, EMNLP 2021): each text is encoded twice, dropout is the only
augmentation, the other texts of the batch are the negatives; InfoNCE with temperature 0.05.

Pooling as in the paper: the [CLS] state with an MLP on top during training, the [CLS] state
without it afterwards (their unsupervised setting, "cls_before_pooler"); or mean pooling (no MLP).

A decoder language model (GPT-2, Llama, Qwen2, ...) trains as LLM2Vec's third step does: mean pooling, and
`dropout` (LLM2Vec: 0.3) set in every dropout of the model, since decoders such as Llama have none by default and
then give two equal views."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from sentkit.core.config import ConfigError
from sentkit.models.mlm import MaskedLM
from sentkit.models.pooling import POOLINGS
from sentkit.objectives.contrastive import info_nce
from sentkit.objectives.matryoshka import MatryoshkaSettings, matryoshka_card
from sentkit.training.batching import pad_with_labels
from sentkit.training.recipe import (
    Batch,
    Seeds,
    StepOut,
    TrainModule,
    freeze_unused,
    in_order,
)
from sentkit.training.recipes.texts import TextConfig, TextRecipe

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- config
@dataclass
class SimCSEConfig(MatryoshkaSettings, TextConfig):
    """Defaults are the paper's unsupervised BERT settings (batch 64, lr 3e-5, max length 32, one
    epoch, temperature 0.05, linear decay without warm-up, no weight decay), on the offline base."""

    pooling: str = "cls"  # any saveable pooling (sentkit.models.pooling); the paper's cls or mean
    mlp: bool = True  # with cls pooling only  # an MLP over the pooled vector during training (discarded afterwards)
    temperature: float = 0.05
    batch_size: int = 64
    lr: float = 3e-5
    weight_decay: float = 0.0
    schedule: Literal["slanted_triangular", "linear", "constant"] = "linear"
    cut_frac: float = 0.0
    dropout: float | None = None  # a decoder base: the dropout of all its layers (None: its own)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.temperature > 0:
            raise ConfigError("temperature must be positive")
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")


# ----------------------------------------------------------------------------- data and model
@dataclass
class TextBatch(Batch):
    """One token id list per text (special tokens included)."""

    seqs: list[list[int]] | None = None


class MLP(nn.Module):
    """SimCSE's training-time head: dense + tanh ([n, d] -> [n, d])."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dense = nn.Linear(dim, dim)
        self.act = nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(x))  # type: ignore[no-any-return]


class SimCSEModule(TrainModule):
    def __init__(self, mlm_model: Any, pooling: str, mlp: bool, pad_id: int) -> None:
        super().__init__()
        self.model = MaskedLM(mlm_model, pooling)
        self.mlm_model = mlm_model
        self.mlp = MLP(int(mlm_model.config.hidden_size)) if mlp and pooling == "cls" else None
        self.pad_id = pad_id
        freeze_unused(mlm_model, mlm_model.base_model)  # the MLM head takes no part

    def forward(self, batch: Batch, group: Sequence[int], seeds: Seeds) -> StepOut:
        """Texts `group`, each twice (two dropout views) -> views ([k, d], [k, d])."""
        assert isinstance(batch, TextBatch) and batch.seqs is not None
        seqs = [batch.seqs[i] for i in group] * 2  # the two views of text i are rows i and k + i
        device = next(self.parameters()).device

        def run(chunk: list[int]) -> torch.Tensor:
            ids, mask, _ = pad_with_labels([seqs[i] for i in chunk], [None] * len(chunk), self.pad_id, device)
            emb = self.model(ids, mask if len({len(seqs[i]) for i in chunk}) > 1 else None, None)[0]
            return (self.mlp(emb) if self.mlp is not None else emb).float()

        emb = in_order(self.run_chunks([len(s) for s in seqs], seeds, run), len(seqs))  # [2k, d]
        k = len(group)
        return StepOut((emb[:k], emb[k:]), {})


# ----------------------------------------------------------------------------- the method
class SimCSE(TextRecipe):
    name = "simcse"
    config_cls = SimCSEConfig

    def __init__(self, cfg: SimCSEConfig, mlm_model: Any, tokenizer: Any, max_len: int) -> None:
        super().__init__(cfg, mlm_model, tokenizer, max_len)
        self.cfg: SimCSEConfig = cfg
        self.loss_names = ("contrastive",)
        cfg.check_matryoshka_width(int(mlm_model.config.hidden_size) * POOLINGS.get(cfg.pooling).width)

    @classmethod
    def load_model(cls, cfg: Any, out: Path) -> tuple[Any, Any]:
        """The base (`Recipe.load_model`); a decoder's dropout set to `dropout` (see the module docstring)."""
        from sentkit.models.decoder import dropout_of, is_decoder_config, set_dropout

        model, tokenizer = super().load_model(cfg, out)
        if not is_decoder_config(model.config):
            if cfg.dropout is not None:
                raise ConfigError(
                    f"dropout={cfg.dropout} applies to a decoder base; this {model.config.model_type!r} masked LM "
                    "trains with the dropout of its config: leave dropout unset"
                )
        elif cfg.dropout is not None:
            set_dropout(model, cfg.dropout)
        elif dropout_of(model) == 0:
            log.warning(
                "this %r decoder has no dropout, so SimCSE's two views of a text are equal and it learns nothing: "
                "set --set dropout=0.3 (LLM2Vec's)",
                model.config.model_type,
            )
        return model, tokenizer

    @property
    def has_contrastive(self) -> bool:
        return True

    def batch(self, store: Any, units: list[int], step: int) -> TextBatch:
        seqs = [self.prefix + self.text_ids(store, u, step, 0x51).tolist() + self.suffix for u in units]
        return TextBatch(len(units), {}, 2 * sum(len(s) for s in seqs), seqs)

    def module(self) -> TrainModule:
        return SimCSEModule(self.mlm_model, self.cfg.pooling, self.cfg.mlp, self.pad_id)

    def contrastive(self, a: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return self.cfg.matryoshka_loss(partial(info_nce, temperature=self.cfg.temperature, symmetric=False), a, p)

    def encoder_settings(self) -> dict[str, Any]:
        return {"pooling": self.cfg.pooling, **self.cfg.matryoshka_marker()}

    def card(self, steps: int, store: Any) -> str:
        c = self.cfg
        return (
            f"Unsupervised SimCSE (Gao, Yao & Chen, EMNLP 2021) from `{c.model}` for {steps} steps on `{c.corpus}` "
            f"({len(store)} {c.text_unit}s of at most {c.max_len} tokens).\n\n"
            f"- pooling: {c.pooling}{' with an MLP during training only' if c.mlp and c.pooling == 'cls' else ''}; "
            f"temperature {c.temperature}; dropout as the only augmentation\n"
            f"- batch {c.batch_size} texts, lr {c.lr} ({c.schedule})\n" + matryoshka_card(c)
        )
