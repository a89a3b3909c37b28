"""One DeCLUTR optimisation step: forward in length chunks, losses, backward (accumulation, gradient caching, ranks)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from sentkit.models.mlm import DeclutrModel
from sentkit.objectives.contrastive import info_nce
from sentkit.objectives.mlm import IGNORE_INDEX
from sentkit.training.batching import StepBatch, length_chunks, pad_with_labels
from sentkit.training.config import DeclutrConfig
from sentkit.training.distributed import (
    DistInfo,
    all_reduce_sum,
    gather_with_grad,
)

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- one step
@dataclass
class StepContext:
    model: DeclutrModel
    cfg: DeclutrConfig
    pad_id: int
    device: torch.device
    dist: DistInfo
    autocast: Any  # () -> context manager


def _embed_chunks(ctx: StepContext, batch: StepBatch, idx: list[int], seed: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Forward a subset of the batch (chunked by length) -> (emb [len(idx), d] in idx order, mlm sum, count)."""
    lengths = [len(batch.seqs[i]) for i in idx]
    embs: list[torch.Tensor] = []
    order: list[int] = []
    mlm_sum: torch.Tensor = torch.zeros((), device=ctx.device)
    count = 0
    budget = ctx.cfg.token_budget or (16384 if ctx.device.type == "cuda" else 1024)
    for c, chunk in enumerate(length_chunks(lengths, budget)):
        members = [idx[j] for j in chunk]
        ids, mask, lab = pad_with_labels([batch.seqs[i] for i in members], [batch.labels[i] for i in members], ctx.pad_id, ctx.device)
        with torch.random.fork_rng(devices=[ctx.device] if ctx.device.type == "cuda" else []):
            torch.manual_seed(seed * 1000 + c)  # dropout replayable (gradient caching)
            with ctx.autocast():
                e, s, k = ctx.model(ids, mask, lab if ctx.cfg.mlm else None)
        embs.append(e.float())
        order.extend(chunk)
        mlm_sum = mlm_sum + s
        count += k
    emb = torch.cat(embs)[torch.argsort(torch.tensor(order, device=ctx.device))]
    return emb, mlm_sum, count


def _contrastive(ctx: StepContext, emb: torch.Tensor, n_anchor: int, p: int) -> torch.Tensor:
    """emb [n_anchor + n_anchor*P, d] -> NT-Xent over all ranks' anchors and mean positives."""
    d = emb.shape[-1]
    anchors = emb[:n_anchor]  # [N, d]
    pos = emb[n_anchor:].view(n_anchor, p, d).mean(dim=1)  # [N, d]
    anchors = gather_with_grad(anchors, ctx.dist)
    pos = gather_with_grad(pos, ctx.dist)
    return info_nce(anchors, pos, ctx.cfg.temperature)


def _micro_indices(group: list[int], n_anchor: int, p: int) -> list[int]:
    """Sequence indices of the anchors in `group` (anchor numbers) and their P positives each."""
    return group + [n_anchor + a * p + j for a in group for j in range(p)]


def forward_backward(ctx: StepContext, batch: StepBatch, step: int) -> dict[str, float]:
    """Compute the loss of one optimizer step on this rank and accumulate gradients.

    Rank losses are scaled so that averaging gradients over ranks gives the gradient of one process
    on the whole batch. With grad_accum > 1, micro-batches either have their own negatives, or
    (grad_cache) share the whole batch's pool: embeddings are computed without a graph first, the
    loss's gradient wrt them is taken, and each micro-batch is re-run and back-propagated."""
    cfg, world = ctx.cfg, ctx.dist.world_size
    n_anchor, p = batch.num_anchors, batch.num_positives
    per_doc = cfg.num_anchors
    docs_here = n_anchor // per_doc
    micro_docs = max(1, docs_here // cfg.grad_accum) if cfg.grad_accum > 1 else docs_here
    groups = [list(range(s * per_doc, min(n_anchor, (s + micro_docs) * per_doc))) for s in range(0, docs_here, micro_docs)]
    # Global number of masked tokens normalises the MLM loss exactly across ranks and micro-batches.
    local_masked = sum(sum(1 for t in lb if t != IGNORE_INDEX) for lb in batch.labels if lb is not None)
    total_masked = max(1.0, all_reduce_sum(float(local_masked), ctx.dist, ctx.device)) if cfg.mlm else 1.0
    closs = torch.zeros(())
    mlm_total = 0.0

    if cfg.grad_cache and len(groups) > 1 and cfg.contrastive:
        with torch.no_grad():
            embs = [_embed_chunks(ctx, batch, _micro_indices(g, n_anchor, p), step * 100 + k)[0] for k, g in enumerate(groups)]
        full = _assemble(embs, groups, n_anchor, p).requires_grad_(True)
        closs = _contrastive(ctx, full, n_anchor, p)
        closs.backward()  # the gather's backward already sums over ranks
        gfull = full.grad
        assert gfull is not None
        for k, g in enumerate(groups):
            idx = _micro_indices(g, n_anchor, p)
            emb, msum, _ = _embed_chunks(ctx, batch, idx, step * 100 + k)
            surrogate = (emb * gfull[idx]).sum()
            if cfg.mlm:
                surrogate = surrogate + msum * world / total_masked
                mlm_total += float(msum.detach())
            surrogate.backward()
    else:
        for k, g in enumerate(groups):
            idx = _micro_indices(g, n_anchor, p)
            emb, msum, _ = _embed_chunks(ctx, batch, idx, step * 100 + k)
            loss = emb.new_zeros(())
            if cfg.contrastive:
                cl = _contrastive(ctx, emb, len(g), p)
                loss = loss + cl / len(groups)
                closs = closs + cl.detach().cpu() / len(groups)
            if cfg.mlm:
                loss = loss + msum * world / total_masked
                mlm_total += float(msum.detach())
            loss.backward()
    mlm_loss = all_reduce_sum(mlm_total, ctx.dist, ctx.device) / total_masked if cfg.mlm else 0.0
    c = float(closs.detach()) if cfg.contrastive else 0.0
    return {"loss": c + mlm_loss, "contrastive": c, "mlm": mlm_loss}


def _assemble(embs: list[torch.Tensor], groups: list[list[int]], n_anchor: int, p: int) -> torch.Tensor:
    """Put micro-batch embeddings back into whole-batch order [n_anchor*(1+P), d]."""
    d = embs[0].shape[-1]
    full = embs[0].new_zeros((n_anchor * (1 + p), d))
    for e, g in zip(embs, groups):
        full[_micro_indices(g, n_anchor, p)] = e
    return full


# ----------------------------------------------------------------------------- optimiser
def make_optimizer(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """AdamW with the paper's groups; the fused kernel where this torch build has it (CPU and GPU)."""
    groups = param_groups(model, weight_decay)
    try:
        return torch.optim.AdamW(groups, lr=lr, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(groups, lr=lr)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: no weight decay on biases and LayerNorm weights (as the paper)."""
    decay, no_decay = [], []
    seen: set[int] = set()
    for name, prm in model.named_parameters():
        if not prm.requires_grad or id(prm) in seen:
            continue
        seen.add(id(prm))
        if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name or "layernorm" in name.lower():
            no_decay.append(prm)
        else:
            decay.append(prm)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
