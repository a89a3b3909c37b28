"""Paper claims declared in an experiment file, judged from the results alone.

    [[claim]]
    paper = "DeCLUTR"
    claim = "continued pretraining beats the base model"
    kind = "better"                # better | similar | not_worse | increasing | top
    cells = ["declutr-tiny"]       # the side the claim favours (a group: mean of the cells' means)
    baseline = ["tiny-base-mean"]  # the other side
    metric = "avg:downstream"      # the score the verdict uses; `also` adds context rows
    note = "what the numbers mean"  # kept in the file, so a regenerated report keeps it

Verdicts: **held**, **did not hold**, **unclear** (the difference is inside the seed-to-seed noise
or the margin), or **not run** (a cell has no results). A difference counts only when it exceeds
both ``margin`` points and twice its standard error over seeds (cells with one seed add no error).
A ``margin`` written in the claim is a bar ("leads by >= 4"): a `better` claim whose difference is
below the bar by more than twice its standard error did not hold, even when it is positive; without
one, the margin (0.5) only keeps noise from counting, and a claim fails when the baseline is ahead.
`similar` holds when the difference is within ``tolerance`` either way; `not_worse` ("as good as",
a non-inferiority claim) holds when the cells are ahead, or behind by at most ``tolerance`` even at
two standard errors down, and did not hold when they trail by more than that beyond the noise.

Where the paper's own figures for the claim's cells are known (a second summary, ``paper``), each
row also shows the paper's side and the same rule is applied to the paper's figures.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Literal

from sentkit.core.config import ConfigError

Summary = dict[str, dict[str, tuple[float, float, int]]]  # {cell: {score: (mean, std, n seeds)}}
KINDS = ("better", "similar", "not_worse", "increasing", "top")


@dataclass
class ClaimSpec:
    paper: str
    claim: str
    cells: list[str]
    metric: str
    kind: Literal["better", "similar", "not_worse", "increasing", "top"] = "better"
    baseline: list[str] = field(default_factory=list)
    each: bool = False  # better: the cells must beat every baseline cell, not the baseline group's mean
    also: list[str] = field(default_factory=list)  # more scores shown (not judged)
    margin: float | None = None  # points a difference must exceed (better, increasing); written: a bar (see above)
    tolerance: float = 1.0  # points within which two sides count as equal (similar) or the cells may trail (not_worse)
    k: int = 3  # top: the cells must rank within the first k of `cells + baseline`
    note: str = ""
    rows: bool = False  # `cells` and `baseline` name [[row]]s: each side is that row's best version on `metric`

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"claim {self.claim!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if not self.cells:
            raise ConfigError(f"claim {self.claim!r}: `cells` is empty")
        if self.kind in ("better", "similar", "not_worse", "top") and not self.baseline:
            raise ConfigError(f"claim {self.claim!r}: kind {self.kind!r} needs `baseline` cells")
        if self.kind == "increasing" and len(self.cells) < 2:
            raise ConfigError(f"claim {self.claim!r}: kind 'increasing' needs at least two cells in order")
        if (self.margin is not None and self.margin < 0) or self.tolerance < 0 or self.k < 1:
            raise ConfigError(f"claim {self.claim!r}: margin and tolerance must be >= 0 and k >= 1")

    @property
    def bar(self) -> float:
        """The points a difference must exceed: the claim's own margin, else 0.5."""
        return 0.5 if self.margin is None else self.margin

    def all_cells(self) -> list[str]:
        return [*self.cells, *[c for c in self.baseline if c not in self.cells]]


@dataclass
class Side:
    """A group of cells on one score: mean of the cells' means and its standard error."""

    cells: list[str]
    mean: float
    se: float
    seeds: list[int]

    def label(self) -> str:
        n = f"{self.seeds[0]} seeds" if len(set(self.seeds)) == 1 else "seeds " + "/".join(str(s) for s in self.seeds)
        return f"{self.mean:.2f} (± {self.se:.2f} s.e., {n})" if max(self.seeds) > 1 else f"{self.mean:.2f} (1 seed)"


