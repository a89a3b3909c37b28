"""Files a request names (a corpus, results), read with care: only regular files and folders, within
a time bound.

A named pipe given as a corpus never answers (opening it waits for a writer, reading it for data),
and a device such as ``/dev/zero`` never ends: each such request used to hold one of the server's
worker threads for good, and a few dozen of them stopped the page. :func:`check_path` looks at the
path with ``os.stat`` (links followed) before any reader opens it and refuses anything but a regular
file or a folder; :func:`within` runs a read in a thread of its own and gives up waiting after a time
(a path swapped for a pipe after the check, a stalled network disk), and lets only a few such reads
run at once, so a stuck one never holds a worker of the server.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sentkit.core.errors import SentkitError

T = TypeVar("T")

READ_SECONDS = 20.0  # the longest a request waits for a corpus or results to be read
MAX_READS = 4  # reads under way at once (a stuck one keeps its slot until it ends)
MAX_ENTRIES = 10_000  # files of a saved dataset folder checked one by one
# files whose presence makes a folder a saved Hugging Face dataset (sentkit.data.corpus reads it whole)
DATASET_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")


class ReadError(SentkitError, ValueError):
    """A path the page may not read, or a read that took too long; the message says which and what to give."""


def special_kind(mode: int) -> str | None:
    """What a file of ``mode`` is when it is neither a regular file nor a folder (None when it is one of them)."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def check_path(path: Path, what: str) -> None:
    """Raise :class:`ReadError` unless ``path`` (links followed) is a regular file or a folder; in the
    folder of a saved dataset, whose reader opens every file, each file must be a regular one. Nothing
    is opened. A path that does not exist passes: the reader says so in its own words."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise ReadError(f"{what} {path} cannot be read ({e.strerror or type(e).__name__})") from None
    kind = special_kind(st.st_mode)
    if kind is not None:
        raise ReadError(f"{what} {path} is {kind}, not a regular file: give a file or a folder")
    if stat.S_ISDIR(st.st_mode) and any(os.path.lexists(path / m) for m in DATASET_MARKERS):
        _check_tree(path, what)


def _check_tree(folder: Path, what: str) -> None:
    seen = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            seen += 1
            if seen > MAX_ENTRIES:
                raise ReadError(f"{what} {folder} holds more than {MAX_ENTRIES:,} files; give a smaller dataset")
            f = Path(root) / name
            try:
                kind = special_kind(os.stat(f).st_mode)
            except OSError as e:
                raise ReadError(f"{what} {folder}: {f.relative_to(folder)} cannot be read ({e.strerror})") from None
            if kind is not None:
                raise ReadError(
                    f"{what} {folder}: {f.relative_to(folder)} is {kind}, not a regular file; remove it from the folder"
                )


def within(seconds: float, slots: threading.Semaphore, what: str, read: Callable[[], T]) -> T:
    """``read()``'s result (or its error) when it ends within ``seconds``; else :class:`ReadError`,
    while the read goes on in its own daemon thread until it ends. ``slots`` bounds the reads under
    way at once: with none free, refused at once."""
    if not slots.acquire(blocking=False):
        raise ReadError(
            f"cannot read {what} now: {MAX_READS} earlier reads have not ended (a stalled disk?); "
            "try again later or restart sentkit explore"
        )
    done = threading.Event()
    out: dict[str, T] = {}
    err: list[BaseException] = []

    def run() -> None:
        try:
            out["value"] = read()
        except BaseException as e:  # handed to the caller
            err.append(e)
        finally:
            slots.release()
            done.set()

    threading.Thread(target=run, daemon=True, name="sentkit-explore-read").start()
    if not done.wait(seconds):
        raise ReadError(
            f"reading {what} took more than {seconds:g} s and was given up; "
            "give a regular file or folder on a local disk"
        )
    if err:
        raise err[0]
    return out["value"]
