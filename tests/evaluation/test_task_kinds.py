"""A task's kind: a misspelt kind of sentkit's is refused when the TaskSpec is built, an unknown kind when
the task is added (add_task; after the plug-in kinds are imported), both with the closest kind; a kind whose
runner registers after a task of it is built is accepted once registered."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sentkit.evaluation import tasks as T
from sentkit.evaluation.runner import RUNNERS, TaskKindRunner, register_kind
from sentkit.evaluation.tasks import TaskSpec, TaskSpecError, add_task, load_probing

FIELDS = {
    "name": "KindToy",
    "metric": "spearman",
    "folder": "TOY",
    "files": ("pairs.tsv",),
    "splits": "test",
    "citation": "you",
    "licence": "CC0",
    "loader": load_probing,
}


@pytest.fixture()
def registries() -> Iterator[None]:
    saved = (dict(T.TASKS._items), dict(T._ALIASES), list(T.DOWNSTREAM), list(T.ALL_TASKS), set(T.KINDS))
    saved_runners, saved_scores = dict(RUNNERS._items), dict(T.KIND_SCORES)
    yield
    T.TASKS._items.clear()
    T.TASKS._items.update(saved[0])
    T._ALIASES.clear()
    T._ALIASES.update(saved[1])
    T.DOWNSTREAM[:] = saved[2]
    T.ALL_TASKS[:] = saved[3]
    T.KINDS.clear()
    T.KINDS.update(saved[4])
    RUNNERS._items.clear()
    RUNNERS._items.update(saved_runners)
    T.KIND_SCORES.clear()
    T.KIND_SCORES.update(saved_scores)


@pytest.mark.parametrize(("kind", "meant"), [("STS", "sts"), ("k-fold", "kfold"), ("Relatedness", "relatedness")])
def test_a_misspelt_kind_is_refused_when_the_spec_is_built(kind: str, meant: str) -> None:
    with pytest.raises(TaskSpecError, match=f"unknown kind '{kind}'. Did you mean '{meant}'"):
        TaskSpec(**FIELDS, kind=kind)


@pytest.mark.parametrize("kind", ["", " sts", "sts "])
def test_a_kind_that_is_no_name_is_refused_when_the_spec_is_built(kind: str) -> None:
    with pytest.raises(TaskSpecError, match="is not a kind's name"):
        TaskSpec(**FIELDS, kind=kind)


def test_an_unknown_kind_is_refused_when_added_with_the_closest_kind(registries: None) -> None:
    spec = TaskSpec(**FIELDS, kind="relatednes")  # may still be a kind that registers later: built
    with pytest.raises(TaskSpecError, match=r"unknown kind 'relatednes'. Did you mean 'relatedness'\? Kinds: cv, "):
        add_task(spec)
    assert "KindToy" not in T.TASKS


def test_a_kind_registered_after_its_task_is_built_is_accepted(registries: None) -> None:
    spec = TaskSpec(**FIELDS, kind="late-kind")
    with pytest.raises(TaskSpecError, match="unknown kind 'late-kind'"):
        add_task(spec)

    @register_kind
    class Late(TaskKindRunner):
        kind = "late-kind"

        def run(self, data, emb, cfg):  # type: ignore[no-untyped-def]
            return {"spearman": 1.0}

        def score(self, res):  # type: ignore[no-untyped-def]
            return res["spearman"]

    assert add_task(spec) is spec and T.get_task("KindToy").kind == "late-kind"
