"""Texts for methods that train on single sentences (SimCSE, TSDAE): a store of sentences, or
short spans drawn from a store of documents."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from sentkit.core.config import ConfigError
from sentkit.training.config import TrainConfig
from sentkit.training.recipe import Recipe, StoreSpec


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


class TextRecipe(Recipe):
    """Base of the methods that train on single texts: `body` is the most tokens a text keeps
    besides the special tokens; the store holds sentences or documents (for spans)."""

    unit_name = "text"

    def __init__(self, cfg: TextConfig, mlm_model: Any, tokenizer: Any, max_len: int) -> None:
        super().__init__(cfg, mlm_model, tokenizer, max_len)
        self.text_cfg = cfg
        self.body = min(cfg.max_len, max_len) - len(self.prefix) - len(self.suffix)

    def length_rule(self) -> Any:
        from sentkit.data.store import MinTokensRule

        return MinTokensRule("min_tokens")

    def store_spec(self) -> StoreSpec:
        if self.text_cfg.text_unit == "sentence":
            return StoreSpec("sentence", self.text_cfg.min_tokens, None)
        return StoreSpec("document", self.text_cfg.min_tokens, None)

    def text_ids(self, store: Any, unit: int, step: int, salt: int) -> np.ndarray:
        """The token ids (no special tokens, at most `body`) of text `unit` at `step`: the sentence
        itself (truncated), or a span drawn with a generator seeded by (seed, step, unit, salt)."""
        cfg, toks = self.text_cfg, store.doc(unit)
        if cfg.text_unit == "sentence":
            return np.asarray(toks[: self.body])
        rng = np.random.default_rng([cfg.seed, step, unit, salt])
        hi = min(self.body, len(toks))
        lo = min(cfg.min_tokens, hi)
        n = int(rng.integers(lo, hi + 1))
        start = int(rng.integers(0, len(toks) - n + 1))
        return np.asarray(toks[start : start + n])
