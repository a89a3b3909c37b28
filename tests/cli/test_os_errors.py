"""One error path for the operating system: read-only folders, permission errors, outputs that are
files or folders, a full disk, unreadable input. Each ends in one line, exit 1 or 2, nothing
half-written, and the output is checked before the model is loaded."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from sentkit.cli.main import describe_error, main
from sentkit.core.io import PathError, check_writable, host_tag

NO_MODEL = "no-such-model-xyz"  # proves a check ran before any model was loaded


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [
        ln
        for ln in capsys.readouterr().err.splitlines()
        if ": error: " in ln or ": internal error: " in ln or "Traceback" in ln
    ]
    assert len(lines) == 1, lines
    return lines[0]


def _texts(tmp_path: Path, n: int = 3) -> Path:
    f = tmp_path / "in.txt"
    f.write_text("".join(f"sentence number {i}\n" for i in range(n)))
    return f


@contextlib.contextmanager
def _mounted(folder: Path, options: str) -> Iterator[Path]:
    """A tmpfs at `folder` (root only; skips elsewhere)."""
    folder.mkdir(parents=True, exist_ok=True)
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True).returncode
    ):
        pytest.skip("needs root and a mountable tmpfs")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.fixture()
def readonly_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody may write into: a read-only mount as root (permission bits do not bind root),
    mode 0555 otherwise."""
    d = tmp_path / "ro"
    if os.geteuid() == 0:
        with _mounted(d, "ro,size=64k") as m:
            yield m
    else:
        d.mkdir()
        d.chmod(0o555)
        yield d
        d.chmod(0o755)


def test_check_writable_names_what_and_why(tmp_path: Path, readonly_dir: Path) -> None:
    (tmp_path / "afile").write_text("x")
    cases = {
        tmp_path: "is a directory",
        tmp_path / "afile" / "v.npy": "afile is a file, not a folder",
        readonly_dir / "v.npy": "read-only" if os.geteuid() == 0 else "not writable",
        readonly_dir / "sub" / "v.npy": "read-only" if os.geteuid() == 0 else "not writable",
    }
    for path, why in cases.items():
        with pytest.raises(PathError, match=why) as e:
            check_writable(path, what="--output")
        assert str(e.value).startswith(f"--output {path}") and "Errno" not in str(e.value)
    check_writable(tmp_path / "new" / "deeper" / "v.npy")  # a folder that can be created is fine
    assert not (tmp_path / "new").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("output", ["dir", "under-a-file", "read-only", "same-as-input", "bad-suffix"])
