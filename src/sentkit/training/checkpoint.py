"""Atomic checkpoints and RNG state."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- checkpoints
CHECKPOINT = "checkpoint/state.pt"


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """torch.save to a temporary sibling, then rename: a kill never leaves a torn checkpoint."""
    from sentkit.io import atomic_path

    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def _rng_state() -> dict[str, Any]:
    st: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        st["cuda"] = torch.cuda.get_rng_state_all()
    return st


def _set_rng_state(st: dict[str, Any]) -> None:
    torch.set_rng_state(st["torch"])
    if "cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])
