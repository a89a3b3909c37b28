"""The Spans view: DeCLUTR's sampled anchors, positives and in-batch negatives on one document,
located in the original text (what ``sentkit spans`` prints, with character offsets).

Sampling is :func:`sentkit.objectives.spans.sample_spans` on the token ids of the model's fast
tokenizer, exactly as training sees them; each token span is mapped back to the characters it
came from through the tokenizer's offset mapping.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from sentkit.core.errors import SentkitError
from sentkit.objectives.spans import Span, SpanSettings, relation, sample_spans

CONTEXT_TOKENS = 24  # tokens of text shown around an anchor and its positives


class SpanViewError(SentkitError, ValueError):
    """The document or the settings cannot give spans; the message says how to fix it."""


@dataclass
class Tokenized:
    """A text, its token ids and each token's character range."""

    text: str
    ids: list[int]
    offsets: list[tuple[int, int]]

    def chars(self, span: Span) -> tuple[int, int]:
        return self.offsets[span.start][0], self.offsets[span.end - 1][1]

    def piece(self, span: Span) -> str:
        a, b = self.chars(span)
        return self.text[a:b]


def tokenize_text(text: str, tokenizer: Any) -> Tokenized:
    """Token ids without special tokens (as training prepares documents) and their offsets."""
    from sentkit.core.logs import quiet_transformers

    if not getattr(tokenizer, "is_fast", False):
        raise SpanViewError("the spans view needs a fast tokenizer (for character offsets)")
    with quiet_transformers():
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return Tokenized(text, list(enc["input_ids"]), [(int(a), int(b)) for a, b in enc["offset_mapping"]])


def settings_from(values: dict[str, Any]) -> SpanSettings:
    """SpanSettings from the page's fields; a bad value is a SpanViewError in words."""
    try:
        return SpanSettings(
            int(values.get("num_anchors", 2)),
            int(values.get("num_positives", 2)),
            int(values.get("min_span_len", 32)),
            int(values.get("max_span_len", 512)),
            values.get("strategy", "default"),
        )
    except (TypeError, ValueError) as e:
        raise SpanViewError(f"span settings: {e}") from None


def _too_short(n: int, cfg: SpanSettings) -> str:
    fit = n // (2 * cfg.num_anchors)
    if fit < 1:
        fix = "pick a longer document"
    elif fit < cfg.min_span_len:
        fix = f"set both span lengths to {fit} tokens or less, or pick a longer document"
    else:
        fix = f"set the maximum span length to {fit} tokens or less"
    return (
        f"this document has {n:,} tokens; {cfg.num_anchors} anchors of up to {cfg.max_span_len} tokens need "
        f"{cfg.min_doc_tokens:,} (num_anchors × max_span_len × 2, the paper's rule): {fix}"
    )


def _segments(doc: Tokenized, region: Span, anchor: Span, positives: list[Span]) -> list[dict[str, Any]]:
    """The region's text cut wherever a span starts or ends; each piece says which spans hold it."""
    r0, r1 = doc.chars(region)
    spans = [doc.chars(anchor), *[doc.chars(p) for p in positives]]
    cuts = sorted({r0, r1, *[max(r0, min(r1, c)) for s in spans for c in s]})
    out = []
    for a, b in itertools.pairwise(cuts):
        if b <= a:
            continue
        inside = [i for i, (s, e) in enumerate(spans) if s <= a and b <= e]
        out.append({"text": doc.text[a:b], "anchor": 0 in inside, "positives": [i - 1 for i in inside if i > 0]})
    return out


def _span(doc: Tokenized, s: Span, **extra: Any) -> dict[str, Any]:
    return {
        "start": s.start,
        "end": s.end,
        "tokens": len(s),
        "chars": list(doc.chars(s)),
        "text": doc.piece(s),
        **extra,
    }


def span_view(doc: Tokenized, cfg: SpanSettings, seed: int = 0, other: Tokenized | None = None) -> dict[str, Any]:
    """Anchors with their positives (and how each sits: adjacent / overlapping / subsumed), the
    hard negatives (the document's other anchors) and an easy negative (a span of another
    document, as ``sentkit spans`` draws it), each with its text and character range."""
    n = len(doc.ids)
    if n < cfg.min_doc_tokens:
        raise SpanViewError(_too_short(n, cfg))
    rng = np.random.default_rng(seed)
    try:
        s = sample_spans(n, cfg, rng)
    except ValueError as e:
        raise SpanViewError(str(e)) from None
    anchors = []
    for a_i, (a, ps) in enumerate(zip(s.anchors, s.positives)):
        lo = max(0, min(a.start, *[p.start for p in ps]) - CONTEXT_TOKENS)
        hi = min(n, max(a.end, *[p.end for p in ps]) + CONTEXT_TOKENS)
        item: dict[str, Any] = {
            **_span(doc, a, index=a_i),
            "positives": [_span(doc, p, relation=relation(a, p)) for p in ps],
            "hard_negatives": [_span(doc, h, index=j) for j, h in enumerate(s.anchors) if j != a_i],
            "region": {
                "chars": list(doc.chars(Span(lo, hi))),
                "before": lo > 0,
                "after": hi < n,
                "segments": _segments(doc, Span(lo, hi), a, ps),
            },
            "easy_negative": None,
        }
        if other is not None and len(other.ids) > 0:
            start = int(rng.integers(0, max(1, len(other.ids) - len(a))))
            item["easy_negative"] = _span(other, Span(start, min(len(other.ids), start + len(a))))
        anchors.append(item)
    return {
        "tokens": n,
        "settings": {
            "num_anchors": cfg.num_anchors,
            "num_positives": cfg.num_positives,
            "min_span_len": cfg.min_span_len,
            "max_span_len": cfg.max_span_len,
            "strategy": cfg.strategy,
        },
        "seed": seed,
        "min_doc_tokens": cfg.min_doc_tokens,
        "anchors": anchors,
    }
