"""docs/architecture.md held to the code: every module says what it holds, the page's two rules hold,
its import arrows are exactly the real ones (and point up its table), and its examples, a toy method,
a toy task and a toy kind of task, work exactly as the page writes them (they are read from the page):
from Python, and from the command line through the entry points the page declares, in a distribution
installed for the test as a ``*.dist-info`` folder on PYTHONPATH."""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from sentkit.cli.main import main
from support import make_docs

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "sentkit"
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- the page's parts
def page_example(name: str) -> str:
    """The code block the page marks `<!-- example: NAME -->`, unindented."""
    m = re.search(rf"<!-- example: {re.escape(name)} -->\s*```\w+\n(.*?)\n\s*```", PAGE, re.S)
    assert m, f"docs/architecture.md has no example {name!r}"
    lines = m.group(1).split("\n")
    indent = min(len(x) - len(x.lstrip()) for x in lines if x.strip())
    return "\n".join(x[indent:] for x in lines) + "\n"


def page_shared() -> set[str]:
    m = re.search(r"<!-- shared -->(.*?)<!-- /shared -->", PAGE, re.S)
    assert m, "docs/architecture.md does not mark its shared modules"
    return set(re.findall(r"`([^`]+)`", m.group(1)))


def page_arrows() -> dict[str, list[str]]:
    """Room -> the rooms it imports, in the page's table order."""
    m = re.search(r"<!-- arrows -->(.*?)<!-- /arrows -->", PAGE, re.S)
    assert m, "docs/architecture.md does not mark its table of arrows"
    rows: dict[str, list[str]] = {}
    for line in m.group(1).strip().splitlines()[2:]:  # after the header and the |---| line
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        (room,) = re.findall(r"`([^`]+)`", cells[0])
        rows[room] = re.findall(r"`([^`]+)`", cells[1]) if len(cells) > 1 else []
    return rows


# ----------------------------------------------------------------------------- the real imports
def room_of_file(f: Path) -> str:
    rel = f.relative_to(SRC)
    if len(rel.parts) == 1:
        return rel.name
    if rel.parts[:2] == ("data", "probing"):
        return "data/probing/"
    return rel.parts[0] + "/"


