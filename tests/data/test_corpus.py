from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sentkit.core.io import host_tag
from sentkit.data.corpus import CorpusError, CorpusStats, iter_documents
from sentkit.data.store import LengthRule, TokenStore, is_store, prepare_store
from sentkit.models.hub import load_tokenizer


def test_folder_skips_bad_documents_and_counts_them(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("first document", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("second document", encoding="utf-8")
    (tmp_path / "empty.txt").write_text("   \n\n", encoding="utf-8")
    (tmp_path / "binary.txt").write_bytes(b"\x00\x01\x02 binary")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (tmp_path / "notes.md").write_text("ignored, not .txt")
    stats = CorpusStats()
    docs = list(iter_documents(tmp_path, stats=stats))
    assert [Path(d.id).name for d in docs] == ["a.txt", "b.txt"]
    assert (stats.read, stats.empty, stats.binary, stats.not_utf8) == (2, 1, 1, 1)


def test_jsonl_field_option_and_bad_lines(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    f.write_text('{"body": "one"}\nnot json\n{"body": ""}\n\n{"body": "two"}\n', encoding="utf-8")
    stats = CorpusStats()
    assert [d.text for d in iter_documents(f, field="body", stats=stats)] == ["one", "two"]
    assert stats.bad_json == 1 and stats.empty == 1
    with pytest.raises(CorpusError, match=r"c.jsonl: no record has the text field 'text'.*keys found: \['body'\]") as e:
        list(iter_documents(f))
    assert [fix.settings for fix in e.value.fixes] == [{"text_field": "body"}]


def test_parquet_and_hf_dataset(tmp_path: Path) -> None:
    pq.write_table(pa.table({"content": ["alpha", None, "beta"]}), tmp_path / "c.parquet")
    assert [d.text for d in iter_documents(tmp_path / "c.parquet", field="content")] == ["alpha", "beta"]
    with pytest.raises(CorpusError, match="no column 'text'"):
        list(iter_documents(tmp_path / "c.parquet"))
    import datasets

    datasets.Dataset.from_dict({"text": ["x y", "", "z"]}).save_to_disk(str(tmp_path / "hf"))
    assert [d.text for d in iter_documents(tmp_path / "hf")] == ["x y", "z"]


def test_missing_and_unsupported_corpus(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="does not exist"):
        list(iter_documents(tmp_path / "nope"))
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(CorpusError, match="unsupported file type"):
        list(iter_documents(tmp_path / "x.csv"))
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(CorpusError, match="no .txt files"):
        list(iter_documents(tmp_path / "emptydir"))


def test_store_length_rule_split_and_no_usable_document(tmp_path: Path, tiny_model_dir: Path) -> None:
    tok = load_tokenizer(str(tiny_model_dir))
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "long.txt").write_text(" ".join(["word"] * 1000))
    (corpus / "short.txt").write_text("too short")
    rep = prepare_store(corpus, tok, tmp_path / "s", min_doc_tokens=300, max_doc_tokens=400, show_progress=False)
    store = TokenStore(tmp_path / "s")
    # 1000 tokens -> pieces of 400, 400, 200; the 200 piece and the short doc fail the rule
    assert store.lengths().tolist() == [400, 400]
    assert rep.kept == 2 and rep.too_short == 2
    assert "shorter than 300 tokens" in rep.summary(300)
    with pytest.raises(CorpusError, match=r"num_anchors \* max_span_len \* 2.*max_span_len="):
        prepare_store(corpus, tok, tmp_path / "s2", min_doc_tokens=5000, show_progress=False)
    assert not (tmp_path / "s2").exists()


def test_store_rejects_other_tokenizer(tmp_path: Path, tiny_model_dir: Path) -> None:
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    tok = load_tokenizer(str(tiny_model_dir))
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"text": "word " * 50}) + "\n")
    prepare_store(corpus, tok, tmp_path / "s", min_doc_tokens=10, show_progress=False)
    store = TokenStore(tmp_path / "s")
    store.check_tokenizer(tok, 10)
    # the same vocabulary and rules with other truncation / padding settings (a fresh tokenizer,
    # or another model's copy of the same vocabulary) tokenize alike: the store is fine
    store.check_tokenizer(load_tokenizer(str(tiny_model_dir)), 10)
    store.check_tokenizer(load_tokenizer("all-minilm-l6-v2"), 10)
    rules = json.loads(tok.backend_tokenizer.to_str())
    rules["normalizer"]["lowercase"] = not rules["normalizer"]["lowercase"]
    other = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(rules)))
    with pytest.raises(CorpusError, match="another tokenizer"):
        store.check_tokenizer(other, 10)
    with pytest.raises(CorpusError, match="too short"):
        store.check_tokenizer(tok, 100)


