"""The DeCLUTR run configuration (validated on construction)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from sentkit.config import ConfigError
from sentkit.models.hub import DEFAULT_MODEL
from sentkit.models.pooling import POOLINGS
from sentkit.objectives.spans import STRATEGIES, SpanSettings

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- config
@dataclass
class DeclutrConfig:
    """Every setting of a DeCLUTR run. Defaults are the paper's, except the offline base model."""

    corpus: str
    out: str
    model: str = DEFAULT_MODEL  # registry name, local directory or Hugging Face id
    from_scratch: bool = False  # random initialisation from the model's config
    text_field: str = "text"  # .jsonl / .parquet / HF dataset column
    corpus_fraction: float = 1.0  # train on this share of the usable documents (data-size studies)
    max_doc_tokens: int | None = None  # split longer documents (books) into pieces of this size
    prepared_dir: str | None = None  # where to prepare (or reuse) the token store; None: <out>/prepared
    # spans
    num_anchors: int = 2
    num_positives: int = 2
    min_span_len: int = 32
    max_span_len: int = 512
    strategy: Literal["default", "adjacent", "subsuming"] = "default"
    # objective
    pooling: Literal["mean", "cls"] = "mean"
    temperature: float = 0.05
    contrastive: bool = True
    mlm: bool = True
    mlm_probability: float = 0.15
    # optimisation
    batch_size: int = 16  # documents per optimizer step (all ranks, all accumulation steps)
    grad_accum: int = 1  # micro-batches per step
    grad_cache: bool = False  # keep the negative pool = whole effective batch under accumulation
    lr: float = 5e-5
    weight_decay: float = 0.1
    cut_frac: float = 0.1
    lr_ratio: float = 32.0
    max_grad_norm: float = 1.0
    epochs: int = 1
    max_steps: int | None = None  # overrides epochs
    token_budget: int | None = None  # padded tokens per forward chunk; None: 1024 on CPU, 16384 on GPU
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    device: str = "auto"
    seed: int = 0
    # bookkeeping
    checkpoint_every: int = 100
    log_every: int = 10
    logger: Literal["csv", "tensorboard"] = "csv"
    resume: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        if self.pooling not in POOLINGS:
            raise ConfigError(f"pooling must be one of {POOLINGS.names()}, got {self.pooling!r}")
        if not (self.contrastive or self.mlm):
            raise ConfigError("at least one of contrastive and mlm must be on")
        for name in ("num_anchors", "num_positives", "min_span_len", "batch_size", "grad_accum", "epochs", "checkpoint_every", "log_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.min_span_len > self.max_span_len:
            raise ConfigError(f"min_span_len ({self.min_span_len}) exceeds max_span_len ({self.max_span_len})")
        if self.batch_size % self.grad_accum:
            raise ConfigError(f"batch_size ({self.batch_size}) must be divisible by grad_accum ({self.grad_accum})")
        if self.token_budget is not None and self.token_budget < 1:
            raise ConfigError("token_budget must be at least 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError("max_steps must be at least 1")
        if not self.temperature > 0:
            raise ConfigError("temperature must be positive")
        if not 0 < self.mlm_probability < 1:
            raise ConfigError("mlm_probability must be in (0, 1)")

    def spans(self, max_len: int | None = None) -> SpanSettings:
        hi = min(self.max_span_len, max_len) if max_len else self.max_span_len
        return SpanSettings(self.num_anchors, self.num_positives, min(self.min_span_len, hi), hi, self.strategy)
