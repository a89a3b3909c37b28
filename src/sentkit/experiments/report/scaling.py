"""The report's scaling section: quality against training CPU-hours, one line per [[curve]], and the budget at which
each line leads the baseline line by its margin (read off the measured points, or projected)."""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sentkit.experiments.grid import ExperimentSpec
from sentkit.experiments.report.costs import chain_train_cpu
from sentkit.experiments.report.formatting import fmt, fmt_hours
from sentkit.experiments.results import Runs

log = logging.getLogger(__name__)


SCALING_SCORES = ("avg:downstream", "avg:unsupervised_sts", "avg:supervised")


Point = tuple[float, float, str]  # (training CPU-hours with bases, score, the version it is)


def curve_points(
    curve: Any,
    summary: dict[str, dict[str, tuple[float, float, int]]],
    cpu: Mapping[str, tuple[float, bool]],
    score: str,
) -> list[Point]:
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
        return (
            f"does not lead by {margin:g} in the measured range ({where}), and its last two points rise no faster "
            "than the other line's: no crossing is projected"
        )
    x = math.exp((margin - (a1 - a2)) / (b1 - b2))
    return (
        f"does not lead by {margin:g} in the measured range ({where}); projected from each line's last two points "
        f"(linear in log CPU-hours), it would at about {x:.1f} CPU-hours"
    )


def _beyond(line: list[Point], base: list[Point], margin: float) -> str:
    """`crossing` when the other line's measured points all cost less than the line's first: each point of the line
    against the best the other line reached for less compute (what it would do with more is not measured)."""
    xb, yb, _ = max(base, key=lambda p: p[1])
    against = (
        f"the other line's best measured point ({yb:.2f} at {xb:.2f} CPU-hours; it is not measured beyond "
        f"{base[-1][0]:.2f})"
    )
    for x, y, _ in line:
        if y - yb >= margin:
            return f"leads by {margin:g} or more from {x:.2f} CPU-hours ({y - yb:+.2f}) against {against}"
    x, y, _ = max(line, key=lambda p: p[1])
    return (
        f"does not lead by {margin:g}: its best, {y:.2f} at {x:.2f} CPU-hours, is {y - yb:+.2f} against {against}; "
        "no crossing is read off or projected where the lines' budgets do not overlap"
    )


def scaling_section(
    spec: ExperimentSpec,
    summary: dict[str, dict[str, tuple[float, float, int]]],
    all_results: Runs,
    png: Path,
    *,
    chart: bool = True,
) -> list[str]:
    """The spec's curves as a table (each point: its best version's training CPU-hours and scores), the budget at
    which each curve leads the baseline curve, and a chart of quality against CPU-hours, one line per curve, the
    reference cells as horizontal lines."""
    if not spec.curves:
        return []
    cpu = chain_train_cpu(spec, all_results)
    lines = [
        "## Scaling: quality against compute",
        "",
        "Each point is one cell at its best version on each score (the version named): its training CPU-hours, "
        "bases included (CPU time of the training processes, mean over seeds, of the cell and of every cell it "
        "continues: the base, the vectors the base started from; ~: a cell trained by an earlier process has no "
        "CPU record, and its logged training wall-clock stands in) and its scores. Horizontal lines: "
        + (", ".join(f"`{r}`" for r in spec.references) or "none")
        + ".",
        "",
        "| curve | cell | seeds | train CPU-h | " + " | ".join(a.split(":")[1] for a in SCALING_SCORES) + " |",
        "|---|---|---|---|" + "---|" * len(SCALING_SCORES),
    ]
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
                tag = f" ({best[len(c) :].lstrip('-')})" if best and best != c else ""
                cols.append(f"{fmt(summary[best].get(a))}{tag}" if best else "")
            lines.append(f"| {curve.name} | {c} | {n} | {fmt_hours(cpu.get(versions[0]))} | " + " | ".join(cols) + " |")
    for r in spec.references:
        if r in summary:
            lines.append(
                f"| reference | {r} | {max(v[2] for v in summary[r].values())} | | "
                + " | ".join(fmt(summary[r].get(a)) for a in SCALING_SCORES)
                + " |"
            )
    base = next((c for c in spec.curves if c.baseline), None)
    if base is not None:
        lines += [
            "",
            f"Where each line leads `{base.name}` by {base.margin:g} points (each line at its best version "
            "on the score):",
            "",
        ]
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


def _scaling_chart(
    spec: ExperimentSpec,
    summary: dict[str, dict[str, tuple[float, float, int]]],
    cpu: Mapping[str, tuple[float, bool]],
    png: Path,
) -> None:
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