def test_jsonl_record_without_the_field_is_skipped_and_counted(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    f.write_text('{"text": "one"}\n{"title": "no text here"}\n[1, 2]\n{"text": "two"}\n', encoding="utf-8")
    stats = CorpusStats()
    assert [d.text for d in iter_documents(f, stats=stats)] == ["one", "two"]
    assert stats.no_field == 2 and stats.skipped == 2
    assert "2 without the text field" in stats.skipped_text()


def test_no_json_object_at_all_names_the_file(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    f.write_text('"a string"\n[1]\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"c.jsonl: no record has the text field 'text'.*no JSON objects") as e:
        list(iter_documents(f))
    assert e.value.fixes == ()


def test_parquet_missing_column_suggests_a_string_column(tmp_path: Path) -> None:
    pq.write_table(pa.table({"n": [1, 2], "body": ["alpha", "beta"]}), tmp_path / "c.parquet")
    with pytest.raises(CorpusError, match=r"no column 'text' \(columns: \['n', 'body'\]\)") as e:
        list(iter_documents(tmp_path / "c.parquet"))
    assert [fix.settings for fix in e.value.fixes] == [{"text_field": "body"}]


def test_utf16_with_bom_is_decoded_and_nul_text_is_binary(tmp_path: Path) -> None:
    (tmp_path / "u16.txt").write_bytes("caf\u00e9 in UTF-16".encode("utf-16"))
    (tmp_path / "u8bom.txt").write_bytes(b"\xef\xbb\xbfwith a mark")
    (tmp_path / "nul.txt").write_bytes("text\x00more".encode("utf-16"))
    stats = CorpusStats()
    texts = sorted(d.text for d in iter_documents(tmp_path, stats=stats))
    assert texts == ["caf\u00e9 in UTF-16", "with a mark"]
    assert stats.binary == 1


def test_an_unreadable_file_of_a_folder_is_skipped_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.txt").write_text("readable")
    (tmp_path / "b.txt").write_text("locked")
    real = Path.open  # the reader streams a file through Path.open

    def open_(self: Path, *a: Any, **kw: Any) -> Any:
        if self.name == "b.txt":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *a, **kw)

    monkeypatch.setattr(Path, "open", open_)
    stats = CorpusStats()
    assert [d.text for d in iter_documents(tmp_path, stats=stats)] == ["readable"]
    assert stats.unreadable == 1 and "1 unreadable" in stats.skipped_text()


# ----------------------------------------------------------------------------- the store never deletes a user's folder
def _long_corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "long.txt").write_text(" ".join(["word"] * 300))
    return corpus


def test_store_refuses_a_folder_it_did_not_write(tmp_path: Path, tiny_model_dir: Path) -> None:
    tok = load_tokenizer(str(tiny_model_dir))
    corpus = _long_corpus(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    with pytest.raises(OSError, match=r"mine: exists and is not a sentkit store \(it holds thesis.tex\)"):
        prepare_store(corpus, tok, mine, min_doc_tokens=10, show_progress=False)
    assert (mine / "thesis.tex").read_text() == "years of work"
    # a folder with a look-alike meta.json (not a JSON object, or without the marker) is not a store either
    for fake in (b"[1, 2]", b'{"format": "other"}', b"\x00\xff"):
        (mine / "meta.json").write_bytes(fake)
        assert not is_store(mine)
        with pytest.raises(OSError, match="not a sentkit store"):
            prepare_store(corpus, tok, mine, min_doc_tokens=10, show_progress=False)
    assert (mine / "thesis.tex").exists()


def test_store_refuses_a_file_and_a_store_holding_other_files(tmp_path: Path, tiny_model_dir: Path) -> None:
    tok = load_tokenizer(str(tiny_model_dir))
    corpus = _long_corpus(tmp_path)
    (tmp_path / "afile").write_text("keep")
    with pytest.raises(OSError, match="afile: is a file, not a folder"):
        prepare_store(corpus, tok, tmp_path / "afile", min_doc_tokens=10, show_progress=False)
    assert (tmp_path / "afile").read_text() == "keep"
    store = tmp_path / "store"
    prepare_store(corpus, tok, store, min_doc_tokens=10, show_progress=False)
    (store / "notes.txt").write_text("mine")
    with pytest.raises(OSError, match=r"also holds other files \(notes.txt\)"):
        prepare_store(corpus, tok, store, min_doc_tokens=10, show_progress=False)
    assert (store / "notes.txt").exists() and is_store(store)


def test_store_replaces_its_own_store_and_an_empty_folder_and_cleans_leftovers(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    import os
    import stat

    tok = load_tokenizer(str(tiny_model_dir))
    corpus = _long_corpus(tmp_path)
    store = tmp_path / "store"
    store.mkdir()  # an empty folder may be used
    prepare_store(corpus, tok, store, min_doc_tokens=10, show_progress=False)
    first = TokenStore(store).meta["min_doc_tokens"]
    # leftovers of a killed earlier write: the old fixed name and a tagged one of a dead process
    (tmp_path / ".store.tmp").mkdir()
    (tmp_path / ".store.tmp" / "tokens.bin").write_bytes(b"torn")
    (tmp_path / f".store.{host_tag()}-999999999.xyz.tmp").mkdir()  # pid 999999999 is not running
    (tmp_path / ".store.ffffff-1.xyz.tmp").mkdir()  # another host's write may still be running: kept
    prepare_store(corpus, tok, store, min_doc_tokens=20, show_progress=False)
    assert (first, TokenStore(store).meta["min_doc_tokens"]) == (10, 20)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".store.ffffff-1.xyz.tmp", "corpus", "store"]
    old = os.umask(0o022)
    try:
        prepare_store(corpus, tok, store, min_doc_tokens=20, show_progress=False)
    finally:
        os.umask(old)
    assert stat.S_IMODE((store / "tokens.bin").stat().st_mode) == 0o644
    assert stat.S_IMODE(store.stat().st_mode) == 0o755


def test_no_usable_document_suggests_settings_that_keep_documents(tmp_path: Path, tiny_model_dir: Path) -> None:
    tok = load_tokenizer(str(tiny_model_dir))
    corpus = _long_corpus(tmp_path)  # 300 tokens
    with pytest.raises(CorpusError) as e:
        prepare_store(
            corpus,
            tok,
            tmp_path / "s",
            min_doc_tokens=2048,
            show_progress=False,
            rule=LengthRule(num_anchors=2, min_span_len=None),
        )
    (fix,) = e.value.fixes
    assert fix.settings == {"max_span_len": 64} and fix.note == "keeps 1 of 1 documents"
    prepare_store(corpus, tok, tmp_path / "s", min_doc_tokens=2 * 64 * 2, show_progress=False)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".s.")]


