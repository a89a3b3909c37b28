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
rank 0 chose. A rank that stops (an error, a kill, a lost machine) while the others wait for it,
in start-up, group creation or any collective of a training step, is reported by name, never
waited on forever and never as an internal error: its connections close and the ranks that wait
raise `RankFailed` (`watch_peers`), naming it: of two ranks the other one; of more, the ranks whose
heartbeat (a counter that a thread of each process advances in the run's store every second) has
stopped, leaving out those that stopped only to report another's end."""

from __future__ import annotations

import contextlib
import os
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from sentkit.core.errors import SentkitError


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


class RankFailed(SentkitError, ConnectionError):
    """Another process of the run stopped (an error, a kill, a lost machine) while this one waited
    for it. A ConnectionError, so that `sentkit` reports it as the environment's failure (exit 1).
    `stopped`: the ranks that stopped, when known; `timed_out`: they did not answer in time (hung,
    or too slow) rather than closing their connections; `doing`: what this rank was doing."""

    exit_code = 1

    def __init__(
        self, message: str, stopped: list[int] | None = None, timed_out: bool = False, doing: str = ""
    ) -> None:
        super().__init__(message)
        self.stopped = stopped
        self.timed_out = timed_out
        self.doing = doing


# what the message of a failed collective, or of the store behind it, says when another rank stopped
_PEER_GONE = (
    "connection reset",
    "connection closed",
    "broken pipe",
    "connection refused",
    "end of file",
    "socket",
    "gloo",
    "nccl",
    "timed out",
    "timeout",
)


def peer_failure(e: BaseException) -> bool:
    """Whether `e` is how a collective or the run's store fails when another rank stopped or hung
    (torch's DistError, or gloo's RuntimeError naming a closed connection), not an error of this
    rank's own work."""
    if isinstance(e, RankFailed):
        return False
    if isinstance(e, dist.DistError):
        return True
    return isinstance(e, RuntimeError) and any(m in str(e).lower() for m in _PEER_GONE)


_ALIVE, _REPORTED = "sentkit/alive/{}/{}".format, "sentkit/reported/{}/{}".format
_heartbeat_started = False


def _store(timeout_s: float) -> Any:
    """A client of the run's store (torchrun's, or rank 0's without it), from the environment."""
    return dist.TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False, timeout=timedelta(seconds=timeout_s)
    )


def _restart() -> str:
    return os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")


def start_heartbeat(info: DistInfo, every_s: float = 1.0) -> None:
    """With more than two ranks: a daemon thread that adds 1 to this rank's counter in the run's
    store every `every_s` while the process lives (blocked in a collective too), so that the others
    can tell a rank that stopped from one that waits (`stopped_ranks`). Once per process."""
    global _heartbeat_started
    if info.world_size <= 2 or _heartbeat_started or "MASTER_ADDR" not in os.environ:
        return
    _heartbeat_started = True

    def beat() -> None:
        try:
            store = _store(60)
            while True:
                store.add(_ALIVE(_restart(), info.rank), 1)
                time.sleep(every_s)
        except Exception:  # the store is gone: the run is over
            return

    threading.Thread(target=beat, name="sentkit-heartbeat", daemon=True).start()


def _release_waiters() -> Any:
    """Close this process's connections of every process group, so that a rank blocked in a
    collective with this one fails now (and joins the roll call) instead of at its timeout; the
    run's store, which rank 0 holds without torchrun, is kept (returned: hold it)."""
    from torch.distributed import distributed_c10d

    def close() -> None:
        with contextlib.suppress(Exception):
            dist.destroy_process_group()

    keep = getattr(distributed_c10d, "_get_default_store", lambda: None)()
    closer = threading.Thread(target=close, daemon=True)
    closer.start()
    closer.join(10)  # a group that cannot be closed is left as it is
    return keep


