"""The embedding cache never gives a wrong score: damaged shards (on disk, several ways), a
cache folder that cannot be written, a killed writer, two evaluations writing at once."""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from sentkit.evaluation import evaluate

from .conftest import HashEncoder

TASKS = "MR,STS12"


def cache_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Warnings of the cache (the fixture's tiny files also draw size warnings from the runner)."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("sentkit.evaluation.cache")
    ]


def _run(data_dir: Path, cache: Path, enc: HashEncoder | None = None) -> dict:
    return evaluate(enc or HashEncoder(), tasks=TASKS, data_dir=data_dir, cache_dir=str(cache), progress=False)


@pytest.fixture(scope="module")
def cold(senteval_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Scores without any cache: the right answer."""
    return evaluate(HashEncoder(), tasks=TASKS, data_dir=senteval_dir, use_cache=False, progress=False)["results"]


def _shards(cache: Path) -> list[Path]:
    return sorted(cache.rglob("shard-*.npz"))


def _rewrite(path: Path, **arrays: np.ndarray) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _load(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with np.load(path) as z:
        return z["keys"], z["emb"]


def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _garbage(p: Path) -> None:
    raw = bytearray(p.read_bytes())
    mid = len(raw) // 2
    raw[mid : mid + 64] = np.random.default_rng(0).integers(0, 256, 64, dtype=np.uint8).tobytes()
    p.write_bytes(bytes(raw))


def _empty(p: Path) -> None:
    p.write_bytes(b"")


def _float64(p: Path) -> None:
    k, e = _load(p)
    _rewrite(p, keys=k, emb=e.astype(np.float64))


def _int_keys(p: Path) -> None:
    k, e = _load(p)
    _rewrite(p, keys=k.astype(np.int64), emb=e)


def _object_array(p: Path) -> None:
    k, e = _load(p)
    _rewrite(p, keys=k, emb=np.array([list(r) for r in e], dtype=object))


def _fewer_keys(p: Path) -> None:
    k, e = _load(p)
    _rewrite(p, keys=k[:-1], emb=e)


def _nan(p: Path) -> None:
    k, e = _load(p)
    e[len(e) // 2, 0] = np.nan
    _rewrite(p, keys=k, emb=e)


def _inf(p: Path) -> None:
    k, e = _load(p)
    e[-1, -1] = np.inf
    _rewrite(p, keys=k, emb=e)


def _wrong_dim(p: Path) -> None:
    k, e = _load(p)
    _rewrite(p, keys=k, emb=np.ascontiguousarray(e[:, :5]))


def _other_model(p: Path) -> None:  # right shape and dtype, finite, wrong values: only the spot check sees it
    k, e = _load(p)
    _rewrite(p, keys=k, emb=np.random.default_rng(1).normal(size=e.shape).astype(np.float32))


def _not_npz(p: Path) -> None:
    p.write_text("these are not embeddings\n")


CORRUPTIONS = [
    _truncate,
    _garbage,
    _empty,
    _float64,
    _int_keys,
    _object_array,
    _fewer_keys,
    _nan,
    _inf,
    _wrong_dim,
    _other_model,
    _not_npz,
]


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=lambda f: f.__name__.strip("_"))
def test_a_damaged_shard_is_discarded_and_reencoded(corrupt, senteval_dir, tmp_path, cold, caplog):
    cache = tmp_path / "cache"
    warm = _run(senteval_dir, cache)
    assert warm["results"] == cold
    bad = _shards(cache)[0]  # MR's shard (tasks run in order, shards are named by time)
    keys, _ = _load(bad)
    corrupt(bad)
    enc = HashEncoder()
    with caplog.at_level(logging.WARNING, logger="sentkit.evaluation.cache"):
        res = _run(senteval_dir, cache, enc)
    assert res["errors"] == {} and res["results"] == cold  # the same scores as without a cache
    warnings = cache_warnings(caplog)
    assert len(warnings) == 1 and str(bad) in warnings[0] and "encoded again" in warnings[0]
    assert res["timings"]["sentences_encoded"] == len(keys)  # exactly the bad shard's sentences
    assert not bad.exists()  # deleted, so the next run meets it no more
    caplog.clear()
    again = _run(senteval_dir, cache)
    assert again["results"] == cold and again["timings"]["sentences_encoded"] == 0
    assert not cache_warnings(caplog)


def test_a_zip_member_with_a_bad_crc_is_caught(senteval_dir, tmp_path, cold):
    """Flip one byte inside the stored embeddings (the zip's CRC, not numpy, notices)."""
    cache = tmp_path / "cache"
    _run(senteval_dir, cache)
    bad = _shards(cache)[0]
    with zipfile.ZipFile(bad) as z:
        info = z.getinfo("emb.npy")
    raw = bytearray(bad.read_bytes())
    raw[info.header_offset + 30 + len(info.filename) + info.file_size - 3] ^= 0xFF  # last data bytes
    bad.write_bytes(bytes(raw))
    res = _run(senteval_dir, cache)
    assert res["results"] == cold and res["timings"]["sentences_encoded"] > 0


def test_an_unwritable_cache_folder_degrades_to_no_cache_with_one_warning(senteval_dir, tmp_path, cold, caplog):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with caplog.at_level(logging.WARNING):
        res = evaluate(
            HashEncoder(), tasks=TASKS, data_dir=senteval_dir, cache_dir=str(blocker / "cache"), progress=False
        )
    assert res["errors"] == {} and res["results"] == cold
    warnings = cache_warnings(caplog)
    assert len(warnings) == 1 and "without writing the cache" in warnings[0]


def test_a_write_that_fails_midway_warns_once_and_the_run_goes_on(senteval_dir, tmp_path, cold, caplog, monkeypatch):
    import sentkit.evaluation.cache as cache_mod

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(args[0]))

    monkeypatch.setattr(cache_mod, "atomic_open", full_disk)
    with caplog.at_level(logging.WARNING):
        res = _run(senteval_dir, tmp_path / "cache")
    assert res["results"] == cold
    warnings = cache_warnings(caplog)
    assert len(warnings) == 1 and "No space left" in warnings[0]  # two tasks, one warning
    assert not _shards(tmp_path / "cache")


def test_stale_temporaries_of_a_killed_write_are_removed(senteval_dir, tmp_path, cold):
    from sentkit.core.io import temp_prefix

    cache = tmp_path / "cache"
    _run(senteval_dir, cache)
    folder = _shards(cache)[0].parent
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    name = "shard-1-1-5.npz"
    stale = folder / (temp_prefix(name).replace(f"-{os.getpid()}.", f"-{dead.pid}.") + "abc.tmp")
    stale.write_bytes(b"half a shard")
    live = folder / (temp_prefix(name) + "def.tmp")  # this process is alive: its temporary stays
    live.write_bytes(b"being written")
    assert _run(senteval_dir, cache)["results"] == cold
    assert not stale.exists() and live.exists()


# --------------------------------------------------------------------------------------------
# other processes: kill -9 in the middle, and two evaluations sharing one cache
# --------------------------------------------------------------------------------------------
SCRIPT = """
import json, sys, time, hashlib, pathlib, threading
import numpy as np
import sentkit
from sentkit.evaluation import protocols

data, cache, out, delay, moment = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]

def shards():
    return len(list(pathlib.Path(cache).rglob("shard-*.npz")))

def at(name):
    # The test kills this process at a named moment: say so, then wait for the signal (no sleeps).
    if moment == name:
        print(name, flush=True)
        threading.Event().wait()

class Slow:
    def __init__(self, delay):
        self.delay = delay
    def fingerprint(self):
        return "slow-hash"
    def encode(self, texts):
        at("first-encode")  # before any shard is written
        if shards() >= 1:
            at("second-task")  # inside the second task's encoding, the first task's shard written
        time.sleep(self.delay)
        out = np.empty((len(texts), 8), np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.md5(t.encode()).digest()[:4], "little")
            out[i] = np.random.default_rng(seed).normal(size=8)
        return out

for name in ("inner_kfold", "kfold_then_test", "split_classifier"):  # the classifiers, after encoding
    def wrapped(*a, _orig=getattr(protocols, name), **k):
        if shards() >= 5:
            at("classifying")  # every task's shard written
        return _orig(*a, **k)
    setattr(protocols, name, wrapped)

res = sentkit.evaluate(Slow(delay), tasks="MR,CR,SUBJ,MPQA,TREC", data_dir=data, cache_dir=cache,
                       encode_batch_size=8, progress=False)
with open(out, "w") as f:
    json.dump({"results": res["results"], "errors": res["errors"], "timings": res["timings"]}, f)
"""


def _start(tmp_path: Path, data: Path, cache: Path, out: Path, delay: float, moment: str = "none") -> subprocess.Popen:
    script = tmp_path / "run_eval.py"
    script.write_text(textwrap.dedent(SCRIPT))
    with open(tmp_path / f"{out.stem}.stderr", "wb") as err:  # a file: a chatty child never blocks on a pipe
        return subprocess.Popen(
            [sys.executable, str(script), str(data), str(cache), str(out), str(delay), moment],
            stdout=subprocess.PIPE,
            stderr=err,
        )


def _stderr(p: subprocess.Popen) -> str:
    return Path(p.args[3]).with_name(Path(p.args[4]).stem + ".stderr").read_text(errors="replace")[-2000:]


def _finish(p: subprocess.Popen, out: Path) -> dict:
    p.communicate(timeout=300)
    assert p.returncode == 0, _stderr(p)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def five_cold(senteval_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    d = tmp_path_factory.mktemp("cold5")
    return _finish(_start(d, senteval_dir, d / "cache", d / "out.json", 0.0), d / "out.json")


@pytest.mark.parametrize(
    ("moment", "shards"),
    [("first-encode", 0), ("second-task", 1), ("classifying", 5)],
    ids=["before-any-shard", "mid-run", "after-all-encoding"],
)
def test_kill_9_during_evaluate_leaves_a_cache_the_next_run_trusts(moment, shards, senteval_dir, tmp_path, five_cold):
    """Killed at three moments, each signalled by the evaluation itself (no sleeps): in the first
    task's encoding, inside the second task's encoding, and after every task's shard is written
    (classifiers running)."""
    cache = tmp_path / "cache"
    p = _start(tmp_path, senteval_dir, cache, tmp_path / "killed.json", 0.0, moment)
    assert p.stdout is not None
    reached = p.stdout.readline().decode().strip()  # blocks until the child is at the moment, or has died
    assert reached == moment, _stderr(p)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert len(_shards(cache)) == shards and not (tmp_path / "killed.json").exists()
    res = _finish(_start(tmp_path, senteval_dir, cache, tmp_path / "resumed.json", 0.0), tmp_path / "resumed.json")
    assert res["errors"] == {} and res["results"] == five_cold["results"]
    assert (
        res["timings"]["sentences_from_cache"] + res["timings"]["sentences_encoded"]
        == res["timings"]["sentences_unique"]
    )
    if shards == 5:
        assert res["timings"]["sentences_encoded"] == 0


def test_two_evaluations_writing_one_cache_at_once_both_succeed(senteval_dir, tmp_path, five_cold):
    cache = tmp_path / "cache"
    a = _start(tmp_path, senteval_dir, cache, tmp_path / "a.json", 0.02)
    b = _start(tmp_path, senteval_dir, cache, tmp_path / "b.json", 0.02)
    ra, rb = _finish(a, tmp_path / "a.json"), _finish(b, tmp_path / "b.json")
    assert ra["results"] == rb["results"] == five_cold["results"]
    third = _finish(_start(tmp_path, senteval_dir, cache, tmp_path / "c.json", 0.0), tmp_path / "c.json")
    assert third["results"] == five_cold["results"] and third["timings"]["sentences_encoded"] == 0


def test_every_fingerprint_gets_its_own_folder_inside_the_root(tmp_path):
    from sentkit.evaluation.cache import EmbeddingCache, folder_name

    assert folder_name("hash-8") == "hash-8" and folder_name("0123abcd") == "0123abcd"  # plain names kept
    names = [folder_name(f) for f in ("..", ".", "", "a/b", "a_b", "x" * 130 + "1", "x" * 130 + "2", ".hidden")]
    assert len(set(names)) == len(names)
    for n in names:
        assert n and not n.startswith(".") and "/" not in n
    root = tmp_path / "root"
    for fp in ("..", "../../etc"):
        c = EmbeddingCache(root, fp)
        c.add(["a sentence"], np.ones((1, 3), np.float32))
        assert c.dir.parent == root and any(c.dir.glob("shard-*.npz"))
