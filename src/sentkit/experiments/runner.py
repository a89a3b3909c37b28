"""Run an experiment grid: train each (cell, seed), then evaluate it. Resumable: a finished cell
(its results.json exists) is skipped; an interrupted cell resumes from its checkpoint. A run folder
of a cell whose settings were edited since is refused (named, with the fix), never reused.

With ``results`` set in the experiment file, each results JSON is also published (copied) to
``<results>/<cell>/seed-<s>.json``: a small folder meant to be committed, from which the report is
regenerated on a clean clone. :func:`import_results` copies finished results of another run output
(another machine, a frozen checkout) into it.

A grid continues on another machine or a fresh clone from its committed results: a (cell, seed) whose
committed copy is the run the file declares is skipped even with no run folder, and a cell still to run
that continues such a cell's model (``"@cell"``) has that model trained again first (same cell, seed and
settings; its committed results stand, and the continuing cell's results name what was retrained).

Each (cell, seed) is run by :mod:`sentkit.experiments.cells` (train, evaluate, record); this module is
the grid driver: it plans the runs, skips finished and published ones, imports and collects results."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from sentkit.core.config import ConfigError
from sentkit.core.errors import InputError, MissingInputError
from sentkit.core.methods import read_marker
from sentkit.experiments.cells import (
    CELL,
    RESULTS,
    TRAINED_EARLIER,
    CellRun,
    cache_key,
    check_same_cell,
    claim_folder,
    declared,
    logged_train_seconds,
    model_of,
    publish,
    ran,
    recipe_record,
    ref_run,
    resolve_settings,
    run_cell,
    snapshot_record,
    train_model,
    training_cpu,
)
from sentkit.experiments.grid import ExperimentSpec

# names of the cell module kept importable from here, where they lived before the split
__all__ = [
    "CELL",
    "RESULTS",
    "TRAINED_EARLIER",
    "CellRun",
    "base_runs",
    "cache_key",
    "check_same_cell",
    "collect",
    "declared",
    "import_results",
    "logged_train_seconds",
    "model_of",
    "plan",
    "publish",
    "published_run",
    "ran",
    "recipe_record",
    "ref_run",
    "resolve_settings",
    "results_source",
    "retrain_missing_bases",
    "run_cell",
    "run_experiment",
    "snapshot_record",
    "stale",
    "training_cpu",
]

log = logging.getLogger(__name__)


def plan(spec: ExperimentSpec) -> list[CellRun]:
    root = Path(spec.output)
    return [CellRun(c, s, root / c.name / f"seed-{s}") for c in spec.cells for s in spec.cell_seeds(c)]


def import_results(spec: ExperimentSpec, source: str | Path, *, only: list[str] | None = None) -> dict[str, str]:
    """Copy finished results of a run output folder (laid out as `output`: <cell>/seed-<s>/results.json)
    into the committed `results` folder, for every declared (cell, seed). A results file whose cell
    settings or method differ from the experiment file's (an older grid) is not imported. Returns
    {cell/seed: "published" | "unchanged" | "missing" | "stale: ..."}."""
    if spec.results is None:
        raise ConfigError(f"experiment {spec.name!r} has no `results` folder to import into")
    if not Path(source).is_dir():  # else every run would be reported "missing"
        if not Path(source).exists():
            raise MissingInputError(f"--from {source} does not exist (give the run output folder, the file's `output`)")
        raise InputError(f"--from {source} is not a folder (give the run output folder, the file's `output`)")
    status: dict[str, str] = {}
    for run in plan(spec):
        if only and run.cell.name not in only:
            continue
        key = f"{run.cell.name}/seed-{run.seed}"
        src = Path(source) / run.cell.name / f"seed-{run.seed}" / RESULTS
        if not src.is_file():
            status[key] = "missing"
            continue
        res = json.loads(src.read_text())
        why = stale(run, res)
        status[key] = f"stale: {why}" if why else publish(run, spec, res)
    return status


def stale(run: CellRun, res: dict[str, Any]) -> str:
    """Why a results file is not the run the experiment file declares ("" when it is): another cell,
    seed, method or settings (an older version of the grid)."""
    got, want = ran(res), declared(run)
    if got == want:
        return ""
    return (
        f"ran cell {got['cell']!r} seed {got['seed']!r} method {got['method']!r} settings {got['settings']!r}; "
        f"the file declares {run.cell.name!r} seed {run.seed} method {run.cell.method!r} settings "
        f"{want['settings']!r}"
    )


def published_run(run: CellRun, spec: ExperimentSpec) -> bool:
    """The run's committed copy exists and is the run the file declares (a grid continued on a fresh clone)."""
    dest = run.published_path(spec)
    if dest is None or not dest.is_file():
        return False
    try:
        return not stale(run, json.loads(dest.read_text()))
    except (OSError, ValueError, AttributeError):
        return False


