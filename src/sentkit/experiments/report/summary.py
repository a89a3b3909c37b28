"""The one-screen summary of several experiments (docs/results.md): per method family, its best cell across the
grids on each of the averages a user picks by (downstream, unsupervised STS, probing), what it cost to train, its
seeds, with the reference rows (nothing trained: every version its own row) ranked among them; an average over
fewer of its tasks than the others (a task that failed) says how many and which it lacks; then, per average, the best
cell within each training budget (the reference rows in it at their cost, and a line saying where the best reference
beats or ties the trained cells), and a line per experiment linking its page. Every figure comes from the committed
results through the same functions the per-experiment pages use.

A cell's family is the method that trained its model and the pretrained model it starts from: a cell that only
evaluates another cell's model (whitened, SIF-weighted, pooled otherwise, or a snapshot) is of that cell's family;
one that evaluates a phase of a recipe other than its last (``"@recipe/0-wordpiece-skipgram"``) is of the phase's
method; a model another grid trained (``runs/experiments/<grid>/<cell>/seed-<k>/...``, the probing grid's) is of
that grid's cell. A cell that scores a model cut to its first dimensions or as codes (`stored_smaller`) is left out:
it is the same model stored in fewer bytes, compared on its study's page."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import NamedTuple

from sentkit.core.methods import METHODS
from sentkit.experiments import claims as claims_mod
from sentkit.experiments.grid import CellSpec, ExperimentSpec
from sentkit.experiments.refs import CellRef
from sentkit.experiments.report.costs import Cost, chain_train_cpu, recipe_phase_cpu
from sentkit.experiments.report.formatting import fmt, fmt_hours
from sentkit.experiments.report.scores import AVERAGE_TASKS, Summary, fixed_cells, summarise
from sentkit.experiments.report.tables import row_claim
from sentkit.experiments.results import Runs, as_runs

# the averages a user picks a method by, in the summary's columns
PICK_BY = ("avg:downstream", "avg:unsupervised_sts", "avg:supervised", "avg:probing")
PICK_HEAD = ("downstream", "unsupervised STS", "classifiers (supervised)", "probing")
BUDGET_BY = ("avg:downstream", "avg:unsupervised_sts", "avg:supervised")  # the averages of the budget lists
COHORTS = AVERAGE_TASKS  # the tasks each average is taken over
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

    @property
    def reference(self) -> bool:
        return self.family.method in REFERENCE_METHODS

    def covers(self, key: str) -> tuple[str, ...]:
        """The tasks of `key`'s cohort this cell has a score of."""
        return tuple(t for t in COHORTS.get(key, ()) if t in self.scores)


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
        order = [c.name for c in spec.cells if c.name in summary and not stored_smaller(c)]
        out += [Entry(spec.name, c, fams[c], summary[c], chain.get(c)) for c in order]
    return out


def stored_smaller(cell: CellSpec) -> bool:
    """Whether a `pretrained` cell scores a model cut to its first dimensions or as codes (``dim``, ``quantize``,
    ...): the same model stored in fewer bytes, which its study's page compares; the summary compares models, and
    leaves it out. (A method's own ``dim``, a word2vec size or whitened directions, is another model.)"""
    from sentkit.experiments.cells import CUT_SETTINGS

    return not cell.kind.trains and any(k in cell.settings for k in CUT_SETTINGS)


def _label(fam: Family) -> str:
    method = "none: evaluated as it is" if fam.method == AS_IS else f"`{fam.method}`"
    return f"{method} | {f'`{fam.start}`' if fam.start else '—'}"


def cohort_tasks(all_entries: Sequence[Entry]) -> dict[str, tuple[str, ...]]:
    """{average: the tasks of its cohort that any cell scored}: what a full average of the summary covers."""
    return {
        key: tuple(t for t in COHORTS[key] if any(t in e.covers(key) for e in all_entries if key in e.scores))
        for key in COHORTS
    }


def partial(entry: Entry, key: str, full: Mapping[str, tuple[str, ...]]) -> str:
    """`` (14 of 16 tasks; no STS15, STS16)`` for an average over fewer tasks than the others cover; "" if full."""
    covers, of = entry.covers(key), full.get(key, ())
    lacks = [t for t in of if t not in covers]
    return f" ({len(covers)} of {len(of)} tasks; no {', '.join(lacks)})" if lacks else ""


