"""Texts for methods that train on single sentences (SimCSE, TSDAE): a store of sentences, or
short spans drawn from a store of documents."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from sentkit.config import ConfigError
from sentkit.training.config import TrainConfig
from sentkit.training.recipe import StoreSpec


@dataclass
class TextConfig(TrainConfig):
    """What a text is: a sentence of the corpus (split by sentkit's sentence splitter), or a span of
    `min_tokens`..`max_len` tokens drawn uniformly from a document."""

    text_unit: Literal["sentence", "span"] = "sentence"
    min_tokens: int = 4  # shorter sentences are skipped; shortest span
    max_len: int = 32  # tokens per text, special tokens included (longer texts are truncated)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min_tokens < 1:
            raise ConfigError(f"min_tokens must be at least 1, got {self.min_tokens}")
        if self.max_len < 3:
            raise ConfigError(f"max_len must be at least 3 (two special tokens and one more), got {self.max_len}")


def text_store_spec(cfg: TextConfig, body: int) -> StoreSpec:
    """The store a text method reads: sentences of at least min_tokens, or documents long enough
    for a span; `body` is the most tokens a text may have besides the special tokens."""
    if cfg.text_unit == "sentence":
        return StoreSpec("sentence", cfg.min_tokens, None)
    return StoreSpec("document", max(cfg.min_tokens, 1), None)


def text_ids(store: Any, unit: int, cfg: TextConfig, body: int, step: int, salt: int) -> np.ndarray:
    """The token ids (no special tokens, at most `body`) of text `unit` at `step`: the sentence
    itself (truncated), or a span drawn with a generator seeded by (seed, step, unit)."""
    toks = store.doc(unit)
    if cfg.text_unit == "sentence":
        return np.asarray(toks[:body])
    rng = np.random.default_rng([cfg.seed, step, unit, salt])
    hi = min(body, len(toks))
    lo = min(cfg.min_tokens, hi)
    n = int(rng.integers(lo, hi + 1))
    start = int(rng.integers(0, len(toks) - n + 1))
    return np.asarray(toks[start : start + n])
