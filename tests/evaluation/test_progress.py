"""`evaluate` shows progress per task and overall, with the right counts."""

from __future__ import annotations

import logging

import pytest

from sentkit.cli.main import main
from sentkit.evaluation import evaluate, load_task
from sentkit.evaluation.progress import EvalProgress

from .conftest import HashEncoder

TASKS = ["MR", "SICKE", "SICKR"]  # SICK-R reuses every sentence SICK-E encoded


def _unique(name: str, data_dir) -> set[str]:
    return set(load_task(name, data_dir).sentences())


def test_counts_per_task_cold_then_warm(senteval_dir, tmp_path):
    bar = EvalProgress(TASKS, tty=False, interval=0.0)
    res = evaluate(HashEncoder(), tasks=TASKS, data_dir=senteval_dir, cache_dir=str(tmp_path), progress=bar)
    assert res["errors"] == {}
    mr, sick = _unique("MR", senteval_dir), _unique("SICKE", senteval_dir)
    assert (bar.tasks["MR"].to_encode, bar.tasks["MR"].encoded, bar.tasks["MR"].from_cache) == (len(mr), len(mr), 0)
    assert (bar.tasks["SICKE"].to_encode, bar.tasks["SICKE"].encoded) == (len(sick), len(sick))
    assert (bar.tasks["SICKR"].to_encode, bar.tasks["SICKR"].reused) == (0, len(sick))
    assert bar.encoded == res["timings"]["sentences_encoded"] == len(mr | sick)
    warm = EvalProgress(TASKS, tty=False)
    res2 = evaluate(HashEncoder(), tasks=TASKS, data_dir=senteval_dir, cache_dir=str(tmp_path), progress=warm)
    assert warm.tasks["MR"].from_cache == len(mr) and warm.tasks["MR"].to_encode == 0
    assert warm.from_cache == res2["timings"]["sentences_from_cache"] == len(mr | sick)
    assert warm.encoded == 0


def test_log_lines_when_not_a_terminal(senteval_dir, caplog):
    """In a log file or a pipe: a line per task and, while encoding, one every `interval` seconds."""
    bar = EvalProgress(["MR"], tty=False, interval=0.0)
    with caplog.at_level(logging.INFO, logger="sentkit.evaluation"):
        evaluate(HashEncoder(), tasks="MR", data_dir=senteval_dir, use_cache=False, progress=bar, encode_batch_size=8)
    lines = [r.getMessage() for r in caplog.records if r.name == "sentkit.evaluation"]
    n = len(_unique("MR", senteval_dir))
    assert f"MR (1/1): {n} sentences to encode, 0 from the cache" in lines[0]
    assert any(f"MR: encoded 8 of {n} sentences" in ln and "left" in ln for ln in lines)


def test_bars_on_a_terminal(senteval_dir, capsys):
    bar = EvalProgress(["MR", "STS12"], tty=True)
    evaluate(HashEncoder(), tasks="MR,STS12", data_dir=senteval_dir, use_cache=False, progress=bar)
    err = capsys.readouterr().err
    assert "evaluate" in err and "2/2" in err and "encoded" in err and "MR encode" in err


def test_disabled_shows_nothing_but_still_counts(senteval_dir, capsys, caplog):
    bar = EvalProgress(["MR"], enabled=False, tty=True)
    with caplog.at_level(logging.INFO, logger="sentkit.evaluation"):
        evaluate(HashEncoder(), tasks="MR", data_dir=senteval_dir, use_cache=False, progress=bar)
    assert capsys.readouterr().err == "" and not [r for r in caplog.records if r.name == "sentkit.evaluation"]
    assert bar.encoded == len(_unique("MR", senteval_dir))


@pytest.mark.parametrize("quiet", [False, True])
def test_the_cli_reports_progress_unless_quiet(senteval_dir, tmp_path, caplog, quiet):
    enc = tmp_path / "enc.py"
    enc.write_text(
        "import numpy as np\n"
        "def f(texts):\n    return np.array([[len(t), 1.0 + t.count('a')] for t in texts], np.float32)\n"
    )
    argv = [
        "evaluate",
        "-m",
        f"{enc}:f",
        "--tasks",
        "MR",
        "--data-dir",
        str(senteval_dir),
        "--no-cache",
        "-o",
        str(tmp_path / "r.json"),
    ]
    with caplog.at_level(logging.INFO):
        assert main(["-q", *argv] if quiet else argv) == 0
    said = any("sentences to encode" in r.getMessage() for r in caplog.records)
    assert said is not quiet
