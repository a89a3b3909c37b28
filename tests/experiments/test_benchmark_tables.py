"""docs/benchmarks.md's tables that a benchmark script prints from committed results are the script's output today:
regenerating them from benchmarks/results/ gives the page's block (between `<!-- NAME:table -->` lines, which the
strict figure test leaves out as generated) and the committed table.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def block(name: str) -> str:
    """The text between docs/benchmarks.md's `<!-- NAME:table -->` and `<!-- /NAME:table -->` lines."""
    page = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    return page.split(f"<!-- {name}:table -->\n")[1].split(f"\n<!-- /{name}:table -->")[0]


def test_declutr_before_after_table_is_regenerated_from_the_committed_runs(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    sys.modules.pop("declutr_before_after", None)
    import declutr_before_after

    folder = REPO / "benchmarks" / "results" / "declutr_before_after"
    text, figures = declutr_before_after.table(folder)
    assert block("declutr_before_after") == text.rstrip("\n"), (
        "rerun: python benchmarks/declutr_before_after.py --table " + str(folder.relative_to(REPO))
    )
    assert figures == json.loads((folder / "table.json").read_text())
    assert len(text.splitlines()) == 2 + len(figures["rows"]) >= 3


def test_eval_scores_table_is_regenerated_from_the_committed_results(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    sys.modules.pop("eval_scores", None)
    import eval_scores

    folder = REPO / "benchmarks" / "results" / "eval_scores"
    assert block("eval_scores") == eval_scores.table(folder).rstrip("\n"), (
        "rerun: python benchmarks/eval_scores.py --table-only --out-dir benchmarks/results/eval_scores"
    )


def test_objectives_speed_table_is_regenerated_from_the_committed_results() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("objectives_speed", REPO / "benchmarks" / "objectives_speed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    files = [REPO / "benchmarks" / "results" / f"objectives_speed_{k}.json" for k in ("simcse", "tsdae", "mlm")]
    results = [r for f in files for r in json.loads(f.read_text())["results"]]
    assert block("objectives_speed") == module.table(results), (
        "rerun: python benchmarks/objectives_speed.py table benchmarks/results/objectives_speed_{simcse,tsdae,mlm}.json"
    )
