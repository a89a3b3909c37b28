"""Checkpoints: atomic, the last two kept, a torn or empty one falls back to the one before.

``<out>/checkpoint/state.pt`` is the latest, ``state.prev.pt`` the one before. A save writes a
temporary file, fsyncs it, moves the latest to ``state.prev.pt`` and renames the new one into place,
so a kill at any moment leaves at least one complete checkpoint. Tensors load on the CPU (the loop
moves them to its device); the RNG state is stored as bytes, so no ``map_location`` can turn it
into a device tensor that ``torch.set_rng_state`` rejects.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import torch

from sentkit.core.errors import InputError, SentkitError

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint/state.pt"
PREVIOUS = "checkpoint/state.prev.pt"
REQUIRED = ("model", "optimizer", "scheduler", "step", "config")


class CheckpointError(SentkitError, RuntimeError):
    """No usable checkpoint; the message names the files and what was wrong with each."""


def has_checkpoint(out: str | Path) -> bool:
    """Whether a run folder holds a checkpoint (the latest or the one before)."""
    return (Path(out) / CHECKPOINT).is_file() or (Path(out) / PREVIOUS).is_file()


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
    for rel in (CHECKPOINT, PREVIOUS):
        path = Path(out) / rel
        if not path.is_file():
            continue
        try:
            return path, int(torch.load(path, map_location="cpu", weights_only=False, mmap=True)["step"])
        except Exception:  # torn or empty: the one before
            continue
    return None


def load_checkpoint(out: str | Path, map_location: str | torch.device = "cpu") -> tuple[dict[str, Any], Path]:
    """The newest complete checkpoint of a run folder and its path; a truncated, empty or corrupt
    latest file is reported and the previous one is used."""
    problems: list[str] = []
    for rel in (CHECKPOINT, PREVIOUS):
        path = Path(out) / rel
        if not path.is_file():
            continue
        try:
            state = read_checkpoint(path, map_location)
        except Exception as e:  # torch raises many types for a torn zip
            why = "empty file" if path.stat().st_size == 0 else f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            problems.append(f"{path} ({why})")
            log.warning("checkpoint %s is truncated or corrupt (%s); trying the one before", path, why)
            continue
        if problems:
            log.warning("resuming from the previous checkpoint %s (step %d)", path, int(state["step"]))
            # the next save moves the latest file to state.prev.pt: drop the torn one so that it
            # never replaces this good checkpoint
            (Path(out) / CHECKPOINT).unlink(missing_ok=True)
        return state, path
    if problems:
        raise CheckpointError(f"no usable checkpoint: {'; '.join(problems)}; start again with --overwrite")
    raise CheckpointError(f"no checkpoint in {Path(out) / 'checkpoint'}")


def read_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """One checkpoint file (the one `load_checkpoint` chose, read by another process); ValueError
    when an entry is missing."""
    state = torch.load(path, map_location=map_location, weights_only=False)
    missing = [k for k in REQUIRED if not isinstance(state, dict) or k not in state]
    if missing:
        raise InputError(f"missing {', '.join(missing)}")
    return state  # type: ignore[no-any-return]


def rng_state() -> dict[str, bytes]:
    """The CPU generator's state as bytes (dropout on every device is re-seeded per chunk)."""
    return {"torch": bytes(torch.get_rng_state().numpy().tobytes())}


def set_rng_state(st: dict[str, Any]) -> None:
    raw = st["torch"]
    if isinstance(raw, torch.Tensor):  # older checkpoints, possibly loaded onto a device
        raw = bytes(raw.detach().to("cpu", torch.uint8).numpy().tobytes()) if raw.device.type != "meta" else None
    if raw is not None:
        torch.set_rng_state(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
