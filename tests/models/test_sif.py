"""SIF (sentkit.models.sif): the weights by hand, the components against scikit-learn's TruncatedSVD (what the
paper's code uses), and `sentkit train --method sif` on averaged GloVe against a plain numpy run of the paper's
Algorithm 1 on the same corpus."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sentkit.core.config import ConfigError
from sentkit.models.sif import first_components, remove_components, sif_weights, weighted_average
from support import make_docs


def test_weights_are_a_over_a_plus_p_by_hand() -> None:
    # p = [0.75, 0.25, 0]: 0.25 / (0.25 + p)
    np.testing.assert_allclose(sif_weights(np.array([3, 1, 0]), a=0.25), [0.25, 0.5, 1.0])
    with pytest.raises(ValueError, match="a must be positive"):
        sif_weights(np.array([1, 2]), a=0.0)


def test_weighted_average_divides_by_the_number_of_words() -> None:
    table = np.array([[1.0, 0.0], [0.0, 2.0], [4.0, 4.0]], dtype=np.float32)
    w = np.array([0.5, 1.0, 0.25], dtype=np.float32)
    got = weighted_average([[0, 1], [2, 2, 0], []], table, w)
    np.testing.assert_allclose(got, [[0.25, 1.0], [(1 + 1 + 0.5) / 3, 2 / 3], [0.0, 0.0]], rtol=1e-6)


def test_first_component_is_truncated_svds_and_removing_it_leaves_rows_orthogonal() -> None:
    from sklearn.decomposition import TruncatedSVD

    rng = np.random.default_rng(0)
    x = (rng.normal(size=(300, 8)) + np.linspace(1, 3, 8)).astype(np.float32)  # a common direction, not centred
    pc = first_components(x, 1)
    ref = TruncatedSVD(n_components=1, n_iter=7, random_state=0).fit(x.astype(np.float64)).components_
    assert abs(float(pc[0] @ ref[0])) == pytest.approx(1.0, abs=1e-6)
    y = remove_components(x, pc)
    np.testing.assert_allclose(y @ pc[0], 0.0, atol=1e-4)
    np.testing.assert_allclose(y, x - np.outer(x @ ref[0], ref[0]), atol=1e-4)
    two = first_components(x, 2)
    np.testing.assert_allclose(two @ two.T, np.eye(2), atol=1e-6)


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    d = tmp_path / "corpus"
    d.mkdir()
    for i, doc in enumerate(make_docs(5, 200)):
        (d / f"{i}.txt").write_text(doc.replace(" river", ". The river") + "\n")
    return d


def test_sif_of_glove_equals_the_papers_algorithm_on_the_same_corpus(corpus: Path, tmp_path: Path) -> None:
    import sentkit
    from sentkit.cli.main import main
    from sentkit.data.sentences import iter_document_sentences
    from sentkit.models.wordvectors import load_glove
    from sentkit.training.whiten import sample_sentences

    out = tmp_path / "sif"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "sif",
                "--model",
                "glove-average",
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                "--set",
                "max_sentences=50",
            ]
        )
        == 0
    )
    # the oracle: count lower-cased words over every sentence, weigh, average, remove u u^T (paper's Algorithm 1)
    glove = load_glove()
    row = {w: i for i, w in enumerate(glove.words)}
    counts = np.zeros(len(glove.words))
    for sents in iter_document_sentences(str(corpus)):
        for s in sents:
            for w in s.lower().split():
                if w in row:
                    counts[row[w]] += 1
    a = 1e-3
    weight = a / (a + counts / counts.sum())

    def avg(text: str) -> np.ndarray:
        ids = [row[w] for w in text.lower().split() if w in row]
        return np.mean([weight[i] * glove.vectors[i] for i in ids], axis=0) if ids else np.zeros(glove.dim)

    sample, _ = sample_sentences(str(corpus), 50, min_words=3, seed=0)
    x = np.stack([avg(s) for s in sample])
    u = np.linalg.svd(x, full_matrices=False)[2][0]
    texts = ["The river runs past the stone.", "winter bread and summer music", "qqqq zzzz"]
    want = np.stack([avg(t) - (avg(t) @ u) * u for t in texts])
    np.testing.assert_allclose(sentkit.load(str(out)).encode(texts), want, atol=1e-4)


def test_sif_refuses_a_model_that_does_not_average_word_vectors(corpus: Path, tmp_path: Path) -> None:
    from sentkit.training.sif import SifConfig, train_sif

    code = tmp_path / "enc.py"
    code.write_text("import numpy as np\ndef enc(texts):\n    return np.ones((len(texts), 3))\n")
    with pytest.raises(ConfigError, match="not an encoder that averages word vectors"):
        train_sif(SifConfig(model=f"{code}:enc", corpus=str(corpus), out=str(tmp_path / "o"), progress=False))


def test_sif_of_a_model_folder_copies_the_model_files_and_nothing_else(corpus: Path, tmp_path: Path) -> None:
    """The saved SIF folder holds its base's model files (the same digest, so it loads without the original),
    not the base run's lock, bookkeeping, logs or neighbour-index cache."""
    import shutil

    import sentkit
    from sentkit.cli.main import main
    from sentkit.core.identity import content_id

    base = tmp_path / "cbow"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "cbow",
                "--corpus",
                str(corpus),
                "--out",
                str(base),
                "--set",
                "min_count=1",
                "--set",
                "dim=8",
            ]
        )
        == 0
    )
    (base / "neighbours").mkdir()
    (base / "neighbours" / "index.npy").write_bytes(b"not a model file")
    (base / "train.log").write_text("a log\n")
    (base / ".lock").touch()
    out = tmp_path / "sif"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "sif",
                "--model",
                str(base),
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                "--set",
                "max_sentences=50",
            ]
        )
        == 0
    )
    kept = out / "base"
    left = {".lock", "run.json", "train.log", "neighbours"}
    assert left <= {p.name for p in base.iterdir()} and not left & {p.name for p in kept.iterdir()}
    assert content_id(kept) == content_id(base)
    texts = ["The river runs past the stone.", "winter bread and summer music"]
    before = sentkit.load(str(out)).encode(texts)
    shutil.rmtree(base)
    np.testing.assert_array_equal(sentkit.load(str(out)).encode(texts), before)


