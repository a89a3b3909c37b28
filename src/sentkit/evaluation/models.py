"""Turn the `--model` argument into an encoder plus a fingerprint for the embedding cache.

Accepted forms:
- `glove-average` (alias `glove`, `glove-50d`): averaged GloVe-50d vectors (SentEval's baseline);
- `module:attr` or `path/to/file.py:attr`: a Python encoder object, a class (instantiated with no
  arguments) or a plain callable `list[str] -> array`;
- anything `sentkit.load` accepts: a directory saved by sentkit, a registry name such as
  `all-minilm-l6-v2`, a local transformers / sentence-transformers directory, a HF id.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentkit.config import ConfigError

GLOVE_NAMES = ("glove-average", "glove", "glove-50d", "glove-50d-average")


@dataclass
class LoadedModel:
    encoder: Any
    name: str
    fingerprint: str | None


def _dir_signature(path: Path) -> str:
    """Names, sizes and mtimes of the files in a model directory (cheap, changes on retrain)."""
    items = []
    for f in sorted(path.rglob("*")):
        if f.is_file():
            st = f.stat()
            items.append(f"{f.relative_to(path)}:{st.st_size}:{int(st.st_mtime)}")
    return hashlib.sha256("\n".join(items).encode()).hexdigest()[:16]


def fingerprint_for(encoder: Any, name: str) -> str | None:
    """The encoder's own `fingerprint` if it has one; for transformer encoders a hash of the
    weights directory and the pooling settings; None for opaque callables."""
    fp = getattr(encoder, "fingerprint", None)
    if callable(fp):
        return str(fp())
    if isinstance(fp, str):
        return fp
    model = getattr(encoder, "model", None)
    path = getattr(getattr(model, "config", None), "_name_or_path", None) or getattr(model, "name_or_path", None)
    if path is None:
        return None
    settings = {k: getattr(encoder, k, None) for k in ("pooling", "max_length", "normalize")}
    settings["class"] = type(encoder).__name__
    p = Path(str(path))
    sig = _dir_signature(p) if p.is_dir() else str(path)
    return hashlib.sha256(f"{name}|{sig}|{json.dumps(settings, sort_keys=True, default=str)}".encode()).hexdigest()[:20]


def _import_attr(spec: str) -> Any:
    mod_name, attr = spec.rsplit(":", 1)
    if mod_name.endswith(".py"):
        path = Path(mod_name)
        if not path.is_file():
            raise FileNotFoundError(f"--model {spec}: file {path} does not exist")
        mspec = importlib.util.spec_from_file_location(path.stem, path)
        if mspec is None or mspec.loader is None:
            raise ConfigError(f"--model {spec}: cannot import {path}")
        module = importlib.util.module_from_spec(mspec)
        sys.modules[path.stem] = module
        mspec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            raise ConfigError(f"--model {spec}: cannot import module {mod_name!r} ({e})") from None
    if not hasattr(module, attr):
        raise ConfigError(f"--model {spec}: module {mod_name!r} has no attribute {attr!r}")
    obj = getattr(module, attr)
    return obj() if isinstance(obj, type) else obj


def load_model(spec: str, **kwargs: Any) -> LoadedModel:
    """Resolve a `--model` string (see the module docstring)."""
    if spec.lower() in GLOVE_NAMES:
        from sentkit.baselines.glove import GloveAverage

        enc = GloveAverage()
        return LoadedModel(enc, "glove-50d-average", enc.fingerprint())
    if ":" in spec and not Path(spec).exists() and not spec.startswith(("http://", "https://")):
        obj = _import_attr(spec)
        return LoadedModel(obj, spec, fingerprint_for(obj, spec))
    import sentkit

    loaded = sentkit.load(spec, **kwargs)
    fp = fingerprint_for(loaded, spec)
    if fp is None and Path(spec).is_dir():  # a saved model without its own fingerprint
        fp = hashlib.sha256(f"{type(loaded).__name__}|{_dir_signature(Path(spec))}".encode()).hexdigest()[:20]
    return LoadedModel(loaded, spec, fp)
