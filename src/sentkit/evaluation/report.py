"""Scores for people: main metric per task, the DeCLUTR average, Markdown tables (one run or
several side by side, with the MTEB tasks and averages of runs that have them) and a PNG chart.

Every average says how many tasks it covers, and averages of runs over different task sets are marked
as not comparable (with a footnote naming the tasks that differ); a failed task is a row giving its
reason in a few words (the full message stays in the results file); MTEB figures are mteb's unrounded
scores, rounded only when printed; bold marks the best value of a row in its own direction (the
highest score, the shortest time), and only where the runs cover the same tasks. An MTEB task scored on a
local subset of its data (``--allow-subset``) is a row of its own, marked (subset), and stays out of the MTEB
averages unless asked (`include_subsets`); a run's model settings (``model.settings``: pooling, attention,
precision) are part of its label, so two settings of one model are two columns."""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path
from typing import Any

from sentkit.core.errors import InputError
from sentkit.core.io import require_file
from sentkit.evaluation.tasks import (
    ALL_TASKS,
    DOWNSTREAM,
    KIND_SCORES,
    PROBING,
    cohort,
    find_task,
    get_task,
)

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
    """The tasks of `runs`, scored or failed (``errors``): SentEval's in their usual order, then the
    user tasks in the order they appear."""

    def tasks(r: dict[str, Any]) -> list[str]:
        return [*r["results"], *(r.get("errors") or {})]

    names = [t for t in ALL_TASKS if any(t in tasks(r) for r in runs)]
    for r in runs:
        names += [t for t in tasks(r) if t not in names and t not in ALL_TASKS]
    return names


# the key of a kind's headline score in a task's results, for a task this process has no spec of
KIND_METRICS = {
    "cv": "acc",
    "kfold": "acc",
    "split": "acc",
    "relatedness": "spearman",
    "sts": "spearman",
    "ranking": "mean_recall",
    "retrieval": "ndcg_at_10",
}


def main_score(name: str, res: dict[str, Any]) -> float | None:
    """The headline number of a task, on a 0-100 scale (None when it is missing or NaN): its spec's
    `metric`, read where its kind keeps it."""
    kind = task_kind(name, res)
    spec = find_task(name)
    metric = spec.metric if spec is not None and spec.kind == kind else KIND_METRICS.get(kind, "")
    if kind in ("cv", "kfold", "split", "ranking", "retrieval"):
        return _finite(res[metric])
    if kind == "relatedness":
        return _finite(res[metric], 100)
    if kind == "sts":
        return _finite(res["all"][metric]["mean"], 100)
    reader = KIND_SCORES.get(kind)  # a kind added with register_kind reads its own score
    return None if reader is None else _finite(reader(res))


def declutr_score(name: str, res: dict[str, Any]) -> float | None:
    """DeCLUTR (Giorgi et al. 2021, appendix C.2): Spearman for SICK-R/STS-B, mean Spearman for
    STS12-16, mean of accuracy and F1 for a task scored with F1 too (MRPC: its spec's `f1`), mean of the
    six recalls for COCO, else accuracy."""
    spec = find_task(name)
    if spec is not None and spec.f1:
        acc, f1 = _finite(res["acc"]), _finite(res["f1"])
        return None if acc is None or f1 is None else (acc + f1) / 2
    return main_score(name, res)


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def declutr_members() -> tuple[list[str], list[str]]:
    """The downstream and the probing tasks DeCLUTR's averages take, in the report's order: those whose
    spec says `in_declutr_average` (a new task joins only by saying so)."""
    down = [n for n in DOWNSTREAM if get_task(n).in_declutr_average]
    return down, [n for n in PROBING if get_task(n).in_declutr_average]


