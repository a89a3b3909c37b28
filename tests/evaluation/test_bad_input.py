"""Hostile but realistic input to `sentkit evaluate` / `report` / `data`: unwritable outputs,
broken task files, broken results files, encoders that fail. Never a traceback, never a score
from garbage, never lost results."""

from __future__ import annotations

import errno
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from sentkit.cli.main import main
from sentkit.evaluation import evaluate, load_task
from sentkit.evaluation.tasks import TaskDataError

from .conftest import HashEncoder, write_encoder


@pytest.fixture()
def encoder(tmp_path: Path) -> str:
    """An encoder file for --model."""
    return write_encoder(tmp_path)


def _evaluate(senteval_dir: Path, model: str, *extra: str) -> int:
    return main(
        ["-q", "evaluate", "-m", model, "--tasks", "MR,STS12", "--data-dir", str(senteval_dir), "--no-cache", *extra]
    )


# -- outputs -----------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--output", "--markdown", "--plot"])
def test_an_unwritable_output_stops_before_any_work(senteval_dir, tmp_path, encoder, capsys, monkeypatch, flag):
    import sentkit.evaluation.runner as runner

    def no_work(*args, **kwargs):
        raise AssertionError("evaluation started although an output cannot be written")

    monkeypatch.setattr(runner, "load_task", no_work)
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    args = ["-o", str(tmp_path / "r.json")] if flag != "--output" else []
    rc = _evaluate(senteval_dir, encoder, *args, flag, str(blocker / "out.x"))
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("sentkit evaluate: error: ")
    assert flag in err and "is a file, not a folder" in err


def test_an_output_that_is_a_folder_is_refused_up_front(senteval_dir, tmp_path, encoder, capsys):
    rc = _evaluate(senteval_dir, encoder, "-o", str(tmp_path))
    err = capsys.readouterr().err
    assert rc == 2 and "is a directory" in err and "Traceback" not in err


def test_results_are_kept_when_the_final_write_fails(senteval_dir, tmp_path, encoder, capsys, monkeypatch):
    """The disk fills up (or the folder turns read-only) while the evaluation runs."""
    import sentkit.core.io

    out = tmp_path / "r.json"
    real = sentkit.core.io.atomic_write_text

    def fail_on_output(path, text):
        if Path(path) == out:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, text)

    monkeypatch.setattr(sentkit.core.io, "atomic_write_text", fail_on_output)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    rc = _evaluate(senteval_dir, encoder, "-o", str(out))
    cap = capsys.readouterr()
    assert rc == 1 and not out.exists()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0] and "saved to" in lines[0]
    kept = Path(lines[0].rsplit("saved to ", 1)[1])
    assert kept.parent == tmp_path / "tmp"
    res = json.loads(kept.read_text())
    assert set(res["results"]) == {"MR", "STS12"} and "| MR |" in cap.out


def test_an_undefined_score_is_a_task_error_and_the_json_stays_valid(senteval_dir, monkeypatch):
    """A protocol that comes out NaN (a headline NaN, or a NaN detail) never reaches the file as NaN."""
    from sentkit.evaluation import protocols

    nan = float("nan")
    monkeypatch.setattr(
        protocols,
        "sts_scores",
        lambda subsets: {
            "x": {"pearson": nan, "spearman": nan, "nsamples": 3},
            "all": {
                "pearson": {"mean": nan, "wmean": nan},
                "spearman": {"mean": nan, "wmean": nan},
                "concatenated": {"pearson": nan, "spearman": nan},
            },
        },
    )
    real = protocols.inner_kfold
    monkeypatch.setattr(protocols, "inner_kfold", lambda *a, **k: {**real(*a, **k), "devacc": nan})
    res = evaluate(HashEncoder(), tasks="MR,STS12", data_dir=senteval_dir, use_cache=False, progress=False)
    assert "STS12" not in res["results"] and "undefined" in res["errors"]["STS12"]
    assert res["results"]["MR"]["devacc"] is None  # a NaN detail is null
    json.dumps(res, allow_nan=False)  # no NaN anywhere