@dataclass
class Verdict:
    verdict: str  # held | did not hold | unclear | not run
    reason: str
    rows: list[tuple[str, str, str, str]]  # (score, cells side, baseline side, difference)
    paper: list[str] = field(default_factory=list)  # per row: the paper's figures ("" where unknown)
    caveat: str = ""  # e.g. a verdict that rests on cells of one seed
    seeds: str = ""  # the heading's note: "one seed" (every trained cell) or "some cells one seed"


def side(summary: Summary, cells: list[str], metric: str) -> Side | None:
    """Group mean; None when a cell has no value for the metric."""
    vals = [summary.get(c, {}).get(metric) for c in cells]
    if any(v is None for v in vals):
        return None
    means = [v[0] for v in vals if v is not None]
    ses = [v[1] / math.sqrt(v[2]) if v[2] > 1 else 0.0 for v in vals if v is not None]
    n = len(means)
    return Side(cells, sum(means) / n, math.sqrt(sum(s * s for s in ses)) / n, [v[2] for v in vals if v is not None])


def _diff(a: Side, b: Side) -> tuple[float, float]:
    return a.mean - b.mean, math.hypot(a.se, b.se)


def _sign(d: float, se: float, margin: float) -> int:
    """+1 / -1 when |d| exceeds both the margin and 2 standard errors, else 0."""
    bar = max(margin, 2 * se)
    return 1 if d > bar else -1 if d < -bar else 0


def judge(spec: ClaimSpec, summary: Summary, fixed: frozenset[str] = frozenset()) -> Verdict:
    """The claim's verdict on its metric, with rows for the metric and `also` scores; a held or failed
    verdict that rests on a trained cell of one seed carries that caveat (its noise is not measured).
    `fixed`: cells that train nothing (a given model evaluated as it is), whose one seed is no caveat."""
    v = _judge(spec, summary)
    single = [
        c
        for c in spec.all_cells()
        if c not in fixed and max((x[2] for x in summary.get(c, {}).values()), default=0) == 1
    ]
    if v.verdict in ("held", "did not hold") and single and spec.kind != "top":
        v.caveat = (
            f"{', '.join(single)} {'has' if len(single) == 1 else 'have'} one seed: the seed-to-seed noise of "
            "that side is not measured, so read this verdict as indicative"
        )
        trained = [c for c in spec.all_cells() if c not in fixed and c in summary]
        v.seeds = "one seed" if set(trained) <= set(single) else "some cells one seed"
    return v


