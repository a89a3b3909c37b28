"""sentkit.retrieval.index and `sentkit index`: the approximate index against exact search (numpy's full sort),
exactness below the threshold, neighbours past it, and bad input as one line with the fix."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("faiss")

from sentkit.cli.main import main
from sentkit.core.io import sha256_file
from sentkit.retrieval import index as vindex


def clustered(n: int, d: int = 32, centres: int = 100, seed: int = 0) -> np.ndarray:
    """Rows around random centres (like sentence embeddings: near neighbours exist), not normalised."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, d)).astype(np.float32)
    x = c[rng.integers(0, centres, n)] + 0.5 * rng.standard_normal((n, d)).astype(np.float32)
    return (x * rng.uniform(0.5, 3.0, (n, 1))).astype(np.float32)  # norms vary: cosine must normalise


def oracle(x: np.ndarray, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine top-k by a full sort."""
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    s = qn @ xn.T
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(s, order, axis=1)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, np.ndarray]:
    d = tmp_path_factory.mktemp("vi")
    x = clustered(20_000)
    np.save(d / "v.npy", x)
    assert main(["-q", "index", "--input", str(d / "v.npy"), "--output", str(d / "v.index")]) == 0
    return d / "v.npy", d / "v.index", x


def test_recall_at_10_against_exact_and_scores_are_exact(built: tuple[Path, Path, np.ndarray]) -> None:
    _npy, folder, x = built
    q = clustered(200, seed=1)
    idx, scores = vindex.VectorIndex(folder).search(q, 10)
    ti, _ts = oracle(x, q, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(idx.tolist(), ti.tolist())])
    assert recall >= 0.95
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    exact_of_returned = np.einsum("md,mkd->mk", qn, xn[idx])
    np.testing.assert_allclose(scores, exact_of_returned, atol=1e-5)  # re-ranked: exact cosines
    assert (np.diff(scores, axis=1) <= 1e-7).all()  # best first


def test_meta_records_source_settings_and_metric(built: tuple[Path, Path, np.ndarray]) -> None:
    npy, folder, _x = built
    meta = vindex.read_meta(folder)
    assert meta["source"]["sha256"] == sha256_file(npy)  # hashed on the way, equal to a separate pass
    assert meta["source"]["bytes"] == npy.stat().st_size and meta["metric"] == "cosine"
    assert (meta["n"], meta["dim"], meta["nlist"]) == (20_000, 32, vindex.auto_nlist(20_000))
    assert meta["settings"]["nprobe"] == vindex.IndexSettings().nprobe
    assert sorted(p.name for p in folder.iterdir()) == ["index.faiss", "index.json"]


def test_exact_search_in_blocks_equals_the_full_sort() -> None:
    x = clustered(3000, seed=2)
    q = clustered(7, seed=3)
    ti, ts = oracle(x, q, 10)
    for qb, rb in ((256, 4096), (7, 3000), (3, 1000), (2, 777)):
        i, s = vindex.exact_search(x, q, 10, query_block=qb, row_block=rb)
        np.testing.assert_array_equal(i, ti)
        np.testing.assert_allclose(s, ts, atol=1e-6)


def test_search_is_exact_below_the_threshold_and_needs_an_index_past_it(built: tuple[Path, Path, np.ndarray]) -> None:
    npy, folder, x = built
    q = clustered(5, seed=4)
    i, _s = vindex.search(q, 10, vectors=npy)  # 20k < EXACT_BELOW: exact
    ti, _ = oracle(x, q, 10)
    np.testing.assert_array_equal(i, ti)
    with pytest.raises(vindex.VectorIndexError, match="past the exact-search limit"):
        vindex.search(q, 10, vectors=npy, exact_below=1000)
    ai, _ = vindex.search(q, 10, vectors=npy, index=folder, exact_below=1000)
    np.testing.assert_array_equal(ai, vindex.VectorIndex(folder).search(q, 10)[0])


def test_search_of_texts_through_an_encoder(built: tuple[Path, Path, np.ndarray]) -> None:
    npy, _, x = built

    class Rows:
        def encode(self, texts: list[str]) -> np.ndarray:
            return x[[int(t) for t in texts]]

    i, s = vindex.search(["5", "17"], 3, vectors=npy, encoder=Rows())
    assert i[:, 0].tolist() == [5, 17] and np.allclose(s[:, 0], 1.0, atol=1e-5)


def test_sentkit_search_embeds_queries_with_the_query_prompt(built: tuple[Path, Path, np.ndarray]) -> None:
    """`sentkit.search(encoder, texts, vectors=, index=)`: an encoder searches an embed output, exactly
    below the limit and through the index past it, its queries embedded with its "query" prompt."""
    import sentkit

    npy, folder, x = built
    seen: list[str] = []

    class Prompted:
        def __init__(self) -> None:
            self.prompts = {"query": "q: ", "document": ""}

        def encode(self, texts: list[str]) -> np.ndarray:
            seen.extend(texts)
            return x[[int(t.removeprefix("q: ")) for t in texts]]

    i, s = sentkit.search(Prompted(), ["5", "17"], 3, vectors=npy)
    assert seen == ["q: 5", "q: 17"] and i[:, 0].tolist() == [5, 17] and np.allclose(s[:, 0], 1.0, atol=1e-5)
    ai, _ = sentkit.search(Prompted(), ["5"], 3, vectors=npy, index=folder, exact_below=1000)
    assert ai[0, 0] == 5
    with pytest.raises(vindex.VectorIndexError, match="build an index"):
        sentkit.search(Prompted(), ["5"], vectors=npy, exact_below=1000)


def test_search_keeps_an_index_open_and_opens_a_rebuilt_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`sentkit.search` past the exact limit opens the index once (faiss.read_index counted); a rebuilt
    index (same folder, new files) is opened again and searched."""
    import faiss

    import sentkit

    x = clustered(2000, seed=10)
    np.save(tmp_path / "v.npy", x)
    folder = tmp_path / "ix"
    vindex.build(tmp_path / "v.npy", folder, vindex.IndexSettings(nlist=16), progress=False)
    opened: list[str] = []
    read = faiss.read_index

    def counted(f: str, *args: Any) -> Any:
        opened.append(f)
        return read(f, *args)

    monkeypatch.setattr(faiss, "read_index", counted)

    class Rows:
        def encode(self, texts: list[str]) -> np.ndarray:
            return x[[int(t) for t in texts]]

    def find(row: int) -> int:
        i, _ = sentkit.search(Rows(), [str(row)], 3, vectors=tmp_path / "v.npy", index=folder, exact_below=1000)
        return int(i[0, 0])

    assert [find(5), find(17)] == [5, 17] and len(opened) == 1
    vindex.build(tmp_path / "v.npy", folder, vindex.IndexSettings(nlist=8), progress=False)
    assert find(9) == 9 and len(opened) == 2
    assert vindex.open_index(folder, tmp_path / "v.npy").meta["nlist"] == 8 and len(opened) == 2


def test_float16_vectors_and_a_rebuild_replaces_the_index(tmp_path: Path) -> None:
    x = clustered(2000, seed=5).astype(np.float16)
    np.save(tmp_path / "v.npy", x)
    out = tmp_path / "ix"
    vindex.build(tmp_path / "v.npy", out, vindex.IndexSettings(nlist=16), progress=False)
    vindex.build(tmp_path / "v.npy", out, vindex.IndexSettings(nlist=8), progress=False)
    assert vindex.read_meta(out)["nlist"] == 8 and vindex.read_meta(out)["dtype"] == "float16"
    i, _ = vindex.VectorIndex(out).search(x[:3].astype(np.float32), 1)
    assert i[:, 0].tolist() == [0, 1, 2]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_touched_but_unchanged_vectors_are_not_stale(built: tuple[Path, Path, np.ndarray], tmp_path: Path) -> None:
    x = clustered(1000, seed=6)
    np.save(tmp_path / "v.npy", x)
    vindex.build(tmp_path / "v.npy", tmp_path / "ix", progress=False)
    st = (tmp_path / "v.npy").stat()
    os.utime(tmp_path / "v.npy", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert len(vindex.VectorIndex(tmp_path / "ix")) == 1000  # sha256 settles it


# ----------------------------------------------------------------------------- neighbours and explore
class _Rows:
    """An encoder of a known answer: a sentence "w<i> ..." is row i of a fixed clustered matrix."""

    def __init__(self, n: int) -> None:
        self.x = clustered(n, seed=7)

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.x[[int(t.split()[0][1:]) % len(self.x) for t in texts]]


def _corpus(tmp_path: Path, n: int) -> Path:
    c = tmp_path / "c.txt"
    c.write_text("".join(f"w{i} is here.\n\n" for i in range(n)))
    return c


def test_neighbours_stay_exact_below_the_threshold(tmp_path: Path) -> None:
    from sentkit.retrieval.neighbours import get_index, normalise_rows, top_k

    enc = _Rows(600)
    index, _, where = get_index(
        tmp_path / "m", _corpus(tmp_path, 600), enc, cache_dir=tmp_path / "cache", progress=False
    )
    index = vindex.attach(index, where, progress=False)
    assert index.ann is None and not (where / "ann").exists()
    q = clustered(4, seed=8)
    i, s = index.search(q, 10)
    ti, ts = top_k(normalise_rows(q) @ normalise_rows(enc.x).T, 10)  # what the search computed before the index
    np.testing.assert_array_equal(i, ti)
    np.testing.assert_array_equal(s, ts)


def test_neighbours_use_the_index_past_the_threshold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sentkit.retrieval.neighbours import get_index

    monkeypatch.setattr(vindex, "EXACT_BELOW", 500)
    enc = _Rows(600)
    corpus = _corpus(tmp_path, 600)
    index, _, where = get_index(tmp_path / "m", corpus, enc, cache_dir=tmp_path / "cache", progress=False)
    index = vindex.attach(index, where, progress=False)
    assert isinstance(index.ann, vindex.VectorIndex) and (where / "ann" / "index.json").is_file()
    q = clustered(50, seed=9)
    i, _ = index.search(q, 10)
    ti, _ = oracle(enc.x, q, 10)
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(i.tolist(), ti.tolist())]) >= 0.95
    again, built, _ = get_index(tmp_path / "m", corpus, enc, cache_dir=tmp_path / "cache", progress=False)
    assert (
        not built and vindex.attach(again, where, progress=False).ann is not None
    )  # the cached index and its approximate index are read back


