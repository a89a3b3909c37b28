"""Identity: the one place sentkit hashes what it names on disk.

Every key, revision, folder name and fingerprint sentkit writes comes from these pure functions:

- `digest` (sha256 hex of bytes or text, cut to a length) and `config_id` (of settings as sorted
  JSON): the ids of settings and names — a neighbour index's folder, a sharded prepare's run id, an
  experiment cell's cache key, a probing build's settings, an MTEB revision;
- `hasher` and `update_file`, for what is hashed as it streams past (an input read once, a corpus's
  documents, a vector file); `file_digest`, the sha256 of one file (downloads, probing files);
- `files_id`, the cheap id of files by name, size and mtime (what an MTEB task's data and a model
  folder's `folder_signature` hash);
- `content_id(folder)`: what a model folder will load, by content (the names, sizes and bytes of
  its model files, `is_model_file`: caches, checkpoints, logs and hidden files are not the model),
  the same wherever the folder is; MTEB revisions and `sentkit.loading.content_id` (which names
  any model spec, not only a folder, and which sharded embed runs compare before they join) use it;
- `fingerprint(encoder, name)`: the key embedding caches file an encoder's vectors under.

Each keeps the exact bytes the code it replaced gave (tests/test_identity.py pins each site to a
hashlib oracle): a changed id would orphan every cache and stop committed results from matching.

Two uses of hashlib stay where they are, because they identify nothing that loads or is cached by
name: the 16-byte blake2b keys of sentence texts inside the embedding cache's shards
(`sentkit.evaluation.cache.text_key`, part of the shard format: rows, not a model or a file), and
the classifier's sha1 memo keys of index arrays (`sentkit.evaluation.classifier`, in memory only).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

BLOCK = 1 << 20  # files are read 1 MiB at a time

NEIGHBOURS_DIR = "neighbours"  # the neighbour-index cache inside a model folder (sentkit.neighbours)
# entries of a model folder that are not the model: caches, and a training run's bookkeeping (and
# its logs, *.log)
NOT_MODEL_FILES = (NEIGHBOURS_DIR, "checkpoint", "prepared", "tensorboard", "train.log", "metrics.csv", "run.json")


def hasher(algorithm: str = "sha256") -> Any:
    """A new incremental hash object (``update(bytes)``, ``hexdigest()``), for data hashed as it streams."""
    return hashlib.new(algorithm)


def digest(data: bytes | str, length: int | None = None, *, algorithm: str = "sha256") -> str:
    """The hex digest of `data` (text as UTF-8), its first `length` digits (None: all)."""
    h = hashlib.new(algorithm, data.encode() if isinstance(data, str) else data)
    return h.hexdigest()[:length]


def config_id(obj: Any, length: int | None = 16) -> str:
    """The id of settings: sha256 of ``json.dumps(obj, sort_keys=True, default=str)``, `length` hex digits."""
    return digest(json.dumps(obj, sort_keys=True, default=str), length)


def update_file(h: Any, path: str | Path) -> Any:
    """Feed the bytes of the file `path` to the hash object `h`; returns `h`."""
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(BLOCK), b""):
            h.update(block)
    return h


def file_digest(path: str | Path) -> str:
    """The sha256 (hex) of a file's bytes."""
    return str(update_file(hasher(), path).hexdigest())


def files_id(files: Iterable[Path], *, root: Path | None = None, length: int | None = None) -> str:
    """A cheap id of files' state: sha256 of one ``NAME:SIZE:MTIME`` line each ("\\n"-joined; NAME
    relative to `root` when given, else the path as given; MTIME in whole seconds)."""
    items = []
    for f in files:
        st = f.stat()
        items.append(f"{f.relative_to(root) if root is not None else f}:{st.st_size}:{int(st.st_mtime)}")
    return digest("\n".join(items), length)


def is_model_file(rel: Path) -> bool:
    """Whether `rel`, a path inside a model folder, is part of the model: not a cache, a checkpoint, a
    run's bookkeeping or log (`NOT_MODEL_FILES`, ``*.log``), nor hidden (a lock, a temporary)."""
    return not (
        rel.parts[0] in NOT_MODEL_FILES or rel.parts[0].endswith(".log") or any(p.startswith(".") for p in rel.parts)
    )


def folder_signature(path: Path) -> str:
    """Names, sizes and mtimes of the files in a model folder (cheap; changes on retrain), 16 hex
    digits. The neighbour-index cache kept inside it is not part of the model and is left out."""
    files = [f for f in sorted(path.rglob("*")) if f.is_file() and f.relative_to(path).parts[0] != NEIGHBOURS_DIR]
    return files_id(files, root=path, length=16)


def content_id(folder: Path) -> str:
    """What the model folder `folder` will load, by content: sha256 (hex) of the names, sizes and bytes
    of its model files (`is_model_file`): equal for the same files wherever the folder is and however
    it is named, different after a retrain. Reads every file once."""
    h = hasher()
    for f in sorted(folder.rglob("*")):
        rel = f.relative_to(folder)
        if not is_model_file(rel) or not f.is_file():
            continue
        h.update(f"{rel.as_posix()}\0{f.stat().st_size}\0".encode())
        update_file(h, f)
    return str(h.hexdigest())


def fingerprint(encoder: Any, name: str | None = None) -> str | None:
    """The key embedding caches file `encoder`'s vectors under. Without `name`: the encoder's own
    ``fingerprint()`` / ``.fingerprint`` as text, None without one (what `sentkit.evaluate` takes when
    it is given no key). With the name it was loaded from: its own fingerprint when that is a string;
    for a transformer, a hash of its weights folder (`folder_signature`, or the name it was fetched
    by) and pooling settings; for another model folder, a hash of the folder; None for opaque code.
    (The caches are keyed by sentence text too, so options that change the text need no key.)"""
    own = getattr(encoder, "fingerprint", None)
    if callable(own):
        own = own()
    if name is None:
        return None if own is None else str(own)
    if isinstance(own, str):
        return own
    model = getattr(encoder, "model", None)
    path = getattr(getattr(model, "config", None), "_name_or_path", None) or getattr(model, "name_or_path", None)
    if path is not None:
        settings = {k: getattr(encoder, k, None) for k in ("pooling", "max_length", "normalize")}
        settings["class"] = type(encoder).__name__
        if getattr(encoder, "attention", None) is not None:  # a decoder's attention switched at load time
            settings["attention"] = encoder.attention
        if getattr(encoder, "precision", "fp32") not in (None, "fp32"):  # half precision: other vectors, another key
            settings["precision"] = encoder.precision
        p = Path(str(path))
        sig = folder_signature(p) if p.is_dir() else str(path)
        return digest(f"{name}|{sig}|{json.dumps(settings, sort_keys=True, default=str)}", 20)
    if Path(name).is_dir():
        pooled = f"|pooling={encoder.pooling}" if getattr(encoder, "pooling", None) else ""  # a bag pooled another way
        if getattr(encoder, "precision", None) not in (None, "fp32"):  # e.g. a whitened transformer base in bf16
            pooled += f"|precision={encoder.precision}"
        return digest(f"{type(encoder).__name__}|{folder_signature(Path(name))}{pooled}", 20)
    return None
