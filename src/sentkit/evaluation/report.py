"""Scores for people: main metric per task, the DeCLUTR average, Markdown tables (one run or
several side by side) and a PNG chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sentkit.evaluation.tasks import ALL_TASKS, DOWNSTREAM, PROBING, get_task

COCO_RECALLS = ("r1_i2t", "r5_i2t", "r10_i2t", "r1_t2i", "r5_t2i", "r10_t2i")


def main_score(name: str, res: dict[str, Any]) -> float | None:
    """The headline number of a task, on a 0-100 scale."""
    kind = get_task(name).kind
    if kind in ("cv", "kfold", "split"):
        return float(res["acc"])
    if kind == "relatedness":
        return 100 * float(res["spearman"])
    if kind == "sts":
        return 100 * float(res["all"]["spearman"]["mean"])
    if kind == "ranking":
        return float(res["mean_recall"])
    return None


def declutr_score(name: str, res: dict[str, Any]) -> float | None:
    """DeCLUTR (Giorgi et al. 2021, appendix C.2): Spearman for SICK-R/STS-B, mean Spearman for
    STS12-16, mean of accuracy and F1 for MRPC, mean of the six recalls for COCO, else accuracy."""
    if name == "MRPC":
        return (float(res["acc"]) + float(res["f1"])) / 2
    return main_score(name, res)


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def declutr_average(results: dict[str, Any]) -> dict[str, Any]:
    """Downstream average (with and without SNLI) and probing average over the tasks present."""
    raw = {n: declutr_score(n, r) for n, r in results.items()}
    scores: dict[str, float] = {n: v for n, v in raw.items() if v is not None}
    down = [n for n in DOWNSTREAM if n in scores]
    down_nosnli = [n for n in down if n != "SNLI"]
    probe = [n for n in PROBING if n in scores]
    return {
        "per_task": scores,
        "downstream": _mean([scores[n] for n in down]),
        "downstream_without_snli": _mean([scores[n] for n in down_nosnli]),
        "probing": _mean([scores[n] for n in probe]),
        "n_downstream": len(down), "n_probing": len(probe),
        "missing_downstream": [n for n in DOWNSTREAM if n not in scores],
        "missing_probing": [n for n in PROBING if n not in scores],
    }


def detail(name: str, res: dict[str, Any]) -> str:
    """Secondary metrics in words (for the Markdown table)."""
    kind = get_task(name).kind
    if name == "MRPC":
        return f"acc {res['acc']:.2f} / F1 {res['f1']:.2f}"
    if kind == "relatedness":
        u = res.get("unsupervised", {})
        return (f"Pearson {res['pearson']:.4f} / Spearman {res['spearman']:.4f}; "
                f"cosine {u.get('pearson', float('nan')):.4f} / {u.get('spearman', float('nan')):.4f}")
    if kind == "sts":
        a = res["all"]
        return (f"Pearson mean {a['pearson']['mean']:.4f} wmean {a['pearson']['wmean']:.4f}; "
                f"Spearman mean {a['spearman']['mean']:.4f} wmean {a['spearman']['wmean']:.4f}; "
                f"concat {a['concatenated']['spearman']:.4f}")
    if kind == "ranking":
        return ("i2t R@1/5/10 " + "/".join(f"{res[k]:.1f}" for k in COCO_RECALLS[:3])
                + f" medr {res['medr_i2t']:.0f}; t2i " + "/".join(f"{res[k]:.1f}" for k in COCO_RECALLS[3:])
                + f" medr {res['medr_t2i']:.0f}")
    return f"dev {res.get('devacc', float('nan')):.2f}"


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}"


def markdown_table(run: dict[str, Any]) -> str:
    """One run: task, score, details, time."""
    res, timings = run["results"], run.get("timings", {}).get("tasks", {})
    lines = [f"Model: `{run['model']['name']}` (fingerprint {run['model'].get('fingerprint')}), "
             f"preset `{run['config']['preset']}`, seed {run['seed']}", "",
             "| task | score | details | time (s) |", "|---|---:|---|---:|"]
    for name in ALL_TASKS:
        if name in res:
            t = timings.get(name, {})
            secs = t.get("classify_s", 0.0) + t.get("load_encode_s", 0.0)
            lines.append(f"| {name} | {_fmt(main_score(name, res[name]))} | {detail(name, res[name])} | {secs:.1f} |")
    for name, err in run.get("errors", {}).items():
        lines.append(f"| {name} | error | {err.splitlines()[0][:200]} | |")
    avg = run.get("declutr_average") or declutr_average(res)
    lines += ["", f"DeCLUTR average: downstream {_fmt(avg['downstream'])} ({avg['n_downstream']} tasks), "
              f"without SNLI {_fmt(avg['downstream_without_snli'])}, probing {_fmt(avg['probing'])} "
              f"({avg['n_probing']} tasks)."]
    tm = run.get("timings", {})
    if tm:
        lines.append(f"Time: {tm.get('total_s', 0):.1f} s total, {tm.get('encode_s', 0):.1f} s encoding "
                     f"({tm.get('sentences_encoded', 0)} sentences encoded, "
                     f"{tm.get('sentences_from_cache', 0)} from cache, "
                     f"{tm.get('sentences_requested', 0)} requested).")
    return "\n".join(lines) + "\n"


def load_run(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"results file {p} does not exist")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: not a JSON results file ({e})") from None
    if not isinstance(data, dict) or "results" not in data:
        raise ValueError(f"{p}: not a sentkit results file (no 'results' key)")
    return data


def _label(run: dict[str, Any], path: str) -> str:
    return f"{run['model']['name']} ({run['config']['preset']})" if run.get("model") else path


def side_by_side(runs: list[dict[str, Any]], labels: list[str] | None = None) -> str:
    """Several runs as columns; the best score per row in bold."""
    labels = labels or [_label(r, str(i)) for i, r in enumerate(runs)]
    tasks = [t for t in ALL_TASKS if any(t in r["results"] for r in runs)]
    lines = ["| task | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(runs)]

    def row(name: str, vals: list[float | None]) -> str:
        best = max((v for v in vals if v is not None), default=None)
        cells = [("**" + _fmt(v) + "**") if v is not None and v == best and len(runs) > 1 else _fmt(v)
                 for v in vals]
        return f"| {name} | " + " | ".join(cells) + " |"

    for t in tasks:
        lines.append(row(t, [declutr_score(t, r["results"][t]) if t in r["results"] else None for r in runs]))
    avgs = [r.get("declutr_average") or declutr_average(r["results"]) for r in runs]
    lines.append(row("**downstream avg**", [a["downstream"] for a in avgs]))
    lines.append(row("downstream avg w/o SNLI", [a["downstream_without_snli"] for a in avgs]))
    lines.append(row("**probing avg**", [a["probing"] for a in avgs]))
    lines.append(row("total time (s)", [r.get("timings", {}).get("total_s") for r in runs]))
    return "\n".join(lines) + "\n"


def plot_runs(runs: list[dict[str, Any]], out: str | Path, labels: list[str] | None = None) -> Path:
    """Grouped bar chart of the per-task (DeCLUTR) scores of one or more runs -> PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from sentkit.io import atomic_path

    labels = labels or [_label(r, str(i)) for i, r in enumerate(runs)]
    tasks = [t for t in ALL_TASKS if any(t in r["results"] for r in runs)]
    width = 0.8 / max(1, len(runs))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(tasks) + 2), 4.0))
    x = np.arange(len(tasks))
    for i, (r, lab) in enumerate(zip(runs, labels)):
        vals = [declutr_score(t, r["results"][t]) if t in r["results"] else 0.0 for t in tasks]
        ax.bar(x + i * width - 0.4 + width / 2, [v or 0.0 for v in vals], width, label=lab)
    ax.set_xticks(x)
    ax.set_xticklabels(tasks, rotation=45, ha="right")
    ax.set_ylabel("score (0-100)")
    ax.set_ylim(0, 100)
    ax.set_title("SentEval scores (DeCLUTR convention)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    target = Path(out)
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    return target
