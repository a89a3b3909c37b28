"""The run folder: never clobber, one process at a time, append-only logs, resume checks, torn
checkpoints, leftovers of a kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from sentkit.cli.main import main as cli
from sentkit.training.checkpoint import CHECKPOINT, PREVIOUS, CheckpointError, load_checkpoint
from sentkit.training.loop import train
from sentkit.training.metrics import read_metrics
from sentkit.training.recipes.declutr import Declutr
from sentkit.training.rundir import RunDirError
from support.training import small_config


@pytest.fixture()
def store(tiny_corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> Path:
    from support.training import prepare

    return prepare(tiny_corpus, tiny_model_dir, tmp_path / "store", min_doc_tokens=2 * 32 * 2)


def _cfg(store: Path, out: Path, model_dir: Path, **kw: object) -> object:
    kw.setdefault("model", str(model_dir))
    return small_config(str(kw.pop("corpus", store)), str(out), **kw)


def test_refuses_a_folder_of_user_files(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    for kw in ({}, {"overwrite": True}, {"resume": True}):
        with pytest.raises(RunDirError, match="did not write.*thesis.tex"):
            train(_cfg(store, out, tiny_model_dir, max_steps=1, **kw), Declutr)
    assert (out / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in out.iterdir()) == ["thesis.tex"]


def test_refuses_a_file_as_out(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("x")
    with pytest.raises(RunDirError, match="is a file"):
        train(_cfg(store, f, tiny_model_dir, max_steps=1), Declutr)
    assert f.read_text() == "x"


@pytest.mark.parametrize("method", ["declutr", "tfidf"])
def test_an_out_under_a_file_exits_2_in_one_line(
    method: str,
    store: Path,
    tiny_corpus: Path,
    tiny_model_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("x")
    corpus, model = (store, ["--model", str(tiny_model_dir)]) if method == "declutr" else (tiny_corpus, [])
    rc = cli(["-q", "train", "--method", method, "--corpus", str(corpus), "--out", str(f / "run"), *model])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err == [
        f"sentkit train: error: --out {f / 'run'}: {f} is a file, not a folder; choose a --out that is not under a file"
    ]
    assert f.read_text() == "x"


def test_earlier_run_needs_resume_or_overwrite(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    train(_cfg(store, out, tiny_model_dir, max_steps=1), Declutr)
    with pytest.raises(RunDirError, match="--resume.*--overwrite"):
        train(_cfg(store, out, tiny_model_dir, max_steps=1), Declutr)
    (out / "notes.md").write_text("mine")  # a user's file inside the run folder
    with pytest.raises(RunDirError, match="notes.md"):
        train(_cfg(store, out, tiny_model_dir, max_steps=1, overwrite=True), Declutr)
    (out / "notes.md").unlink()
    train(_cfg(store, out, tiny_model_dir, max_steps=2, overwrite=True), Declutr)
    assert [r["step"] for r in read_metrics(out / "metrics.csv")] == [1, 2]  # a fresh history


def test_resume_refuses_another_method(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    from sentkit.training.rundir import write_run

    out = tmp_path / "run"
    train(_cfg(store, out, tiny_model_dir, max_steps=1), Declutr)
    write_run(out, "simcse", {})
    with pytest.raises(RunDirError, match="simcse run, not declutr"):
        train(_cfg(store, out, tiny_model_dir, max_steps=2, resume=True), Declutr)


def test_resume_refuses_changed_settings_and_names_them(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    train(_cfg(store, out, tiny_model_dir, max_steps=4, checkpoint_every=2), Declutr, stop_at=2)
    with pytest.raises(RunDirError, match=r"lr: 5e-05 -> 0\.001; max_steps: 4 -> 6") as e:
        train(_cfg(store, out, tiny_model_dir, max_steps=6, lr=1e-3, checkpoint_every=2, resume=True), Declutr)
    assert "--allow-config-change" in str(e.value)
    for key, value in (("num_anchors", 1), ("max_span_len", 16), ("corpus", str(tmp_path)), ("model", "x")):
        with pytest.raises(RunDirError, match=key):
            train(
                _cfg(store, out, tiny_model_dir, max_steps=4, checkpoint_every=2, resume=True, **{key: value}), Declutr
            )
    # bookkeeping may change; an accepted change is applied
    train(_cfg(store, out, tiny_model_dir, max_steps=4, checkpoint_every=3, log_every=2, resume=True), Declutr)
    out2 = tmp_path / "run2"
    train(_cfg(store, out2, tiny_model_dir, max_steps=4, checkpoint_every=2), Declutr, stop_at=2)
    train(
        _cfg(store, out2, tiny_model_dir, max_steps=5, checkpoint_every=2, resume=True, allow_config_change=True),
        Declutr,
    )
    assert torch.load(out2 / CHECKPOINT, weights_only=False)["step"] == 5


def test_a_key_added_since_the_run_started_is_no_change_at_its_default(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A run saved before a method gained a key (DeCLUTR's mask_token) resumes; the key set otherwise is a change,
    and a key the saved run had that the method lost is one too."""
    import dataclasses

    from sentkit.training.config import config_diff

    cfg = _cfg(tmp_path, tmp_path / "o", tiny_model_dir, max_steps=4)
    saved = dataclasses.asdict(cfg)
    del saved["mask_token"]
    assert config_diff(saved, cfg) == []
    assert config_diff(saved, dataclasses.replace(cfg, mask_token="eos")) == ["mask_token: '(absent)' -> 'eos'"]
    assert config_diff({**saved, "gone": 1}, cfg) == ["gone: 1 -> '(absent)'"]


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage"])
def test_torn_checkpoint_falls_back_to_the_previous_one(
    store: Path, tiny_model_dir: Path, tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "run"
    train(_cfg(store, out, tiny_model_dir, max_steps=6, checkpoint_every=2), Declutr, stop_at=4)
    assert torch.load(out / PREVIOUS, weights_only=False)["step"] == 2
    latest = out / CHECKPOINT
    data = latest.read_bytes()
    latest.write_bytes({"empty": b"", "truncated": data[: len(data) // 2], "garbage": b"\x00junk" * 100}[damage])
    state, path = load_checkpoint(out)
    assert path == out / PREVIOUS and state["step"] == 2
    assert "truncated or corrupt" in caplog.text
    assert not latest.exists(), "the torn file is removed, so it can never replace the good one"
    train(_cfg(store, out, tiny_model_dir, max_steps=6, checkpoint_every=2, resume=True), Declutr)
    assert torch.load(latest, weights_only=False)["step"] == 6


def test_no_usable_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / CHECKPOINT).write_bytes(b"")
    with pytest.raises(CheckpointError, match="empty file.*--overwrite"):
        load_checkpoint(tmp_path)


def test_metrics_are_append_only(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """A resume appends; it never rewrites what the killed run logged (a kill right after --resume
    used to truncate the history). A torn last row is ended, not glued to the next one."""
    out = tmp_path / "run"
    train(_cfg(store, out, tiny_model_dir, max_steps=6, checkpoint_every=2), Declutr, stop_at=3)
    before = (out / "metrics.csv").read_bytes()
    with (out / "metrics.csv").open("ab") as f:
        f.write(b"4,12.5")  # the kill came while row 4 was written
    train(_cfg(store, out, tiny_model_dir, max_steps=6, checkpoint_every=2, resume=True), Declutr)
    after = (out / "metrics.csv").read_bytes()
    assert after.startswith(before + b"4,12.5\n")
    assert [int(r["step"]) for r in read_metrics(out / "metrics.csv")] == [1, 2, 3, 4, 5, 6]
    log = (out / "train.log").read_text()
    assert log.count("resumed from") == 1


def test_leftover_temporaries_are_removed(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    train(_cfg(store, out, tiny_model_dir, max_steps=4, checkpoint_every=2), Declutr, stop_at=2)
    dead = 999_999  # no such process
    from sentkit.core.io import temp_prefix

    stale = [
        out / "checkpoint" / (temp_prefix("state.pt").replace(f"-{os.getpid()}.", f"-{dead}.") + "x.tmp"),
        out / (temp_prefix("train_config.json").replace(f"-{os.getpid()}.", f"-{dead}.") + "y.tmp"),
    ]
    for p in stale:
        p.write_bytes(b"half")
    train(_cfg(store, out, tiny_model_dir, max_steps=4, checkpoint_every=2, resume=True), Declutr)
    assert not any(p.exists() for p in stale)


def test_outputs_get_the_normal_file_mode(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        out = train(_cfg(store, tmp_path / "run", tiny_model_dir, max_steps=1), Declutr)
    finally:
        os.umask(old)
    for name in (CHECKPOINT, "train_config.json", "run.json", "sentkit.json", "model.safetensors"):
        assert (out / name).stat().st_mode & 0o777 == 0o644, name


def test_second_training_on_the_same_folder_refuses(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """While one process trains into --out, another refuses at once; a killed holder leaves no
    stuck lock."""
    out = tmp_path / "run"
    args = [
        "train",
        "--corpus",
        str(store),
        "--out",
        str(out),
        "--model",
        str(tiny_model_dir),
        "--max-steps",
        "100000",
        "--set",
        "batch_size=4",
        "--set",
        "min_span_len=8",
        "--set",
        "max_span_len=32",
        "--set",
        "checkpoint_every=1",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(
        [sys.executable, "-m", "sentkit.cli.main", "-q", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.time() + 120
        while not (out / CHECKPOINT).exists():
            assert first.poll() is None, first.stderr.read().decode() if first.stderr else ""
            assert time.time() < deadline
            time.sleep(0.2)
        rc = cli([*args, "--resume"])
        assert rc == 2
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # the kernel dropped the dead holder's lock: a resume now runs
    assert cli(["-q", *args[:8], "1", *args[9:], "--resume", "--allow-config-change"]) == 0


def test_cli_overwrite_and_error_line(
    store: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = [
        "-q",
        "train",
        "--corpus",
        str(store),
        "--out",
        str(out),
        "--model",
        str(tiny_model_dir),
        "--max-steps",
        "1",
        "--set",
        "batch_size=4",
        "--set",
        "min_span_len=8",
        "--set",
        "max_span_len=32",
    ]
    assert cli(args) == 0
    capsys.readouterr()
    assert cli(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sentkit train: error: ") and "--overwrite" in err[0]
    assert cli([*args, "--overwrite"]) == 0


def test_hill_method_folder_is_guarded_too(
    tmp_path: Path, tiny_corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tfidf"
    args = ["-q", "train", "--method", "tfidf", "--corpus", str(tiny_corpus), "--out", str(out)]
    assert cli(args) == 0
    assert cli(args) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert cli([*args, "--overwrite"]) == 0
    user = tmp_path / "user"
    user.mkdir()
    (user / "data.csv").write_text("1,2")
    assert cli(["-q", "train", "--method", "tfidf", "--corpus", str(tiny_corpus), "--out", str(user)]) == 2
    assert (user / "data.csv").read_text() == "1,2"


def test_too_few_documents_suggests_fixes_that_work(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error names the count and prints flags that, run as printed, train."""
    import re
    import shlex

    from support import make_docs

    corpus = tmp_path / "three"
    corpus.mkdir()
    for i, text in enumerate(make_docs(3, 200)):
        (corpus / f"d{i}.txt").write_text(text)
    base = [
        "-q",
        "train",
        "--corpus",
        str(corpus),
        "--model",
        str(tiny_model_dir),
        "--max-steps",
        "1",
        "--set",
        "min_span_len=8",
        "--set",
        "max_span_len=32",
    ]
    assert cli([*base, "--out", str(tmp_path / "fail")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "fewer than batch_size=16" in err
    fixes = re.findall(r"`([^`]+)`", err)
    assert fixes == ["--set batch_size=3"], err  # 3 documents of about 200 tokens cannot give 16 pieces
    for k, fix in enumerate(fixes):
        assert cli([*base, "--out", str(tmp_path / f"fixed{k}"), *shlex.split(fix)]) == 0, fix
        capsys.readouterr()
    # longer documents: cutting them into pieces of the minimum length is offered too, and works
    for i, text in enumerate(make_docs(3, 1500, seed=1)):
        (corpus / f"d{i}.txt").write_text(text)
    assert cli([*base, "--out", str(tmp_path / "fail2"), "--set", "max_doc_tokens=none"]) == 2
    err = capsys.readouterr().err.strip()
    fixes = re.findall(r"`([^`]+)`", err)
    assert fixes == ["--set batch_size=3", "--set max_doc_tokens=128"], err
    assert cli([*base, "--out", str(tmp_path / "fixed-cut"), *shlex.split(fixes[1])]) == 0


def test_no_lock_file_in_a_refused_folder_and_resume_before_any_checkpoint(
    store: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / "a.txt").write_text("mine")
    with pytest.raises(RunDirError):
        train(_cfg(store, user, tiny_model_dir, max_steps=1), Declutr)
    assert sorted(p.name for p in user.iterdir()) == ["a.txt"], "not even a .lock is left"
    # a run killed before its first checkpoint: --resume starts it from step 0
    out = tmp_path / "run"
    train(_cfg(store, out, tiny_model_dir, max_steps=4, checkpoint_every=10), Declutr, stop_at=2)
    assert not (out / CHECKPOINT).exists()
    train(_cfg(store, out, tiny_model_dir, max_steps=4, checkpoint_every=10, resume=True), Declutr)
    assert torch.load(out / CHECKPOINT, weights_only=False)["step"] == 4


def test_prepare_only_leaves_a_run_that_starts_at_once(
    tiny_corpus: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`train --prepare-only` claims the folder, trains MLM's vocabulary and prepares the store, and
    stops; the run it leaves starts from step 0 with --resume, reusing both. A method with nothing to
    prepare refuses the flag."""
    import json

    out = tmp_path / "mlm"
    args = [
        "-q",
        "train",
        "--method",
        "mlm",
        "--corpus",
        str(tiny_corpus),
        "--out",
        str(out),
        "--model",
        str(tiny_model_dir),
        "--max-steps",
        "2",
        "--set",
        "from_scratch=true",
        "--set",
        "train_tokenizer=true",
        "--set",
        "vocab_size=300",
        "--set",
        "seq_len=32",
        "--set",
        "batch_size=4",
    ]
    assert cli([*args, "--prepare-only"]) == 0
    assert "prepared" in capsys.readouterr().out
    assert json.loads((out / "run.json").read_text())["status"] == "prepared"
    assert (out / "tokenizer" / "tokenizer.json").is_file() and (out / "prepared" / "meta.json").is_file()
    assert not (out / "checkpoint").exists() and not (out / "sentkit.json").exists()
    stamps = [(p, p.stat().st_mtime_ns) for p in (out / "tokenizer" / "tokenizer.json", out / "prepared" / "meta.json")]
    assert cli([*args, "--resume"]) == 0
    assert all(p.stat().st_mtime_ns == t for p, t in stamps)  # reused, not made again
    assert "starting the run prepared in" in (out / "train.log").read_text()
    assert (out / "sentkit.json").is_file()
    capsys.readouterr()
    assert (
        cli(
            [
                "-q",
                "train",
                "--method",
                "tfidf",
                "--corpus",
                str(tiny_corpus),
                "--out",
                str(tmp_path / "t"),
                "--prepare-only",
            ]
        )
        == 2
    )
    assert "does not take --prepare-only" in capsys.readouterr().err
