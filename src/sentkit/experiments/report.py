"""Regenerate a results report (Markdown + PNG charts) from an experiment's results files."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.experiments import claims as claims_mod
from sentkit.experiments import paper
from sentkit.experiments.grid import ExperimentSpec
from sentkit.io import atomic_write_text

STS = ("STS12", "STS13", "STS14", "STS15", "STS16")
# Hill et al. (2016) Table 6 cohorts, on the tasks SentEval has.
SUPERVISED = ("MR", "CR", "SUBJ", "MPQA", "TREC", "SST2", "SST5", "MRPC", "SICKE", "SICKR", "STSB", "SNLI")
UNSUPERVISED = (*STS, "STSB-cos", "SICKR-cos")
HILL_TABLE3_TASKS = ("MRPC", "MR", "CR", "SUBJ", "MPQA", "TREC")  # Hill et al.'s supervised tasks
CHART_AVERAGES = ("avg:downstream", "avg:supervised", "avg:unsupervised_sts")
AVERAGES = ("avg:downstream", "avg:downstream_without_snli", "avg:probing", "avg:supervised", "avg:hill_table3",
            "avg:unsupervised_sts")


def unsupervised_scores(results: dict[str, Any]) -> dict[str, float]:
    """Cosine-similarity scores (Spearman x 100): STS12-16 (mean over subsets), STS-B and SICK-R."""
    out: dict[str, float] = {}
    for name in STS:
        r = results.get(name)
        if r and "all" in r:
            out[name] = 100 * float(r["all"]["spearman"]["mean"])
    for name in ("STSB", "SICKR"):
        u = (results.get(name) or {}).get("unsupervised")
        if u and "spearman" in u:
            out[f"{name}-cos"] = 100 * float(u["spearman"])
    return out


def cell_scores(res: dict[str, Any]) -> dict[str, float]:
    """Every score of one results file on one scale (points, higher is better)."""
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
    if all(t in scores for t in HILL_TABLE3_TASKS):
        scores["avg:hill_table3"] = float(np.mean([scores[t] for t in HILL_TABLE3_TASKS]))
    mrpc = res.get("results", {}).get("MRPC") or {}
    for key in ("acc", "f1"):
        if key in mrpc:
            scores[f"MRPC:{key}"] = float(mrpc[key])
    return scores


def cell_costs(all_results: list[dict[str, Any]]) -> dict[str, tuple[float, float, int]]:
    """{cell: (mean training seconds, mean evaluation seconds, seeds)} from the results files."""
    acc: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for res in all_results:
        tasks = (res.get("timings") or {}).get("tasks", {})
        ev = sum(float(t.get("load_encode_s", 0)) + float(t.get("classify_s", 0)) for t in tasks.values())
        acc[res["experiment"]["cell"]].append((float(res["experiment"].get("train_seconds", 0.0)), ev))
    return {c: (statistics.fmean(t for t, _ in v), statistics.fmean(e for _, e in v), len(v)) for c, v in acc.items()}


def cronbach_alpha(matrix: np.ndarray) -> float:
    """Internal consistency of k tasks (columns) across models (rows)."""
    k = matrix.shape[1]
    if k < 2 or matrix.shape[0] < 2:
        return float("nan")
    item_var = matrix.var(axis=0, ddof=1).sum()
    total_var = matrix.sum(axis=1).var(ddof=1)
    return float(k / (k - 1) * (1 - item_var / total_var)) if total_var > 0 else float("nan")


def summarise(all_results: list[dict[str, Any]]) -> dict[str, dict[str, tuple[float, float, int]]]:
    """{cell: {score: (mean, std over seeds, n seeds)}}."""
    by_cell: dict[str, list[dict[str, float]]] = defaultdict(list)
    for res in all_results:
        by_cell[res["experiment"]["cell"]].append(cell_scores(res))
    out: dict[str, dict[str, tuple[float, float, int]]] = {}
    for cell, runs in by_cell.items():
        keys = sorted({k for r in runs for k in r})
        out[cell] = {}
        for k in keys:
            vals = [r[k] for r in runs if k in r]
            out[cell][k] = (statistics.fmean(vals), statistics.stdev(vals) if len(vals) > 1 else 0.0, len(vals))
    return out


def consistency(summary: dict[str, dict[str, tuple[float, float, int]]], cohort: tuple[str, ...]) -> dict[str, float]:
    """Cronbach's alpha of a cohort across cells, overall and with each task left out."""
    tasks = [t for t in cohort if all(t in s for s in summary.values())]
    if len(tasks) < 2 or len(summary) < 2:
        return {}
    m = np.array([[summary[c][t][0] for t in tasks] for c in summary])
    out = {"all": cronbach_alpha(m)}
    for j, t in enumerate(tasks):
        out[f"without {t}"] = cronbach_alpha(np.delete(m, j, axis=1))
    return out


