"""Shared by the training tests and the torchrun worker (plain functions, no pytest)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch

from sentkit.data.store import TokenStore
from sentkit.models.hub import load_mlm, special_affixes
from sentkit.training.declutr import (
    DeclutrConfig,
    DeclutrModel,
    StepContext,
    build_step_batch,
    forward_backward,
)
from sentkit.training.distributed import DistInfo, average_gradients


def small_config(corpus: str, out: str, **kw: object) -> DeclutrConfig:
    base: dict[str, object] = dict(
        corpus=corpus, out=out, num_anchors=2, num_positives=2, min_span_len=8, max_span_len=32,
        batch_size=4, progress=False, checkpoint_every=1000, log_every=1,
    )
    base.update(kw)
    return DeclutrConfig(**base)  # type: ignore[arg-type]


def step_gradients(model_dir: str, store_dir: str, cfg: DeclutrConfig, doc_ids: list[int], info: DistInfo) -> dict[str, torch.Tensor]:
    """Gradients of one step on `doc_ids` (this rank's share), averaged over ranks."""
    mlm, tok = load_mlm(model_dir)
    model = DeclutrModel(mlm, cfg.pooling)
    store = TokenStore(store_dir)
    mlm_info = (int(tok.mask_token_id), int(mlm.config.vocab_size), set(tok.all_special_ids) - {tok.unk_token_id}) if cfg.mlm else None
    batch = build_step_batch(store, doc_ids, 0, cfg, cfg.spans(), special_affixes(tok), mlm_info)
    ctx = StepContext(model, cfg, int(tok.pad_token_id), torch.device("cpu"), info, contextlib.nullcontext)
    model.zero_grad()
    forward_backward(ctx, batch, 0)
    params = [p for p in model.parameters() if p.requires_grad]
    average_gradients(params, info)
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def save(obj: object, path: str | Path) -> None:
    torch.save(obj, path)
