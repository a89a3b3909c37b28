"""The SDAE noise function N(S | p_o, p_x) of Hill et al. (2016)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from sentkit.core.errors import InputError

T = TypeVar("T")


def add_noise(tokens: Sequence[T], p_drop: float, p_swap: float, rng: np.random.Generator) -> list[T]:
    """Corrupt a sentence: delete each word independently with probability ``p_drop``
    (p_o), then swap each non-overlapping bigram (w_1 w_2, w_3 w_4, ...) of what is left
    with probability ``p_swap`` (p_x). A non-empty sentence never comes back empty: if
    every word was deleted, one word drawn uniformly is kept. Pure: ``rng`` is the only
    source of randomness and ``tokens`` is not modified."""
    if not (0.0 <= p_drop < 1.0 and 0.0 <= p_swap <= 1.0):
        raise InputError(f"need 0 <= p_drop < 1 and 0 <= p_swap <= 1, got {p_drop}, {p_swap}")
    n = len(tokens)
    if n == 0:
        return []
    if p_drop > 0:
        keep = rng.random(n) >= p_drop
        out = [t for t, k in zip(tokens, keep) if k]
        if not out:
            out = [tokens[int(rng.integers(n))]]
    else:
        out = list(tokens)
    if p_swap > 0 and len(out) > 1:
        swaps = rng.random(len(out) // 2) < p_swap
        for b in np.flatnonzero(swaps):
            i = 2 * int(b)
            out[i], out[i + 1] = out[i + 1], out[i]
    return out