def base_runs(spec: ExperimentSpec, run: CellRun) -> list[CellRun]:
    """The runs whose model folders `run`'s ``"@cell"`` settings name (the seed as model_of picks it)."""
    return [ref_run(spec, ref, run.seed) for ref in run.cell.refs.values()]


def retrain_missing_bases(spec: ExperimentSpec, run: CellRun) -> list[str]:
    """Train again the models `run` continues whose folders are gone but whose results are committed (a grid
    continued on a fresh clone), bases of bases first; returns "cell/seed-s" of each one trained. A base with
    neither a model folder nor committed results is left to model_of's error (run that cell first)."""
    done: list[str] = []
    for base in base_runs(spec, run):
        if not base.cell.kind.trains or read_marker(base.folder / "model") is not None or not published_run(base, spec):
            continue
        done += retrain_missing_bases(spec, base)
        check_same_cell(base)
        log.info(
            "%s: training %s/seed-%d again (its model folder is gone; its committed results stand)",
            run.cell.name,
            base.cell.name,
            base.seed,
        )
        claim_folder(base)
        train_model(base, spec)
        done.append(f"{base.cell.name}/seed-{base.seed}")
    return done


def run_experiment(
    spec: ExperimentSpec, *, only: list[str] | None = None, seeds: list[int] | None = None, keep_going: bool = True
) -> dict[str, str]:
    """Run every unfinished (cell, seed), optionally only some cells or seeds (to share a grid between
    processes or machines); returns
    {cell/seed: "done" | "skipped (finished)" | "skipped (published)" | "failed: ..."}."""
    status: dict[str, str] = {}
    runs = [r for r in plan(spec) if (not only or r.cell.name in only) and (seeds is None or r.seed in seeds)]
    for i, run in enumerate(runs, 1):
        key = f"{run.cell.name}/seed-{run.seed}"
        try:
            check_same_cell(run)
        except ConfigError as e:
            if not keep_going:
                raise
            log.error("%s: %s", key, e)
            status[key] = f"failed: {e}"
            continue
        if run.done:
            status[key] = "skipped (finished)"
            dest = run.published_path(spec)
            if dest is not None and not dest.is_file():  # results of a run before `results` was set
                publish(run, spec, json.loads(run.results_path.read_text()))
            continue
        if published_run(run, spec):  # finished elsewhere: its committed results are the run
            status[key] = "skipped (published)"
            continue
        log.info("[%d/%d] %s", i, len(runs), key)
        try:
            run_cell(run, spec, retrained=retrain_missing_bases(spec, run))
            status[key] = "done"
        except Exception as e:  # one failing cell must not stop the grid
            if not keep_going:
                raise
            log.error("%s failed: %s", key, e)
            status[key] = f"failed: {type(e).__name__}: {e}"
    return status


def collect(output: str | Path) -> list[dict[str, Any]]:
    """Every results.json under an experiment's output folder, or every <cell>/seed-<s>.json of a
    committed results folder."""
    root = Path(output)
    files = sorted(root.glob(f"*/seed-*/{RESULTS}")) or sorted(root.glob("*/seed-*.json"))
    return [json.loads(p.read_text()) for p in files]


def results_source(spec: ExperimentSpec) -> str:
    """The folder the report reads: the committed `results` folder when the file names one, else `output`."""
    return spec.results if spec.results is not None else spec.output
