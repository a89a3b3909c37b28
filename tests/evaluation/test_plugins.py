"""Extension points: `TaskSpec` takes keywords only and checks its fields, a task joins DeCLUTR's averages
only when it says so, a kind of sentkit's own may be named before its runner is imported, and the plug-ins
of installed distributions (entry points `sentkit.methods`, `sentkit.tasks`, `sentkit.kinds`) are imported
when a name is listed or missed, a broken one being one warning that names its distribution. The plug-in
distributions here are ``*.dist-info`` folders on sys.path; tests/cli/test_architecture.py runs the page's
plug-in from the command line."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sentkit.core.methods import METHODS, PLUGINS, get_method, method_names
from sentkit.core.registry import UnknownNameError
from sentkit.evaluation import tasks as T
from sentkit.evaluation.report import declutr_average
from sentkit.evaluation.runner import RUNNERS, TaskKindRunner, register_kind
from sentkit.evaluation.tasks import TaskSpec, TaskSpecError, add_task, load_probing

REQUIRED: dict[str, Any] = {
    "name": "Toy",
    "kind": "sts",
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
    """Every registry and plug-in list as it was before the test (tests add tasks, kinds and methods)."""
    saved = (
        dict(T.TASKS._items),
        dict(T._ALIASES),
        list(T.DOWNSTREAM),
        list(T.PROBING),
        list(T.ALL_TASKS),
        set(T.KINDS),
        dict(T.KIND_SCORES),
        dict(RUNNERS._items),
        dict(METHODS),
    )
    plugins = (PLUGINS, T.TASK_PLUGINS, T.KIND_PLUGINS)
    for p in plugins:
        p.reset()
    yield
    for now, before in zip(
        (
            T.TASKS._items,
            T._ALIASES,
            T.DOWNSTREAM,
            T.PROBING,
            T.ALL_TASKS,
            T.KINDS,
            T.KIND_SCORES,
            RUNNERS._items,
            METHODS,
        ),
        saved,
    ):
        if isinstance(now, list):
            now[:] = before  # type: ignore[index]
        else:
            now.clear()
            now.update(before)  # type: ignore[attr-defined]
    for p in plugins:
        p.reset()


def install(site: Path, dist: str, version: str, entry_points: dict[str, dict[str, str]], **modules: str) -> None:
    """A distribution `dist` installed into `site` (on sys.path) without pip: its modules and a dist-info."""
    for name, code in modules.items():
        (site / f"{name}.py").write_text(code, encoding="utf-8")
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(
        "".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n" for g, eps in entry_points.items())
    )


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registries: None) -> Iterator[Path]:
    """A folder on sys.path for distributions; the modules a test imports from it are forgotten after."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    before = set(sys.modules)
    yield folder
    for name in set(sys.modules) - before:
        if name.startswith("plug_"):
            del sys.modules[name]


# ----------------------------------------------------------------------------- TaskSpec
def test_taskspec_takes_keywords_only_and_refuses_bad_fields_in_one_line() -> None:
    assert TaskSpec(**REQUIRED).name == "Toy"
    cases = [
        (lambda: TaskSpec(*REQUIRED.values()), "takes keywords only, got 9 positional"),  # type: ignore[misc]
        (lambda: TaskSpec(**REQUIRED, metrc="acc"), "unknown field 'metrc'. Did you mean 'metric'?"),  # type: ignore[call-arg]
        (lambda: TaskSpec(**{k: v for k, v in REQUIRED.items() if k != "licence"}), "missing field(s) licence"),  # type: ignore[call-arg]
        (lambda: TaskSpec(**{**REQUIRED, "files": "pairs.tsv"}), "files='pairs.tsv' is a str, not tuple[str, ...]"),
        (lambda: TaskSpec(**{**REQUIRED, "folder": ("TOY",)}), "folder=('TOY',) is a tuple, not str"),
        (lambda: TaskSpec(**REQUIRED, nhid=True), "nhid=True is a bool, not int | None"),
        (lambda: TaskSpec(**REQUIRED, group="extra"), "group='extra' is a str, not Literal"),  # type: ignore[arg-type]
        (lambda: TaskSpec(**{**REQUIRED, "loader": "load_probing"}), "loader='load_probing' is a str"),
        (
            lambda: TaskSpec(**REQUIRED, cohorts=("downstrem",)),
            "unknown cohort 'downstrem'. Did you mean 'downstream'?",
        ),
        (lambda: TaskSpec(**REQUIRED, cohorts=("downstream",)), "set in_declutr_average=True to join it"),
        (lambda: TaskSpec(**REQUIRED, group="user", in_declutr_average=True), "a user task is in no DeCLUTR average"),
    ]
    for make, message in cases:
        with pytest.raises(TaskSpecError) as e:
            make()
        assert message in str(e.value) and "\n" not in str(e.value)
        assert isinstance(e.value, TypeError) and e.value.exit_code == 2