def test_embed_checks_its_output_before_loading_the_model(
    output: str, tmp_path: Path, readonly_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _texts(tmp_path)
    dst = {
        "dir": tmp_path,
        "under-a-file": src / "v.npy",
        "read-only": readonly_dir / "v.npy",
        "same-as-input": src,
        "bad-suffix": tmp_path / "v.csv",
    }[output]
    if output == "same-as-input":  # another name of the input file (a hard link)
        dst = tmp_path / "in.npy"
        os.link(src, dst)
    rc = main(["embed", "--model", NO_MODEL, "--input", str(src), "--output", str(dst)])
    line = _err(capsys)
    assert rc in (1, 2) and line.startswith("sentkit embed: error: ") and NO_MODEL not in line
    assert "--output" in line
    assert src.read_text().startswith("sentence number 0")


def test_embed_refuses_bad_numbers_and_a_folder_as_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _texts(tmp_path)
    for flags, needle in (
        (["--batch-size", "0"], "--batch-size must be at least 1"),
        (["--block", "-5"], "--block must be at least 1"),
    ):
        assert (
            main(["embed", "--model", NO_MODEL, "--input", str(src), "--output", str(tmp_path / "v.npy"), *flags]) == 2
        )
        assert needle in _err(capsys)
    assert main(["embed", "--model", NO_MODEL, "--input", str(tmp_path), "--output", str(tmp_path / "v.npy")]) == 2
    assert "--input" in _err(capsys)
    for name in ("v.parquet", "t.txt.gz"):
        (tmp_path / name).write_bytes(b"PAR1\x00\x01")
        assert (
            main(["embed", "--model", NO_MODEL, "--input", str(tmp_path / name), "--output", str(tmp_path / "v.npy")])
            == 2
        )
        assert "embed reads .txt (one text per line) or .jsonl" in _err(capsys)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main(["embed", "--model", NO_MODEL, "--input", str(fifo), "--output", str(tmp_path / "v.npy")]) == 2
    assert "not a regular file" in _err(capsys)


def test_long_output_names_and_the_current_folder_as_a_store(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "v" * 240 + ".npy"  # a valid name; its temporary must be valid too
    assert (
        main(
            [
                "embed",
                "--model",
                str(tiny_model_dir),
                "--input",
                str(_texts(tmp_path)),
                "--output",
                str(tmp_path / name),
            ]
        )
        == 0
    )
    assert np.load(tmp_path / name).shape == (3, 32)
    sharded = "w" * 244 + ".npy"  # its parts folder's name still fits; the record beside it is cut short
    assert (
        main(
            [
                "-q",
                "embed",
                "--model",
                str(tiny_model_dir),
                "--input",
                str(_texts(tmp_path)),
                "--output",
                str(tmp_path / sharded),
                "--shard",
                "0/1",
            ]
        )
        == 0
    )
    assert np.array_equal(np.load(tmp_path / sharded), np.load(tmp_path / name))
    assert len([p for p in tmp_path.iterdir() if p.name.endswith(".manifest.json")]) == 1
    corpus = tmp_path / "c.txt"
    corpus.write_text(" ".join(["word"] * 300))
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)  # an empty current folder may hold the store
    assert (
        main(["prepare", "--corpus", str(corpus), "--out", ".", "--model", str(tiny_model_dir), "--max-span-len", "16"])
        == 0
    )
    assert sorted(p.name for p in here.iterdir()) == ["meta.json", "offsets.npy", "tokens.bin"]


def test_prepare_checks_its_out_before_tokenizing(
    tmp_path: Path, readonly_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _texts(tmp_path)
    for out in (readonly_dir / "store", corpus):
        rc = main(["prepare", "--corpus", str(corpus), "--out", str(out), "--model", NO_MODEL])
        line = _err(capsys)
        assert rc in (1, 2) and line.startswith(f"sentkit prepare: error: --out {out}") and NO_MODEL not in line


def test_a_full_disk_is_one_line_and_leaves_nothing(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _texts(tmp_path, 2000)  # 2000 x 32 float32 = 256 kB > the 64 kB disk
    with _mounted(tmp_path / "small", "size=64k") as disk:
        np.save(disk / "vectors.npy", np.ones((2, 32), dtype=np.float32))  # an earlier good output
        before = (disk / "vectors.npy").read_bytes()
        rc = main(["embed", "--model", str(tiny_model_dir), "--input", str(src), "--output", str(disk / "vectors.npy")])
        line = _err(capsys)
        assert rc == 1 and "No space left on device" in line and "Errno" not in line
        assert sorted(p.name for p in disk.iterdir()) == ["vectors.npy"]
        assert (disk / "vectors.npy").read_bytes() == before


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES, errno.EROFS, errno.EIO])
def test_os_errors_while_writing_end_in_one_line(
    code: int, tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sentkit.cli import embed_commands

    def fail(tmp: Path, *a: object, **kw: object) -> int:
        tmp.write_bytes(b"half")
        raise OSError(code, os.strerror(code), str(tmp))

    monkeypatch.setattr(embed_commands, "_write_npy", fail)
    rc = main(
        ["embed", "--model", str(tiny_model_dir), "--input", str(_texts(tmp_path)), "--output", str(tmp_path / "v.npy")]
    )
    line = _err(capsys)
    assert rc == 1 and os.strerror(code) in line and "Traceback" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]  # no half-written file, no temporary


def test_unreadable_input_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _texts(tmp_path)
    if os.geteuid() == 0:  # root reads anything: make the check see what a user would
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, m, **kw: False if Path(p) == src else real(p, m, **kw))
    else:
        src.chmod(0)
    rc = main(["embed", "--model", NO_MODEL, "--input", str(src), "--output", str(tmp_path / "v.npy")])
    assert rc in (1, 2) and "--input" in _err(capsys)


