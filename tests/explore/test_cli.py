"""`sentkit explore` on the command line: serving, the printed URL, and its errors."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sentkit.cli.main import build_parser, main


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["explore", "--help"])
    out = capsys.readouterr().out
    for flag in ("--models", "--corpus", "--results", "--port", "--host", "--open", "--cache-dir"):
        assert flag in out


def test_serves_on_localhost_and_stops_on_ctrl_c(explore_corpus: Path, tfidf_model: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "SENTKIT_CACHE": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "sentkit.cli.main", "explore", "--port", "0", "--models",
                             str(tfidf_model), "--corpus", str(explore_corpus)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("sentkit explore: serving on http://127.0.0.1:"), line
        url = line.split()[4]
        state = httpx.get(url + "api/state", timeout=30).json()
        assert state["models"] == [str(tfidf_model)] and state["corpus"] == str(explore_corpus)
        assert "<title>sentkit explore</title>" in httpx.get(url, timeout=30).text
    finally:
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(30)
    assert rc == 0, proc.stderr.read() if proc.stderr else ""


def test_port_in_use_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["explore", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "another --port" in err


def test_bad_arguments_and_missing_extra(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["explore", "--port", "70000"]) == 2
    assert "--port must be between 0 and 65535" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    assert main(["explore"]) == 2
    assert "pip install 'sentkit[explore]'" in capsys.readouterr().err