def room_of_module(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "sentkit":
        return None
    if len(parts) == 1:
        return "__init__.py"
    if (SRC / parts[1]).is_dir():
        return "data/probing/" if parts[1:3] == ["data", "probing"] else parts[1] + "/"
    return parts[1] + ".py"


def imported_modules(f: Path) -> set[str]:
    """Every sentkit module `f` imports, at any depth (function-level imports included);
    `from sentkit import __version__` alone is left out (the version string is shared)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "sentkit" and [a.name for a in node.names] == ["__version__"]:
                continue
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m == "sentkit" or m.startswith("sentkit.")}


def real_arrows() -> dict[str, dict[str, set[str]]]:
    """Room -> imported room -> the files of the room that import it."""
    arrows: dict[str, dict[str, set[str]]] = {}
    for f in sorted(SRC.rglob("*.py")):
        src = room_of_file(f)
        arrows.setdefault(src, {})
        for module in imported_modules(f):
            dst = room_of_module(module)
            if dst is not None and dst != src:
                arrows[src].setdefault(dst, set()).add(str(f.relative_to(SRC)))
    return arrows


def test_the_pages_arrows_are_the_real_imports() -> None:
    shared, table, real = page_shared(), page_arrows(), real_arrows()
    assert shared and table, "docs/architecture.md lists no shared modules or no arrows"
    for room in shared:  # the shared modules import only each other
        bad = {dst: files for dst, files in real.get(room, {}).items() if dst not in shared}
        assert not bad, f"shared module {room} imports {bad}; docs/architecture.md says it imports only shared ones"
    missing = sorted(set(real) - shared - set(table))
    assert not missing, f"rooms absent from docs/architecture.md's table of arrows: {missing}"
    stale_rooms = sorted(set(table) - set(real))
    assert not stale_rooms, f"docs/architecture.md's table lists rooms that do not exist: {stale_rooms}"
    order = list(table)
    for room, shown in table.items():
        imports = {dst: files for dst, files in real[room].items() if dst not in shared}
        unshown = {dst: sorted(files) for dst, files in imports.items() if dst not in shown}
        assert not unshown, f"{room} imports {unshown}, an arrow docs/architecture.md does not show"
        stale = sorted(set(shown) - set(imports))
        assert not stale, f"docs/architecture.md shows {room} -> {stale}, but no module of {room} imports it"
        down = [dst for dst in shown if order.index(dst) >= order.index(room)]
        assert not down, f"{room} -> {down} points down docs/architecture.md's table (a cycle of rooms)"


def test_evaluation_depends_only_on_the_encoder_interface() -> None:
    """No import runs from the evaluation room into the Hill et al. models (or any training code)."""
    for f in sorted((SRC / "evaluation").rglob("*.py")):
        bad = {
            m for m in imported_modules(f) if m.startswith(("sentkit.hill", "sentkit.training", "sentkit.baselines"))
        }
        assert not bad, f"{f.relative_to(SRC)} imports {sorted(bad)}"


def test_data_room_takes_nothing_from_the_models_room() -> None:
    for f in sorted((SRC / "data").rglob("*.py")):
        bad = {m for m in imported_modules(f) if m.startswith("sentkit.models")}
        assert not bad, f"{f.relative_to(SRC)} imports {sorted(bad)}"


def test_every_room_says_what_it_holds() -> None:
    for init in sorted(SRC.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 40, f"{init.relative_to(SRC)} has no opening docstring"
    for f in sorted(SRC.rglob("*.py")):
        assert ast.get_docstring(ast.parse(f.read_text())), f"{f.relative_to(SRC)} has no opening docstring"


# ----------------------------------------------------------------------------- the page's examples
def import_page_module(code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Write `code` as a new module (in place of the file the page names) and import it."""
    name = f"page_example_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, name, importlib.import_module(name))
    return name


def test_a_method_added_as_the_page_says_trains_and_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sentkit
    from sentkit.core.methods import METHODS, MethodEntry, register_method

    module = import_page_module(page_example("toy-method"), tmp_path, monkeypatch)
    # the page's line of METHODS, pointed at the temporary module instead of src/sentkit/hill/toy.py
    ((name, entry),) = eval("{" + page_example("toy-method-entry") + "}", {"MethodEntry": MethodEntry}).items()
    assert isinstance(entry.target, str) and entry.target.startswith("sentkit.hill.toy:")
    monkeypatch.setitem(METHODS, name, MethodEntry(entry.target.replace("sentkit.hill.toy", module), entry.description))

    capsys.readouterr()
    assert main(["train", "--list-methods"]) == 0
    assert f"{name:24s} {entry.description}" in capsys.readouterr().out.splitlines()
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, doc in enumerate(make_docs(4, 80)):
        (corpus / f"{i}.txt").write_text(doc + "\n")
    out = tmp_path / "toy"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                name,
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                "--set",
                "dim=6",
                "--set",
                "progress=false",
            ]
        )
        == 0
    )
    assert json.loads((out / "sentkit.json").read_text())["method"] == name
    enc = sentkit.load(str(out))
    # oracle: the mean of the saved vectors of the sentence's words (an unknown word is skipped)
    vectors, words = np.load(out / "vectors.npy"), json.loads((out / "state.json").read_text())["words"]
    assert vectors.shape == (len(words), 6)
    expect = vectors[[words.index("river"), words.index("stone")]].mean(0)
    np.testing.assert_allclose(enc.encode(["River stone zzqx"])[0], expect, rtol=1e-6)
    with pytest.raises(ValueError, match="already registered"):
        register_method(name, entry.target, entry.description)


