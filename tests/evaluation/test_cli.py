"""`sentkit evaluate | report | data` through the real entry point."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sentkit.cli.main import main

from .conftest import write_encoder


@pytest.fixture()
def encoder_file(tmp_path: Path) -> str:
    return write_encoder(tmp_path, nan_on="trec")


def test_evaluate_writes_json_markdown_and_png(senteval_dir, tmp_path, encoder_file, capsys):
    out = tmp_path / "r.json"
    rc = main(
        [
            "evaluate",
            "--model",
            encoder_file,
            "--tasks",
            "MR,STS12,SICKE",
            "--data-dir",
            str(senteval_dir),
            "--output",
            str(out),
            "--markdown",
            str(tmp_path / "r.md"),
            "--plot",
            str(tmp_path / "r.png"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--set",
            "kfold=3",
            "--threads",
            "1",
        ]
    )
    assert rc == 0
    res = json.loads(out.read_text())
    assert set(res["results"]) == {"MR", "STS12", "SICKE"} and res["config"]["kfold"] == 3
    assert res["model"]["fingerprint"] == "cli-test-enc"
    assert (tmp_path / "r.md").read_text().startswith("Model:")
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    assert "| MR |" in capsys.readouterr().out
    assert any((tmp_path / "cache").rglob("shard-*.npz"))


def test_failing_task_gives_nonzero_exit_but_keeps_results(senteval_dir, tmp_path, encoder_file, capsys):
    out = tmp_path / "r.json"
    rc = main(
        [
            "evaluate",
            "-m",
            encoder_file,
            "--tasks",
            "TREC,STS13",
            "--data-dir",
            str(senteval_dir),
            "-o",
            str(out),
            "--no-cache",
        ]
    )
    assert rc == 1
    res = json.loads(out.read_text())
    assert "STS13" in res["results"] and "task TREC" in res["errors"]["TREC"]


def test_report_side_by_side_and_plot(senteval_dir, tmp_path, encoder_file, capsys):
    paths = []
    for preset in ("prototyping", "literature"):
        p = tmp_path / f"{preset}.json"
        assert (
            main(
                [
                    "evaluate",
                    "-m",
                    encoder_file,
                    "--tasks",
                    "STS12,SICKE",
                    "--preset",
                    preset,
                    "--data-dir",
                    str(senteval_dir),
                    "-o",
                    str(p),
                    "--no-cache",
                ]
            )
            == 0
        )
        paths.append(str(p))
    capsys.readouterr()
    rc = main(
        [
            "report",
            *paths,
            "--labels",
            "proto,lit",
            "--plot",
            str(tmp_path / "c.png"),
            "--output",
            str(tmp_path / "c.md"),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "| task | proto | lit |" in text and "| STS12 |" in text and "downstream avg" in text
    assert (tmp_path / "c.png").is_file() and (tmp_path / "c.md").read_text().startswith("| task |")


def test_report_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["report", str(bad)]) == 2
    assert "not a sentkit results file" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "nope.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_data_check_lists_present_and_missing_with_the_fix(senteval_dir, tmp_path, capsys):
    d = tmp_path / "d"
    shutil.copytree(senteval_dir / "MR", d / "MR")
    assert main(["data", "check", "--data-dir", str(d)]) == 0
    out = capsys.readouterr().out
    assert "MR" in out and "present" in out
    assert f"sentkit data download CR --data-dir {d}" in out
    assert "1 of 28 tasks present" in out


def test_data_download_skips_files_already_present(senteval_dir, tmp_path, capsys, monkeypatch):
    from sentkit.evaluation import data as data_mod

    def no_network(*args, **kwargs):
        raise AssertionError("must not download")

    monkeypatch.setattr(data_mod, "_fetch", no_network)
    # the fixture's PROBING files have no known checksum and are present: nothing to fetch
    assert main(["data", "download", "Tense", "--data-dir", str(senteval_dir)]) == 0
    assert "nothing to download" in capsys.readouterr().out


def test_unknown_model_module_is_a_user_error(tmp_path, capsys):
    assert main(["evaluate", "-m", "no_such_module_xyz:Enc", "--tasks", "MR", "--data-dir", str(tmp_path)]) == 2
    assert "'no_such_module_xyz' is neither a .py file nor an importable module" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["evaluate", "--help"], ["report", "--help"], ["data", "check", "--help"], ["data", "download", "--help"]]
)
def test_help(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_download_verifies_sha256_offline(tmp_path, monkeypatch, capsys):
    """`data download` on file:// URLs: a good checksum installs the file, a bad one does not."""
    import hashlib

    from sentkit.evaluation import data as data_mod

    src = tmp_path / "src.label"
    src.write_bytes(b"NUM:date when ?\n")
    sha = hashlib.sha256(src.read_bytes()).hexdigest()
    monkeypatch.setitem(data_mod.SOURCES, "TREC", [("TREC_10.label", src.as_uri(), sha, src.stat().st_size)])
    d = tmp_path / "d"
    assert main(["data", "download", "TREC", "--data-dir", str(d)]) == 0
    assert (d / "TREC" / "TREC_10.label").read_bytes() == src.read_bytes()
    assert "TREC: 1 file(s) downloaded" in capsys.readouterr().out
    monkeypatch.setitem(data_mod.SOURCES, "TREC", [("TREC_10.label", src.as_uri(), "0" * 64, None)])
    with pytest.raises(OSError, match="sha256"):
        data_mod.download(["TREC"], tmp_path / "e")
    assert not (tmp_path / "e" / "TREC" / "TREC_10.label").exists()


def test_load_model_forms(tmp_path, encoder_file):
    from sentkit.core.identity import fingerprint
    from sentkit.models.loading import load

    m = load(encoder_file)
    assert fingerprint(m, encoder_file) == "cli-test-enc" and m.encode(["a b"]).shape == (1, 6)
    m2 = load("json:dumps")  # a plain function: usable, but no fingerprint (no cache)
    assert fingerprint(m2, "json:dumps") is None and callable(m2.fn)
    assert fingerprint(lambda texts: texts, "f") is None