def _printed_command(message: str) -> list[str]:
    import re
    import shlex

    (cmd,) = re.findall(r"`(sentkit [^`]+)`", message)
    return shlex.split(cmd)[1:]


def test_store_errors_print_the_prepare_command_that_fixes_them(tmp_path: Path, tiny_model_dir: Path) -> None:
    from sentkit.cli.main import main

    tok = load_tokenizer(str(tiny_model_dir))
    corpus = _long_corpus(tmp_path)
    (corpus / "short.txt").write_text("word " * 50)
    store = tmp_path / "store"
    assert (
        main(
            [
                "prepare",
                "--corpus",
                str(corpus),
                "--out",
                str(store),
                "--model",
                str(tiny_model_dir),
                "--num-anchors",
                "1",
                "--max-span-len",
                "10",
            ]
        )
        == 0
    )
    assert len(TokenStore(store)) == 2
    # a stricter rule than the store was made with: the printed command prepares it for that rule
    with pytest.raises(CorpusError, match="1 documents are too short") as e:
        TokenStore(store).check_tokenizer(tok, 200)
    assert main(_printed_command(str(e.value))) == 0
    TokenStore(store).check_tokenizer(tok, 200)
    assert len(TokenStore(store)) == 1
    # a damaged store (tokens.bin cut short by a full disk or a copy that was stopped)
    data = (store / "tokens.bin").read_bytes()
    (store / "tokens.bin").write_bytes(data[:-4])
    with pytest.raises(CorpusError, match="is damaged") as e:
        TokenStore(store)
    assert main(_printed_command(str(e.value))) == 0
    assert len(TokenStore(store)) == 1 and (store / "tokens.bin").read_bytes() == data
    (store / "offsets.npy").write_bytes(b"garbage")
    with pytest.raises(CorpusError, match="is damaged"):
        TokenStore(store)


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), OSError(28, "No space left on device")])
def test_an_interrupted_prepare_leaves_the_old_store_and_no_temporary(
    stop: BaseException, tmp_path: Path, tiny_model_dir: Path
) -> None:
    tok = load_tokenizer(str(tiny_model_dir))
    corpus = _long_corpus(tmp_path)
    store = tmp_path / "store"
    prepare_store(corpus, tok, store, min_doc_tokens=10, show_progress=False)
    before = {p.name: p.read_bytes() for p in store.iterdir()}

    def tokenizer(*a: object, **kw: object) -> object:
        raise stop

    with pytest.raises(type(stop)):
        prepare_store(corpus, tokenizer, store, min_doc_tokens=10, show_progress=False)
    assert {p.name: p.read_bytes() for p in store.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "store"]


def test_jsonl_with_a_byte_order_mark_keeps_its_first_record(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    f.write_bytes(b'\xef\xbb\xbf{"text": "first"}\n{"text": "second"}\n')
    stats = CorpusStats()
    assert [d.text for d in iter_documents(f, stats=stats)] == ["first", "second"] and stats.bad_json == 0
