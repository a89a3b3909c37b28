"""Encode throughput of sentkit against sentence-transformers in the same precision (fp32, bf16, fp16), at 1 and 2
threads, on real Gutenberg sentences (3-60 words; all-MiniLM-L6-v2 by default).

Both libraries load the same folder; sentence-transformers in half precision is what its users write
(`model_kwargs={"dtype": torch.bfloat16}`), sentkit is `sentkit.load(name, precision=...)`. Each (threads, precision)
pair runs `--rounds` rounds that alternate which library goes first, so that machine load hits both alike; the figure
is the median round. The vectors' agreement is reported too: the cosine of sentkit's vectors to sentkit's fp32 and to
sentence-transformers' in the same precision.

    python benchmarks/precision_throughput.py [--n 2000] [--threads 1,2] [--precisions fp32,bf16,fp16] \\
        [--json benchmarks/results/precision_throughput.json]
    python benchmarks/precision_throughput.py --table benchmarks/results/precision_throughput.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from _common import gutenberg_sentences, machine

GOAL = 1.3  # sentkit's encode against sentence-transformers', at every precision


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def timed(fn: Any) -> tuple[float, np.ndarray]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, np.asarray(out, dtype=np.float32)


def measure(model: str, texts: list[str], threads: int, precision: str, rounds: int, ref: np.ndarray) -> dict[str, Any]:
    from sentence_transformers import SentenceTransformer

    import sentkit
    from sentkit.models.hub import resolve
    from sentkit.models.precision import dtype_of

    torch.set_num_threads(threads)
    ours = sentkit.load(model, precision=precision)
    st = SentenceTransformer(str(resolve(model)), device="cpu", model_kwargs={"dtype": dtype_of(precision)})
    ours.encode(texts[:64])
    st.encode(texts[:64])
    times: dict[str, list[float]] = {"sentence-transformers": [], "sentkit": []}
    vecs: dict[str, np.ndarray] = {}
    runs = {
        "sentence-transformers": lambda: st.encode(texts, batch_size=32, convert_to_numpy=True),
        "sentkit": lambda: ours.encode(texts, batch_size=32),
    }
    for r in range(rounds):
        for name in list(runs) if r % 2 == 0 else list(runs)[::-1]:
            sec, vecs[name] = timed(runs[name])
            times[name].append(sec)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "threads": threads,
        "precision": precision,
        "seconds": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "sentences_per_s": {k: round(len(texts) / v) for k, v in med.items()},
        "speedup": round(med["sentence-transformers"] / med["sentkit"], 2),
        "cosine_to_sentkit_fp32": {
            "min": float(cosines(vecs["sentkit"], ref).min()),
            "mean": float(cosines(vecs["sentkit"], ref).mean()),
        },
        "cosine_to_st_same_precision_min": float(cosines(vecs["sentkit"], vecs["sentence-transformers"]).min()),
    }


def table(data: dict[str, Any]) -> str:
    lines = [
        "| threads | precision | sentence-transformers (sentences/s) | sentkit (sentences/s) | sentkit vs ST | "
        "vs own fp32 | cosine to fp32 (min) | cosine to ST, same precision (min) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    fp32 = {r["threads"]: r["sentences_per_s"]["sentkit"] for r in data["rows"] if r["precision"] == "fp32"}
    for r in data["rows"]:
        own = r["sentences_per_s"]["sentkit"] / fp32[r["threads"]] if r["threads"] in fp32 else float("nan")
        lines.append(
            f"| {r['threads']} | {r['precision']} | {r['sentences_per_s']['sentence-transformers']:,} | "
            f"{r['sentences_per_s']['sentkit']:,} | **{r['speedup']:.2f}x** | {own:.2f}x | "
            f"{r['cosine_to_sentkit_fp32']['min']:.4f} | {r['cosine_to_st_same_precision_min']:.4f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="all-minilm-l6-v2")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--precisions", default="fp32,bf16,fp16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None, help="also write the figures here")
    ap.add_argument("--table", default=None, help="print the Markdown table of a JSON written by --json, and stop")
    args = ap.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return
    import sentkit

    texts = gutenberg_sentences(args.n)
    ref = sentkit.load(args.model).encode(texts, batch_size=32)
    tokenizer = sentkit.load(args.model).tokenizer
    tokens = [len(x) for x in tokenizer(texts, truncation=True, max_length=256)["input_ids"]]
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        for precision in args.precisions.split(","):
            row = measure(args.model, texts, threads, precision, args.rounds, ref)
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = {
        "machine": machine(),
        "model": args.model,
        "sentences": len(texts),
        "tokens": {"total": sum(tokens), "mean": round(sum(tokens) / len(tokens), 1), "max": max(tokens)},
        "goal": GOAL,
        "rows": rows,
        "met": all(r["speedup"] >= GOAL for r in rows),
    }
    print(table(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
