"""Run under torchrun: the whole training loop, job after job, in one process group (the
2-process check of scripts/gpu_check.py, tests/training/test_multiprocess.py and test_fsdp.py).

argv: spec_json = {"jobs": [{"method": "declutr", "config": {...}, "kill_at": k or null}, ...]}.
Each job runs `get_method(method).train(config)` (what `sentkit train` calls). A job with
`kill_at` never returns: rank 0 kills itself with SIGKILL (as `kill -9` would) right after it has
saved the checkpoint of step k (a file, or under distributed=fsdp the sharded folder that every
rank wrote), so the run dies mid-training with that checkpoint behind it. A job with
`"expect_error": true` must raise on every rank: each prints `rank R raised NAME: message` and
the next job runs."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import torch.distributed as dist

import sentkit.training.loop as loop
from sentkit.core.config import from_dict
from sentkit.core.methods import get_method


def kill_after_checkpoint(step: int, folder: str | None = None) -> None:
    """SIGKILL this process right after the checkpoint of `step` is saved (in a run folder named `folder`, if given:
    a phase of a multi-phase run such as llm2vec's ``2-simcse``)."""

    def killing(real: Any) -> Any:
        def save(out: str | Path, state: dict[str, Any], *args: Any) -> Path:
            path = real(out, state, *args)
            main = not dist.is_initialized() or dist.get_rank() == 0
            if main and int(state["step"]) == step and folder in (None, Path(out).name):
                os.kill(os.getpid(), signal.SIGKILL)
            return path  # type: ignore[no-any-return]

        return save

    loop.save_checkpoint = killing(loop.save_checkpoint)  # type: ignore[assignment]
    loop.save_sharded = killing(loop.save_sharded)  # distributed=fsdp: every rank saves its shard


def main() -> None:
    spec = json.loads(sys.argv[1])
    for job in spec["jobs"]:
        method = get_method(job["method"])
        if job.get("kill_at") is not None:
            kill_after_checkpoint(int(job["kill_at"]))
        if not job.get("expect_error"):
            method.train(from_dict(method.config_cls, job["config"]))
            continue
        try:
            method.train(from_dict(method.config_cls, job["config"]))
        except Exception as e:
            print(f"rank {dist.get_rank()} raised {type(e).__name__}: {e}", flush=True)
        else:
            raise SystemExit(f"rank {dist.get_rank()}: the job did not fail")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
