"""No list of task names outside the task registry: a tuple, list or set literal in src/ that names three
or more registered tasks (by name, alias or `NAME-cos`) fails, except in the registry's own modules.
Cohorts, orders and averages are derived from the registry (`sentkit.evaluation.tasks.cohort`)."""

from __future__ import annotations

import ast
from pathlib import Path

from sentkit.evaluation.tasks import ALL_TASKS, get_task

SRC = Path(__file__).resolve().parents[2] / "src" / "sentkit"

REGISTRY = {
    "evaluation/tasks.py",  # the task registry
    "data/probing/files.py",  # the probing tasks' names and files, below evaluation/ (docs/architecture.md)
    # Hill et al. (2016)'s tables: the paper's own cohorts and column order, quoted, not the registry's
    "experiments/paper.py",
}


def _names() -> set[str]:
    return {*ALL_TASKS, *(f"{n}-cos" for n in ALL_TASKS), *(a for n in ALL_TASKS for a in get_task(n).aliases)}


def task_name_lists(path: Path, names: set[str]) -> list[tuple[int, list[str]]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            hits = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
            if len(hits) >= 3:
                found.append((node.lineno, hits))
    return found


def test_no_task_name_list_outside_the_registry() -> None:
    names = _names()
    bad = [
        f"{p.relative_to(SRC).as_posix()}:{line}: {', '.join(hits)}"
        for p in sorted(SRC.rglob("*.py"))
        if p.relative_to(SRC).as_posix() not in REGISTRY
        for line, hits in task_name_lists(p, names)
    ]
    assert not bad, "task names listed outside the registry (derive them from sentkit.evaluation.tasks):\n" + "\n".join(
        bad
    )


def test_the_check_finds_a_list(tmp_path: Path) -> None:
    p = tmp_path / "m.py"
    p.write_text(
        'COHORT = ("MR", "CR", "SUBJ")\nOK = ("MR", "avg:x")\nx = [t for t in ["STSB-cos", "SentLen", "WC"]]\n'
    )
    assert [line for line, _ in task_name_lists(p, _names())] == [1, 3]
