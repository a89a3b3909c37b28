"""Run under torchrun: one DeCLUTR step's gradients with every rank holding part of the batch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).parent))

from _helpers import save, small_config, step_gradients

from sentkit.training.distributed import init_from_env


def main() -> None:
    model_dir, store_dir, out_file, docs_json = sys.argv[1:5]
    info = init_from_env("cpu")
    docs = json.loads(docs_json)
    share = len(docs) // info.world_size
    cfg = small_config(store_dir, "unused")
    grads = step_gradients(model_dir, store_dir, cfg, docs[info.rank * share : (info.rank + 1) * share], info)
    if info.rank == 0:
        save(grads, out_file)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
