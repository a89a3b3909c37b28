"""The rawtext study measures the recipe users run: its recipe cells hold exactly the settings
`sentkit train --method raw-text` derives from its defaults (only paths, logging and the shared
prepared folders differ)."""

from __future__ import annotations

from pathlib import Path

from sentkit.experiments.grid import load_experiment
from sentkit.training.raw_text import PHASES, RawTextConfig

ROOT = Path(__file__).resolve().parents[2]
# what a cell may set differently: where things go and how often it logs
PLACES = {"out", "corpus", "seed", "progress", "prepared_dir", "log_every", "model", "init_embeddings"}


def _cells() -> dict[str, dict]:
    spec = load_experiment(ROOT / "experiments" / "rawtext.toml")
    return {c.name: c for c in spec.cells}


def _strip(settings: dict) -> dict:
    return {k: v for k, v in settings.items() if k not in PLACES}


def test_recipe_cells_are_the_recipe_defaults(tmp_path: Path) -> None:
    cells = _cells()
    phases = {folder: (method, settings) for folder, method, settings in
              RawTextConfig(corpus="c", out=str(tmp_path)).phases(tmp_path)}
    for cell, folder in (("wp-skipgram", PHASES[0]), ("recipe-base", PHASES[1]), ("recipe", PHASES[2])):
        method, settings = phases[folder]
        assert cells[cell].method == method, cell
        assert _strip(cells[cell].settings) == _strip(settings), cell
    # the chain: the base starts from the cell's vectors, DeCLUTR continues that base
    assert cells["recipe-base"].settings["init_embeddings"] == "@wp-skipgram"
    assert cells["recipe"].settings["model"] == "@recipe-base"
    assert phases[PHASES[1]][1]["init_embeddings"].endswith(PHASES[0])
    assert len(load_experiment(ROOT / "experiments" / "rawtext.toml").cell_seeds(cells["recipe"])) == 3


def test_a_changed_default_breaks_the_match(tmp_path: Path) -> None:
    """The comparison above can fail: a recipe with another learning rate no longer matches its cell."""
    other = {f: s for f, _, s in RawTextConfig(corpus="c", out=str(tmp_path), lr=1e-5).phases(tmp_path)}
    assert _strip(_cells()["recipe"].settings) != _strip(other[PHASES[2]])
