"""Quantized embeddings (sentkit.models.quantization): codes identical to sentence-transformers' quantize_embeddings on
the same calibration (the oracle), `sentkit embed --quantize` writing them with the calibration beside, evaluation of
the codes (int8 values, bits as +1/-1) with calibration that never comes from the tasks, scored from the whole float
vectors' cache exactly as when encoded directly, results' keys kept apart, a binary search with rescoring scoring
retrieval tasks as the binary index searches (sentkit's tasks and mteb's alike), and one-line errors for every new
flag."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import sentkit
from sentkit.cli.main import main
from sentkit.core.config import ConfigError
from sentkit.core.identity import fingerprint
from sentkit.models import quantization as Q

TEXTS = ["The cat sat on the mat.", "A quick brown fox jumps over the lazy dog.", "Rain.", "Stocks fell on Monday."]


@pytest.fixture(scope="module")
def st_quantize():
    st = pytest.importorskip("sentence_transformers.util.quantization")
    return st.quantize_embeddings


@pytest.mark.parametrize("precision", Q.PRECISIONS)
@pytest.mark.parametrize("dim", [37, 64])
def test_the_codes_are_sentence_transformers(st_quantize, precision: str, dim: int) -> None:
    rng = np.random.default_rng(dim)
    x = rng.normal(size=(40, dim)).astype(np.float32)
    cal = rng.normal(size=(300, dim)).astype(np.float32)
    ours = Q.quantize(x, precision, calibration=cal)
    theirs = st_quantize(x, precision, calibration_embeddings=cal)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)
    if precision in Q.SCALAR:  # the same with the ranges given, and with a Calibration fitted on the sample
        np.testing.assert_array_equal(Q.quantize(x, precision, ranges=Q.fit_ranges(cal)), theirs)
        np.testing.assert_array_equal(Q.Calibration.fit(cal, precision).codes(x), theirs)


def test_bits_as_plus_minus_one_make_cosine_an_affine_function_of_hamming() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 20)).astype(np.float32)
    f = Q.as_float(Q.quantize(x, "binary"), "binary", 20)
    assert set(np.unique(f)) == {-1.0, 1.0} and f.shape == (6, 20)
    hamming = ((x[:, None] > 0) != (x[None] > 0)).sum(-1)
    cosine = f @ f.T / 20
    np.testing.assert_allclose(cosine, 1 - 2 * hamming / 20)
    np.testing.assert_array_equal(Q.unpack_bits(Q.quantize(x, "ubinary"), "ubinary", 20), x > 0)


def test_int8_codes_dequantize_within_one_step() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(50, 8)).astype(np.float32)
    ranges = Q.fit_ranges(x)
    back = Q.dequantize(Q.quantize(x, "int8", ranges=ranges), "int8", ranges)
    step = (ranges[1] - ranges[0]) / 255
    assert np.all(back <= x + 1e-5) and np.all(x - back <= step + 1e-5)


def test_a_calibration_round_trips_and_refuses_bad_files(tmp_path: Path) -> None:
    cal = Q.Calibration.fit(np.random.default_rng(0).normal(size=(10, 4)), "int8", source="x")
    back = Q.Calibration.load(cal.save(tmp_path / "c.quantization.json"))
    np.testing.assert_array_equal(back.ranges, cal.ranges)
    assert back.key() == cal.key() and back.precision == "int8" and back.dim == 4
    import hashlib

    assert cal.key() == "int8:" + hashlib.sha256(cal.ranges.astype(np.float32).tobytes()).hexdigest()[:12]
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match="not a sentkit quantization file"):
        Q.Calibration.load(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="is a folder"):
        Q.Calibration.load(tmp_path)
    with pytest.raises(ConfigError, match="Did you mean 'int8'"):
        Q.check_quantize("int9")


# ----------------------------------------------------------------------------- sentkit embed --quantize
@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("q") / "in.txt"
    src.write_text("".join(f"sentence {i} says something about item {i % 7}\n" for i in range(60)))
    return src


@pytest.mark.parametrize("precision", ["int8", "binary"])
def test_embed_quantize_writes_st_codes_and_their_calibration(
    st_quantize, tiny_model_dir: Path, corpus: Path, tmp_path: Path, precision: str
) -> None:
    out = tmp_path / "v.npy"
    args = ["-q", "embed", "--model", str(tiny_model_dir), "--input", str(corpus), "--output", str(out)]
    extra = ["--calibration-size", "25"] if precision == "int8" else []
    assert main([*args, "--quantize", precision, *extra, "--block", "16"]) == 0
    codes = np.load(out)
    cal = Q.Calibration.load(Q.calibration_path(out))
    floats = sentkit.load(str(tiny_model_dir)).encode(corpus.read_text().splitlines())
    sample = floats[Q.sample_rows(len(floats), 25, seed=0)]  # the seeded sample the ranges were fitted on
    theirs = st_quantize(floats, precision, calibration_embeddings=sample if precision == "int8" else None)
    np.testing.assert_array_equal(codes, theirs)
    assert cal.precision == precision and cal.dim == floats.shape[1]
    assert cal.rows == (25 if precision == "int8" else 0)
    assert main([*args]) == 0  # a float run replaces the codes (embed's own output) and their calibration
    assert np.load(out).dtype == np.float32 and not Q.calibration_path(out).exists()


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--quantize", "int9"], "Did you mean 'int8'"),
        (["--quantize", "int8", "--calibration-size", "1"], "--calibration-size must be a whole number"),
        (["--quantize", "binary", "--calibration-size", "100"], "binary codes need no calibration"),
        (["--calibration-size", "100"], "give --quantize int8 too"),
        (["--quantize", "int8", "--shard", "0/2"], "is not sharded"),
    ],
)
def test_embed_quantize_bad_input_is_one_line(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list, said: str
) -> None:
    args = ["-q", "embed", "--model", str(tiny_model_dir), "--input", str(corpus), "--output", str(tmp_path / "v.npy")]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sentkit embed: error:") and said in err[0], err


def test_embed_quantize_writes_npy_only(tiny_model_dir: Path, corpus: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "v.parquet"
    args = ["-q", "embed", "--model", str(tiny_model_dir), "--input", str(corpus), "--output", str(out)]
    assert main([*args, "--quantize", "binary"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ".npy" in err[0]


# ----------------------------------------------------------------------------- evaluation and keys
def test_a_quantized_encoder_gives_the_codes_as_floats(tiny_model_dir: Path, corpus: Path) -> None:
    name = str(tiny_model_dir)
    floats = sentkit.load(name).encode(TEXTS)
    binary = sentkit.load(name, quantize="binary")
    np.testing.assert_array_equal(binary.encode(TEXTS), Q.as_float(Q.quantize(floats, "binary"), "binary", 32))
    int8 = sentkit.load(name, quantize="int8", calibration=corpus)
    sample = sentkit.load(name).encode(Q.read_calibration_texts(corpus, Q.DEFAULT_CALIBRATION_ROWS))
    np.testing.assert_array_equal(int8.encode(TEXTS), Q.quantize(floats, "int8", calibration=sample).astype(np.float32))
    assert int8.encode("one").shape == (32,)
    keys = {fingerprint(e, name) for e in (sentkit.load(name), binary, int8)}
    other = sentkit.load(
        name, quantize="int8", calibration=Q.Calibration.fit(floats, "int8").save(corpus.parent / "c.quantization.json")
    )
    assert len(keys | {fingerprint(other, name)}) == 4  # other ranges: another key
    both = sentkit.load(name, quantize="binary", dim=8)
    from sentkit.models.loading import used_settings

    assert used_settings(both, {}) == {"dim": 8, "quantize": "binary"} and both.encode(TEXTS).shape == (4, 8)
    with pytest.raises(ConfigError, match="calibration ranges fitted on texts"):
        sentkit.load(name, quantize="int8")


class Hidden:
    """An encoder whose vectors are another's, computed by it: nothing says how they are made."""

    def __init__(self, encoder: object) -> None:
        self.encoder = encoder

    def encode(self, texts: list[str], batch_size: int = 32, **kwargs: object) -> np.ndarray:
        return np.asarray(self.encoder.encode(texts, batch_size=batch_size))  # type: ignore[attr-defined]


