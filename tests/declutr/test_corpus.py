from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sentkit.data.corpus import CorpusError, CorpusStats, iter_documents
from sentkit.data.store import TokenStore, prepare_store
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
    with pytest.raises(CorpusError, match=r"c.jsonl, line 1: no field 'text'.*--text-field"):
        list(iter_documents(f))


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
    tok = load_tokenizer(str(tiny_model_dir))
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"text": "word " * 50}) + "\n")
    prepare_store(corpus, tok, tmp_path / "s", min_doc_tokens=10, show_progress=False)
    other = load_tokenizer("all-minilm-l6-v2")
    store = TokenStore(tmp_path / "s")
    store.check_tokenizer(tok, 10)
    if other.backend_tokenizer.to_str() != tok.backend_tokenizer.to_str():
        with pytest.raises(CorpusError, match="another tokenizer"):
            store.check_tokenizer(other, 10)
    with pytest.raises(CorpusError, match="too short"):
        store.check_tokenizer(tok, 100)