def declutr_average(results: dict[str, Any]) -> dict[str, Any]:
    """Downstream average (with and without SNLI) and probing average over the tasks present of those
    that join DeCLUTR's averages (`declutr_members`: SentEval's 18 and 10)."""
    raw = {n: declutr_score(n, r) for n, r in results.items()}
    scores: dict[str, float] = {n: v for n, v in raw.items() if v is not None}
    members, probers = declutr_members()
    down = [n for n in members if n in scores]
    without = set(cohort("downstream_without_snli"))
    down_nosnli = [n for n in down if n in without]
    probe = [n for n in probers if n in scores]
    return {
        "per_task": scores,
        "downstream": _mean([scores[n] for n in down]),
        "downstream_without_snli": _mean([scores[n] for n in down_nosnli]),
        "probing": _mean([scores[n] for n in probe]),
        "n_downstream": len(down),
        "n_probing": len(probe),
        "missing_downstream": [n for n in members if n not in scores],
        "missing_probing": [n for n in probers if n not in scores],
    }


SUBSET = "(subset)"  # beside an MTEB task scored on a local subset of its data (--allow-subset)
SUBSET_NOTE = (
    "(subset): scored with `--allow-subset` on a local copy whose splits or sizes differ from mteb's metadata; "
    "not comparable with a full run of the task"
)


def subset_tasks(run: dict[str, Any]) -> set[str]:
    """The MTEB tasks of a run scored on a local subset of their data (``mteb.local_copies[task].subset``, written
    by `sentkit evaluate --mteb TASK=DIR --allow-subset`)."""
    copies = (run.get("mteb") or {}).get("local_copies") or {}
    return {n for n, c in copies.items() if isinstance(c, dict) and c.get("subset")}


def mteb_tasks(run: dict[str, Any], *, include_subsets: bool = True) -> dict[str, dict[str, Any]]:
    """A run's MTEB tasks with a finite main score: {task: its summary} (``mteb.tasks``, written by
    `sentkit evaluate --mteb`; ``main_score`` is mteb's unrounded score x 100 in files written since
    sentkit kept it, mteb's own figure in older ones); those scored on a local subset only with
    `include_subsets`."""
    tasks = (run.get("mteb") or {}).get("tasks") or {}
    subsets = set() if include_subsets else subset_tasks(run)
    return {n: t for n, t in tasks.items() if _finite(t.get("main_score")) is not None and n not in subsets}


def mteb_average(run: dict[str, Any], *, include_subsets: bool = False) -> dict[str, Any]:
    """The MTEB leaderboard's two averages of a run, computed here from its tasks' unrounded main
    scores (:func:`sentkit.evaluation.mteb_adapter.averages`), with the tasks they cover (a task scored
    on a local subset as ``<task> (subset)``); the subset tasks only with `include_subsets`."""
    from sentkit.evaluation.mteb_adapter import averages

    tasks = mteb_tasks(run, include_subsets=include_subsets)
    avg = averages({n: {"main_score": _finite(t["main_score"]), "type": str(t.get("type"))} for n, t in tasks.items()})
    subsets = subset_tasks(run)
    return {**avg, "tasks": [f"{n} {SUBSET}" if n in subsets else n for n in tasks]}


def mteb_scores(run: dict[str, Any]) -> dict[str, float]:
    """A results file's MTEB scores on the 0-100 scale (its ``mteb`` section, written by
    `sentkit evaluate --mteb`): ``mteb:<task>`` (mteb's main score; ``mteb:<task> (subset)`` for one scored
    on a local subset), ``avg:mteb`` (the mean over tasks) and ``avg:mteb_by_type`` (the mean over task types
    of the mean within each), the MTEB leaderboard's two averages, from the unrounded scores of the tasks
    scored on their full data; {} without MTEB tasks."""
    subsets = subset_tasks(run)
    out = {
        f"mteb:{name}" + (f" {SUBSET}" if name in subsets else ""): float(_finite(t["main_score"]) or 0.0)
        for name, t in mteb_tasks(run).items()
    }
    avg = mteb_average(run)
    for key, name in (("mean_task", "avg:mteb"), ("mean_type", "avg:mteb_by_type")):
        if avg.get(key) is not None:
            out[name] = float(avg[key])
    return out