def test_evaluate_quantized_records_it_and_reads_the_whole_vectors_cache(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The codes and cuts of a model are scored from its float vectors' cache (encoded once: store_plan), and score
    exactly as without any cache; the fingerprints they record stay apart."""
    from tests.evaluation.conftest import make_senteval_dir

    data = make_senteval_dir(tmp_path / "data")
    args = ["-q", "evaluate", "--model", str(tiny_model_dir), "--tasks", "STSB", "--data-dir", str(data)]
    runs = {}
    variants = (
        ("float", []),
        ("binary", ["--quantize", "binary"]),
        ("int8", ["--quantize", "int8", "--calibration", str(corpus)]),
        ("cut", ["--dim", "8"]),
        ("cut-binary", ["--dim", "8", "--quantize", "binary"]),
    )
    for name, extra in variants:
        out = tmp_path / f"{name}.json"
        assert main([*args, "--cache-dir", str(tmp_path / "cache"), *extra, "-o", str(out)]) == 0
        runs[name, "cache"] = json.loads(out.read_text())
    assert "settings" not in runs["float", "cache"]["model"]
    assert runs["binary", "cache"]["model"]["settings"] == {"quantize": "binary"}
    assert runs["int8", "cache"]["model"]["settings"] == {"quantize": "int8"}
    assert runs["cut-binary", "cache"]["model"]["dim"] == 8
    assert len({runs[name, "cache"]["model"]["fingerprint"] for name, _ in variants}) == len(variants)
    for name, _ in variants[1:]:
        timings = runs[name, "cache"]["timings"]
        assert timings["sentences_encoded"] == 0 and timings["sentences_from_cache"] > 0  # the float run's vectors
        assert runs[name, "cache"]["results"]["STSB"] != runs["float", "cache"]["results"]["STSB"]
    # in half precision too: the cut reads the bf16 vectors' cache (keyed with the precision, as the full run's)
    for name, extra in (("bf16", []), ("bf16-cut", ["--dim", "8"])):
        out = tmp_path / f"{name}.json"
        assert main([*args, "--cache-dir", str(tmp_path / "cache"), "--precision", "bf16", *extra, "-o", str(out)]) == 0
        runs[name, "cache"] = json.loads(out.read_text())
    assert runs["bf16", "cache"]["timings"]["sentences_encoded"] > 0  # not the fp32 vectors
    assert runs["bf16-cut", "cache"]["timings"]["sentences_encoded"] == 0
    assert runs["bf16-cut", "cache"]["model"]["precision"] == "bf16"
    # the oracle: the cut or codes encoded directly, by an encoder that hides how they are made (no whole vectors)
    for name, kwargs in (
        ("binary", {"quantize": "binary"}),
        ("int8", {"quantize": "int8", "calibration": corpus}),
        ("cut", {"truncate_dim": 8}),
        ("cut-binary", {"truncate_dim": 8, "quantize": "binary"}),
    ):
        direct = Hidden(sentkit.load(str(tiny_model_dir), **kwargs))
        res = sentkit.evaluate(direct, tasks=["STSB"], data_dir=data, use_cache=False, progress=False)
        assert res["results"]["STSB"] == runs[name, "cache"]["results"]["STSB"], name
    capsys.readouterr()
    assert main([*args, "--quantize", "int8", "-o", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--calibration" in err[0] and "not the test data" in err[0]
    assert main([*args, "--quantize", "int4", "-o", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--quantize must be one of int8, binary" in err[0]


def _beir(folder: Path, n_docs: int = 80, n_queries: int = 20) -> Path:
    """A BEIR folder of `n_docs` six-word documents; query i is the first three words of document 3i (relevant)."""
    rng = np.random.default_rng(0)
    words = ["river", "bank", "water", "fish", "boat", "stone", "tree", "leaf", "wind", "rain", "sun", "moon"]
    docs = {f"d{i}": " ".join(rng.choice(words, 6).tolist()) for i in range(n_docs)}
    queries = {f"q{i}": " ".join(docs[f"d{3 * i}"].split()[:3]) for i in range(n_queries)}
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in docs.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{3 * i}\t1\n" for i in range(n_queries))
    )
    return folder


def test_binary_rescored_retrieval_is_the_binary_search_in_sentkit_and_mteb(
    tiny_model_dir: Path, tmp_path: Path, task_registry: object
) -> None:
    """`evaluate --quantize binary --rescore float` ranks a retrieval task as the binary index's search does: the
    same nDCG@10 from sentkit's own retrieval task and from mteb's (RescoredSearch), equal to BEIR's metrics of
    `rescored_ranking` over the float vectors (the oracle); a multiplier that makes every document a candidate gives
    the float model's score; the codes alone score otherwise."""
    pytest.importorskip("mteb")
    pytest.importorskip("faiss")
    from sentkit.evaluation import protocols as P
    from sentkit.retrieval.index import BinaryCodes, rescored_ranking

    beir = _beir(tmp_path / "beir")
    args = ["-q", "evaluate", "--model", str(tiny_model_dir), "--tasks", "user", "--cache-dir", str(tmp_path / "c")]
    args += ["--user-task", f"retrieval:faq={beir}", "--mteb", f"retrieval:faqm={beir}"]
    scores = {}
    for name, extra in (
        ("float", []),
        ("binary", ["--quantize", "binary"]),
        ("rescored", ["--quantize", "binary", "--rescore", "float", "--rescore-multiplier", "2"]),
        ("int8", ["--quantize", "binary", "--rescore", "int8"]),
        ("all", ["--quantize", "binary", "--rescore", "float", "--rescore-multiplier", "8"]),
    ):
        out = tmp_path / f"{name}.json"
        assert main([*args, *extra, "-o", str(out)]) == 0
        res = json.loads(out.read_text())
        own, via_mteb = res["results"]["faq"]["ndcg_at_10"], res["mteb"]["tasks"]["faqm"]["main_score"]
        assert own == pytest.approx(via_mteb, abs=1e-9)
        scores[name] = own
    assert res["model"]["settings"] == {"quantize": "binary", "rescore": "floatx8"}
    rows = [json.loads(x) for x in (beir / "corpus.jsonl").read_text().splitlines()]
    queries = [json.loads(x) for x in (beir / "queries.jsonl").read_text().splitlines()]
    model = sentkit.load(str(tiny_model_dir))
    docs, qs = model.encode([r["text"] for r in rows]), model.encode([q["text"] for q in queries])
    ids, sims = rescored_ranking(BinaryCodes.of(docs, rescore="float", multiplier=2), qs, 80)
    ranked = {q["_id"]: [(rows[j]["_id"], float(v)) for j, v in zip(ids[r], sims[r])] for r, q in enumerate(queries)}
    qrels = {f"q{i}": {f"d{3 * i}": 1} for i in range(20)}
    assert scores["rescored"] == pytest.approx(100 * P.ir_metrics(qrels, ranked)["ndcg_at_10"], abs=1e-9)
    assert scores["all"] == pytest.approx(scores["float"], abs=1e-9)  # 80 candidates: every document rescored
    assert scores["binary"] != pytest.approx(scores["rescored"])


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--rescore", "float"], "--rescore rescores a binary search: give --quantize binary too"),
        (["--quantize", "int8", "--calibration", "CORPUS", "--rescore", "float"], "give --quantize binary, not int8"),
        (["--quantize", "binary", "--rescore", "flaot"], "--rescore must be one of float, int8, none"),
        (["--quantize", "binary", "--rescore", "float", "--rescore-multiplier", "0"], "a whole number >= 1"),
        (["--quantize", "binary", "--rescore-multiplier", "3"], "--rescore-multiplier goes with --rescore float"),
        (["--quantize", "binary", "--calibration", "CORPUS"], "binary codes need no calibration texts"),
    ],
)
def test_rescore_bad_input_is_one_line(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], said: str
) -> None:
    extra = [str(corpus) if x == "CORPUS" else x for x in extra]
    out = tmp_path / "r.json"
    assert main(["-q", "evaluate", "--model", str(tiny_model_dir), "--tasks", "none", *extra, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
    assert not out.exists()


def test_load_refuses_rescoring_of_int8_codes(tiny_model_dir: Path, corpus: Path) -> None:
    with pytest.raises(ConfigError, match="give --quantize binary, not int8"):
        sentkit.load(str(tiny_model_dir), quantize="int8", calibration=corpus, rescore="float")
    with pytest.raises(ConfigError, match="rescore was given without quantize"):
        sentkit.load(str(tiny_model_dir), rescore="float")
