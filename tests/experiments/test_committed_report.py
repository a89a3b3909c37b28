"""docs/results.md is regenerated from the committed results (experiments/results/laptop) unchanged.

The PNG chart next to it is not compared: its bytes depend on the matplotlib and FreeType versions
that draw it, and it plots the same summary as the Markdown tables, which are compared here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sentkit.experiments import ExperimentSpec, load_experiment
from sentkit.experiments.report import write_report
from sentkit.experiments.runner import collect, plan, stale

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def laptop(monkeypatch: pytest.MonkeyPatch) -> ExperimentSpec:
    monkeypatch.chdir(REPO)  # the file's paths are relative to the project's root
    spec = load_experiment("experiments/laptop.toml")
    assert spec.results == "experiments/results/laptop"
    return spec


def test_docs_results_md_is_regenerated_unchanged(laptop: ExperimentSpec, tmp_path: Path) -> None:
    assert laptop.results is not None
    results = collect(laptop.results)
    assert results, f"no results files in {laptop.results}"
    out = write_report(results, tmp_path / "results.md", spec=laptop, source=laptop.results, chart=False)
    committed = (REPO / "docs" / "results.md").read_text()
    assert out.read_text() == committed, (
        "docs/results.md is not what the committed results give: run "
        "`sentkit experiment report experiments/laptop.toml` and commit it")


def test_committed_results_are_the_runs_the_file_declares(laptop: ExperimentSpec) -> None:
    assert laptop.results is not None
    runs = {(r.cell.name, r.seed): r for r in plan(laptop)}
    for p in sorted(Path(laptop.results).glob("*/seed-*.json")):
        key = (p.parent.name, int(p.stem.removeprefix("seed-")))
        assert key in runs, f"{p}: the experiment file declares no such (cell, seed)"
        assert stale(runs[key], json.loads(p.read_text())) == "", f"{p} is from an older version of the grid"