def test_wordcontent_forces_logistic_regression_by_its_specs_field() -> None:
    assert {n: T.get_task(n).nhid for n in T.PROBING} == {n: (0 if n == "WC" else None) for n in T.PROBING}


# ----------------------------------------------------------------------------- DeCLUTR's averages
def test_the_declutr_averages_take_sentevals_tasks_and_a_new_one_only_when_it_says_so(registries: None) -> None:
    assert len(T.DOWNSTREAM) == 18 and len(T.PROBING) == 10  # DeCLUTR, section 4: "18 downstream [...] ten probing"
    assert all(T.get_task(n).in_declutr_average for n in T.ALL_TASKS)
    results = {"MR": {"acc": 80.0, "kind": "cv"}, "SOMO": {"acc": 60.0, "kind": "split"}}
    add_task(TaskSpec(**{**REQUIRED, "name": "NewSTS"}))
    add_task(TaskSpec(**{**REQUIRED, "name": "NewProbe", "kind": "split", "metric": "acc", "group": "probing"}))
    new = {
        "NewSTS": {"all": {"spearman": {"mean": 0.1}}, "kind": "sts"},
        "NewProbe": {"acc": 10.0, "kind": "split"},
    }
    avg = declutr_average({**results, **new})
    assert avg["per_task"]["NewSTS"] == pytest.approx(10.0) and avg["per_task"]["NewProbe"] == 10.0
    assert (avg["downstream"], avg["downstream_without_snli"], avg["probing"]) == (80.0, 80.0, 60.0)
    assert avg["n_downstream"] == 1 and "NewSTS" not in avg["missing_downstream"]
    assert "NewSTS" not in T.cohort("downstream") and "NewProbe" not in T.cohort("probing")
    assert "NewSTS" in T.cohort("cosine_sts")  # the kind's own cohorts are unchanged

    add_task(TaskSpec(**{**REQUIRED, "name": "Joins", "in_declutr_average": True}))
    avg = declutr_average({**results, "Joins": {"all": {"spearman": {"mean": 0.5}}, "kind": "sts"}})
    assert avg["downstream"] == pytest.approx(65.0) and avg["n_downstream"] == 2
    assert "Joins" in T.cohort("downstream_without_snli")


# ----------------------------------------------------------------------------- kinds
def test_a_kind_of_sentkits_own_is_named_before_its_runner_is_registered(registries: None) -> None:
    """tasks.py adds its tasks before runner.py is imported: a new kind is named in TaskKind (here: added
    to KINDS as TaskKind would), its task added, and only then its runner registered with @register_kind."""
    T.KINDS.add("votes")
    add_task(TaskSpec(**{**REQUIRED, "name": "Votes", "kind": "votes", "metric": "share"}))

    @register_kind
    class Votes(TaskKindRunner):
        kind = "votes"

        def run(self, data: Any, emb: Any, cfg: Any) -> dict[str, Any]:
            return {"share": 50.0}

        def score(self, res: dict[str, Any]) -> float | None:
            return float(res["share"])

    assert "votes" in RUNNERS and T.KIND_SCORES["votes"]({"share": 7}) == 7.0
    with pytest.raises(ValueError, match="already registered"):
        register_kind(Votes)


# ----------------------------------------------------------------------------- plug-ins
METHOD_PY = """
from sentkit.core.methods import Method

TOY = Method("plugtoy", dict, lambda cfg: None, lambda path: None, "a method of a plug-in")
"""

TASK_PY = """
from sentkit.evaluation.tasks import TaskSpec, load_probing

SPEC = TaskSpec(name="PlugTask", kind="plugkind", metric="acc", folder="PLUG", files=("x.txt",), splits="test",
                citation="", licence="", loader=load_probing, aliases=("plug-task",))
"""

KIND_PY = """
from sentkit.evaluation.runner import TaskKindRunner


class PlugKind(TaskKindRunner):
    kind = "plugkind"

    def run(self, data, emb, cfg):
        return {"acc": 1.0}

    def score(self, res):
        return res["acc"]
"""


