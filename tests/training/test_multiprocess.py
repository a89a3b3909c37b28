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
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch

from sentkit.core.config import from_dict
from sentkit.core.methods import get_method
from sentkit.training.checkpoint import CHECKPOINT
from sentkit.training.metrics import read_metrics
from support.training import torchrun

WORKER = Path(__file__).parents[2] / "scripts" / "train_worker.py"  # the worker scripts/gpu_check.py runs too
METHODS = ("declutr", "mlm", "simcse", "tsdae")
STEPS, CUT = 4, 2  # steps of every run; the killed and the one-process runs stop after the checkpoint at CUT
RESUMED = ("killed", "prepared", "begun")

pytestmark = pytest.mark.slow


def settings(method: str, corpora: dict[str, Path], model: Path, out: Path, **kw: Any) -> dict[str, Any]:
    """A run of a few steps on a tiny model and corpus; MLM builds its model from scratch with a
    vocabulary trained on the corpus (the workflow that needs one-off preparation)."""
    base: dict[str, Any] = {
        "corpus": str(corpora["sentences" if method in ("simcse", "tsdae") else "docs"]),
        "out": str(out),
        "model": str(model),
        "max_steps": STEPS,
        "checkpoint_every": CUT,
        "batch_size": 4,
        "lr": 1e-4,
        "progress": False,
        "log_every": 1,
        "dist_timeout": 120,
    }
    if method == "declutr":
        base.update(num_anchors=2, num_positives=2, min_span_len=8, max_span_len=32, grad_accum=2, grad_cache=True)
    if method == "mlm":
        base.update(
            seq_len=32,
            from_scratch=True,
            train_tokenizer=True,
            vocab_size=300,
            layers=2,
            hidden=32,
            heads=2,
            intermediate=64,
            max_positions=64,
        )
    return {**base, **kw}


def _corpora(root: Path) -> dict[str, Path]:
    from support import make_docs, write_sentence_docs

    docs, sentences = root / "docs", root / "sentences"
    docs.mkdir()
    sentences.mkdir()
    for i, text in enumerate(make_docs(8, 300)):
        (docs / f"doc{i}.txt").write_text(text, encoding="utf-8")
    write_sentence_docs(sentences)
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
        jobs = [
            {"method": method, "config": cfg(method, "fresh")},
            {"method": method, "config": cfg(method, "killed"), "kill_at": CUT},
        ]
        killed[method] = torchrun(WORKER, json.dumps({"jobs": jobs}))
        out = root / method / "killed"
        left[method] = {
            "model": (out / "sentkit.json").exists(),
            "step": torch.load(out / CHECKPOINT, weights_only=False)["step"] if (out / CHECKPOINT).is_file() else None,
        }
    jobs = [{"method": m, "config": cfg(m, name, resume=True)} for m in METHODS for name in RESUMED]
    (root / "theirs").mkdir()
    (root / "theirs" / "notes.txt").write_text("a file of the user's")  # rank 0 refuses the folder
    jobs.append(
        {"method": "simcse", "config": {**cfg("simcse", "x"), "out": str(root / "theirs")}, "expect_error": True}
    )
    resumed = torchrun(WORKER, json.dumps({"jobs": jobs}))
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


@pytest.fixture()
def cpu_load() -> Any:
    """Busy processes, twice as many as the machine has cores, for the length of a test: the
    processes under test start, connect and fail at moments that the load shifts (the order in
    which a dying rank and a waiting one reach group creation, or a collective, changes with it).
    Each one also stops by itself after 10 minutes or when this process is gone."""
    import os
    import subprocess
    import sys

    spin = (
        "import os, time\nparent, end = os.getppid(), time.time() + 600\n"
        "while time.time() < end and os.getppid() == parent:\n    pass\n"
    )
    busy = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(min(32, 2 * (os.cpu_count() or 1)))]
    try:
        yield len(busy)
    finally:
        for p in busy:
            p.kill()
        for p in busy:
            p.wait()


