"""``sentkit explore``: a local web page to look at sentence embeddings.

Three views over one small JSON API: nearest corpus sentences under several models side by
side (:mod:`.core`), DeCLUTR's sampled spans on a document (:mod:`.spans_view`) and the scores
and claim verdicts of evaluation or experiment results (:mod:`.results_view`). The web layer
(:mod:`.app`, :mod:`.server`) needs the ``explore`` extra (FastAPI + uvicorn); the rest does not.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sentkit.explore.core import ExploreError, Explorer


def __getattr__(name: str) -> Any:
    """`Explorer` and `ExploreError` are imported on first use (they pull in scikit-learn), so that the
    CLI's argument parser stays light."""
    if name not in ("ExploreError", "Explorer"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module("sentkit.explore.core"), name)
    globals()[name] = value
    return value

__all__ = ["ExploreError", "Explorer"]
