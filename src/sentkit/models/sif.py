"""SIF: smooth inverse frequency weighting of word vectors with the first principal component removed
(Arora, Liang and Ma, ICLR 2017, "A simple but tough-to-beat baseline for sentence embeddings"), fitted on
the user's own corpus, for any encoder that averages rows of one table (`sentkit.core.interface.BagOfVectors`:
averaged GloVe, CBOW / SkipGram, FastSent, wordpiece skip-gram).

The maths (pure functions): a word w of corpus probability p(w) weighs a / (a + p(w)); a sentence is the
weighted mean of its word vectors, (1/|s|) sum_w a / (a + p(w)) v_w (the paper's Algorithm 1 and its code,
which divides by the number of words); the first singular vector u of the matrix of those vectors over a
corpus sample (not centred, as the paper's code) is removed, v - u u^T v.

The method that fits it on a corpus and saves it (`sentkit train --method sif`) is `sentkit.training.sif`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sentkit.core.config import ConfigError
from sentkit.core.errors import InputError


# ----------------------------------------------------------------------------- the maths
def sif_weights(counts: np.ndarray, a: float = 1e-3) -> np.ndarray:
    """a / (a + p(w)) per row of the table, p(w) = counts / counts.sum(); float32 [V]. A word the corpus
    lacks has p = 0 and weight 1 (the paper's code gives words missing from its frequency file 1.0)."""
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1 or (c < 0).any():
        raise InputError("counts must be a 1-d array of non-negative numbers")
    if a <= 0:
        raise InputError(f"a must be positive, got {a}")
    total = c.sum()
    p = c / total if total > 0 else c
    return (a / (a + p)).astype(np.float32)


def weighted_average(ids: list[list[int]], table: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per list of rows: (1/len) sum_i weights[i] table[i]; zeros for an empty list. float32 [n, dim]."""
    from sentkit.core.interface import sum_rows

    return sum_rows(ids, table * weights[:, None], average=True, accumulate=np.float64)


def first_components(x: np.ndarray, k: int = 1) -> np.ndarray:
    """The first k right singular vectors of x [n, d] (rows not centred), float32 [k, d]."""
    x64 = np.asarray(x, dtype=np.float64)
    if x64.ndim != 2 or len(x64) < 1 or not 0 <= k <= x64.shape[1]:
        raise InputError(f"need a matrix [n >= 1, d >= k], got {x64.shape} with k = {k}")
    s, u = np.linalg.eigh(x64.T @ x64)  # x^T x = V S^2 V^T, ascending
    return u[:, np.argsort(s)[::-1][:k]].T.astype(np.float32)


def remove_components(x: np.ndarray, pcs: np.ndarray) -> np.ndarray:
    """x - x pcs^T pcs: each row without its projection on the (orthonormal) rows of pcs; float32."""
    x64 = np.asarray(x, dtype=np.float64)
    p = np.asarray(pcs, dtype=np.float64)
    return (x64 - (x64 @ p.T) @ p).astype(np.float32)


# ----------------------------------------------------------------------------- an encoder, SIF-weighted
class SIF:
    """A bag-of-vectors encoder's words SIF-weighted, first component(s) removed."""

    def __init__(self, base: Any, weights: np.ndarray, pcs: np.ndarray, name: str = "sif") -> None:
        from sentkit.core.interface import BagOfVectors

        if not isinstance(base, BagOfVectors):
            raise ConfigError(
                f"{name}: SIF needs an encoder that averages word vectors (averaged GloVe, CBOW / "
                f"SkipGram, FastSent, wordpiece-skipgram), got {type(base).__name__}"
            )
        table = base.token_table()
        if weights.shape != (len(table),) or pcs.shape[1:] != (table.shape[1],):
            raise ConfigError(
                f"{name}: the saved weights {weights.shape} / components {pcs.shape} do not fit the "
                f"base's table {table.shape}; fit the SIF again"
            )
        self.base, self.weights, self.pcs, self.name = base, weights, pcs, name
        self._table = table

    @property
    def dim(self) -> int:
        return int(self._table.shape[1])

    def raw(self, texts: list[str]) -> np.ndarray:
        """The weighted averages before component removal, float32 [n, dim]."""
        return weighted_average(self.base.token_ids(texts), self._table, self.weights)

    def encode(self, texts: str | Sequence[str], batch_size: int = 32, *, show_progress: bool = False) -> np.ndarray:
        from sentkit.core.interface import encode_texts

        return encode_texts(
            lambda b: remove_components(self.raw(b), self.pcs),
            texts,
            batch_size,
            dim=self.dim,
            show_progress=show_progress,
            desc=f"{self.name} encode",
        )

    def fingerprint(self) -> str | None:
        from sentkit.core.interface import derived_fingerprint

        return derived_fingerprint("sif", self.base, self.weights, self.pcs)
