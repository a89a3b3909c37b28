"""`sentkit data check` / `sentkit data download`: which tasks are present, and fetching them."""

from __future__ import annotations

import logging
import shutil
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from sentkit.core.io import atomic_path, sha256_file
from sentkit.evaluation.sources import SOURCES
from sentkit.evaluation.tasks import ALL_TASKS, download_hint, get_task, resolve_data_dir

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskStatus:
    task: str
    present: bool
    folder: Path
    missing: list[Path]
    fix: str
    changed: list[str] = field(default_factory=list)  # files whose size differs from SentEval's


def size_mismatches(task: str, data_dir: str | Path | None = None) -> list[str]:
    """Files of `task` whose size differs from SentEval's pinned copy (a truncated download, an
    edited file): one line each. Only a `stat` per file; files of unknown size are not checked."""
    spec = get_task(task)
    d = resolve_data_dir(data_dir) / spec.folder
    known = {rel: size for rel, _, _, size in SOURCES.get(spec.folder, []) if size is not None}
    out = []
    for rel in spec.files:
        p = d / rel
        if rel in known and p.is_file() and p.stat().st_size != known[rel]:
            out.append(f"{p} has {p.stat().st_size:,} bytes, SentEval's copy {known[rel]:,} (truncated or changed?)")
    return out


def check(data_dir: str | Path | None = None, tasks: list[str] | None = None) -> list[TaskStatus]:
    """Present / missing status of each task's files, with the command that fixes it."""
    d = resolve_data_dir(data_dir)
    out = []
    for name in tasks or ALL_TASKS:
        spec = get_task(name)
        missing = spec.missing(d)
        changed = size_mismatches(spec.name, d)
        out.append(
            TaskStatus(
                spec.name,
                not missing,
                d / spec.folder,
                missing,
                download_hint(spec.name, d) if missing else f"{download_hint(spec.name, d)} --force" if changed else "",
                changed,
            )
        )
    return out


def _fetch(url: str, target: Path, sha256: str | None, size: int | None, timeout: float) -> None:
    with atomic_path(target) as tmp:
        with urllib.request.urlopen(url, timeout=timeout) as resp, open(tmp, "wb") as f:
            shutil.copyfileobj(resp, f)
        got_size = tmp.stat().st_size
        if size is not None and got_size != size:
            raise OSError(f"{url}: got {got_size} bytes, expected {size}")
        if sha256 is not None:
            got = sha256_file(tmp)
            if got != sha256:
                raise OSError(f"{url}: sha256 {got} does not match the expected {sha256}")


def download(
    tasks: list[str] | None = None,
    data_dir: str | Path | None = None,
    *,
    force: bool = False,
    timeout: float = 60.0,
) -> dict[str, list[str]]:
    """Fetch the files of `tasks` (default: all) into `data_dir`, verifying sha256 where known.
    Files already present with the right checksum are kept. Returns folder -> files fetched."""
    d = resolve_data_dir(data_dir)
    folders = list(dict.fromkeys(get_task(t).folder for t in (tasks or ALL_TASKS)))
    fetched: dict[str, list[str]] = {}
    for folder in folders:
        for rel, urls, sha, size in SOURCES.get(folder, []):
            target = d / folder / rel
            if target.is_file() and not force and (sha is None or sha256_file(target) == sha):
                continue
            tried: list[str] = []
            for url in (urls,) if isinstance(urls, str) else urls:  # SentEval's own location, then mirrors
                logger.info("downloading %s -> %s", url, target)
                try:
                    _fetch(url, target, sha, size, timeout)
                    break
                except OSError as e:  # unreachable, or not the bytes expected: the next mirror
                    tried.append(f"{url}: {e}")
            else:
                raise OSError(f"{folder}/{rel}: no source gave the expected file ({'; '.join(tried)})")
            fetched.setdefault(folder, []).append(rel)
    return fetched
