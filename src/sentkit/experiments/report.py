"""Regenerate a results report (Markdown + PNG charts) from an experiment's results files."""

from __future__ import annotations

import itertools
import logging
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.evaluation.report import mteb_scores
from sentkit.experiments import claims as claims_mod
from sentkit.experiments import paper
from sentkit.experiments.grid import ExperimentSpec
from sentkit.io import atomic_write_text

log = logging.getLogger(__name__)

STS = ("STS12", "STS13", "STS14", "STS15", "STS16")
# SentEval's supervised (classifier-scored) and unsupervised (cosine) downstream tasks: wider cohorts
# than Hill et al.'s Table 6, whose cohorts are paper.HILL_SUPERVISED / paper.HILL_UNSUPERVISED.
SUPERVISED = ("MR", "CR", "SUBJ", "MPQA", "TREC", "SST2", "SST5", "MRPC", "SICKE", "SICKR", "STSB", "SNLI")
UNSUPERVISED = (*STS, "STSB-cos", "SICKR-cos")
# SentEval's probing tasks (Conneau et al. 2018), in the paper's order: surface, syntactic, semantic
PROBING = ("SentLen", "WC", "TreeDepth", "TopConst", "BShift", "Tense", "SubjNum", "ObjNum", "SOMO", "CoordInv")
CHART_AVERAGES = ("avg:downstream", "avg:supervised", "avg:unsupervised_sts")
AVERAGES = ("avg:downstream", "avg:downstream_without_snli", "avg:probing", "avg:supervised", "avg:cosine_sts",
            "avg:hill_table3", "avg:unsupervised_sts", "avg:hill_table4", "avg:mteb")