LETTERS_PY = '''
import numpy as np

class Letters:
    """Counts of a..z: a 26-d bag of letters."""

    def encode(self, texts, batch_size=32, **kw):
        out = np.zeros((len(texts), 26), np.float32)
        for i, t in enumerate(texts):
            for c in t.lower():
                if "a" <= c <= "z":
                    out[i, ord(c) - 97] += 1
        return out
'''


def test_a_task_added_as_the_page_says_is_evaluated_under_tasks_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, task_registry
) -> None:  # type: ignore[no-untyped-def]
    import_page_module(page_example("toy-task"), tmp_path, monkeypatch)
    data = tmp_path / "data"
    (data / "TOYSTS").mkdir(parents=True)
    rng = np.random.default_rng(0)
    words = ["river", "stone", "bread", "winter", "ocean", "harbour", "market", "soldier"]
    pairs = [
        (" ".join(rng.choice(words, 3)), " ".join(rng.choice(words, 3)), float(rng.uniform(0, 5))) for _ in range(20)
    ]
    (data / "TOYSTS" / "pairs.tsv").write_text("".join(f"{y:.2f}\t{a}\t{b}\n" for a, b, y in pairs), encoding="utf-8")
    assert task_registry.expand_tasks("all", data) == ["ToySTS"]  # the only task whose files are there
    assert task_registry.expand_tasks("downstream", data) == ["ToySTS"]

    (tmp_path / "letters.py").write_text(LETTERS_PY)
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                f"{tmp_path / 'letters.py'}:Letters",
                "--tasks",
                "all",
                "--data-dir",
                str(data),
                "--output",
                str(out),
                "--cache-dir",
                str(tmp_path / "cache"),
            ]
        )
        == 0
    )
    res = json.loads(out.read_text())["results"]
    assert list(res) == ["ToySTS"]
    # oracle: Spearman's rho of the cosines of the letter counts against the gold scores
    exec(LETTERS_PY, ns := {})
    enc = ns["Letters"]()
    a, b = enc.encode([p[0] for p in pairs]), enc.encode([p[1] for p in pairs])
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    gold = [float(f"{p[2]:.2f}") for p in pairs]
    assert res["ToySTS"]["test"]["spearman"] == pytest.approx(spearmanr(cos, gold)[0], abs=1e-9)


def toy_pairs_task() -> str:
    """The page's toy task made a task of the toy kind, as the page says (``pairs.py`` of its plug-in)."""
    old = 'name="ToySTS", kind="sts", metric="spearman", folder="TOYSTS"'
    assert old in page_example("toy-task"), "the page's toy task no longer names its fields as this test reads them"
    return page_example("toy-task").replace(old, 'name="ToyPairs", kind="pair-auc", metric="auc", folder="TOYPAIRS"')


@pytest.fixture()
def kind_registry(task_registry):  # type: ignore[no-untyped-def]
    """The task kinds and their runners as they were before the test (the example adds a kind)."""
    from sentkit.evaluation.runner import RUNNERS

    saved = dict(RUNNERS._items), set(task_registry.KINDS), dict(task_registry.KIND_SCORES)
    yield task_registry
    RUNNERS._items.clear()
    RUNNERS._items.update(saved[0])
    task_registry.KINDS.clear()
    task_registry.KINDS.update(saved[1])
    task_registry.KIND_SCORES.clear()
    task_registry.KIND_SCORES.update(saved[2])


