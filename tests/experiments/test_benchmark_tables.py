"""docs/benchmarks.md's tables that a benchmark script prints from committed results are the script's output today:
regenerating them from benchmarks/results/ gives the page's text and the committed table.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_declutr_before_after_table_is_regenerated_from_the_committed_runs(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    sys.modules.pop("declutr_before_after", None)
    import declutr_before_after

    folder = REPO / "benchmarks" / "results" / "declutr_before_after"
    text, figures = declutr_before_after.table(folder)
    page = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert text in page, "rerun: python benchmarks/declutr_before_after.py --table " + str(folder.relative_to(REPO))
    assert figures == json.loads((folder / "table.json").read_text())
    assert len(text.splitlines()) == 2 + len(figures["rows"]) >= 3
