"""Safe file writes: atomic renames, normal file modes, stale-temp cleanup, early writability checks.

Every output sentkit writes goes through :func:`atomic_path` (or :func:`atomic_open`): the data is
written to a hidden temporary sibling ``.NAME.<host>-<pid>.<random>.tmp``, fsynced, given the user's normal
file mode (``0666 & ~umask``) and renamed onto ``NAME``. A reader never sees a torn file under the
final name; a killed write leaves only the temporary sibling, which :func:`remove_stale_temps`
deletes at the next start.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from sentkit.core.errors import InputError, MissingInputError, SentkitError
from sentkit.core.identity import file_digest, host_tag, long_name_id

log = logging.getLogger(__name__)

TMP_SUFFIX = ".tmp"
# Temporary names carry the writer's host and process id, ``.NAME.<host>-<pid>.<random>.tmp``, so
# that a cleanup never removes the temporary of a write that is still running.
_TAG = re.compile(r"\.(?P<host>[0-9a-f]{6})-(?P<pid>\d+)\.[^.]*\.tmp$")
# A temporary of another host (a shared file system) is left alone until it is this old.
FOREIGN_STALE_S = 24 * 3600.0


class PathError(SentkitError, OSError):
    """An output or input path that cannot be used; ``str()`` is a clean one-line message.

    ``PathError(errno.EISDIR, "is a directory; give a file name", "--output", "out/")`` reads
    ``--output out/: is a directory; give a file name``."""

    def __init__(self, code: int, why: str, what: str, path: str | Path) -> None:
        super().__init__(code, why, str(path))
        self.what = what

    def __str__(self) -> str:
        return f"{self.what} {self.filename}: {self.strerror}"

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        """2 when the path given is wrong (a folder for a file, missing, taken); 1 otherwise."""
        return 2 if self.errno in (errno.EISDIR, errno.ENOTDIR, errno.ENOENT, errno.EEXIST, errno.EINVAL) else 1


# Room for ".", ".<host>-<pid>." and "<random>.tmp" within the usual 255-byte limit of a file name.
MAX_NAME_IN_TEMP = 160


def temp_name(name: str) -> str:
    """`name` as it appears in its temporaries: cut to MAX_NAME_IN_TEMP bytes, so that the
    temporary of a long (but valid) file name is a valid name too."""
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) <= MAX_NAME_IN_TEMP:
        return name
    return raw[:MAX_NAME_IN_TEMP].decode("utf-8", "ignore")


def sidecar_path(path: Path, suffix: str, *, after_stem: bool = False) -> Path:
    """The file kept beside `path` under its name plus `suffix` (``X.npy`` -> ``X.npy<suffix>``, or
    ``X<suffix>`` when `after_stem`); for a name too long to take the suffix, the name cut short and a hash of it
    in full, so a valid output name always has a valid sidecar."""
    path = Path(path)
    base = path.stem if after_stem else path.name
    raw = base.encode("utf-8", "surrogateescape")
    if len(raw) + len(suffix.encode("utf-8")) <= 255:
        return path.with_name(base + suffix)
    return path.with_name(f"{temp_name(base)}-{long_name_id(path.name.encode('utf-8', 'surrogateescape'))}{suffix}")


def temp_prefix(name: str) -> str:
    """The prefix of this process's temporary siblings of ``name``: ``.NAME.<host>-<pid>.``."""
    return f".{temp_name(name)}.{host_tag()}-{os.getpid()}."


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists, owned by someone else
    return True


