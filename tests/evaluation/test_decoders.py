"""Commands that encode a model the user names, on a tiny decoder language model (issue 36.1-2): `evaluate`, `embed`,
`similarity` and `neighbours` take `--pooling` and `--attention` (the same options, `sentkit.models.loading.
add_model_settings`), score what `sentkit.load(model, attention=...)` encodes, key their caches and records on the
settings, and refuse CLS pooling of a causal decoder, a misspelled attention and attention on a model that has none
in one line each."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

import sentkit
from sentkit.cli.main import main
from support.decoders import tiny_decoder

WORDS = ["river", "stone", "bridge", "winter", "bread", "old", "runs", "past", "the", "a", "cold", "warm"]


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_decoder("gpt2", tmp_path_factory.mktemp("gpt2") / "model")


@pytest.fixture(scope="module")
def sts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Pairs sharing k of their 4 words (score k)."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(24):
        a = rng.choice(WORDS, 4, replace=False).tolist()
        k = i % 4
        b = a[:k] + rng.choice([w for w in WORDS if w not in a], 4 - k, replace=False).tolist()
        rows.append({"text1": " ".join(a), "text2": " ".join(b), "score": float(k)})
    f = tmp_path_factory.mktemp("sts") / "pairs.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


def spearman_of(enc: object, sts: Path) -> float:
    rows = [json.loads(x) for x in sts.read_text().splitlines()]
    a = enc.encode([r["text1"] for r in rows])  # type: ignore[attr-defined]
    b = enc.encode([r["text2"] for r in rows])  # type: ignore[attr-defined]
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(spearmanr(cos, [r["score"] for r in rows])[0])


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_evaluate_scores_a_decoder_as_it_is_and_bidirectionally(
    gpt2: Path, sts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scores, fingerprints = {}, {}
    for attention in ("causal-as-is", "bidirectional"):
        out = tmp_path / f"{attention}.json"
        given = ["--attention", attention] if attention == "bidirectional" else []
        args = ["-q", "evaluate", "--model", str(gpt2), "--user-task", f"sts:pairs={sts}", *given]
        assert main([*args, "--pooling", "weighted-mean", "-o", str(out), "--cache-dir", str(tmp_path / "c")]) == 0
        res = json.loads(out.read_text())
        assert res["errors"] == {}
        scores[attention] = res["results"]["pairs"]["all"]["spearman"]["mean"]
        fingerprints[attention] = res["model"]["fingerprint"]
        expected = {"pooling": "weighted-mean", **({"attention": attention} if given else {})}
        assert res["model"]["settings"] == expected
        enc = sentkit.load(str(gpt2), **expected)
        assert scores[attention] == pytest.approx(spearman_of(enc, sts), abs=1e-9)
    assert fingerprints["causal-as-is"] != fingerprints["bidirectional"]  # caches never mix the two
    assert scores["causal-as-is"] != pytest.approx(scores["bidirectional"], abs=1e-6)

    capsys.readouterr()
    bad = ["-q", "evaluate", "--model", str(gpt2), "--user-task", f"sts:pairs={sts}", "-o", str(tmp_path / "x.json")]
    assert main([*bad, "--pooling", "cls"]) == 2
    assert "pooling=cls reads the first token" in one_error_line(capsys)
    assert main([*bad, "--pooling", "cls", "--attention", "bidirectional"]) == 0  # a summary again: allowed
    capsys.readouterr()
    assert main([*bad, "--attention", "bidirectinal"]) == 2
    assert "Did you mean 'bidirectional'?" in one_error_line(capsys)
    assert main([*bad, "--pooling", "lasttoken"]) == 2
    assert "Did you mean 'last-token'?" in one_error_line(capsys)
    assert main([*bad, "--pooling", ""]) == 2
    assert "--pooling is empty" in one_error_line(capsys)


def test_embed_similarity_and_neighbours_take_the_same_settings(
    gpt2: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = ["the river runs past the old stone bridge", "winter bread", "a cold stone"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    bidirectional = sentkit.load(str(gpt2), attention="bidirectional").encode(texts)
    causal = sentkit.load(str(gpt2)).encode(texts)
    assert np.abs(bidirectional - causal).max() > 1e-4
    out = tmp_path / "v.npy"
    args = ["-q", "embed", "--model", str(gpt2), "--input", str(tmp_path / "in.txt"), "--output", str(out)]
    assert main([*args, "--attention", "bidirectional"]) == 0
    np.testing.assert_allclose(np.load(out), bidirectional, atol=1e-6)

    capsys.readouterr()
    assert main(["similarity", "--model", str(gpt2), "--attention", "bidirectional", *texts[:2]]) == 0
    a, b = bidirectional[0], bidirectional[1]
    assert f"{float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)):8.3f}" in capsys.readouterr().out
    assert main(["similarity", "--model", "glove-average", "--attention", "causal", "a", "b"]) == 2
    assert "takes no attention" in one_error_line(capsys)

    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "d.txt").write_text(". ".join(texts) + ".\n")
    folders = []
    for given in ([], ["--attention", "bidirectional"]):
        neighbours = ["neighbours", "--model", str(gpt2), "--corpus", str(tmp_path / "corpus"), "-k", "1"]
        assert main([*neighbours, "--cache-dir", str(tmp_path / "idx"), *given, "winter bread"]) == 0
        folders.append(capsys.readouterr().err.split("(")[-1].split(")")[0])
    assert folders[0] != folders[1] and all(Path(f).is_dir() for f in folders)  # an index per setting