def test_a_corpus_too_small_is_one_line_with_the_counts_of_what_was_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sentkit.cli.main import main

    binary, short = tmp_path / "binary", tmp_path / "short"
    binary.mkdir()
    short.mkdir()
    (binary / "a.txt").write_bytes(b"\x00\x01 binary")
    (short / "a.txt").write_text("The cat sat on the mat today. Yes.\n")
    cases = [
        (
            "sif",
            binary,
            "no sentence to count words in (read 0 documents, kept 0 with 0 sentences; skipped 0 "
            "without a sentence, 0 empty, 1 binary",
        ),
        (
            "sif",
            short,
            "fewer than 2 sentences of at least 3 words to fit the common component on (read 1 "
            "documents, kept 1 with 1 sentences;",
        ),
        (
            "whiten",
            short,
            "fewer than 2 sentences of at least 3 words to fit a whitening on (read 1 documents, "
            "kept 1 with 1 sentences;",
        ),
    ]
    for method, corpus, words in cases:
        capsys.readouterr()
        assert (
            main(
                [
                    "-q",
                    "train",
                    "--method",
                    method,
                    "--model",
                    "glove-average",
                    "--corpus",
                    str(corpus),
                    "--out",
                    str(tmp_path / "out"),
                ]
            )
            == 2
        )
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], (method, err)
        out = tmp_path / "out"  # nothing but the run lock (whiten's refusal removes the folder its claim made)
        assert not out.exists() or not [p for p in out.iterdir() if p.name != ".lock"], method
