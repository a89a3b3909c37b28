"""No figure in docs/ is typed by hand: every decimal figure of a hand-written page is one that a generated page or a
committed results file gives (the list of known exceptions this test once allowed shrank to none on 2026-12-06 and was
retired: there is no allowlist to add to).

The rule, as this test applies it:
- Pages scanned: docs/*.md, except docs/results.md; docs/results/ (the report's pages) and docs/reference/ (the
  CLI, method and task references) are generated and held fresh by tests/experiments/test_committed_report.py and
  tests/cli/test_reference.py.
- A figure is a decimal number (``\\d+\\.\\d+``, not part of a longer token: "v0.1.0" and "a/1.2" are not;
  "1.9-2.3" is two) in the page's prose: fenced code blocks, inline code, HTML comments and link targets are left
  out (commands and settings are examples, not results), and so is a version after a software name ("Python 3.11",
  "torch 2.4").
- A figure is given when it occurs as a figure in a generated page (docs/results.md, docs/results/*.md,
  docs/reference/*.md) or in a committed results file (experiments/results/**/*.json); or when a committed
  benchmark result (benchmarks/results/**/*.json) holds it, as written or rounded to the figure's decimals.
- The test fails on any figure not given, naming its page: commit the result that holds it (a benchmark's --json,
  an experiment's results) or link the generated page instead of copying from it.

What this can and cannot catch: a figure that no generated page or result holds (a benchmark timing typed from a
terminal, a score copied from a report that has since changed to other digits). It cannot tell that a score copied
from a page is attributed to the right cell: a one-decimal score of 40-80 is almost always somewhere in the
report's pages. A page that quotes results should link the generated page instead of copying its figures.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"

FIGURE = re.compile(r"(?<![\w./])\d+\.\d+(?![\w.]*\d)(?!\w)")
VERSION = re.compile(r"\b(?:Python|python|torch|numpy|transformers|version|CUDA|ROCm|gensim|mteb)\s+$")
_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_TARGET = re.compile(r"\]\([^)]*\)")


def prose(text: str) -> str:
    """The page without what is not prose: code blocks, inline code, comments, link targets."""
    for pattern, repl in ((_FENCE, ""), (_COMMENT, ""), (_CODE, ""), (_TARGET, "]")):
        text = pattern.sub(repl, text)
    return text


def figures(text: str) -> Iterator[str]:
    """The decimal figures of `text`'s prose, versions after a software name left out."""
    body = prose(text)
    for m in FIGURE.finditer(body):
        if not VERSION.search(body[max(0, m.start() - 40) : m.start()]):
            yield m.group(0)


def _numbers(data: Any) -> Iterator[float]:
    if isinstance(data, dict):
        for v in data.values():
            yield from _numbers(v)
    elif isinstance(data, list):
        for v in data:
            yield from _numbers(v)
    elif isinstance(data, int | float) and not isinstance(data, bool):
        yield float(data)


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


def hand_typed(docs: Path = DOCS, have: set[str] | None = None) -> Counter[tuple[str, str]]:
    """{(page, figure): occurrences} of the figures of hand-written pages that nothing generated or committed gives."""
    have = given() if have is None else have
    out: Counter[tuple[str, str]] = Counter()
    for page in sorted(docs.glob("*.md")):
        if page.name == "results.md":
            continue
        for fig in figures(page.read_text(encoding="utf-8")):
            if fig not in have:
                out[(page.relative_to(docs.parent).as_posix(), fig)] += 1
    return out


def test_figures_are_what_the_code_reads_as_figures() -> None:
    text = (
        "Scores 68.9 ± 0.3 (`--set lr=5e-4`, `0.25`), v0.1.0, 1e-4, Python 3.11, [x](a/1.2.md)\n"
        "```bash\nsentkit train --set margin=0.5\n```\n<!-- 7.5 -->\n64.2 / 12.25, and 3.\n"
    )
    assert list(figures(text)) == ["68.9", "0.3", "64.2", "12.25"]


def test_no_figure_in_docs_is_typed_by_hand() -> None:
    found = sorted(f"{p}: {f}" + (f" ({n} times)" if n > 1 else "") for (p, f), n in hand_typed().items())
    assert not found, (
        "figures in docs/ that no generated page (docs/results/, docs/reference/) or committed result "
        "gives: link or generate them instead of typing them\n" + "\n".join(found)
    )


def test_a_typed_figure_is_caught(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text("Trained in 123.457 s, 68.9 on STS-B (`lr=0.1`).\n", encoding="utf-8")
    (docs / "results.md").write_text("Generated: 999.25\n", encoding="utf-8")  # generated, never scanned
    assert hand_typed(docs, have={"68.9"}) == Counter({("docs/page.md", "123.457"): 1})