AVERAGE_HELP = {
    "avg:downstream": "the DeCLUTR paper's average over the downstream tasks present",
    "avg:downstream_without_snli": "the same without SNLI",
    "avg:probing": "the mean over the probing tasks present",
    "avg:supervised": "the mean over SentEval's classifier-scored tasks present (MR, CR, SUBJ, MPQA, TREC, SST2, "
                      "SST5, MRPC, SICK-E, SICK-R, STS-B, SNLI); wider than Hill et al.'s supervised cohort",
    "avg:cosine_sts": "the mean over STS12-16 (SentEval's mean over subsets), the cosine-scored tasks of the downstream "
                      "average: downstream = (11 x supervised + 5 x cosine STS) / 16 when SNLI is absent",
    "avg:hill_table3": "Hill et al.'s supervised cohort (Tables 3 and 6): MRPC (mean of accuracy and F1), MR, CR, "
                       "SUBJ, MPQA, TREC",
    "avg:unsupervised_sts": "the mean cosine-similarity Spearman over STS12-16 (SentEval's mean over subsets), "
                            "STS-B and SICK-R",
    "avg:hill_table4": "Hill et al.'s unsupervised cohort (Tables 4 and 6): cosine Spearman on STS14's six subsets, "
                       "STS14 over all pairs pooled (the paper's \"All\") and SICK-R",
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
    for name in ("STSB", "SICKR"):
        u = (results.get(name) or {}).get("unsupervised")
        if u and "spearman" in u:
            out[f"{name}-cos"] = 100 * float(u["spearman"])
        for b, v in ((u or {}).get("by_length") or {}).items():
            by_len.setdefault(b, []).append(100 * float(v["spearman"]))
    for b, vals in by_len.items():  # cosine STS of the pairs of one length, mean over the tasks that have it
        out[f"sts-length:{b}"] = float(np.mean(vals))
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
    cos = [v for k, v in scores.items() if k in STS]
    if cos:
        scores["avg:cosine_sts"] = float(np.mean(cos))
    mrpc = res.get("results", {}).get("MRPC") or {}
    for key in ("acc", "f1"):
        if key in mrpc:
            scores[f"MRPC:{key}"] = float(mrpc[key])
    scores.update(paper.cohort_averages(scores))
    scores.update(mteb_scores(res))  # `mteb:<task>` and `avg:mteb` of a cell scored on MTEB tasks
    return scores


def mteb_section(summary: dict[str, dict[str, tuple[float, float, int]]], cells: list[str]) -> list[str]:
    """A table of the MTEB tasks (mteb's main score x 100) and their mean, when any cell was scored on them."""
    tasks = sorted({k for c in cells for k in summary[c] if k.startswith("mteb:")})
    if not tasks:
        return []
    lines = ["## MTEB", "", "mteb's main score of each task (x 100; mean ± std over seeds), run by the mteb package "
             "on the cell's model (`mteb = [...]` in the experiment file; docs/evaluation.md, MTEB).", "",
             "| cell | mean | " + " | ".join(t.split(":", 1)[1] for t in tasks) + " |", "|---|---|" + "---|" * len(tasks)]
    for c in cells:
        if any(t in summary[c] for t in tasks):
            lines.append(f"| {c} | {_fmt(summary[c].get('avg:mteb'))} | " + " | ".join(_fmt(summary[c].get(t)) for t in tasks) + " |")
    return [*lines, ""]


def train_seconds(res: dict[str, Any], diagnostics: dict[str, list[dict[str, Any]]] | None = None) -> float:
    """A run's training seconds across resumes: results written before runs counted their earlier
    processes take those from the run's diagnostics (`earlier_s`, from its metrics.csv)."""
    exp = res["experiment"]
    t = float(exp.get("train_seconds", 0.0))
    if not exp.get("train_seconds_across_resumes") and diagnostics:
        for d in diagnostics.get(exp["cell"], []):
            if d.get("seed") == exp.get("seed"):
                t += float((d.get("training") or {}).get("earlier_s", 0.0))
    return t


def cell_costs(all_results: list[dict[str, Any]],
               diagnostics: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, tuple[float, float, int]]:
    """{cell: (mean training seconds, mean evaluation seconds, seeds)} from the results files (and
    the diagnostics, for the earlier processes of resumed runs)."""
    acc: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for res in all_results:
        tasks = (res.get("timings") or {}).get("tasks", {})
        ev = sum(float(t.get("load_encode_s", 0)) + float(t.get("classify_s", 0)) for t in tasks.values())
        acc[res["experiment"]["cell"]].append((train_seconds(res, diagnostics), ev))
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


def alphas(scores: dict[str, dict[str, float]], cohort: tuple[str, ...],
           rescale: tuple[str, ...] = ()) -> dict[str, float]:
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
    return alphas(_means(summary), tasks)


def _means(summary: dict[str, dict[str, tuple[float, float, int]]]) -> dict[str, dict[str, float]]:
    return {c: {k: v[0] for k, v in s.items()} for c, s in summary.items()}


def _fmt(v: tuple[float, float, int] | None) -> str:
    if v is None:
        return "—"
    mean, std, n = v
    return f"{mean:.1f} ± {std:.1f}" if n > 1 else f"{mean:.1f}"


def collect_status(spec: ExperimentSpec, all_results: list[dict[str, Any]]) -> list[str]:
    """Markdown: how many of the declared (cell, seed) runs have results, and which are missing."""
    have = {(r["experiment"]["cell"], int(r["experiment"].get("seed", 0))) for r in all_results}
    declared = [(c.name, s) for c in spec.cells for s in spec.cell_seeds(c)]
    missing: dict[str, list[int]] = defaultdict(list)
    for cell, seed in declared:
        if (cell, seed) not in have:
            missing[cell].append(seed)
    n = len(declared) - sum(len(v) for v in missing.values())
    text = f"**Runs:** {n} of the {len(declared)} declared (cell, seed) runs have results."
    if missing:
        none = [c.name for c in spec.cells if len(missing.get(c.name, [])) == len(spec.cell_seeds(c))]
        part = [f"{c} (seed {', '.join(map(str, v))})" for c, v in missing.items() if c not in none]
        text += " Not run yet: " + ", ".join(none + part) + ". Claims on them read *not run*."
    extra = sorted({c for c, _ in have} - {c.name for c in spec.cells})
    if extra:
        text += f" Results of cells the file no longer declares: {', '.join(extra)}."
    return [text, ""]


def write_report(all_results: list[dict[str, Any]], out_md: str | Path, *, title: str | None = None,
                 spec: ExperimentSpec | None = None, source: str | Path | None = None, chart: bool = True) -> Path:
    """Write the Markdown report and a PNG chart next to it (unless `chart` is false); returns the
    Markdown path. With the experiment spec, cells follow the file's order, the report says which
    declared runs have results, and its [[claim]] tables get a verdict each. `source` names the
    folder the results were read from. The Markdown does not depend on whether the chart is drawn."""
    out_md = Path(out_md)
    lines = report_lines(all_results, spec=spec, source=source, png=out_md.with_suffix(".png"), title=title,
                         chart=chart)
    atomic_write_text(out_md, "\n".join(lines) + "\n")
    return out_md


def write_reports(parts: list[tuple[list[dict[str, Any]], ExperimentSpec, str | Path]], out_md: str | Path, *,
                  chart: bool = True) -> Path:
    """One Markdown file for several experiments, in the order given: each experiment's report as a
    section (its headings one level down) with its own chart ``<name>-<experiment>.png``."""
    if len(parts) == 1:
        results, spec, source = parts[0]
        return write_report(results, out_md, spec=spec, source=source, chart=chart)
    out_md = Path(out_md)
    lines = ["# Results", "", "Generated by `sentkit experiment report` from the committed results files alone. "
             "Experiments: " + ", ".join(f"[{spec.name}](#results-{spec.name})" for _, spec, _ in parts) + ".", ""]
    for results, spec, source in parts:
        png = out_md.with_name(f"{out_md.stem}-{spec.name}.png")
        if results:
            section = report_lines(results, spec=spec, source=source, png=png, chart=chart)
        else:  # an experiment that has not run yet: what it declares, nothing to score
            section = [f"# Results: {spec.name}", "", *collect_status(spec, results)]
        lines += [("#" + ln if ln.startswith("#") else ln) for ln in section]
    atomic_write_text(out_md, "\n".join(lines) + "\n")
    return out_md


def headline_table(spec: ExperimentSpec, summary: dict[str, dict[str, tuple[float, float, int]]],
                   all_results: list[dict[str, Any]],
                   diagnostics: dict[str, list[dict[str, Any]]] | None = None) -> list[str]:
    """The table a report opens with: the spec's headline cells, their seeds, the three averages, cosine STS and
    what each cost: wall-clock and CPU time per seed, and the training CPU-hours of the cell with every
    cell it continues (its base, the vectors its base started from, ...)."""
    costs = cell_costs(all_results, diagnostics)
    cpu = cell_cpu(all_results)
    chain = chain_train_cpu(spec, all_results)
    lines = ["| cell | seeds | downstream | unsupervised STS | supervised | cosine STS | train (s / seed) "
             "| evaluate (s / seed) | CPU (min / seed) | training CPU-h, bases included |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in spec.headline:
        if c not in summary:
            lines.append(f"| {c} | 0 | not run | | | | | | | |")
            continue
        n = max(v[2] for v in summary[c].values())
        t, e, _ = costs.get(c, (0.0, 0.0, 0))
        minutes = f"{cpu[c] / 60:.0f}" if c in cpu else ""
        hours = _hours(chain.get(c))
        lines.append(f"| {c} | {n} | {_fmt(summary[c].get('avg:downstream'))} | "
                     f"{_fmt(summary[c].get('avg:unsupervised_sts'))} | {_fmt(summary[c].get('avg:supervised'))} | "
                     f"{_fmt(summary[c].get('avg:cosine_sts'))} | "
                     f"{t:.0f} | {e:.0f} | {minutes} | {hours} |")
    return [*lines, ""]


BEST_OF = ("avg:downstream", "avg:unsupervised_sts", "avg:supervised")


def best_versions(spec: ExperimentSpec, summary: dict[str, dict[str, tuple[float, float, int]]],
                  scores: tuple[str, ...] = BEST_OF) -> dict[str, dict[str, str]]:
    """{row: {score: the version cell with the highest mean}} over the versions that have results."""
    out: dict[str, dict[str, str]] = {}
    for row in spec.rows:
        have = [v for v in row.versions if v in summary]
        out[row.name] = {k: max((v for v in have if k in summary[v]), key=lambda v: summary[v][k][0])
                         for k in scores if any(k in summary[v] for v in have)}
    return out


def row_claim(claim: Any, spec: ExperimentSpec, summary: dict[str, dict[str, tuple[float, float, int]]]) -> Any:
    """A claim on [[row]]s (`rows = true`) as a claim on cells: each row replaced by its best version on the claim's
    metric (a row without results keeps its first version, so the claim reads not run)."""
    if not claim.rows:
        return claim
    import dataclasses

    best = best_versions(spec, summary, (claim.metric,))
    versions = {r.name: r.versions for r in spec.rows}

    def pick(row: str) -> str:
        return best.get(row, {}).get(claim.metric) or versions[row][0]

    return dataclasses.replace(claim, cells=[pick(r) for r in claim.cells], baseline=[pick(r) for r in claim.baseline],
                               rows=False)


def best_versions_table(spec: ExperimentSpec, summary: dict[str, dict[str, tuple[float, float, int]]],
                        all_results: list[dict[str, Any]]) -> list[str]:
    """The table a study of [[row]]s opens with: each row's best version on each average (mean ± std over seeds,
    the version named), and the training CPU-hours (bases included) of the costliest version it uses."""
    best = best_versions(spec, summary)
    chain = chain_train_cpu(spec, all_results)
    lines = ["| row | downstream | unsupervised STS | supervised | seeds | training CPU-h, bases included |",
             "|---|---|---|---|---|---|"]
    for row in spec.rows:
        picks = best.get(row.name, {})
        if not picks:
            lines.append(f"| {row.name} | not run | | | | |")
            continue
        cols = [f"{_fmt(summary[picks[k]][k])} ({picks[k]})" if k in picks else "" for k in BEST_OF]
        seeds = sorted({max(x[2] for x in summary[v].values()) for v in picks.values()})
        costs = [chain[v] for v in picks.values() if v in chain]
        hours = _hours(max(costs, key=lambda x: x[0])) if costs else ""
        kind = "" if row.reference else " (candidate)"
        lines.append(f"| {row.name}{kind} | {' | '.join(cols)} | {'/'.join(map(str, seeds))} | {hours} |")
    return [*lines, ""]


def chain_train_cpu(spec: ExperimentSpec, all_results: list[dict[str, Any]]) -> dict[str, tuple[float, bool]]:
    """{cell: (training CPU seconds per seed of the cell plus every cell its ``"@cell"`` settings name,
    recursively; approximate)}: what it costs to make the cell's model from the corpus. A cell trained by
    an earlier process than the one that evaluated it has no CPU record: its logged training wall-clock
    stands in, and the sum is marked approximate. A cell missing from the results leaves every cell built
    on it out."""
    own = cell_cpu(all_results, train_only=True)
    phases = recipe_phase_cpu(all_results)
    own.update({c: sum(p.values()) for c, p in phases.items()})  # a recipe's cost: its recipe.json, phase by phase
    snaps: dict[str, list[float]] = defaultdict(list)  # a snapshot of another cell's run: the CPU to its step
    for res in all_results:
        if (res["experiment"].get("snapshot") or {}).get("cpu_seconds") is not None:
            snaps[res["experiment"]["cell"]].append(float(res["experiment"]["snapshot"]["cpu_seconds"]))
    own.update({c: statistics.fmean(v) for c, v in snaps.items()})
    at_step: dict[str, list[float]] = defaultdict(list)  # "@run/snapshots/step-N": the CPU of that run to step N
    for res in all_results:
        if res["experiment"]["cell"] in snaps:
            for value in (res["experiment"].get("settings") or {}).values():
                if isinstance(value, str) and value.startswith("@"):
                    at_step[value].extend(snaps[res["experiment"]["cell"]])
    wall: dict[str, list[float]] = defaultdict(list)
    for res in all_results:
        wall[res["experiment"]["cell"]].append(train_seconds(res))
    cells = {c.name: c for c in spec.cells}
    out: dict[str, tuple[float, bool]] = {}

    def bases(name: str) -> tuple[float, bool] | None:
        """The cost of what `name`'s ``"@cell"`` settings name (a snapshot: the bases of the run it is part of)."""
        acc, approx = 0.0, False
        for value in cells[name].settings.values():
            if isinstance(value, str) and value.startswith("@"):
                base, _, sub = value[1:].partition("/")
                if sub and base in phases and sub.split("/")[0] in phases[base]:  # a phase of a recipe: up to it
                    names = list(phases[base])
                    acc += sum(phases[base][k] for k in names[: names.index(sub.split("/")[0]) + 1])
                    continue
                # a snapshot is part of that cell's run (its own CPU counts to its step): that run's bases on top;
                # a cell on a snapshot (whitening it) adds the run's CPU to that step, as the snapshot's cell records
                if name in snaps or value in at_step:
                    up = bases(base) if base in cells else None
                    if up is not None and name not in snaps:
                        up = (up[0] + statistics.fmean(at_step[value]), up[1])
                else:
                    up = total(base)
                if up is None:
                    return None
                acc, approx = acc + up[0], approx or up[1]
        return acc, approx

    def total(name: str) -> tuple[float, bool] | None:
        if name in out:
            return out[name]
        if name not in cells or (name not in own and not wall.get(name)):
            return None
        acc, approx = (own[name], False) if name in own else (statistics.fmean(wall[name]), True)
        up = bases(name)
        if up is None:
            return None
        out[name] = (acc + up[0], approx or up[1])
        return out[name]

    for name in cells:
        total(name)
    return out


def recipe_phase_cpu(all_results: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """{cell: {phase folder: mean CPU seconds over seeds}, in the recipe's order} for cells whose results carry the
    `recipe.json` of a recipe of phases (the raw-text recipe)."""
    acc: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for res in all_results:
        for phase, rec in ((res["experiment"].get("recipe") or {}).get("phases") or {}).items():
            acc[res["experiment"]["cell"]].setdefault(phase, []).append(float(rec.get("cpu_seconds", 0.0)))
    return {c: {k: statistics.fmean(v) for k, v in p.items()} for c, p in acc.items()}


def _hours(entry: tuple[float, bool] | None) -> str:
    if entry is None:
        return ""
    return f"{'~' if entry[1] else ''}{entry[0] / 3600:.2f}"


def cell_cpu(all_results: list[dict[str, Any]], *, train_only: bool = False) -> dict[str, float]:
    """{cell: mean CPU seconds per seed, training + evaluation (or training only)} for cells whose results
    record the training's CPU time (None: trained by an earlier process, unknown)."""
    acc: dict[str, list[float]] = defaultdict(list)
    for res in all_results:
        cpu = res["experiment"].get("cpu_seconds")
        if cpu and cpu.get("train") is not None:
            extra = 0.0 if train_only else float(cpu.get("evaluate", 0))
            acc[res["experiment"]["cell"]].append(float(cpu["train"]) + extra)
    return {c: statistics.fmean(v) for c, v in acc.items()}


def cost_totals(all_results: list[dict[str, Any]], diagnostics: dict[str, list[dict[str, Any]]] | None = None) -> str:
    """One sentence: the grid's summed wall-clock (training, evaluation) and CPU time, from the results."""
    train = sum(train_seconds(r, diagnostics) for r in all_results)
    ev = 0.0
    for r in all_results:
        tasks = (r.get("timings") or {}).get("tasks", {})
        ev += sum(float(t.get("load_encode_s", 0)) + float(t.get("classify_s", 0)) for t in tasks.values())
    cpu = [r["experiment"]["cpu_seconds"] for r in all_results
           if r["experiment"].get("cpu_seconds") and r["experiment"]["cpu_seconds"].get("train") is not None]
    text = (f"In all, {len(all_results)} runs: {(train + ev) / 3600:.1f} h of wall-clock time summed over runs "
            f"({train / 3600:.1f} h training, {ev / 3600:.1f} h evaluation).")
    if cpu:
        total = sum(float(c.get("train", 0)) + float(c.get("evaluate", 0)) for c in cpu)
        text += f" CPU time, recorded for {len(cpu)} of them: {total / 3600:.1f} CPU-hours."
    return text


def diagnostics_section(source: str | Path, cells: list[str]) -> list[str]:
    """The diagnostics of `sentkit experiment diagnose` (anisotropy, training curve, spans), mean
    over seeds; nothing when the results folder holds none."""
    from sentkit.experiments.diagnostics import collect_diagnostics

    diag = collect_diagnostics(source)
    rows = [c for c in cells if c in diag]
    if not rows:
        return []

    def mean(values: list[float]) -> str:
        return f"{statistics.fmean(values):.3f}" if values else ""

    lines = ["## Diagnostics", "", "Anisotropy: mean cosine of 2,000 random pairs of different STS-B test sentences "
             "(1: every vector points the same way). Losses: the first and last logged value (mean over seeds). "
             "Spans: mean anchor and positive lengths and the share of positives adjacent to, overlapping or "
             "subsumed by their anchor, sampled with the run's settings (`sentkit experiment diagnose`).", "",
             "| cell | anisotropy | losses, first -> last | tokens seen | anchor / positive tokens | adjacent / overlapping / subsumed |",
             "|---|---|---|---|---|---|"]
    for c in rows:
        ds = diag[c]
        curves = [d["training"] for d in ds if d.get("training")]
        loss = "; ".join(f"{k} {mean([t['first'][k] for t in curves])} -> {mean([t['last'][k] for t in curves])}"
                         for k in (curves[0]["first"] if curves else {}) if k != "loss" or len(curves[0]["first"]) == 1)
        tokens = f"{statistics.fmean(t['tokens'] for t in curves) / 1e6:.2f}M" if curves else ""
        spans = [d["spans"] for d in ds if d.get("spans")]
        lengths = (f"{statistics.fmean(sp['anchor_tokens'] for sp in spans):.0f} / "
                   f"{statistics.fmean(sp['positive_tokens'] for sp in spans):.0f}") if spans else ""
        shares = " / ".join(f"{statistics.fmean(sp['relations'].get(r, 0.0) for sp in spans):.2f}"
                            for r in ("adjacent", "overlapping", "subsumed")) if spans else ""
        lines.append(f"| {c} | {mean([d['anisotropy'] for d in ds])} | {loss} | {tokens} | {lengths} | {shares} |")
    return [*lines, ""]


def fixed_cells(spec: ExperimentSpec) -> frozenset[str]:
    """Cells that train nothing, so one seed is all there is (see claims.judge). A `pretrained` cell that
    evaluates one seed of a trained run (its model is another cell's, `"@cell"`, or a run's `.../seed-<k>/...`
    folder) is not: that model had other seeds."""
    return frozenset(c.name for c in spec.cells if c.kind.seed_free(c.settings))


def report_lines(all_results: list[dict[str, Any]], *, spec: ExperimentSpec | None, source: str | Path | None,
                 png: Path, title: str | None = None, chart: bool = True) -> list[str]:
    """The Markdown lines of one experiment's report (and its chart at `png`)."""
    summary = summarise(all_results)
    if not summary:
        raise FileNotFoundError("no results files found: run `sentkit experiment run` (or `sentkit experiment import`)")
    title = title or (f"Results: {spec.name}" if spec else "Results")
    order = [c.name for c in spec.cells] if spec else []
    cells = [c for c in order if c in summary] + [c for c in summary if c not in order]
    summary = {c: summary[c] for c in cells}
    groups = {r["experiment"]["cell"]: r["experiment"].get("group", "") for r in all_results}
    tasks = [t for t in (*SUPERVISED, *UNSUPERVISED) if any(t in summary[c] for c in cells)]
    avgs = [a for a in AVERAGES if any(a in summary[c] for c in cells)]
    where = f"the results files in `{Path(source).as_posix()}`" if source is not None else "the results files"
    lines = [f"# {title}", "", f"Generated by `sentkit experiment report` from {where} alone; "
             "mean ± std over seeds (the seeds column gives their number).", ""]
    from sentkit.experiments.diagnostics import collect_diagnostics

    diag = collect_diagnostics(source) if source is not None else {}
    if spec is not None:
        lines += collect_status(spec, all_results)
    if spec is not None and spec.rows:
        lines += ["Each row's best version on each average (the version named beside its score):", "",
                  *best_versions_table(spec, summary, all_results)]
    if spec is not None and spec.headline:
        lines += headline_table(spec, summary, all_results, diag)
    if spec is not None and spec.summary:
        lines += [spec.summary.strip(), ""]
    if spec is not None and spec.claims:
        claims = [row_claim(c, spec, summary) for c in spec.claims]
        lines += ["## Claims", "", *claims_mod.render(claims, summary, paper_summary(all_results, spec),
                                                      "Hill et al. 2016, Tables 3 and 4", fixed_cells(spec))]
    lines += ["## All scores", "", "Averages: " + "; ".join(f"`{a.split(':')[1]}` {AVERAGE_HELP[a]}" for a in avgs)
              + ".", ""]
    head = ["cell", "group", "seeds", *[a.split(":")[1] for a in avgs], *tasks]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cells:
        n = max(v[2] for v in summary[c].values())
        row = [c, groups.get(c, ""), str(n), *[_fmt(summary[c].get(a)) for a in avgs], *[_fmt(summary[c].get(t)) for t in tasks]]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", *probing_section(summary, cells, groups), *mteb_section(summary, cells)]
    if spec is not None:
        lines += scaling_section(spec, summary, all_results, png.with_name(f"{png.stem}-scaling.png"), chart=chart)
    lines += [*length_section(summary), *hill_comparison(all_results, summary, spec), *consistency_section(all_results, summary)]
    if source is not None:
        lines += diagnostics_section(source, cells)
    costs = cell_costs(all_results, diag)
    lines += ["## Cost", "", "Wall-clock seconds per seed, on the machine that ran the cell (training, counting "
              "every process of a resumed run up to the step the next one resumed from; "
              "evaluation = encoding + classifiers over all tasks). " + cost_totals(all_results, diag), "",
              "| cell | train s | evaluate s |", "|---|---|---|"]
    lines += [f"| {c} | {costs[c][0]:.0f} | {costs[c][1]:.0f} |" for c in cells if c in costs]
    lines += ["", f"![averages]({png.name})"]
    if chart:
        try:
            _chart(summary, [a for a in AVERAGES if a in CHART_AVERAGES and a in avgs] or avgs, png)
        except ImportError:
            log.warning("chart not drawn: install matplotlib (pip install 'sentkit[report]')")
    return lines


def probing_section(summary: dict[str, dict[str, tuple[float, float, int]]], cells: list[str],
                    groups: dict[str, str]) -> list[str]:
    """A table of the probing tasks (accuracy) and their mean, when any cell was scored on them."""
    tasks = [t for t in PROBING if any(t in summary[c] for c in cells)]
    if not tasks:
        return []
    head = ["cell", "group", "seeds", "probing", *tasks]
    lines = ["## Probing", "", "Accuracy on SentEval's probing tasks (Conneau et al. 2018; the files `sentkit "
             "data build-probing` builds, or SentEval's own), mean ± std over seeds; `probing` is "
             f"{AVERAGE_HELP['avg:probing']}.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cells:
        if not any(t in summary[c] for t in tasks):
            continue
        n = max(summary[c][t][2] for t in tasks if t in summary[c])
        row = [c, groups.get(c, ""), str(n), _fmt(summary[c].get("avg:probing")), *[_fmt(summary[c].get(t)) for t in tasks]]
        lines.append("| " + " | ".join(row) + " |")
    return [*lines, ""]


def _hill_rows(all_results: list[dict[str, Any]], spec: ExperimentSpec | None = None) -> dict[str, str]:
    """{cell: the Hill et al. table row it runs} for cells of the paper's models: the experiment
    file's cells (run or not), then any other cell of the results."""
    cells = [(c.name, c.method, c.settings) for c in spec.cells] if spec else []
    cells += [(r["experiment"]["cell"], str(r["experiment"].get("method", "")), r["experiment"].get("settings") or {})
              for r in all_results]
    out: dict[str, str] = {}
    for cell, method, settings in cells:
        row = paper.hill_row(method, settings)
        if row is not None:
            out.setdefault(cell, row)
    return out


def paper_summary(all_results: list[dict[str, Any]],
                  spec: ExperimentSpec | None = None) -> dict[str, dict[str, tuple[float, float, int]]]:
    """The paper's figures of each Hill et al. cell's row, as one-seed cells (for the claims)."""
    rows = _hill_rows(all_results, spec)
    return {c: {k: (v, 0.0, 1) for k, v in paper.hill_scores(row).items()} for c, row in rows.items()}


def hill_comparison(all_results: list[dict[str, Any]], summary: dict[str, dict[str, tuple[float, float, int]]],
                    spec: ExperimentSpec | None = None) -> list[str]:
    """Markdown: cells of Hill et al.'s models next to every figure of the paper's Tables 3 and 4, then
    the paper's rows that no cell has results for (none when the grid has no Hill et al. model)."""
    if not _hill_rows(all_results, spec):
        return []
    rows = {c: r for c, r in _hill_rows(all_results).items() if c in summary}
    out = ["## Hill et al. (2016) models next to the paper", "",
           "Each cell: this run / the paper (`sentkit/experiments/paper.py`, checked against the paper's text). The "
           "paper trained on the Toronto Books Corpus (70m sentences, its section 2.4; 0.9B words, the label of its "
           "Table 3; the recurrent models for days on a GPU); these runs train on 209 Gutenberg books (~21M words) within about an hour of one CPU core. A cell "
           "whose input embeddings are fixed pre-trained vectors sits beside the paper's \"+embs.\" row.", ""]
    t3 = (*paper.HILL_TABLE3_KEYS, "avg:hill_table3")
    out += ["**Table 3** (supervised; accuracy, MSRP accuracy and F1). `avg` is the mean over the cohort, MSRP "
            "counted once as the mean of accuracy and F1.", "",
            "| cell | paper row | " + " | ".join(paper.HILL_TABLE3_COLUMNS) + " | avg |", "|" + "---|" * (2 + len(t3))]
    out += _paper_table(rows, summary, t3, set(paper.HILL_TABLE3))
    out += ["", "Rows with a cell of `—` have no results here (not run yet, or models this grid does not train: "
            "NMT and CaptionRep need parallel text or image features, C-PHRASE a parser)."]
    t4 = (*paper.HILL_TABLE4_KEYS, "avg:hill_table4")
    out += ["", "**Table 4** (unsupervised; Spearman correlation of cosine similarity x 100). The paper's STS14 "
            "\"All\" is not the mean of its six subsets (CBOW's six average 61.5, its All is 64; SkipThought's "
            "39.5 and 27): it fits one correlation over all 3,750 pairs pooled, so ours is the suite's `concatenated` "
            "score (`STS14:pooled`), not SentEval's mean over subsets (the `STS14` column of *All scores*). The "
            "paper's SICK is train + test; ours is the SICK-R test set.", "",
            "| cell | paper row | " + " | ".join(paper.HILL_TABLE4_COLUMNS) + " | avg |", "|" + "---|" * (2 + len(t4))]
    out += _paper_table(rows, summary, t4, set(paper.HILL_TABLE4))
    return [*out, ""]


def _paper_table(rows: dict[str, str], summary: dict[str, dict[str, tuple[float, float, int]]],
                 keys: tuple[str, ...], table: set[str]) -> list[str]:
    lines = []
    for c, row in rows.items():
        p = paper.hill_scores(row) if row in table else {}
        lines.append(f"| {c} | {row} | " + " | ".join(f"{_num(summary[c].get(k))} / {_num(p.get(k))}" for k in keys) + " |")
    for row in (r for r in paper.HILL_TABLE3 if r in table and r not in rows.values()):
        p = paper.hill_scores(row)
        lines.append(f"| — | {row} | " + " | ".join(f"— / {_num(p.get(k))}" for k in keys) + " |")
    return lines


def consistency_section(all_results: list[dict[str, Any]], summary: dict[str, dict[str, tuple[float, float, int]]]) -> list[str]:
    """Markdown: Hill et al.'s Table 6 cohorts' Cronbach's alpha over this grid's Hill cells, beside
    the paper's figures and the same formula on the paper's Tables 3 and 4; then SentEval's wider cohorts."""
    means = _means(summary)
    hill = {c: means[c] for c in _hill_rows(all_results) if c in means}
    ppr = {r: paper.hill_scores(r) for r in paper.HILL_TABLE3}
    both = (*paper.HILL_SUPERVISED, *paper.HILL_UNSUPERVISED)
    cohorts = [("supervised: MSRP, MR, CR, SUBJ, MPQA, TREC", paper.HILL_SUPERVISED, (), "supervised"),
               ("unsupervised: STS14's six subsets, STS14 All, SICK", paper.HILL_UNSUPERVISED, (), "unsupervised"),
               ("all 14, correlations on their 0-1 scale", both, paper.HILL_UNSUPERVISED, "all"),
               ("all 14, every score in points", both, (), "")]
    out = ["## Internal consistency (Hill et al. 2016, Table 6)", "",
           f"Cronbach's alpha of Hill et al.'s task cohorts across the {len(hill)} cells that run one of the paper's "
           "models (higher: the tasks rank models alike), beside the paper's Table 6 and, as a check of the formula, "
           f"the same computation on the paper's own Tables 3 and 4 ({len(ppr)} rows). The paper's 0.81 for all 14 "
           "evaluations together is reproduced only with the correlations on their 0-1 scale next to accuracies "
           "in %, which is what that row does; the paper does not say how it scaled them.", "",
           "| cohort | this grid | paper (Table 6) | paper's Tables 3-4 recomputed |", "|---|---|---|---|"]
    for label, cohort, rescale, key in cohorts:
        ours, theirs = alphas(hill, cohort, rescale).get("all"), alphas(ppr, cohort, rescale).get("all")
        out.append(f"| {label} | {_num(ours, 2)} | {_num(paper.HILL_ALPHA.get(key), 2)} | {_num(theirs, 2)} |")
    out += ["", "With one task left out of its cohort (the paper's consistency rank in brackets, 1 = most "
            "consistent with the other evaluations):", "",
            "| left out | this grid | paper (Table 6) | paper's Tables 3-4 recomputed |", "|---|---|---|---|"]
    for cohort in (paper.HILL_SUPERVISED, paper.HILL_UNSUPERVISED):
        left, left_paper = alphas(hill, cohort), alphas(ppr, cohort)
        for t in cohort:
            a, rank = paper.HILL_ALPHA_WITHOUT[t]
            out.append(f"| {paper.HILL_LABELS[t]} (`{t}`) | {_num(left.get(f'without {t}'), 2)} | {a:.2f} ({rank}) | "
                       f"{_num(left_paper.get(f'without {t}'), 2)} |")
    out += ["", f"SentEval's wider cohorts (not the paper's), across all {len(summary)} cells:", ""]
    for label, cohort in (("supervised", SUPERVISED), ("unsupervised", UNSUPERVISED)):
        alpha = consistency(summary, cohort)
        if alpha:
            out.append(f"- {label} ({', '.join(k.split(' ', 1)[1] for k in alpha if k != 'all')}): Cronbach's alpha "
                       f"{alpha['all']:.3f}; leaving one task out: "
                       + ", ".join(f"{k.split(' ', 1)[1]} {v:.3f}" for k, v in alpha.items() if k != "all"))
        else:
            out.append(f"- {label}: needs at least two cells and two tasks")
    return [*out, ""]


def _num(v: tuple[float, float, int] | float | None, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "—"
    return f"{v[0] if isinstance(v, tuple) else v:.{digits}f}"


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
    fig.savefig(png, dpi=110, metadata={"Software": None})  # no version stamp: same bytes on a rerun
    plt.close(fig)


# ----------------------------------------------------------------------------- STS by length
def length_section(summary: dict[str, dict[str, tuple[float, float, int]]]) -> list[str]:
    """Cosine STS within each pair-length bin, for the cells whose results have it."""
    from sentkit.evaluation.protocols import LENGTH_BINS

    keys = [f"sts-length:{b}" for b, _, _ in LENGTH_BINS]
    cells = [c for c in summary if any(k in summary[c] for k in keys)]
    if not cells:
        return []
    lines = ["## Cosine STS by sentence length", "",
             "Spearman x 100 of cosine similarity against the gold scores, within pairs whose two sentences average "
             + ", ".join(f"{b} words" for b, _, _ in LENGTH_BINS) + " (whitespace words); the mean over the tasks of the "
             "unsupervised STS average (STS12-16 with their subsets pooled, STS-B and SICK-R test).", "",
             "| cell | " + " | ".join(f"{b} words" for b, _, _ in LENGTH_BINS) + " | unsupervised STS |",
             "|---|" + "---|" * (len(keys) + 1)]
    for c in cells:
        lines.append(f"| {c} | " + " | ".join(_fmt(summary[c].get(k)) for k in keys) + f" | {_fmt(summary[c].get('avg:unsupervised_sts'))} |")
    return [*lines, ""]


# ----------------------------------------------------------------------------- scaling
SCALING_SCORES = ("avg:downstream", "avg:unsupervised_sts", "avg:supervised")


Point = tuple[float, float, str]  # (training CPU-hours with bases, score, the version it is)


def curve_points(curve: Any, summary: dict[str, dict[str, tuple[float, float, int]]],
                 cpu: dict[str, tuple[float, bool]], score: str) -> list[Point]:
    """A curve's points on one score: for each of its cells with results, its best version on that score (a cell
    `<cell><suffix>` for each of the curve's `versions`), at that version's CPU-hours; in order of CPU-hours."""
    pts: list[Point] = []
    for c in curve.cells:
        have = [c + v for v in curve.versions if c + v in cpu and score in summary.get(c + v, {})]
        if have:
            best = max(have, key=lambda v: summary[v][score][0])
            pts.append((cpu[best][0] / 3600, summary[best][score][0], best))
    return sorted(pts)


def _at(pts: list[Point], x: float) -> float:
    """The line through `pts` at x, linear in log CPU-hours (flat outside their range)."""
    for (x0, y0, _), (x1, y1, _) in itertools.pairwise(pts):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return pts[0][1] if x <= pts[0][0] else pts[-1][1]


def _trend(pts: list[Point]) -> tuple[float, float]:
    """(intercept, slope) per log CPU-hour of the line through the last two points (slope 0 with one point)."""
    if len(pts) < 2 or pts[-1][0] == pts[-2][0]:
        return pts[-1][1], 0.0
    (x0, y0, _), (x1, y1, _) = pts[-2], pts[-1]
    slope = (y1 - y0) / (math.log(x1) - math.log(x0))
    return y1 - slope * math.log(x1), slope


def crossing(line: list[Point], base: list[Point], margin: float) -> str:
    """Where `line` first leads `base` by `margin` points: read off the measured range (both lines interpolated in
    log CPU-hours), else projected from each line's last two points; a sentence."""
    if not line or not base:
        return "not measured"
    if line[0][0] > base[-1][0]:  # every point of the line costs more than the other line's last
        return _beyond(line, base, margin)
    lo, hi = max(line[0][0], base[0][0]), min(line[-1][0], base[-1][0])
    xs = sorted({p[0] for p in line + base if lo <= p[0] <= hi} | {lo, hi})
    gaps = [(x, _at(line, x) - _at(base, x)) for x in xs] if lo <= hi else []
    for (x0, g0), (x1, g1) in itertools.pairwise(gaps):
        if g0 < margin <= g1:  # crosses between x0 and x1 (linear in log CPU-hours)
            x = math.exp(math.log(x0) + (margin - g0) * (math.log(x1) - math.log(x0)) / (g1 - g0))
            return f"leads by {margin:g} from about {x:.2f} CPU-hours (read off the measured points)"
    if gaps and gaps[0][1] >= margin:
        return f"leads by {margin:g} or more over the whole measured range (from {gaps[0][0]:.2f} CPU-hours)"
    (a1, b1), (a2, b2) = _trend(line), _trend(base)
    where = f"gap {gaps[-1][1]:+.2f} at {gaps[-1][0]:.2f} CPU-hours" if gaps else "the lines' budgets do not overlap"
    if b1 <= b2:
        return (f"does not lead by {margin:g} in the measured range ({where}), and its last two points rise no faster "
                "than the other line's: no crossing is projected")
    x = math.exp((margin - (a1 - a2)) / (b1 - b2))
    return (f"does not lead by {margin:g} in the measured range ({where}); projected from each line's last two points "
            f"(linear in log CPU-hours), it would at about {x:.1f} CPU-hours")


def _beyond(line: list[Point], base: list[Point], margin: float) -> str:
    """`crossing` when the other line's measured points all cost less than the line's first: each point of the line
    against the best the other line reached for less compute (what it would do with more is not measured)."""
    xb, yb, _ = max(base, key=lambda p: p[1])
    against = (f"the other line's best measured point ({yb:.2f} at {xb:.2f} CPU-hours; it is not measured beyond "
               f"{base[-1][0]:.2f})")
    for x, y, _ in line:
        if y - yb >= margin:
            return f"leads by {margin:g} or more from {x:.2f} CPU-hours ({y - yb:+.2f}) against {against}"
    x, y, _ = max(line, key=lambda p: p[1])
    return (f"does not lead by {margin:g}: its best, {y:.2f} at {x:.2f} CPU-hours, is {y - yb:+.2f} against {against}; "
            "no crossing is read off or projected where the lines' budgets do not overlap")


def scaling_section(spec: ExperimentSpec, summary: dict[str, dict[str, tuple[float, float, int]]],
                    all_results: list[dict[str, Any]], png: Path, *, chart: bool = True) -> list[str]:
    """The spec's curves as a table (each point: its best version's training CPU-hours and scores), the budget at
    which each curve leads the baseline curve, and a chart of quality against CPU-hours, one line per curve, the
    reference cells as horizontal lines."""
    if not spec.curves:
        return []
    cpu = chain_train_cpu(spec, all_results)
    lines = ["## Scaling: quality against compute", "",
             "Each point is one cell at its best version on each score (the version named): its training CPU-hours, "
             "bases included (CPU time of the training processes, mean over seeds, of the cell and of every cell it "
             "continues: the base, the vectors the base started from; ~: a cell trained by an earlier process has no "
             "CPU record, and its logged training wall-clock stands in) and its scores. Horizontal lines: " +
             (", ".join(f"`{r}`" for r in spec.references) or "none") + ".", "",
             "| curve | cell | seeds | train CPU-h | " + " | ".join(a.split(":")[1] for a in SCALING_SCORES) + " |",
             "|---|---|---|---|" + "---|" * len(SCALING_SCORES)]
    for curve in spec.curves:
        for c in curve.cells:
            versions = [c + v for v in curve.versions if c + v in summary]
            if not versions:
                lines.append(f"| {curve.name} | {c} | 0 | not run |" + " |" * len(SCALING_SCORES))
                continue
            n = max(v[2] for v in summary[versions[0]].values())
            cols = []
            for a in SCALING_SCORES:
                have = [v for v in versions if a in summary[v]]
                best = max(have, key=lambda v: summary[v][a][0]) if have else None
                tag = f" ({best[len(c):].lstrip('-')})" if best and best != c else ""
                cols.append(f"{_fmt(summary[best].get(a))}{tag}" if best else "")
            lines.append(f"| {curve.name} | {c} | {n} | {_hours(cpu.get(versions[0]))} | " + " | ".join(cols) + " |")
    for r in spec.references:
        if r in summary:
            lines.append(f"| reference | {r} | {max(v[2] for v in summary[r].values())} | | "
                         + " | ".join(_fmt(summary[r].get(a)) for a in SCALING_SCORES) + " |")
    base = next((c for c in spec.curves if c.baseline), None)
    if base is not None:
        lines += ["", f"Where each line leads `{base.name}` by {base.margin:g} points (each line at its best version "
                  "on the score):", ""]
        for curve in spec.curves:
            if curve is base:
                continue
            for a in SCALING_SCORES:
                text = crossing(curve_points(curve, summary, cpu, a), curve_points(base, summary, cpu, a), base.margin)
                lines.append(f"- {curve.name}, {a.split(':')[1]}: {text}.")
    lines += ["", f"![scaling]({png.name})", ""]
    if chart:
        try:
            _scaling_chart(spec, summary, cpu, png)
        except ImportError:
            log.warning("scaling chart not drawn: install matplotlib (pip install 'sentkit[report]')")
    return lines


def _scaling_chart(spec: ExperimentSpec, summary: dict[str, dict[str, tuple[float, float, int]]],
                   cpu: dict[str, tuple[float, bool]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores = SCALING_SCORES
    fig, axes = plt.subplots(1, len(scores), figsize=(15, 4.5))
    for ax, score in zip(axes, scores):
        for curve in spec.curves:
            pts = curve_points(curve, summary, cpu, score)
            if pts:
                xs, ys, _ = zip(*pts)
                ax.plot(xs, ys, marker="o", label=curve.name, linestyle="--" if curve.baseline else "-")
        for i, r in enumerate(spec.references):
            if score in summary.get(r, {}):
                ax.axhline(summary[r][score][0], linestyle=":", color=f"C{(len(spec.curves) + i) % 10}", label=r)
        ax.set_xscale("log")
        ax.set_xlabel("training CPU-hours, bases included (log scale)")
        ax.set_ylabel(score.split(":")[1] + " (points)")
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110, metadata={"Software": None})
    plt.close(fig)