# -- encoders that misbehave --------------------------------------------------------------------
class Raising:
    def encode(self, texts):
        if any(t.startswith("trec") for t in texts):
            raise RuntimeError("CUDA out of memory")
        return HashEncoder().encode(texts)


@pytest.mark.parametrize(
    "enc,match",
    [
        (Raising(), "encoder raised RuntimeError: CUDA out of memory"),
        (lambda texts: np.zeros((len(texts), 0), np.float32), "dim 0"),
        (lambda texts: [["a", "b"]] * len(texts), "could not convert string to float"),
        (lambda texts: None, "shape"),
        (lambda texts: np.full((len(texts), 3), np.inf), "NaN or inf"),
    ],
)
def test_an_encoder_that_fails_gives_a_per_task_error_never_a_score(senteval_dir, enc, match):
    res = evaluate(enc, tasks="TREC,STS13", data_dir=senteval_dir, use_cache=False, progress=False)
    assert "TREC" not in res["results"] and match in res["errors"]["TREC"]
    assert "task TREC" in res["errors"]["TREC"]
    if isinstance(enc, Raising):
        assert "STS13" in res["results"]  # the other task still ran


# -- task files -----------------------------------------------------------------------------------
def _copy(senteval_dir: Path, tmp_path: Path, folder: str) -> Path:
    d = tmp_path / "data"
    shutil.copytree(senteval_dir / folder, d / folder)
    return d


@pytest.mark.parametrize(
    "mangle,match",
    [
        (lambda p: p.write_bytes(p.read_text(encoding="utf-8").encode("utf-16")), "UTF-16"),
        (lambda p: p.write_bytes(p.read_bytes()[:40] + b"\x00\x00" + p.read_bytes()[40:]), "NUL bytes"),
        (lambda p: p.write_bytes(p.read_bytes() + b"\xff\xfe broken\t1\n"), "not utf-8 text"),
        (lambda p: p.write_bytes(p.read_bytes() + b"a line cut short"), "line 31"),
        (lambda p: p.write_bytes(p.read_bytes() + b"a sentence\tnot-a-label\n"), "line 31"),
    ],
)
def test_a_broken_task_file_names_the_file_line_and_fix(senteval_dir, tmp_path, mangle, match):
    d = _copy(senteval_dir, tmp_path, "SST2")
    f = d / "SST2" / "sentiment-train"
    mangle(f)
    with pytest.raises(TaskDataError, match=match) as e:
        load_task("SST2", d)
    assert str(f) in str(e.value) and "sentkit data download SST2" in str(e.value)
    res = evaluate(HashEncoder(), tasks="SST2", data_dir=d, use_cache=False, progress=False)
    assert res["results"] == {} and match in res["errors"]["SST2"]


def test_latin1_task_file_with_nul_bytes_is_refused(senteval_dir, tmp_path):
    """latin-1 decodes any byte: without the check a UTF-16 MR file would be scored as garbage."""
    d = _copy(senteval_dir, tmp_path, "MR")
    p = d / "MR" / "rt-polarity.pos"
    p.write_bytes(p.read_text(encoding="latin-1").encode("utf-16-le"))  # no BOM: only NULs give it away
    with pytest.raises(TaskDataError, match="NUL bytes"):
        load_task("MR", d)


