"""`sentkit.load`: dispatch a path or name to the right encoder loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sentkit.encoder import Encoder
from sentkit.methods import get_method, read_marker


def load(path_or_name: str | Path, **kwargs: Any) -> Encoder:
    """A directory saved by `sentkit train` loads with its method's loader; anything else
    (registry name, HF id, local transformers / sentence-transformers dir) loads as a
    transformer encoder with mean pooling."""
    p = Path(path_or_name)
    if p.is_dir():
        marker = read_marker(p)
        if marker is not None and marker.get("method") not in (None, "declutr", "transformer"):
            return get_method(str(marker["method"])).load(p)  # type: ignore[no-any-return]
    from sentkit.models.encoder import TransformerEncoder

    return TransformerEncoder.from_pretrained(str(path_or_name), **kwargs)