def best_of(group: Sequence[Entry], key: str, full: Mapping[str, tuple[str, ...]]) -> Entry | None:
    """The entry of `group` with the best mean on `key`, among those over every task of the average if any is."""
    have = [e for e in group if key in e.scores]
    whole = [e for e in have if not partial(e, key, full)]
    return max(whole or have, key=lambda e: e.scores[key][0], default=None)


def _pick_row(
    label: str, group: list[Entry], pages: Mapping[str, str], full: Mapping[str, tuple[str, ...]]
) -> tuple[float, str]:
    """A table row: the best entry of `group` on each average (named beside its score; an average over fewer tasks
    says so), the seeds of those picks and the training CPU-hours of the costliest; with the row's best downstream
    mean, to sort by."""
    cols: list[str] = []
    picks: list[Entry] = []
    for key in PICK_BY:
        best = best_of(group, key, full)
        if best is None:
            cols.append("")
            continue
        picks.append(best)
        cols.append(f"{fmt(best.scores[key])}{partial(best, key, full)} ([{best.cell}]({pages[best.grid]}))")
    seeds = "/".join(str(n) for n in sorted({e.seeds for e in picks}))
    costs = [e.cost for e in picks if e.cost is not None]
    hours = fmt_hours(max(costs, key=lambda c: c.seconds)) if costs else ""
    top = best_of(group, "avg:downstream", full)
    down = top.scores["avg:downstream"][0] if top is not None else float("-inf")
    return down, f"| {label} | {' | '.join(cols)} | {seeds} | {hours} |"


def row_groups(all_entries: Sequence[Entry]) -> list[tuple[str, list[Entry]]]:
    """The summary's rows: (label, entries) a family each, and a reference row each version of a reference method
    (the same cell of several grids merged)."""
    groups: dict[str, list[Entry]] = {}
    for e in all_entries:
        label = f"reference: `{e.cell}` | `{e.family.method}`" if e.reference else _label(e.family)
        groups.setdefault(label, []).append(e)
    return list(groups.items())


PARTIAL_NOTE = (
    "(n of m tasks; no ...): an average over fewer tasks than the others (a task that failed, named), not comparable "
    "with them; a row's pick is its best average over every task where it has one."
)


def pick_table(all_entries: list[Entry], pages: Mapping[str, str]) -> list[str]:
    """The table a user picks a method from: a row per family and a row per reference version, best downstream
    first (a reference ranks among the methods); a note when an average covers fewer tasks than the others."""
    head = [
        "| method | pretrained model it starts from | "
        + " | ".join(PICK_HEAD)
        + " | seeds | training CPU-h, bases included |",
        "|---|---|" + "---|" * (len(PICK_HEAD) + 2),
    ]
    full = cohort_tasks(all_entries)
    rows = sorted((_pick_row(label, g, pages, full) for label, g in row_groups(all_entries)), key=lambda r: -r[0])
    note = any(
        partial(best, k, full) for _, g in row_groups(all_entries) for k in PICK_BY if (best := best_of(g, k, full))
    )
    return [*head, *(r for _, r in rows), "", *([PARTIAL_NOTE, ""] if note else [])]


def _hours(e: Entry) -> float:
    return e.cost.seconds / 3600 if e.cost is not None else 0.0


def budget_steps(all_entries: Sequence[Entry], key: str) -> list[Entry]:
    """The cells that start from no pretrained model (the reference rows among them, at their cost) that score best
    on `key` within their training budget, cheapest first: each beats every cheaper one as the tables print them
    (at one printed cost, the best); an average over fewer tasks than the others is left out."""
    full = cohort_tasks(all_entries)
    have = sorted(
        (
            e
            for e in all_entries
            if not e.family.start and e.cost is not None and key in e.scores and not partial(e, key, full)
        ),
        key=lambda e: (round(_hours(e), 2), -e.scores[key][0]),
    )
    steps: list[Entry] = []
    best = float("-inf")
    for e in have:
        if round(e.scores[key][0], 1) > best:
            best = round(e.scores[key][0], 1)
            steps.append(e)
    return steps


