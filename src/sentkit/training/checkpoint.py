"""Checkpoints: atomic, the last two kept, a torn or empty one falls back to the one before.

``<out>/checkpoint/state.pt`` is the latest, ``state.prev.pt`` the one before. A save writes a
temporary file, fsyncs it, moves the latest to ``state.prev.pt`` and renames the new one into place,
so a kill at any moment leaves at least one complete checkpoint. Tensors load on the CPU (the loop
moves them to its device); the RNG state is stored as bytes, so no ``map_location`` can turn it
into a device tensor that ``torch.set_rng_state`` rejects.

Under FSDP (``distributed=fsdp``) a checkpoint is a folder, ``<out>/checkpoint/sharded`` (the one
before: ``sharded.prev``), written by torch.distributed.checkpoint: every rank writes its shard of
the model and the optimizer state (`save_sharded`), and rank 0 adds ``meta.pt`` (step, scheduler,
RNG, data position, config, progress: what ``state.pt`` holds beside the tensors). The folder is
built under a temporary name; rank 0 writes ``meta.pt`` last, once every shard and DCP's metadata
are written, then moves the latest folder to ``sharded.prev`` and renames the new one into place:
a folder without ``meta.pt`` is never used, and a kill at any moment leaves a complete one.
`restore` reads the shards back into the sharded model and optimizer (every rank, any number of
ranks: DCP reshards on load).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from sentkit.core.errors import InputError, SentkitError

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint/state.pt"
PREVIOUS = "checkpoint/state.prev.pt"
SHARDED = "checkpoint/sharded"  # distributed=fsdp: a torch.distributed.checkpoint folder
SHARDED_PREV = "checkpoint/sharded.prev"
META = "meta.pt"  # in a sharded folder: everything but the model and optimizer tensors; written last
REQUIRED = ("model", "optimizer", "scheduler", "step", "config")
REQUIRED_SHARDED = ("scheduler", "step", "config")


class CheckpointError(SentkitError, RuntimeError):
    """No usable checkpoint; the message names the files and what was wrong with each."""


def _candidates(out: str | Path, sharded: bool | None = None) -> list[Path]:
    """The checkpoints a run folder may hold, newest first: files (None or False) and sharded folders (None or
    True)."""
    rels = [*((CHECKPOINT, PREVIOUS) if sharded is not True else ()), *((SHARDED, SHARDED_PREV) if sharded else ())]
    if sharded is None:
        rels += [SHARDED, SHARDED_PREV]
    return [Path(out) / rel for rel in rels]


def has_checkpoint(out: str | Path) -> bool:
    """Whether a run folder holds a checkpoint (the latest or the one before, a file or a sharded folder)."""
    return any(p.is_file() or (p / META).is_file() for p in _candidates(out))


def save_checkpoint(out: str | Path, state: dict[str, Any]) -> Path:
    """Write `state` as the run's latest checkpoint, keeping the previous one."""
    from sentkit.core.io import atomic_path

    latest, prev = Path(out) / CHECKPOINT, Path(out) / PREVIOUS
    latest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(latest) as tmp:
        torch.save(state, tmp)
        if latest.is_file():
            os.replace(latest, prev)  # atomic_path renames tmp onto `latest` next
    return latest


def last_checkpoint(out: str | Path) -> tuple[Path, int] | None:
    """The newest complete checkpoint of a run folder and its step, read without loading its
    tensors (memory-mapped), or None when there is none."""
    found: list[tuple[Path, int]] = []
    for files in (False, True):
        for path in _candidates(out, files):
            try:
                if path.is_dir():
                    found.append((path, int(read_checkpoint(path)["step"])))
                elif path.is_file():
                    found.append(
                        (path, int(torch.load(path, map_location="cpu", weights_only=False, mmap=True)["step"]))
                    )
                else:
                    continue
                break
            except Exception:  # torn or empty: the one before
                continue
    return max(found, key=lambda f: f[1]) if found else None


