"""sentkit.core.io: temporaries of killed writes, file modes, names that glob would misread."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from sentkit.core.io import atomic_path, atomic_write_text, host_tag, remove_stale_temps, temp_prefix


def test_remove_stale_temps_keeps_live_and_foreign_writes(tmp_path: Path) -> None:
    me = host_tag()
    names = {
        f".v.npy.{me}-999999999.a.tmp": True,  # a dead process of this host
        ".v.npy.tmp": True,  # an older sentkit's fixed temporary
        ".v.npy.k2j3h4.tmp": True,  # an older sentkit's untagged mkstemp name
        f".v.npy.{me}-{os.getpid()}.b.tmp": False,  # this process: a write in progress
        f".v.npy.{me}-1.c.tmp": False,  # a live process
        ".v.npy.ffffff-999999999.d.tmp": False,  # another host: kept for a day
        f".other.{me}-999999999.e.tmp": False,  # another name: not asked for
        ".users-own.tmp": False,
    }
    for n in names:
        (tmp_path / n).write_bytes(b"x")
    removed = {p.name for p in remove_stale_temps(tmp_path, "v.npy")}
    assert removed == {n for n, gone in names.items() if gone}
    # without a name, only tagged temporaries of dead writers go, never a user's own hidden file
    assert {p.name for p in remove_stale_temps(tmp_path)} == {f".other.{me}-999999999.e.tmp"}
    assert (tmp_path / ".users-own.tmp").exists()
    assert remove_stale_temps(tmp_path / "missing") == []


def test_names_with_glob_characters(tmp_path: Path) -> None:
    name = "v[1]*.npy"
    stale = tmp_path / f".{name}.{host_tag()}-999999999.a.tmp"
    stale.write_bytes(b"x")
    (tmp_path / f".v1x.npy.{host_tag()}-999999999.a.tmp").write_bytes(b"x")  # would match the unescaped glob
    assert remove_stale_temps(tmp_path, name) == [stale]


def test_atomic_path_mode_and_cleanup_on_error(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "a.txt", "hi")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o640
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "a.txt") as tmp:
        assert tmp.name.startswith(temp_prefix("a.txt"))
        tmp.write_text("half")
        raise RuntimeError
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"] and (tmp_path / "a.txt").read_text() == "hi"
    with pytest.raises(OSError, match="is a directory"), atomic_path(tmp_path):
        pass


def test_embed_refuses_non_finite_vectors(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sentkit.cli.main import main
    from sentkit.models.transformer import TransformerEncoder

    monkeypatch.setattr(TransformerEncoder, "encode", lambda self, texts, **kw: np.full((len(texts), 32), np.nan))
    src = tmp_path / "in.txt"
    src.write_text("a\nb\n")
    assert (
        main(["embed", "--model", str(tiny_model_dir), "--input", str(src), "--output", str(tmp_path / "v.npy")]) == 2
    )
    assert "2 of 2 embeddings contain NaN or inf" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]