def _ranks(code: str, *args: str) -> list[subprocess.Popen[str]]:
    """Two processes of one gloo run started without torchrun (nothing stops the others for them)."""
    import os
    import sys

    from support.training import free_port

    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": "2",
        "OMP_NUM_THREADS": "1",
    }
    return [
        subprocess.Popen(
            [sys.executable, "-c", code, *args],
            env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in (0, 1)
    ]


_DIES_WHILE_THE_OTHER_WAITS = """
import os, signal, sys
import torch.distributed as dist
from sentkit.training.distributed import RankFailed, init_from_env, main_first
try:
    info = init_from_env("cpu", timeout_s=60)
    with main_first(info, 3600, "rank 0 prepared the run") as plan:
        if info.is_main:
            os.kill(os.getpid(), signal.SIGKILL)  # dies in the middle of its preparation
except RankFailed as e:
    print(f"RankFailed: {e}", flush=True)
    os._exit(7)
"""


def test_a_rank_0_that_dies_is_reported_not_waited_on(cpu_load: int) -> None:
    """Rank 1 waits for rank 0's preparation under a timeout of an hour, rank 0 is killed, rank 1
    raises RankFailed at once, wherever the kill finds it: in the wait, or still making the group
    the wait uses (under load, rank 0 can die before rank 1 has finished making it). The timeout of
    `communicate` fails the test long before the hour."""
    procs = _ranks(_DIES_WHILE_THE_OTHER_WAITS)
    outs = [p.communicate(timeout=300) for p in procs]
    assert procs[0].returncode == -9
    assert procs[1].returncode == 7, outs[1][1][-2000:]
    assert "rank 1: rank 0 stopped while rank 0 prepared the run" in outs[1][0]


_KILLED_MID_TRAINING = """
import os, signal, sys
import sentkit.training.loop as loop
from sentkit.cli.main import main

victim, at = int(sys.argv[1]), int(sys.argv[2])
step_of = loop.forward_backward

def forward_backward(ctx, batch, step):
    if ctx.dist.rank == victim and step == at:  # `at` steps are done: dies in the next one, as kill -9 would
        os.kill(os.getpid(), signal.SIGKILL)
    return step_of(ctx, batch, step)

loop.forward_backward = forward_backward
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize("victim", [1, 0])
def test_a_rank_that_dies_mid_training_is_reported_in_one_line(
    victim: int, cpu_load: int, tiny_corpus: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """`sentkit train` in 2 gloo processes; one is killed in step 4 (after the checkpoint of step 2).
    The other reports it in one line, its log and the checkpoint to resume from named, exit 1:
    whichever rank dies (rank 0 also holds the run's store without torchrun)."""
    out = tmp_path / "run"
    argv = [
        "-q",
        "train",
        "--method",
        "declutr",
        "--model",
        str(tiny_model_dir),
        "--corpus",
        str(tiny_corpus),
        "--out",
        str(out),
        "--max-steps",
        "6",
    ]
    for kv in (
        "checkpoint_every=2",
        "batch_size=4",
        "num_anchors=2",
        "num_positives=2",
        "min_span_len=8",
        "max_span_len=32",
        "progress=false",
        "dist_timeout=300",
    ):
        argv += ["--set", kv]
    procs = _ranks(_KILLED_MID_TRAINING, str(victim), "3", *argv)
    outs = [p.communicate(timeout=600) for p in procs]
    survivor = 1 - victim
    assert procs[victim].returncode == -9, outs[victim][1][-2000:]
    err = outs[survivor][1]
    assert procs[survivor].returncode == 1, err[-3000:]
    log = out / ("train.log" if victim == 0 else f"train-rank{victim}.log")
    assert err.strip().splitlines() == [  # one line, nothing else
        f"sentkit train: error: rank {victim} stopped while training step 4 (its log: {log}); resume with --resume "
        f"(the last checkpoint: {out / 'checkpoint' / 'state.pt'}, step 2)"
    ], err[-3000:]
    assert f"rank {victim} of 2: pid {procs[victim].pid}" in log.read_text()  # the log named is the dead rank's
    assert torch.load(out / CHECKPOINT, weights_only=False)["step"] == 2


_THREE_RANKS = """
import os, signal, sys, time
import torch, torch.distributed as dist
from sentkit.training.distributed import RankFailed, init_from_env, watch_peers
info = init_from_env("cpu", timeout_s=120)
try:
    with watch_peers(info, "step 1"):
        for i in range(1000):
            if info.rank == 2 and i == 5:
                os.kill(os.getpid(), signal.SIGKILL)
            dist.all_reduce(torch.ones(4))
except RankFailed as e:
    print(f"RankFailed {e.stopped}: {e}", flush=True)
    os._exit(7)
"""


def test_of_three_ranks_the_one_that_stopped_is_named(cpu_load: int) -> None:
    """With more than two ranks, the survivors name the one that did not answer their roll call."""
    import os
    import sys

    from support.training import free_port

    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": "3",
        "OMP_NUM_THREADS": "1",
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _THREE_RANKS],
            env={**env, "RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(3)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert procs[2].returncode == -9
    for r in (0, 1):
        assert procs[r].returncode == 7, outs[r][1][-2000:]
        assert outs[r][0].startswith(f"RankFailed [2]: rank {r}: rank 2 stopped while step 1 ("), outs[r][0]