def test_explore_searches_through_the_index_past_the_threshold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sentkit.explore.core import Explorer

    monkeypatch.setattr(vindex, "EXACT_BELOW", 500)
    enc = _Rows(600)

    class Calls(vindex.VectorIndex):
        searches = 0

        def search(self, *a, **kw):  # type: ignore[no-untyped-def]
            Calls.searches += 1
            return super().search(*a, **kw)

    monkeypatch.setattr(vindex, "VectorIndex", Calls)
    ex = Explorer(["rows"], _corpus(tmp_path, 600), cache_dir=tmp_path / "cache", encoders={"rows": enc})
    try:
        assert ex.wait(60)
        col = ex.neighbours("w3 is here.", k=5)["columns"][0]
        assert col["status"] == "ready" and Calls.searches == 1
        assert col["neighbours"][0]["score"] == pytest.approx(1.0, abs=1e-4)
    finally:
        ex.close()


# ----------------------------------------------------------------------------- bad input
def _err(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    rc = main(["-q", *args])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    return err


def test_not_an_embed_output_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.txt").write_text("hello\n")
    np.save(tmp_path / "ints.npy", np.arange(12).reshape(3, 4))
    np.save(tmp_path / "flat.npy", np.zeros(5, np.float32))
    (tmp_path / "fake.npy").write_bytes(b"not numpy at all")
    np.save(tmp_path / "pickled.npy", np.array([{"a": 1}], dtype=object))  # never unpickled
    out = str(tmp_path / "ix")
    assert "not a .npy" in _err(["index", "--input", str(tmp_path / "t.txt"), "--output", out], capsys)
    for name in ("ints.npy", "flat.npy"):
        assert "sentkit embed --output" in _err(["index", "--input", str(tmp_path / name), "--output", out], capsys)
    for name in ("fake.npy", "pickled.npy"):
        assert "not a .npy array" in _err(["index", "--input", str(tmp_path / name), "--output", out], capsys)
    assert "no such file" in _err(["index", "--input", str(tmp_path / "none.npy"), "--output", out], capsys)
    assert not (tmp_path / "ix").exists()


def test_a_non_array_npy_says_what_index_needs_not_numpys_pickle_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "fake.npy").write_bytes(b"not numpy at all")  # numpy: "...contains pickled (object) data..."
    (tmp_path / "pickle.npy").write_bytes(pickle.dumps([1.0, 2.0]))
    np.savez(tmp_path / "z.npz", a=np.zeros((3, 4), np.float32))
    (tmp_path / "z.npz").rename(tmp_path / "archive.npy")
    out = str(tmp_path / "ix")
    for name, kind in [("fake.npy", "not numpy's format"), ("pickle.npy", "a Python pickle"), ("archive.npy", "zip")]:
        err = _err(["index", "--input", str(tmp_path / name), "--output", out], capsys)
        assert kind in err and "needs the .npy of vectors that `sentkit embed --output X.npy` writes" in err, err
        assert "allow_pickle" not in err and "internal error" not in err, err