def test_a_truncated_file_is_flagged_by_its_size(senteval_dir, tmp_path, monkeypatch, capsys):
    from sentkit.evaluation import data as data_mod

    d = _copy(senteval_dir, tmp_path, "MR")
    sizes = {f: (d / "MR" / f).stat().st_size for f in ("rt-polarity.pos", "rt-polarity.neg")}
    monkeypatch.setitem(data_mod.SOURCES, "MR", [(f, "u", None, n) for f, n in sizes.items()])
    assert data_mod.size_mismatches("MR", d) == []
    p = d / "MR" / "rt-polarity.neg"
    p.write_bytes(p.read_bytes()[: sizes["rt-polarity.neg"] // 2])  # cut at a line or not: still parses
    assert len(data_mod.size_mismatches("MR", d)) == 1
    res = evaluate(HashEncoder(), tasks="MR", data_dir=d, use_cache=False, progress=False)
    assert "truncated or changed" in res["warnings"]["MR"][0]
    assert main(["data", "check", "--data-dir", str(d)]) == 0
    out = capsys.readouterr().out
    assert "CHANGED" in out and f"sentkit data download MR --data-dir {d} --force" in out


@pytest.mark.parametrize(
    "tasks,match", [("", "no task given"), (" , ", "no task given"), ("MR,Nope", "unknown task 'Nope'")]
)
def test_bad_task_lists_are_usage_errors(senteval_dir, tmp_path, encoder, capsys, tasks, match):
    rc = main(
        ["evaluate", "-m", encoder, "--tasks", tasks, "--data-dir", str(senteval_dir), "-o", str(tmp_path / "r.json")]
    )
    err = capsys.readouterr().err
    assert rc == 2 and match in err and err.count("\n") == 1
    assert not (tmp_path / "r.json").exists()


def test_threads_must_be_positive(senteval_dir, tmp_path, encoder, capsys):
    assert _evaluate(senteval_dir, encoder, "--threads", "0", "-o", str(tmp_path / "r.json")) == 2
    assert "--threads must be >= 1" in capsys.readouterr().err


# -- results files for `sentkit report` -------------------------------------------------------------
GOOD = {"model": {"name": "m"}, "config": {"preset": "prototyping"}, "results": {"MR": {"acc": 70.0}}}


@pytest.mark.parametrize(
    "content,match",
    [
        (b"", "not a JSON results file"),
        (b"[1, 2]", "not a sentkit results file"),
        (b'{"results": [1]}', "not a sentkit results file"),
        (json.dumps(GOOD).encode("utf-16"), "not UTF-8"),
        (b"\x00\x01\x02garbage", "not a JSON results file"),
        (json.dumps({**GOOD, "results": {"MR": {"accuracy": 70.0}}}).encode(), "task MR: malformed results"),
        (json.dumps({**GOOD, "results": {"STS12": {"all": "x"}}}).encode(), "task STS12: malformed"),
        (json.dumps({**GOOD, "model": "m"}).encode(), "'model' is not an object"),
        (json.dumps({**GOOD, "timings": {"total_s": "soon"}}).encode(), "total_s"),
    ],
)
def test_report_refuses_a_file_that_is_not_results(tmp_path, capsys, content, match):
    p = tmp_path / "r.json"
    p.write_bytes(content)
    assert main(["report", str(p)]) == 2
    err = capsys.readouterr().err
    assert match in err and str(p) in err and err.count("\n") == 1


def test_report_shows_a_nan_score_as_missing(tmp_path, capsys, caplog):
    nan = tmp_path / "nan.json"
    nan.write_text(
        '{"model": {"name": "n"}, "config": {"preset": "p"}, "results": {"MR": {"acc": NaN}, "TREC": {"acc": 60.0}}}'
    )
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD))
    assert main(["report", str(nan), str(good)]) == 0
    out = capsys.readouterr().out
    assert "| MR | — | **70.00** |" in out and "nan" not in out.lower()
    assert any("no finite score" in r.getMessage() for r in caplog.records)


