"""``sentkit explore``: a local web page to look at sentence embeddings.

Three views over one small JSON API: nearest corpus sentences under several models side by
side (:mod:`.core`), DeCLUTR's sampled spans on a document (:mod:`.spans_view`) and the scores
and claim verdicts of evaluation or experiment results (:mod:`.results_view`). The web layer
(:mod:`.app`: the per-start token, the Host check and the size caps; :mod:`.server`) needs the ``explore`` extra
(FastAPI + uvicorn); the rest does not. :mod:`.trust` holds the rule for models added from the page
(nothing that runs code or unpickles a file), :mod:`.reading` the rule for paths a request names
(regular files and folders only, read within a time bound).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sentkit.core.lazy import lazy_exports

if TYPE_CHECKING:
    from sentkit.explore.core import ExploreError, Explorer

# imported on first use: the explorer pulls in scikit-learn
__getattr__ = lazy_exports(__name__, {"ExploreError": "core", "Explorer": "core"})

__all__ = ["ExploreError", "Explorer"]
