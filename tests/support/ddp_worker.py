"""Run under torchrun: one step's gradients with every rank holding part of the batch.

argv: model_dir store_dir out_file specs_json, specs = [{"units": [...], "method": "declutr",
"config": {...}, "dropout": p or null, "reference": bool}, ...]. For each spec rank 0 saves
{"step": grads, "reference": grads} (the loop's step and the one-graph oracle, both under DDP)
into a list, in order, at out_file."""

from __future__ import annotations

import json
import sys

import torch.distributed as dist

from sentkit.core.config import from_dict
from sentkit.core.methods import get_method
from sentkit.training.distributed import init_from_env
from support.training import save, step_gradients


def main() -> None:
    model_dir, store_dir, out_file, specs_json = sys.argv[1:5]
    info = init_from_env("cpu")
    results = []
    for spec in json.loads(specs_json):
        units = spec["units"]
        share = len(units) // info.world_size
        mine = units[info.rank * share : (info.rank + 1) * share]
        method = spec.get("method", "declutr")
        cfg = from_dict(get_method(method).config_cls, {"corpus": store_dir, "out": "unused", **spec.get("config", {})})
        kw = {"method": method, "dropout": spec.get("dropout")}
        grads = {"step": step_gradients(model_dir, store_dir, cfg, mine, info, **kw)}
        if spec.get("reference"):
            grads["reference"] = step_gradients(model_dir, store_dir, cfg, mine, info, reference=True, **kw)
        results.append(grads)
    if info.rank == 0:
        save(results, out_file)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
