"""The one-screen summary of several experiments (docs/results.md): per method family, its best cell across the
grids on each of the averages a user picks by (downstream, unsupervised STS, probing), what it cost to train, its
seeds; then the reference rows (nothing trained: every version its own row), and a line per experiment linking its
page. Every figure comes from the committed results through the same functions the per-experiment pages use.

A cell's family is the method that trained its model and the pretrained model it starts from: a cell that only
evaluates another cell's model (whitened, SIF-weighted, pooled otherwise, or a snapshot) is of that cell's family;
one that evaluates a phase of a recipe other than its last (``"@recipe/0-wordpiece-skipgram"``) is of the phase's
method; a model another grid trained (``runs/experiments/<grid>/<cell>/seed-<k>/...``, the probing grid's) is of
that grid's cell."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import NamedTuple

from sentkit.experiments import claims as claims_mod
from sentkit.experiments.grid import CellSpec, ExperimentSpec
from sentkit.experiments.refs import CellRef
from sentkit.experiments.report.costs import Cost, chain_train_cpu, recipe_phase_cpu
from sentkit.experiments.report.formatting import fmt, fmt_hours
from sentkit.experiments.report.scores import Summary, fixed_cells, summarise
from sentkit.experiments.report.tables import row_claim
from sentkit.experiments.results import Runs, as_runs
from sentkit.methods import METHODS

# the averages a user picks a method by, in the summary's columns
PICK_BY = ("avg:downstream", "avg:unsupervised_sts", "avg:probing")
PICK_HEAD = ("downstream", "unsupervised STS", "probing")
# methods that train nothing on the corpus: each version (raw, whitened, SIF, ...) is a reference row of its own
REFERENCE_METHODS = ("glove-average",)
# methods that evaluate another model's vectors (a version of it: whitened, SIF-weighted, pooled otherwise)
VERSION_METHODS = ("whiten", "sif", "pretrained")
AS_IS = "pretrained"  # the method of a cell that evaluates a given model as it is
_PHASE = re.compile(r"\d+-(.+)")  # a recipe's phase folder: "<index>-<method>"
_RUN = re.compile(r"(?P<cell>[^/]+)/seed-\d+(/.*)?")  # a run folder inside a grid's output


class Family(NamedTuple):
    """The method that trained a cell's model, and the pretrained model it started from ("": the corpus alone)."""

    method: str
    start: str


@dataclass(frozen=True)
class Entry:
    """One cell of one grid as the summary reads it."""

    grid: str
    cell: str
    family: Family
    scores: Mapping[str, tuple[float, float, int]]
    cost: Cost | None

    @property
    def seeds(self) -> int:
        return max(v[2] for v in self.scores.values())


def families(
    spec: ExperimentSpec,
    runs: Runs,
    known: Mapping[str, Mapping[str, Family]] | None = None,
    outputs: Mapping[str, str] | None = None,
) -> dict[str, Family]:
    """{cell: its family} for the cells of `spec`, in grid order (a cell names only cells above it). `known` holds
    the families of other grids ({grid: {cell: family}}) and `outputs` their output folders ({folder: grid}), for a
    cell that evaluates a model another grid trained."""
    phases = {c: list(p) for c, p in recipe_phase_cpu(runs).items()}
    out: dict[str, Family] = {}
    for cell in spec.cells:
        out[cell.name] = _family(cell, out, phases, known or {}, outputs or {})
    return out


def _family(
    cell: CellSpec,
    above: Mapping[str, Family],
    phases: Mapping[str, list[str]],
    known: Mapping[str, Mapping[str, Family]],
    outputs: Mapping[str, str],
) -> Family:
    model = cell.settings.get("model")
    ref = CellRef.parse(model)
    if cell.method in VERSION_METHODS and ref is not None:
        base = above[ref.cell]
        phase = ref.phase if ref.snapshot_step is None else None
        recorded = phases.get(ref.cell, [])
        m = _PHASE.fullmatch(phase or "")
        if phase is not None and m and m.group(1) in METHODS and (not recorded or phase != recorded[-1]):
            return Family(m.group(1), base.start)
        return base
    if cell.method in VERSION_METHODS and isinstance(model, str):
        if model in METHODS:  # a model name that is a method (glove-average)
            return Family(model, "")
        other = _other_grid(model, known, outputs)
        return other if other is not None else Family(AS_IS, model)
    starts = [above[r.cell].start for r in cell.refs.values() if r.cell in above]
    if isinstance(model, str) and ref is None and not cell.settings.get("from_scratch"):
        starts.insert(0, model)
    return Family(cell.method, next((s for s in starts if s), ""))