def _judge(spec: ClaimSpec, summary: Summary) -> Verdict:
    rows = [r for m in (spec.metric, *spec.also) for r in _rows(spec, summary, m)]
    missing = [c for c in spec.all_cells() if c not in summary]
    if missing:
        return Verdict("not run", f"no results for {', '.join(missing)}", rows)
    if spec.kind == "top":
        return _judge_top(spec, summary, rows)
    if spec.kind == "increasing":
        sides = [side(summary, [c], spec.metric) for c in spec.cells]
        if any(s is None for s in sides):
            return Verdict("not run", f"a cell lacks {spec.metric}", rows)
        ok = [s for s in sides if s is not None]
        steps = [_diff(b, a) for a, b in itertools.pairwise(ok)]
        total = _diff(ok[-1], ok[0])
        mono = all(d > 0 for d, _ in steps)
        s = _sign(*total, spec.bar)
        if s > 0 and mono:
            return Verdict("held", f"rises at every step, {total[0]:+.2f} from first to last", rows)
        if s < 0:
            return Verdict("did not hold", f"falls {total[0]:+.2f} from first to last", rows)
        return Verdict(
            "unclear",
            f"{total[0]:+.2f} from first to last ({'monotone' if mono else 'not monotone'}), "
            f"inside max(margin {spec.bar}, 2 s.e. {2 * total[1]:.2f})",
            rows,
        )
    a = side(summary, spec.cells, spec.metric)
    baselines = [[c] for c in spec.baseline] if spec.each else [spec.baseline]
    bs = [side(summary, b, spec.metric) for b in baselines]
    if a is None or any(b is None for b in bs):
        return Verdict("not run", f"a cell lacks {spec.metric}", rows)
    diffs = [_diff(a, b) for b in bs if b is not None]
    if spec.kind == "similar":
        worst = max(diffs, key=lambda x: abs(x[0]))
        if abs(worst[0]) <= spec.tolerance:
            return Verdict(
                "held", f"difference {worst[0]:+.2f} is within the tolerance of {spec.tolerance} points", rows
            )
        if abs(worst[0]) > spec.tolerance + 2 * worst[1]:
            return Verdict(
                "did not hold",
                f"difference {worst[0]:+.2f} exceeds the tolerance of {spec.tolerance} points by more than 2 s.e.",
                rows,
            )
        return Verdict("unclear", f"difference {worst[0]:+.2f} is near the tolerance given the seed noise", rows)
    if spec.kind == "not_worse":  # "as good as": ahead by any amount, or behind by at most the tolerance
        d, se = min(diffs, key=lambda x: x[0] - 2 * x[1])
        if d - 2 * se >= -spec.tolerance:
            return Verdict("held", f"difference {d:+.2f} (2 s.e. {2 * se:.2f}) is above -{spec.tolerance} points", rows)
        if d + 2 * se < -spec.tolerance:
            return Verdict(
                "did not hold",
                f"difference {d:+.2f} is below -{spec.tolerance} points by more than 2 s.e. ({2 * se:.2f})",
                rows,
            )
        return Verdict("unclear", f"difference {d:+.2f} is near -{spec.tolerance} points given the seed noise", rows)
    signs = [_sign(d, se, spec.bar) for d, se in diffs]
    text = ", ".join(f"{d:+.2f} (2 s.e. {2 * se:.2f})" for d, se in diffs)
    if all(s > 0 for s in signs):
        return Verdict("held", f"difference {text} exceeds max(margin {spec.bar}, 2 s.e.)", rows)
    if any(s < 0 for s in signs):
        return Verdict("did not hold", f"difference {text}: the baseline is ahead beyond the noise", rows)
    if spec.margin is not None and any(d + 2 * se < spec.margin for d, se in diffs):
        return Verdict(
            "did not hold", f"difference {text}: below the bar of {spec.margin} points by more than 2 s.e.", rows
        )
    return Verdict("unclear", f"difference {text} is inside max(margin {spec.bar}, 2 s.e.)", rows)


def _judge_top(spec: ClaimSpec, summary: Summary, rows: list[tuple[str, str, str, str]]) -> Verdict:
    pool = spec.all_cells()
    have = {c: summary[c][spec.metric][0] for c in pool if spec.metric in summary[c]}
    ranking = sorted(have, key=lambda c: -have[c])
    ranks = {c: ranking.index(c) + 1 for c in spec.cells if c in have}
    if len(ranks) < len(spec.cells):
        return Verdict("not run", f"a cell lacks {spec.metric}", rows)
    text = ", ".join(f"{c} ranks {r} of {len(ranking)}" for c, r in ranks.items())
    top = ", ".join(f"{c} {have[c]:.2f}" for c in ranking[: spec.k + 1])
    if all(r <= spec.k for r in ranks.values()):
        return Verdict("held", f"{text} (top: {top})", rows)
    return Verdict("did not hold", f"{text}; the claim needs the first {spec.k} (top: {top})", rows)


def _rows(spec: ClaimSpec, summary: Summary, metric: str) -> list[tuple[str, str, str, str]]:
    return [row for row, _ in _rows_with_paper(spec, summary, metric, None)]


