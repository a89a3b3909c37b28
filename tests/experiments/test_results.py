"""Typed run results (experiments/results.py) against every committed results file: each reads back into
`RunResults` and writes again the same JSON, key order included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sentkit.experiments.results import NotARunError, RunResults

REPO = Path(__file__).resolve().parents[2]
COMMITTED = sorted(p for p in (REPO / "experiments" / "results").rglob("*.json") if '"experiment"' in p.read_text())


def test_there_are_committed_results_to_check() -> None:
    assert len(COMMITTED) > 100


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(REPO / "experiments" / "results")))
def test_a_committed_results_file_reads_back_and_writes_the_same_json(path: Path) -> None:
    text = path.read_text()
    data = json.loads(text)
    typed = RunResults.from_json(data)
    assert typed.cell == data["experiment"]["cell"]
    again = typed.to_json()
    assert json.dumps(again, indent=2) == json.dumps(data, indent=2)


def test_a_file_without_the_record_is_refused_with_the_reason() -> None:
    with pytest.raises(NotARunError, match="no 'experiment' record"):
        RunResults.from_json({"scores": {}})
    with pytest.raises(NotARunError, match="names no cell"):
        RunResults.from_json({"experiment": {"seed": 0}})


def test_keys_this_version_does_not_know_are_kept() -> None:
    data = {"scores": {"MR": 1.0}, "experiment": {"cell": "c", "seed": 1, "note": "by hand"}}
    typed = RunResults.from_json(data)
    assert typed.experiment.extra == {"note": "by hand"}
    assert typed.to_json()["experiment"]["note"] == "by hand"
