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
  the same wherever the folder is; MTEB revisions and `sentkit.models.loading.content_id` (which names
  any model spec, not only a folder, and which sharded embed runs compare before they join) use it;
- `fingerprint(encoder, name)`: the key embedding caches file an encoder's vectors under, and the
  fingerprints encoders give themselves: `derived_fingerprint` (whitened, SIF, pooled bags),
  `prompted_fingerprint` (vectors encoded with a prompt), `word_vectors_fingerprint`,
  `directory_digest` (a Hill et al. model folder), `tokenizer_fingerprint` (token stores, checkpoints);
- the ids of named things each module writes: `corpus_files_id` and `model_name_id` (the neighbour
  index's key), `prepare_input_id` (a sharded prepare's input), `parsed_corpus_id` (a probing build's
  parsed documents: by content, unlike `corpus_files_id`), `cache_folder_name` (an embedding cache's
  folder), `mteb_revision` and `variant_id` (MTEB revisions), `host_tag` (temporary names) and
  `long_name_id` (a record's name too long to keep).

Every other module calls these; none builds an id from `digest` itself (tests/core/test_identity.py).

Each keeps the exact bytes the code it replaced gave (tests/core/test_identity.py pins each site to a
hashlib oracle): a changed id would orphan every cache and stop committed results from matching.

Two uses of hashlib stay where they are, because they identify nothing that loads or is cached by
name: the 16-byte blake2b keys of sentence texts inside the embedding cache's shards
(`sentkit.evaluation.cache.text_key`, part of the shard format: rows, not a model or a file), and
the classifier's sha1 memo keys of index arrays (`sentkit.evaluation.classifier`, in memory only).
"""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

BLOCK = 1 << 20  # files are read 1 MiB at a time

NEIGHBOURS_DIR = "neighbours"  # the neighbour-index cache inside a model folder (sentkit.retrieval.neighbours)
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


def with_precision(key: str, encoder: Any) -> str:
    """A cache key given by the user (``--fingerprint``, ``evaluate(fingerprint=...)``) for `encoder` as it computes:
    ``key|precision=bf16`` for a half precision, ``|dim=128`` for vectors cut to their first dimensions
    (``truncate_dim``), ``|quantize=int8`` for quantized ones (each idempotent); `key` itself for whole float32
    vectors, so that a key given for one model never serves another precision's, size's or code's vectors."""
    parts = []
    used = getattr(encoder, "precision", None)
    if isinstance(used, str) and used != "fp32":
        parts.append(f"precision={used}")
    dim = getattr(encoder, "truncate_dim", None)
    if isinstance(dim, int) and not isinstance(dim, bool):
        parts.append(f"dim={dim}")
    quantize = quantized_key(encoder)
    if quantize is not None:
        parts.append(f"quantize={quantize}")
    for part in parts:
        if f"|{part}|" not in f"{key}|":  # (a part may hold "|" itself: quantize=binary|rescore=floatx4)
            key = f"{key}|{part}"
    return key


def quantized_key(encoder: Any) -> str | None:
    """What keys the codes an encoder's vectors are quantized to (`sentkit.models.quantization.QuantizedEncoder`):
    the precision, with a digest of the int8 calibration ranges, and a binary search's rescoring (``rescore``,
    another ranking of a retrieval task); None for float vectors."""
    if not isinstance(getattr(encoder, "quantize", None), str):
        return None
    key = getattr(getattr(encoder, "calibration", None), "key", None)
    out = str(key()) if callable(key) else str(encoder.quantize)
    rescore = getattr(encoder, "rescore", None)
    return f"{out}|rescore={rescore}x{encoder.rescore_multiplier}" if isinstance(rescore, str) else out


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
        if getattr(encoder, "truncate_dim", None) is not None:  # the first N dimensions: another key (none: the old)
            settings["truncate_dim"] = encoder.truncate_dim
        if quantized_key(encoder) is not None:  # codes: another key
            settings["quantize"] = quantized_key(encoder)
        p = Path(str(path))
        sig = folder_signature(p) if p.is_dir() else str(path)
        return digest(f"{name}|{sig}|{json.dumps(settings, sort_keys=True, default=str)}", 20)
    if Path(name).is_dir():
        pooled = f"|pooling={encoder.pooling}" if getattr(encoder, "pooling", None) else ""  # a bag pooled another way
        if getattr(encoder, "precision", None) not in (None, "fp32"):  # e.g. a whitened transformer base in bf16
            pooled += f"|precision={encoder.precision}"
        if getattr(encoder, "truncate_dim", None) is not None:  # cut to its first dimensions (sentkit.load(dim=))
            pooled += f"|dim={encoder.truncate_dim}"
        if quantized_key(encoder) is not None:
            pooled += f"|quantize={quantized_key(encoder)}"
        return digest(f"{type(encoder).__name__}|{folder_signature(Path(name))}{pooled}", 20)
    return None


# ----------------------------------------------------------------------------- the ids of named things
# Each below was built in the module that writes it; the bytes it hashes are unchanged (tests/core/test_identity.py).


def corpus_files_id(corpus: str | Path) -> dict[str, Any]:
    """The neighbour-index cache's id of a corpus file or folder (`sentkit.retrieval.neighbours`): its resolved
    path, its number of files and 16 hex digits of one ``PATH|SIZE|MTIME_NS`` line per file. Cheap at
    any size; changes when a file does. (Not `parsed_corpus_id`, which identifies parsed documents.)"""
    p = Path(corpus).resolve()
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    lines = "".join(f"{f}|{st.st_size}|{st.st_mtime_ns}\n" for f, st in ((f, f.stat()) for f in files))
    return {"path": str(p), "files": len(files), "digest": digest(lines, 16)}


def model_name_id(model: str | Path) -> str:
    """The neighbour-index cache's id of a model as named, without loading it: a folder's resolved path
    and `folder_signature`, else the name; 16 hex digits."""
    p = Path(model)
    key = f"{p.resolve()}|{folder_signature(p)}" if p.is_dir() else str(model)
    return digest(key, 16)


def prepare_input_id(corpus: Path, files: list[Path]) -> str:
    """A sharded prepare's id of its input (`sentkit.sharding.prepare`): sha256 of one JSON line
    ``[NAME, SIZE, MTIME_NS]`` per file (NAME relative to `corpus`; the corpus itself when `files` is
    empty; ``[PATH, null, null]`` for a file that cannot be read)."""
    lines = []
    for f in files or [corpus]:
        try:
            st = f.stat()
            entry = [str(f.relative_to(corpus)) if files else f.name, st.st_size, st.st_mtime_ns]
        except OSError:
            entry = [str(f), None, None]
        lines.append(json.dumps(entry).encode("utf-8", "surrogateescape") + b"\n")
    return digest(b"".join(lines))


def parsed_corpus_id(shards: list[dict[str, Any]]) -> str:
    """A probing build's id of the documents it parsed (`sentkit.data.probing.parse`): sha256 of its
    shards' ``docs_sha256`` in order, by content and not by file. (Not `corpus_files_id`, which
    identifies a corpus's files by name, size and mtime for the neighbour index.)"""
    return digest("".join(s["docs_sha256"] for s in shards))


def directory_digest(d: Path) -> str:
    """A Hill et al. model folder's fingerprint (`sentkit.hill.common`): sha256 (16 hex digits) of the
    name and bytes of every file in it (sub-folders such as the neighbour-index cache are left out)."""
    h = hasher()
    for f in sorted(p for p in d.iterdir() if p.is_file()):
        h.update(f.name.encode() + b"\0")
        update_file(h, f)
    return str(h.hexdigest())[:16]


def host_tag() -> str:
    """A short hash (sha1, 6 hex digits) of this host's name, part of every temporary name (`sentkit.core.io`)."""
    return digest(socket.gethostname().encode("utf-8", "replace"), 6, algorithm="sha1")


def long_name_id(raw: bytes) -> str:
    """12 hex digits naming a file name too long to keep whole (`sentkit.sharding.embed.record_path`)."""
    return digest(raw, 12)


def cache_folder_name(fingerprint: str) -> str:
    """The embedding cache's folder of a fingerprint (`sentkit.evaluation.cache`): the fingerprint
    itself when it is a plain name, else a sanitised prefix plus a hash of it (so that "..", "a/b" or
    two long fingerprints with one prefix never share a folder or leave the cache root)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in fingerprint)
    if safe == fingerprint and 0 < len(safe) <= 120 and not safe.startswith("."):
        return safe
    return f"{safe.lstrip('.')[:100]}-{digest(fingerprint, 16)}"


def calibration_id(precision: str, ranges: Any) -> str:
    """What keys quantized vectors (`sentkit.models.quantization.Calibration.key`): the precision, and for int8 /
    uint8 12 hex digits of the calibration ranges' float32 bytes."""
    if ranges is None:
        return precision
    import numpy as np

    return f"{precision}:{digest(np.ascontiguousarray(ranges, dtype=np.float32).tobytes(), 12)}"


def derived_fingerprint(kind: str, base: Any, *arrays: Any) -> str | None:
    """The fingerprint of an encoder made of ``base`` and fitted ``arrays`` (whitened, SIF-weighted): a
    hash of ``kind``, the base's own fingerprint and the arrays' bytes; None when the base has none."""
    import numpy as np

    fp = getattr(base, "fingerprint", None)
    base_fp = fp() if callable(fp) else fp
    if base_fp is None:
        return None
    return digest(f"{kind}|{base_fp}".encode() + b"".join(np.ascontiguousarray(a).tobytes() for a in arrays), 20)


def prompted_fingerprint(
    fingerprint: str | None, prompt_text: str | None, *, include_prompt: bool = True
) -> str | None:
    """An embedding-cache key for vectors encoded with `prompt_text`: `fingerprint` itself when there is
    no prompt (so caches of unprompted runs stay valid), else a hash of both."""
    if fingerprint is None or not prompt_text:
        return fingerprint
    key = f"{fingerprint}|prompt={prompt_text}|include_prompt={include_prompt}"
    return f"{fingerprint}-p{digest(key, 12)}"


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A short hash (sha1, 16 hex digits) that changes whenever the tokenizer's vocabulary or rules
    change: what a token store and a training run's checkpoints record of their tokenizer."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        # Calling a tokenizer changes its truncation / padding settings, which are not the
        # vocabulary or rules: hash a copy with both off (the state after a plain call), so a
        # fresh and a used tokenizer agree, and stores prepared before this agree too.
        from tokenizers import Tokenizer

        copy = Tokenizer.from_str(backend.to_str())
        copy.no_truncation()
        copy.no_padding()
        blob = copy.to_str()
    else:
        blob = json.dumps(sorted(tokenizer.get_vocab().items()))
    return digest(blob, 16, algorithm="sha1")


def word_vectors_fingerprint(lowercase: bool, dim: int, vocab_size: int, vectors: Any) -> str:
    """An averaged word-vector encoder's fingerprint (`sentkit.models.wordvectors.GloveAverage`): its
    settings and about a thousand of its vectors' rows, 16 hex digits."""
    import numpy as np

    head = f"glove-average|lower={lowercase}|dim={dim}|n={vocab_size}".encode()
    return digest(head + np.ascontiguousarray(vectors[:: max(1, vocab_size // 997)]).tobytes(), 16)


def mteb_revision(fingerprint: str | None) -> str:
    """An MTEB results folder's revision for a model fingerprint (`sentkit.evaluation.mteb_adapter`):
    the fingerprint when it is a safe name of at most 64 characters, else 20 hex digits of it."""
    import re

    if not fingerprint:
        return "no_revision_available"
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", fingerprint).strip("._")
    return safe if safe == fingerprint and len(safe) <= 64 else digest(fingerprint, 20)


def variant_id(content: str, variant: str) -> str:
    """An MTEB revision's id of a model's content and a variant of it (a pooling other than its own):
    sha256 of ``CONTENT|VARIANT`` (`sentkit.evaluation.mteb_adapter.model_identity`)."""
    return digest(f"{content}|{variant}")
