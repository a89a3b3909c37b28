"""require_file: a folder or a FIFO given where a file is expected is named for what it is, not
"missing", and a FIFO is never opened (which would hang); used by `sentkit report` and
`sentkit experiment run`."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from sentkit.cli.main import main
from sentkit.core.errors import InputError, MissingInputError
from sentkit.core.io import require_file

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    p = tmp_path / "pipe.json"
    os.mkfifo(p)
    return p


def test_require_file_says_what_is_there(tmp_path: Path, fifo: Path) -> None:
    f = tmp_path / "f.json"
    f.write_text("{}")
    assert require_file(f, "results file") == f
    (tmp_path / "link.json").symlink_to(f)
    assert require_file(tmp_path / "link.json", "results file") == tmp_path / "link.json"
    with pytest.raises(MissingInputError, match=r"results file .*nope.json does not exist"):
        require_file(tmp_path / "nope.json", "results file")
    with pytest.raises(MissingInputError, match="does not exist"):
        require_file(f / "under-a-file.json", "results file")
    with pytest.raises(InputError, match=r"is a folder, not a file \(give the JSON\)"):
        require_file(tmp_path, "results file", hint="give the JSON")
    with pytest.raises(InputError, match=r"is not a regular file \(a named pipe \(FIFO\)\)"):
        require_file(fifo, "results file")  # returns at once: the pipe has no writer, and is not opened
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "s.sock"))
        with pytest.raises(InputError, match=r"\(a socket\)"):
            require_file(tmp_path / "s.sock", "results file")
    finally:
        sock.close()


def test_report_and_experiment_name_a_fifo_and_a_folder(
    tmp_path: Path, fifo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(fifo)]) == 2
    assert "is not a regular file (a named pipe (FIFO))" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "is a folder, not a file" in capsys.readouterr().err
    assert main(["experiment", "run", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "experiment file" in err and "is a folder, not a file" in err and "does not exist" not in err
    toml = tmp_path / "grid.toml"
    os.mkfifo(toml)
    assert main(["experiment", "report", str(toml)]) == 2
    assert "is not a regular file (a named pipe (FIFO))" in capsys.readouterr().err
