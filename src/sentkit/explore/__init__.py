"""``sentkit explore``: a local web page to look at sentence embeddings.

Three views over one small JSON API: nearest corpus sentences under several models side by
side (:mod:`.core`), DeCLUTR's sampled spans on a document (:mod:`.spans_view`) and the scores
and claim verdicts of evaluation or experiment results (:mod:`.results_view`). The web layer
(:mod:`.app`, :mod:`.server`) needs the ``explore`` extra (FastAPI + uvicorn); the rest does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sentkit.lazy import lazy_exports

if TYPE_CHECKING:
    from sentkit.explore.core import ExploreError, Explorer

# imported on first use: the explorer pulls in scikit-learn
__getattr__ = lazy_exports(__name__, {"ExploreError": "core", "Explorer": "core"})

__all__ = ["ExploreError", "Explorer"]
