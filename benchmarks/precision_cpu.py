"""CPU time of one training step of the raw-text recipe's transformer phases in fp32 and in bf16 autocast
(`--set precision=bf16`), on a CPU that computes bf16 natively (AVX512-BF16 or AMX).

The steps are built as `sentkit train` builds them (`_train.sentkit_step`: the recipe's module, AdamW,
gradient clipping; only the autocast differs): phase 1 (`mlm`: 32 packed 128-token sequences of real
Gutenberg text) and phase 2 (`declutr`: 32 documents of at most 512 tokens, sentence-length spans 4-32,
MLM kept, first-last-avg pooling), on a from-scratch BERT of 4 layers at hidden 256 (the recipe's default)
and 512 (`recipe-fl-w512`), each side training its own copy from the same weights. Rounds alternate the
sides (fp32 bf16, bf16 fp32, ...); the measure is CPU seconds per step (`time.process_time`, the budget
study's unit). Before timing, both sides' loss on the first batch with dropout off shows what bf16 changes.

    OMP_NUM_THREADS=1 python benchmarks/precision_cpu.py [--hidden 256,512] [--phases mlm,declutr] \\
        [--steps 4 --repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from _common import gutenberg_sentences, machine
from _train import (
    SCRATCH_ARCH,
    MemoryStore,
    disable_dropout,
    interleaved,
    per_step,
    ratio_summary,
    scratch_dir,
    sentkit_step,
    tokenize,
)

SETTINGS = {  # the raw-text recipe's phase settings (sentkit.training.raw_text.RawTextConfig's defaults)
    "mlm": {"batch_size": 32, "seq_len": 128, "lr": 5e-4, "weight_decay": 0.01},
    "declutr": {
        "batch_size": 32,
        "lr": 5e-4,
        "min_span_len": 4,
        "max_span_len": 32,
        "max_doc_tokens": 512,
        "pooling": "first-last-avg",
    },
}


def scratch_model(root: Path, hidden: int) -> Path:
    """A from-scratch BERT (4 layers, `hidden`, heads of 64, FFN 4 x hidden; 130 positions as the recipe's)."""
    return scratch_dir(
        root / f"scratch-{hidden}",
        {**SCRATCH_ARCH, "hidden": hidden, "heads": hidden // 64, "intermediate": 4 * hidden, "max_positions": 130},
    )


def bench(phase: str, path: Path, args: argparse.Namespace) -> dict[str, Any]:
    from sentkit.core.methods import method_target
    from sentkit.training.loop import autocast_factory
    from sentkit.training.step import forward_backward

    cls = method_target(phase)
    cfg = cls.config_cls(corpus="-", out="-", **SETTINGS[phase])
    cpu = torch.device("cpu")
    sides = {p: sentkit_step(cls, cfg, path) for p in ("fp32", "bf16")}
    for p, sk in sides.items():
        sk.module.autocast = autocast_factory(cpu, p)
    recipe = sides["fp32"].recipe
    n = cfg.batch_size * args.steps
    sents = gutenberg_sentences(n * (128 if phase == "mlm" else 512) // 12, seed=4)
    docs = [
        d[:512] for d in tokenize(recipe.tokenizer, [" ".join(sents[i : i + 25]) for i in range(0, len(sents), 25)])
    ]
    store = MemoryStore([d for d in docs if len(d) >= 2 * cfg.max_span_len] if phase == "declutr" else docs)
    recipe.units(store)
    units = [list(range(i * cfg.batch_size, (i + 1) * cfg.batch_size)) for i in range(args.steps)]
    batches = [recipe.batch(store, u, i) for i, u in enumerate(units)]
    # the first batch's loss, dropout off, from the same weights
    check = {}
    for p in sides:
        sk = sentkit_step(cls, cfg, path)
        sk.module.autocast = autocast_factory(cpu, p)
        disable_dropout(sk.module)
        check[p] = float(forward_backward(sk.ctx, batches[0], 0)["loss"])
    res = interleaved(
        {p: per_step(lambda i, sk=sk: sk(batches[i], i), args.steps, time.process_time) for p, sk in sides.items()},
        args.repeats,
    )
    r = res["rounds"]
    return {
        "phase": phase,
        "first_batch_loss": check,
        "cpu_s_per_step": {p: statistics.median(r[p]["step"]) for p in sides},
        "bf16_speedup": ratio_summary(r["bf16"]["step"], r["fp32"]["step"]),
        "rounds": r,
        "load": res["load"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hidden", default="256,512")
    ap.add_argument("--phases", default="mlm,declutr")
    ap.add_argument("--steps", type=int, default=4, help="steps per round")
    ap.add_argument("--repeats", type=int, default=3, help="timed rounds per side (after one warm-up round)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    native = bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    out: dict[str, Any] = {"machine": machine(), "threads": args.threads, "native_bf16": native, "results": []}
    print(f"{out['machine']}; {args.threads} thread(s); native bf16: {native}")
    print(
        "| phase | hidden | fp32 CPU s/step | bf16 CPU s/step | speed-up (median, min-max) "
        "| first-batch loss fp32 / bf16 |"
    )
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for hidden in (int(h) for h in args.hidden.split(",")):
            path = scratch_model(Path(tmp), hidden)
            for phase in args.phases.split(","):
                r = {"hidden": hidden, **bench(phase, path, args)}
                out["results"].append(r)
                s, c, sp = r["cpu_s_per_step"], r["first_batch_loss"], r["bf16_speedup"]
                print(
                    f"| {phase} | {hidden} | {s['fp32']:.2f} | {s['bf16']:.2f} | {sp['median']:.2f}x "
                    f"({sp['min']:.2f}-{sp['max']:.2f}) | {c['fp32']:.4f} / {c['bf16']:.4f} |",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
