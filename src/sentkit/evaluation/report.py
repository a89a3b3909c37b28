"""Scores for people: main metric per task, the DeCLUTR average, Markdown tables (one run or
several side by side) and a PNG chart."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from sentkit.evaluation.tasks import ALL_TASKS, DOWNSTREAM, PROBING, get_task

log = logging.getLogger(__name__)

COCO_RECALLS = ("r1_i2t", "r5_i2t", "r10_i2t", "r1_t2i", "r5_t2i", "r10_t2i")


def _finite(v: Any, scale: float = 1.0) -> float | None:
    """``scale * v`` as a float, or None for a missing, NaN or infinite value."""
    if v is None:
        return None
    f = float(v)
    return scale * f if math.isfinite(f) else None


def task_kind(name: str, res: dict[str, Any]) -> str:
    """The protocol kind of a task: from the registry, or for a user task (not registered in
    this process) from its results (``kind``)."""
    try:
        return get_task(name).kind
    except KeyError:
        kind = res.get("kind") if isinstance(res, dict) and res.get("group") == "user" else None
        if not isinstance(kind, str):
            raise
        return kind


def task_names(runs: list[dict[str, Any]]) -> list[str]:
    """SentEval's tasks in their usual order, then the user tasks in the order they appear."""
    names = [t for t in ALL_TASKS if any(t in r["results"] for r in runs)]
    for r in runs:
        names += [t for t in r["results"] if t not in names and t not in ALL_TASKS]
    return names


def main_score(name: str, res: dict[str, Any]) -> float | None:
    """The headline number of a task, on a 0-100 scale (None when it is missing or NaN)."""
    kind = task_kind(name, res)
    if kind in ("cv", "kfold", "split"):
        return _finite(res["acc"])
    if kind == "relatedness":
        return _finite(res["spearman"], 100)
    if kind == "sts":
        return _finite(res["all"]["spearman"]["mean"], 100)
    if kind == "ranking":
        return _finite(res["mean_recall"])
    if kind == "retrieval":
        return _finite(res["ndcg_at_10"])
    return None


def declutr_score(name: str, res: dict[str, Any]) -> float | None:
    """DeCLUTR (Giorgi et al. 2021, appendix C.2): Spearman for SICK-R/STS-B, mean Spearman for
    STS12-16, mean of accuracy and F1 for MRPC, mean of the six recalls for COCO, else accuracy."""
    if name == "MRPC":
        acc, f1 = _finite(res["acc"]), _finite(res["f1"])
        return None if acc is None or f1 is None else (acc + f1) / 2
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


def _n(v: Any, digits: int) -> str:
    """A metric with `digits` decimals; "—" when it is missing, null or NaN (a bad type raises)."""
    f = _finite(v)
    return "—" if f is None else f"{f:.{digits}f}"


def detail(name: str, res: dict[str, Any]) -> str:
    """Secondary metrics in words (for the Markdown table)."""
    kind = task_kind(name, res)
    if kind == "retrieval":
        return (f"nDCG@10 {_n(res['ndcg_at_10'], 2)} / MRR@10 {_n(res['mrr_at_10'], 2)} / "
                f"Recall@100 {_n(res['recall_at_100'], 2)} ({res.get('nqueries')} queries, {res.get('ndocs')} documents)")
    if name == "MRPC":
        return f"acc {_n(res['acc'], 2)} / F1 {_n(res['f1'], 2)}"
    if kind == "relatedness":
        u = res.get("unsupervised", {})
        return (f"Pearson {_n(res['pearson'], 4)} / Spearman {_n(res['spearman'], 4)}; "
                f"cosine {_n(u.get('pearson'), 4)} / {_n(u.get('spearman'), 4)}")
    if kind == "sts":
        a = res["all"]
        return (f"Pearson mean {_n(a['pearson']['mean'], 4)} wmean {_n(a['pearson']['wmean'], 4)}; "
                f"Spearman mean {_n(a['spearman']['mean'], 4)} wmean {_n(a['spearman']['wmean'], 4)}; "
                f"concat {_n(a['concatenated']['spearman'], 4)}")
    if kind == "ranking":
        return ("i2t R@1/5/10 " + "/".join(_n(res[k], 1) for k in COCO_RECALLS[:3])
                + f" medr {_n(res['medr_i2t'], 0)}; t2i " + "/".join(_n(res[k], 1) for k in COCO_RECALLS[3:])
                + f" medr {_n(res['medr_t2i'], 0)}")
    return f"dev {_n(res.get('devacc'), 2)}"


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}"