@pytest.mark.parametrize(("sampled", "bad"), [(True, np.nan), (False, np.inf)])
def test_a_non_finite_row_is_named_in_one_line(
    sampled: bool, bad: float, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A NaN in the k-means training sample, or an infinity only in the added rows (outside the sample of 64), is
    the row's number in one line, not faiss's assertion, and no index is written."""
    sample = np.random.default_rng(vindex.IndexSettings().seed).choice(200, size=64, replace=False)
    row = int(sample[0]) if sampled else int(np.setdiff1d(np.arange(200), sample)[0])
    x = clustered(200)
    x[row, 5] = bad
    np.save(tmp_path / "v.npy", x)
    out = tmp_path / "ix"
    args = ["index", "--input", str(tmp_path / "v.npy"), "--output", str(out), "--nlist", "4", "--train-size", "64"]
    err = _err(args, capsys)
    assert f"row {row} holds a NaN or an infinity" in err and "internal error" not in err, err
    assert not out.exists()


def test_a_foreign_output_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "v.npy", clustered(100))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    err = _err(["index", "--input", str(tmp_path / "v.npy"), "--output", str(tmp_path / "mine")], capsys)
    assert "is not a sentkit index" in err and (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    assert "must be >= 0" in _err(
        ["index", "--input", str(tmp_path / "v.npy"), "--output", str(tmp_path / "o"), "--nprobe", "-1"], capsys
    )
    assert "must be >= 1" in _err(
        ["index", "--input", str(tmp_path / "v.npy"), "--output", str(tmp_path / "o"), "--candidates", "0"], capsys
    )


def test_dim_mismatch_is_one_clear_error(built: tuple[Path, Path, np.ndarray]) -> None:
    _, folder, _ = built
    with pytest.raises(vindex.VectorIndexError, match="queries are 8-dimensional, the index .* 32-dimensional"):
        vindex.VectorIndex(folder).search(np.ones((1, 8), np.float32), 3)
    with pytest.raises(vindex.VectorIndexError, match="queries are 8-dimensional"):
        vindex.exact_search(clustered(10), np.ones((1, 8), np.float32), 3)


@pytest.mark.parametrize("change", ["same_size", "grown", "removed"])
def test_a_stale_index_says_how_to_rebuild(change: str, tmp_path: Path) -> None:
    npy = tmp_path / "v.npy"
    np.save(npy, clustered(500, seed=10))
    vindex.build(npy, tmp_path / "ix", progress=False)
    if change == "same_size":
        np.save(npy, clustered(500, seed=11))
    elif change == "grown":
        np.save(npy, clustered(501, seed=10))
    else:
        npy.unlink()
    with pytest.raises(vindex.VectorIndexError) as e:
        vindex.VectorIndex(tmp_path / "ix")
    msg = str(e.value)
    assert "is stale" in msg and f"rebuild it: sentkit index --input {npy} --output {tmp_path / 'ix'}" in msg
    assert "\n" not in msg
    if change != "removed":  # ensure() rebuilds it
        assert vindex.ensure(npy, tmp_path / "ix", progress=False).meta["source"]["sha256"] == sha256_file(npy)


def test_a_damaged_index_file_is_one_line(tmp_path: Path) -> None:
    npy = tmp_path / "v.npy"
    np.save(npy, clustered(500))
    vindex.build(npy, tmp_path / "ix", progress=False)
    (tmp_path / "ix" / "index.faiss").write_bytes(b"torn")
    with pytest.raises(vindex.VectorIndexError, match="cannot be read.*rebuild it: sentkit index"):
        vindex.VectorIndex(tmp_path / "ix")
    with pytest.raises(vindex.VectorIndexError, match="not a sentkit index"):
        vindex.VectorIndex(tmp_path)