def test_plugins_are_imported_when_a_name_is_missed_or_listed(site: Path) -> None:
    install(
        site,
        "sentkit-plug",
        "1.0",
        {
            "sentkit.methods": {"plugtoy": "plug_method:TOY"},
            "sentkit.tasks": {"PlugTask": "plug_task:SPEC"},
            "sentkit.kinds": {"plugkind": "plug_kind:PlugKind"},
        },
        plug_method=METHOD_PY,
        plug_task=TASK_PY,
        plug_kind=KIND_PY,
    )
    assert T.get_task("MR").name == "MR" and "plug_task" not in sys.modules  # a known name imports no plug-in
    assert "plugtoy" not in METHODS and "plug_method" not in sys.modules
    assert "plugtoy" in method_names() and METHODS["plugtoy"].description == "a method of a plug-in"
    assert get_method("plugtoy").name == "plugtoy"

    spec = T.get_task("plug_task")  # a missed name (by an alias, loosely): the task plug-ins, then its kind's
    assert spec.name == "PlugTask" and spec.kind == "plugkind" and "plugkind" in RUNNERS
    assert "PlugTask" in T.DOWNSTREAM and not spec.in_declutr_average
    assert T.KIND_SCORES["plugkind"]({"acc": 3}) == 3


def test_a_task_plugin_is_listed_by_tasks_all(site: Path, tmp_path: Path) -> None:
    install(
        site,
        "sentkit-plug",
        "1.0",
        {"sentkit.tasks": {"PlugTask": "plug_task:SPEC"}, "sentkit.kinds": {"plugkind": "plug_kind:PlugKind"}},
        plug_task=TASK_PY,
        plug_kind=KIND_PY,
    )
    data = tmp_path / "data"
    (data / "PLUG").mkdir(parents=True)
    (data / "PLUG" / "x.txt").write_text("te\ta\tsentence\n")
    assert T.expand_tasks("all", data) == ["PlugTask"]


def test_a_broken_plugin_is_one_warning_naming_its_distribution(site: Path, caplog: pytest.LogCaptureFixture) -> None:
    install(
        site,
        "sentkit-broken",
        "0.3",
        {
            "sentkit.methods": {
                "gone": "plug_missing:X",
                "notamethod": "plug_bad:NOT_A_METHOD",
                "declutr": "plug_bad:M",
            },
            "sentkit.tasks": {"Crash": "plug_crash", "Quiet": "plug_bad"},
            "sentkit.kinds": {"wrong": "plug_bad:NOT_A_METHOD"},
        },
        plug_bad=(
            'from sentkit.core.methods import Method\nNOT_A_METHOD = 3\nM = Method("declutr", dict, print, print)\n'
        ),
        plug_crash="raise RuntimeError('the plug-in is broken')\n",
    )
    with caplog.at_level(logging.WARNING, logger="sentkit.core.registry"):
        names = method_names()
        assert "declutr" in names and "gone" not in names and "notamethod" not in names
        assert METHODS["declutr"].target == "sentkit.training.recipes.declutr:Declutr"  # a taken name stays sentkit's
        with pytest.raises(UnknownNameError, match="unknown task 'Crash'"):
            T.get_task("Crash")
        add_task(TaskSpec(**REQUIRED))  # the kind plug-ins are imported only for a kind sentkit lacks
        with pytest.raises(ValueError, match="unknown kind 'wrong'"):
            add_task(TaskSpec(**{**REQUIRED, "name": "Wrong", "kind": "wrong"}))
        method_names(), T.get_task("MR")  # asked again: no second warning
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 6, lines
    assert all("of distribution sentkit-broken 0.3" in x and "fix or uninstall sentkit-broken" in x for x in lines)
    expect = {
        "method plug-in 'gone'": "ModuleNotFoundError: No module named 'plug_missing'",
        "method plug-in 'notamethod'": "is neither a Method nor a class with as_method",
        "method plug-in 'declutr'": "method 'declutr' is already registered",
        "task plug-in 'Crash'": "RuntimeError: the plug-in is broken",
        "task plug-in 'Quiet'": "added no task 'Quiet'",
        "task kind plug-in 'wrong'": "is not a TaskKindRunner subclass",
    }
    for head, why in expect.items():
        assert sum(head in x and why in x for x in lines) == 1, (head, lines)
