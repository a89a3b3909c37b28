"""What the cells of a grid cost: wall-clock training and evaluation seconds, the CPU seconds of the processes, and
the training CPU of a cell with every cell it continues (its ``"@cell"`` references, followed down the chain)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple

from sentkit.experiments.grid import ExperimentSpec
from sentkit.experiments.refs import CellRef, refs_of
from sentkit.experiments.results import RunResults, Runs, as_runs

Diagnostics = Mapping[str, list[dict[str, Any]]]  # {cell: the diagnostics of each seed} (experiments.diagnostics)


def train_seconds(res: RunResults | Mapping[str, Any], diagnostics: Diagnostics | None = None) -> float:
    """A run's training seconds across resumes: results written before runs counted their earlier
    processes take those from the run's diagnostics (`earlier_s`, from its metrics.csv)."""
    (run,) = as_runs([res])
    exp = run.experiment
    t = float(exp.train_seconds)
    if not exp.across_resumes and diagnostics:
        for d in diagnostics.get(exp.cell, []):
            if d.get("seed") == exp.seed:
                t += float((d.get("training") or {}).get("earlier_s", 0.0))
    return t


def cell_costs(all_results: Runs, diagnostics: Diagnostics | None = None) -> dict[str, tuple[float, float, int]]:
    """{cell: (mean training seconds, mean evaluation seconds, seeds)} from the results files (and
    the diagnostics, for the earlier processes of resumed runs)."""
    acc: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for run in as_runs(all_results):
        acc[run.cell].append((train_seconds(run, diagnostics), run.evaluate_seconds))
    return {c: (statistics.fmean(t for t, _ in v), statistics.fmean(e for _, e in v), len(v)) for c, v in acc.items()}


class Cost(NamedTuple):
    """Training CPU seconds per seed, and whether a part of them is a logged wall-clock standing in for a CPU time
    that was not recorded (a model trained by an earlier process than the one that evaluated it)."""

    seconds: float
    approx: bool


def chain_train_cpu(spec: ExperimentSpec, all_results: Runs) -> dict[str, Cost]:
    """{cell: (training CPU seconds per seed of the cell plus every cell its ``"@cell"`` settings name,
    recursively; approximate)}: what it costs to make the cell's model from the corpus. A cell trained by
    an earlier process than the one that evaluated it has no CPU record: its logged training wall-clock
    stands in, and the sum is marked approximate. A cell missing from the results leaves every cell built
    on it out."""
    runs = as_runs(all_results)
    phases = recipe_phase_cpu(runs)
    snaps: dict[str, list[float]] = defaultdict(list)  # a snapshot of another cell's run: the CPU to its step
    wall: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        wall[run.cell].append(train_seconds(run))
        if run.experiment.snapshot_cpu is not None:
            snaps[run.cell].append(run.experiment.snapshot_cpu)
    at_step: dict[CellRef, list[float]] = defaultdict(list)  # "@run/snapshots/step-N": the CPU of that run to step N
    for run in runs:
        if run.cell in snaps:
            for ref in refs_of(run.experiment.settings).values():
                at_step[ref].extend(snaps[run.cell])
    own = {c: Cost(statistics.fmean(v), True) for c, v in wall.items()}  # no CPU record: the wall-clock stands in
    own.update({c: Cost(t, False) for c, t in cell_cpu(runs, train_only=True).items()})
    own.update({c: Cost(sum(p.values()), False) for c, p in phases.items()})  # a recipe: its recipe.json's phases
    own.update({c: Cost(statistics.fmean(v), False) for c, v in snaps.items()})
    return chain_costs(
        [(c.name, list(c.refs.values())) for c in spec.cells],
        own,
        phases,
        {r: statistics.fmean(v) for r, v in at_step.items()},
        frozenset(snaps),
    )


