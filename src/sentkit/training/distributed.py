"""Several processes (torchrun): torch's DistributedDataParallel plus a differentiable gather.

Each rank embeds its own share of the batch. Contrastive methods gather every rank's embeddings,
so that every example of every rank is a negative; the gather's backward sums the gradient that
each rank's (identical) loss sends to this rank's rows. DistributedDataParallel then averages the
parameter gradients over ranks, bucket by bucket while the backward pass runs. Local loss sums
(MLM, reconstruction) are scaled by ``world / global count``, so the average is exactly the
gradient of one process on the concatenated batch.

Setting up a run: rank 0 alone claims the output folder and does the one-off preparation (a
tokenizer trained on the corpus, the token store), while the others wait for it under a long
timeout of their own (`main_first`); then every rank loads what rank 0 made and the checkpoint
rank 0 chose. A rank that stops while another waits for it is reported by name, never waited on
forever: its connections close and the waiting ranks raise `RankFailed`."""

from __future__ import annotations

import contextlib
import os
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
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


class RankFailed(ConnectionError):
    """Another process of the run stopped (an error, a kill, a lost machine) while this one waited
    for it. A ConnectionError, so that `sentkit` reports it as the environment's failure (exit 1)."""


def init_from_env(device_type: str, timeout_s: float | None = None) -> DistInfo:
    """Join the process group torchrun describes in the environment (no-op for one process).

    `timeout_s` bounds every collective of the training steps (NCCL's default is 10 minutes,
    gloo's 30); a process group that the caller already made is used as it is."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        kw: dict[str, Any] = {"timeout": timedelta(seconds=timeout_s)} if timeout_s else {}
        dist.init_process_group(backend="nccl" if device_type == "cuda" else "gloo", **kw)
    return DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


@contextlib.contextmanager
def main_first(info: DistInfo, timeout_s: float, what: str) -> Iterator[dict[str, Any]]:
    """Run the block on rank 0 first, then on every other rank at once.

    Rank 0 fills the yielded dict (picklable values: what it decided, where it put things); the
    other ranks enter the block with its contents once rank 0 has left it. An error in rank 0's
    block is raised on every rank (the same exception where it can be pickled). The others wait
    in a gloo group with `timeout_s` (`what` names the wait in messages): long enough for a
    preparation that takes hours, while a rank 0 that dies ends the wait at once (its socket
    closes) with `RankFailed`. One process: the block runs with an empty dict."""
    if not info.active:
        yield {}
        return
    group = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
    try:
        if info.is_main:
            shared: dict[str, Any] = {}
            try:
                yield shared
            except BaseException as e:
                _broadcast(group, info, ("error", _portable(e)), what)
                raise
            _broadcast(group, info, ("ok", shared), what)
        else:
            status, payload = _broadcast(group, info, None, what)
            if status == "error":
                raise payload
            yield payload
    finally:
        with contextlib.suppress(Exception):
            dist.destroy_process_group(group)


def _broadcast(group: Any, info: DistInfo, obj: Any, what: str) -> Any:
    box = [obj]
    try:
        dist.broadcast_object_list(box, src=0, group=group)
    except RuntimeError as e:  # gloo: "Connection closed by peer" (a rank died), or the timeout
        first = (str(e).splitlines() or [""])[0]
        who = "the other processes" if info.is_main else "rank 0"
        raise RankFailed(f"rank {info.rank}: {who} stopped while {what} ({first[:200]}); see the log of "
                         "the process that stopped first") from None
    return box[0]


def _portable(e: BaseException) -> BaseException:
    """`e` if it survives pickling (sentkit's errors do), else a RankFailed with its message."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:
        return RankFailed(f"rank 0 failed: {type(e).__name__}: {e}")


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