def test_interrupt_mid_write_leaves_no_temporary(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sentkit.models.transformer import TransformerEncoder

    calls = []
    real = TransformerEncoder.encode

    def encode(self: TransformerEncoder, *a: object, **kw: object) -> np.ndarray:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(TransformerEncoder, "encode", encode)
    rc = main(
        [
            "embed",
            "--model",
            str(tiny_model_dir),
            "--input",
            str(_texts(tmp_path, 10)),
            "--output",
            str(tmp_path / "v.npy"),
            "--block",
            "4",
        ]
    )
    assert rc == 130 and "interrupted" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_embed_removes_stale_temporaries_and_gives_the_umask_mode(tmp_path: Path, tiny_model_dir: Path) -> None:
    dead = tmp_path / f".v.npy.{host_tag()}-999999999.abc.tmp"  # a killed embed's leftover
    live = tmp_path / f".v.npy.{host_tag()}-1.abc.tmp"  # pid 1 is alive: a running write, kept
    other = tmp_path / ".notes.tmp"  # not ours
    for p in (dead, live, other):
        p.write_bytes(b"x")
    assert _embed_under_umask(0o022, tmp_path, tiny_model_dir, "v.npy") == 0o644
    assert not dead.exists() and live.exists() and other.exists()
    assert _embed_under_umask(0o077, tmp_path, tiny_model_dir, "w.npy") == 0o600


def _embed_under_umask(mask: int, tmp_path: Path, model: Path, name: str) -> int:
    """The mode of `name` as embed writes it under umask `mask`."""
    old = os.umask(mask)
    try:
        assert (
            main(["embed", "--model", str(model), "--input", str(_texts(tmp_path)), "--output", str(tmp_path / name)])
            == 0
        )
    finally:
        os.umask(old)
    return stat.S_IMODE((tmp_path / name).stat().st_mode)


def test_output_through_a_symlink_and_into_a_new_folder(tmp_path: Path, tiny_model_dir: Path) -> None:
    real = tmp_path / "big_disk" / "v.npy"
    real.parent.mkdir()
    np.save(real, np.ones((1, 32), dtype=np.float32))
    link = tmp_path / "v.npy"
    link.symlink_to(real)
    src = _texts(tmp_path)
    assert main(["embed", "--model", str(tiny_model_dir), "--input", str(src), "--output", str(link)]) == 0
    assert link.is_symlink() and np.load(real).shape == (3, 32)
    assert (
        main(
            [
                "embed",
                "--model",
                str(tiny_model_dir),
                "--input",
                str(src),
                "--output",
                str(tmp_path / "a" / "b" / "v.parquet"),
                "--block",
                str(10**12),
            ]
        )
        == 0
    )


# ----------------------------------------------------------------------------- main's error path
def test_describe_error_kinds() -> None:
    from sentkit.core.interface import check_embeddings

    try:
        check_embeddings(np.zeros(3), 2, what="model m")
    except ValueError as e:  # one of sentkit's own checks: an InputError, still a ValueError
        assert describe_error(e) == ("model m: expected an array of shape [2, dim], got (3,)", 2)
    try:
        np.zeros(2).reshape(3)
    except ValueError as e:  # raised inside numpy: a bug of sentkit, reported as such
        msg, rc = describe_error(e)
    assert rc == 1 and msg.startswith("internal error: ValueError") and "SENTKIT_DEBUG=1" in msg
    assert msg.endswith("please report it (rerun with SENTKIT_DEBUG=1 or -vv to see the traceback)")
    msg, rc = describe_error(PermissionError(errno.EACCES, "Permission denied", "/data/x"))
    assert rc == 1 and msg.startswith("/data/x: Permission denied")
    msg, rc = describe_error(OSError(errno.ENOSPC, "No space left on device"))
    assert rc == 1 and "free some space" in msg
    assert describe_error(MemoryError())[1] == 1
    assert describe_error(FileNotFoundError("input x does not exist")) == ("input x does not exist", 2)
    assert describe_error(PathError(errno.EISDIR, "is a directory", "--output", "x")) == (
        "--output x: is a directory",
        2,
    )


def test_main_reports_every_error_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sentkit.cli import embed_commands

    def boom(args: object) -> int:
        raise KeyError("surprise")

    monkeypatch.setattr(embed_commands, "cmd_similarity", boom)
    assert main(["similarity", "--model", "m", "a", "b"]) == 1
    line = _err(capsys)
    assert line.startswith("sentkit similarity: internal error: KeyError") and "SENTKIT_DEBUG=1" in line
    monkeypatch.setenv("SENTKIT_DEBUG", "1")
    with pytest.raises(KeyError):
        main(["similarity", "--model", "m", "a", "b"])
    monkeypatch.delenv("SENTKIT_DEBUG")
    with pytest.raises(KeyError):
        main(["-vv", "similarity", "--model", "m", "a", "b"])


def test_broken_pipe_is_quiet(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from sentkit.cli import embed_commands
    from sentkit.cli import main as main_mod

    def pipe(args: object) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    monkeypatch.setattr(embed_commands, "cmd_similarity", pipe)
    monkeypatch.setattr(main_mod, "_silence_stdout", lambda: None)
    assert main(["similarity", "--model", "m", "a", "b"]) == 141
    assert capsys.readouterr().err == ""


def test_embed_never_overwrites_a_file_it_did_not_write(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = _texts(tmp_path)
    users = {
        "labels.npy": lambda p: np.save(p, np.arange(5)),
        "data.parquet": lambda p: pq.write_table(pa.table({"x": [1]}), p),
        "notes.npy": lambda p: p.write_text("not an array"),
    }
    for name, write in users.items():
        write(tmp_path / name)
        before = (tmp_path / name).read_bytes()
        assert main(["embed", "--model", NO_MODEL, "--input", str(src), "--output", str(tmp_path / name)]) == 2
        assert "exists and is not a file that sentkit embed wrote" in _err(capsys)
        assert (tmp_path / name).read_bytes() == before
    for name in ("v.npy", "v.parquet"):  # its own earlier output is replaced
        for _ in range(2):
            assert (
                main(["embed", "--model", str(tiny_model_dir), "--input", str(src), "--output", str(tmp_path / name)])
                == 0
            )


def test_an_output_under_a_file_is_named_as_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not the write check's file inside it (``<out>/.sentkit-write-check``)."""
    (tmp_path / "afile").write_text("x\n")
    out = tmp_path / "afile" / "x"
    np.save(tmp_path / "v.npy", np.ones((4, 8), dtype=np.float32))
    for flag, argv in [
        ("--out", ["prepare", "--corpus", str(_texts(tmp_path)), "--model", NO_MODEL]),
        ("--output", ["index", "--input", str(tmp_path / "v.npy")]),
    ]:
        rc = main([*argv, flag, str(out)])
        line = _err(capsys)
        assert rc == 2 and line.endswith(f"error: {flag} {out}: {tmp_path / 'afile'} is a file, not a folder"), line


@pytest.mark.parametrize("shard", [[], ["--shard", "0/2"]])
def test_prepare_names_its_out_not_its_lock(
    shard: list[str],
    tmp_path: Path,
    tiny_model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from sentkit.core import io

    def denied(path: Path) -> None:  # the lock beside --out cannot be created
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    monkeypatch.setattr(io, "file_lock", denied)
    out = tmp_path / "store"
    argv = ["prepare", "--corpus", str(_texts(tmp_path)), "--out", str(out), "--model", str(tiny_model_dir), *shard]
    rc = main(argv)
    line = _err(capsys)
    assert rc == 1 and f"error: --out {out}: cannot write in {tmp_path}: Permission denied" in line, line
    assert ".lock" not in line


def test_index_names_its_output_not_its_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sentkit.core import io

    def full(path: Path) -> Path:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path.with_name(f".{path.name}.x-1.abc.tmp")))

    monkeypatch.setattr(io, "make_temp_dir", full)
    np.save(tmp_path / "v.npy", np.ones((4, 8), dtype=np.float32))
    out = tmp_path / "ix"
    rc = main(["index", "--input", str(tmp_path / "v.npy"), "--output", str(out)])
    line = _err(capsys)
    assert rc == 1 and f"error: --output {out}: cannot write in {tmp_path}: No space left on device" in line, line
    assert ".tmp" not in line and not out.exists()
