from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sentkit.data.sentences import (
    Vocabulary,
    read_corpus,
    split_sentences,
    tokenize,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One. Two! Three?", ["One.", "Two!", "Three?"]),
        ("Mr. Knightley came. He sat.", ["Mr. Knightley came.", "He sat."]),
        ("J. R. Smith wrote it. Then", ["J. R. Smith wrote it.", "Then"]),
        ("equal to her mother's. She left.", ["equal to her mother's.", "She left."]),
        ('He said "No." Then left.', ['He said "No."', "Then left."]),
        ("“Stop!” she cried. e.g. this", ["“Stop!” she cried. e.g. this"]),
        ("A line\nwrapped here.\n\nNew paragraph", ["A line wrapped here.", "New paragraph"]),
        ("no end punctuation\n\n\n", ["no end punctuation"]),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_tokenize_lowercases_and_splits_punctuation() -> None:
    assert tokenize("“Don’t,” said _Emma_.") == ['"', "don't", ",", '"', "said", "emma", "."]
    assert tokenize("Hello World", lowercase=False) == ["Hello", "World"]
    assert tokenize("“Don’t,” said _Emma_ -- 42.", punctuation=False) == ["don't", "said", "emma", "42"]


def test_without_punctuation_keeps_sentence_slots() -> None:
    c = read_corpus(["Hello, world.\n\n...\n\nAgain!"], progress=False)
    d = c.without_punctuation()
    assert len(d) == len(c) == 3 and d.doc_ids.tolist() == [0, 0, 0]
    assert [d.sentence(i) for i in range(3)] == [["hello", "world"], [], ["again"]]
    assert d.word_counts() == {"hello": 1, "world": 1, "again": 1}


def test_read_corpus_keeps_document_order(corpus_dir) -> None:  # type: ignore[no-untyped-def]
    docs = ["Aa bb. Cc dd.", "Ee ff. Gg hh. Ii jj."]
    c = read_corpus(docs, progress=False)
    assert [c.sentence(i) for i in range(len(c))] == [
        ["aa", "bb", "."],
        ["cc", "dd", "."],
        ["ee", "ff", "."],
        ["gg", "hh", "."],
        ["ii", "jj", "."],
    ]
    assert c.doc_ids.tolist() == [0, 0, 1, 1, 1]
    assert c.n_tokens == 15
    # a folder corpus goes through iter_documents, files sorted
    c2 = read_corpus(corpus_dir, progress=False, max_sentences=7)
    assert len(c2) == 7 and c2.doc_ids.max() == 0


def test_vocabulary_min_count_order_and_roundtrip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    v = Vocabulary(min_count=2, specials=("<pad>", "<unk>")).fit({"b": 3, "a": 3, "c": 5, "d": 1})
    assert v.words_ == ["<pad>", "<unk>", "c", "a", "b"]
    assert "d" not in v and v.unk_id == 1
    assert v.encode(["c", "d", "a"]) == [2, 3]
    assert v.encode(["c", "d"], unk=True) == [2, 1]
    assert Vocabulary(max_size=2).fit({"x": 1, "y": 2, "z": 3}).words_ == ["z", "y"]
    v.save(tmp_path / "v.tsv")
    w = Vocabulary.load(tmp_path / "v.tsv")
    assert w.words_ == v.words_ and w.counts_.tolist() == v.counts_.tolist()
    with pytest.raises(ValueError, match="min_count"):
        Vocabulary(min_count=0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=6), min_size=1, max_size=8),
    st.integers(1, 4),
    st.booleans(),
)
def test_encode_with_matches_loop(sents: list[list[str]], min_count: int, unk: bool) -> None:
    docs = [" ".join(s) + "." for s in sents]  # one sentence per document
    c = read_corpus(docs, progress=False)
    specials = ("<unk>",) if unk else ()
    v = Vocabulary(min_count=min_count, specials=specials).fit(c)
    tokens, offsets = c.encode_with(v, unk=unk)
    expected = [v.encode(c.sentence(i), unk=unk) for i in range(len(c))]
    got = [tokens[offsets[i] : offsets[i + 1]].tolist() for i in range(len(c))]
    assert got == expected
    assert offsets.dtype == np.int64 and tokens.dtype == np.int32
