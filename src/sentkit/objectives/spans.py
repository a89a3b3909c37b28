"""DeCLUTR span sampling on token ids (Giorgi et al. 2021, and its reference code).

Anchor length ``int(Beta(4,2) * (max-min) + min)``; positive length ``int(Beta(2,4) * (max-min) + min)``.
Anchors are placed in distinct blocks of ``max_span_len`` tokens, so they never overlap. A positive
start is uniform in ``[max(0, a_start - p_len), min(a_end, n - p_len)]`` (default strategy), so a
positive can be adjacent to, overlap or be subsumed by its anchor. ``adjacent`` and ``subsuming``
restrict that choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from sentkit.core.errors import InputError

Strategy = Literal["default", "adjacent", "subsuming"]
STRATEGIES: tuple[str, ...] = ("default", "adjacent", "subsuming")


@dataclass(frozen=True)
class SpanSettings:
    num_anchors: int = 2
    num_positives: int = 2
    min_span_len: int = 32
    max_span_len: int = 512
    strategy: Strategy = "default"

    def __post_init__(self) -> None:
        if self.num_anchors < 1 or self.num_positives < 1:
            raise InputError("num_anchors and num_positives must be at least 1")
        if not 1 <= self.min_span_len <= self.max_span_len:
            raise InputError(f"need 1 <= min_span_len <= max_span_len, got {self.min_span_len} and {self.max_span_len}")
        if self.strategy not in STRATEGIES:
            raise InputError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}")

    @property
    def min_doc_tokens(self) -> int:
        """The paper's rule for a usable document: num_anchors * max_span_len * 2 tokens."""
        return self.num_anchors * self.max_span_len * 2


@dataclass(frozen=True)
class Span:
    start: int
    end: int  # exclusive

    def __len__(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class DocSpans:
    anchors: list[Span]  # A spans
    positives: list[list[Span]]  # A lists of P spans


def _beta_len(rng: np.random.Generator, a: float, b: float, lo: int, hi: int) -> int:
    return int(rng.beta(a, b) * (hi - lo) + lo)


def sample_spans(num_tokens: int, cfg: SpanSettings, rng: np.random.Generator) -> DocSpans:
    """Sample A anchors and A*P positives from a document of `num_tokens` tokens."""
    n, lo, hi, num_a = num_tokens, cfg.min_span_len, cfg.max_span_len, cfg.num_anchors
    if n < cfg.min_doc_tokens:
        raise InputError(
            f"document has {n} tokens; needs at least num_anchors * max_span_len * 2 = {cfg.min_doc_tokens}"
        )
    # Anchor blocks: starts of non-overlapping windows of max_span_len tokens.
    blocks = list(range(0, n - hi + 1, hi))
    anchors: list[Span] = []
    positives: list[list[Span]] = []
    for i in range(num_a):
        a_len = _beta_len(rng, 4, 2, lo, hi)
        left = num_a - i
        if len(blocks) // left < left:  # few blocks left: take one at an edge (reference behaviour)
            b = int(rng.choice([0, len(blocks) - 1]))
        else:
            b = int(rng.integers(len(blocks)))
        a_start = int(rng.integers(blocks[b], blocks[b] + hi - a_len + 1))
        del blocks[max(0, b - 1) : b + 2]  # the block and its neighbours
        a_end = a_start + a_len
        anchors.append(Span(a_start, a_end))
        positives.append([_positive(n, a_start, a_end, cfg, rng) for _ in range(cfg.num_positives)])
    return DocSpans(anchors, positives)


def _positive(n: int, a_start: int, a_end: int, cfg: SpanSettings, rng: np.random.Generator) -> Span:
    lo, hi = cfg.min_span_len, cfg.max_span_len
    if cfg.strategy == "subsuming":
        p_len = _beta_len(rng, 2, 4, lo, a_end - a_start)
        start = int(rng.integers(a_start, a_end - p_len + 1))
    elif cfg.strategy == "adjacent":
        room = max(a_start, n - a_end)
        max_len = min(hi, room)
        if max_len < lo:
            raise InputError(f"no room for an adjacent positive of at least {lo} tokens")
        p_len = _beta_len(rng, 2, 4, lo, max_len)
        starts = []
        if a_start - p_len >= 0:
            starts.append(a_start - p_len)
        if a_end + p_len <= n:
            starts.append(a_end)
        start = int(starts[int(rng.integers(len(starts)))])
    else:
        p_len = _beta_len(rng, 2, 4, lo, hi)
        start = int(rng.integers(max(0, a_start - p_len), min(a_end, n - p_len) + 1))
    return Span(start, start + p_len)


def relation(anchor: Span, positive: Span) -> str:
    """How a positive sits relative to its anchor: subsumed, adjacent, overlapping or disjoint."""
    if anchor.start <= positive.start and positive.end <= anchor.end:
        return "subsumed"
    if positive.end == anchor.start or positive.start == anchor.end:
        return "adjacent"
    if positive.start < anchor.end and anchor.start < positive.end:
        return "overlapping"
    return "disjoint"
