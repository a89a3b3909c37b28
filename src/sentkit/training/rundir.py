"""The output folder of a training run: who may write it, and what a resume must match.

A run folder is recognised by ``run.json`` (written when a run starts: method, config, the entries
sentkit made). Rules, checked before any expensive work:

- an empty or new folder is used as is;
- a folder of someone else's files is never written into;
- an earlier sentkit run is continued only with ``--resume`` (same method, same settings unless
  ``--allow-config-change``), or replaced with ``--overwrite`` (only if every entry is one sentkit
  wrote);
- one process at a time: ``.lock`` is held (``flock``) for the whole run; the kernel drops it when the
  process dies, so a crashed run never leaves it stuck. The folder is checked once before the lock
  is taken (so nothing, not even the lock file, is written into a folder of someone else's files)
  and again under it, before --overwrite removes anything.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sentkit.core.config import ConfigError, to_dict
from sentkit.core.io import atomic_write_text, remove_stale_temps
from sentkit.training.config import config_diff

log = logging.getLogger(__name__)

RUN_FILE = "run.json"
LOCK_FILE = ".lock"
LOG_FILE = "train.log"
# Entries of a run folder that sentkit writes whatever the model's files are called.
_OWN = {
    RUN_FILE,
    LOCK_FILE,
    LOG_FILE,
    "checkpoint",
    "metrics.csv",
    "train_config.json",
    "tensorboard",
    "prepared",
    "tokenizer",
}
_RANK_LOG = re.compile(r"train-rank\d+\.log")


def rank_log_name(rank: int) -> str:
    """The log file of a process of the run: train.log for rank 0, train-rank<N>.log for the others."""
    return LOG_FILE if rank == 0 else f"train-rank{rank}.log"


def _own(entry: str) -> bool:
    return entry in _OWN or bool(_RANK_LOG.fullmatch(entry))


class RunDirError(ConfigError):
    """The output folder cannot be used for this run; the message says why and the way out."""


def read_run(out: Path) -> dict[str, Any] | None:
    """The ``run.json`` of a sentkit run folder, or None (not a run folder, or unreadable)."""
    try:
        data = json.loads((out / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "method" in data else None


def write_run(out: Path, method: str, cfg: Any, **extra: Any) -> None:
    """Record (atomically) that `out` is a run of `method` with `cfg` (a config dataclass or dict),
    and which entries it made."""
    entries = sorted(set(_list(out)) | set((read_run(out) or {}).get("entries", [])) | {RUN_FILE})
    data = {"method": method, "config": cfg if isinstance(cfg, dict) else to_dict(cfg), "entries": entries, **extra}
    atomic_write_text(out / RUN_FILE, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def _list(out: Path) -> list[str]:
    try:
        return sorted(p.name for p in out.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def claim(out: Path, method: str, cfg: Any, *, dry_run: bool = False) -> dict[str, Any] | None:
    """Check that this run may use `out` (see the module docstring); with --overwrite, clear the
    earlier run (not with `dry_run`: a check that changes nothing, made before taking the lock).
    Returns the earlier run's record when resuming, else None.

    `cfg` is the run's config: a `TrainConfig`, or any config with ``resume`` / ``overwrite`` /
    ``allow_config_change`` attributes (absent ones read False)."""
    resume = bool(getattr(cfg, "resume", False))
    overwrite = bool(getattr(cfg, "overwrite", False))
    if out.exists() and not out.is_dir():
        raise RunDirError(f"--out {out}: is a file, not a folder; choose a folder name")
    above = next((p for p in out.parents if p.exists()), None)
    if above is not None and not above.is_dir():  # `--out notes.txt/run`: the folder cannot be made
        raise RunDirError(f"--out {out}: {above} is a file, not a folder; choose a --out that is not under a file")
    entries = [e for e in _list(out) if e != LOCK_FILE and not (e.startswith(".") and e.endswith(".tmp"))]
    if not entries or _scaffolding_only(out, entries):
        # nothing to lose: empty, or what a run that failed or was killed before its first checkpoint
        # left (its log, the store it prepared, locks): a rerun (with the suggested fix) uses it
        if resume and not dry_run:
            log.warning("--resume given but %s holds no checkpoint; starting from step 0", out)
        return read_run(out) if resume else None
    prev = read_run(out) or _legacy_run(out, entries)
    if prev is None:
        raise RunDirError(
            f"--out {out}: the folder already holds files that sentkit did not write ({_names(entries)}); "
            "choose a new or empty folder for --out"
        )
    if overwrite:
        unknown = sorted(e for e in set(entries) - set(prev.get("entries", [])) if not _own(e))
        if unknown:
            raise RunDirError(
                f"--out {out}: --overwrite would delete files that sentkit did not write ({_names(unknown)}); "
                "move them away or choose another --out"
            )
        if dry_run:
            return None
        log.warning("--overwrite: replacing the earlier %s run in %s", prev["method"], out)
        for e in entries:
            p = out / e
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
        return None
    if not resume:
        raise RunDirError(
            f"--out {out}: holds an earlier {prev['method']} run; add --resume to continue it, "
            "--overwrite to replace it, or choose another --out"
        )
    if prev["method"] != method:
        raise RunDirError(
            f"--out {out}: holds a {prev['method']} run, not {method}; --resume continues a run of the same "
            "method: choose another --out (or --overwrite to replace it)"
        )
    diff = config_diff(prev.get("config") or {}, cfg)
    if diff and not getattr(cfg, "allow_config_change", False):
        raise RunDirError(
            f"--out {out}: --resume with settings that differ from the run's ({'; '.join(diff)}); "
            "resume with the same settings, or add --allow-config-change to accept them"
        )
    if diff and not dry_run:
        log.warning("resuming %s with changed settings: %s", out, "; ".join(diff))
    return prev


def _scaffolding_only(out: Path, entries: list[str]) -> bool:
    """Whether every entry is one a run writes before it has a checkpoint or a model."""
    from sentkit.core.methods import MARKER_FILE

    early = {RUN_FILE, LOG_FILE, "metrics.csv", "train_config.json", "prepared", "tokenizer", "tensorboard"}
    ckpt = out / "checkpoint"  # a checkpoint file, or a sharded (FSDP) checkpoint folder made whole by its meta.pt
    if (out / MARKER_FILE).exists() or any(ckpt.glob("*.pt")) or any(ckpt.glob("*/meta.pt")):
        return False
    return all(
        e in early or _RANK_LOG.fullmatch(e) or e == "checkpoint" or (e.startswith(".") and e.endswith(".lock"))
        for e in entries
    )


def _legacy_run(out: Path, entries: list[str]) -> dict[str, Any] | None:
    """The record of a run folder written before run.json existed: a checkpoint with its config, or
    a saved model (``sentkit.json``)."""
    from sentkit.core.methods import read_marker

    try:
        marker = read_marker(out)
    except (OSError, ValueError):
        marker = None
    if (out / "train_config.json").is_file() and (out / "checkpoint").is_dir():
        return {
            "method": (marker or {}).get("method", "declutr"),
            "config": _json(out / "train_config.json"),
            "entries": entries,
        }
    if marker is not None:
        return {"method": marker.get("method", "?"), "config": {}, "entries": entries}
    return None


def _names(entries: list[str], n: int = 4) -> str:
    return ", ".join(entries[:n]) + (f" and {len(entries) - n} more" if len(entries) > n else "")


def _json(p: Path) -> dict[str, Any]:
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@contextlib.contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """Hold `out`/.lock for the block; a second process refuses at once, naming the holder."""
    out.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no lock
        yield
        return
    path = out / LOCK_FILE
    fh = open(path, "a+")  # noqa: SIM115 - held for the whole block
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise RunDirError(
                f"--out {out}: another training ({holder}) is using this folder; wait for it to finish, "
                "or choose another --out"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}\n")
        fh.flush()
        yield
    finally:
        fh.close()  # closing drops the lock


def clean_stale(out: Path) -> None:
    """Remove temporaries that a killed write left in the run folder and its checkpoint folder."""
    for folder in (out, out / "checkpoint"):
        remove_stale_temps(folder)
    remove_stale_temps(out.parent, out.name)


@contextlib.contextmanager
def run_log(out: Path, name: str = LOG_FILE) -> Iterator[None]:
    """Append this run's log records to `out`/`name` (train.log; `rank_log_name` for the other
    processes of a multi-process run), never truncated, while the block runs."""
    handler = logging.FileHandler(out / name, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    pkg = logging.getLogger("sentkit")
    old_level, quiet = pkg.level, pkg.getEffectiveLevel()
    # the file gets INFO even when the console shows less: lower the package's level, and keep the
    # console's handlers at what they showed before
    keep = _AtLeast(quiet)
    consoles = [h for h in logging.getLogger().handlers if quiet > logging.INFO]
    for h in consoles:
        h.addFilter(keep)
    pkg.setLevel(min(quiet, logging.INFO))
    pkg.addHandler(handler)
    try:
        yield
    finally:
        pkg.removeHandler(handler)
        pkg.setLevel(old_level)
        for h in consoles:
            h.removeFilter(keep)
        handler.close()


class _AtLeast(logging.Filter):
    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.level or not record.name.startswith("sentkit")
