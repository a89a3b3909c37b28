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
from sentkit.embed_shards import MANIFEST, PartsPlan, Shard

sys.path.insert(0, str(Path(__file__).parents[1] / "training"))

N, BLOCK = 53, 10  # 6 parts, the last one of 3 texts


@pytest.fixture()
def texts(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    words = ["river", "stone", "light", "forest", "window", "garden", "letter", "winter", "summer", "bread", "music", "paper"]
    lines = [" ".join(rng.choice(words, size=int(rng.integers(0, 14)))) for _ in range(N)]  # some empty
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return src


def embed(model: Path, src: Path, dst: Path, *extra: str) -> int:
    return main(["-q", "embed", "--model", str(model), "--input", str(src), "--output", str(dst),
                 "--block", str(BLOCK), *extra])


def test_shards_join_into_the_single_process_npy(texts: Path, tiny_model_dir: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    one, sharded = tmp_path / "one.npy", tmp_path / "sharded.npy"
    assert embed(tiny_model_dir, texts, one) == 0
    for i in (2, 0):  # any order
        assert embed(tiny_model_dir, texts, sharded, "--shard", f"{i}/3") == 0
        assert not sharded.exists()
    parts = tmp_path / "sharded.npy.parts"
    assert sorted(p.name for p in parts.glob("part-*.npy")) == ["part-000000.npy", "part-000001.npy",
                                                                "part-000004.npy", "part-000005.npy"]
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
    assert np.array_equal(np.stack(b.column("embedding").to_numpy(zero_copy_only=False)),
                          np.stack(a.column("embedding").to_numpy(zero_copy_only=False)))
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


def test_a_rerun_embeds_only_the_missing_parts(texts: Path, tiny_model_dir: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A shard that died after two of its parts (here: the encoder fails on the third) is rerun:
    the two parts are kept as they are, the others are embedded; another shard count reuses them too."""
    from sentkit.models.encoder import TransformerEncoder

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
    monkeypatch.setattr(TransformerEncoder, "encode", lambda self, items, *a, **kw: calls.append(len(items)) or real(self, items, *a, **kw))
    assert embed(tiny_model_dir, texts, dst, "--shard", "0/2") == 0  # parts 0-2 of 6: only part 2 is missing
    assert calls == [BLOCK]
    assert {p.name: p.stat().st_mtime_ns for p in parts.glob("part-00000[01].npy")} == done
    assert embed(tiny_model_dir, texts, dst, "--shard", "1/2") == 0
    assert dst.read_bytes() == one.read_bytes()


def test_parts_of_other_settings_are_refused(texts: Path, tiny_model_dir: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    dst = tmp_path / "v.npy"
    assert embed(tiny_model_dir, texts, dst, "--shard", "0/2") == 0
    capsys.readouterr()
    assert main(["-q", "embed", "--model", str(tiny_model_dir), "--input", str(texts), "--output", str(dst),
                 "--block", "5", "--shard", "1/2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "block: 10 -> 5" in err[0] and "v.npy.parts" in err[0]
    with texts.open("a") as f:
        f.write("one more line\n")
    assert embed(tiny_model_dir, texts, dst, "--shard", "1/2") == 2
    err = capsys.readouterr().err
    assert "input: " in err and "rows: 53 -> 54" in err


@pytest.mark.parametrize("bad", ["3/3", "-1/2", "x", "1/2/3", "0/0"])
def test_bad_shard_is_one_error_line(bad: str, texts: Path, tiny_model_dir: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert embed(tiny_model_dir, texts, tmp_path / "v.npy", f"--shard={bad}") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sentkit embed: error: --shard")


def test_a_folder_of_other_files_is_never_used_for_parts(texts: Path, tiny_model_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
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


@pytest.mark.slow
def test_two_processes_under_torchrun(texts: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    from _helpers import torchrun

    one, dst = tmp_path / "one.npy", tmp_path / "v.npy"
    assert embed(tiny_model_dir, texts, one) == 0
    res = torchrun("-m", "sentkit.cli.main", "-q", "embed", "--model", str(tiny_model_dir), "--input", str(texts),
                   "--output", str(dst), "--block", str(BLOCK))
    assert res.returncode == 0, res.stderr[-3000:]
    assert dst.read_bytes() == one.read_bytes()
    assert "joined from 6 parts" in res.stdout