def chain_costs(
    cells: list[tuple[str, list[CellRef]]],
    own: Mapping[str, Cost],
    phases: Mapping[str, Mapping[str, float]],
    to_step: Mapping[CellRef, float],
    snapshots: AbstractSet[str],
) -> dict[str, Cost]:
    """{cell: its own cost plus that of what its references name}, for cells in grid order (a cell names only
    cells above it), given each cell's own training cost (`own`), the phases of recipes (`phases`: a reference to
    a phase costs the phases up to it), the CPU a run had spent to each of its snapshots that a snapshot cell
    evaluates (`to_step`), and the snapshot cells (`snapshots`: their own cost already counts the run to its step).
    A cell with no own cost, or naming one without, is left out."""
    total: dict[str, Cost] = {}
    upstream: dict[str, Cost | None] = {}  # the cost of what each cell names (its bases)
    for name, refs in cells:
        acc: Cost | None = Cost(0.0, False)
        for ref in refs:
            recipe = phases.get(ref.cell, {})
            if ref.phase is not None and ref.phase in recipe:  # a phase of a recipe: its phases up to that one
                names = list(recipe)
                part: Cost | None = Cost(sum(recipe[k] for k in names[: names.index(ref.phase) + 1]), False)
            elif name in snapshots or ref in to_step:
                # a snapshot is part of that cell's run (its own CPU counts to its step): that run's bases on top;
                # a cell on a snapshot (whitening it) adds the run's CPU to that step, as the snapshot's cell records
                part = upstream.get(ref.cell)
                if part is not None and name not in snapshots:
                    part = Cost(part.seconds + to_step[ref], part.approx)
            else:
                part = total.get(ref.cell)
            if acc is None or part is None:
                acc = None
                break
            acc = Cost(acc.seconds + part.seconds, acc.approx or part.approx)
        upstream[name] = acc
        if name in own and acc is not None:
            total[name] = Cost(own[name].seconds + acc.seconds, own[name].approx or acc.approx)
    return total


def recipe_phase_cpu(all_results: Runs) -> dict[str, dict[str, float]]:
    """{cell: {phase folder: mean CPU seconds over seeds}, in the recipe's order} for cells whose results carry the
    `recipe.json` of a recipe of phases (the raw-text recipe)."""
    acc: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for run in as_runs(all_results):
        for phase, cpu in run.experiment.phase_cpu.items():
            acc[run.cell].setdefault(phase, []).append(cpu)
    return {c: {k: statistics.fmean(v) for k, v in p.items()} for c, p in acc.items()}


def cell_cpu(all_results: Runs, *, train_only: bool = False) -> dict[str, float]:
    """{cell: mean CPU seconds per seed, training + evaluation (or training only)} for cells whose results
    record the training's CPU time (None: trained by an earlier process, unknown)."""
    acc: dict[str, list[float]] = defaultdict(list)
    for run in as_runs(all_results):
        cpu = run.experiment.cpu_seconds
        if cpu is not None and cpu.train is not None:
            extra = 0.0 if train_only else float(cpu.evaluate)
            acc[run.cell].append(float(cpu.train) + extra)
    return {c: statistics.fmean(v) for c, v in acc.items()}


def cost_totals(all_results: Runs, diagnostics: Diagnostics | None = None) -> str:
    """One sentence: the grid's summed wall-clock (training, evaluation) and CPU time, from the results."""
    runs = as_runs(all_results)
    train = sum(train_seconds(r, diagnostics) for r in runs)
    ev = 0.0
    for r in runs:
        ev += r.evaluate_seconds
    cpu = [c for c in (r.experiment.cpu_seconds for r in runs) if c is not None and c.train is not None]
    text = (
        f"In all, {len(runs)} runs: {(train + ev) / 3600:.1f} h of wall-clock time summed over runs "
        f"({train / 3600:.1f} h training, {ev / 3600:.1f} h evaluation)."
    )
    if cpu:
        total = sum(float(c.train or 0) + float(c.evaluate) for c in cpu)
        text += f" CPU time, recorded for {len(cpu)} of them: {total / 3600:.1f} CPU-hours."
    return text


def cost_section(all_results: Runs, diagnostics: Diagnostics, cells: list[str]) -> list[str]:
    """The report's cost table: wall-clock training and evaluation seconds per seed of each cell, and the totals."""
    runs = as_runs(all_results)
    costs = cell_costs(runs, diagnostics)
    lines = [
        "## Cost",
        "",
        "Wall-clock seconds per seed, on the machine that ran the cell (training, counting "
        "every process of a resumed run up to the step the next one resumed from; "
        "evaluation = encoding + classifiers over all tasks). " + cost_totals(runs, diagnostics),
        "",
        "| cell | train s | evaluate s |",
        "|---|---|---|",
    ]
    return lines + [f"| {c} | {costs[c][0]:.0f} | {costs[c][1]:.0f} |" for c in cells if c in costs]
