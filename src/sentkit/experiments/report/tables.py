"""The report's tables: which runs have results, the headline and best-versions tables, all scores, probing,
cosine STS by sentence length, MTEB and the diagnostics."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from sentkit.experiments.grid import ExperimentSpec
from sentkit.experiments.report.costs import cell_costs, cell_cpu, chain_train_cpu
from sentkit.experiments.report.formatting import fmt, fmt_hours
from sentkit.experiments.report.scores import AVERAGE_HELP, PROBING, Summary, partial_averages
from sentkit.experiments.results import Runs, as_runs


def collect_status(spec: ExperimentSpec, all_results: Runs) -> list[str]:
    """Markdown: how many of the declared (cell, seed) runs have results, and which are missing."""
    have = {(r.cell, int(r.experiment.seed)) for r in as_runs(all_results)}
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


def headline_table(
    spec: ExperimentSpec,
    summary: dict[str, dict[str, tuple[float, float, int]]],
    all_results: Runs,
    diagnostics: dict[str, list[dict[str, Any]]] | None = None,
) -> list[str]:
    """The table a report opens with: the spec's headline cells, their seeds, the three averages, cosine STS and
    what each cost: wall-clock and CPU time per seed, and the training CPU-hours of the cell with every
    cell it continues (its base, the vectors its base started from, ...)."""
    costs = cell_costs(all_results, diagnostics)
    cpu = cell_cpu(all_results)
    chain = chain_train_cpu(spec, all_results)
    lines = [
        "| cell | seeds | downstream | unsupervised STS | supervised | cosine STS | train (s / seed) "
        "| evaluate (s / seed) | CPU (min / seed) | training CPU-h, bases included |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in spec.headline:
        if c not in summary:
            lines.append(f"| {c} | 0 | not run | | | | | | | |")
            continue
        n = max(v[2] for v in summary[c].values())
        t, e, _ = costs.get(c, (0.0, 0.0, 0))
        minutes = f"{cpu[c] / 60:.0f}" if c in cpu else ""
        hours = fmt_hours(chain.get(c))
        lines.append(
            f"| {c} | {n} | {fmt(summary[c].get('avg:downstream'))} | "
            f"{fmt(summary[c].get('avg:unsupervised_sts'))} | {fmt(summary[c].get('avg:supervised'))} | "
            f"{fmt(summary[c].get('avg:cosine_sts'))} | "
            f"{t:.0f} | {e:.0f} | {minutes} | {hours} |"
        )
    return [*lines, ""]


BEST_OF = ("avg:downstream", "avg:unsupervised_sts", "avg:supervised")


def best_versions(
    spec: ExperimentSpec, summary: dict[str, dict[str, tuple[float, float, int]]], scores: tuple[str, ...] = BEST_OF
) -> dict[str, dict[str, str]]:
    """{row: {score: the version cell with the highest mean}} over the versions that have results."""
    out: dict[str, dict[str, str]] = {}
    for row in spec.rows:
        have = [v for v in row.versions if v in summary]
        out[row.name] = {
            k: max((v for v in have if k in summary[v]), key=lambda v: summary[v][k][0])
            for k in scores
            if any(k in summary[v] for v in have)
        }
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

    return dataclasses.replace(
        claim, cells=[pick(r) for r in claim.cells], baseline=[pick(r) for r in claim.baseline], rows=False
    )


def best_versions_table(
    spec: ExperimentSpec, summary: dict[str, dict[str, tuple[float, float, int]]], all_results: Runs
) -> list[str]:
    """The table a study of [[row]]s opens with: each row's best version on each average (mean ± std over seeds,
    the version named), and the training CPU-hours (bases included) of the costliest version it uses."""
    best = best_versions(spec, summary)
    chain = chain_train_cpu(spec, all_results)
    lines = [
        "| row | downstream | unsupervised STS | supervised | seeds | training CPU-h, bases included |",
        "|---|---|---|---|---|---|",
    ]
    for row in spec.rows:
        picks = best.get(row.name, {})
        if not picks:
            lines.append(f"| {row.name} | not run | | | | |")
            continue
        cols = [f"{fmt(summary[picks[k]][k])} ({picks[k]})" if k in picks else "" for k in BEST_OF]
        seeds = sorted({max(x[2] for x in summary[v].values()) for v in picks.values()})
        costs = [chain[v] for v in picks.values() if v in chain]
        hours = fmt_hours(max(costs, key=lambda x: x[0])) if costs else ""
        kind = "" if row.reference else " (candidate)"
        lines.append(f"| {row.name}{kind} | {' | '.join(cols)} | {'/'.join(map(str, seeds))} | {hours} |")
    return [*lines, ""]


def probing_section(
    summary: dict[str, dict[str, tuple[float, float, int]]], cells: list[str], groups: dict[str, str]
) -> list[str]:
    """A table of the probing tasks (accuracy) and their mean, when any cell was scored on them."""
    tasks = [t for t in PROBING if any(t in summary[c] for c in cells)]
    if not tasks:
        return []
    head = ["cell", "group", "seeds", "probing", *tasks]
    lines = [
        "## Probing",
        "",
        "Accuracy on SentEval's probing tasks (Conneau et al. 2018; the files `sentkit "
        "data build-probing` builds, or SentEval's own), mean ± std over seeds; `probing` is "
        f"{AVERAGE_HELP['avg:probing']}.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for c in cells:
        if not any(t in summary[c] for t in tasks):
            continue
        n = max(summary[c][t][2] for t in tasks if t in summary[c])
        row = [
            c,
            groups.get(c, ""),
            str(n),
            fmt(summary[c].get("avg:probing")),
            *[fmt(summary[c].get(t)) for t in tasks],
        ]
        lines.append("| " + " | ".join(row) + " |")
    return [*lines, ""]


def length_section(summary: dict[str, dict[str, tuple[float, float, int]]]) -> list[str]:
    """Cosine STS within each pair-length bin, for the cells whose results have it."""
    from sentkit.evaluation.protocols import LENGTH_BINS

    keys = [f"sts-length:{b}" for b, _, _ in LENGTH_BINS]
    cells = [c for c in summary if any(k in summary[c] for k in keys)]
    if not cells:
        return []
    lines = [
        "## Cosine STS by sentence length",
        "",
        "Spearman x 100 of cosine similarity against the gold scores, within pairs whose two sentences average "
        + ", ".join(f"{b} words" for b, _, _ in LENGTH_BINS)
        + " (whitespace words); the mean over the tasks of the "
        "unsupervised STS average (STS12-16 with their subsets pooled, STS-B and SICK-R test).",
        "",
        "| cell | " + " | ".join(f"{b} words" for b, _, _ in LENGTH_BINS) + " | unsupervised STS |",
        "|---|" + "---|" * (len(keys) + 1),
    ]
    for c in cells:
        lines.append(
            f"| {c} | "
            + " | ".join(fmt(summary[c].get(k)) for k in keys)
            + f" | {fmt(summary[c].get('avg:unsupervised_sts'))} |"
        )
    return [*lines, ""]


def mteb_section(summary: dict[str, dict[str, tuple[float, float, int]]], cells: list[str]) -> list[str]:
    """A table of the MTEB tasks (mteb's main score x 100) and their mean, when any cell was scored on them."""
    tasks = sorted({k for c in cells for k in summary[c] if k.startswith("mteb:")})
    if not tasks:
        return []
    lines = [
        "## MTEB",
        "",
        "mteb's main score of each task (x 100; mean ± std over seeds), run by the mteb package "
        "on the cell's model (`mteb = [...]` in the experiment file; docs/evaluation.md, MTEB).",
        "",
        "| cell | mean | " + " | ".join(t.split(":", 1)[1] for t in tasks) + " |",
        "|---|---|" + "---|" * len(tasks),
    ]
    for c in cells:
        if any(t in summary[c] for t in tasks):
            lines.append(
                f"| {c} | {fmt(summary[c].get('avg:mteb'))} | "
                + " | ".join(fmt(summary[c].get(t)) for t in tasks)
                + " |"
            )
    return [*lines, ""]


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

    lines = [
        "## Diagnostics",
        "",
        "Anisotropy: mean cosine of 2,000 random pairs of different STS-B test sentences "
        "(1: every vector points the same way). Losses: the first and last logged value (mean over seeds). "
        "Spans: mean anchor and positive lengths and the share of positives adjacent to, overlapping or "
        "subsumed by their anchor, sampled with the run's settings (`sentkit experiment diagnose`).",
        "",
        "| cell | anisotropy | losses, first -> last | tokens seen | anchor / positive tokens "
        "| adjacent / overlapping / subsumed |",
        "|---|---|---|---|---|---|",
    ]
    for c in rows:
        ds = diag[c]
        curves = [d["training"] for d in ds if d.get("training")]
        loss = "; ".join(
            f"{k} {mean([t['first'][k] for t in curves])} -> {mean([t['last'][k] for t in curves])}"
            for k in (curves[0]["first"] if curves else {})
            if k != "loss" or len(curves[0]["first"]) == 1
        )
        tokens = f"{statistics.fmean(t['tokens'] for t in curves) / 1e6:.2f}M" if curves else ""
        spans = [d["spans"] for d in ds if d.get("spans")]
        lengths = (
            (
                f"{statistics.fmean(sp['anchor_tokens'] for sp in spans):.0f} / "
                f"{statistics.fmean(sp['positive_tokens'] for sp in spans):.0f}"
            )
            if spans
            else ""
        )
        shares = (
            " / ".join(
                f"{statistics.fmean(sp['relations'].get(r, 0.0) for sp in spans):.2f}"
                for r in ("adjacent", "overlapping", "subsumed")
            )
            if spans
            else ""
        )
        lines.append(f"| {c} | {mean([d['anisotropy'] for d in ds])} | {loss} | {tokens} | {lengths} | {shares} |")
    return [*lines, ""]


def all_scores_section(
    summary: Summary, cells: list[str], groups: dict[str, str], avgs: list[str], tasks: list[str]
) -> list[str]:
    """The table of every cell's averages `avgs` and task scores `tasks` (mean ± std over seeds)."""
    lines = [
        "## All scores",
        "",
        "Averages: " + "; ".join(f"`{a.split(':')[1]}` {AVERAGE_HELP[a]}" for a in avgs) + ".",
        "",
    ]
    head = ["cell", "group", "seeds", *[a.split(":")[1] for a in avgs], *tasks]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    partial = partial_averages({c: summary[c] for c in cells})

    def average(c: str, a: str) -> str:
        text = fmt(summary[c].get(a))
        return text + (f" ({partial[c, a][0]} of {partial[c, a][1]})" if (c, a) in partial else "")

    for c in cells:
        n = max(v[2] for v in summary[c].values())
        row = [c, groups.get(c, ""), str(n), *[average(c, a) for a in avgs], *[fmt(summary[c].get(t)) for t in tasks]]
        lines.append("| " + " | ".join(row) + " |")
    notes = sorted({f"{c} lacks {', '.join(p[2])}" for (c, _), p in partial.items()})
    if notes:
        lines += [
            "",
            "(n of m): an average over n of the m tasks the other cells' averages cover (a task that failed), not "
            "comparable with theirs: " + "; ".join(notes) + ".",
        ]
    return [*lines, ""]
