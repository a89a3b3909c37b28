"""experiments/smaller.toml (issue 55 item 4): its training cells are valid configs of their methods, every cut cell
scores a model at a width its Matryoshka twin was trained for, and a `pretrained` cell's `dim` and `quantize` reach the
loaded encoder: its vectors are the first N coordinates of the full ones, or their signs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sentkit.core.config import from_dict
from sentkit.core.methods import get_method
from sentkit.experiments import load_experiment
from sentkit.experiments.kinds import AsIs

GRID = Path(__file__).parents[2] / "experiments" / "smaller.toml"


def test_the_grid_declares_valid_cells() -> None:
    spec = load_experiment(GRID)
    trained = [c for c in spec.cells if c.kind.trains and c.method != "glove-average"]
    for c in trained:
        from_dict(get_method(c.method).config_cls, {"corpus": "c", "out": "o", **c.settings}, where=c.name)
    widths = {d for c in trained for d in c.settings.get("matryoshka_dims", [])}
    assert widths == {128, 64, 32, 16}
    for c in spec.cells:  # a transformer is cut only at a width its Matryoshka twin was trained for
        if "dim" in c.settings and "glove" not in c.name:
            assert c.settings["dim"] in widths, c.name


def test_a_pretrained_cell_cuts_the_vectors(tiny_model_dir: Path) -> None:
    texts = ["a river in winter", "the captain's letter arrived"]
    full = AsIs.load({"model": str(tiny_model_dir)}).encode(texts)
    cut = AsIs.load({"model": str(tiny_model_dir), "dim": 16}).encode(texts)
    assert full.shape == (2, 32) and cut.shape == (2, 16)
    np.testing.assert_allclose(cut, full[:, :16], atol=1e-6)


def test_a_pretrained_cell_quantizes_the_cut_vectors(tiny_model_dir: Path) -> None:
    """`quantize = "binary"` with `dim`: the signs (+1 / -1) of the first N coordinates."""
    texts = ["a river in winter", "the captain's letter arrived"]
    full = AsIs.load({"model": str(tiny_model_dir)}).encode(texts)
    bits = AsIs.load({"model": str(tiny_model_dir), "dim": 16, "quantize": "binary"}).encode(texts)
    np.testing.assert_array_equal(bits, np.where(full[:, :16] > 0, 1.0, -1.0))
