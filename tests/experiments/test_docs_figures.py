"""Every decimal figure of a hand-written page in docs/ names the committed result it comes from, and is that
result (sentkit.experiments.report.figures): a figure changed by hand (68.9 -> 71.3), attributed to another cell or
another average (the cosine STS12-16 mean given as unsupervised STS), or given with no source fails.

The rule, as this test applies it:
- Pages scanned: docs/*.md, except docs/results.md; docs/results/ (the report's pages) and docs/reference/ (the
  CLI, method and task references) are generated and held fresh by tests/experiments/test_committed_report.py and
  tests/cli/test_reference.py.
- A figure is a decimal number (``\\d+\\.\\d+``, not part of a longer token: "v0.1.0" and "a/1.2" are not;
  "1.9-2.3" is two) in the page's prose: fenced code blocks, inline code, HTML comments and link targets are left
  out (commands and settings are examples, not results: write a setting as inline code), and so is a version after
  a software name ("Python 3.11", "torch 2.4") or a section number ("section 5.1").
- Each figure is followed on its line by ``<!-- fig: REF; ... -->``, whose references give, in order, the figures
  between the previous reference on the line and it (the reference forms: the module's docstring).

Pages other developers own and have not converted yet (`PENDING`) fail the strict check: their test is an expected
failure that turns into an error (XPASS, strict) once the page passes, so the entry must then go; until then they
keep the older, weaker check that each of their figures occurs in a generated page or a committed result.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from sentkit.experiments.report.figures import FIGURE, GENERATED, Source, check_page, figures

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"

# hand-written pages whose figures carry no references yet: {page: who owns the fix}
PENDING: dict[str, str] = {}

# the generated tables of hand-written pages (`<!-- NAME:table -->` blocks, not prose): NAME -> the test that
# regenerates the block from committed results and compares
GENERATED_TABLES = {
    "declutr_before_after": "tests/experiments/test_benchmark_tables.py",
    "eval_scores": "tests/experiments/test_benchmark_tables.py",
    "objectives_speed": "tests/experiments/test_benchmark_tables.py",
    "precision_scores": "tests/models/test_precision.py",
    "precision_throughput": "tests/models/test_precision.py",
    "precision_throughput_fp16": "tests/models/test_precision.py",
}

PAGES = sorted(p.relative_to(REPO).as_posix() for p in DOCS.glob("*.md") if p.name != "results.md")


@pytest.fixture(scope="module")
def source() -> Source:
    return Source(REPO)


def test_figures_are_what_the_code_reads_as_figures() -> None:
    text = (
        "Scores 68.9 ± 0.3 (`--set lr=5e-4`, `0.25`), v0.1.0, 1e-4, Python 3.11, section 5.1, [x](a/1.2.md)\n"
        "```bash\nsentkit train --set margin=0.5\n```\n<!-- 7.5 -->\n64.2 / 12.25, and 3.\n"
    )
    assert list(figures(text)) == ["68.9", "0.3", "64.2", "12.25"]


@pytest.mark.parametrize(
    "page",
    [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=PENDING[p])) if p in PENDING else p for p in PAGES],
)
def test_every_figure_in_docs_is_the_committed_result_it_names(page: str, source: Source) -> None:
    errors = check_page((REPO / page).read_text(encoding="utf-8"), source, page)
    assert not errors, (
        f"{page}: figures without a committed source, or not what their source gives (write "
        "`<!-- fig: STUDY/CELL KEY -->` after a figure; sentkit/experiments/report/figures.py):\n" + "\n".join(errors)
    )


def test_pending_pages_are_pages() -> None:
    assert set(PENDING) <= set(PAGES), "PENDING names a page that is gone: remove it"


def test_every_generated_table_is_regenerated_by_a_test() -> None:
    found = {m.group(1) for p in PAGES for m in GENERATED.finditer((REPO / p).read_text(encoding="utf-8"))}
    assert found == set(GENERATED_TABLES), (
        "a `<!-- NAME:table -->` block is left out of the figure check only when a test regenerates it: "
        f"list it in GENERATED_TABLES with its test ({sorted(found ^ set(GENERATED_TABLES))})"
    )
    for name, test in GENERATED_TABLES.items():
        assert f'"{name}"' in (REPO / test).read_text(encoding="utf-8"), f"{test} does not regenerate {name}"


def test_a_generated_table_is_not_prose_and_its_markers_must_pair(source: Source) -> None:
    table = "| a | 71.3 |\n|---|---|\n| b | 2.5 |"
    assert check_page(f"<!-- t:table -->\n{table}\n<!-- /t:table -->\n", source) == []
    assert len(check_page(f"<!-- t:table -->\n{table}\n<!-- /u:table -->\n", source)) == 2  # unpaired: prose
    assert len(check_page(f"{table}\n", source)) == 2


# ------------------------------------------------------------------------------------------------------------------
# The check fails where it should: a changed figure, a wrong average or cell, a figure with no source
# ------------------------------------------------------------------------------------------------------------------
HEADLINE = "score 68.9 ± 0.3 downstream <!-- fig: budget/recipe-w512-cv downstream ± -->"


def test_the_headline_is_checked_and_changing_it_fails(source: Source) -> None:
    text = (DOCS / "methods.md").read_text(encoding="utf-8")
    assert HEADLINE in text
    assert check_page(text, source) == []
    mutated = text.replace(HEADLINE, HEADLINE.replace("68.9", "71.3"))
    errors = check_page(mutated, source, "methods.md")
    assert len(errors) == 1 and "71.3 is not what 'budget/recipe-w512-cv downstream ±' gives" in errors[0]


def test_a_figure_attributed_to_another_average_or_cell_fails(source: Source) -> None:
    refs = "budget/recipe-corpus-vocab downstream; budget/recipe-corpus-vocab unsupervised_sts"
    line = f"68.1 / 59.0 raw <!-- fig: {refs} -->"
    assert check_page(line, source) == []
    # 59.6 is recipe-corpus-vocab's cosine STS12-16 mean, not its unsupervised STS
    assert check_page(line.replace("59.0", "59.6"), source)
    assert check_page(line.replace("59.0", "59.6").replace("unsupervised_sts", "cosine_sts"), source) == []
    assert check_page(line.replace("recipe-corpus-vocab downstream", "recipe-fl downstream"), source)


def test_a_figure_without_a_reference_or_with_a_bad_one_fails(source: Source) -> None:
    assert check_page("Trained for 1.9 CPU-hours, scored 68.9.", source, "p.md") == [
        "p.md:1: 1.9 has no reference (<!-- fig: ... --> after it on its line)",
        "p.md:1: 68.9 has no reference (<!-- fig: ... --> after it on its line)",
    ]
    # a reference covers the figures before it on its line only, in order and in number
    assert check_page("68.9 <!-- fig: budget/recipe-w512-cv downstream --> and 72.8", source)
    assert check_page("68.9 and 72.8 <!-- fig: budget/recipe-w512-cv downstream -->", source)
    assert check_page("68.9 <!-- fig: budget/no-such-cell downstream -->", source)
    assert check_page("68.9 <!-- fig: nostudy/recipe downstream -->", source)
    assert check_page("68.9 <!-- fig: budget/recipe-w512-cv no_such_score -->", source)


def test_each_reference_kind_reads_its_source(tmp_path: Path, source: Source) -> None:
    assert check_page("1.9-2.3 CPU-hours <!-- fig: budget/recipe-w512-cv cpu-h range -->", source) == []
    assert check_page("2.12 CPU-hours <!-- fig: budget/recipe-w512-cv cpu-h -->", source) == []
    assert check_page("2.13 CPU-hours <!-- fig: budget/recipe-w512-cv cpu-h -->", source)
    assert (
        check_page(
            "+2.4 <!-- fig: budget/recipe-w512-cv downstream - budget/glove-average-whitened downstream -->", source
        )
        == []
    )
    assert check_page("MR 60.2 <!-- fig: paper paragraph-vector-dbow MR -->", source) == []
    assert check_page("MR 60.3 <!-- fig: paper paragraph-vector-dbow MR -->", source)
    (tmp_path / "r.json").write_text(json.dumps({"a": [{"loss": 4.840218544}], "acc": 0.731, "b c": 2.5}))
    local = Source(tmp_path)
    assert check_page("4.840219 <!-- fig: r.json#a/0/loss -->, 73.1 <!-- fig: r.json#acc x100 -->", local) == []
    assert check_page("2.5 <!-- fig: r.json#b%20c -->", local) == []
    (tmp_path / "n.json").write_text(json.dumps({"words": 21342308}))
    assert check_page("21.3 M words <!-- fig: n.json#words M -->", local) == []
    assert check_page("21.4 M words <!-- fig: n.json#words M -->", local)
    assert check_page("4.840218 <!-- fig: r.json#a/0/loss -->", local)


def test_a_figure_in_code_a_comment_or_a_version_needs_no_reference(source: Source) -> None:
    text = "lr `5e-4`, tau `0.05` <!-- 7.5 -->, Python 3.11, section 2.2\n```\nmargin = 0.5\n```\n"
    assert check_page(text, source) == []


# ------------------------------------------------------------------------------------------------------------------
# The older check, for the pages in PENDING: each figure occurs in a generated page or a committed result
# ------------------------------------------------------------------------------------------------------------------
def _numbers(data: object) -> list[float]:
    if isinstance(data, dict):
        return [x for v in data.values() for x in _numbers(v)]
    if isinstance(data, list):
        return [x for v in data for x in _numbers(v)]
    if isinstance(data, int | float) and not isinstance(data, bool):
        return [float(data)]
    return []


def given() -> set[str]:
    """Every figure a generated page or a committed results file gives."""
    out: set[str] = set()
    generated = [
        DOCS / "results.md",
        *sorted((DOCS / "results").glob("*.md")),
        *sorted((DOCS / "reference").glob("*.md")),
    ]
    for p in generated:
        out.update(FIGURE.findall(p.read_text(encoding="utf-8")))
    for p in sorted((REPO / "experiments" / "results").rglob("*.json")):
        out.update(FIGURE.findall(p.read_text(encoding="utf-8")))
    for p in sorted((REPO / "benchmarks" / "results").rglob("*.json")):
        text = p.read_text(encoding="utf-8")
        out.update(FIGURE.findall(text))
        for v in _numbers(json.loads(text)):
            out.update(f"{v:.{d}f}" for d in range(1, 7))
    return out


def hand_typed(pages: list[str], have: set[str]) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for page in pages:
        for fig in figures((REPO / page).read_text(encoding="utf-8")):
            if fig not in have:
                out[(page, fig)] += 1
    return out


def test_pending_pages_have_no_figure_that_nothing_committed_gives() -> None:
    found = sorted(
        f"{p}: {f}" + (f" ({n} times)" if n > 1 else "") for (p, f), n in hand_typed(sorted(PENDING), given()).items()
    )
    assert not found, "figures that no generated page or committed result gives:\n" + "\n".join(found)


def test_the_older_check_passes_a_changed_figure_the_strict_one_catches(source: Source) -> None:
    have = given()
    assert "71.3" in have  # why the older check could not catch 68.9 -> 71.3: 71.3 is a figure somewhere
    assert re.search(r"\b71\.3\b", HEADLINE.replace("68.9", "71.3"))
    assert check_page(HEADLINE.replace("68.9", "71.3"), source)
