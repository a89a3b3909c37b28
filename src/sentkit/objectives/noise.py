"""TSDAE's input noise: delete whole words (Wang, Reimers & Gurevych 2021; deletion ratio 0.6)."""

from __future__ import annotations

import numpy as np


def word_ids(ids: np.ndarray, continues: np.ndarray) -> np.ndarray:
    """The word number of every token: a token whose id is marked in `continues` [V] (a WordPiece
    "##" piece, a BPE piece without a leading space) belongs to the word before it."""
    starts = ~continues[ids]
    if starts.size:
        starts[0] = True
    return np.cumsum(starts) - 1


def delete_words(ids: np.ndarray, words: np.ndarray, ratio: float, rng: np.random.Generator) -> np.ndarray:
    """Keep each word with probability 1 - `ratio` (all its tokens together); at least one word
    always stays, as in TSDAE's reference code. ids, words [n] -> kept ids [m], 1 <= m <= n."""
    if ids.size == 0:
        return ids
    n_words = int(words[-1]) + 1
    keep = rng.random(n_words) >= ratio
    if not keep.any():
        keep[rng.integers(n_words)] = True
    return ids[keep[words]]
