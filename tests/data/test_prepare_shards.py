"""`sentkit prepare --shard I/N` (and under torchrun), in real processes: the shards' parts join into
the store one process writes (tokens.bin and offsets.npy byte for byte, the same counts), the join
happens once, when the last part is written; a shard killed with -9 and run again does only what
is missing and gives the same store; parts of another run are refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from check_support import torchrun
from sentkit.cli.main import main
from support import make_docs

ENV = {
    **os.environ,
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "OMP_NUM_THREADS": "1",
}
SPAN = ("--max-span-len", "16")  # documents of at least 64 tokens are kept

# shard that SIGKILLs itself when it is about to move its second part into place: its first part
# is written, the second is a complete temporary folder that the rerun must remove
_DIE_AT_SECOND_PART = """
import os, signal, sys
real = os.replace
seen = []
def replace(src, dst, *a, **k):
    if os.path.basename(os.path.dirname(str(dst))).endswith(".parts") and \
os.path.basename(str(dst)).startswith("part-"):
        seen.append(dst)
        if len(seen) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *a, **k)
os.replace = replace
from sentkit.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    """11 documents of varied length (some too short), an empty file and a binary one."""
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    for i, text in enumerate(make_docs(11, 40)):
        text = text * (1 + i % 4)
        (folder / ("sub" if i % 3 == 0 else ".") / f"doc{i:02d}.txt").write_text(text, encoding="utf-8")
    (folder / "empty.txt").write_text("  \n")
    (folder / "blob.txt").write_bytes(b"\x00\x01binary")
    return folder


def sentkit(*argv: str, script: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", script, *argv] if script else [sys.executable, "-m", "sentkit.cli.main", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)


def prepare_argv(corpus: Path, out: Path, model: Path, *extra: str) -> list[str]:
    return ["-q", "prepare", "--corpus", str(corpus), "--out", str(out), "--model", str(model), *SPAN, *extra]


def store(out: Path) -> tuple[bytes, bytes, dict[str, object]]:
    meta = json.loads((out / "meta.json").read_text())
    report = {k: v for k, v in meta["report"].items() if k != "seconds"}
    return (
        (out / "tokens.bin").read_bytes(),
        (out / "offsets.npy").read_bytes(),
        {"num_docs": meta["num_docs"], "num_tokens": meta["num_tokens"], "report": report},
    )


@pytest.fixture()
def single(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> tuple[bytes, bytes, dict[str, object]]:
    assert main(prepare_argv(corpus, tmp_path / "one", tiny_model_dir)) == 0
    one = store(tmp_path / "one")
    assert one[2]["num_docs"] > 0 and one[2]["report"]["too_short"] > 0  # type: ignore[index]
    return one


def test_concurrent_shards_join_once_into_the_single_process_store(
    corpus: Path, tiny_model_dir: Path, tmp_path: Path, single: tuple
) -> None:
    out = tmp_path / "sharded"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "sentkit.cli.main", *prepare_argv(corpus, out, tiny_model_dir, "--shard", f"{i}/3")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        for i in range(3)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    said = "".join(o for o, _ in outs)
    assert said.count("joined from 13 parts") == 1 and said.count("still to be written") == 2
    assert store(out) == single
    assert not (tmp_path / "sharded.parts").exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith((".tmp", ".lock"))]
    # any shard of the finished run, run again, does nothing
    res = sentkit(*prepare_argv(corpus, out, tiny_model_dir, "--shard", "1/3"))
    assert res.returncode == 0 and "nothing to do" in res.stdout
    assert store(out) == single and not (tmp_path / "sharded.parts").exists()


def test_a_shard_killed_with_sigkill_resumes_and_the_store_is_the_same(
    corpus: Path, tiny_model_dir: Path, tmp_path: Path, single: tuple
) -> None:
    out, parts = tmp_path / "sharded", tmp_path / "sharded.parts"
    killed = sentkit(*prepare_argv(corpus, out, tiny_model_dir, "--shard", "1/2"), script=_DIE_AT_SECOND_PART)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert sorted(p.name for p in parts.glob("part-*")) == ["part-000006"]  # shard 1 of 2: parts 6-12
    assert list(parts.glob(".part-000007.*.tmp"))  # the complete part that was not moved into place
    first = sentkit(*prepare_argv(corpus, out, tiny_model_dir, "--shard", "0/2"))
    assert first.returncode == 0 and "still to be written" in first.stdout and not out.exists()
    again = sentkit("-v", *prepare_argv(corpus, out, tiny_model_dir, "--shard", "1/2")[1:])
    assert again.returncode == 0, again.stderr[-2000:]
    assert "1 of its 7 parts were written before" in again.stderr and "joined from 13 parts" in again.stdout
    assert store(out) == single
    assert not parts.exists() and not list(tmp_path.glob(".*.tmp"))


def test_parts_of_another_run_are_refused(corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "sharded"
    assert sentkit(*prepare_argv(corpus, out, tiny_model_dir, "--shard", "0/2")).returncode == 0
    res = sentkit(*prepare_argv(corpus, out, tiny_model_dir, "--shard", "1/2", "--max-doc-tokens", "200"))
    assert res.returncode == 2 and "other settings" in res.stderr and "max_doc_tokens: None -> 200" in res.stderr
    (corpus / "doc01.txt").write_text(make_docs(1, 300)[0])  # the corpus changed between shards
    res = sentkit(*prepare_argv(corpus, out, tiny_model_dir, "--shard", "1/2"))
    assert res.returncode == 2 and "input:" in res.stderr


def test_a_single_file_is_one_part_and_torchrun_shares_a_folder(
    corpus: Path, tiny_model_dir: Path, tmp_path: Path, single: tuple
) -> None:
    big = tmp_path / "lines.txt"
    big.write_text("\n".join(make_docs(30, 80)) + "\n")
    argv = ["--corpus", str(big), "--model", str(tiny_model_dir), *SPAN, "--txt-mode", "lines"]
    assert main(["-q", "prepare", "--out", str(tmp_path / "l1"), *argv]) == 0
    for i in (1, 0):
        assert main(["-q", "prepare", "--out", str(tmp_path / "l2"), "--shard", f"{i}/2", *argv]) == 0
    assert store(tmp_path / "l2") == store(tmp_path / "l1")

    out = tmp_path / "torchrun"
    res = torchrun("-m", "sentkit.cli.main", *prepare_argv(corpus, out, tiny_model_dir))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "joined from 13 parts" in res.stdout and store(out) == single


def test_a_sharded_run_reports_its_wall_time_not_the_sum_of_its_parts(
    corpus: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sharded"
    assert main(prepare_argv(corpus, out, tiny_model_dir, "--shard", "0/2")) == 0
    time.sleep(1.5)  # the second job starts later: the run took at least this long
    assert main(prepare_argv(corpus, out, tiny_model_dir, "--shard", "1/2")) == 0
    meta = json.loads((out / "meta.json").read_text())
    wall, parts = meta["report"]["seconds"], meta["sharded"]["part_seconds"]
    assert wall >= 1.5 > parts > 0
    said = capsys.readouterr().out
    assert f"took {wall:.1f} s (wall time" in said and f"the parts took {parts:.1f} s summed" in said