def test_report_folder_and_unwritable_outputs(tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD))
    assert main(["report", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    for flag in ("--output", "--plot"):
        assert main(["report", str(good), flag, str(blocker / "x")]) == 2
        err = capsys.readouterr().err
        assert flag in err and err.count("\n") == 1


def test_report_of_a_real_run_matches_its_scores(senteval_dir, tmp_path, encoder, capsys):
    out = tmp_path / "r.json"
    assert _evaluate(senteval_dir, encoder, "-o", str(out)) == 0
    res = json.loads(out.read_text())
    capsys.readouterr()
    assert main(["report", str(out), "--detail"]) == 0
    table = capsys.readouterr().out
    assert f"| MR | {res['results']['MR']['acc']:.2f} |" in table
    assert not any(isinstance(v, float) and math.isnan(v) for v in res["timings"].values())


def test_outputs_that_would_overwrite_each_other_or_an_input_are_refused(senteval_dir, tmp_path, encoder, capsys):
    out = tmp_path / "r.json"
    assert _evaluate(senteval_dir, encoder, "-o", str(out), "--markdown", str(out)) == 2
    assert "--markdown" in capsys.readouterr().err and not out.exists()
    assert _evaluate(senteval_dir, encoder, "-o", str(out)) == 0
    before = out.read_bytes()
    assert main(["report", str(out), "--output", str(out)]) == 2  # would replace the results with Markdown
    assert "it would be overwritten" in capsys.readouterr().err and out.read_bytes() == before


def test_the_results_json_never_replaces_a_file_that_is_not_results(senteval_dir, tmp_path, encoder, capsys):
    mine = tmp_path / "results.json"
    mine.write_text('{"my": "own data"}')
    assert _evaluate(senteval_dir, encoder, "-o", str(mine)) == 2
    assert "is not a sentkit results file" in capsys.readouterr().err
    assert mine.read_text() == '{"my": "own data"}'
    earlier = tmp_path / "earlier.json"  # an earlier run's results may be replaced
    assert _evaluate(senteval_dir, encoder, "-o", str(earlier)) == 0
    assert _evaluate(senteval_dir, encoder, "-o", str(earlier)) == 0


def test_data_download_into_an_unwritable_folder_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    assert main(["data", "download", "TREC", "--data-dir", str(blocker / "data")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--data-dir" in err and "Errno" not in err


class CtrlCOnTrec(HashEncoder):
    def encode(self, texts):  # type: ignore[no-untyped-def]
        if any(t.startswith("trec") for t in texts):
            raise KeyboardInterrupt
        return super().encode(texts)


def test_ctrl_c_keeps_the_finished_tasks(senteval_dir, tmp_path, capsys, monkeypatch):
    from sentkit.evaluation import EvaluationInterrupted

    with pytest.raises(EvaluationInterrupted) as e:
        evaluate(CtrlCOnTrec(), tasks="MR,TREC,STS12", data_dir=senteval_dir, use_cache=False, progress=False)
    assert set(e.value.results["results"]) == {"MR"}
    assert e.value.results["errors"] == {"TREC": "interrupted", "STS12": "interrupted"}
    enc = tmp_path / "ctrlc.py"
    enc.write_text(
        "import numpy as np\n"
        "def f(texts):\n"
        "    if any(t.startswith('trec') for t in texts):\n"
        "        raise KeyboardInterrupt\n"
        "    return np.array([[len(t), t.count('a') + 1.0] for t in texts], np.float32)\n"
    )
    out = tmp_path / "r.json"
    rc = main(
        [
            "-q",
            "evaluate",
            "-m",
            f"{enc}:f",
            "--tasks",
            "MR,TREC",
            "--data-dir",
            str(senteval_dir),
            "--no-cache",
            "-o",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 130 and "interrupted" in err and "1 finished tasks were written" in err
    assert set(json.loads(out.read_text())["results"]) == {"MR"}


@pytest.mark.parametrize(
    "content,match",
    [
        (b"", "no sentence in the all split"),
        (b"  \n\t\n   \n", "no sentence in the all split"),
        (b"one sentence\nanother\n", "4 samples, too few for 5-fold"),
    ],
)
def test_an_empty_or_tiny_task_is_a_data_error_in_one_line(senteval_dir, tmp_path, encoder, capsys, content, match):
    d = _copy(senteval_dir, tmp_path, "MR")
    for f in ("rt-polarity.pos", "rt-polarity.neg"):
        (d / "MR" / f).write_bytes(content)
    shutil.copytree(senteval_dir / "STS12", d / "STS12")
    rc = main(
        [
            "-q",
            "evaluate",
            "-m",
            encoder,
            "--tasks",
            "MR,STS12",
            "--data-dir",
            str(d),
            "--no-cache",
            "-o",
            str(tmp_path / "r.json"),
        ]
    )
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("sentkit ")]
    assert rc == 1 and len(err) == 1
    assert err[0].startswith("sentkit evaluate: error: 1 of 2 tasks failed: task MR: ") and match in err[0]
    assert "STS12" in json.loads((tmp_path / "r.json").read_text())["results"]
