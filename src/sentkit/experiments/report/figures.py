"""The figures a hand-written page quotes, checked against the committed results they name.

A figure is a decimal number in a page's prose (fenced code, inline code, HTML comments and link targets are not
prose; nor is a version after a software name, "Python 3.11", or a section number, "section 2.2"). Every figure is
followed, on its line, by a reference that reproduces it: an HTML comment ``<!-- fig: REF; REF; ... -->`` whose
references, in order, give the figures of the text between the previous reference on the line (or the line's start)
and the comment, each rounded to the figure's own decimals. A figure with no reference after it, or one that its
reference does not give, is an error: a changed figure, or one attributed to another cell or another average,
fails. A setting or an example is written as inline code (`lr=5e-4`, `0.05`), not as a figure.

References (the registry `REFERENCES`, by their first word after the cell):

- ``STUDY/CELL KEY`` the mean over seeds of a score of a cell (``budget/recipe-w512-cv downstream``), read from
  ``experiments/results/STUDY`` as the generated pages read it (:func:`sentkit.experiments.report.summarise`); KEY
  is a score's name (``STS14``, ``SICKRelatedness-cos``, ``avg:downstream``) or an average's short name
  (`AVERAGE_NAMES`: downstream, unsupervised_sts, supervised, ...); ``KEY ±`` gives the mean and the std over seeds.
- ``REF - REF`` the difference of two references of one figure each (the figure without its sign).
- ``STUDY/CELL cpu-h`` the training CPU-hours of the cell, the cells it continues included, as the pages print them
  (:func:`sentkit.experiments.report.chain_train_cpu`); ``cpu-h range`` the least and the most over its seeds of its
  own training CPU (a recipe: its phases), for a cell that continues none.
- ``PATH#a/b/0/c`` a number in a committed JSON file (a path from the project's root), ``x100`` after it to scale a
  share to a percentage, ``M`` a count to millions ("21.3 M tokens");
  a key with a space in it is written with ``%20`` (``#mean/exact%20ties``).
- ``paper METHOD KEY`` a figure of Hill et al. 2016's Tables 3 and 4 for the row of a method
  (:func:`sentkit.experiments.paper.hill_scores`; ``METHOD+embs`` for its row with pre-trained embeddings), in points.

A table a benchmark script prints from its committed results is put in a page between ``<!-- NAME:table -->`` and
``<!-- /NAME:table -->`` lines; such a block is generated, not prose, and a test regenerates it and compares
(tests/experiments/test_docs_figures.py's `GENERATED` names each block's test, and fails on a block it does not list).

`check_page` returns the errors of a page's text; `check_figures` those of every page given.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from sentkit.core.errors import InputError

FIGURE = re.compile(r"(?<![\w./])\d+\.\d+(?![\w.]*\d)(?!\w)")
VERSION = re.compile(
    r"\b(?:Python|python|torch|numpy|transformers|version|CUDA|ROCm|gensim|mteb|WordNet|spaCy|section|sections|"
    r"Section|Sections)\s+$"
)
_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_TARGET = re.compile(r"\]\([^)]*\)")
REF = re.compile(r"<!--\s*fig:(.*?)-->")
# a table a benchmark script generates from committed results (its test regenerates it): not prose
GENERATED = re.compile(r"^<!-- ([\w.-]+):table -->$.*?^<!-- /\1:table -->$", re.S | re.M)

# an average's short name in a reference -> the score's name in the summary
AVERAGE_NAMES = {
    "downstream": "avg:downstream",
    "downstream_without_snli": "avg:downstream_without_snli",
    "unsupervised_sts": "avg:unsupervised_sts",
    "supervised": "avg:supervised",
    "cosine_sts": "avg:cosine_sts",
    "probing": "avg:probing",
    "hill_table3": "avg:hill_table3",
    "hill_table4": "avg:hill_table4",
}


def _blank(m: re.Match[str]) -> str:
    return "\n" * m.group(0).count("\n")


def prose(text: str) -> str:
    """The text without what is not prose: code blocks, inline code, comments, link targets (lines kept)."""
    for pattern, repl in ((_FENCE, _blank), (_COMMENT, _blank), (_CODE, ""), (_TARGET, "]")):
        text = pattern.sub(repl, text)  # type: ignore[arg-type]
    return text


def figures(text: str) -> Iterator[str]:
    """The decimal figures of `text`'s prose, versions and section numbers left out."""
    body = prose(text)
    for m in FIGURE.finditer(body):
        if not VERSION.search(body[max(0, m.start() - 40) : m.start()]):
            yield m.group(0)


