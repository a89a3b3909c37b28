"""One optimisation step of any transformer method: micro-batches, gradient caching, loss scaling,
DDP synchronisation on the last backward only."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from sentkit.training.distributed import DistInfo, all_reduce_sum, gather_with_grad, sync_gradients
from sentkit.training.recipe import Batch, Recipe, Seeds

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- one step
@dataclass
class StepContext:
    recipe: Recipe
    model: nn.Module  # the TrainModule, or DDP around it
    cfg: Any
    device: torch.device
    dist: DistInfo
    scaler: Any  # torch.amp.GradScaler (disabled unless fp16)


def micro_groups(num_units: int, grad_accum: int) -> list[list[int]]:
    """Contiguous unit groups, one per micro-batch."""
    size = max(1, num_units // grad_accum) if grad_accum > 1 else max(1, num_units)
    return [list(range(s, min(num_units, s + size))) for s in range(0, num_units, size)]


def _contrastive(ctx: StepContext, views: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    a, p = (gather_with_grad(v, ctx.dist) for v in views)
    return ctx.recipe.contrastive(a, p)


def forward_backward(ctx: StepContext, batch: Batch, step: int) -> dict[str, float]:
    """Loss of one optimizer step on this rank; gradients accumulate into the parameters.

    Each rank's loss is scaled so that DDP's average over ranks is the gradient of one process on
    the whole batch: local sums are divided by the global count and multiplied by the world size;
    the contrastive loss is computed on every rank's gathered views. With grad_accum > 1 the
    micro-batches either have their own negatives, or (grad_cache) share the whole step's pool:
    views are computed without a graph first, the loss's gradient with respect to them is taken,
    and each micro-batch is re-run (same dropout) and back-propagated through them."""
    cfg, world, recipe, model = ctx.cfg, ctx.dist.world_size, ctx.recipe, ctx.model
    groups = micro_groups(batch.num_units, cfg.grad_accum)
    norms = {k: max(1.0, all_reduce_sum(float(v), ctx.dist, ctx.device)) for k, v in batch.counts.items()}
    seeds = [Seeds(cfg.seed, ctx.dist.rank, step, k) for k in range(len(groups))]
    closs = torch.zeros(())
    local = {k: 0.0 for k in norms}

    def local_loss(sums: dict[str, torch.Tensor]) -> torch.Tensor:
        total = torch.zeros((), device=ctx.device)
        for k, s in sums.items():
            total = total + s * world / norms[k]
            local[k] += float(s.detach())
        return total

    if cfg.grad_cache and len(groups) > 1 and recipe.has_contrastive:
        with torch.no_grad():
            cached = [model(batch, g, seeds[k]).views for k, g in enumerate(groups)]
        assert all(v is not None for v in cached)
        full = tuple(torch.cat([v[i] for v in cached if v is not None]).detach().requires_grad_(True) for i in (0, 1))
        closs = _contrastive(ctx, (full[0], full[1]))
        closs.backward()  # fp32 leaves: no scaling needed; the gather's backward sums over ranks
        grads: list[torch.Tensor] = [f.grad for f in full if f.grad is not None]
        assert len(grads) == 2
        start = 0
        for k, g in enumerate(groups):
            with sync_gradients(model, k == len(groups) - 1):
                out = model(batch, g, seeds[k])
                assert out.views is not None
                n = out.views[0].shape[0]
                surrogate = sum((v * gr[start : start + n]).sum() for v, gr in zip(out.views, grads))
                ctx.scaler.scale(surrogate + local_loss(out.sums)).backward()
            start += n
        closs = closs.detach().cpu()
    else:
        for k, g in enumerate(groups):
            with sync_gradients(model, k == len(groups) - 1):
                out = model(batch, g, seeds[k])
                loss = local_loss(out.sums)
                if out.views is not None:
                    cl = _contrastive(ctx, out.views) / len(groups)
                    loss = loss + cl
                    closs = closs + cl.detach().cpu()
                ctx.scaler.scale(loss).backward()
    parts = {k: all_reduce_sum(v, ctx.dist, ctx.device) / norms[k] for k, v in local.items()}
    if recipe.has_contrastive:
        parts["contrastive"] = float(closs)
    return {"loss": sum(parts.values()), **parts}


# ----------------------------------------------------------------------------- optimiser
def optimizer_step(
    params: list[torch.nn.Parameter], opt: torch.optim.Optimizer, sched: Any, scaler: Any, max_grad_norm: float
) -> float:
    """Clip the gradients, step the optimiser and the schedule; returns the norm before clipping.

    Under fp16 the scaler skips a step whose gradients overflowed (and lowers its scale): the
    schedule then stays where it is, so the learning rate follows the steps actually taken."""
    scaler.unscale_(opt)
    grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
    before = scaler.get_scale() if scaler.is_enabled() else None
    scaler.step(opt)
    scaler.update()
    if before is None or scaler.get_scale() >= before:  # the scale drops exactly when the step was skipped
        sched.step()
    return grad_norm


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
        if name.endswith("bias") or "layernorm" in name.lower() or "layer_norm" in name:
            no_decay.append(prm)
        else:
            decay.append(prm)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
