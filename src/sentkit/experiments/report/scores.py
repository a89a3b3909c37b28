"""Every score of a results file on one scale (points, higher is better), the task cohorts the averages are
taken over, the summary of a grid ({cell: {score: (mean, std over seeds, seeds)}}) and Cronbach's alpha of a
cohort across cells."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np

from sentkit.evaluation.report import mteb_scores
from sentkit.evaluation.tasks import ALL_TASKS, DOWNSTREAM, cohort, get_task
from sentkit.experiments import paper
from sentkit.experiments.grid import ExperimentSpec
from sentkit.experiments.results import RunResults, Runs, as_runs

Summary = dict[str, dict[str, tuple[float, float, int]]]  # {cell: {score: (mean, std over seeds, n seeds)}}


# The cohorts, from the task registry (each task's `cohorts`, sentkit.evaluation.tasks.cohort): SentEval's
# cosine-scored STS12-16, its supervised (classifier-scored) and unsupervised (cosine) downstream tasks (wider
# cohorts than Hill et al.'s Table 6, whose cohorts are paper.HILL_SUPERVISED / paper.HILL_UNSUPERVISED; a
# relatedness task counts in the unsupervised one by its cosine score, `NAME-cos`) and the probing tasks
# (Conneau et al. 2018), in the paper's order: surface, syntactic, semantic.
STS = tuple(cohort("cosine_sts"))


SUPERVISED = tuple(cohort("supervised"))


UNSUPERVISED = tuple(n if get_task(n).kind != "relatedness" else f"{n}-cos" for n in cohort("unsupervised_sts"))


COSINE_OF = tuple(n for n in cohort("unsupervised_sts") if get_task(n).kind == "relatedness")  # tasks scored `-cos`


PROBING = tuple(cohort("probing"))


F1_TASKS = tuple(n for n in ALL_TASKS if get_task(n).f1)  # tasks whose F1 is a score too (`MRPC:f1`)


# the tasks each average is taken over, by the scores' names (a relatedness task's cosine score as `NAME-cos`)
AVERAGE_TASKS: dict[str, tuple[str, ...]] = {
    "avg:downstream": tuple(DOWNSTREAM),
    "avg:downstream_without_snli": tuple(cohort("downstream_without_snli")),
    "avg:supervised": SUPERVISED,
    "avg:cosine_sts": STS,
    "avg:unsupervised_sts": UNSUPERVISED,
    "avg:probing": PROBING,
}


def partial_averages(summary: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, str], tuple[int, int, list[str]]]:
    """{(cell, average): (tasks it covers, tasks the cells cover together, the tasks it lacks)} for each average of
    `AVERAGE_TASKS` a cell takes over fewer tasks than the cells of `summary` cover together (a task that failed)."""
    out: dict[tuple[str, str], tuple[int, int, list[str]]] = {}
    for avg, tasks in AVERAGE_TASKS.items():
        having = [c for c, s in summary.items() if avg in s]
        union = [t for t in tasks if any(t in summary[c] for c in having)]
        for c in having:
            lacks = [t for t in union if t not in summary[c]]
            if lacks:
                out[(c, avg)] = (len(union) - len(lacks), len(union), lacks)
    return out


CHART_AVERAGES = ("avg:downstream", "avg:supervised", "avg:unsupervised_sts")


AVERAGES = (
    "avg:downstream",
    "avg:downstream_without_snli",
    "avg:probing",
    "avg:supervised",
    "avg:cosine_sts",
    "avg:hill_table3",
    "avg:unsupervised_sts",
    "avg:hill_table4",
    "avg:mteb",
)


AVERAGE_HELP = {
    "avg:downstream": "the DeCLUTR paper's average over the downstream tasks present",
    "avg:downstream_without_snli": "the same without SNLI",
    "avg:probing": "the mean over the probing tasks present",
    "avg:supervised": "the mean over SentEval's classifier-scored tasks present (MR, CR, SUBJ, MPQA, TREC, SST2, "
    "SST5, MRPC, SICK-E, SICK-R, STS-B, SNLI); wider than Hill et al.'s supervised cohort",
    "avg:cosine_sts": "the mean over STS12-16 (SentEval's mean over subsets), the cosine-scored tasks of the "
    "downstream average: downstream = (11 x supervised + 5 x cosine STS) / 16 when SNLI is absent",
    "avg:hill_table3": "Hill et al.'s supervised cohort (Tables 3 and 6): MRPC (mean of accuracy and F1), MR, CR, "
    "SUBJ, MPQA, TREC",
    "avg:unsupervised_sts": "the mean cosine-similarity Spearman over STS12-16 (SentEval's mean over subsets), "
    "STS-B and SICK-R",
    "avg:hill_table4": "Hill et al.'s unsupervised cohort (Tables 4 and 6): cosine Spearman on STS14's six subsets, "
    'STS14 over all pairs pooled (the paper\'s "All") and SICK-R',
    "avg:mteb": "the mean of mteb's main scores over the cell's MTEB tasks (see the MTEB table)",
}


def unsupervised_scores(results: dict[str, Any]) -> dict[str, float]:
    """Cosine-similarity scores (Spearman x 100): STS12-16 (SentEval's mean over subsets; each
    subset as `STS14:images`; all pairs pooled as `STS14:pooled`), STS-B and SICK-R."""
    out: dict[str, float] = {}
    for name in STS:
        r = results.get(name)
        if r and "all" in r:
            out[name] = 100 * float(r["all"]["spearman"]["mean"])
            if "concatenated" in r["all"]:
                out[f"{name}:pooled"] = 100 * float(r["all"]["concatenated"]["spearman"])
            for sub, v in r.items():
                if sub != "all" and isinstance(v, dict) and "spearman" in v:
                    out[f"{name}:{sub}"] = 100 * float(v["spearman"])
    by_len: dict[str, list[float]] = {}
    for name in STS:
        for b, v in ((results.get(name) or {}).get("all", {}).get("by_length") or {}).items():
            by_len.setdefault(b, []).append(100 * float(v["spearman"]))
    for name in COSINE_OF:
        u = (results.get(name) or {}).get("unsupervised")
        if u and "spearman" in u:
            out[f"{name}-cos"] = 100 * float(u["spearman"])
        for b, v in ((u or {}).get("by_length") or {}).items():
            by_len.setdefault(b, []).append(100 * float(v["spearman"]))
    for b, vals in by_len.items():  # cosine STS of the pairs of one length, mean over the tasks that have it
        out[f"sts-length:{b}"] = float(np.mean(vals))
    return out


def cell_scores(res: RunResults | Mapping[str, Any]) -> dict[str, float]:
    """Every score of one results file on one scale (points, higher is better): a run of a grid, or the JSON
    `sentkit evaluate` writes."""
    res = dict(res.evaluation if isinstance(res, RunResults) else res)
    scores = dict(res.get("declutr_average", {}).get("per_task", {}))
    scores.update(unsupervised_scores(res.get("results", {})))
    avg = res.get("declutr_average", {})
    for key in ("downstream", "downstream_without_snli", "probing"):
        if avg.get(key) is not None:
            scores[f"avg:{key}"] = float(avg[key])
    unsup = [v for k, v in scores.items() if k in UNSUPERVISED]
    if unsup:
        scores["avg:unsupervised_sts"] = float(np.mean(unsup))
    sup = [v for k, v in scores.items() if k in SUPERVISED]
    if sup:
        scores["avg:supervised"] = float(np.mean(sup))
    cos = [v for k, v in scores.items() if k in STS]
    if cos:
        scores["avg:cosine_sts"] = float(np.mean(cos))
    for name in F1_TASKS:
        r = res.get("results", {}).get(name) or {}
        for key in ("acc", "f1"):
            if key in r:
                scores[f"{name}:{key}"] = float(r[key])
    scores.update(paper.cohort_averages(scores))
    scores.update(mteb_scores(res))  # `mteb:<task>` and `avg:mteb` of a cell scored on MTEB tasks
    return scores


def summarise(all_results: Runs) -> dict[str, dict[str, tuple[float, float, int]]]:
    """{cell: {score: (mean, std over seeds, n seeds)}}."""
    by_cell: dict[str, list[dict[str, float]]] = defaultdict(list)
    for run in as_runs(all_results):
        by_cell[run.cell].append(cell_scores(run))
    out: dict[str, dict[str, tuple[float, float, int]]] = {}
    for cell, runs in by_cell.items():
        keys = sorted({k for r in runs for k in r})
        out[cell] = {}
        for k in keys:
            vals = [r[k] for r in runs if k in r]
            out[cell][k] = (statistics.fmean(vals), statistics.stdev(vals) if len(vals) > 1 else 0.0, len(vals))
    return out


def cronbach_alpha(matrix: np.ndarray) -> float:
    """Internal consistency of k tasks (columns) across models (rows)."""
    k = matrix.shape[1]
    if k < 2 or matrix.shape[0] < 2:
        return float("nan")
    item_var = matrix.var(axis=0, ddof=1).sum()
    total_var = matrix.sum(axis=1).var(ddof=1)
    return float(k / (k - 1) * (1 - item_var / total_var)) if total_var > 0 else float("nan")


def alphas(
    scores: dict[str, dict[str, float]], cohort: tuple[str, ...], rescale: tuple[str, ...] = ()
) -> dict[str, float]:
    """Cronbach's alpha of a cohort of tasks across models (rows: the models that have every task),
    overall ("all") and with each task left out ("without T"); tasks in `rescale` are divided by
    100 first (correlations on their 0-1 scale). Empty with fewer than two models or tasks."""
    rows = [r for r in scores.values() if all(t in r for t in cohort)]
    if len(cohort) < 2 or len(rows) < 2:
        return {}
    m = np.array([[r[t] / (100 if t in rescale else 1) for t in cohort] for r in rows])
    out = {"all": cronbach_alpha(m)}
    for j, t in enumerate(cohort):
        out[f"without {t}"] = cronbach_alpha(np.delete(m, j, axis=1))
    return out


def consistency(summary: dict[str, dict[str, tuple[float, float, int]]], cohort: tuple[str, ...]) -> dict[str, float]:
    """Cronbach's alpha of a cohort across cells (its tasks that every cell has), overall and with
    each task left out."""
    tasks = tuple(t for t in cohort if all(t in s for s in summary.values()))
    return alphas(score_means(summary), tasks)


def score_means(summary: dict[str, dict[str, tuple[float, float, int]]]) -> dict[str, dict[str, float]]:
    return {c: {k: v[0] for k, v in s.items()} for c, s in summary.items()}


def fixed_cells(spec: ExperimentSpec) -> frozenset[str]:
    """Cells that train nothing, so one seed is all there is (see claims.judge). A `pretrained` cell that
    evaluates one seed of a trained run (its model is another cell's, `"@cell"`, or a run's `.../seed-<k>/...`
    folder) is not: that model had other seeds."""
    return frozenset(c.name for c in spec.cells if c.kind.seed_free(c.settings))
