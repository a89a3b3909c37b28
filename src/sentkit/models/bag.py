"""Poolings of a bag-of-vectors encoder (`sentkit.core.interface.BagOfVectors`: averaged GloVe, CBOW / SkipGram,
FastSent, wordpiece skip-gram) other than its own sum or mean, so that word-vector reference rows can be pooled as
a transformer is (`sentkit.load(name, pooling="mean+max")`, or `pooling` in a `pretrained` cell of a grid):

- ``mean``: the mean of the text's word vectors;
- ``max``: their element-wise max;
- ``mean+max``: [max, mean], concatenated (sentence-transformers' order, as the transformer pooling of that name).

A text with no known word gets zeros.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sentkit.core.config import ConfigError


def bag_mean(ids: list[list[int]], table: np.ndarray) -> np.ndarray:
    from sentkit.core.interface import sum_rows

    return sum_rows(ids, table, average=True, accumulate=np.float64)


def bag_max(ids: list[list[int]], table: np.ndarray) -> np.ndarray:
    out = np.zeros((len(ids), table.shape[1]), dtype=np.float32)
    for i, row in enumerate(ids):
        if row:
            out[i] = table[np.asarray(row)].max(axis=0)
    return out


BAG_POOLINGS: dict[str, tuple[Callable[[list[list[int]], np.ndarray], np.ndarray], int]] = {
    "mean": (bag_mean, 1),
    "max": (bag_max, 1),
    "mean+max": (lambda ids, t: np.concatenate([bag_max(ids, t), bag_mean(ids, t)], axis=1), 2),
}


class BagPooled:
    """A bag-of-vectors encoder's word vectors, pooled another way."""

    def __init__(self, base: Any, pooling: str, name: str = "") -> None:
        from sentkit.core.interface import BagOfVectors
        from sentkit.core.registry import suggest

        if pooling not in BAG_POOLINGS:
            raise ConfigError(
                f"pooling {pooling!r} does not apply to word vectors.{suggest(pooling, list(BAG_POOLINGS))} "
                f"Poolings of word vectors: {', '.join(BAG_POOLINGS)}"
            )
        if not isinstance(base, BagOfVectors):
            raise ConfigError(
                f"{name or type(base).__name__}: pooling applies to transformers and to models that "
                "average word vectors (averaged GloVe, CBOW / SkipGram, FastSent, wordpiece-skipgram)"
            )
        self.base, self.pooling, self.name = base, pooling, name or f"{type(base).__name__} ({pooling})"
        self._fn, width = BAG_POOLINGS[pooling]
        self.dim = int(base.token_table().shape[1]) * width

    def encode(self, texts: str | Sequence[str], batch_size: int = 32, *, show_progress: bool = False) -> np.ndarray:
        from sentkit.core.interface import encode_texts

        table = self.base.token_table()
        return encode_texts(
            lambda b: self._fn(self.base.token_ids(b), table),
            texts,
            batch_size,
            dim=self.dim,
            show_progress=show_progress,
            desc=f"{self.name} encode",
        )

    def fingerprint(self) -> str | None:
        from sentkit.core.interface import derived_fingerprint

        return derived_fingerprint(f"bag-pooled|{self.pooling}", self.base)
