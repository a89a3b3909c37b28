"""`sentkit.load`: dispatch a path or name to the right encoder loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sentkit.config import ConfigError
from sentkit.encoder import Encoder
from sentkit.methods import MARKER_FILE, get_method, read_marker


def load(path_or_name: str | Path, **kwargs: Any) -> Encoder:
    """A directory saved by `sentkit train` loads with its method's loader; anything else
    (registry name, HF id, local transformers / sentence-transformers dir) loads as a
    transformer encoder with mean pooling."""
    p = Path(path_or_name)
    if str(path_or_name).strip() == "":
        raise ConfigError("no model given (an empty name); pass a model directory, registry name or HF id")
    if p.is_dir():
        try:
            marker = read_marker(p)
        except (ValueError, UnicodeDecodeError) as e:
            raise ConfigError(f"model directory {p}: its {MARKER_FILE} is not valid JSON ({e}); "
                              "the directory is damaged, train or copy it again") from None
        if marker is not None and not isinstance(marker, dict):
            raise ConfigError(f"model directory {p}: its {MARKER_FILE} is not a JSON object; the directory is damaged")
        if marker is not None and marker.get("method") not in (None, "declutr", "transformer"):
            return get_method(str(marker["method"])).load(p)  # type: ignore[no-any-return]
    elif p.is_file():
        raise ConfigError(f"model {p} is a file; give the model's directory (or a registry name or HF id)")
    from sentkit.models.encoder import TransformerEncoder

    return TransformerEncoder.from_pretrained(str(path_or_name), **kwargs)
