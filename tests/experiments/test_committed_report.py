"""docs/results.md (the summary) and docs/results/<experiment>.md (a page per experiment) are regenerated from the
committed results (experiments/results/budget, rawtext, plain, laptop, probing and decoder) unchanged.

The PNG charts next to the pages are not compared: its bytes depend on the matplotlib and FreeType versions
that draw it, and it plots the same summary as the Markdown tables, which are compared here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sentkit.experiments import ExperimentSpec, load_experiment
from sentkit.experiments.report import write_pages
from sentkit.experiments.runner import collect, plan, stale

REPO = Path(__file__).resolve().parents[2]


# docs/results.md's experiments, in order: a line each in the summary, a page each in docs/results/
EXPERIMENTS = (
    "experiments/budget.toml",
    "experiments/rawtext.toml",
    "experiments/plain.toml",
    "experiments/laptop.toml",
    "experiments/probing.toml",
    "experiments/decoder.toml",
)


@pytest.fixture()
def specs(monkeypatch: pytest.MonkeyPatch) -> list[ExperimentSpec]:
    monkeypatch.chdir(REPO)  # the files' paths are relative to the project's root
    out = [load_experiment(e) for e in EXPERIMENTS]
    assert [s.results for s in out] == [f"experiments/results/{s.name}" for s in out]
    return out


def test_docs_results_md_is_regenerated_unchanged(specs: list[ExperimentSpec], tmp_path: Path) -> None:
    parts = [(collect(s.results), s, s.results) for s in specs if s.results is not None]
    assert any(results for results, _, _ in parts), "no results files committed"
    written = write_pages(parts, tmp_path / "results.md", chart=False)
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        "results.md",
        *(f"results/{s.name}.md" for s in specs),
    ]
    pages = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs" / "results").glob("*.md")}
    assert pages == {f"results/{s.name}.md" for s in specs}, "docs/results/ holds a page no experiment generates"
    for out in written:
        name = out.relative_to(tmp_path).as_posix()
        committed = (REPO / "docs" / name).read_text()
        assert out.read_text() == committed, (
            f"docs/{name} is not what the committed results give: run "
            f"`sentkit experiment report {' '.join(EXPERIMENTS)}` and commit docs/results.md and docs/results/"
        )


def test_committed_results_are_the_runs_the_files_declare(specs: list[ExperimentSpec]) -> None:
    for spec in specs:
        assert spec.results is not None
        runs = {(r.cell.name, r.seed): r for r in plan(spec)}
        for p in sorted(Path(spec.results).glob("*/seed-*.json")):
            key = (p.parent.name, int(p.stem.removeprefix("seed-")))
            assert key in runs, f"{p}: the experiment file declares no such (cell, seed)"
            assert stale(runs[key], json.loads(p.read_text())) == "", f"{p} is from an older version of the grid"