def markdown_table(run: dict[str, Any]) -> str:
    """One run: task, score, details, time."""
    res, timings = run["results"], run.get("timings", {}).get("tasks", {})
    model, config = run.get("model", {}), run.get("config", {})
    lines = [f"Model: `{model.get('name')}` (fingerprint {model.get('fingerprint')}), "
             f"preset `{config.get('preset')}`, seed {run.get('seed')}", "",
             "| task | score | details | time (s) |", "|---|---:|---|---:|"]
    for name in task_names([run]):
        if name in res:
            t = timings.get(name, {})
            secs = t.get("classify_s", 0.0) + t.get("load_encode_s", 0.0)
            lines.append(f"| {name} | {_fmt(main_score(name, res[name]))} | {detail(name, res[name])} | {secs:.1f} |")
    for name, err in run.get("errors", {}).items():
        lines.append(f"| {name} | error | {err.splitlines()[0][:200]} | |")
    avg = declutr_average(res)
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
    """Read and check a results file written by `sentkit evaluate`. FileNotFoundError when it
    is missing; ValueError naming the file (and task) when it is not one: not UTF-8, not JSON, no
    `results`, a task without its metrics. A task whose score is NaN is kept (shown as —), with a
    warning; an unknown task name is dropped, with a warning."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{p} is a folder, not a results file (give the JSON that `sentkit evaluate -o` wrote)")
    if not p.is_file():
        raise FileNotFoundError(f"results file {p} does not exist")
    try:
        data = json.loads(p.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{p}: not a results file (not UTF-8 text; a UTF-16 or binary file?)") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: not a JSON results file ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise ValueError(f"{p}: not a sentkit results file (no 'results' object)")
    for key in ("model", "config", "timings"):
        if not isinstance(data.get(key, {}), dict):
            raise ValueError(f"{p}: not a sentkit results file ('{key}' is not an object)")
    results: dict[str, Any] = {}
    for name, res in data["results"].items():
        try:
            canonical = get_task(name).name
        except KeyError:
            if not (isinstance(res, dict) and res.get("group") == "user" and isinstance(res.get("kind"), str)):
                log.warning("%s: unknown task %r left out", p, name)
                continue
            canonical = name  # a user task: its results carry its kind
        try:
            if not isinstance(res, dict):
                raise TypeError(f"{type(res).__name__}, not an object")
            score = declutr_score(canonical, res)
            detail(canonical, res)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise ValueError(f"{p}: task {name}: malformed results ({type(e).__name__}: {e})") from None
        if score is None:
            log.warning("%s: task %s has no finite score (NaN or null); shown as —", p, name)
        results[canonical] = res
    data["results"] = results
    total = data.get("timings", {}).get("total_s")
    if total is not None and not isinstance(total, int | float):
        raise ValueError(f"{p}: timings.total_s is {total!r}, not a number")
    return data


def _label(run: dict[str, Any], path: str) -> str:
    model, config = run.get("model") or {}, run.get("config") or {}
    return f"{model.get('name')} ({config.get('preset')})" if model else path


def side_by_side(runs: list[dict[str, Any]], labels: list[str] | None = None) -> str:
    """Several runs as columns; the best score per row in bold."""
    labels = labels or [_label(r, str(i)) for i, r in enumerate(runs)]
    tasks = task_names(runs)
    lines = ["| task | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(runs)]

    def row(name: str, vals: list[float | None]) -> str:
        best = max((v for v in vals if v is not None), default=None)
        cells = [("**" + _fmt(v) + "**") if v is not None and v == best and len(runs) > 1 else _fmt(v)
                 for v in vals]
        return f"| {name} | " + " | ".join(cells) + " |"

    for t in tasks:
        lines.append(row(t, [declutr_score(t, r["results"][t]) if t in r["results"] else None for r in runs]))
    avgs = [declutr_average(r["results"]) for r in runs]
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
    tasks = task_names(runs)
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
