"""Poolings (sentkit.models.pooling): mean+max against sentence-transformers' own Pooling module on a saved
folder, first-last-avg against the model's hidden states averaged by hand and against sentence-transformers'
WeightedLayerPooling + Pooling, and the refusal to save a pooling sentence-transformers cannot load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from sentkit.core.config import ConfigError

TEXTS = ["The river runs past the old stone bridge.", "winter bread", "A much longer sentence about music and bread."]


def test_mean_max_equals_sentence_transformers_max_and_mean_flags(tiny_model_dir: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    import sentkit

    enc = sentkit.load(str(tiny_model_dir), pooling="mean+max")
    got = enc.encode(TEXTS)
    assert got.shape == (3, 2 * enc.model.config.hidden_size) and enc.dim == got.shape[1]
    out = tmp_path / "saved"
    enc.save(out)
    st = SentenceTransformer(str(out), device="cpu")  # the oracle: sentence-transformers' Pooling module
    np.testing.assert_allclose(st.encode(TEXTS), got, atol=1e-5)
    np.testing.assert_allclose(sentkit.load(str(out)).encode(TEXTS), got, atol=1e-6)  # reads its pooling back
    mean = sentkit.load(str(tiny_model_dir), pooling="mean").encode(TEXTS)
    np.testing.assert_allclose(got[:, enc.model.config.hidden_size :], mean, atol=1e-6)


def test_first_last_avg_is_the_mean_of_the_input_and_last_layers(tiny_model_dir: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    import sentkit

    enc = sentkit.load(str(tiny_model_dir), pooling="first-last-avg")
    got = enc.encode(TEXTS, batch_size=1)  # one text a batch: no padding in the oracle either
    for text, row in zip(TEXTS, got):
        ids = enc.tokenizer(text, return_tensors="pt")
        with torch.inference_mode():
            hs = enc.model(**ids, output_hidden_states=True).hidden_states
        want = ((hs[0] + hs[-1]) / 2)[0].mean(dim=0).numpy()
        np.testing.assert_allclose(row, want, atol=1e-5)
    padded = enc.encode(TEXTS, batch_size=8)  # padding is masked out
    np.testing.assert_allclose(padded, got, atol=1e-5)
    # saved: a WeightedLayerPooling module (weight 1 on the input layer and the last) before the mean Pooling
    out = tmp_path / "saved"
    enc.save(out)
    st = SentenceTransformer(str(out), device="cpu")
    assert [type(m).__name__ for m in st] == ["Transformer", "WeightedLayerPooling", "Pooling"]
    np.testing.assert_allclose(st.encode(TEXTS), got, atol=1e-5)
    again = sentkit.load(str(out))
    assert again.pooling == "first-last-avg"
    np.testing.assert_allclose(again.encode(TEXTS), got, atol=1e-6)


def test_a_pooling_without_a_sentence_transformers_module_is_not_saved(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sentkit
    from sentkit.models.pooling import POOLINGS, Pooling, mean_pool

    monkeypatch.setitem(POOLINGS._items, "odd", Pooling(mean_pool))  # no st_flags: nothing computes it there
    enc = sentkit.load(str(tiny_model_dir), pooling="odd")
    with pytest.raises(ConfigError, match="no sentence-transformers module"):
        enc.save(tmp_path / "nope")
    assert not (tmp_path / "nope").exists()
    from sentkit.training.recipes.declutr import DeclutrConfig

    with pytest.raises(ConfigError, match="cannot be saved with it"):
        DeclutrConfig(corpus="c", out="o", pooling="odd")
    assert DeclutrConfig(corpus="c", out="o", pooling="first-last-avg").pooling == "first-last-avg"


def test_declutr_trains_on_first_last_avg_and_saves_it(tiny_model_dir: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    """The contrastive objective reads the pooling the folder then holds: sentence-transformers loads the trained
    folder with the same vectors as sentkit."""
    from sentence_transformers import SentenceTransformer

    import sentkit
    from sentkit.cli.main import main

    out = tmp_path / "run"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "declutr",
                "--model",
                str(tiny_model_dir),
                "--corpus",
                str(tiny_corpus),
                "--out",
                str(out),
                "--max-steps",
                "2",
                "--set",
                "batch_size=4",
                "--set",
                "pooling=first-last-avg",
                "--set",
                "min_span_len=4",
                "--set",
                "max_span_len=16",
            ]
        )
        == 0
    )
    enc = sentkit.load(str(out))
    assert enc.pooling == "first-last-avg"
    np.testing.assert_allclose(SentenceTransformer(str(out), device="cpu").encode(TEXTS), enc.encode(TEXTS), atol=1e-5)
    before = sentkit.load(str(tiny_model_dir), pooling="first-last-avg").encode(TEXTS)
    assert not np.allclose(before, enc.encode(TEXTS), atol=1e-4)  # it trained
