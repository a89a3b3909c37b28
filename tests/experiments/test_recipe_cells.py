"""The studies measure the recipe users run.

The budget study's candidate cell (`recipe-w512-cv`, the raw-text method end to end at width 512 on the books'
vocabulary) holds exactly `sentkit train --method raw-text`'s defaults; the rawtext study's three chained cells
(phase 0, 1 and 2 as separate cells, from issue 17) hold the phases that recipe derives with the pooling it had
then (mean), which is the budget study's `recipe-v1` (only paths, logging and the shared prepared folders differ)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from sentkit.experiments.grid import load_experiment
from sentkit.training.raw_text import PHASES, RawTextConfig
from sentkit.training.recipes.declutr import DeclutrConfig

ROOT = Path(__file__).resolve().parents[2]
# what a cell may set differently: where things go and how often it logs
PLACES = {"out", "corpus", "seed", "progress", "prepared_dir", "log_every", "model", "init_embeddings"}
CANDIDATE = "recipe-w512-cv"  # the budget study's cell that is the recipe as shipped


def _cells(study: str) -> dict[str, dict]:
    spec = load_experiment(ROOT / "experiments" / f"{study}.toml")
    return {c.name: c for c in spec.cells}


def _strip(settings: dict) -> dict:
    return {k: v for k, v in settings.items() if k not in PLACES}


def _fields(cfg: RawTextConfig) -> dict:
    return {k: v for k, v in dataclasses.asdict(cfg).items() if k not in PLACES}


def test_the_budget_candidate_is_the_raw_text_defaults(tmp_path: Path) -> None:
    cell = _cells("budget")[CANDIDATE]
    assert cell.method == "raw-text"
    assert _fields(RawTextConfig(corpus="c", out=str(tmp_path), **cell.settings)) == _fields(
        RawTextConfig(corpus="c", out=str(tmp_path))
    )
    assert len(load_experiment(ROOT / "experiments" / "budget.toml").cell_seeds(cell)) == 3


def test_the_rawtext_chain_is_recipe_v1(tmp_path: Path) -> None:
    cells = _cells("rawtext")
    v1 = _cells("budget")["recipe-v1"].settings
    # recipe-v1 ran before the recipe had a pooling setting: phase 2 pooled with DeCLUTR's default, mean
    phases = {
        folder: (method, settings)
        for folder, method, settings in RawTextConfig(
            corpus="c", out=str(tmp_path), **{"pooling": "mean", **v1}
        ).phases(tmp_path)
    }
    mean = DeclutrConfig.__dataclass_fields__["pooling"].default
    assert mean == "mean"
    for cell, folder in (("wp-skipgram", PHASES[0]), ("recipe-base", PHASES[1]), ("recipe", PHASES[2])):
        method, settings = phases[folder]
        assert cells[cell].method == method, cell
        declared = {"pooling": mean, **cells[cell].settings} if method == "declutr" else cells[cell].settings
        assert _strip(declared) == _strip(settings), cell
    # the chain: the base starts from the cell's vectors, DeCLUTR continues that base
    assert cells["recipe-base"].settings["init_embeddings"] == "@wp-skipgram"
    assert cells["recipe"].settings["model"] == "@recipe-base"
    assert phases[PHASES[1]][1]["init_embeddings"].endswith(PHASES[0])
    assert len(load_experiment(ROOT / "experiments" / "rawtext.toml").cell_seeds(cells["recipe"])) == 3


def test_a_changed_setting_breaks_the_match(tmp_path: Path) -> None:
    """The comparisons above can fail: another learning rate no longer matches either."""
    cell = _cells("budget")[CANDIDATE]
    assert _fields(RawTextConfig(corpus="c", out=str(tmp_path), **cell.settings)) != _fields(
        RawTextConfig(corpus="c", out=str(tmp_path), lr=1e-5)
    )
    other = {f: s for f, _, s in RawTextConfig(corpus="c", out=str(tmp_path), lr=1e-5).phases(tmp_path)}
    assert _strip(_cells("rawtext")["recipe"].settings) != _strip(other[PHASES[2]])


def test_every_committed_raw_text_run_is_its_cell_as_declared_today(tmp_path: Path) -> None:
    """A default that changes (the width did) must not change what a committed cell means: each raw-text cell's
    declared settings, resolved by today's RawTextConfig, give every setting its committed run recorded."""
    bookkeeping = PLACES | {"resume", "overwrite"}
    checked = 0
    for study in ("budget", "rawtext"):
        spec = load_experiment(ROOT / "experiments" / f"{study}.toml")
        assert spec.results is not None, study
        for cell in (c for c in spec.cells if c.method == "raw-text"):
            today = dataclasses.asdict(RawTextConfig(corpus="c", out=str(tmp_path), **cell.settings))
            for path in sorted((ROOT / spec.results / cell.name).glob("seed-*.json")):
                recorded = json.loads(path.read_text())["experiment"]["recipe"]["config"]
                differ = {
                    k: (v, today.get(k)) for k, v in recorded.items() if k not in bookkeeping and today.get(k) != v
                }
                assert not differ, f"{path}: recorded -> today {differ}"
                checked += 1
    assert checked >= 10  # the 256- and 512-wide cells, 3 seeds of most