def is_stale_temp(p: Path, *, now: float | None = None, untagged: bool = False) -> bool:
    """Whether `p` is a temporary sibling whose writer is gone: a dead process of this host or an
    old one of another host; an untagged name (an older sentkit's) counts when `untagged`."""
    m = _TAG.search(p.name)
    if m is None:
        return untagged
    if m["host"] == host_tag():
        return not _pid_alive(int(m["pid"]))
    try:
        age = (now or time.time()) - p.lstat().st_mtime
    except OSError:
        return False
    return age > FOREIGN_STALE_S


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def default_file_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give a new file: ``0o666 & ~umask``."""
    return 0o666 & ~_umask()


def _fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable (best effort; not every platform allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to `path`; on success it is fsynced, given the user's normal
    file mode and renamed onto `path` (onto the file it links to, when `path` is a symbolic link).
    On any error (or Ctrl-C) the temporary file is removed and `path` is left as it was."""
    target = Path(path)
    if target.is_symlink():  # write through the link: replace the file it points to, not the link
        target = Path(os.path.realpath(target))
    if target.is_dir():
        raise PathError(errno.EISDIR, "is a directory, not a file", "output", target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(target.name), suffix=TMP_SUFFIX, dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.is_file():
            with open(tmp_path, "rb+") as f:
                os.fsync(f.fileno())
            os.chmod(tmp_path, default_file_mode())
        os.replace(tmp_path, target)
        _fsync_dir(target.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            if tmp_path.is_dir() and not tmp_path.is_symlink():
                shutil.rmtree(tmp_path, ignore_errors=True)
            else:
                tmp_path.unlink()


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", **kw: object) -> Iterator[IO]:
    """Open a temporary sibling of `path` for writing; rename onto `path` on success."""
    with atomic_path(path) as tmp, open(tmp, mode, **kw) as f:  # type: ignore[call-overload]
        yield f


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_open(path, "w", encoding="utf-8") as f:
        f.write(text)


def make_temp_dir(path: str | Path) -> Path:
    """A new empty temporary sibling folder of `path` (``.NAME.<host>-<pid>.<random>.tmp``) in which
    a folder written as a whole (a store) is built before it is renamed onto `path`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(target.name), suffix=TMP_SUFFIX, dir=target.parent))
    os.chmod(tmp, 0o777 & ~_umask())
    return tmp


def remove_stale_temps(folder: str | Path, name: str | None = None) -> list[Path]:
    """Remove the temporary siblings that a killed write left in `folder` (only those of `name`
    when given): ``.NAME.<tag>.tmp`` files and folders of :func:`atomic_path` and
    :func:`make_temp_dir`, and the untagged ``.NAME.tmp`` of older versions. A temporary whose
    writer is still running is kept (see :func:`is_stale_temp`); without `name`, only tagged names
    are touched, never a user's own hidden ``.x.tmp``. Returns what was removed; a folder
    that does not exist or cannot be listed is left alone."""
    d = Path(folder)
    removed: list[Path] = []
    try:
        pattern = f".{glob_escape(temp_name(name))}.*{TMP_SUFFIX}" if name is not None else f".*{TMP_SUFFIX}"
        entries = sorted(d.glob(pattern))
        legacy = d / f".{name}{TMP_SUFFIX}"
        if name is not None and (legacy.exists() or legacy.is_symlink()):
            entries.append(legacy)
    except OSError:
        return removed
    now = time.time()
    for e in entries:
        if not is_stale_temp(e, now=now, untagged=name is not None):
            continue
        try:
            if e.is_dir() and not e.is_symlink():
                shutil.rmtree(e)
            else:
                e.unlink()
        except FileNotFoundError:
            continue
        except OSError as err:
            log.warning("could not remove the leftover temporary %s: %s", e, err.strerror or err)
            continue
        removed.append(e)
    if removed:
        log.info("removed %d leftover temporary file(s) of an interrupted write in %s", len(removed), d)
    return removed


def glob_escape(name: str) -> str:
    """`name` with glob metacharacters escaped."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def _nearest_existing(p: Path) -> Path:
    cur = p
    while not cur.exists() and not cur.is_symlink():
        if cur.parent == cur:
            break
        cur = cur.parent
    return cur


_NOT_REGULAR = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def require_file(path: str | Path, what: str, *, hint: str = "") -> Path:
    """`path` when it names a regular file (a symbolic link to one included), for an input a user
    named: :class:`MissingInputError` when nothing is there, :class:`InputError` when it is a folder
    or not a regular file (a FIFO, a socket, a device). Only ``stat`` is called, so a FIFO is never
    opened (which would wait for a writer). `what` names the input in the message ("results file"),
    `hint` (what to give instead) ends the folder's and the odd file's message."""
    p = Path(path)
    advice = f" ({hint})" if hint else ""
    try:
        mode = p.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise MissingInputError(f"{what} {p} does not exist") from None
    if stat.S_ISREG(mode):
        return p
    if stat.S_ISDIR(mode):
        raise InputError(f"{what} {p} is a folder, not a file{advice}")
    kind = next((name for test, name in _NOT_REGULAR if test(mode)), "not a regular file")
    raise InputError(f"{what} {p} is not a regular file ({kind}){advice}")


def check_writable(path: str | Path, *, what: str = "output") -> None:
    """Fail early, before expensive work, when `path` cannot be written as a file.

    Raises :class:`PathError` (an OSError) naming `what` and `path` when `path` is a directory,
    a part of its parent is a file, or the folder that would hold it is not writable. The parent
    folder need not exist yet (it is created at write time) as long as it can be created."""
    p = Path(path)
    if str(path) == "":
        raise PathError(errno.ENOENT, "is empty; give a file name", what, "''")
    if p.is_symlink():
        p = Path(os.path.realpath(p))  # the file the link points to is what gets written
    if p.is_dir():
        raise PathError(errno.EISDIR, "is a directory; give a file name inside it", what, path)
    base = _nearest_existing(p.parent if str(p.parent) else Path("."))
    if base.is_symlink() and not base.exists():
        raise PathError(errno.ENOENT, f"{base} is a broken symbolic link", what, p)
    if not base.is_dir():
        raise PathError(errno.ENOTDIR, f"{base} is a file, not a folder", what, p)
    if not os.access(base, os.W_OK | os.X_OK):
        why = "is on a read-only file system" if _read_only_fs(base) else f"folder {base} is not writable"
        raise PathError(errno.EACCES, why, what, p)
    if base == p.parent:
        _probe(base, p, what)


def _probe(folder: Path, p: Path, what: str) -> None:
    """Create and remove a temporary file in `folder`: the one sure test (permission bits do not
    bind root, and some file systems refuse files whatever the bits say)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(p.name), suffix=TMP_SUFFIX, dir=folder)
    except OSError as e:
        why = (
            "is on a read-only file system"
            if e.errno == errno.EROFS
            else f"cannot create files in {folder} ({e.strerror})"
        )
        raise PathError(e.errno or errno.EACCES, why, what, p) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def check_output_dir(path: str | Path, *, what: str = "output folder") -> None:
    """Like :func:`check_writable` for a folder that is written as a whole (created if missing)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise PathError(errno.ENOTDIR, "is a file, not a folder; give a folder path", what, p)
    check_writable(p / ".sentkit-write-check", what=what)


def _read_only_fs(p: Path) -> bool:
    try:
        return bool(os.statvfs(p).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def describe_os_error(e: OSError) -> str:
    """``<what>: <why>`` for an OSError, without the ``[Errno N]`` noise, plus a hint for common causes."""
    if isinstance(e, PathError):
        return str(e)
    why = e.strerror or str(e) or type(e).__name__
    hint = {
        errno.ENOSPC: "free some space or write to another disk; nothing was written under the final name",
        errno.EROFS: "the file system is read-only; write somewhere else",
        errno.EACCES: "check the permissions, or write somewhere else",
        errno.EPERM: "check the permissions, or write somewhere else",
        errno.EDQUOT: "disk quota exceeded; free some space or write elsewhere",
    }.get(e.errno or 0)
    if hint:
        why = f"{why} ({hint})"
    if e.filename is not None:
        where = f"{e.filename}" + (f" -> {e.filename2}" if e.filename2 is not None else "")
        return f"{where}: {why}"
    return why


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive inter-process lock on `path` for the block: the file exists while someone
    holds or waits for it and is removed by the last holder (no lock file is left behind). POSIX
    (fcntl); elsewhere a no-op, so concurrent writers must be avoided by hand. The kernel drops the
    lock when its process dies, so a killed holder never leaves it stuck (only its empty file).

    A holder removes the file before it lets go; a process that was waiting on the removed file
    sees that the name now points elsewhere (or nowhere) and locks the name afresh."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fh = open(p, "a")  # noqa: SIM115 - closed below, after the unlink
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                same = os.stat(p).st_ino == os.fstat(fh.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
        except BaseException:
            fh.close()
            raise
        fh.close()  # the file we waited on was removed by its holder: lock the name again
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)
        fh.close()  # closing drops the lock


def sha256_file(path: str | Path) -> str:
    """The sha256 (hex) of a file's bytes, read 1 MiB at a time (`sentkit.core.identity.file_digest`)."""
    return file_digest(path)


def cache_writable(d: Path, what: str = "cache", logger: logging.Logger = log) -> bool:
    """Whether folder `d` can be written (the stale temporaries of a killed write in it are then
    removed); if not, one warning on `logger`: the work goes on without writing the cache."""
    try:
        check_output_dir(d, what=what)
    except OSError as e:
        logger.warning("%s; continuing without writing the cache", describe_os_error(e))
        return False
    remove_stale_temps(d)
    return True
