from __future__ import annotations

import numpy as np
import pytest

from sentkit.core.config import ConfigError
from sentkit.data.sentences import TokenizedCorpus, Vocabulary
from sentkit.hill.configs import FastSentConfig
from sentkit.hill.fastsent import (
    FastSent,
    FastSentAE,
    _train_fastsent,
    keep_probabilities,
    negative_table,
)

from .conftest import neighbour_beats_random, topic_separation

KW = dict(min_count=1, dim=32, epochs=8, alpha=0.05, progress=False)


@pytest.fixture(scope="module")
def trained(corpus: TokenizedCorpus) -> FastSent:
    return FastSent(**KW).fit(corpus)  # type: ignore[arg-type]


def test_shapes_and_sum(trained: FastSent, corpus: TokenizedCorpus) -> None:
    e = trained.encode(["Ship waves ocean.", "", "unknownword"])
    assert e.shape == (3, 32) and e.dtype == np.float32
    assert not e[1].any() and not e[2].any()
    v = trained.vocab_.index_
    assert "." not in v  # punctuation=False by default for FastSent
    manual = sum(trained.source_[v[w]] for w in ["ship", "waves", "ocean"])
    np.testing.assert_allclose(e[0], manual, rtol=1e-5)


def test_learns_neighbours(trained: FastSent, corpus: TokenizedCorpus) -> None:
    emb = trained.encode(corpus.texts())
    untrained = FastSent(**{**KW, "epochs": 1, "alpha": 1e-9, "min_alpha": 0.0}).fit(corpus)  # type: ignore[arg-type]
    # bag-of-words overlap alone puts a sentence near its neighbour 84% of the time
    assert neighbour_beats_random(untrained.encode(corpus.texts()), corpus) < 0.9
    assert neighbour_beats_random(emb, corpus) > 0.97
    # words of one topic got similar source vectors
    assert topic_separation(untrained.source_, trained.vocab_.index_) < 0.1
    assert topic_separation(trained.source_, trained.vocab_.index_) > 0.3


def test_deterministic_and_seed_matters(corpus: TokenizedCorpus, trained: FastSent) -> None:
    again = FastSent(**KW).fit(corpus)  # type: ignore[arg-type]
    np.testing.assert_array_equal(again.source_, trained.source_)
    other = FastSent(**KW, seed=1).fit(corpus)  # type: ignore[arg-type]
    assert not np.array_equal(other.source_, trained.source_)


def test_save_load_roundtrip(trained: FastSent, tmp_path) -> None:  # type: ignore[no-untyped-def]
    trained.save(tmp_path / "m")
    import sentkit

    loaded = sentkit.load(str(tmp_path / "m"))
    texts = ["Cow farmer barn.", "Soldier army."]
    np.testing.assert_array_equal(loaded.encode(texts), trained.encode(texts))
    assert isinstance(loaded, FastSent) and loaded.config == trained.config
    fp = loaded.fingerprint()  # type: ignore[attr-defined]
    assert fp is not None and fp == trained.fingerprint()
    assert FastSent(**KW).fingerprint() is None  # not saved: no cache key


def test_autoencode_variant(corpus: TokenizedCorpus) -> None:
    ae = FastSentAE(**KW).fit(corpus)  # type: ignore[arg-type]
    assert ae.config.autoencode and ae.method == "fastsent-ae"
    assert neighbour_beats_random(ae.encode(corpus.texts()), corpus) > 0.97
    assert topic_separation(ae.source_, ae.vocab_.index_) > 0.3