def test_a_task_kind_added_as_the_page_says_is_evaluated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind_registry
) -> None:  # type: ignore[no-untyped-def]
    from sklearn.metrics import roc_auc_score

    T = kind_registry
    import_page_module(page_example("toy-kind"), tmp_path, monkeypatch)
    assert "pair-auc" in T.KINDS
    # a task of the new kind, with the toy task's loader shape (score<TAB>a<TAB>b), as the page says
    import_page_module(toy_pairs_task(), tmp_path, monkeypatch)
    data = tmp_path / "data"
    (data / "TOYPAIRS").mkdir(parents=True)
    rng = np.random.default_rng(1)
    words = ["river", "stone", "bread", "winter", "ocean", "harbour", "market", "soldier"]
    pairs = []
    for i in range(30):
        a = " ".join(rng.choice(words, 3))
        b = a if i % 2 else " ".join(rng.choice(words, 3))
        pairs.append((a, b, i % 2))
    (data / "TOYPAIRS" / "pairs.tsv").write_text("".join(f"{y}\t{a}\t{b}\n" for a, b, y in pairs), encoding="utf-8")
    (tmp_path / "letters.py").write_text(LETTERS_PY)
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                f"{tmp_path / 'letters.py'}:Letters",
                "--tasks",
                "ToyPairs",
                "--data-dir",
                str(data),
                "--output",
                str(out),
                "--cache-dir",
                str(tmp_path / "cache"),
            ]
        )
        == 0
    )
    res = json.loads(out.read_text())["results"]["ToyPairs"]
    exec(LETTERS_PY, ns := {})
    enc = ns["Letters"]()
    a, b = enc.encode([p[0] for p in pairs]), enc.encode([p[1] for p in pairs])
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-12)
    assert res["kind"] == "pair-auc" and res["npairs"] == 30
    assert res["auc"] == pytest.approx(100 * roc_auc_score([p[2] for p in pairs], cos), abs=1e-9)


def test_the_tests_mirror_the_rooms() -> None:
    """tests/<room>/ for each room of src/sentkit (tests/data/probing/ for data/probing/), tests/test_*.py
    for the shared modules at the root, tests/support/ for what the tests share; no other folder holds tests."""
    tests = ROOT / "tests"
    rooms = {p.relative_to(SRC) for p in SRC.rglob("*") if p.is_dir() and (p / "__init__.py").is_file()}
    with_tests = {p.parent.relative_to(tests) for p in tests.rglob("test_*.py")} - {Path(".")}
    stray = sorted(str(d) for d in with_tests if d not in rooms)
    assert rooms >= {Path("data"), Path("evaluation"), Path("cli")} and with_tests, (rooms, with_tests)
    assert not stray, f"test folders that are no room of src/sentkit: {stray} (docs/architecture.md)"