def _other_grid(path: str, known: Mapping[str, Mapping[str, Family]], outputs: Mapping[str, str]) -> Family | None:
    """The family of the cell of another grid whose run folder `path` is (None: no grid's)."""
    p = PurePosixPath(path)
    for folder, grid in outputs.items():
        try:
            rest = p.relative_to(folder)
        except ValueError:
            continue
        m = _RUN.fullmatch(rest.as_posix())
        if m and m.group("cell") in known.get(grid, {}):
            return known[grid][m.group("cell")]
    return None


def entries(parts: Sequence[tuple[Runs, ExperimentSpec, object]]) -> list[Entry]:
    """Every cell with results of every grid, in the grids' order and each grid's cell order, with its family."""
    known: dict[str, dict[str, Family]] = {}
    outputs = {PurePosixPath(spec.output).as_posix(): spec.name for _, spec, _ in parts}
    out: list[Entry] = []
    for results, spec, _ in parts:
        runs = as_runs(results)
        fams = known[spec.name] = families(spec, runs, known, outputs)
        if not runs:
            continue
        summary = summarise(runs)
        chain = chain_train_cpu(spec, runs)
        order = [c.name for c in spec.cells if c.name in summary]
        out += [Entry(spec.name, c, fams[c], summary[c], chain.get(c)) for c in order]
    return out


def _label(fam: Family) -> str:
    method = "none: evaluated as it is" if fam.method == AS_IS else f"`{fam.method}`"
    return f"{method} | {f'`{fam.start}`' if fam.start else '—'}"


def _pick_row(label: str, group: list[Entry], pages: Mapping[str, str]) -> tuple[float, str]:
    """A table row: the best entry of `group` on each average (named beside its score), the seeds of those picks
    and the training CPU-hours of the costliest; with the row's best downstream mean, to sort by."""
    cols: list[str] = []
    picks: list[Entry] = []
    for key in PICK_BY:
        have = [e for e in group if key in e.scores]
        if not have:
            cols.append("")
            continue
        best = max(have, key=lambda e: e.scores[key][0])
        picks.append(best)
        cols.append(f"{fmt(best.scores[key])} ([{best.cell}]({pages[best.grid]}))")
    seeds = "/".join(str(n) for n in sorted({e.seeds for e in picks}))
    costs = [e.cost for e in picks if e.cost is not None]
    hours = fmt_hours(max(costs, key=lambda c: c.seconds)) if costs else ""
    down = max((e.scores["avg:downstream"][0] for e in group if "avg:downstream" in e.scores), default=float("-inf"))
    return down, f"| {label} | {' | '.join(cols)} | {seeds} | {hours} |"


def pick_table(all_entries: list[Entry], pages: Mapping[str, str]) -> list[str]:
    """The table a user picks a method from: a row per family (best downstream first), then the reference rows."""
    head = [
        "| method | pretrained model it starts from | "
        + " | ".join(PICK_HEAD)
        + " | seeds | training CPU-h, bases included |",
        "|---|---|" + "---|" * (len(PICK_HEAD) + 2),
    ]
    groups: dict[Family, list[Entry]] = {}
    refs: dict[str, list[Entry]] = {}
    for e in all_entries:
        if e.family.method in REFERENCE_METHODS:
            refs.setdefault(e.cell, []).append(e)
        else:
            groups.setdefault(e.family, []).append(e)
    rows = sorted((_pick_row(_label(f), g, pages) for f, g in groups.items()), key=lambda r: -r[0])
    ref_rows = [_pick_row(f"reference: `{cell}` | `{g[0].family.method}`", g, pages)[1] for cell, g in refs.items()]
    return [*head, *(r for _, r in rows), *ref_rows, ""]


