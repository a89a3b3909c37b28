"""Distributed helpers (torchrun / DDP semantics without the wrapper).

Each rank embeds its own documents; embeddings are gathered so that every span of every rank is a
negative. The gather's backward sums the gradients of all ranks, and parameter gradients are then
averaged over ranks, which gives exactly the gradient of one process on the concatenated batch."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1


def init_from_env(device_type: str) -> DistInfo:
    """Join the process group torchrun describes in the environment (no-op for one process)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device_type == "cuda" else "gloo")
    return DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


class _GatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:  # x [n, d] -> [world*n, d]
        world = dist.get_world_size()
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x.contiguous())
        ctx.rank, ctx.n = dist.get_rank(), x.shape[0]
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rank * ctx.n : (ctx.rank + 1) * ctx.n]


def gather_with_grad(x: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """All ranks' rows of x (same row count on every rank), differentiable."""
    if not info.active:
        return x
    return _GatherWithGrad.apply(x)  # type: ignore[no-any-return]


def all_reduce_sum(value: float, info: DistInfo, device: torch.device) -> float:
    if not info.active:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t.item())


def average_gradients(params: list[torch.nn.Parameter], info: DistInfo) -> None:
    """Average .grad over ranks with one flat all-reduce."""
    if not info.active:
        return
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= info.world_size
    offset = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[offset : offset + n].view_as(g))
        offset += n