def mteb_names(runs: list[dict[str, Any]]) -> list[str]:
    """The MTEB tasks of `runs`, scored or failed (``mteb.errors``), in the order they were run, each once."""
    names: dict[str, None] = {}
    for r in runs:
        section = r.get("mteb") or {}
        tasks, errors = section.get("tasks") or {}, section.get("errors") or {}
        order = [*(section.get("tasks_requested") or []), *tasks, *errors]
        names.update((n, None) for n in order if n in tasks or n in errors)
    return list(names)


def _mteb_ran(run: dict[str, Any]) -> set[str]:
    section = run.get("mteb") or {}
    return {*(section.get("tasks") or {}), *(section.get("errors") or {})}


def mteb_rows(runs: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """The MTEB rows of `runs`: (task, scored on a local subset), a task's full-data row first; a task scored
    on its full data by one run and on a subset by another has two rows."""
    out: list[tuple[str, bool]] = []
    for name in mteb_names(runs):
        kinds = {name in subset_tasks(r) for r in runs if name in _mteb_ran(r)}
        out += [(name, sub) for sub in (False, True) if sub in kinds]
    return out


def mteb_row_label(name: str, subset: bool) -> str:
    return f"MTEB {name}" + (f" {SUBSET}" if subset else "")


def mteb_cell(run: dict[str, Any], name: str, subset: bool) -> tuple[float | None, str | None]:
    """A run's (score, failure reason) in the MTEB row of `name` (its subset row when `subset`)."""
    section = run.get("mteb") or {}
    if (name in subset_tasks(run)) != subset:
        return None, None
    score = _finite(((section.get("tasks") or {}).get(name) or {}).get("main_score"))
    error = (section.get("errors") or {}).get(name) if score is None else None
    return score, error


def results_folders(run: dict[str, Any]) -> list[str]:
    """The folders mteb wrote a run's results files to, relative to the results JSON's folder: each scored task's
    file's folder (``mteb.tasks[task].file``); for a file that does not record them, the folder of the run's model
    revision, and that revision + ``_local_subset`` for tasks scored on a local subset."""
    from sentkit.evaluation.mteb_adapter import SUBSET_SUFFIX

    section = run.get("mteb") or {}
    tasks = section.get("tasks") or {}
    subsets = subset_tasks(run)
    folders: dict[str, None] = {}
    for name, t in tasks.items():
        file = t.get("file")
        if isinstance(file, str) and "/" in file:
            folder = file.rsplit("/", 1)[0]
        else:
            revision = f"{section.get('revision')}" + (SUBSET_SUFFIX if name in subsets else "")
            model = str(section.get("model")).replace("/", "__")
            folder = f"{section.get('results_dir')}/results/{model}/{revision}"
        folders[folder + "/"] = None
    return list(folders)


def _mteb_detail(task: dict[str, Any]) -> str:
    parts = [
        f"{split}/{sub} {_n(v, 2)}" for split, subs in (task.get("scores") or {}).items() for sub, v in subs.items()
    ]
    return f"{task.get('type')}, {task.get('main_score_name')}" + (
        f": {', '.join(parts[:6])}" if len(parts) > 1 else ""
    )


def _mteb_lines(run: dict[str, Any], *, include_subsets: bool = False) -> tuple[list[str], list[str]]:
    """(table rows, closing lines) of a run's MTEB section for `markdown_table`."""
    section = run.get("mteb")
    if not section:
        return [], []
    tasks = section.get("tasks") or {}
    rows = []
    for name, subset in mteb_rows([run]):
        label = mteb_row_label(name, subset)
        if name in tasks:
            t = tasks[name]
            rows.append(
                f"| {label} | {_fmt(_finite(t.get('main_score')))} | {_mteb_detail(t)} | "
                f"{float(t.get('evaluation_time_s') or 0.0):.1f} |"
            )
        else:
            rows.append(f"| {label} | error | {short_reason(section['errors'][name])} | |")
    if not tasks:  # every task failed: no average, and no results files were written
        return rows, []
    avg = mteb_average(run, include_subsets=include_subsets)
    closing = []
    if avg["n_tasks"]:
        closing.append(
            f"MTEB average (mteb {section.get('mteb_version')}): {_fmt(avg['mean_task'])} over "
            f"{_count(avg['n_tasks'])}, {_fmt(avg['mean_type'])} over {_count(len(avg['by_type']), 'task type')}"
            " (mteb's unrounded scores)."
        )
    folders = results_folders(run)
    closing.append(f"mteb's results files: {', '.join(folders)} (beside the results JSON).")
    if subset_tasks(run) & set(tasks):
        closing.append(f"{SUBSET_NOTE}; {_subset_averages(include_subsets)}.")
    return rows, closing


def _subset_averages(include: bool) -> str:
    if include:
        return "counted in the MTEB averages, as asked"
    return "left out of the MTEB averages (`sentkit report --include-subsets` counts them)"


def _count(n: int, what: str = "task") -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


REASON_CHARS = 80  # a failure's reason in a table cell, at most (whole words)
_PARENS = re.compile(r"\s*\([^()]*\)")
_PREFIX = re.compile(r"(?:MTEB task [^:]+:\s*)?(?:[A-Z][A-Za-z0-9]*(?:Error|Exception|Interrupt|Missing):\s+)?")


def short_reason(message: Any, limit: int = REASON_CHARS) -> str:
    """Why a task failed, in a few words for a table cell: `message` on one line without the task name
    and the exception class put before it, up to its first ``; `` (the fix that follows is in the
    results file), parenthesised details left out when it is still longer than `limit`, then cut after
    the last whole word that fits (marked …): never in the middle of a word."""
    text = " ".join(str(message).split())
    text = _PREFIX.sub("", text, count=1) or text
    text = text.split("; ", 1)[0].rstrip(".,:; ")
    while len(text) > limit and (bare := " ".join(_PARENS.sub("", text).split())) not in (text, ""):
        text = bare  # innermost parentheses first
    if len(text) <= limit:
        return text
    words = text.split(" ")
    n = 1
    while n < len(words) and len(" ".join(words[: n + 1])) <= limit - 1:
        n += 1
    return " ".join(words[:n]).rstrip(".,:;") + ("…" if n < len(words) else "")


def _n(v: Any, digits: int) -> str:
    """A metric with `digits` decimals; "—" when it is missing, null or NaN (a bad type raises)."""
    f = _finite(v)
    return "—" if f is None else f"{f:.{digits}f}"


def detail(name: str, res: dict[str, Any]) -> str:
    """Secondary metrics in words (for the Markdown table)."""
    kind = task_kind(name, res)
    if kind == "retrieval":
        return (
            f"nDCG@10 {_n(res['ndcg_at_10'], 2)} / MRR@10 {_n(res['mrr_at_10'], 2)} / "
            f"Recall@100 {_n(res['recall_at_100'], 2)} ({res.get('nqueries')} queries, {res.get('ndocs')} documents)"
        )
    spec = find_task(name)
    if spec is not None and spec.f1:
        return f"acc {_n(res['acc'], 2)} / F1 {_n(res['f1'], 2)}"
    if kind == "relatedness":
        u = res.get("unsupervised", {})
        return (
            f"Pearson {_n(res['pearson'], 4)} / Spearman {_n(res['spearman'], 4)}; "
            f"cosine {_n(u.get('pearson'), 4)} / {_n(u.get('spearman'), 4)}"
        )
    if kind == "sts":
        a = res["all"]
        return (
            f"Pearson mean {_n(a['pearson']['mean'], 4)} wmean {_n(a['pearson']['wmean'], 4)}; "
            f"Spearman mean {_n(a['spearman']['mean'], 4)} wmean {_n(a['spearman']['wmean'], 4)}; "
            f"concat {_n(a['concatenated']['spearman'], 4)}"
        )
    if kind == "ranking":
        return (
            "i2t R@1/5/10 "
            + "/".join(_n(res[k], 1) for k in COCO_RECALLS[:3])
            + f" medr {_n(res['medr_i2t'], 0)}; t2i "
            + "/".join(_n(res[k], 1) for k in COCO_RECALLS[3:])
            + f" medr {_n(res['medr_t2i'], 0)}"
        )
    return f"dev {_n(res.get('devacc'), 2)}"


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}"