def reference_wins(all_entries: Sequence[Entry], key: str, name: str, pages: Mapping[str, str]) -> str:
    """Where the best reference row on `key` (nothing trained) stands: the trained cells from no pretrained model
    it beats or ties as printed, up to the cheapest that beats it, and how many method rows' best it beats or ties;
    "" without a reference."""
    full = cohort_tasks(all_entries)
    ref = best_of([e for e in all_entries if e.reference], key, full)
    if ref is None:
        return ""
    value = round(ref.scores[key][0], 1)
    trained = sorted(
        (
            e
            for e in all_entries
            if not e.reference
            and not e.family.start
            and e.cost is not None
            and key in e.scores
            and not partial(e, key, full)
        ),
        key=_hours,
    )
    beaten = next((e for e in trained if round(e.scores[key][0], 1) > value), None)
    below = [e for e in trained if beaten is None or _hours(e) < _hours(beaten)]
    rows = [best_of(g, key, full) for label, g in row_groups(all_entries) if not label.startswith("reference: ")]
    scored = [e for e in rows if e is not None]
    ties = sum(round(e.scores[key][0], 1) <= value for e in scored)
    where = (
        f"every one of the {len(below)} cells from no pretrained model that cost less than "
        f"{fmt_hours(beaten.cost)} CPU-h (the cheapest to beat it: `{beaten.cell}`, {fmt(beaten.scores[key])})"
        if beaten is not None
        else f"every one of the {len(below)} cells from no pretrained model"
    )
    return (
        f"- {name}: the reference `{ref.cell}` ({fmt_hours(ref.cost)} CPU-h, [{ref.grid}]({pages[ref.grid]})), "
        f"{fmt(ref.scores[key])}, beats or ties {where}, and the best of {ties} of the {len(scored)} method rows"
    )


def budget_lines(all_entries: list[Entry], pages: Mapping[str, str]) -> list[str]:
    """Per average, the cells that start from no pretrained model (the reference rows among them) that score best
    within their training budget, cheapest first (:func:`budget_steps`); then where the best reference wins."""
    names = dict(zip(PICK_BY, PICK_HEAD, strict=True))
    out: list[str] = []
    for key in BUDGET_BY:
        steps = [
            f"{fmt_hours(e.cost)} CPU-h: {fmt(e.scores[key])} "
            + (f"reference `{e.cell}`" if e.reference else f"`{e.family.method}` ([{e.cell}]({pages[e.grid]}))")
            + (f" ([{e.grid}]({pages[e.grid]}))" if e.reference else "")
            for e in budget_steps(all_entries, key)
        ]
        if steps:
            out.append(f"- {names[key]}: " + "; ".join(steps))
    if not out:
        return []
    wins = [w for key in BUDGET_BY if (w := reference_wins(all_entries, key, names[key], pages))]
    return [
        "Starting from no pretrained model, the best score within each training budget, cheapest first (each "
        "cell beats every cheaper one as printed; the reference rows, which train nothing on the corpus, at their "
        "cost; an average over fewer tasks than the others left out):",
        "",
        *out,
        "",
        *(
            [
                "Where a free reference wins (its score against the trained cells' as printed, and against each "
                "method row's best above):",
                "",
                *wins,
                "",
            ]
            if wins
            else []
        ),
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
        "SIF-weighted and other versions of a model included, but not its vectors cut or quantized, which "
        "results/smaller.md compares; mean ± std over seeds), `downstream` the DeCLUTR "
        "paper's average (classifiers and cosine STS), `unsupervised STS` cosine similarity alone, `classifiers "
        "(supervised)` the classifier-scored tasks alone, `probing` SentEval's probing tasks; the cost is the "
        "training CPU-hours of the costliest pick, the cells it continues included (`~`: a logged wall-clock stands "
        "in for an unrecorded CPU time). The reference rows (`reference:`, word vectors averaged, each version its "
        "own row: nothing trained on the corpus) rank among the methods, best downstream first. "
        f"Scored with {scored}.",
        "",
        *pick_table(rows := entries(parts), pages),
        *budget_lines(rows, pages),
        "Each experiment's page has every cell's scores, its claims and their verdicts, the costs and charts:",
        "",
        *(experiment_line(results, spec, pages[spec.name]) for results, spec, _ in parts),
        "",
        "This page and every experiment's are regenerated together by `sentkit experiment report "
        + " ".join(f"experiments/{spec.name}.toml" for _, spec, _ in parts)
        + "` (a study left out of the command loses its rows here and its page).",
    ]