class Source:
    """Where references are read: the project's root (experiments/<study>.toml, their committed results); each
    study is read once."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._studies: dict[str, Any] = {}

    def study(self, name: str) -> Any:
        """(spec, runs, summary) of a study, read once."""
        if name not in self._studies:
            from sentkit.experiments.grid import load_experiment
            from sentkit.experiments.report.scores import summarise
            from sentkit.experiments.results import as_runs
            from sentkit.experiments.runner import collect

            toml = self.root / "experiments" / f"{name}.toml"
            if not toml.is_file():
                raise InputError(f"no study {name!r} (no experiments/{name}.toml)")
            spec = load_experiment(toml)
            results = self.root / (spec.results or f"experiments/results/{name}")
            runs = as_runs(collect(results))
            self._studies[name] = (spec, runs, summarise(runs))
        return self._studies[name]

    def score(self, cell: str, key: str) -> tuple[float, float, int]:
        study, _, name = cell.partition("/")
        if not name:
            raise InputError(f"{cell!r} is not STUDY/CELL")
        summary = self.study(study)[2]
        if name not in summary:
            raise InputError(f"study {study} has no results of a cell {name!r}")
        key = AVERAGE_NAMES.get(key, key)
        if key not in summary[name]:
            raise InputError(f"{cell} has no score {key!r}")
        return summary[name][key]


def _cell_score(src: Source, cell: str, words: list[str]) -> list[float]:
    if len(words) == 2 and words[1] == "±":
        mean, std, _ = src.score(cell, words[0])
        return [mean, std]
    if len(words) != 1:
        raise InputError(f"unexpected {' '.join(words[1:])!r}")
    return [src.score(cell, words[0])[0]]


def _cpu_hours(src: Source, cell: str, words: list[str]) -> list[float]:
    from sentkit.experiments.report.costs import chain_train_cpu, train_seconds

    study, _, name = cell.partition("/")
    spec, runs, _ = src.study(study)
    if words == ["range"]:
        mine = [r for r in runs if r.cell == name]
        if not mine:
            raise InputError(f"study {study} has no results of a cell {name!r}")
        if any(c.name == name and c.refs for c in spec.cells):
            raise InputError(f"{cell} continues other cells: its cost is cpu-h, not a range of its own")
        per_seed = [sum(r.experiment.phase_cpu.values()) or r.experiment.train_cpu or train_seconds(r) for r in mine]
        return [min(per_seed) / 3600, max(per_seed) / 3600]
    if words:
        raise InputError(f"unexpected {' '.join(words)!r} after cpu-h")
    cost = chain_train_cpu(spec, runs).get(name)
    if cost is None:
        raise InputError(f"{cell} has no training cost")
    return [cost.seconds / 3600]


def _json_value(src: Source, target: str, words: list[str]) -> list[float]:
    path, _, pointer = target.partition("#")
    data: Any = json.loads((src.root / path).read_text(encoding="utf-8"))
    for part in pointer.split("/") if pointer else []:
        part = unquote(part)  # a key with a space is written with %20: a reference is split at spaces
        data = data[int(part)] if isinstance(data, list) else data[part]
    if isinstance(data, bool) or not isinstance(data, int | float):
        raise InputError(f"{target} is {data!r}, not a number")
    scale = {"x100": 100.0, "M": 1e-6}  # x100: a share as a percentage; M: a count in millions
    if any(w not in scale for w in words):
        raise InputError(f"unexpected {' '.join(words)!r} after a JSON reference")
    return [float(data) * (scale[words[0]] if words else 1.0)]


def _paper(src: Source, _: str, words: list[str]) -> list[float]:
    from sentkit.experiments import paper

    if len(words) != 2:
        raise InputError("a paper figure is: paper METHOD KEY")
    method, embs = words[0].removesuffix("+embs"), words[0].endswith("+embs")
    row = paper.hill_row(method, {"pretrained_inputs": embs, "pretrained_embeddings": embs})
    scores = paper.hill_scores(row) if row is not None else {}
    if words[1] not in scores:
        raise InputError(f"Hill et al. give no {words[1]!r} for {words[0]!r}")
    return [scores[words[1]]]


# the reference kinds, by their second word (a cell's) or the form of their first (a JSON file's)
REFERENCES: Mapping[str, Callable[[Source, str, list[str]], list[float]]] = {
    "cpu-h": lambda src, cell, words: _cpu_hours(src, cell, words[1:]),
}
# the reference kinds named by their first word
SOURCES: Mapping[str, Callable[[Source, str, list[str]], list[float]]] = {"paper": _paper}


def resolve(src: Source, ref: str) -> list[float]:
    """The figures one reference gives (ValueError naming what is wrong with it)."""
    if " - " in ref:  # a difference of two single figures
        sides = [resolve(src, side) for side in ref.split(" - ")]
        if len(sides) != 2 or any(len(side) != 1 for side in sides):
            raise InputError(f"{ref!r}: a difference is of two references of one figure each")
        return [abs(sides[0][0] - sides[1][0])]
    words = ref.split()
    if not words:
        raise InputError("an empty reference")
    if "#" in words[0] and words[0].split("#")[0].endswith(".json"):
        return _json_value(src, words[0], words[1:])
    if words[0] in SOURCES:
        return SOURCES[words[0]](src, words[0], words[1:])
    if len(words) < 2:
        raise InputError(f"{ref!r}: give STUDY/CELL and what of it")
    kind = REFERENCES.get(words[1])
    if kind is not None:
        return kind(src, words[0], words[1:])
    return _cell_score(src, words[0], words[1:])


def _matches(figure: str, value: float) -> bool:
    digits = len(figure.split(".")[1])
    return f"{abs(value):.{digits}f}" == figure


def check_page(text: str, src: Source, page: str = "page") -> list[str]:
    """The errors of a page: each figure without a reference after it on its line, each reference that does not
    give the figures before it, each reference that names nothing."""
    errors: list[str] = []
    body = GENERATED.sub(_blank, _FENCE.sub(_blank, text))
    body = re.sub(r"<!--(?!\s*fig:).*?-->", _blank, body, flags=re.S)
    for n, line in enumerate(body.splitlines(), 1):
        start = 0
        for m in REF.finditer(line):
            segment = list(figures(line[start : m.start()]))
            start = m.end()
            refs = [r.strip() for r in m.group(1).split(";") if r.strip()]
            want: list[tuple[str, float]] = []
            for ref in refs:
                try:
                    want += [(ref, v) for v in resolve(src, ref)]
                except (ValueError, KeyError, IndexError, OSError) as e:
                    errors.append(f"{page}:{n}: reference {ref!r}: {e}")
                    want = []
                    break
            else:
                if len(want) != len(segment):
                    errors.append(
                        f"{page}:{n}: {len(segment)} figures ({', '.join(segment) or 'none'}) before a reference "
                        f"that gives {len(want)} ({'; '.join(refs)})"
                    )
                    continue
                for fig, (ref, value) in zip(segment, want, strict=True):
                    if not _matches(fig, value):
                        digits = len(fig.split(".")[1]) + 2
                        errors.append(f"{page}:{n}: {fig} is not what {ref!r} gives ({abs(value):.{digits}f})")
        for fig in figures(line[start:]):
            errors.append(f"{page}:{n}: {fig} has no reference (<!-- fig: ... --> after it on its line)")
    return errors


def check_figures(pages: Mapping[str, str], root: Path) -> list[str]:
    """The errors of every page ({name: text}), references read under `root`."""
    src = Source(root)
    return [e for name, text in pages.items() for e in check_page(text, src, name)]