def _fmt(v: tuple[float, float, int] | None) -> str:
    if v is None:
        return "—"
    mean, std, n = v
    return f"{mean:.1f} ± {std:.1f}" if n > 1 else f"{mean:.1f}"


def write_report(all_results: list[dict[str, Any]], out_md: str | Path, *, title: str = "Results",
                 spec: ExperimentSpec | None = None) -> Path:
    """Write the Markdown report and a PNG chart next to it; returns the Markdown path. With the
    experiment spec, cells follow the file's order and its [[claim]] tables get a verdict each."""
    out_md = Path(out_md)
    summary = summarise(all_results)
    if not summary:
        raise FileNotFoundError("no results.json found: run `sentkit experiment run` first")
    order = [c.name for c in spec.cells] if spec else []
    cells = [c for c in order if c in summary] + [c for c in summary if c not in order]
    summary = {c: summary[c] for c in cells}
    groups = {r["experiment"]["cell"]: r["experiment"].get("group", "") for r in all_results}
    tasks = [t for t in (*SUPERVISED, *UNSUPERVISED) if any(t in summary[c] for c in cells)]
    avgs = [a for a in AVERAGES if any(a in summary[c] for c in cells)]
    lines = [f"# {title}", "", "Generated by `sentkit experiment report` from the results files alone; "
             "mean ± std over seeds (the seeds column gives their number).", ""]
    if spec is not None and spec.summary:
        lines += [spec.summary.strip(), ""]
    if spec is not None and spec.claims:
        lines += ["## Claims", "", *claims_mod.render(spec.claims, summary)]
    lines += ["## All scores", "", "Averages: `downstream` is the DeCLUTR paper's rule over the downstream tasks present; "
              "`supervised` the mean of Hill et al.'s Table 6 supervised cohort; `hill_table3` the mean over their "
              "Table 3 tasks (MRPC, MR, CR, SUBJ, MPQA, TREC); `unsupervised_sts` the mean cosine-similarity "
              "Spearman over STS12-16, STS-B and SICK-R.", ""]
    head = ["cell", "group", "seeds", *[a.split(":")[1] for a in avgs], *tasks]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cells:
        n = max(v[2] for v in summary[c].values())
        row = [c, groups.get(c, ""), str(n), *[_fmt(summary[c].get(a)) for a in avgs], *[_fmt(summary[c].get(t)) for t in tasks]]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", *hill_comparison(all_results, summary)]
    lines += ["## Internal consistency (Hill et al. 2016, Table 6)", "",
              f"Cronbach's alpha of each task cohort across the {len(cells)} cells above (higher: the tasks rank "
              "models alike).", ""]
    for label, cohort in (("supervised", SUPERVISED), ("unsupervised", UNSUPERVISED)):
        alpha = consistency(summary, cohort)
        if alpha:
            lines.append(f"- {label} cohort: Cronbach's alpha {alpha['all']:.3f}; leaving one task out: "
                         + ", ".join(f"{k.split(' ', 1)[1]} {v:.3f}" for k, v in alpha.items() if k != "all"))
        else:
            lines.append(f"- {label} cohort: needs at least two cells and two tasks")
    costs = cell_costs(all_results)
    lines += ["", "## Cost", "", "Wall-clock seconds per seed, on the machine that ran the cell (training; "
              "evaluation = encoding + classifiers over all tasks).", "",
              "| cell | train s | evaluate s |", "|---|---|---|"]
    lines += [f"| {c} | {costs[c][0]:.0f} | {costs[c][1]:.0f} |" for c in cells if c in costs]
    png = out_md.with_suffix(".png")
    try:
        _chart(summary, [a for a in avgs if a in CHART_AVERAGES] or avgs, png)
        lines += ["", f"![averages]({png.name})"]
    except ImportError:
        lines += ["", "(install matplotlib for the chart: pip install 'sentkit[report]')"]
    atomic_write_text(out_md, "\n".join(lines) + "\n")
    return out_md


