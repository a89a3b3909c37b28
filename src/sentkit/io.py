"""Atomic file writes: write to a temporary sibling, fsync, then rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to `path`; on success it is renamed onto `path`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp_path, target)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", **kw: object) -> Iterator[IO]:
    """Open a temporary sibling of `path` for writing; rename onto `path` on success."""
    with atomic_path(path) as tmp, open(tmp, mode, **kw) as f:  # type: ignore[call-overload]
        yield f


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_open(path, "w", encoding="utf-8") as f:
        f.write(text)


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive inter-process lock on `path` (created if needed) for the block.
    POSIX (fcntl); elsewhere a no-op, so concurrent writers must be avoided by hand."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