def markdown_table(run: dict[str, Any], *, include_subsets: bool = False) -> str:
    """One run: task, score, details, time; a failed task is a row with its reason. An MTEB task scored on a
    local subset is marked (subset) and left out of the MTEB average unless `include_subsets`."""
    res, timings = run["results"], run.get("timings", {}).get("tasks", {})
    errors = run.get("errors") or {}
    model, config = run.get("model", {}), run.get("config", {})
    lines = [
        f"Model: `{model.get('name')}`{settings_text(model)} (fingerprint {model.get('fingerprint')}), "
        f"preset `{config.get('preset')}`, seed {run.get('seed')}",
        "",
        "| task | score | details | time (s) |",
        "|---|---:|---|---:|",
    ]
    for name in task_names([run]):
        if name in res:
            t = timings.get(name, {})
            secs = t.get("classify_s", 0.0) + t.get("load_encode_s", 0.0)
            lines.append(f"| {name} | {_fmt(main_score(name, res[name]))} | {detail(name, res[name])} | {secs:.1f} |")
        else:
            lines.append(f"| {name} | error | {short_reason(errors[name])} | |")
    mteb_lines, mteb_closing = _mteb_lines(run, include_subsets=include_subsets)
    lines += mteb_lines
    senteval = bool(res or errors or not mteb_lines)  # an MTEB-only run has no SentEval lines
    avg = declutr_average(res)
    lines.append("")
    if senteval:
        lines.append(
            f"DeCLUTR average: downstream {_fmt(avg['downstream'])} ({_count(avg['n_downstream'])}), "
            f"without SNLI {_fmt(avg['downstream_without_snli'])}, probing {_fmt(avg['probing'])} "
            f"({_count(avg['n_probing'])})."
        )
    lines += mteb_closing
    if errors or (run.get("mteb") or {}).get("errors"):
        lines.append(FAILED_NOTE)
    tm = (run.get("mteb") or {}).get("timings", {}) if not senteval else run.get("timings", {})
    if tm:
        lines.append(
            f"Time: {tm.get('total_s', 0):.1f} s total, {tm.get('encode_s', 0):.1f} s encoding "
            f"({tm.get('sentences_encoded', 0)} sentences encoded, "
            f"{tm.get('sentences_from_cache', 0)} from cache, "
            f"{tm.get('sentences_requested', 0)} requested)."
        )
    return "\n".join(lines) + "\n"


