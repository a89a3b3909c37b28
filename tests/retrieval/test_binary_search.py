"""Binary search (sentkit.retrieval.index.BinaryCodes / BinaryIndex / codes_search): recall@10 against exact float
search on small seeded data at the values benchmarks/results/binary_search.json records (and docs/smaller_vectors.md
quotes), rescoring raising recall over Hamming order alone, `sentkit index --quantize binary` + `sentkit.search` /
`neighbours` agreeing with the in-memory codes, and one-line errors for the new flags."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import sentkit
from sentkit.cli.main import main

pytest.importorskip("faiss")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("binary_search", ROOT / "benchmarks" / "binary_search.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return mod


@pytest.fixture(scope="module")
def committed() -> dict:
    rows = json.loads((ROOT / "benchmarks" / "results" / "binary_search.json").read_text())["rows"]
    return {(r["dim"], r["kind"], r["rescore"], r["multiplier"]): r["recall_at_10"] for r in rows}


# Measured (benchmarks/binary_search.py, committed in benchmarks/results/binary_search.json), 64 dimensions, 3000 rows:
# binary alone 0.390; rescored x4 with float 0.722, with int8 0.722; int8 codes 0.756, rescored x4 0.975.
MEASURED = [
    ("binary", "none", 1, 0.390),
    ("binary", "float", 4, 0.722),
    ("binary", "int8", 4, 0.722),
    ("int8 codes", "none", 4, 0.756),
    ("int8 codes", "float", 4, 0.975),
]


@pytest.mark.parametrize(("kind", "rescore", "multiplier", "value"), MEASURED)
def test_recall_is_the_measured_value(bench, committed, kind: str, rescore: str, multiplier: int, value: float) -> None:
    x, q = bench.data(dim=64)
    got = bench.measure(kind, rescore, multiplier, x, q)
    assert committed[(64, kind, rescore, multiplier)] == value
    assert got == pytest.approx(value, abs=0.005)


def test_rescoring_raises_recall_over_binary_alone(bench) -> None:
    x, q = bench.data(dim=64)
    alone = bench.measure("binary", "none", 4, x, q)
    assert bench.measure("binary", "float", 4, x, q) > alone + 0.2
    assert bench.measure("binary", "float", 10, x, q) > bench.measure("binary", "float", 4, x, q)
    assert bench.measure("binary codes", "float", 4, x, q) > bench.measure("binary codes", "none", 4, x, q)


def test_the_committed_results_are_the_benchmarks_run(bench, committed) -> None:
    """Every recorded row (both sizes) is what the code gives now."""
    for dim in (64, 384):
        x, q = bench.data(dim=dim)
        for kind, rescore, multiplier in bench.CONFIGS:
            got = bench.measure(kind, rescore, multiplier, x, q)
            assert got == pytest.approx(committed[(dim, kind, rescore, multiplier)], abs=0.005), (dim, kind, rescore)


def test_none_scores_are_the_cosines_of_the_plus_minus_one_vectors(bench) -> None:
    from sentkit.models.quantization import as_float, quantize
    from sentkit.retrieval.index import BinaryCodes

    x, q = bench.data(n=500, queries=5, dim=24)
    ids, scores = BinaryCodes.of(x, rescore="none").search(q, 5)
    fx, fq = (as_float(quantize(v, "binary"), "binary", 24) for v in (x, q))
    np.testing.assert_allclose(scores, np.take_along_axis(fq @ fx.T / 24, ids, 1), atol=1e-6)


# ----------------------------------------------------------------------------- the commands
@pytest.fixture(scope="module")
def vectors(bench, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    x, q = bench.data(n=800, queries=10, dim=48)
    path = tmp_path_factory.mktemp("bin") / "v.npy"
    np.save(path, x)
    return path, q


@pytest.mark.parametrize("rescore", ["float", "int8", "none"])
def test_a_binary_index_folder_searches_as_the_codes_in_memory(
    vectors: tuple[Path, np.ndarray], tmp_path: Path, rescore: str
) -> None:
    from sentkit.retrieval.index import BinaryCodes

    path, q = vectors
    folder = tmp_path / "idx"
    assert main(["-q", "index", "--input", str(path), "--output", str(folder), "--quantize", "binary"]) == 0
    ids, scores = sentkit.search(None, q, 5, vectors=path, index=folder, rescore=rescore, rescore_multiplier=3)
    mem_ids, mem_scores = BinaryCodes.of(np.load(path), rescore=rescore, multiplier=3).search(q, 5)
    np.testing.assert_array_equal(ids, mem_ids)
    np.testing.assert_allclose(scores, mem_scores, atol=1e-5 if rescore != "int8" else 1e-3)


def test_a_binary_index_of_changed_vectors_is_refused(vectors: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    from sentkit.retrieval.index import VectorIndexError

    path, q = vectors
    copy = tmp_path / "v.npy"
    np.save(copy, np.load(path))
    assert main(["-q", "index", "--input", str(copy), "--output", str(tmp_path / "i"), "--quantize", "binary"]) == 0
    np.save(copy, np.load(path)[:-1])
    with pytest.raises(VectorIndexError, match="is stale"):
        sentkit.search(None, q, 5, vectors=copy, index=tmp_path / "i")


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--quantize", "int8"], "must be binary"),
        (["--quantize", "binary", "--nlist", "8"], "--nlist"),
    ],
)
def test_index_bad_input_is_one_line(
    vectors: tuple[Path, np.ndarray], tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list, said: str
) -> None:
    path, _ = vectors
    assert main(["-q", "index", "--input", str(path), "--output", str(tmp_path / "i"), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sentkit index: error:") and said in err[0], err


def test_index_of_a_folder_says_it_is_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-q", "index", "--input", str(tmp_path), "--output", str(tmp_path / "i")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a folder, not a file" in err[0] and "missing" not in err[0], err


def test_search_over_embed_codes_quantizes_the_query_with_their_calibration(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from sentkit.models.quantization import Calibration, calibration_path
    from sentkit.retrieval.index import codes_search

    src = tmp_path / "in.txt"
    src.write_text(
        "".join(f"The {w} number {i} sat on a mat.\n" for i in range(30) for w in ("cat", "dog")[i % 2 :][:1])
    )
    out = tmp_path / "c.npy"
    args = ["-q", "embed", "--model", str(tiny_model_dir), "--input", str(src), "--output", str(out)]
    assert main([*args, "--quantize", "int8"]) == 0
    enc = sentkit.load(str(tiny_model_dir))
    ids, scores = sentkit.search(enc, ["a cat on a mat"], 5, vectors=out)
    cal = Calibration.load(calibration_path(out))
    want = codes_search(np.load(out), cal, enc.encode(["a cat on a mat"]), 5)
    np.testing.assert_array_equal(ids, want[0])
    assert ids.shape == (1, 5) and np.all(np.diff(scores[0]) <= 1e-6)


def test_neighbours_binary_and_its_flags(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"The {w} sat on a mat in the house.\n" for w in ("cat", "dog", "bird", "fox", "cow")))
    base = ["-q", "neighbours", "--model", str(tiny_model_dir), "--corpus", str(corpus), "--cache-dir", str(tmp_path)]
    capsys.readouterr()
    assert main([*base, "--json", "-k", "5", "a cat"]) == 0
    exact = json.loads(capsys.readouterr().out)
    assert main([*base, "--json", "-k", "5", "--quantize", "binary", "--rescore", "float", "a cat"]) == 0
    rescored = json.loads(capsys.readouterr().out)
    # all five rows are candidates (5 x 4 > 5): the float rescoring is exact search
    assert [n["sentence"] for n in rescored["neighbours"]] == [n["sentence"] for n in exact["neighbours"]]
    for extra, said in (
        (["--quantize", "binary", "--rescore", "flaot"], "Did you mean 'float'"),
        (["--rescore", "int8"], "apply to --quantize binary"),
        (["--quantize", "binary", "--rescore-multiplier", "0"], "--rescore-multiplier"),
        (["--quantize", "int8"], "must be binary"),
    ):
        assert main([*base, *extra, "a cat"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("sentkit neighbours: error:") and said in err[0], err


def test_an_evaluations_rescored_ranking_is_the_brute_force_one() -> None:
    """rescored_ranking against numpy by hand: the best `top * multiplier` rows by Hamming distance (equal distances
    by row), the best `top` of them by float cosine, lifted above the rest; then every other row by Hamming distance
    (ties by row) with score 1 - 2h/dim. Queries whose candidate boundary falls inside a tie are left out (the index
    may break such a tie either way)."""
    from sentkit.retrieval.index import RESCORED_LIFT, BinaryCodes, rescored_ranking

    rng = np.random.default_rng(3)
    dim, n, top, multiplier, total = 512, 120, 5, 3, 30
    docs = rng.standard_normal((n, dim)).astype(np.float32)
    queries = (docs[:60] + 1.5 * rng.standard_normal((60, dim))).astype(np.float32)
    codes = BinaryCodes.of(docs, rescore="float", multiplier=multiplier)
    ids, scores = rescored_ranking(codes, queries, total, top=top)
    unit = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    checked = 0
    for r, q in enumerate(queries):
        ham = ((q > 0) != (docs > 0)).sum(axis=1)
        order = np.lexsort((np.arange(n), ham))
        c = top * multiplier
        if ham[order[c - 1]] == ham[order[c]]:
            continue
        cand = order[:c]
        cos = unit[cand] @ (q / np.linalg.norm(q))
        best = cand[np.lexsort((cand, -cos))][:top]
        rest = [i for i in order if i not in set(best.tolist())][: total - top]
        np.testing.assert_array_equal(ids[r], np.concatenate([best, rest]))
        np.testing.assert_allclose(scores[r, :top], np.sort(cos)[::-1][:top] + RESCORED_LIFT, atol=1e-5)
        np.testing.assert_allclose(scores[r, top:], 1 - 2 * ham[rest] / dim, atol=1e-6)
        checked += 1
    assert checked >= 20, checked
    assert (np.diff(scores, axis=1) < 0).all()  # strictly: any sort by score (ties by id too) gives the ranking
