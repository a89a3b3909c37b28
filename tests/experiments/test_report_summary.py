"""The one-screen summary of several experiments (sentkit.experiments.report.summary) and the pages beside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sentkit.experiments.grid import CellSpec, ExperimentSpec
from sentkit.experiments.report import write_pages
from sentkit.experiments.report.summary import Family, families, summary_lines


def res(
    exp: str,
    cell: str,
    seed: int,
    down: float,
    *,
    probing: float | None = None,
    cpu: float = 3600.0,
    phases: dict[str, float] | None = None,
) -> dict[str, Any]:
    avg: dict[str, Any] = {"per_task": {"MR": down}, "downstream": down}
    if probing is not None:
        avg = {"per_task": {"SentLen": probing}, "probing": probing}
    r: dict[str, Any] = {
        "declutr_average": avg,
        "results": {},
        "experiment": {
            "name": exp,
            "cell": cell,
            "seed": seed,
            "method": "x",
            "settings": {},
            "train_seconds": 1.0,
            "cpu_seconds": {"train": cpu, "evaluate": 1.0},
        },
    }
    if phases:
        r["experiment"]["recipe"] = {"phases": {k: {"cpu_seconds": v} for k, v in phases.items()}}
    return r


def grids() -> tuple[ExperimentSpec, ExperimentSpec]:
    a = ExperimentSpec(
        "a",
        "runs/a",
        [
            CellSpec("glove", "glove-average"),
            CellSpec("glove-white", "whiten", settings={"model": "glove-average"}),
            CellSpec("recipe", "raw-text", seeds=[0, 1]),
            CellSpec("recipe-white", "whiten", settings={"model": "@recipe"}, seeds=[0, 1]),
            CellSpec("phase0", "pretrained", settings={"model": "@recipe/0-wordpiece-skipgram"}),
            CellSpec("last", "pretrained", settings={"model": "@recipe/2-declutr", "pooling": "mean"}),
            CellSpec("tuned", "declutr", settings={"model": "tiny-hub"}),
            CellSpec("hub", "pretrained", settings={"model": "tiny-hub"}),
        ],
    )
    b = ExperimentSpec(
        "b",
        "runs/b",
        [
            CellSpec("glove", "glove-average"),
            CellSpec("probe-recipe", "pretrained", settings={"model": "runs/a/recipe/seed-0/model"}),
        ],
        tasks="probing",
    )
    return a, b


def results() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    phases = {"0-wordpiece-skipgram": 100.0, "1-base": 200.0, "2-declutr": 300.0}
    ra = [
        res("a", "glove", 0, 60.0),
        res("a", "glove-white", 0, 62.0),
        *(res("a", "recipe", s, 66.0 + s, phases=phases) for s in (0, 1)),
        *(res("a", "recipe-white", s, 70.0, cpu=7200.0) for s in (0, 1)),
        res("a", "phase0", 0, 64.0),
        res("a", "last", 0, 65.0),
        res("a", "tuned", 0, 68.0),
        res("a", "hub", 0, 67.0),
    ]
    rb = [res("b", "glove", 0, 0.0, probing=40.0), res("b", "probe-recipe", 0, 0.0, probing=50.0)]
    return ra, rb


def test_a_cell_is_of_the_family_of_the_model_it_evaluates() -> None:
    a, b = grids()
    ra, rb = results()
    fa = families(a, ra)
    assert fa["recipe-white"] == fa["recipe"] == Family("raw-text", "")
    assert fa["phase0"] == Family("wordpiece-skipgram", "")  # a phase before the recipe's last: the phase's method
    assert fa["last"] == Family("raw-text", "")  # the recipe's last phase is the recipe
    assert fa["glove-white"] == Family("glove-average", "")
    assert fa["tuned"] == Family("declutr", "tiny-hub") and fa["hub"] == Family("pretrained", "tiny-hub")
    fb = families(b, rb, {"a": fa}, {"runs/a": "a"})
    assert fb["probe-recipe"] == Family("raw-text", "")  # another grid's run folder: that grid's cell


def test_the_summary_picks_each_familys_best_cell_per_average_and_links_the_pages(tmp_path: Path) -> None:
    a, b = grids()
    ra, rb = results()
    written = write_pages([(ra, a, "ra"), (rb, b, "rb")], tmp_path / "results.md", chart=False)
    assert written == [tmp_path / "results.md", tmp_path / "results" / "a.md", tmp_path / "results" / "b.md"]
    assert (tmp_path / "results" / "a.md").read_text().startswith("# Results: a\n")
    text = (tmp_path / "results.md").read_text()
    assert (
        text
        == "\n".join(summary_lines([(ra, a, "ra"), (rb, b, "rb")], {"a": "results/a.md", "b": "results/b.md"})) + "\n"
    )
    rows = [ln for ln in text.splitlines() if ln.startswith("| ")][1:]
    # best downstream first: raw-text (its whitened version, 2 seeds, 2 CPU-h with the recipe's 600 s), its classifier
    # average beside it, probing from the other grid's evaluation of its run
    assert rows[0] == (
        "| `raw-text` | — | 70.0 ± 0.0 ([recipe-white](results/a.md)) |  | 70.0 ± 0.0 ([recipe-white](results/a.md)) "
        "| 50.0 ([probe-recipe](results/b.md)) | 1/2 | 2.17 |"
    )
    assert rows[1].startswith("| `declutr` | `tiny-hub` | 68.0 ([tuned](results/a.md))")
    assert rows[2].startswith("| none: evaluated as it is | `tiny-hub` | 67.0 ([hub](results/a.md))")
    assert rows[3].startswith("| `wordpiece-skipgram` | — | 64.0 ([phase0](results/a.md))")
    # the reference rows rank among the methods, one per version, the same cell of several grids merged
    assert rows[4].startswith("| reference: `glove-white` | `glove-average` | 62.0")
    assert rows[5] == (
        "| reference: `glove` | `glove-average` | 60.0 ([glove](results/a.md)) |  | 60.0 ([glove](results/a.md)) "
        "| 40.0 ([glove](results/b.md)) | 1 | 1.00 |"
    )
    # the budget line: cells from no pretrained model, cheapest first, each beating every cheaper one
    assert (
        "- downstream: 0.17 CPU-h: 66.5 ± 0.7 `raw-text` ([recipe](results/a.md)); 2.17 CPU-h: 70.0 ± 0.0 "
        "`raw-text` ([recipe-white](results/a.md))\n"
    ) in text
    assert "- unsupervised STS:" not in text  # no cell has it
    assert "- [a](results/a.md) (`experiments/a.toml`): 10 of 10 declared runs have results." in text
    assert "- [b](results/b.md) (`experiments/b.toml`): 2 of 2 declared runs have results." in text


def test_a_free_reference_enters_the_budget_lists_and_says_where_it_wins(tmp_path: Path) -> None:
    a, _ = grids()
    ra, _ = results()
    for r in ra:  # the references cost nothing to train, and the whitened one beats the recipe's first seed
        if r["experiment"]["cell"].startswith("glove"):
            r["experiment"]["cpu_seconds"]["train"] = 0.0
    ra[1]["declutr_average"] = {"per_task": {"MR": 66.5}, "downstream": 66.5}
    text = "\n".join(summary_lines([(ra, a, "ra")], {"a": "results/a.md"}))
    assert (
        "- downstream: 0.00 CPU-h: 66.5 reference `glove-white` ([a](results/a.md)); 2.17 CPU-h: 70.0 ± 0.0 "
        "`raw-text` ([recipe-white](results/a.md))\n"
    ) in text  # the recipe at 0.17 CPU-h (66.5 ± 0.7) only ties it
    assert (
        "- downstream: the reference `glove-white` (0.00 CPU-h, [a](results/a.md)), 66.5, beats or ties every one of "
        "the 3 cells from no pretrained model that cost less than 2.17 CPU-h (the cheapest to beat it: "
        "`recipe-white`, 70.0 ± 0.0), and the best of 1 of the 4 method rows"
    ) in text


def test_an_average_over_fewer_tasks_is_flagged_with_its_count_and_kept_out_of_the_budget(tmp_path: Path) -> None:
    a, _ = grids()
    ra, _ = results()
    for r in ra:
        r["declutr_average"]["per_task"]["CR"] = r["declutr_average"]["downstream"]
    ra[8]["declutr_average"]["per_task"].pop("CR")  # `tuned`: its CR failed
    text = "\n".join(summary_lines([(ra, a, "ra")], {"a": "results/a.md"}))
    row = next(ln for ln in text.splitlines() if ln.startswith("| `declutr` |"))
    assert row.startswith("| `declutr` | `tiny-hub` | 68.0 (1 of 2 tasks; no CR) ([tuned](results/a.md)) |")
    assert "(n of m tasks; no ...): an average over fewer tasks than the others" in text
    budget = next(ln for ln in text.splitlines() if ln.startswith("- downstream: "))
    assert "tuned" not in budget


def test_a_page_flags_an_average_over_fewer_tasks_in_its_all_scores_table() -> None:
    from sentkit.experiments.report import all_scores_section

    summary = {
        "full": {"MR": (70.0, 0.0, 1), "CR": (80.0, 0.0, 1), "avg:downstream": (75.0, 0.0, 1)},
        "failed": {"MR": (60.0, 0.0, 1), "avg:downstream": (60.0, 0.0, 1)},
    }
    lines = all_scores_section(summary, ["full", "failed"], {}, ["avg:downstream"], ["MR", "CR"])
    assert "| failed |  | 1 | 60.0 (1 of 2) | 60.0 | — |" in lines
    assert "| full |  | 1 | 75.0 | 70.0 | 80.0 |" in lines
    assert any(ln.startswith("(n of m): ") and ln.endswith("failed lacks CR.") for ln in lines)


def test_the_summary_leaves_out_a_model_stored_smaller() -> None:
    """docs/results.md compares models: a pretrained cell scoring one cut (`dim`) or as codes (`quantize`, `rescore`)
    is left out (results/smaller.md compares those); a method's own `dim` (a word2vec size) is another model."""
    from pathlib import Path

    from sentkit.experiments import load_experiment
    from sentkit.experiments.report.summary import stored_smaller

    root = Path(__file__).resolve().parents[2] / "experiments"
    cells = {c.name: c for f in ("smaller.toml", "rawtext.toml") for c in load_experiment(root / f).cells}
    for name in ("glove-average-d12", "declutr-tiny-int8", "declutr-minilm-binary-rescored", "minilm-base-d96"):
        assert stored_smaller(cells[name]), name
    for name in ("declutr-tiny", "glove-average-whitened", "minilm-base", "skipgram-256-mean"):
        assert not stored_smaller(cells[name]), name
    summary = (root.parent / "docs" / "results.md").read_text()
    assert "glove-average-d12" not in summary and "-int8]" not in summary and "-binary" not in summary