def stopped_ranks(info: DistInfo, wait_s: float = 3.0) -> list[int] | None:
    """The ranks that stopped, after a collective failed: of two, the other one. Of more, those
    whose heartbeat did not advance in `wait_s`, less those that stopped to report another (this
    rank records that it reports, and closes its connections first, so that a rank that waits on
    it reports too instead of waiting). Rank 0, when it holds the store (no torchrun), keeps it up
    until the others have taken their roll call. When the store cannot be reached, rank 0 held it
    and is the one that stopped; under torchrun, None (not known)."""
    if info.world_size == 2:
        return [1 - info.rank]
    restart = _restart()
    done = "sentkit/rolled/{}/{}".format
    try:
        store = _store(wait_s)
        store.set(_REPORTED(restart, info.rank), "1")
        kept = _release_waiters()
        others = [r for r in range(info.world_size) if r != info.rank]
        before = {r: int(store.add(_ALIVE(restart, r), 0)) for r in others}
        time.sleep(wait_s)
        silent = [r for r in others if int(store.add(_ALIVE(restart, r), 0)) == before[r]]
        stopped = [r for r in silent if not store.check([_REPORTED(restart, r)])]
        store.set(done(restart, info.rank), "1")
        if info.is_main and "TORCHELASTIC_RUN_ID" not in os.environ:  # this process holds the store
            until = time.monotonic() + 3 * wait_s
            while time.monotonic() < until and not store.check([done(restart, r) for r in others if r not in stopped]):
                time.sleep(0.1)
        del kept
        return stopped
    except (RuntimeError, KeyError, ValueError):  # the store's host is gone (or no address to reach it)
        return None if "TORCHELASTIC_RUN_ID" in os.environ or info.is_main else [0]


def ranks_text(ranks: list[int] | None) -> str:
    """``rank 1``, ``ranks 1, 2`` or ``another rank``."""
    if not ranks:
        return "another rank"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


@contextlib.contextmanager
def watch_peers(info: DistInfo, what: str | Callable[[], str]) -> Iterator[None]:
    """Raise RankFailed, naming the rank that stopped, when a collective, the creation of a process
    group or the start-up fails in the block because another rank stopped or hung (`peer_failure`);
    other errors pass unchanged. `what` (or what it returns) says what this rank was doing."""
    try:
        yield
    except Exception as e:
        if not info.active or not peer_failure(e):
            raise
        timed_out = any(m in str(e).lower() for m in ("timed out", "timeout"))
        stopped = stopped_ranks(info)
        doing = what() if callable(what) else what
        first = (str(e).splitlines() or [""])[0]
        event = "did not answer in time" if timed_out else "stopped"
        raise RankFailed(
            f"rank {info.rank}: {ranks_text(stopped)} {event} while {doing} ({first[:200]}); see the "
            "log of the process that stopped first",
            stopped,
            timed_out,
            doing,
        ) from None


def init_from_env(device_type: str, timeout_s: float | None = None) -> DistInfo:
    """Join the process group torchrun describes in the environment (no-op for one process).

    `timeout_s` bounds every collective of the training steps (NCCL's default is 10 minutes,
    gloo's 30); a process group that the caller already made is used as it is."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        kw: dict[str, Any] = {"timeout": timedelta(seconds=timeout_s)} if timeout_s else {}
        with watch_peers(DistInfo(int(os.environ.get("RANK", "0")), world), "the processes started"):
            dist.init_process_group(backend="nccl" if device_type == "cuda" else "gloo", **kw)
    info = DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))
    start_heartbeat(info)
    return info


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
    with watch_peers(info, what):  # a rank that stops while the group is made is reported like any other
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
    with watch_peers(info, what):  # gloo: "Connection closed by peer" (a rank died), or the timeout
        dist.broadcast_object_list(box, src=0, group=group)
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
    import warnings

    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    with warnings.catch_warnings():  # torch's own advice for rank-local buffers is to keep it, as here
        warnings.filterwarnings("ignore", message=".*broadcast_buffers.* is deprecated", category=FutureWarning)
        return DistributedDataParallel(module, device_ids=ids, broadcast_buffers=False)


def unwrap(module: nn.Module) -> Any:
    """The module inside a DistributedDataParallel wrapper (or `module` itself)."""
    inner = getattr(module, "module", None) if hasattr(module, "no_sync") else None
    return inner if isinstance(inner, nn.Module) else module


@contextlib.contextmanager
def sync_gradients(module: nn.Module, sync: bool) -> Iterator[None]:
    """Let DDP all-reduce (FSDP reduce-scatter) gradients in this block's backward only when `sync`
    (the last micro-batch of a step); earlier backwards just accumulate locally (unsharded, under FSDP).
    The same gradient either way: the one of one process on the whole step."""
    set_sync = getattr(module, "set_requires_gradient_sync", None)  # FSDP2's switch, on every unit below
    if set_sync is not None:
        set_sync(sync)
        try:
            yield
        finally:
            set_sync(True)
        return
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