@pytest.mark.filterwarnings("ignore:overflow encountered")  # the LCG wraps on purpose
@pytest.mark.parametrize(("mean", "stable"), [(False, True), (False, False), (True, True)])
def test_compiled_kernel_matches_python_loop(corpus: TokenizedCorpus, mean: bool, stable: bool) -> None:
    """numba's compiled kernel and the same code run as plain Python agree."""
    py = getattr(_train_fastsent, "py_func", None)
    if py is None:
        pytest.skip("numba not installed: the kernel already is the Python loop")
    vocab = Vocabulary().fit(corpus)
    tok, off = corpus.encode_with(vocab)
    rng = np.random.default_rng(0)
    w0 = ((rng.random((len(vocab), 8)) - 0.5) / 8).astype(np.float32)
    table = negative_table(vocab.counts_, size=1000)
    keep = keep_probabilities(vocab.counts_, 1e-2)
    outs = []
    for fn in (_train_fastsent, py):
        w_in, w_out = w0.copy(), np.zeros_like(w0)
        r, n = fn(
            tok,
            off,
            corpus.doc_ids,
            w_in,
            w_out,
            table,
            keep,
            0,
            40,
            True,
            mean,
            3,
            0.05,
            0.0001,
            0,
            int(off[40]),
            np.uint64(12345),
            stable,
        )
        outs.append((w_in, w_out, int(r), int(n)))
    np.testing.assert_allclose(outs[0][0], outs[1][0], atol=1e-5)
    np.testing.assert_allclose(outs[0][1], outs[1][1], atol=1e-5)
    assert outs[0][2:] == outs[1][2:]


def test_negative_table_follows_unigram_power() -> None:
    counts = np.array([1, 10, 100, 1000])
    table = negative_table(counts, size=100_000)
    freq = np.bincount(table, minlength=4) / table.size
    expected = counts**0.75 / (counts**0.75).sum()
    np.testing.assert_allclose(freq, expected, atol=1e-4)


def test_keep_probabilities() -> None:
    counts = np.array([1000, 10, 1])
    assert keep_probabilities(counts, 0.0).tolist() == [1.0, 1.0, 1.0]
    p = keep_probabilities(counts, 1e-3)
    assert p[0] < p[1] <= 1.0 and p[2] == 1.0


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="dim"):
        FastSentConfig(dim=0)
    with pytest.raises(ConfigError, match="min_alpha"):
        FastSentConfig(min_alpha=1.0)


def test_not_fitted_error() -> None:
    with pytest.raises(RuntimeError, match="fit"):
        FastSent().encode(["x"])


def _zipf_corpus_with_long_run(seed: int = 0) -> TokenizedCorpus:
    """3,000 ordinary sentences around a run of eight 3,000-word ones, as Molly Bloom's soliloquy
    in Gutenberg's Ulysses, which made Hill et al.'s update diverge on the full corpus."""
    from sentkit.data.sentences import read_corpus

    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(1000)]
    p = 1.0 / np.arange(1, 1001)
    p /= p.sum()

    def sentence(n: int) -> str:
        return " ".join(words[j] for j in rng.choice(1000, size=n, p=p)).capitalize() + "."

    docs = [" ".join(sentence(int(rng.integers(10, 20))) for _ in range(30)) for _ in range(100)]
    docs.insert(50, " ".join(sentence(3000) for _ in range(8)))
    return read_corpus(docs, progress=False)


@pytest.mark.parametrize("average", [False, True])
def test_stable_update_keeps_norms_bounded(average: bool) -> None:
    corpus = _zipf_corpus_with_long_run()
    kw = dict(min_count=1, dim=32, epochs=3, alpha=0.025, average=average, progress=False)
    hill = FastSent(**kw, stable=False).fit(corpus)  # type: ignore[arg-type]
    stable = FastSent(**kw).fit(corpus)  # type: ignore[arg-type]
    assert stable.config.stable  # the default
    # Hill et al.'s exact update explodes on long consecutive sentences...
    assert np.linalg.norm(hill.source_, axis=1).max() > 1e3
    # ...the size-scaled one does not (start norms ~0.1; word2vec-like vectors stay within ~10)
    assert np.linalg.norm(stable.source_, axis=1).max() < 20
    assert np.linalg.norm(stable.target_, axis=1).max() < 20
    assert np.isfinite(stable.encode(corpus.texts()[:100])).all()
