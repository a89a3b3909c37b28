"""Sharded embedding: one input spread over N processes (torchrun, or `sentkit embed --shard i/N`
in separate jobs), joined into one output in input order.

The input's rows are cut into parts of `block` rows (fewer when that would leave a shard without a
part: `part_rows`); shard i of N embeds parts [i*K//N, (i+1)*K//N) of the K parts. Each part is
its own file, written atomically, in a folder with `_manifest.json` (the run's settings and every part's rows):

- `.npy` output: the folder `<output>.parts/`; when the last part is written, the process that
  wrote it joins the parts into `<output>` (atomically, streamed), records the run's settings in
  `<output>.manifest.json` and removes the folder;
- `.parquet` output: `<output>` itself is the folder, `part-000000.parquet`, ... (pyarrow, pandas
  and datasets read it as one table, in input order; `_manifest.json` says when it is complete).

Parts are joined only when they come from the same run, compared by content: the model by
`sentkit.models.loading.content_id` (the hash of a folder's files, a registry name and its package's
version), the input by a SHA-256 of all its bytes, taken while its texts are counted. A part that
exists is done: a shard that is run again (after a kill, or with another shard count) embeds only
the parts still missing, and a run whose output is complete does nothing. Memory is bounded by one
block whatever the input's size. The lock that orders the shards' start and join is a file that is
removed when the last holder lets go.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentkit.core.config import ConfigError

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

MANIFEST = "_manifest.json"
FORMAT = "sentkit-embedding-parts"
PARTS_SUFFIX = ".parts"
RECORD_SUFFIX = ".manifest.json"  # beside a joined .npy: the settings it was embedded with
INFO_KEYS = ("parts", "complete", "model_name", "written")  # manifest entries that are not settings
DTYPES = ("float32", "float16")

# write_part(tmp, rows, dim, blocks, done, dtype) -> rows written: embed's streaming writers
PartWriter = Callable[..., int]


# ----------------------------------------------------------------------------- which rows
@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (0 <= index < count)."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`I/N`, e.g. ``2/8``."""
        try:
            i, n = (int(x) for x in text.split("/"))
        except ValueError:
            raise ConfigError(
                f"--shard must be I/N (shard I of N, counted from 0), e.g. --shard 0/4; got {text!r}"
            ) from None
        if n < 1:
            raise ConfigError(f"--shard {text}: N is the number of shards and must be at least 1 (e.g. --shard 0/4)")
        if not 0 <= i < n:
            raise ConfigError(
                f"--shard {text}: I must be at least 0 and less than N (shards 0/{n} to {max(n, 1) - 1}/{n})"
            )
        return cls(i, n)

    @classmethod
    def from_env(cls) -> Shard | None:
        """This process's shard under torchrun (RANK of WORLD_SIZE), or None for one process."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        return cls(int(os.environ.get("RANK", "0")), world) if world > 1 else None

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class PartsPlan:
    """`rows` texts in parts of `block` rows (one part, empty, for an empty input)."""

    rows: int
    block: int

    @property
    def count(self) -> int:
        return max(1, -(-self.rows // self.block))

    def span(self, k: int) -> tuple[int, int]:
        return k * self.block, min(self.rows, (k + 1) * self.block)

    def for_shard(self, shard: Shard) -> range:
        return range(shard.index * self.count // shard.count, (shard.index + 1) * self.count // shard.count)

    def name(self, k: int, suffix: str) -> str:
        return f"part-{k:0{max(6, len(str(self.count - 1)))}d}{suffix}"


def part_rows(n: int, block: int, shards: int) -> int:
    """Rows of a part: `block`, or fewer when `n` texts in parts of `block` would leave a shard without one (10,000
    texts at the default block of 10,000 over 2 shards: parts of 5,000, so that both work). A function of the run's
    size and shard count alone, so that every shard computes the same plan."""
    return max(1, min(block, -(-n // shards)))


def parts_folder(dst: Path) -> Path:
    """Where the parts of `dst` live: `dst` itself for Parquet, `<dst>.parts` for .npy."""
    return dst if dst.suffix.lower() == ".parquet" else dst.with_name(dst.name + PARTS_SUFFIX)


def record_path(dst: Path) -> Path:
    """The record of a joined .npy output: `<output>.manifest.json` (for a name too long to take the
    suffix, the name cut short and a hash of it in full)."""
    from sentkit.core.io import sidecar_path

    return sidecar_path(dst, RECORD_SUFFIX)


def read_manifest(folder: Path, *, path: Path | None = None, fmt: str = FORMAT) -> dict[str, Any] | None:
    """The manifest of a parts folder (or the file `path`), or None when absent or not of format
    `fmt` (embed's parts; `sentkit.sharding.prepare` passes its own)."""
    try:
        data = json.loads((path or folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == fmt else None


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    keys = sorted((set(old) | set(new)) - set(INFO_KEYS))
    return [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in keys if old.get(k) != new.get(k)]


def finished(dst: Path, settings: dict[str, Any]) -> str | None:
    """The message for an output that a run with `settings` (rows, block, dtype, model, input, ...:
    what `embed_shard` records, less `dim`) already completed, else None. A .npy output counts
    only while it is the file that run wrote (same size and modification time)."""
    if dst.suffix.lower() == ".parquet":
        record = read_manifest(dst) if dst.is_dir() else None
    else:
        record = read_manifest(dst, path=record_path(dst))
        written = (record or {}).get("written") or {}
        try:
            st = dst.stat()
        except OSError:
            return None
        if [written.get("bytes"), written.get("mtime_ns")] != [st.st_size, st.st_mtime_ns]:
            return None
    if record is None or not record.get("complete"):
        return None
    if differences({k: record.get(k) for k in settings}, settings):
        return None
    return (
        f"--output {dst} is complete: {settings.get('rows')} embeddings of this input by this model were "
        "written before; nothing to do"
    )


def is_parts_folder(folder: Path, fmt: str = FORMAT) -> bool:
    """A folder sentkit embed (or, with its `fmt`, prepare) wrote parts into (its manifest names the format)."""
    return folder.is_dir() and read_manifest(folder, fmt=fmt) is not None


def check_parts_folder(folder: Path, what: str, fmt: str = FORMAT) -> None:
    """A parts folder may be new, empty, or one that sentkit embed (or prepare, with its `fmt`)
    made; anything else is refused."""
    from sentkit.core.io import PathError, is_stale_temp

    if not folder.exists():
        return
    if not folder.is_dir():
        raise PathError(
            17, "is a file; a sharded run needs that name for its folder of parts (move the file away)", what, folder
        )
    if is_parts_folder(folder, fmt):
        return
    theirs = [p.name for p in folder.iterdir() if not is_stale_temp(p, untagged=False)]
    if theirs:
        raise PathError(
            17, f"is a folder of other files ({', '.join(sorted(theirs)[:4])}); give another --output", what, folder
        )


# ----------------------------------------------------------------------------- one shard
def embed_shard(
    dst: Path,
    shard: Shard,
    texts: Callable[[], Iterator[str]],
    n: int,
    dim: int,
    encode: Callable[[list[str]], np.ndarray],
    write_part: PartWriter,
    *,
    block: int,
    dtype: str,
    settings: dict[str, Any],
    progress: bool = True,
) -> str:
    """Embed shard `shard` of the `n` texts that `texts()` yields into the parts of `dst`, then join
    the parts if every one is there. `settings` (the model's `content_id`, the input's hash, ...)
    must match those of parts already written; a `model_name` entry is recorded, not compared.
    Returns what happened, for the user."""
    from tqdm.auto import tqdm

    from sentkit.core.io import atomic_path, remove_stale_temps

    block = part_rows(n, block, shard.count)
    plan = PartsPlan(n, block)
    folder = parts_folder(dst)
    suffix = dst.suffix.lower()
    manifest = {
        "format": FORMAT,
        "output": dst.name,
        "rows": n,
        "block": block,
        "dim": dim,
        "dtype": dtype,
        **settings,
        "parts": [{"file": plan.name(k, suffix), "rows": list(plan.span(k))} for k in range(plan.count)],
    }
    with output_lock(dst):
        done = finished(dst, {k: v for k, v in manifest.items() if k not in ("parts", "dim", "format", "output")})
        if done is not None:  # a run that another shard completed while this one loaded its model
            return done
        remove_stale_temps(dst.parent, folder.name)  # a parts folder whose removal was cut short
        _open_folder(dst, folder, manifest)
        remove_stale_temps(folder)
    mine = plan.for_shard(shard)
    todo = [k for k in mine if not (folder / plan.name(k, suffix)).is_file()]
    rows = sum(plan.span(k)[1] - plan.span(k)[0] for k in todo)
    if len(todo) < len(mine):
        log.info(
            "shard %s: %d of its %d parts were written before; embedding the other %d",
            shard,
            len(mine) - len(todo),
            len(mine),
            len(todo),
        )
    with tqdm(total=rows, desc=f"embed {shard}", unit="text", disable=not progress) as bar:
        for k, chunk in _part_texts(texts(), plan, todo):
            vectors = encode(chunk)
            with atomic_path(folder / plan.name(k, suffix)) as tmp:
                write_part(tmp, len(chunk), dim, iter([(chunk, vectors)]), bar.update, dtype=dtype)
    with output_lock(dst):
        return _finish(dst, folder, plan, suffix, shard)


@contextlib.contextmanager
def output_lock(dst: Path) -> Iterator[None]:
    """The lock that orders the shards of a run writing `dst` (``.<name>.lock`` beside it: for a
    store, the lock `train` takes on it too)."""
    from sentkit.core.io import file_lock

    with file_lock(dst.parent / f".{dst.name}.lock"):
        yield


def _open_folder(dst: Path, folder: Path, manifest: dict[str, Any]) -> None:
    """Create the parts folder with its manifest, or check that the one there is of the same run."""
    from sentkit.core.io import atomic_write_text

    if dst.suffix.lower() == ".parquet" and dst.is_file():  # embed's own single-file output (checked before)
        dst.unlink()
    check_parts_folder(folder, "--output")
    old = read_manifest(folder) if folder.is_dir() else None
    if old is None:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / MANIFEST, json.dumps(manifest, indent=1) + "\n")
        return
    diff = differences(old, manifest)
    if diff:
        raise ConfigError(
            f"--output {dst}: {folder} holds parts of an embedding run with other settings "
            f"({'; '.join(diff)}); rerun with that run's settings, or remove {folder} to start again"
        )


def _part_texts(rows: Iterator[str], plan: PartsPlan, todo: list[int]) -> Iterator[tuple[int, list[str]]]:
    """(part, its texts) for each part of `todo` (ascending), reading the input once and only as far
    as the last of them."""
    if not todo:
        return
    queue = iter(todo)
    k = next(queue)
    start, end = plan.span(k)
    buf: list[str] = []
    seen = 0
    for row, text in enumerate(rows):
        seen = row + 1
        if row < start:
            continue
        buf.append(text)
        if row + 1 == end:
            yield k, buf
            buf = []
            nxt = next(queue, None)
            if nxt is None:
                return
            k = nxt
            start, end = plan.span(k)
    if start == end:  # the one empty part of an empty input
        yield k, []
        return
    raise ConfigError(
        f"the input has {seen} texts now, but part {k} needs texts {start}-{end}: it changed while it "
        "was being embedded; run again"
    )


def _finish(dst: Path, folder: Path, plan: PartsPlan, suffix: str, shard: Shard) -> str:
    """Join the parts when all are there (the caller holds the lock); a message either way."""
    if not folder.is_dir():  # another shard joined them already
        return f"shard {shard}: done; {dst} was already written"
    missing = [k for k in range(plan.count) if not (folder / plan.name(k, suffix)).is_file()]
    if missing:
        return (
            f"shard {shard}: done; {len(missing)} of {plan.count} parts are still to be written by the other "
            f"shards (in {folder}); the last shard to finish writes {dst}"
        )
    if suffix == ".parquet":
        from sentkit.core.io import atomic_write_text

        manifest = read_manifest(folder) or {}
        atomic_write_text(folder / MANIFEST, json.dumps({**manifest, "complete": True}, indent=1) + "\n")
        return f"wrote {plan.rows} embeddings to {dst} ({plan.count} Parquet parts, in input order)"
    from sentkit.core.io import atomic_write_text

    join_npy(folder, [plan.name(k, suffix) for k in range(plan.count)], dst, plan.rows)
    st = dst.stat()
    record = {k: v for k, v in (read_manifest(folder) or {}).items() if k != "parts"}
    atomic_write_text(
        record_path(dst),
        json.dumps({**record, "complete": True, "written": {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns}}, indent=1)
        + "\n",
    )
    remove_parts(folder)
    return f"wrote {plan.rows} embeddings to {dst} (joined from {plan.count} parts)"


def remove_parts(folder: Path) -> None:
    """Remove a joined parts folder: out of the way under a temporary name first, so a kill during
    the removal leaves a temporary that the next run removes, never a half-emptied parts folder."""
    from sentkit.core.io import TMP_SUFFIX, temp_prefix

    doomed = folder.with_name(f"{temp_prefix(folder.name)}removed{TMP_SUFFIX}")
    os.replace(folder, doomed)
    shutil.rmtree(doomed)


def join_npy(folder: Path, names: list[str], dst: Path, rows: int, chunk_bytes: int = 64 << 20) -> None:
    """Concatenate .npy parts (same dim and dtype) into `dst`, atomically, a chunk at a time."""
    import numpy as np

    from sentkit.core.io import atomic_path

    first = np.load(folder / names[0], mmap_mode="r")
    dim, dtype = first.shape[1], first.dtype
    step = max(1, chunk_bytes // max(1, dim * dtype.itemsize))
    written = 0
    with atomic_path(dst) as tmp, open(tmp, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (rows, dim)}
        )
        for name in names:
            part = np.load(folder / name, mmap_mode="r")
            if part.ndim != 2 or part.shape[1] != dim or part.dtype != dtype:
                raise ConfigError(
                    f"{folder / name}: shape {part.shape} {part.dtype}, expected [*, {dim}] {dtype}; "
                    f"remove {folder} and run again"
                )
            for s in range(0, len(part), step):
                f.write(np.ascontiguousarray(part[s : s + step]).tobytes())
            written += len(part)
        if written != rows:
            raise ConfigError(
                f"the parts in {folder} hold {written} rows, the input {rows}; remove {folder} and run again"
            )
