"""A refused `sentkit whiten` leaves no trace of its run: the `--out` folder its claim made (and the
lock in it) is removed; a folder that held something already is left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentkit.cli.main import main

ENCODER = """
import numpy as np


def enc(texts):
    return np.ones((len(texts), 4), dtype=np.float32)
"""


def test_a_refused_whiten_removes_the_folder_and_lock_it_made(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("one short line\n")
    out = tmp_path / "new" / "w"
    # refused at the model (it does not load)
    assert (
        main(["whiten", "--model", f"{tmp_path / 'missing.py'}:enc", "--corpus", str(corpus), "--out", str(out)]) == 2
    )
    assert "does not exist" in capsys.readouterr().err
    assert not out.exists()
    # refused at the corpus, after the model loaded (fewer than 2 sentences of 3 words)
    (tmp_path / "mine.py").write_text(ENCODER)
    corpus.write_text("too short\n")
    assert main(["whiten", "--model", f"{tmp_path / 'mine.py'}:enc", "--corpus", str(corpus), "--out", str(out)]) == 2
    assert "fewer than 2 sentences" in capsys.readouterr().err
    assert not out.exists()


def test_a_refused_whiten_leaves_a_folder_that_held_something(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("x\n")
    out = tmp_path / "w"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    main(["whiten", "--model", f"{tmp_path / 'missing.py'}:enc", "--corpus", str(corpus), "--out", str(out)])
    assert (out / "notes.txt").read_text() == "mine"
