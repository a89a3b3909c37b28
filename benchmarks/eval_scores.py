"""Scores of averaged GloVe-50d and all-MiniLM-L6-v2 on every task the data folder holds, both
presets, next to SentEval's own reference scores for averaged GloVe-50d.

    python benchmarks/eval_scores.py --out-dir /tmp/eval_scores --threads 1
    python benchmarks/eval_scores.py --table-only --out-dir /tmp/eval_scores   # just the table

Writes `<out-dir>/<model>_<preset>.json` (the evaluation results), `<out-dir>/senteval_reference.json`
(SentEval's own scores, below), `<out-dir>/table.json` (every figure of the table, as printed) and prints the
table, which docs/benchmarks.md shows; the committed copy is benchmarks/results/eval_scores/.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sentkit.core.io import atomic_write_text

# SentEval's scores for averaged GloVe-50d (issue 3): accuracy, or correlation x 100
REFERENCE = {
    "prototyping": {
        "MR": 69.25,
        "CR": 71.60,
        "SUBJ": 88.49,
        "MPQA": 84.13,
        "TREC": 68.0,
        "SST2": 72.71,
        "SST5": 37.74,
        "SICKE": 72.34,
        "SICKR": (72.75, 62.96),
        "STSB": (57.42, 54.71),
        "MRPC": (72.58, 79.95),
        "STS12": 51.31,
        "STS13": 45.07,
        "STS14": 49.69,
        "STS15": 53.22,
        "STS16": 51.77,
    },
    "literature": {
        "MR": 69.62,
        "CR": 70.99,
        "TREC": 67.4,
        "SST2": 72.98,
        "SST5": 36.92,
        "SICKE": 73.33,
        "SICKR": (72.75, 62.96),
        "STSB": (57.42, 54.71),
        "MRPC": (71.77, 81.41),
        "STS12": 51.31,
        "STS13": 45.07,
        "STS14": 49.69,
        "STS15": 53.22,
        "STS16": 51.77,
    },
}
MODELS = {"glove-average": "glove", "all-minilm-l6-v2": "minilm"}


def _cell(task: str, res: dict) -> tuple[str, tuple[float, ...]]:
    """Formatted score(s) of a task and the numbers compared with the reference."""
    if task == "MRPC":
        return f"{res['acc']:.2f} / {res['f1']:.2f}", (res["acc"], res["f1"])
    if task in ("SICKR", "STSB"):
        p, s = 100 * res["pearson"], 100 * res["spearman"]
        return f"{p:.2f} / {s:.2f}", (p, s)
    if task.startswith("STS"):
        v = 100 * res["all"]["spearman"]["mean"]
        return f"{v:.2f}", (v,)
    return f"{res['acc']:.2f}", (float(res["acc"]),)


def table(out_dir: Path) -> str:
    runs = {}
    for short in MODELS.values():
        for preset in ("prototyping", "literature"):
            p = out_dir / f"{short}_{preset}.json"
            if p.is_file():
                runs[short, preset] = json.loads(p.read_text())
    tasks = [
        t
        for t in (
            "MR",
            "CR",
            "SUBJ",
            "MPQA",
            "SST2",
            "SST5",
            "TREC",
            "MRPC",
            "SICKE",
            "SICKR",
            "STSB",
            "STS12",
            "STS13",
            "STS14",
            "STS15",
            "STS16",
        )
        if any(t in r["results"] for r in runs.values())
    ]
    head = ["task"]
    for preset in ("prototyping", "literature"):
        head += [
            f"SentEval GloVe ({preset[:5]}.)",
            f"sentkit GloVe ({preset[:5]}.)",
            "diff",
            f"sentkit MiniLM ({preset[:5]}.)",
        ]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    rows: dict[str, dict[str, list[float] | float | None]] = {}
    worst = 0.0
    for t in tasks:
        row = [t]
        for preset in ("prototyping", "literature"):
            ref = REFERENCE[preset].get(t)
            ref_t = ref if isinstance(ref, tuple) else ((ref,) if ref is not None else None)
            g = runs.get(("glove", preset), {}).get("results", {}).get(t)
            m = runs.get(("minilm", preset), {}).get("results", {}).get(t)
            row.append(" / ".join(f"{v:.2f}" for v in ref_t) if ref_t else "—")
            figs = rows.setdefault(t, {})
            figs[f"senteval_glove_{preset}"] = list(ref_t) if ref_t else None
            if g is not None:
                txt, vals = _cell(t, g)
                row.append(txt)
                figs[f"sentkit_glove_{preset}"] = [round(v, 2) for v in vals]
                if ref_t:
                    d = max(abs(a - b) for a, b in zip(vals, ref_t))
                    worst = max(worst, d)
                    row.append(f"{d:.2f}")
                    figs[f"diff_{preset}"] = round(d, 2)
                else:
                    row.append("—")
            else:
                row += ["—", "—"]
            row.append(_cell(t, m)[0] if m is not None else "—")
            if m is not None:
                figs[f"sentkit_minilm_{preset}"] = [round(v, 2) for v in _cell(t, m)[1]]
        lines.append("| " + " | ".join(row) + " |")
    avg_row = ["DeCLUTR avg (downstream)"]
    for preset in ("prototyping", "literature"):
        g, m = runs.get(("glove", preset)), runs.get(("minilm", preset))
        avg_row += [
            "—",
            f"{g['declutr_average']['downstream']:.2f}" if g else "—",
            "",
            f"{m['declutr_average']['downstream']:.2f}" if m else "—",
        ]
    lines.append("| " + " | ".join(avg_row) + " |")
    for preset in ("prototyping", "literature"):
        for short, key in (("glove", "sentkit_glove"), ("minilm", "sentkit_minilm")):
            if (short, preset) in runs:
                rows.setdefault("DeCLUTR avg (downstream)", {})[f"{key}_{preset}"] = round(
                    runs[short, preset]["declutr_average"]["downstream"], 2
                )
    lines.append(f"\nLargest |sentkit - SentEval| for GloVe: {worst:.2f} points.")
    rows["largest diff, GloVe"] = {"points": round(worst, 2)}
    atomic_write_text(out_dir / "table.json", json.dumps(rows, indent=1, ensure_ascii=False) + "\n")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", default="eval_scores")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--presets", default="prototyping,literature")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--table-only", action="store_true")
    args = ap.parse_args()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    reference = {p: {t: list(v) if isinstance(v, tuple) else v for t, v in r.items()} for p, r in REFERENCE.items()}
    atomic_write_text(out_dir / "senteval_reference.json", json.dumps(reference, indent=1) + "\n")
    if not args.table_only:
        from sentkit.core.identity import fingerprint
        from sentkit.evaluation import evaluate
        from sentkit.evaluation.cli import set_threads
        from sentkit.models.loading import load

        set_threads(args.threads)
        for name in args.models.split(","):
            encoder = load(name)
            for preset in args.presets.split(","):
                res = evaluate(
                    encoder,
                    tasks="all",
                    preset=preset,
                    data_dir=args.data_dir,
                    fingerprint=fingerprint(encoder, name),
                    model_name=name,
                    cache_dir=args.cache_dir,
                )
                atomic_write_text(out_dir / f"{MODELS[name]}_{preset}.json", json.dumps(res, indent=1) + "\n")
    print(table(out_dir))


if __name__ == "__main__":
    main()