# ----------------------------------------------------------------------------- the page's plug-in
def install_page_plugin(site: Path, broken: bool = False) -> None:
    """The page's plug-in `sentkit_toy` installed into `site` without pip: its modules (the page's
    examples) and a ``*.dist-info`` whose ``entry_points.txt`` holds the page's pyproject.toml entry
    points; `broken`: also a distribution whose two entry points fail to load."""
    pkg = site / "sentkit_toy"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""The plug-in of docs/architecture.md."""\n')
    modules = {
        "method": page_example("toy-method"),
        "kind": page_example("toy-kind"),
        "tasks": page_example("toy-task"),
        "pairs": toy_pairs_task(),
    }
    for name, code in modules.items():
        (pkg / f"{name}.py").write_text(code, encoding="utf-8")
    groups = tomllib.loads(page_example("entry-points"))["project"]["entry-points"]
    assert set(groups) == {"sentkit.methods", "sentkit.tasks", "sentkit.kinds"}, groups
    dists = {"sentkit_toy-0.1": ("sentkit-toy", "0.1", groups)}
    if broken:
        bad = {"sentkit.methods": {"ghost": "sentkit_ghost.nowhere:Ghost"}, "sentkit.tasks": {"Ghost": "sentkit_ghost"}}
        dists["sentkit_ghost-0.2"] = ("sentkit-ghost", "0.2", bad)
    for folder, (name, version, eps) in dists.items():
        info = site / f"{folder}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        text = "".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in e.items()) + "\n" for g, e in eps.items())
        (info / "entry_points.txt").write_text(text)


def sentkit_cli(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`sentkit ARGS` in a fresh process that has `site` on its path (as if the plug-in were installed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    env.pop("SENTKIT_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "sentkit.cli.main", *args], env=env, capture_output=True, text=True, timeout=300
    )


def test_the_pages_plugin_trains_and_is_evaluated_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    install_page_plugin(site, broken=True)

    listed = sentkit_cli(site, "train", "--list-methods")
    assert listed.returncode == 0, listed.stderr
    assert any(
        re.fullmatch(r"toy\s+Toy: mean of random word vectors \(an example\)\.", x) for x in listed.stdout.splitlines()
    )
    assert "declutr" in listed.stdout and "ghost" not in listed.stdout
    # the broken distribution: one warning naming it, and nothing else stops
    (warning,) = [x for x in listed.stderr.splitlines() if "sentkit-ghost" in x]
    assert "method plug-in 'ghost'" in warning and "sentkit-ghost 0.2" in warning and "ModuleNotFoundError" in warning

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, doc in enumerate(make_docs(4, 80)):
        (corpus / f"{i}.txt").write_text(doc + "\n")
    out = tmp_path / "toy"
    trained = sentkit_cli(
        site, "-q", "train", "--method", "toy", "--corpus", str(corpus), "--out", str(out), "--set", "dim=6",
        "--set", "progress=false",
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    assert json.loads((out / "sentkit.json").read_text())["method"] == "toy"

    # data for both plug-in tasks, of words the toy model knows
    words = json.loads((out / "state.json").read_text())["words"][:8]
    rng = np.random.default_rng(2)
    sts = [(" ".join(rng.choice(words, 3)), " ".join(rng.choice(words, 3)), round(float(rng.uniform(0, 5)), 2))
           for _ in range(20)]  # fmt: skip
    pairs = []
    for i in range(30):
        a = " ".join(rng.choice(words, 3))
        pairs.append((a, a if i % 2 else " ".join(rng.choice(words, 3)), i % 2))
    data = tmp_path / "data"
    for folder, rows in (("TOYSTS", sts), ("TOYPAIRS", pairs)):
        (data / folder).mkdir(parents=True)
        (data / folder / "pairs.tsv").write_text("".join(f"{y}\t{a}\t{b}\n" for a, b, y in rows), encoding="utf-8")
    report = tmp_path / "r.json"
    evaluated = sentkit_cli(
        site, "-q", "evaluate", "--model", str(out), "--tasks", "all", "--data-dir", str(data), "--output",
        str(report), "--cache-dir", str(tmp_path / "cache"),
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    run = json.loads(report.read_text())
    res = run["results"]
    assert sorted(res) == ["ToyPairs", "ToySTS"] and not run["errors"]
    assert res["ToyPairs"]["kind"] == "pair-auc" and res["ToySTS"]["kind"] == "sts"
    # a new task is reported, not averaged: neither joins DeCLUTR's averages
    avg = run["declutr_average"]
    assert avg["n_downstream"] == 0 and avg["downstream"] is None and set(avg["per_task"]) == {"ToyPairs", "ToySTS"}

    # oracles: the toy model's own vectors, loaded here through the page's module
    from sklearn.metrics import roc_auc_score

    toy = importlib.import_module(import_page_module(page_example("toy-method"), tmp_path, monkeypatch))
    enc = toy.Toy.load(out)

    def cosines(rows: list[tuple[str, str, float]]) -> np.ndarray:
        a, b = enc.encode([r[0] for r in rows]), enc.encode([r[1] for r in rows])
        return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-12)

    assert res["ToySTS"]["test"]["spearman"] == pytest.approx(spearmanr(cosines(sts), [r[2] for r in sts])[0], abs=1e-6)
    assert res["ToyPairs"]["auc"] == pytest.approx(100 * roc_auc_score([r[2] for r in pairs], cosines(pairs)), abs=1e-4)

    unknown = sentkit_cli(site, "-q", "evaluate", "--model", str(out), "--tasks", "ToyPair", "--data-dir", str(data))
    assert unknown.returncode == 2 and "Did you mean 'ToyPairs'?" in unknown.stderr, unknown.stderr
