"""The Results view: any `sentkit evaluate` results JSON, or an experiment (its TOML or its output
folder), as scores per model on one scale, with the experiment's claims judged.

Scores, averages and verdicts come from :mod:`sentkit.experiments.report` and
:mod:`sentkit.experiments.claims`, so the page shows what ``docs/results.md`` shows.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from sentkit.core.config import ConfigError
from sentkit.core.errors import SentkitError
from sentkit.evaluation.report import load_run
from sentkit.evaluation.tasks import ALL_TASKS
from sentkit.experiments import claims as claims_mod
from sentkit.experiments import report as exp_report
from sentkit.experiments.grid import ExperimentSpec, load_experiment
from sentkit.experiments.report import AVERAGES, cell_scores, summarise
from sentkit.experiments.runner import RESULTS, collect

log = logging.getLogger(__name__)

Summary = claims_mod.Summary

# The report's words for its averages, where this version of it has them.
AVERAGE_HELP: dict[str, str] = dict(getattr(exp_report, "AVERAGE_HELP", {}))
MAX_TOML_CANDIDATES = 50


class ResultsError(SentkitError, ValueError):
    """A path that holds no results the page can show; the message says what was expected."""


def _read_json(p: Path) -> dict[str, Any]:
    try:
        return load_run(p)
    except ValueError as e:
        raise ResultsError(
            f"{e}; expected the JSON that `sentkit evaluate --output` or `sentkit experiment run` writes"
        ) from None


def _collect(folder: Path) -> list[dict[str, Any]]:
    try:
        return collect(folder)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ResultsError(f"{folder}: a {RESULTS} file there is not JSON ({e})") from None


def _unique(label: str, taken: set[str]) -> str:
    out, i = label, 2
    while out in taken:
        out, i = f"{label} #{i}", i + 1
    taken.add(out)
    return out


def _single_runs(runs: list[tuple[Path, dict[str, Any]]]) -> tuple[Summary, dict[str, str], list[str]]:
    """Plain results files: one column each, scores as single-seed means."""
    summary: Summary = {}
    groups: dict[str, str] = {}
    notes: list[str] = []
    taken: set[str] = set()
    for path, run in runs:
        exp = run.get("experiment") or {}
        model = run.get("model") or {}
        base = f"{exp['cell']} seed {exp.get('seed', 0)}" if exp.get("cell") else model.get("name") or path.stem
        label = _unique(str(base), taken)
        summary[label] = {k: (v, 0.0, 1) for k, v in cell_scores(run).items()}
        groups[label] = str(exp.get("group") or (run.get("config") or {}).get("preset") or "")
        for task, err in (run.get("errors") or {}).items():
            notes.append(f"{label}: {task} failed ({str(err).splitlines()[0][:200]})")
    return summary, groups, notes


def experiment_folder(spec_path: Path, folder: str) -> Path:
    """An experiment file's `output` or `results` folder: relative to the working directory, as
    ``sentkit experiment run`` reads it, else relative to the file's folder or the one above it
    (an experiment file opened from elsewhere than its repository's root)."""
    p = Path(folder).expanduser()
    if p.is_absolute() or p.exists():
        return p
    for base in (spec_path.parent, spec_path.parent.parent):
        if (base / p).exists():
            return base / p
    return p


def find_experiment_file(folder: Path, search: list[Path] | None = None) -> ExperimentSpec | None:
    """The experiment TOML whose ``output`` or committed ``results`` folder is ``folder``: looked for
    in the folder, the three above it and ``./experiments`` (relative folders resolve from the working
    directory, as ``sentkit experiment run`` does, else from the TOML's folder)."""
    target = folder.resolve()
    dirs = (
        search
        if search is not None
        else [
            folder,
            folder.parent,
            folder.parent.parent,
            folder.parent.parent.parent,
            Path.cwd() / "experiments",
            Path.cwd(),
        ]
    )
    dirs = list(dict.fromkeys(d.resolve() for d in dirs))
    seen = 0
    for d in dirs:
        for f in sorted(d.glob("*.toml")) if d.is_dir() else []:
            seen += 1
            if seen > MAX_TOML_CANDIDATES:
                return None
            try:
                spec = load_experiment(f)
            except (ConfigError, OSError, ValueError):
                continue
            if any(experiment_folder(f, x).resolve() == target for x in (spec.output, spec.results) if x):
                return spec
    return None


def _source(
    path: Path,
    kind: str,
    name: str,
    summary: Summary,
    groups: dict[str, str],
    spec: ExperimentSpec | None,
    notes: list[str],
) -> dict[str, Any]:
    order = [c.name for c in spec.cells] if spec else []
    labels = [c for c in order if c in summary] + [c for c in summary if c not in order]
    keys = {k for s in summary.values() for k in s}
    averages = [a for a in AVERAGES if a in keys]
    averages += sorted(k for k in keys if k.startswith("avg:") and k not in averages)
    scores = [k for k in keys if not k.startswith("avg:")]
    main = [t for t in ALL_TASKS if t in keys]
    main += sorted(k for k in scores if ":" not in k and k not in main)
    rank = {t: i for i, t in enumerate(main)}
    details = sorted((k for k in scores if ":" in k), key=lambda k: (rank.get(k.split(":")[0], len(rank)), k))
    claims = []
    fixed = exp_report.fixed_cells(spec) if spec else frozenset()
    for c in spec.claims if spec else []:
        v = claims_mod.judge(c, summary, fixed)
        claims.append(
            {
                "paper": c.paper,
                "claim": c.claim,
                "kind": c.kind,
                "metric": c.metric,
                "cells": c.cells,
                "baseline": c.baseline,
                "verdict": v.verdict,
                "reason": v.reason + (f" Caveat: {v.caveat}." if v.caveat else ""),
                "rows": [list(r) for r in v.rows],
                "note": c.note.strip(),
            }
        )
    return {
        "path": str(path),
        "kind": kind,
        "name": name,
        "models": [
            {"label": m, "group": groups.get(m, ""), "seeds": max((v[2] for v in summary[m].values()), default=0)}
            for m in labels
        ],
        "scores": {m: {k: list(v) for k, v in summary[m].items()} for m in labels},
        "tasks": main,
        "details": details,
        "averages": averages,
        "average_help": {a: AVERAGE_HELP.get(a, "") for a in averages},
        "claims": claims,
        "notes": notes,
    }


def _experiment(path: Path, runs: list[dict[str, Any]], spec: ExperimentSpec | None) -> dict[str, Any]:
    bad = [r for r in runs if not isinstance(r.get("experiment"), dict) or "cell" not in r["experiment"]]
    if bad:
        raise ResultsError(
            f"{path}: {len(bad)} {RESULTS} file(s) there lack the 'experiment' section "
            "that `sentkit experiment run` writes"
        )
    summary = summarise(runs)
    groups = {r["experiment"]["cell"]: str(r["experiment"].get("group", "")) for r in runs}
    name = spec.name if spec else str(runs[0]["experiment"].get("name") or path.name)
    notes: list[str] = []
    if spec is None:
        notes.append(
            "claims: no experiment TOML with this output folder was found; "
            "open the TOML file itself to see its claims judged"
        )
    else:
        missing = [c.name for c in spec.cells if c.name not in summary]
        if missing:
            notes.append(f"not run yet: {', '.join(missing)}")
    return _source(path, "experiment", name, summary, groups, spec, notes)


def open_results(path: str | Path) -> dict[str, Any]:
    """Read results for the page: an evaluate JSON, one experiment cell's ``results.json``,
    an experiment TOML, an experiment output folder, or a folder of evaluate JSON files."""
    p = Path(str(path).strip()).expanduser()
    if not str(path).strip():
        raise ResultsError("enter the path of a results JSON file, an experiment TOML or a results folder")
    if not p.exists():
        raise ResultsError(f"{p} does not exist")
    if p.is_file() and p.suffix.lower() == ".toml":
        spec = load_experiment(p)
        runs = _collect(experiment_folder(p, spec.output))  # this machine's runs, else the committed copies
        if not runs and spec.results:
            runs = _collect(experiment_folder(p, spec.results))
        if not runs:
            where = spec.output + (f" or {spec.results}" if spec.results else "")
            raise ResultsError(
                f"experiment {spec.name!r} has no results yet under {where}: run `sentkit experiment run {p}`"
            )
        return _experiment(p, runs, spec)
    if p.is_file():
        summary, groups, notes = _single_runs([(p, _read_json(p))])
        return _source(p, "evaluate", p.name, summary, groups, None, notes)
    runs = _collect(p)
    if runs:
        return _experiment(p, runs, find_experiment_file(p))
    files = sorted(f for f in p.glob("*.json") if f.is_file())
    loaded = []
    for f in files:
        try:
            loaded.append((f, load_run(f)))
        except ValueError as e:
            log.info("skipping %s: %s", f, e)
    if not loaded:
        raise ResultsError(
            f"{p} holds no results: expected <cell>/seed-<k>/{RESULTS} files (an experiment's "
            "output folder) or results JSON files written by `sentkit evaluate`"
        )
    summary, groups, notes = _single_runs(loaded)
    skipped = len(files) - len(loaded)
    if skipped:
        notes.append(f"{skipped} JSON file(s) in the folder are not results files and were skipped")
    return _source(p, "evaluate", p.name, summary, groups, None, notes)
