"""sentkit: learn universal sentence embeddings from unlabelled text and measure any encoder."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from sentkit.encoder import Encoder


def load(path_or_name: str, **kwargs: Any) -> Encoder:
    """Load an encoder: a sentkit output directory, a registry name, a HF id or a local model dir."""
    from sentkit.loading import load as _load

    return _load(path_or_name, **kwargs)


def evaluate(encoder: Any, **kwargs: Any) -> dict[str, Any]:
    """Score `encoder` (an object with `.encode` or a callable) on SentEval tasks."""
    from sentkit.evaluation import evaluate as _evaluate

    return _evaluate(encoder, **kwargs)


__all__ = ["__version__", "evaluate", "load"]
