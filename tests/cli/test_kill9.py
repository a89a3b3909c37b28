"""kill -9 at several moments of prepare, embed, train and evaluate: no torn output under a final
name, an earlier good output left as it was, the rerun succeeds and the temporaries are gone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from support import make_docs

pytestmark = pytest.mark.slow

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def sentkit(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sentkit.cli.main", *argv], capture_output=True, text=True, env=ENV, timeout=timeout
    )


def kill_when(argv: list[str], ready: Callable[[], bool], *, timeout: float = 240) -> bool:
    """Start ``sentkit ARGV``; SIGKILL it as soon as `ready()` holds. False when it ended first."""
    p = subprocess.Popen(
        [sys.executable, "-m", "sentkit.cli.main", *argv],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + timeout
    try:
        while p.poll() is None and time.monotonic() < deadline:
            if ready():
                p.send_signal(signal.SIGKILL)
                p.wait()
                return True
            time.sleep(0.005)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode is not None
    err = p.stderr.read()[-2000:] if p.stderr else ""
    pytest.fail(f"sentkit {argv[0]} ended (exit {p.returncode}) before the moment to kill it: {err}")


# Killed from inside: a write too short to catch by polling dies half-way through itself.
_DIE_IN_SAVEZ = """
import os, signal, sys
import numpy as np
def dying(f, **arrays):
    f.write(b"PK\\x03\\x04 half a shard")
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)
np.savez = dying
from sentkit.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def killed_inside_savez(argv: list[str], *, timeout: float = 240) -> None:
    """Run ``sentkit ARGV`` with numpy's savez replaced by one that writes some bytes and SIGKILLs."""
    p = subprocess.run(
        [sys.executable, "-c", _DIE_IN_SAVEZ, *argv], env=ENV, capture_output=True, text=True, timeout=timeout
    )
    assert p.returncode == -signal.SIGKILL, f"exit {p.returncode}, not killed inside savez: {p.stderr[-2000:]}"


def temporaries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.name.endswith(".tmp"))


def grows(pattern: str, folder: Path, min_bytes: int = 0) -> Callable[[], bool]:
    """True once a file matching `pattern` under `folder` holds more than `min_bytes`."""

    def ready() -> bool:
        for p in folder.glob(pattern):
            try:
                if p.is_file() and p.stat().st_size > min_bytes:
                    return True
            except OSError:
                continue
        return False

    return ready


def _corpus(tmp_path: Path, n: int, words: int) -> Path:
    f = tmp_path / "corpus.jsonl"
    f.write_text("".join(json.dumps({"text": t}) + "\n" for t in make_docs(n, words)))
    return f


# ----------------------------------------------------------------------------- prepare
@pytest.mark.parametrize("moment", ["temp-folder-created", "tokens-half-written"])
def test_kill_prepare(moment: str, tmp_path: Path, tiny_model_dir: Path) -> None:
    from sentkit.data.store import TokenStore

    corpus = _corpus(tmp_path, 2500, 300)
    out = tmp_path / "store"
    argv = [
        "prepare",
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        "--model",
        str(tiny_model_dir),
        "--max-span-len",
        "16",
    ]
    # a good store from an earlier run must survive the killed replacement untouched
    (tmp_path / "small").mkdir()
    small = _corpus(tmp_path / "small", 40, 300)
    assert (
        sentkit(
            "prepare", "--corpus", str(small), "--out", str(out), "--model", str(tiny_model_dir), "--max-span-len", "16"
        ).returncode
        == 0
    )
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    if moment == "temp-folder-created":
        kill_when(argv, lambda: any(tmp_path.glob(".store.*.tmp")))
    else:
        kill_when(argv, grows(".store.*.tmp/tokens.bin", tmp_path, 1 << 19))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert len(TokenStore(out)) == 40
    r = sentkit(*argv)
    assert r.returncode == 0, r.stderr
    assert len(TokenStore(out)) == 2500 and temporaries(tmp_path) == []


