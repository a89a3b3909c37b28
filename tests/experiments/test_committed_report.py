"""docs/results.md is regenerated from the committed results (experiments/results/budget, rawtext, plain,
laptop and probing) unchanged.

The PNG chart next to it is not compared: its bytes depend on the matplotlib and FreeType versions
that draw it, and it plots the same summary as the Markdown tables, which are compared here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sentkit.experiments import ExperimentSpec, load_experiment
from sentkit.experiments.report import write_reports
from sentkit.experiments.runner import collect, plan, stale

REPO = Path(__file__).resolve().parents[2]


EXPERIMENTS = ("experiments/budget.toml", "experiments/rawtext.toml", "experiments/plain.toml", "experiments/laptop.toml", "experiments/probing.toml")  # docs/results.md's sections, in order


@pytest.fixture()
def specs(monkeypatch: pytest.MonkeyPatch) -> list[ExperimentSpec]:
    monkeypatch.chdir(REPO)  # the files' paths are relative to the project's root
    out = [load_experiment(e) for e in EXPERIMENTS]
    assert [s.results for s in out] == [f"experiments/results/{s.name}" for s in out]
    return out


def test_docs_results_md_is_regenerated_unchanged(specs: list[ExperimentSpec], tmp_path: Path) -> None:
    parts = [(collect(s.results), s, s.results) for s in specs if s.results is not None]
    assert any(results for results, _, _ in parts), "no results files committed"
    out = write_reports(parts, tmp_path / "results.md", chart=False)
    committed = (REPO / "docs" / "results.md").read_text()
    assert out.read_text() == committed, (
        "docs/results.md is not what the committed results give: run "
        f"`sentkit experiment report {' '.join(EXPERIMENTS)}` and commit it")


def test_committed_results_are_the_runs_the_files_declare(specs: list[ExperimentSpec]) -> None:
    for spec in specs:
        assert spec.results is not None
        runs = {(r.cell.name, r.seed): r for r in plan(spec)}
        for p in sorted(Path(spec.results).glob("*/seed-*.json")):
            key = (p.parent.name, int(p.stem.removeprefix("seed-")))
            assert key in runs, f"{p}: the experiment file declares no such (cell, seed)"
            assert stale(runs[key], json.loads(p.read_text())) == "", f"{p} is from an older version of the grid"