FAILED_NOTE = (
    "error: the task failed, for the reason given in a few words; the full message is in the results "
    "file (`errors` for SentEval's and user tasks, `mteb.errors` for MTEB's)."
)


def load_run(path: str | Path) -> dict[str, Any]:
    """Read and check a results file written by `sentkit evaluate`. MissingInputError (a
    FileNotFoundError) when it is missing; InputError (a ValueError) when it is a folder or not a
    regular file (a FIFO is not opened), or naming the file (and task) when it is not one: not
    UTF-8, not JSON, no `results`, a task without its metrics. A task whose score is NaN is kept (shown as —), with a
    warning; an unknown task name is dropped, with a warning."""
    p = require_file(path, "results file", hint="give the JSON that `sentkit evaluate -o` wrote")
    try:
        data = json.loads(p.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{p}: not a results file (not UTF-8 text; a UTF-16 or binary file?)") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{p}: not a JSON results file ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise InputError(f"{p}: not a sentkit results file (no 'results' object)")
    for key in ("model", "config", "timings", "errors"):
        if not isinstance(data.get(key, {}), dict):
            raise InputError(f"{p}: not a sentkit results file ('{key}' is not an object)")
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
            raise InputError(f"{p}: task {name}: malformed results ({type(e).__name__}: {e})") from None
        if score is None:
            log.warning("%s: task %s has no finite score (NaN or null); shown as —", p, name)
        results[canonical] = res
    data["results"] = results
    _check_mteb(p, data.get("mteb"))
    total = data.get("timings", {}).get("total_s")
    if total is not None and not isinstance(total, int | float):
        raise InputError(f"{p}: timings.total_s is {total!r}, not a number")
    return data


def _check_mteb(p: Path, section: Any) -> None:
    """ValueError naming the file when its ``mteb`` section (from `sentkit evaluate --mteb`) is not one."""
    if section is None:
        return
    if (
        not isinstance(section, dict)
        or not isinstance(section.get("tasks", {}), dict)
        or not isinstance(section.get("errors", {}), dict)
        or not isinstance(section.get("average", {}), dict)
    ):
        raise InputError(f"{p}: malformed 'mteb' section (expected tasks, errors and average objects)")
    for name, t in section.get("tasks", {}).items():
        try:
            if not isinstance(t, dict):
                raise TypeError(f"{type(t).__name__}, not an object")
            _finite(t.get("main_score"))
            _finite((section.get("average") or {}).get("mean_task"))
        except (TypeError, ValueError) as e:
            raise InputError(f"{p}: MTEB task {name}: malformed results ({type(e).__name__}: {e})") from None


# how a model setting (``model.settings``) reads in a label: the bare value, or ``key=value`` (any other key)
SETTING_TEXT = {"precision": str}
SETTING_ORDER = ("pooling", "attention", "precision")  # then any other, by name


def settings_text(model: dict[str, Any]) -> str:
    """A model's settings (``model.settings``: another model of the same weights) for its label,
    `` [pooling=cls, bf16]``; "" without any."""
    settings = model.get("settings") if isinstance(model, dict) else None
    if not isinstance(settings, dict) or not settings:
        return ""
    keys = [k for k in SETTING_ORDER if k in settings] + sorted(k for k in settings if k not in SETTING_ORDER)
    parts = [SETTING_TEXT[k](settings[k]) if k in SETTING_TEXT else f"{k}={settings[k]}" for k in keys]
    return f" [{', '.join(parts)}]"


def _label(run: dict[str, Any], path: str) -> str:
    model, config = run.get("model") or {}, run.get("config") or {}
    return f"{model.get('name')}{settings_text(model)} ({config.get('preset')})" if model else path


def run_averages(run: dict[str, Any], *, include_subsets: bool = False) -> dict[str, tuple[float | None, list[str]]]:
    """Each average of a run with the tasks it covers: SentEval's three (DeCLUTR convention) and, for
    a run with MTEB tasks, the MTEB leaderboard's two (its tasks scored on a local subset only with
    `include_subsets`): {average: (value, tasks)}."""
    avg = declutr_average(run["results"])
    members, probers = declutr_members()
    down = [n for n in members if n in avg["per_task"]]
    out: dict[str, tuple[float | None, list[str]]] = {
        "downstream": (avg["downstream"], down),
        "downstream_without_snli": (
            avg["downstream_without_snli"],
            [n for n in down if n in cohort("downstream_without_snli")],
        ),
        "probing": (avg["probing"], [n for n in probers if n in avg["per_task"]]),
    }
    m = mteb_average(run, include_subsets=include_subsets)
    out["mteb"] = (m["mean_task"], m["tasks"])
    out["mteb_by_type"] = (m["mean_type"], m["tasks"])
    return out


def tasks_run(run: dict[str, Any]) -> list[str]:
    """Every task a run ran, scored or failed (MTEB's as ``MTEB <task>``): what its total time covers."""
    section = run.get("mteb") or {}
    return [
        *run["results"],
        *(run.get("errors") or {}),
        *(f"MTEB {n}" for n in [*(section.get("tasks") or {}), *(section.get("errors") or {})]),
    ]


AVERAGE_ROWS = (  # (average, row label): SentEval's, then MTEB's (for runs that have MTEB tasks)
    ("downstream", "**downstream avg**"),
    ("downstream_without_snli", "downstream avg w/o SNLI"),
    ("probing", "**probing avg**"),
    ("mteb", "**MTEB avg**"),
    ("mteb_by_type", "MTEB avg over task types"),
)
NOT_COMPARABLE = "†"


def differing_tasks(task_sets: list[list[str] | None]) -> list[list[str]]:
    """For each run, the tasks that others cover and it does not ([] each when every run with a value
    (a set, not None) covers the same tasks); None sets are left out of the comparison."""
    union: list[str] = []
    for s in task_sets:
        union += [t for t in s or [] if t not in union]
    return [[] if s is None else [t for t in union if t not in s] for s in task_sets]


def side_by_side(runs: list[dict[str, Any]], labels: list[str] | None = None, *, include_subsets: bool = False) -> str:
    """Several runs as columns; the best value per row in bold (the highest score, the shortest time).
    A failed task is a cell with its reason. Each average gives the number of tasks it covers; averages
    (and total times) of runs over different tasks are marked † and not bolded, and a footnote names
    the tasks that differ. Runs with MTEB tasks get a row per MTEB task and the MTEB averages beside
    SentEval's; a task scored on a local subset is a row of its own, marked (subset), left out of the
    averages unless `include_subsets`. A run's model settings are part of its default label."""
    labels = labels or [_label(r, str(i)) for i, r in enumerate(runs)]
    lines = ["| task | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(runs)]
    differ: dict[str, list[str]] = {}  # footnote (who lacks what) -> the rows it is about

    def row(
        name: str,
        vals: list[float | None],
        texts: list[str | None] | None = None,
        *,
        lower_is_better: bool = False,
        counts: list[str | None] | None = None,
        comparable: bool = True,
    ) -> str:
        present = [v for v in vals if v is not None]
        best = (min if lower_is_better else max)(present, default=None)
        cells = []
        for i, v in enumerate(vals):
            text = (texts[i] if texts else None) or _fmt(v)
            if v is not None and v == best and len(vals) > 1 and comparable:
                text = f"**{text}**"
            if v is not None and counts and counts[i] is not None:
                text += f" ({counts[i]})"
            if v is not None and not comparable:
                text += NOT_COMPARABLE
            cells.append(text)
        return f"| {name} | " + " | ".join(cells) + " |"

    def failed(reason: Any) -> str:
        return f"error: {short_reason(reason)}"

    for t in task_names(runs):
        vals = [declutr_score(t, r["results"][t]) if t in r["results"] else None for r in runs]
        texts = [
            failed(r["errors"][t]) if t not in r["results"] and t in (r.get("errors") or {}) else None for r in runs
        ]
        lines.append(row(t, vals, texts))
    subset_rows = False
    for t, subset in mteb_rows(runs):
        cells = [mteb_cell(r, t, subset) for r in runs]
        vals = [v for v, _ in cells]
        texts = [failed(e) if e is not None else None for _, e in cells]
        lines.append(row(mteb_row_label(t, subset), vals, texts))
        subset_rows = subset_rows or (subset and any(v is not None for v in vals))

    def compared(label: str, sets: list[list[str] | None]) -> bool:
        lacking = differing_tasks(sets)
        if not any(lacking):
            return True
        who = "; ".join(f"{lab} lacks {', '.join(miss)}" for lab, miss in zip(labels, lacking) if miss)
        differ.setdefault(who, []).append(label.strip("*"))
        return False

    avgs = [run_averages(r, include_subsets=include_subsets) for r in runs]
    mteb = [mteb_average(r, include_subsets=include_subsets) for r in runs]
    with_mteb = any(r.get("mteb") for r in runs)
    for key, label in AVERAGE_ROWS:
        if key.startswith("mteb") and not with_mteb:
            continue
        vals = [a[key][0] for a in avgs]
        sets = [a[key][1] if v is not None else None for a, v in zip(avgs, vals)]
        ok = compared(label, sets)
        counts = [
            None
            if s is None
            else _count(len(s)) + (f", {_count(len(m['by_type']), 'type')}" if key == "mteb_by_type" else "")
            for s, m in zip(sets, mteb)
        ]
        lines.append(row(label, vals, counts=counts, comparable=ok))
    totals = [_total_s(r) for r in runs]
    ok = compared("total time (s)", [tasks_run(r) if v is not None else None for r, v in zip(runs, totals)])
    lines.append(row("total time (s)", totals, lower_is_better=True, comparable=ok))
    notes = [
        f"{NOT_COMPARABLE} {', '.join(rows)}: over different tasks, not comparable ({who})."
        for who, rows in differ.items()
    ]
    if subset_rows:
        notes.append(f"{SUBSET_NOTE}: a row of its own, {_subset_averages(include_subsets)}.")
    if any(r.get("errors") or (r.get("mteb") or {}).get("errors") for r in runs):
        notes.append(FAILED_NOTE)
    return "\n".join(lines + (["", *notes] if notes else [])) + "\n"


def _total_s(run: dict[str, Any]) -> float | None:
    """Seconds of a run: SentEval's tasks and its MTEB tasks."""
    parts = (run.get("timings", {}).get("total_s"), ((run.get("mteb") or {}).get("timings") or {}).get("total_s"))
    vals = [float(v) for v in parts if isinstance(v, int | float)]
    return sum(vals) if vals else None


def plot_data(runs: list[dict[str, Any]]) -> tuple[list[str], list[list[float | None]]]:
    """What :func:`plot_runs` draws: the tasks scored in at least one run (SentEval's and user tasks by
    their DeCLUTR score, then the MTEB tasks as ``MTEB <task>`` by mteb's unrounded main score) and,
    per run, its score of each (None: not scored); a task scored on a local subset is ``MTEB <task> (subset)``, apart
    from the task's full-data scores."""
    names: list[str] = []
    values: list[list[float | None]] = [[] for _ in runs]
    rows = [
        (t, [declutr_score(t, r["results"][t]) if t in r["results"] else None for r in runs]) for t in task_names(runs)
    ]
    rows += [(mteb_row_label(t, sub), [mteb_cell(r, t, sub)[0] for r in runs]) for t, sub in mteb_rows(runs)]
    for name, vals in rows:
        if any(v is not None for v in vals):
            names.append(name)
            for i, v in enumerate(vals):
                values[i].append(v)
    return names, values


def plot_runs(runs: list[dict[str, Any]], out: str | Path, labels: list[str] | None = None) -> Path:
    """Grouped bar chart of the per-task scores of one or more runs -> PNG: SentEval's (DeCLUTR
    convention) and the MTEB tasks' main scores (:func:`plot_data`); a task a run did not score has
    no bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from sentkit.core.io import atomic_path

    labels = labels or [_label(r, str(i)) for i, r in enumerate(runs)]
    tasks, values = plot_data(runs)
    width = 0.8 / max(1, len(runs))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(tasks) + 2), 4.0))
    x = np.arange(len(tasks))
    for i, (vals, lab) in enumerate(zip(values, labels)):
        at = [j for j, v in enumerate(vals) if v is not None]
        ax.bar(x[at] + i * width - 0.4 + width / 2, [vals[j] or 0.0 for j in at], width, label=lab)
    ax.set_xticks(x)
    ax.set_xticklabels(tasks, rotation=45, ha="right")
    ax.set_ylabel("score (0-100)")
    ax.set_ylim(min([0.0, *(v for vals in values for v in vals if v is not None)]), 100)
    mteb = any(t.startswith("MTEB ") for t in tasks)
    ax.set_title("SentEval scores (DeCLUTR convention)" + (" and MTEB main scores" if mteb else ""))
    ax.legend(fontsize="small")
    fig.tight_layout()
    target = Path(out)
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    return target
