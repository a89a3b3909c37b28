from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sentkit.objectives.spans import Span, SpanSettings, relation, sample_spans


@st.composite
def setups(draw: st.DrawFn) -> tuple[int, SpanSettings, int]:
    lo = draw(st.integers(1, 40))
    hi = draw(st.integers(lo, 120))
    a = draw(st.integers(1, 4))
    p = draw(st.integers(1, 4))
    strategy = draw(st.sampled_from(["default", "adjacent", "subsuming"]))
    cfg = SpanSettings(a, p, lo, hi, strategy)
    n = draw(st.integers(cfg.min_doc_tokens, cfg.min_doc_tokens * 3))
    seed = draw(st.integers(0, 2**32 - 1))
    return n, cfg, seed


@settings(max_examples=300, deadline=None)
@given(setups())
def test_span_properties(setup: tuple[int, SpanSettings, int]) -> None:
    n, cfg, seed = setup
    s = sample_spans(n, cfg, np.random.default_rng(seed))
    assert len(s.anchors) == cfg.num_anchors
    assert all(len(ps) == cfg.num_positives for ps in s.positives)
    for a, ps in zip(s.anchors, s.positives):
        assert cfg.min_span_len <= len(a) <= cfg.max_span_len
        assert 0 <= a.start < a.end <= n
        for p in ps:
            assert cfg.min_span_len <= len(p) <= cfg.max_span_len
            assert 0 <= p.start < p.end <= n
            rel = relation(a, p)
            # within reach: positives touch or overlap their anchor
            assert rel != "disjoint"
            if cfg.strategy == "subsuming":
                assert rel == "subsumed"
                assert len(p) <= len(a)
            if cfg.strategy == "adjacent":
                assert rel == "adjacent"
    # anchors never overlap each other
    ordered = sorted(s.anchors, key=lambda x: x.start)
    for x, y in itertools.pairwise(ordered):
        assert x.end <= y.start


def test_seeded_generator_reproduces() -> None:
    cfg = SpanSettings()
    a = sample_spans(5000, cfg, np.random.default_rng(7))
    b = sample_spans(5000, cfg, np.random.default_rng(7))
    c = sample_spans(5000, cfg, np.random.default_rng(8))
    assert a == b
    assert a != c


def test_length_distributions_follow_beta() -> None:
    """Anchor lengths ~ Beta(4,2) (mean 2/3 of the range), positives ~ Beta(2,4) (mean 1/3)."""
    cfg = SpanSettings(1, 1, 32, 512)
    rng = np.random.default_rng(0)
    samples = [sample_spans(4000, cfg, rng) for _ in range(3000)]
    a = np.array([len(s.anchors[0]) for s in samples])
    p = np.array([len(s.positives[0][0]) for s in samples])
    assert abs((a.mean() - 32) / 480 - 2 / 3) < 0.02
    assert abs((p.mean() - 32) / 480 - 1 / 3) < 0.02
    # default strategy yields all three relations
    rels = {relation(s.anchors[0], s.positives[0][0]) for s in samples}
    assert {"adjacent", "overlapping", "subsumed"} <= rels


def test_positive_start_uniform_range() -> None:
    """The positive start is uniform on [max(0, a_start - p_len), min(a_end, n - p_len)]."""
    cfg = SpanSettings(1, 1, 10, 10)  # fixed lengths: anchor 10, positive 10
    n = 40
    rng = np.random.default_rng(1)
    offs = []
    for _ in range(4000):
        s = sample_spans(n, cfg, rng)
        a, p = s.anchors[0], s.positives[0][0]
        lo, hi = max(0, a.start - 10), min(a.end, n - 10)
        assert lo <= p.start <= hi
        if a.start >= 10 and a.end <= n - 10:
            offs.append(p.start - a.start)
    counts = np.bincount(np.asarray(offs) + 10, minlength=21)
    assert counts.min() > 0.6 * counts.mean()  # all 21 offsets, roughly equally often


def test_short_document_rejected() -> None:
    with pytest.raises(ValueError, match="num_anchors \\* max_span_len \\* 2"):
        sample_spans(100, SpanSettings(2, 2, 8, 32), np.random.default_rng(0))


def test_relation_labels() -> None:
    a = Span(10, 20)
    assert relation(a, Span(12, 18)) == "subsumed"
    assert relation(a, Span(20, 25)) == "adjacent"
    assert relation(a, Span(5, 10)) == "adjacent"
    assert relation(a, Span(15, 25)) == "overlapping"
    assert relation(a, Span(30, 35)) == "disjoint"
