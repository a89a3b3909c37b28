"""Scores for people: main metric per task, the DeCLUTR average, Markdown tables (one run or
several side by side, with the MTEB tasks and averages of runs that have them) and a PNG chart."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from sentkit.evaluation.tasks import ALL_TASKS, DOWNSTREAM, KIND_SCORES, PROBING, get_task

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
    reader = KIND_SCORES.get(kind)  # a kind added with register_kind reads its own score
    return None if reader is None else _finite(reader(res))


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


def mteb_scores(run: dict[str, Any]) -> dict[str, float]:
    """A results file's MTEB scores on the 0-100 scale (its ``mteb`` section, written by
    `sentkit evaluate --mteb`): ``mteb:<task>`` (mteb's main score), ``avg:mteb`` (the mean over
    tasks) and ``avg:mteb_by_type`` (the mean over task types of the mean within each), the MTEB
    leaderboard's two averages; {} without MTEB tasks."""
    section = run.get("mteb") or {}
    out = {f"mteb:{name}": v for name, t in (section.get("tasks") or {}).items()
           if (v := _finite(t.get("main_score"))) is not None}
    avg = section.get("average") or {}
    for key, name in (("mean_task", "avg:mteb"), ("mean_type", "avg:mteb_by_type")):
        if (v := _finite(avg.get(key))) is not None:
            out[name] = v
    return out


def mteb_names(runs: list[dict[str, Any]]) -> list[str]:
    """The MTEB tasks of `runs`, in the order they were run."""
    names: list[str] = []
    for r in runs:
        names += [n for n in ((r.get("mteb") or {}).get("tasks") or {}) if n not in names]
    return names


def _mteb_detail(task: dict[str, Any]) -> str:
    parts = [f"{split}/{sub} {_n(v, 2)}" for split, subs in (task.get("scores") or {}).items() for sub, v in subs.items()]
    return f"{task.get('type')}, {task.get('main_score_name')}" + (f": {', '.join(parts[:6])}" if len(parts) > 1 else "")


def _mteb_lines(run: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(table rows, closing lines) of a run's MTEB section for `markdown_table`."""
    section = run.get("mteb")
    if not section:
        return [], []
    rows = [f"| MTEB {name} | {_fmt(_finite(t.get('main_score')))} | {_mteb_detail(t)} | "
            f"{float(t.get('evaluation_time_s') or 0.0):.1f} |" for name, t in section.get("tasks", {}).items()]
    rows += [f"| MTEB {name} | error | {' '.join(str(err).split())[:200]} | |"
             for name, err in section.get("errors", {}).items()]
    avg = section.get("average") or {}
    closing = [f"MTEB average (mteb {section.get('mteb_version')}): {_fmt(_finite(avg.get('mean_task')))} over "
               f"{avg.get('n_tasks', 0)} tasks, {_fmt(_finite(avg.get('mean_type')))} over task types; mteb's "
               f"results files: {section.get('results_dir')}/results/{str(section.get('model')).replace('/', '__')}/"
               f"{section.get('revision')}/."]
    return rows, closing


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
    mteb_rows, mteb_closing = _mteb_lines(run)
    lines += mteb_rows
    senteval = bool(res or run.get("errors") or not mteb_rows)  # an MTEB-only run has no SentEval lines
    avg = declutr_average(res)
    lines.append("")
    if senteval:
        lines.append(f"DeCLUTR average: downstream {_fmt(avg['downstream'])} ({avg['n_downstream']} tasks), "
                     f"without SNLI {_fmt(avg['downstream_without_snli'])}, probing {_fmt(avg['probing'])} "
                     f"({avg['n_probing']} tasks).")
    lines += mteb_closing
    tm = (run.get("mteb") or {}).get("timings", {}) if not senteval else run.get("timings", {})
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
    _check_mteb(p, data.get("mteb"))
    total = data.get("timings", {}).get("total_s")
    if total is not None and not isinstance(total, int | float):
        raise ValueError(f"{p}: timings.total_s is {total!r}, not a number")
    return data


def _check_mteb(p: Path, section: Any) -> None:
    """ValueError naming the file when its ``mteb`` section (from `sentkit evaluate --mteb`) is not one."""
    if section is None:
        return
    if not isinstance(section, dict) or not isinstance(section.get("tasks", {}), dict) \
            or not isinstance(section.get("errors", {}), dict) or not isinstance(section.get("average", {}), dict):
        raise ValueError(f"{p}: malformed 'mteb' section (expected tasks, errors and average objects)")
    for name, t in section.get("tasks", {}).items():
        try:
            if not isinstance(t, dict):
                raise TypeError(f"{type(t).__name__}, not an object")
            _finite(t.get("main_score"))
            _finite((section.get("average") or {}).get("mean_task"))
        except (TypeError, ValueError) as e:
            raise ValueError(f"{p}: MTEB task {name}: malformed results ({type(e).__name__}: {e})") from None


def _label(run: dict[str, Any], path: str) -> str:
    model, config = run.get("model") or {}, run.get("config") or {}
    return f"{model.get('name')} ({config.get('preset')})" if model else path


def side_by_side(runs: list[dict[str, Any]], labels: list[str] | None = None) -> str:
    """Several runs as columns; the best score per row in bold. Runs with MTEB tasks get a row per
    MTEB task and the MTEB averages beside SentEval's."""
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
    mteb = [mteb_scores(r) for r in runs]
    for t in mteb_names(runs):
        lines.append(row(f"MTEB {t}", [m.get(f"mteb:{t}") for m in mteb]))
    avgs = [declutr_average(r["results"]) for r in runs]
    lines.append(row("**downstream avg**", [a["downstream"] for a in avgs]))
    lines.append(row("downstream avg w/o SNLI", [a["downstream_without_snli"] for a in avgs]))
    lines.append(row("**probing avg**", [a["probing"] for a in avgs]))
    if any(mteb):  # the MTEB leaderboard's two averages, beside SentEval's
        lines.append(row("**MTEB avg**", [m.get("avg:mteb") for m in mteb]))
        lines.append(row("MTEB avg over task types", [m.get("avg:mteb_by_type") for m in mteb]))
    lines.append(row("total time (s)", [_total_s(r) for r in runs]))
    return "\n".join(lines) + "\n"


def _total_s(run: dict[str, Any]) -> float | None:
    """Seconds of a run: SentEval's tasks and its MTEB tasks."""
    parts = (run.get("timings", {}).get("total_s"), ((run.get("mteb") or {}).get("timings") or {}).get("total_s"))
    vals = [float(v) for v in parts if isinstance(v, int | float)]
    return sum(vals) if vals else None


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
