"""Every fix an error message suggests is a command that works as printed: the tests take the flags
out of the message, add them to the command that failed, and run it again."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from sentkit.cli.main import build_parser, command_parser, main, render_fix
from sentkit.data.corpus import Fix
from support import make_docs


def _suggested(err: str) -> list[list[str]]:
    """The flags of each `...` alternative after 'rerun with' in the error line."""
    (line,) = [ln for ln in err.splitlines() if ": error: " in ln]
    m = re.search(r"rerun with (.*)$", line)
    assert m, f"no suggestion in: {line}"
    return [shlex.split(s) for s in re.findall(r"`([^`]+)`", m.group(1))]


def _rerun_with_fix(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(argv) == 2
    fixes = _suggested(capsys.readouterr().err)
    assert fixes
    fixed = argv + fixes[0]
    assert main(fixed) == 0, capsys.readouterr().err
    return fixes[0]


def _short_docs(tmp_path: Path, n: int = 20, words: int = 150) -> Path:
    folder = tmp_path / "short"
    folder.mkdir()
    for i, text in enumerate(make_docs(n, words)):
        (folder / f"d{i:02d}.txt").write_text(text)
    return folder


def _jsonl_body(tmp_path: Path, n: int = 20) -> Path:
    f = tmp_path / "c.jsonl"
    f.write_text("".join(json.dumps({"id": i, "body": t}) + "\n" for i, t in enumerate(make_docs(n, 150))))
    return f


def test_prepare_no_usable_document(tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "prepare",
        "--corpus",
        str(_short_docs(tmp_path)),
        "--out",
        str(tmp_path / "s"),
        "--model",
        str(tiny_model_dir),
    ]
    assert _rerun_with_fix(argv, capsys)[0] == "--max-span-len"


def test_prepare_jsonl_without_the_text_field(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "prepare",
        "--corpus",
        str(_jsonl_body(tmp_path)),
        "--out",
        str(tmp_path / "s"),
        "--model",
        str(tiny_model_dir),
        "--max-span-len",
        "32",
    ]
    assert _rerun_with_fix(argv, capsys) == ["--text-field", "body"]


def test_prepare_max_doc_tokens_below_the_rule(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "prepare",
        "--corpus",
        str(_short_docs(tmp_path)),
        "--out",
        str(tmp_path / "s"),
        "--model",
        str(tiny_model_dir),
        "--max-span-len",
        "16",
        "--max-doc-tokens",
        "10",
    ]
    assert _rerun_with_fix(argv, capsys) == ["--max-doc-tokens", "64"]


def test_spans_no_document_long_enough(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["spans", "--corpus", str(_short_docs(tmp_path, 3)), "--model", str(tiny_model_dir), "--num", "1"]
    assert _rerun_with_fix(argv, capsys)[0] == "--max-span-len"


def test_embed_jsonl_without_the_text_field(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "embed",
        "--model",
        str(tiny_model_dir),
        "--input",
        str(_jsonl_body(tmp_path, 3)),
        "--output",
        str(tmp_path / "v.npy"),
    ]
    assert _rerun_with_fix(argv, capsys) == ["--text-field", "body"]


def test_train_no_usable_document(tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "train",
        "--corpus",
        str(_short_docs(tmp_path)),
        "--out",
        str(tmp_path / "run"),
        "--model",
        str(tiny_model_dir),
        "--max-steps",
        "1",
        "--set",
        "progress=false",
    ]
    fix = _rerun_with_fix(argv, capsys)
    assert fix[0] == "--set" and fix[1].startswith("max_span_len=")


def test_train_suggestions_work_in_a_fresh_folder(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The suggested flags are right for train in a fresh folder too."""
    base = ["--model", str(tiny_model_dir), "--max-steps", "1", "--set", "progress=false"]
    argv = ["train", "--corpus", str(_short_docs(tmp_path)), "--out", str(tmp_path / "run"), *base]
    assert main(argv) == 2
    (fix, *_) = _suggested(capsys.readouterr().err)
    assert main(["train", "--corpus", str(tmp_path / "short"), "--out", str(tmp_path / "run2"), *base, *fix]) == 0


def test_train_jsonl_without_the_text_field(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "train",
        "--corpus",
        str(_jsonl_body(tmp_path)),
        "--out",
        str(tmp_path / "run"),
        "--model",
        str(tiny_model_dir),
        "--max-steps",
        "1",
        "--set",
        "progress=false",
        "--set",
        "max_span_len=32",
        "--set",
        "min_span_len=8",
    ]
    assert _rerun_with_fix(argv, capsys) == ["--set", "text_field=body"]


def test_a_fix_is_rendered_for_the_command_that_ran() -> None:
    parser = build_parser()
    fix = Fix({"text_field": "body", "max_span_len": 64})
    assert render_fix(fix, command_parser(parser, "prepare")) == "--text-field body --max-span-len 64"
    assert render_fix(fix, command_parser(parser, "train")) == "--set text_field=body --set max_span_len=64"
    assert render_fix(Fix({"text_field": "my body"}), command_parser(parser, "train")) == "--set 'text_field=my body'"
    # a command without such a setting gets the plain key=value of the message, never a wrong flag
    assert render_fix(fix, command_parser(parser, "neighbours")) is None