def _rows_with_paper(
    spec: ClaimSpec, summary: Summary, metric: str, paper: Summary | None
) -> list[tuple[tuple[str, str, str, str], str]]:
    """Rows for one score, each with the paper's figures for the same cells ("" where unknown)."""
    known = paper is not None and all(metric in paper.get(c, {}) for c in spec.all_cells())
    pp: Summary = paper if paper is not None and known else {}

    def pv(cells: list[str]) -> float:
        s = side(pp, cells, metric)
        return s.mean if s else float("nan")

    if spec.kind == "increasing":
        vals = [side(summary, [c], metric) for c in spec.cells]
        row = (metric, " → ".join(f"{c} {v.label()}" if v else f"{c} —" for c, v in zip(spec.cells, vals)), "", "")
        return [(row, " → ".join(f"{pv([c]):.2f}" for c in spec.cells) if known else "")]
    if spec.kind == "top":  # the ranking, best first
        ranked = sorted(
            ((c, side(summary, [c], metric)) for c in spec.all_cells()),
            key=lambda cv: -cv[1].mean if cv[1] else float("inf"),
        )
        row = (metric, ", ".join(f"{c} {v.mean:.2f}" if v else f"{c} —" for c, v in ranked), "", "")
        ptext = ", ".join(f"{c} {pv([c]):.2f}" for c in sorted(spec.all_cells(), key=lambda c: -pv([c])))
        return [(row, ptext if known else "")]
    a = side(summary, spec.cells, metric)
    baselines = [[c] for c in spec.baseline] if spec.each else [spec.baseline]
    out = []
    for b in baselines:
        bs = side(summary, b, metric)
        d = "{:+.2f} ± {:.2f}".format(*_diff(a, bs)) if a and bs else "—"
        row = (
            metric,
            f"{', '.join(spec.cells)}: {a.label() if a else '—'}",
            f"{', '.join(b)}: {bs.label() if bs else '—'}",
            d,
        )
        pa, pb = pv(spec.cells), pv(b)
        out.append((row, f"{pa:.2f} vs {pb:.2f} ({pa - pb:+.2f})" if known else ""))
    return out


def judge_with_paper(
    spec: ClaimSpec, summary: Summary, paper: Summary, fixed: frozenset[str] = frozenset()
) -> tuple[Verdict, Verdict | None]:
    """The verdict on the runs, its rows carrying the paper's figures, and the verdict the same rule
    gives on the paper's figures (None unless the paper has every cell's metric)."""
    v = judge(spec, summary, fixed)
    v.paper = [p for m in (spec.metric, *spec.also) for _, p in _rows_with_paper(spec, summary, m, paper)]
    on_paper = all(spec.metric in paper.get(c, {}) for c in spec.all_cells())
    return v, judge(spec, paper) if on_paper else None


def render(
    claims: list[ClaimSpec],
    summary: Summary,
    paper: Summary | None = None,
    paper_label: str = "",
    fixed: frozenset[str] = frozenset(),
) -> list[str]:
    """Markdown lines: one section per claim, its verdict, the numbers and the note (a claim not run
    yet shows its table but not its note, which interprets numbers it does not have). With `paper`
    (the paper's figures as one-seed cells), rows show the paper's side too."""
    lines: list[str] = []
    for spec in claims:
        v, pv = judge_with_paper(spec, summary, paper or {}, fixed)
        verdict = f"**{v.verdict}** ({v.seeds})" if v.caveat else f"**{v.verdict}**"
        lines += [
            f"### {spec.paper}: {spec.claim} — {verdict}",
            "",
            f"Rule: `{spec.kind}` on `{spec.metric}`; {v.reason}." + (f" Caveat: {v.caveat}." if v.caveat else ""),
            "",
        ]
        if pv is not None:
            where = f" ({paper_label})" if paper_label else ""
            lines += [
                f"On the paper's own figures for the same models{where}, the same rule gives **{pv.verdict}**: "
                f"{pv.reason}.",
                "",
            ]
        with_paper = any(v.paper)
        if v.rows:
            head = "| score | claim side | other side | difference ± s.e. |" + (" paper |" if with_paper else "")
            lines += [head, "|---|---|---|---|" + ("---|" if with_paper else "")]
            for (m, a, b, d), p in zip(v.rows, v.paper or [""] * len(v.rows), strict=True):
                lines.append(f"| {m} | {a} | {b} | {d} |" + (f" {p or '—'} |" if with_paper else ""))
            lines.append("")
        if spec.note and v.verdict != "not run":
            lines += [spec.note.strip(), ""]
    return lines
