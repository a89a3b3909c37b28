"""``sentkit explore``: a local web page to look at sentence embeddings.

Three views over one small JSON API: nearest corpus sentences under several models side by
side (:mod:`.core`), DeCLUTR's sampled spans on a document (:mod:`.spans_view`) and the scores
and claim verdicts of evaluation or experiment results (:mod:`.results_view`). The web layer
(:mod:`.app`, :mod:`.server`) needs the ``explore`` extra (FastAPI + uvicorn); the rest does not.
"""

from __future__ import annotations

from sentkit.explore.core import ExploreError, Explorer

__all__ = ["ExploreError", "Explorer"]
