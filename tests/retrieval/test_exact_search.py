"""Exact search in blocks (sentkit.retrieval.neighbours.exact_top_k and its callers) against a stable full sort of
the whole score matrix (numpy): ties rank the lower row first, k past the row count, every block size;
and its memory, traced by tracemalloc, bounded whatever the number of queries and rows."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from sentkit.retrieval import index as vindex
from sentkit.retrieval.neighbours import NeighbourIndex, exact_top_k, top_k

BLOCKS = [(1, 1), (2, 3), (3, 7), (5, 64), (256, 4096)]  # (query_block, row_block)


def tied(n: int, d: int = 16, seed: int = 0) -> np.ndarray:
    """Unit rows of four entries +-0.5 (the rest 0): every cosine is a multiple of 1/4, computed
    exactly in any order, so most scores tie."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, d), np.float32)
    cols = np.argsort(rng.random((n, d)), axis=1)[:, :4]
    np.put_along_axis(x, cols, rng.choice([-0.5, 0.5], (n, 4)).astype(np.float32), axis=1)
    return x


def oracle(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best of each row by a stable sort of the whole row: ties by index, NaN last."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(scores, order, axis=1)


def assert_same(got: tuple[np.ndarray, np.ndarray], want: tuple[np.ndarray, np.ndarray]) -> None:
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[0].dtype == np.int64 and got[1].dtype == np.float32


@pytest.mark.parametrize("k", [1, 5, 50, 57])  # 50 rows: k = n and k > n
def test_blocked_search_equals_the_full_sort_with_ties(k: int) -> None:
    x, q = tied(50), tied(9, seed=1)
    x[10] = x[3]  # a duplicate row: equal scores everywhere
    want = oracle(q @ x.T, k)
    scale = np.float32(2.0) ** np.arange(-2, 3, dtype=np.float32)[np.arange(50) % 5, None]  # exact to undo
    for qb, rb in BLOCKS:
        assert_same(top_k(q @ x.T, k, query_block=qb, row_block=rb), want)
        assert_same(exact_top_k(q, x, k, query_block=qb, row_block=rb), want)
        assert_same(exact_top_k(q, x * scale, k, normalise=True, query_block=qb, row_block=rb), want)
        assert_same(exact_top_k(sp.csr_matrix(q), sp.csr_matrix(x), k, query_block=qb, row_block=rb), want)
        assert_same(vindex.exact_search(x * scale, q * 4, k, query_block=qb, row_block=rb), want)


def test_top_k_ranks_nan_last_and_keeps_the_scores_dtype_for_ranking() -> None:
    s = np.array([[0.5, np.nan, 0.5, 1.0, np.nan, 0.5], [np.nan] * 6])
    s[0, 5] += 1e-12  # apart in float64 only: ranked by it, returned as float32
    for qb, rb in BLOCKS:
        i, v = top_k(s, 5, query_block=qb, row_block=rb)
        np.testing.assert_array_equal(i, oracle(s, 5)[0])
        np.testing.assert_array_equal(v, oracle(s, 5)[1].astype(np.float32))


def test_neighbour_index_search_dense_and_sparse_equals_the_full_sort() -> None:
    x, q = tied(300, seed=2), tied(20, seed=3)
    want = oracle(q @ x.T, 10)
    assert_same(NeighbourIndex([str(i) for i in range(300)], x).search(q * 2, 10), want)
    sparse = NeighbourIndex([str(i) for i in range(300)], sp.csr_matrix(x), sparse=True)
    assert_same(sparse.search(sp.csr_matrix(q * 2), 10), want)


def test_exact_search_memory_is_bounded_whatever_the_queries_and_rows() -> None:
    """2000 queries x 50k rows: the full score matrix alone would be 400 MB (float32); the blocked search
    stays under 32 MiB, a bound set by the blocks, not by m x n."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((50_000, 16), dtype=np.float32)
    q = rng.standard_normal((2000, 16), dtype=np.float32)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        i, s = vindex.exact_search(x, q, 10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    qn = q[:40] / np.linalg.norm(q[:40], axis=1, keepdims=True)
    want_i, want_s = oracle(qn @ xn.T, 10)
    np.testing.assert_array_equal(i[:40], want_i)  # a search, not a shortcut
    np.testing.assert_allclose(s[:40], want_s, atol=1e-6)