def test_a_store_swap_that_fails_keeps_the_old_store(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sentkit.data import store as store_mod
    from sentkit.models.hub import load_tokenizer

    tok = load_tokenizer(str(tiny_model_dir))
    corpus = _corpus(tmp_path, 4, 300)
    out = tmp_path / "store"
    store_mod.prepare_store(corpus, tok, out, min_doc_tokens=10, show_progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real, calls = os.replace, []

    def replace(a: object, b: object) -> None:
        calls.append(1)
        if len(calls) == 2:  # the old store moved aside, the new one not yet in place
            raise OSError(5, "Input/output error")
        real(a, b)  # type: ignore[arg-type]

    monkeypatch.setattr(store_mod.os, "replace", replace)
    with pytest.raises(OSError):
        store_mod.prepare_store(corpus, tok, out, min_doc_tokens=20, show_progress=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert temporaries(tmp_path) == []


# ----------------------------------------------------------------------------- embed
@pytest.mark.parametrize("moment", ["temp-file-created", "rows-half-written"])
def test_kill_embed(moment: str, tmp_path: Path, tiny_model_dir: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("".join(f"sentence {i} about {' '.join(make_docs(1, 8, seed=i))}\n" for i in range(3000)))
    dst = tmp_path / "v.npy"
    np.save(dst, np.ones((2, 32), dtype=np.float32))  # an earlier good output
    before = dst.read_bytes()
    argv = ["embed", "--model", str(tiny_model_dir), "--input", str(src), "--output", str(dst), "--block", "200"]
    kill_when(argv, grows(".v.npy.*.tmp", tmp_path, 0 if moment == "temp-file-created" else 200 * 128 * 3))
    assert dst.read_bytes() == before
    assert temporaries(tmp_path)  # the killed write's temporary is still there ...
    r = sentkit(*argv)
    assert r.returncode == 0, r.stderr
    assert np.load(dst).shape == (3000, 32)
    assert temporaries(tmp_path) == []  # ... and the rerun removed it


def test_kill_an_embed_shard_and_run_it_again(tmp_path: Path, tiny_model_dir: Path) -> None:
    """A shard killed after some of its parts: every part under a final name is complete, the rerun
    keeps them and embeds the rest, and the joined output equals the single-process one."""
    src = tmp_path / "in.txt"
    src.write_text("".join(f"sentence {i} about {' '.join(make_docs(1, 8, seed=i))}\n" for i in range(1200)))
    dst, parts = tmp_path / "v.npy", tmp_path / "v.npy.parts"
    argv = ["embed", "--model", str(tiny_model_dir), "--input", str(src), "--output", str(dst), "--block", "100"]
    kill_when([*argv, "--shard", "0/2"], lambda: len(list(parts.glob("part-*.npy"))) >= 2)
    kept = {p.name: p.stat().st_mtime_ns for p in parts.glob("part-*.npy")}
    assert all(np.load(parts / name).shape == (100, 32) for name in kept)
    from sentkit.cli.main import main

    for shard in ("0/2", "1/2"):  # the reruns run in this process: only the kill needs a process of its own
        assert main(["-q", *argv, "--shard", shard]) == 0
        if shard == "0/2":
            assert {name: (parts / name).stat().st_mtime_ns for name in kept} == kept
    one = [
        "embed",
        "--model",
        str(tiny_model_dir),
        "--input",
        str(src),
        "--output",
        str(tmp_path / "one.npy"),
        "--block",
        "100",
    ]
    assert main(["-q", *one]) == 0
    assert dst.read_bytes() == (tmp_path / "one.npy").read_bytes()
    assert not parts.exists() and temporaries(tmp_path) == []


# ----------------------------------------------------------------------------- train
TRAIN_SETTINGS = [
    "--set",
    "max_span_len=16",
    "--set",
    "min_span_len=4",
    "--set",
    "batch_size=4",
    "--set",
    "checkpoint_every=2",
    "--set",
    "progress=false",
]


@pytest.mark.parametrize(
    "moment",
    [
        "while-preparing",
        "after-a-checkpoint",
    ],
)
def test_kill_train(moment: str, tmp_path: Path, tiny_model_dir: Path) -> None:
    corpus = _corpus(tmp_path, 2000 if moment == "while-preparing" else 40, 300)
    out = tmp_path / "run"
    argv = [
        "train",
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        "--model",
        str(tiny_model_dir),
        "--max-steps",
        "30",
        *TRAIN_SETTINGS,
    ]
    if moment == "while-preparing":
        kill_when(argv, lambda: any(out.glob(".prepared.*.tmp")))
        assert not (out / "prepared").exists() or (out / "prepared" / "meta.json").is_file()
    else:
        kill_when(argv, lambda: (out / "checkpoint" / "state.pt").is_file())  # a complete checkpoint
    for f in out.rglob("*.json"):
        if not any(part.endswith(".tmp") for part in f.parts):
            json.loads(f.read_text())  # no torn JSON under a final name
    r = sentkit(*argv, "--resume")
    assert r.returncode == 0, r.stderr
    assert temporaries(out) == []


# ----------------------------------------------------------------------------- evaluate
def _mr(root: Path, n: int) -> Path:
    import random

    rng = random.Random(0)
    words = ["good", "bad", "film", "plot", "actor", "scene", "boring", "great", "story", "music"]
    for name in ("rt-polarity.pos", "rt-polarity.neg"):
        lines = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 20))) for _ in range(n)]
        (root / "MR").mkdir(parents=True, exist_ok=True)
        (root / "MR" / name).write_text("\n".join(lines) + "\n", encoding="latin-1")
    return root


@pytest.mark.parametrize("moment", ["cache-shard-being-written", "after-encoding"])
def test_kill_evaluate(moment: str, tmp_path: Path, tiny_model_dir: Path) -> None:
    data = _mr(tmp_path / "senteval", 1500)
    cache, out = tmp_path / "cache", tmp_path / "results.json"
    argv = [
        "evaluate",
        "--model",
        str(tiny_model_dir),
        "--tasks",
        "MR",
        "--data-dir",
        str(data),
        "--output",
        str(out),
        "--cache-dir",
        str(cache),
        "--batch-size",
        "64",
    ]
    before = None
    if moment == "after-encoding":  # an earlier good results file must survive the kill
        small = _mr(tmp_path / "small", 60)
        r = sentkit(
            "evaluate",
            "--model",
            str(tiny_model_dir),
            "--tasks",
            "MR",
            "--data-dir",
            str(small),
            "--output",
            str(out),
            "--no-cache",
        )
        assert r.returncode == 0, r.stderr
        before = out.read_bytes()
    if moment == "cache-shard-being-written":
        killed_inside_savez(argv)
        assert [p.name for p in cache.rglob("*.npz")] == []  # no torn shard under a final name
        assert temporaries(cache) != []  # the half-written temporary is there for the next start
    else:
        kill_when(argv, grows("**/*.npz", cache))
    assert (out.read_bytes() if out.exists() else None) == before
    r = sentkit(*argv)
    assert r.returncode == 0, r.stderr
    assert "MR" in json.dumps(json.loads(out.read_text()))
    assert temporaries(tmp_path) == []
