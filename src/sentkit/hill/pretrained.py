"""GloVe-50d helpers for the models that use pre-trained word vectors (wrapping
``sentkit.models.wordvectors``): lookup tables aligned with a vocabulary."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from sentkit.data.sentences import Vocabulary


@functools.lru_cache(maxsize=2)
def _glove(root: str | None) -> tuple[dict[str, int], np.ndarray]:
    from sentkit.models.wordvectors import load_glove

    g = load_glove(root)
    return {w: i for i, w in enumerate(g.words)}, g.vectors


def glove_table(root: str | None = None) -> tuple[dict[str, int], np.ndarray]:
    """(word -> row, float32 [400000, 50]) of GloVe-6B-50d (cached per process)."""
    return _glove(root)


def glove_rows(words: Sequence[str], root: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """GloVe vectors of ``words``: (float32 [n, 50] with zero rows for missing words,
    bool [n] found mask)."""
    index, vectors = glove_table(root)
    rows = np.array([index.get(w, -1) for w in words], dtype=np.int64)
    found = rows >= 0
    out = np.zeros((len(words), vectors.shape[1]), dtype=np.float32)
    out[found] = vectors[rows[found]]
    return out, found


def glove_vocabulary(specials: Sequence[str], root: str | None = None) -> tuple[Vocabulary, np.ndarray]:
    """A Vocabulary of ``specials`` + every GloVe word, and its table [len, 50]
    (zero rows for the specials). Cached per process: treat both as read-only."""
    return _glove_vocabulary(tuple(specials), root)


@functools.lru_cache(maxsize=4)
def _glove_vocabulary(specials: tuple[str, ...], root: str | None) -> tuple[Vocabulary, np.ndarray]:
    index, vectors = glove_table(root)
    sp = set(specials)
    words = [w for w in sorted(index, key=index.__getitem__) if w not in sp]
    v = Vocabulary(specials=specials)
    v.words_ = [*specials, *words]
    v.counts_ = np.zeros(len(v.words_), dtype=np.int64)
    v.index_ = {w: i for i, w in enumerate(v.words_)}
    table = np.zeros((len(v.words_), vectors.shape[1]), dtype=np.float32)
    table[len(specials) :] = vectors[[index[w] for w in words]]
    return v, table
