"""Oracle tests of the protocols: perfect features score 1.0, random ones score chance."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from sentkit.evaluation import protocols as P
from sentkit.evaluation.config import make_config

CFG = make_config("prototyping")


def _separable(n: int, c: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % c
    X = np.eye(c, dtype=np.float32)[y] * 4 + rng.normal(scale=0.05, size=(n, c)).astype(np.float32)
    return X, y


def _random(n: int, c: int, d: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)).astype(np.float32), rng.integers(0, c, n)


def test_inner_kfold_perfect_and_random():
    X, y = _separable(100, 2)
    assert P.inner_kfold(X, y, 2, CFG)["acc"] == 100.0
    Xr, yr = _random(300, 2)
    assert 35.0 <= P.inner_kfold(Xr, yr, 2, CFG)["acc"] <= 65.0


def test_kfold_then_test_perfect_and_random():
    X, y = _separable(90, 3)
    res = P.kfold_then_test(X[:60], y[:60], X[60:], y[60:], 3, CFG)
    assert res["acc"] == 100.0 and res["devacc"] == 100.0
    Xr, yr = _random(400, 2, seed=1)
    assert 35.0 <= P.kfold_then_test(Xr[:300], yr[:300], Xr[300:], yr[300:], 2, CFG)["acc"] <= 65.0


def test_split_classifier_perfect_and_random():
    X, y = _separable(120, 4)
    res = P.split_classifier(X[:80], y[:80], X[80:100], y[80:100], X[100:], y[100:], 4, CFG)
    assert res["acc"] == 100.0
    Xr, yr = _random(600, 4, seed=2)
    res = P.split_classifier(Xr[:400], yr[:400], Xr[400:500], yr[400:500], Xr[500:], yr[500:], 4, CFG)
    assert 10.0 <= res["acc"] <= 40.0  # chance 25


def test_mlp_classifier_perfect():
    cfg = make_config("prototyping", nhid=8)
    X, y = _separable(120, 3)
    res = P.split_classifier(X[:80], y[:80], X[80:100], y[80:100], X[100:], y[100:], 3, cfg)
    assert res["acc"] == 100.0


def test_sts_cosine_equal_to_gold_scores_spearman_one():
    rng = np.random.default_rng(0)
    subsets = {}
    for name, n in (("a", 30), ("b", 20)):
        gold = rng.uniform(0, 5, n)
        theta = np.arccos(gold / 5.0)
        u = np.tile([[1.0, 0.0]], (n, 1)).astype(np.float32)
        v = np.stack([np.cos(theta), np.sin(theta)], 1).astype(np.float32)
        subsets[name] = (u, v, gold)
    res = P.sts_scores(subsets)
    for name in ("a", "b"):
        assert res[name]["spearman"] == pytest.approx(1.0)
        assert res[name]["pearson"] == pytest.approx(1.0)
    assert res["all"]["spearman"]["mean"] == pytest.approx(1.0)
    assert res["all"]["concatenated"]["spearman"] == pytest.approx(1.0)


def test_sts_mean_wmean_and_concat_against_scipy():
    rng = np.random.default_rng(1)
    subsets = {
        k: (
            rng.normal(size=(n, 4)).astype(np.float32),
            rng.normal(size=(n, 4)).astype(np.float32),
            rng.uniform(0, 5, n),
        )
        for k, n in (("x", 40), ("y", 10))
    }
    res = P.sts_scores(subsets)
    sys = {k: P.cosine_rows(a, b) for k, (a, b, _) in subsets.items()}
    sp = {k: spearmanr(sys[k], subsets[k][2])[0] for k in subsets}
    assert res["all"]["spearman"]["mean"] == pytest.approx((sp["x"] + sp["y"]) / 2)
    assert res["all"]["spearman"]["wmean"] == pytest.approx((40 * sp["x"] + 10 * sp["y"]) / 50)
    cat = spearmanr(np.concatenate([sys["x"], sys["y"]]), np.concatenate([subsets["x"][2], subsets["y"][2]]))[0]
    assert res["all"]["concatenated"]["spearman"] == pytest.approx(cat)


def test_cosine_of_zero_vector_is_zero_like_senteval():
    a = np.zeros((2, 3), np.float32)
    b = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(P.cosine_rows(a, b), [0.0, 0.0])


def test_relatedness_learns_a_linear_score():
    rng = np.random.default_rng(0)
    n = 300
    score = rng.uniform(1, 5, n)
    F = np.stack([score, rng.normal(size=n)], 1).astype(np.float32)
    res = P.relatedness(F[:200], score[:200], F[200:250], score[200:250], F[250:], score[250:], CFG)
    assert res["spearman"] > 0.99 and res["pearson"] > 0.99
    assert res["ntest"] == 50 and res["ndev"] == 50


def test_relatedness_random_features_near_zero():
    rng = np.random.default_rng(3)
    n = 300
    score = rng.uniform(1, 5, n)
    F = rng.normal(size=(n, 4)).astype(np.float32)
    cfg = make_config("prototyping", relatedness_epochs=5, relatedness_max_epoch=20)
    res = P.relatedness(F[:200], score[:200], F[200:250], score[200:250], F[250:], score[250:], cfg)
    assert abs(res["spearman"]) < 0.35


def test_f1_binary_against_sklearn():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(0)
    y, p = rng.integers(0, 2, 50), rng.integers(0, 2, 50)
    assert P.f1_binary(y, p) == pytest.approx(f1_score(y, p))


def test_retrieval_ranks_perfect_embeddings():
    rng = np.random.default_rng(0)
    n_img = 6
    img = rng.normal(size=(n_img, 5))
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    img5 = np.repeat(img, 5, axis=0)
    i2t, t2i = P.retrieval_ranks(img5, img5)
    assert (i2t == 0).all() and (t2i == 0).all()


def test_pair_features():
    a = np.array([[1.0, 2.0]], np.float32)
    b = np.array([[3.0, -1.0]], np.float32)
    np.testing.assert_array_equal(P.pair_features(a, b), [[2.0, 3.0, 3.0, -2.0]])
    np.testing.assert_array_equal(P.pair_features(a, b, "snli"), [[1.0, 2.0, 3.0, -1.0, 3.0, -2.0, 2.0, 3.0]])