def hill_comparison(all_results: list[dict[str, Any]], summary: dict[str, dict[str, tuple[float, float, int]]]) -> list[str]:
    """Markdown: cells of Hill et al.'s methods next to the paper's Table 3 and Table 4 figures."""
    methods = {r["experiment"]["cell"]: r["experiment"]["method"] for r in all_results}
    rows = [c for c in summary if methods.get(c) in paper.HILL_TABLE3 or methods.get(c) in paper.HILL_TABLE4]
    if not rows:
        return []
    t3 = ("MRPC:acc", "MRPC:f1", "MR", "CR", "SUBJ", "MPQA", "TREC")
    out = ["## Hill et al. (2016) models next to the paper", "",
           "Each cell: this run / the paper. The paper trained on the Toronto Books Corpus (0.9B words, days on a "
           "GPU for the recurrent models); these runs train on 209 Gutenberg books (~21M tokens) within an hour "
           "of one CPU core, so the recurrent models especially are far from converged. Paper figures: "
           "`sentkit/experiments/paper.py`, which states their provenance (transcribed offline; six cross-checked). "
           "Table 4's SICK is train + test; ours is SICK-R test. STS14 `all` is the mean over its six subsets.", "",
           "| cell | " + " | ".join(paper.HILL_TABLE3_COLUMNS) + " | " + " | ".join(paper.HILL_TABLE4_COLUMNS) + " |",
           "|" + "---|" * (1 + len(t3) + 2)]
    for c in rows:
        m = methods[c]
        p3 = paper.HILL_TABLE3.get(m)
        p4 = paper.HILL_TABLE4.get(m, (None, None))
        ours3 = [summary[c].get(k) for k in t3]
        ours4 = [summary[c].get("STS14"), summary[c].get("SICKR-cos")]
        cells3 = [f"{_num(o)} / {_num(p3[i] if p3 else None)}" for i, o in enumerate(ours3)]
        cells4 = [f"{_num(o)} / {_num(None if p is None else 100 * p)}" for o, p in zip(ours4, p4)]
        out.append(f"| {c} | " + " | ".join(cells3 + cells4) + " |")
    return [*out, ""]


def _num(v: tuple[float, float, int] | float | None) -> str:
    if v is None:
        return "—"
    return f"{v[0] if isinstance(v, tuple) else v:.1f}"


def _chart(summary: dict[str, dict[str, tuple[float, float, int]]], avgs: list[str], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = list(summary)
    fig, ax = plt.subplots(figsize=(max(8.0, 0.5 * len(cells)), 5.5))
    width = 0.8 / max(1, len(avgs))
    for i, a in enumerate(avgs):
        xs = np.arange(len(cells)) + i * width
        ys = [summary[c].get(a, (np.nan, 0, 0))[0] for c in cells]
        es = [summary[c].get(a, (0, 0, 0))[1] for c in cells]
        ax.bar(xs, ys, width, yerr=es, label=a.split(":")[1], capsize=2)
    ax.set_xticks(np.arange(len(cells)) + 0.4 - width / 2, cells, rotation=60, ha="right", fontsize=8)
    vals = [summary[c][a][0] for c in cells for a in avgs if a in summary[c]]
    if vals:  # zoom in: the differences that matter are a few points
        ax.set_ylim(max(0.0, min(vals) - 5), max(vals) + 3)
    ax.set_ylabel("score (points)")
    ax.legend()
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)