def budget_lines(all_entries: list[Entry], pages: Mapping[str, str]) -> list[str]:
    """Per average, the cells that start from no pretrained model (the reference rows left out) that score best
    within their training budget: in order of cost, each cell that beats every cheaper one."""
    names = dict(zip(PICK_BY, PICK_HEAD, strict=True))
    out: list[str] = []
    for key in PICK_BY[:2]:
        have = sorted(
            (
                e
                for e in all_entries
                if not e.family.start
                and e.family.method not in REFERENCE_METHODS
                and e.cost is not None
                and key in e.scores
            ),
            key=lambda e: e.cost.seconds if e.cost is not None else 0.0,
        )
        steps: list[str] = []
        best = float("-inf")
        for e in have:
            if round(e.scores[key][0], 1) > best:  # beats every cheaper one as the tables print them
                best = round(e.scores[key][0], 1)
                steps.append(
                    f"{fmt_hours(e.cost)} CPU-h: {fmt(e.scores[key])} `{e.family.method}` ([{e.cell}]({pages[e.grid]}))"
                )
        if steps:
            out.append(f"- {names[key]}: " + "; ".join(steps))
    if not out:
        return []
    return [
        "Starting from no pretrained model, the best score within each training budget, cheapest first (each "
        "cell beats every cheaper one; the reference rows above cost nothing to train):",
        "",
        *out,
        "",
    ]


def experiment_line(results: Runs, spec: ExperimentSpec, page: str) -> str:
    """One line: the experiment's page, how many declared runs have results, and its claims' verdicts."""
    runs = as_runs(results)
    declared = sum(len(spec.cell_seeds(c)) for c in spec.cells)
    have = len({(r.cell, int(r.experiment.seed)) for r in runs})
    text = f"- [{spec.name}]({page}) (`experiments/{spec.name}.toml`): {have} of {declared} declared runs have results"
    if spec.claims:
        summary: Summary = summarise(runs) if runs else {}
        fixed = fixed_cells(spec)
        verdicts = [claims_mod.judge(row_claim(c, spec, summary), summary, fixed).verdict for c in spec.claims]
        counts = ", ".join(
            f"{verdicts.count(v)} {v}" for v in ("held", "did not hold", "unclear", "not run") if v in verdicts
        )
        text += f"; {len(verdicts)} claims: {counts}"
    return text + "."


def summary_lines(parts: Sequence[tuple[Runs, ExperimentSpec, object]], pages: Mapping[str, str]) -> list[str]:
    """The Markdown lines of the one-screen summary; `pages` maps each experiment to its page's link."""
    settings: dict[tuple[str, str], list[str]] = {}
    for _, spec, _ in parts:
        settings.setdefault((spec.tasks, spec.preset), []).append(spec.name)
    scored = "; ".join(f"tasks `{t}`, preset `{p}` ({', '.join(names)})" for (t, p), names in settings.items())
    return [
        "# Results",
        "",
        "Generated by `sentkit experiment report` from the committed results files alone. Which method for your "
        "budget and task: each row is a method (the one that trained the model) and the pretrained model it starts "
        "from, if any (its own pretraining is not in the cost; a method's fixed resources, such as DictRep's WordNet "
        "definitions and GloVe targets, are not listed: docs/hill_models.md); each "
        "score is the family's best cell across the experiments on that average (the cell named, whitened, "
        "SIF-weighted and other versions of a model included; mean ± std over seeds), `downstream` the DeCLUTR "
        "paper's average (classifiers and cosine STS), `unsupervised STS` cosine similarity alone, `probing` "
        "SentEval's probing tasks; the cost is the training CPU-hours of the costliest pick, the cells it "
        "continues included (`~`: a logged wall-clock stands in for an unrecorded CPU time). "
        f"Scored with {scored}.",
        "",
        *pick_table(rows := entries(parts), pages),
        *budget_lines(rows, pages),
        "Each experiment's page has every cell's scores, its claims and their verdicts, the costs and charts:",
        "",
        *(experiment_line(results, spec, pages[spec.name]) for results, spec, _ in parts),
    ]
