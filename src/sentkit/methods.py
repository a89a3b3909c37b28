"""The registry of every training method, transformer or not: `sentkit train --method NAME`, the
experiment grids and `sentkit.load` (for a saved folder) look names up here. The transformer
recipes (sentkit.training.recipes), the Hill et al. models (sentkit.hill) and the averaged word
vectors (sentkit.models.wordvectors) register themselves when the registry is first asked.

A method is a config dataclass plus two functions:
- ``train(cfg) -> Path``: train from ``cfg.corpus`` and save an encoder directory at ``cfg.out``;
- ``load(path) -> Encoder``: load what ``train`` saved.

Every saved encoder directory holds ``sentkit.json`` with at least ``{"method": NAME}`` so that
``sentkit.load(path)`` can dispatch to the right loader.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentkit.registry import Registry

MARKER_FILE = "sentkit.json"


@dataclass(frozen=True)
class Method:
    name: str
    config_cls: type
    train: Callable[[Any], Path]
    load: Callable[[Path], Any]
    description: str = ""


METHODS: Registry[Method] = Registry("method")

# Modules that register methods on import (kept lazy so `import sentkit` stays light).
_PROVIDERS = ("sentkit.training.recipes", "sentkit.hill", "sentkit.models.wordvectors", "sentkit.models.whitening",
              "sentkit.models.sif")
_loaded = False


def _ensure_loaded() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in _PROVIDERS:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:  # a provider not written yet, or an optional dep missing
            if e.name and e.name.startswith("sentkit"):
                continue
            raise


def register_method(method: Method) -> Method:
    METHODS.add(method.name, method)
    return method


def get_method(name: str) -> Method:
    _ensure_loaded()
    return METHODS.get(name)


def method_names() -> list[str]:
    _ensure_loaded()
    return METHODS.names()


def write_marker(out: Path, method: str, **extra: Any) -> None:
    from sentkit.io import atomic_write_text

    data = {"method": method, **extra}
    atomic_write_text(out / MARKER_FILE, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_marker(path: Path) -> dict[str, Any] | None:
    f = path / MARKER_FILE
    if not f.is_file():
        return None
    return json.loads(f.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
