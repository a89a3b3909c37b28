from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sentkit.hill.noise import add_noise

tokens_st = st.lists(st.integers(0, 1000), min_size=0, max_size=40)


@settings(max_examples=100, deadline=None)
@given(tokens_st, st.integers(0, 2**32 - 1))
def test_no_noise_is_identity(tokens: list[int], seed: int) -> None:
    assert add_noise(tokens, 0.0, 0.0, np.random.default_rng(seed)) == tokens


@settings(max_examples=100, deadline=None)
@given(tokens_st, st.floats(0.0, 0.95), st.integers(0, 2**32 - 1))
def test_deletion_only_gives_a_subsequence(tokens: list[int], p: float, seed: int) -> None:
    out = add_noise(tokens, p, 0.0, np.random.default_rng(seed))
    it = iter(tokens)
    assert all(any(x == y for y in it) for x in out)  # subsequence check
    assert (len(out) >= 1) == (len(tokens) >= 1)


@settings(max_examples=100, deadline=None)
@given(tokens_st, st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))
def test_swaps_only_permute_non_overlapping_bigrams(tokens: list[int], p: float, seed: int) -> None:
    out = add_noise(tokens, 0.0, p, np.random.default_rng(seed))
    assert Counter(out) == Counter(tokens)
    for i in range(0, len(tokens) - 1, 2):
        assert (out[i], out[i + 1]) in ((tokens[i], tokens[i + 1]), (tokens[i + 1], tokens[i]))
    if len(tokens) % 2:
        assert out[-1] == tokens[-1]
    if p == 1.0:  # every bigram swapped
        assert out[: len(tokens) // 2 * 2 : 2] == tokens[1 : len(tokens) // 2 * 2 : 2]


def test_rates_match_probabilities() -> None:
    rng = np.random.default_rng(0)
    toks = list(range(20))
    kept = np.mean([len(add_noise(toks, 0.3, 0.0, rng)) for _ in range(3000)]) / 20
    assert kept == pytest.approx(0.7, abs=0.01)
    swapped = np.mean([add_noise(toks, 0.0, 0.25, rng)[0] == 1 for _ in range(4000)])
    assert swapped == pytest.approx(0.25, abs=0.02)


def test_pure_and_seeded() -> None:
    toks = ["a", "b", "c", "d", "e"]
    a = add_noise(toks, 0.1, 0.1, np.random.default_rng(3))
    b = add_noise(toks, 0.1, 0.1, np.random.default_rng(3))
    assert a == b and toks == ["a", "b", "c", "d", "e"]
    with pytest.raises(ValueError):
        add_noise(toks, 1.0, 0.0, np.random.default_rng(0))
