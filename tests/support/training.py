"""Shared by the training tests and the torchrun worker (plain functions, no pytest). What the GPU
check shares with them (one step's gradients and its one-graph oracle, the torchrun launcher) lives
in scripts/check_support.py and is re-exported here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from check_support import build, free_port, one_graph_backward, step_gradients, torchrun
from sentkit.data.store import TokenStore
from sentkit.training.recipes.declutr import DeclutrConfig

__all__ = [
    "as_store",
    "build",
    "free_port",
    "one_graph_backward",
    "prepare",
    "save",
    "small_config",
    "step_gradients",
    "torchrun",
]


def small_config(corpus: str, out: str, **kw: object) -> DeclutrConfig:
    base: dict[str, object] = dict(
        corpus=corpus,
        out=out,
        num_anchors=2,
        num_positives=2,
        min_span_len=8,
        max_span_len=32,
        batch_size=4,
        progress=False,
        checkpoint_every=1000,
        log_every=1,
    )
    base.update(kw)
    return DeclutrConfig(**base)  # type: ignore[arg-type]


def save(obj: object, path: str | Path) -> None:
    torch.save(obj, path)


def prepare(corpus: str | Path, model_dir: str | Path, out: str | Path, **kw: Any) -> Path:
    from sentkit.data.store import prepare_store
    from sentkit.models.hub import load_tokenizer

    tok = load_tokenizer(str(model_dir))
    prepare_store(corpus, tok, out, show_progress=False, **kw)
    return Path(out)


def as_store(path: str | Path) -> TokenStore:
    return TokenStore(path)