def load_checkpoint(
    out: str | Path, map_location: str | torch.device = "cpu", *, sharded: bool = False
) -> tuple[dict[str, Any], Path]:
    """The newest complete checkpoint of a run folder and its path; a truncated, empty or corrupt
    latest file is reported and the previous one is used. `sharded`: the run's checkpoints are
    sharded folders (FSDP); the state holds what ``meta.pt`` holds and ``sharded``, the folder whose
    shards `restore` reads."""
    problems: list[str] = []
    latest, previous = _candidates(out, sharded)
    for path in (latest, previous):
        if not (path.is_dir() if sharded else path.is_file()):
            continue
        try:
            state = read_checkpoint(path, map_location)
        except Exception as e:  # torch raises many types for a torn zip
            empty = path.is_file() and path.stat().st_size == 0
            why = "empty file" if empty else f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}"
            problems.append(f"{path} ({why})")
            log.warning("checkpoint %s is truncated or corrupt (%s); trying the one before", path, why)
            continue
        if problems:
            log.warning("resuming from the previous checkpoint %s (step %d)", path, int(state["step"]))
            # the next save moves the latest file to state.prev.pt: drop the torn one so that it
            # never replaces this good checkpoint
            if sharded:
                import shutil

                shutil.rmtree(latest, ignore_errors=True)
            else:
                latest.unlink(missing_ok=True)
        return state, path
    if problems:
        raise CheckpointError(f"no usable checkpoint: {'; '.join(problems)}; start again with --overwrite")
    if any(p.is_file() or (p / META).is_file() for p in _candidates(out, not sharded)):
        kinds = ("file (distributed=ddp)", "sharded (distributed=fsdp)")
        have, want = (kinds[0], kinds[1]) if sharded else (kinds[1], kinds[0])
        raise CheckpointError(
            f"{Path(out) / 'checkpoint'} holds {have} checkpoints, and this run reads {want} ones: resume with "
            f"--set distributed={'ddp' if sharded else 'fsdp'}"
        )
    what = "sharded (distributed=fsdp) checkpoint" if sharded else "checkpoint"
    raise CheckpointError(f"no {what} in {Path(out) / 'checkpoint'}")


def read_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """One checkpoint file, or a sharded folder's ``meta.pt`` (the one `load_checkpoint` chose, read by
    another process); InputError when an entry (or a sharded folder's DCP metadata) is missing."""
    folder = Path(path).is_dir()
    if folder and not (Path(path) / ".metadata").is_file():
        raise InputError("missing .metadata (the shards were not all written)")
    state = torch.load(Path(path) / META if folder else path, map_location=map_location, weights_only=False)
    if folder and isinstance(state, dict):
        state["sharded"] = str(path)
    missing = [k for k in (REQUIRED_SHARDED if folder else REQUIRED) if not isinstance(state, dict) or k not in state]
    if missing:
        raise InputError(f"missing {', '.join(missing)}")
    return state  # type: ignore[no-any-return]


def save_sharded(out: str | Path, state: dict[str, Any], model: Any, optimizer: Any, info: Any) -> Path:
    """Every rank: write the sharded model and optimizer with `state` (no tensors of the model) as the run's
    latest sharded checkpoint, keeping the previous one (see the module docstring). A collective."""
    import shutil

    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    from sentkit.core.io import TMP_SUFFIX, atomic_path, make_temp_dir, temp_prefix

    latest, prev = Path(out) / SHARDED, Path(out) / SHARDED_PREV
    box = [str(make_temp_dir(latest)) if info.is_main else None]
    if info.active:
        dist.broadcast_object_list(box, src=0)
    tmp = Path(str(box[0]))
    model_sd, optim_sd = get_state_dict(model, optimizer)
    with _one_process_quiet():
        dcp.save({"model": model_sd, "optimizer": optim_sd}, checkpoint_id=tmp)  # returns once every shard is written
    if info.is_main:
        with atomic_path(tmp / META) as part:
            torch.save(state, part)
        if prev.is_dir():  # out of the way under a temporary name first: a kill in rmtree leaves no torn `prev`
            old = latest.parent / f"{temp_prefix(prev.name)}old{TMP_SUFFIX}"
            os.replace(prev, old)
            shutil.rmtree(old, ignore_errors=True)
        if latest.is_dir():
            os.replace(latest, prev)
        os.replace(tmp, latest)
    return latest


@contextlib.contextmanager
def _one_process_quiet() -> Iterator[None]:
    """DCP's warning that it runs in one process (distributed=fsdp without torchrun) is what is meant: silenced."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled", category=UserWarning)
        yield


def restore(state: dict[str, Any], model: Any, optimizer: Any) -> None:
    """Load a checkpoint's model and optimizer state: a sharded one's shards (every rank, a collective;
    `model` is sharded already and `optimizer` made over its parameters), or a file's tensors."""
    if "sharded" not in state:
        from sentkit.training.distributed import unwrap

        unwrap(model).load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        return
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    with _one_process_quiet():  # in place: each rank's shards of every tensor, and the optimizer's hyperparameters
        dcp.load({"model": model_sd, "optimizer": optim_sd}, checkpoint_id=state["sharded"])
    set_state_dict(model, optimizer, model_state_dict=model_sd, optim_state_dict=optim_sd)


def rng_state() -> dict[str, bytes]:
    """The CPU generator's state as bytes (dropout on every device is re-seeded per chunk)."""
    return {"torch": bytes(torch.get_rng_state().numpy().tobytes())}


def set_rng_state(st: dict[str, Any]) -> None:
    raw = st["torch"]
    if isinstance(raw, torch.Tensor):  # older checkpoints, possibly loaded onto a device
        raw = bytes(raw.detach().to("cpu", torch.uint8).numpy().tobytes()) if raw.device.type != "meta" else None
    if raw is not None:
        torch.set_rng_state(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
