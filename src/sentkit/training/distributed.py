"""Several processes (torchrun): torch's DistributedDataParallel plus a differentiable gather.

Each rank embeds its own share of the batch. Contrastive methods gather every rank's embeddings,
so that every example of every rank is a negative; the gather's backward sums the gradient that
each rank's (identical) loss sends to this rank's rows. DistributedDataParallel then averages the
parameter gradients over ranks, bucket by bucket while the backward pass runs. Local loss sums
(MLM, reconstruction) are scaled by ``world / global count``, so the average is exactly the
gradient of one process on the concatenated batch."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn


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


def wrap(module: nn.Module, info: DistInfo, device: torch.device) -> nn.Module:
    """`module` under DistributedDataParallel when several processes run, else unchanged.

    Every trainable parameter must receive a gradient in each step (methods freeze what they do
    not use), so no unused-parameter search is needed."""
    if not info.active:
        return module
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=ids, broadcast_buffers=False)


def unwrap(module: nn.Module) -> Any:
    """The module inside a DistributedDataParallel wrapper (or `module` itself)."""
    inner = getattr(module, "module", None) if hasattr(module, "no_sync") else None
    return inner if isinstance(inner, nn.Module) else module


@contextlib.contextmanager
def sync_gradients(module: nn.Module, sync: bool) -> Iterator[None]:
    """Let DDP all-reduce gradients in this block's backward only when `sync` (the last
    micro-batch of a step); earlier backwards just accumulate locally."""
    if sync or not hasattr(module, "no_sync"):
        yield
        return
    with module.no_sync():  # type: ignore[operator]
        yield


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
