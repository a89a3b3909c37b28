"""Objectives room: span sampling, contrastive loss and masked-LM masking (pure functions)."""

from sentkit.objectives.contrastive import info_nce
from sentkit.objectives.mlm import mask_tokens
from sentkit.objectives.spans import DocSpans, Span, SpanSettings, sample_spans

__all__ = ["DocSpans", "Span", "SpanSettings", "info_nce", "mask_tokens", "sample_spans"]
