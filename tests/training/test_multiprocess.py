"""The whole training loop under torchrun (2 gloo processes) for every transformer method: a fresh
run; a run killed with kill -9 mid-training, then resumed; a run prepared in one process (the token
store, MLM's vocabulary) and one trained for a while in one process, each resumed in two. Every one
ends with the weights of the single-process run (dropout is off, so two processes compute the same
step as one; a rank that resumed from another step or checkpoint would drift away).

MLM's runs build their model from scratch with a vocabulary trained on the corpus. The tokenizers
library breaks ties between equally frequent pieces in a random order, so each MLM run is compared
with a single-process run given the same vocabulary (copied into its folder before it starts)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from _helpers import torchrun

from sentkit.config import from_dict
from sentkit.methods import get_method
from sentkit.training.checkpoint import CHECKPOINT
from sentkit.training.metrics import read_metrics

HERE = Path(__file__).parent
METHODS = ("declutr", "mlm", "simcse", "tsdae")
STEPS, CUT = 4, 2  # steps of every run; the killed and the one-process runs stop after the checkpoint at CUT
RESUMED = ("killed", "prepared", "begun")

pytestmark = pytest.mark.slow


def settings(method: str, corpora: dict[str, Path], model: Path, out: Path, **kw: Any) -> dict[str, Any]:
    """A run of a few steps on a tiny model and corpus; MLM builds its model from scratch with a
    vocabulary trained on the corpus (the workflow that needs one-off preparation)."""
    base: dict[str, Any] = {"corpus": str(corpora["sentences" if method in ("simcse", "tsdae") else "docs"]),
                            "out": str(out), "model": str(model), "max_steps": STEPS, "checkpoint_every": CUT,
                            "batch_size": 4, "lr": 1e-4, "progress": False, "log_every": 1, "dist_timeout": 120}
    if method == "declutr":
        base.update(num_anchors=2, num_positives=2, min_span_len=8, max_span_len=32, grad_accum=2, grad_cache=True)
    if method == "mlm":
        base.update(seq_len=32, from_scratch=True, train_tokenizer=True, vocab_size=300, layers=2, hidden=32, heads=2,
                    intermediate=64, max_positions=64)
    return {**base, **kw}


def _corpora(root: Path) -> dict[str, Path]:
    from conftest import WORDS, make_docs

    docs, sentences = root / "docs", root / "sentences"
    docs.mkdir()
    sentences.mkdir()
    for i, text in enumerate(make_docs(8, 300)):
        (docs / f"doc{i}.txt").write_text(text, encoding="utf-8")
    rng = np.random.default_rng(0)
    for d in range(4):
        sents = [" ".join(rng.choice(WORDS, size=int(rng.integers(5, 12)))).capitalize() + "." for _ in range(12)]
        (sentences / f"doc{d}.txt").write_text(" ".join(sents), encoding="utf-8")
    return {"docs": docs, "sentences": sentences}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> dict[str, Any]:
    """Every run of the module: single-process ones here, the others in 5 torchrun launches."""
    root = tmp_path_factory.mktemp("multiprocess")
    corpora = _corpora(root)

    def cfg(method: str, name: str, **kw: Any) -> dict[str, Any]:
        return settings(method, corpora, tiny_model_dir, root / method / name, **kw)

    def one_process(method: str, name: str, **kw: Any) -> None:
        m = get_method(method)
        m.train(from_dict(m.config_cls, cfg(method, name)), **kw)

    for method in METHODS:
        if method != "mlm":
            one_process(method, "reference")
        one_process(method, "prepared", prepare_only=True)
        one_process(method, "begun", stop_at=CUT)
    killed, left = {}, {}
    for method in METHODS:  # a fresh run, then a run that rank 0's kill -9 ends after the checkpoint at CUT
        jobs = [{"method": method, "config": cfg(method, "fresh")},
                {"method": method, "config": cfg(method, "killed"), "kill_at": CUT}]
        killed[method] = torchrun(HERE / "ddp_train_worker.py", json.dumps({"jobs": jobs}))
        out = root / method / "killed"
        left[method] = {"model": (out / "sentkit.json").exists(),
                        "step": torch.load(out / CHECKPOINT, weights_only=False)["step"] if (out / CHECKPOINT).is_file() else None}
    jobs = [{"method": m, "config": cfg(m, name, resume=True)} for m in METHODS for name in RESUMED]
    (root / "theirs").mkdir()
    (root / "theirs" / "notes.txt").write_text("a file of the user's")  # rank 0 refuses the folder
    jobs.append({"method": "simcse", "config": {**cfg("simcse", "x"), "out": str(root / "theirs")}, "expect_error": True})
    resumed = torchrun(HERE / "ddp_train_worker.py", json.dumps({"jobs": jobs}))
    for name in ("fresh", *RESUMED):  # MLM: a single-process run with each run's vocabulary
        shutil.copytree(root / "mlm" / name / "tokenizer", root / "mlm" / f"reference-{name}" / "tokenizer")
        one_process("mlm", f"reference-{name}")
    return {"root": root, "killed": killed, "left": left, "resumed": resumed}


def _weights(out: Path) -> dict[str, torch.Tensor]:
    return torch.load(out / CHECKPOINT, weights_only=False)["model"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("method", METHODS)
def test_a_killed_rank_is_reported_and_its_checkpoint_kept(runs: dict[str, Any], method: str) -> None:
    res = runs["killed"][method]
    assert res.returncode != 0, "the launch with a kill -9 succeeded"
    assert "Signal 9 (SIGKILL)" in res.stderr and "rank      : 0" in res.stderr, res.stderr[-3000:]
    assert runs["left"][method] == {"model": False, "step": CUT}  # stopped mid-training, its checkpoint complete


@pytest.mark.parametrize("scenario", ["fresh", *RESUMED])
@pytest.mark.parametrize("method", METHODS)
def test_two_processes_end_where_one_does(runs: dict[str, Any], method: str, scenario: str) -> None:
    res = runs["resumed"] if scenario in RESUMED else runs["killed"][method]
    if scenario in RESUMED:
        assert res.returncode == 0, res.stderr[-4000:]
    root = runs["root"] / method
    out = root / scenario
    assert (out / "sentkit.json").is_file(), res.stderr[-4000:]  # the encoder was saved: the run finished
    ref, got = _weights(root / ("reference" if method != "mlm" else f"reference-{scenario}")), _weights(out)
    assert ref.keys() == got.keys()
    worst = max(float((ref[k] - got[k]).abs().max()) for k in ref)
    assert worst < 1e-5, f"{method} {scenario}: weights differ from the one-process run by {worst:.2e}"
    steps = [int(r["step"]) for r in read_metrics(out / "metrics.csv")]
    assert sorted(set(steps)) == list(range(1, STEPS + 1))
    if scenario in RESUMED:
        log = (out / "train.log").read_text()
        assert ("resumed from" in log) == (scenario != "prepared")
        state = torch.load(out / CHECKPOINT, weights_only=False)
        assert state["step"] == STEPS and state["scheduler"]["last_epoch"] == STEPS


def test_rank_zeros_error_ends_every_rank(runs: dict[str, Any]) -> None:
    """Rank 0 refuses the output folder before it prepares anything: rank 1, waiting for it, raises
    the same error instead of waiting on."""
    lines = sorted(line for line in runs["resumed"].stdout.splitlines() if " raised " in line)
    assert [line.split(":")[0] for line in lines] == ["rank 0 raised RunDirError", "rank 1 raised RunDirError"]
    assert all("files that sentkit did not write (notes.txt)" in line for line in lines)


_DIES_WHILE_THE_OTHER_WAITS = """
import os, signal, sys
import torch.distributed as dist
from sentkit.training.distributed import RankFailed, init_from_env, main_first
info = init_from_env("cpu", timeout_s=60)
try:
    with main_first(info, 3600, "rank 0 prepared the run") as plan:
        if info.is_main:
            os.kill(os.getpid(), signal.SIGKILL)  # dies in the middle of its preparation
except RankFailed as e:
    print(f"RankFailed: {e}", flush=True)
    os._exit(7)
"""


def test_a_rank_0_that_dies_is_reported_not_waited_on(tmp_path: Path) -> None:
    """Processes started without torchrun (nothing stops the others for them): rank 1 waits for rank
    0's preparation under a timeout of an hour, rank 0 is killed, rank 1 raises RankFailed at once."""
    import os
    import subprocess
    import sys
    import time

    from _helpers import free_port

    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2",
           "OMP_NUM_THREADS": "1"}
    t = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", _DIES_WHILE_THE_OTHER_WAITS], env={**env, "RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert procs[0].returncode == -9
    assert procs[1].returncode == 7, outs[1][1][-2000:]
    assert "rank 1: rank 0 stopped while rank 0 prepared the run" in outs[1][0]
    assert time.monotonic() - t < 100  # not the hour of the timeout
