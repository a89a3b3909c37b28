"""Sharded prepare: one corpus tokenized by N processes (torchrun, or `sentkit prepare --shard I/N`
in separate jobs) into one store, the store that one process writes (the same tokens.bin and
offsets.npy, byte for byte).

The corpus's files (`corpus_files` order; a single file, a .jsonl, a Parquet file or a saved
dataset is one file) are cut into parts of `block` files, and shard i of N tokenizes parts
[i*K//N, (i+1)*K//N) of the K parts, as `sentkit.sharding.embed` cuts an embedding input (its
`Shard`, `PartsPlan`, lock, manifest and parts-folder checks are reused here). Each part is a folder
``<out>.parts/part-000000/`` (tokens.bin, offsets.npy from 0, the lengths of the pieces dropped as
too short, the part's counts), built in a temporary sibling and renamed into place, so a part that
exists is done: a shard killed (even with -9) and run again tokenizes only its missing parts. When
the last part is written, the process that wrote it (under the store's lock, the one `train`
takes) concatenates the parts into the store at `<out>`, streamed, and removes the parts folder.

Parts are joined only when they come from the same run: the manifest records the settings, the
tokenizer's fingerprint and the corpus's files (names, sizes and modification times), and a run
with other ones is refused. The store's meta.json records the run, so any shard of a finished run,
run again, does nothing.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.config import ConfigError
from sentkit.core.identity import config_id, prepare_input_id
from sentkit.data.corpus import (
    CorpusStats,
    DocStream,
    _is_hf_dataset_dir,
    corpus_files,
    iter_document_streams,
    iter_file_streams,
)
from sentkit.data.store import (
    ByteMeter,
    LengthRule,
    MinTokensRule,
    PrepareReport,
    PrepareSettings,
    Tokenized,
    check_store_target,
    cut_kinds,
    progress_bar,
    read_store_meta,
    tokenize_into,
    tokenizer_fingerprint,
    write_store,
)
from sentkit.sharding.embed import (
    MANIFEST,
    PARTS_SUFFIX,
    PartsPlan,
    Shard,
    check_parts_folder,
    differences,
    output_lock,
    read_manifest,
    remove_parts,
)

log = logging.getLogger(__name__)

FORMAT = "sentkit-store-parts"
MAX_PARTS = 1024  # files are grouped so that a corpus of many small files has at most this many parts
REPORT = "part.json"


def output_error(e: OSError, given: str | Path, what: str) -> OSError | None:
    """`e` reworded to name the output as the user gave it (``<what> <given>: ...``) when it is about a
    file that a write keeps in or beside that output (its write check, ``.<name>.lock``, temporary
    siblings, ``<name>.parts``); None for any other error (a corpus file's, say)."""
    from sentkit.core.io import PathError, describe_os_error

    if e.filename is None:
        return None
    out, p = Path(os.path.realpath(given)), Path(os.path.realpath(e.filename))
    parts = out.with_name(out.name + PARTS_SUFFIX)
    ours = out in p.parents or p == parts or parts in p.parents
    ours = ours or (p.parent == out.parent and p.name.startswith(f".{out.name}."))
    if not ours:
        return None
    if isinstance(e, PathError):  # the write check's: its reason holds, its file name does not
        return PathError(e.errno or errno.EACCES, e.strerror or str(e), what, given)
    why = describe_os_error(OSError(e.errno, e.strerror or type(e).__name__))  # with the hint for its errno
    fix = "" if why != e.strerror else f"; give {what} in a folder you can write to"
    return PathError(e.errno or errno.EIO, f"cannot write in {p.parent}: {why}{fix}", what, given)


@contextlib.contextmanager
def naming_output(given: str | Path, what: str) -> Iterator[None]:
    """Errors of the files kept in or beside the output `given` (a lock, a temporary folder) name
    `given` as the user wrote it, not the lock or temporary file (:func:`output_error`)."""
    try:
        yield
    except OSError as e:
        named = output_error(e, given, what)
        if named is None:
            raise
        raise named from None


def store_parts_folder(out: Path) -> Path:
    """Where the parts of the store `out` live while shards write them: ``<out>.parts``."""
    return out.with_name(out.name + PARTS_SUFFIX)


def shard_files(corpus: Path) -> list[Path]:
    """What the shards share: a folder corpus's files, or the corpus itself (one part)."""
    if corpus.is_dir() and not _is_hf_dataset_dir(corpus):
        return corpus_files(corpus)  # empty: the one part's read raises the reader's own error
    return []


def prepare_shard(
    corpus: str | Path,
    tokenizer: Any,
    out: str | Path,
    shard: Shard,
    settings: PrepareSettings,
    *,
    window: int | None,
    rule: LengthRule | MinTokensRule | None = None,
    what: str = "--out",
    show_progress: bool = True,
    block: int | None = None,
) -> str:
    """Tokenize shard `shard` of `corpus`'s files into the parts of the store `out`, then join the
    parts into the store if every one is there. Returns what happened, for the user."""
    corpus_p, out_p = Path(corpus), check_store_target(out, what=what)
    files = shard_files(corpus_p)
    n = max(1, len(files))
    plan = PartsPlan(n, block or -(-n // MAX_PARTS))
    run = {
        "format": FORMAT,
        "corpus": str(corpus),
        "files": len(files),
        "block": plan.block,
        "input": prepare_input_id(corpus_p, files),
        "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer),
        "window": window,
        **{k: getattr(settings, k) for k in settings.__dataclass_fields__},
    }
    kinds = cut_kinds(tokenizer) if window is not None and settings.unit == "document" else None
    if kinds is not None:
        run["cuts"] = list(kinds)  # where its windows end: parts cut otherwise are not joined to them
    run_id = config_id(run)
    manifest = {**run, "parts": [{"file": plan.name(k, ""), "files": list(plan.span(k))} for k in range(plan.count)]}
    folder = store_parts_folder(out_p)
    with output_lock(out_p):
        if _finished(out_p, run_id):
            return f"{what} {out_p} is complete: this corpus was prepared into it before; nothing to do"
        _open_folder(folder, manifest, what)
    mine = plan.for_shard(shard)
    todo = [k for k in mine if not (folder / plan.name(k, "")).is_dir()]
    if len(todo) < len(mine):
        log.info(
            "shard %s: %d of its %d parts were written before; tokenizing the other %d",
            shard,
            len(mine) - len(todo),
            len(mine),
            len(todo),
        )
    size = _bytes(corpus_p, files, plan, todo)
    with progress_bar(size, show=show_progress, desc=f"prepare {shard}") as bar:
        meter = ByteMeter(bar.update) if size is not None else None
        for k in todo:
            _write_part(
                folder,
                plan,
                k,
                corpus_p,
                files,
                tokenizer,
                settings,
                window=window,
                kinds=kinds,
                bar=bar,
                meter=meter,
            )
    with output_lock(out_p):
        return _finish(out_p, folder, plan, shard, corpus, tokenizer, settings, run_id, rule=rule, what=what)


def _finished(out: Path, run_id: str) -> bool:
    meta = read_store_meta(out)
    return meta is not None and (meta.get("sharded") or {}).get("run") == run_id


def _open_folder(folder: Path, manifest: dict[str, Any], what: str) -> None:
    from sentkit.core.io import atomic_write_text, remove_stale_temps

    remove_stale_temps(folder.parent, folder.name)  # a parts folder whose removal was cut short
    check_parts_folder(folder, what, FORMAT)
    old = read_manifest(folder, fmt=FORMAT) if folder.is_dir() else None
    if old is None:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    else:
        diff = differences(old, manifest)
        if diff:
            raise ConfigError(
                f"{what}: {folder} holds parts of a prepare run with other settings or another corpus "
                f"({'; '.join(diff)}); rerun with that run's settings, or remove {folder} to start again"
            )
    remove_stale_temps(folder)  # the part a killed shard was writing


def _part_files(files: list[Path], plan: PartsPlan, k: int) -> list[Path]:
    start, end = plan.span(k)
    return files[start:end]


def _bytes(corpus: Path, files: list[Path], plan: PartsPlan, todo: list[int]) -> int | None:
    from sentkit.data.corpus import corpus_size

    if not files:
        return corpus_size(corpus) if todo else 0
    try:
        return sum(f.stat().st_size for k in todo for f in _part_files(files, plan, k))
    except OSError:
        return None


def _write_part(
    folder: Path,
    plan: PartsPlan,
    k: int,
    corpus: Path,
    files: list[Path],
    tokenizer: Any,
    settings: PrepareSettings,
    *,
    window: int | None,
    kinds: tuple[str, ...] | None,
    bar: Any,
    meter: ByteMeter | None,
) -> None:
    from sentkit.core.io import make_temp_dir

    t0, started = time.perf_counter(), time.time()
    stats = CorpusStats()
    progress = meter.read if meter is not None else None
    docs: Iterator[DocStream]
    if files:
        docs = iter_file_streams(_part_files(files, plan, k), stats=stats, progress=progress)
    else:
        docs = iter_document_streams(
            corpus, field=settings.text_field, txt_mode=settings.txt_mode, stats=stats, progress=progress
        )
    final = folder / plan.name(k, "")
    tmp = make_temp_dir(final)
    try:
        done = tokenize_into(tmp, docs, tokenizer, settings, window=window, bar=bar, meter=meter, kinds=kinds)
        np.save(tmp / "offsets.npy", done.offsets)
        np.save(tmp / "short.npy", done.short)
        report = {
            **{
                f: getattr(done.rep, f)
                for f in ("documents_read", "kept", "too_short", "pieces_from_splits", "tokens_kept")
            },
            "seconds": time.perf_counter() - t0,
            "started": started,  # wall clock: the run's time is from the first part's start to the join
            "corpus": stats.as_dict(),
        }
        (tmp / REPORT).write_text(json.dumps(report) + "\n")
        for name in ("offsets.npy", "short.npy", REPORT):
            with open(tmp / name, "rb") as f:
                os.fsync(f.fileno())
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _finish(
    out: Path,
    folder: Path,
    plan: PartsPlan,
    shard: Shard,
    corpus: str | Path,
    tokenizer: Any,
    settings: PrepareSettings,
    run_id: str,
    *,
    rule: LengthRule | MinTokensRule | None,
    what: str,
) -> str:
    """Join the parts into the store when all are there (the caller holds the lock)."""
    if not folder.is_dir():
        return f"shard {shard}: done; {out} was already written"
    names = [plan.name(k, "") for k in range(plan.count)]
    missing = [nm for nm in names if not (folder / nm).is_dir()]
    if missing:
        return (
            f"shard {shard}: done; {len(missing)} of {plan.count} parts are still to be written by the other "
            f"shards (in {folder}); the last shard to finish writes the store {out}"
        )
    from sentkit.core.io import make_temp_dir, remove_stale_temps

    remove_stale_temps(out.parent, out.name)
    tmp = make_temp_dir(out)
    try:
        done, stats, seconds, part_seconds = _join(folder, names, tmp / "tokens.bin")
        rep = write_store(
            tmp,
            out,
            corpus,
            tokenizer,
            settings,
            done,
            stats,
            seconds=seconds,
            rule=rule,
            what=what,
            extra={"sharded": {"run": run_id, "parts": plan.count, "part_seconds": part_seconds}},
        )
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    remove_parts(folder)
    return (
        f"{rep.summary(settings.min_doc_tokens)} (wall time, from the first part's start to the join; "
        f"the parts took {part_seconds:.1f} s summed over the shards)\n"
        f"store written to {out} (joined from {plan.count} parts)"
    )


def _join(folder: Path, names: list[str], tokens: Path) -> tuple[Tokenized, CorpusStats, float, float]:
    """Concatenate the parts' tokens.bin into `tokens` (streamed, fsynced), their offsets shifted,
    their counts summed; the first examples of each skip reason kept in corpus order. Also returns
    the run's wall time (from the earliest part's start to now) and the parts' seconds summed."""
    rep, stats = PrepareReport(), CorpusStats()
    offsets, shorts = [np.zeros(1, dtype=np.int64)], []
    seconds, total, starts = 0.0, 0, []
    with open(tokens, "wb") as fout:
        for name in names:
            part = folder / name
            with open(part / "tokens.bin", "rb") as fin:
                shutil.copyfileobj(fin, fout, 16 << 20)
            offs = np.load(part / "offsets.npy")
            offsets.append(offs[1:] + total)
            total += int(offs[-1])
            shorts.append(np.load(part / "short.npy"))
            r = json.loads((part / REPORT).read_text())
            for f in ("documents_read", "kept", "too_short", "pieces_from_splits", "tokens_kept"):
                setattr(rep, f, getattr(rep, f) + int(r[f]))
            seconds += float(r["seconds"])
            if "started" in r:
                starts.append(float(r["started"]))
            for key, value in r["corpus"].items():
                if key == "examples":
                    for reason, ids in value.items():
                        ex = stats.examples.setdefault(reason, [])
                        ex.extend(ids[: 3 - len(ex)])
                else:
                    setattr(stats, key, getattr(stats, key) + int(value))
        fout.flush()
        os.fsync(fout.fileno())
    all_offsets = np.concatenate(offsets)
    if int(all_offsets[-1]) != tokens.stat().st_size // 4:
        raise ConfigError(
            f"the parts in {folder} hold {tokens.stat().st_size // 4} tokens, their offsets "
            f"{int(all_offsets[-1])}; remove {folder} and run again"
        )
    wall = time.time() - min(starts) if starts else seconds
    tok = Tokenized(rep, all_offsets, np.concatenate(shorts) if shorts else np.zeros(0, np.int64))
    return tok, stats, wall, seconds
