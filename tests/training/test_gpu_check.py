"""scripts/gpu_check.sh must work on its first run on a GPU machine. Where it cannot run it says so
in one line with an exit status of its own (no .venv 4, torch missing 5, a CPU-only torch on a
machine with an NVIDIA GPU 6, no GPU 3); `--cpu --out DIR` runs every check that runs on a CPU,
without pytest or the tests/ tree, and leaves only DIR/gpu_check.json. What only a GPU would
exercise is checked here with stand-ins: fp16 steps that the loss scaler skips, the throughput
floors (each fails a step slowed through SENTKIT_GPU_CHECK_SLOW; a step without autocast is caught
by the dtypes it computes in), the work counted (against torch's FLOP counter), the datasheet
table, a check that cannot build what it needs. scripts/setup.sh passes SENTKIT_TORCH_INDEX to pip."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

import gpu_check

REPO = Path(__file__).resolve().parents[2]


def run_script(
    script: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(script), *args],
        env=env if env is not None else {**os.environ},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line(res: subprocess.CompletedProcess[str]) -> str:
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr[-3000:]
    assert lines[0].startswith("gpu_check: error: "), lines[0]
    return lines[0]


def blockers(folder: Path, *modules: str) -> Path:
    """A folder of modules that fail to import, put before everything else on PYTHONPATH."""
    folder.mkdir(parents=True, exist_ok=True)
    for m in modules:
        (folder / f"{m}.py").write_text(f'raise ImportError("No module named {m!r} (blocked by the test)")\n')
    return folder


def bin_dir(folder: Path, **scripts: str) -> Path:
    """A folder of executables `name` with the given bash bodies."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in scripts.items():
        (folder / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (folder / name).chmod(0o755)
    return folder


def env_with(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "PYTHON")}
    env["PYTHON"] = sys.executable
    env.update(extra)
    return env


# ----------------------------------------------------------------------------- one line, one exit status
def test_no_venv_is_one_line_and_exit_4(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "gpu_check.sh", tmp_path / "scripts")  # a checkout without .venv
    env = env_with()
    del env["PYTHON"]
    res = run_script(tmp_path / "scripts" / "gpu_check.sh", env=env)
    assert res.returncode == gpu_check.NO_ENV == 4
    line = one_line(res)
    assert "no Python environment" in line and ".venv is missing" in line and "SENTKIT_TORCH_INDEX=" in line
    res = run_script(tmp_path / "scripts" / "gpu_check.sh", env={**env, "PYTHON": str(tmp_path / "nothing")})
    assert res.returncode == 4 and "is not an executable" in one_line(res)


def test_missing_torch_is_one_line_and_exit_5(tmp_path: Path) -> None:
    env = env_with(PYTHONPATH=str(blockers(tmp_path / "block", "torch")))
    res = run_script(REPO / "scripts" / "gpu_check.sh", env=env)
    assert res.returncode == gpu_check.MISSING == 5
    line = one_line(res)
    assert "torch is not installed" in line and "scripts/setup.sh" in line
    res = run_script(
        REPO / "scripts" / "gpu_check.sh",
        "--cpu",
        env=env_with(PYTHONPATH=str(blockers(tmp_path / "block2", "transformers"))),
    )
    assert res.returncode == 5 and "transformers cannot be imported" in one_line(res)


def test_a_cpu_only_torch_on_a_machine_with_an_nvidia_gpu_is_exit_6(tmp_path: Path) -> None:
    """The machine's GPU is seen through nvidia-smi (a stand-in on PATH that lists one)."""
    import torch

    if torch.version.cuda is not None:
        pytest.skip(f"torch {torch.__version__} is a CUDA build")
    fake = bin_dir(tmp_path / "bin", **{"nvidia-smi": 'echo "GPU 0: NVIDIA H200 (UUID: GPU-1234)"'})
    res = run_script(
        REPO / "scripts" / "gpu_check.sh",
        "--out",
        str(tmp_path / "out"),
        env=env_with(PATH=f"{fake}:{os.environ['PATH']}"),
    )
    assert res.returncode == gpu_check.CPU_TORCH == 6
    line = one_line(res)
    assert "is a CPU-only build, but this machine has an NVIDIA GPU (NVIDIA H200)" in line
    assert "SENTKIT_TORCH_INDEX=https://download.pytorch.org/whl/cu128 bash scripts/setup.sh" in line
    assert not (tmp_path / "out").exists()


def test_no_gpu_is_one_line_and_exit_3(tmp_path: Path) -> None:
    if gpu_check.nvidia_gpus():
        pytest.skip("this machine has an NVIDIA GPU")
    res = run_script(REPO / "scripts" / "gpu_check.sh", "--out", str(tmp_path / "out"), env=env_with())
    assert res.returncode == gpu_check.NO_GPU == 3
    assert one_line(res).startswith("gpu_check: error: no GPU: ")
    assert not (tmp_path / "out").exists()


def test_preflight_on_the_machines_it_was_written_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the machine and torch say, simulated: a CUDA build that sees no GPU (with and without
    an NVIDIA GPU on the machine), a CPU-only build beside a GPU, and a CUDA build that sees one."""
    import torch

    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(gpu_check, "nvidia_gpus", lambda: ["NVIDIA H200"])
    code, line = gpu_check.preflight(cpu=False) or (None, "")
    assert code == 3 and "the machine has NVIDIA H200: check the driver against CUDA 12.8" in line
    monkeypatch.setattr(gpu_check, "nvidia_gpus", lambda: [])
    code, line = gpu_check.preflight(cpu=False) or (None, "")
    assert code == 3 and "no NVIDIA GPU here" in line
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert gpu_check.preflight(cpu=False) is None
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(gpu_check, "nvidia_gpus", lambda: ["NVIDIA H200", "NVIDIA H200"])
    code, line = gpu_check.preflight(cpu=False) or (None, "")
    assert code == 6 and "(NVIDIA H200)" in line
    assert gpu_check.preflight(cpu=True) is None  # --cpu needs no GPU


def test_the_output_folder_is_out_else_outside_the_repository() -> None:
    assert gpu_check.default_out({"OUT": "/results/here"}) == Path("/results/here")
    default = gpu_check.default_out({})
    assert default == Path(tempfile.gettempdir()) / "sentkit-gpu-check"
    assert REPO not in default.resolve().parents


# ----------------------------------------------------------------------------- what only a GPU exercises
def _rows(losses: list[float], skipped: set[int]) -> list[dict[str, Any]]:
    return [{"loss": x, "grad_norm": math.inf if i in skipped else 1.0} for i, x in enumerate(losses)]


def test_fp16_is_compared_with_fp32_at_equal_applied_steps() -> None:
    """fp16's first two steps skipped by the loss scaler: its steps 1-3 all start from the initial
    weights, and its step 8 from those that fp32's step 6 started from (5 steps applied)."""
    ref = _rows([10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0], set())
    assert gpu_check.losses_by_applied(ref) == {i: 10.0 - i for i in range(8)}
    got = _rows([10.0, 10.1, 10.2, 9.0, 8.0, 7.0, 6.0, 5.2], {0, 1})
    assert gpu_check.losses_by_applied(got) == {0: 10.0, 1: 9.0, 2: 8.0, 3: 7.0, 4: 6.0, 5: 5.2}
    cmp = gpu_check.compare_at_applied(ref, got)
    assert cmp["skipped steps"] == 2 and cmp["applied"] == 5
    assert cmp["first step rel. diff"] == 0.0
    assert cmp["last steps compared (applied steps before them)"] == "5-5"
    assert cmp["last steps rel. diff"] == pytest.approx(0.2 / 5.0)  # fp32 after 5 applied steps: 5.0
    # compared step by step instead, the lag alone would look like a 73 % gap on the last step
    assert abs(got[-1]["loss"] - ref[-1]["loss"]) / ref[-1]["loss"] > 0.7
    # 16 counts in common: the mean of the last quarter (4 counts) is compared
    long_ref = _rows([20.0 - i for i in range(17)], set())
    long_got = _rows([20.0, 20.5, *[19.0 - i for i in range(15)]], {0})
    cmp = gpu_check.compare_at_applied(long_ref, long_got)
    assert cmp["last steps compared (applied steps before them)"] == "12-15" and cmp["last steps rel. diff"] == 0.0


@pytest.fixture()
def workspace(tmp_path: Path) -> gpu_check.Workspace:
    return gpu_check.Workspace(tmp_path / "runs", gpu_check.Sizes(cpu=True, steps=None))


# ----------------------------------------------------------------------------- throughput: work, peaks, floors
def test_the_work_counted_is_what_torch_counts() -> None:
    """forward_flops / train_flops against torch's FlopCounterMode on a small BERT masked LM: two
    sequences of other lengths (SDPA attention) and the MLM head on 3 tokens, forward, then forward
    and backward."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=48)
    torch.manual_seed(0)
    mlm = BertForMaskedLM(cfg)
    shape = gpu_check.Shape.of(cfg)
    assert shape == gpu_check.Shape(layers=3, hidden=32, intermediate=48, vocab=120)
    lengths, masked = [7, 12], 3

    def step(backward: bool) -> int:
        with FlopCounterMode(display=False) as fc:
            loss = torch.zeros(())
            for n in lengths:
                hidden = mlm.bert(input_ids=torch.randint(5, 120, (1, n))).last_hidden_state
                loss = loss + hidden.sum() + (mlm.cls(hidden[0, :masked]).sum() if n == lengths[0] else 0)
            if backward:
                loss.backward()
        return int(fc.get_total_flops())

    assert gpu_check.forward_flops(shape, lengths, masked) == step(backward=False) > 0
    assert gpu_check.train_flops(shape, lengths, masked) == step(backward=True)
    # by hand: per layer and token 2 (4 d^2 + 2 d I) + 4 s d; the head 2 (d^2 + d V) per masked token
    d, i = 32, 48
    by_hand = sum(3 * n * (2 * (4 * d * d + 2 * d * i) + 4 * n * d) for n in lengths) + 3 * 2 * (d * d + d * 120)
    assert gpu_check.forward_flops(shape, lengths, masked) == by_hand


def test_the_datasheet_table_by_device_name() -> None:
    peak = gpu_check.datasheet_peak
    for name, bf16, fp32 in [
        ("NVIDIA H200", 989, 67),
        ("NVIDIA H100 80GB HBM3", 989, 67),
        ("NVIDIA H100 PCIe", 756, 51),
        ("NVIDIA H100 NVL", 835, 60),
        ("NVIDIA GH200 480GB", 989, 67),
        ("NVIDIA A100-SXM4-80GB", 312, 19.5),
        ("NVIDIA A100-PCIE-40GB", 312, 19.5),
        ("NVIDIA L4", 121, 30.3),
        ("NVIDIA L40S", 362, 91.6),
        ("NVIDIA A10", 125, 31.2),
    ]:
        assert peak(name) == {"bf16": pytest.approx(bf16 * 1e12), "fp32": pytest.approx(fp32 * 1e12)}, name
    for name in ("NVIDIA A10G", "Tesla T4", "NVIDIA L40", "NVIDIA GeForce RTX 4090", "CPU"):
        assert peak(name) is None, name


def test_a_float32_step_fails_the_training_floor_even_at_perfect_efficiency() -> None:
    """On a GPU the floor is above the fp32 / bf16 matmul ratio: a step in float32 cannot pass it."""
    h200 = {"fp32": 60e12, "bf16": 750e12}  # about what an H200 measures (ratio 0.08)
    assert gpu_check.train_floor(0.10, h200, gpu=True) == 0.10
    fast_fp32 = {"fp32": 120e12, "bf16": 750e12}  # TF32 on, say: ratio 0.16
    floor = gpu_check.train_floor(0.10, fast_fp32, gpu=True)
    assert floor == pytest.approx(0.2) and fast_fp32["fp32"] / fast_fp32["bf16"] < floor
    for ratio in (0.01, 0.07, 0.2, 0.45):
        rates = {"fp32": ratio * 1e14, "bf16": 1e14}
        assert ratio < gpu_check.train_floor(0.05, rates, gpu=True)
    assert gpu_check.train_floor(0.005, {"fp32": 0.4, "bf16": 1.0}, gpu=False) == 0.005  # a CPU: the dtypes catch it
    assert gpu_check.train_floor(0.10, {"fp32": 1.0, "bf16": 1.0}, gpu=True) == 0.10  # no tensor cores: ratio ignored


def test_the_slow_variable_is_read_strictly(tmp_path: Path) -> None:
    names = gpu_check.THROUGHPUT
    assert gpu_check.parse_slow("", names) == {}
    assert gpu_check.parse_slow(" declutr:10 , encode:2.5", names) == {"declutr": 10.0, "encode": 2.5}
    with pytest.raises(ValueError, match="'declutrr' is not a throughput check .* Did you mean 'declutr'"):
        gpu_check.parse_slow("declutrr:10", names)
    assert gpu_check.parse_slow("mlm:sync,simcse:3", names) == {"mlm": "sync", "simcse": 3.0}
    for bad in ("mlm:1", "mlm:0.5", "mlm:fast", "mlm", "mlm:nan"):
        with pytest.raises(ValueError, match="the factor must be a number above 1"):
            gpu_check.parse_slow(bad, names)
    res = run_script(
        REPO / "scripts" / "gpu_check.sh",
        "--cpu",
        "--out",
        str(tmp_path / "out"),
        env=env_with(SENTKIT_GPU_CHECK_SLOW="simcse:x"),
    )
    assert res.returncode == gpu_check.USAGE == 2
    assert "SENTKIT_GPU_CHECK_SLOW='simcse:x'" in one_line(res) and not (tmp_path / "out").exists()
    res = run_script(REPO / "scripts" / "gpu_check.sh", "--cpu", "--only", "declutr,mlmm", env=env_with())
    assert res.returncode == 2 and "no check 'mlmm'" in res.stderr and "Did you mean 'mlm'" in res.stderr


def test_the_probe_times_calls_counts_work_and_can_synchronise_every_operation() -> None:
    """On a small module: the work of each call, the clock at its start, the Linear dtypes inside
    its calls only, and (asked for) the sync function after every leaf module's forward."""
    import torch

    ticks = iter(range(100))
    synced: list[int] = []
    probe = gpu_check.Probe(
        lambda: float(next(ticks)),
        sync=lambda: synced.append(1),
        shape_of_call=lambda args, kwargs: ([int(args[0].shape[0])], 0),
    )
    net = probe.attach(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)))
    for n in (3, 5):
        net(torch.zeros(n, 4))
    assert probe.work == [([3], 0), ([5], 0)] and probe.times == [0.0, 1.0]
    assert probe.dtypes == {"float32"} and probe.synced == len(synced) == 2 * 3  # 3 leaf modules, 2 calls
    assert probe.rate(0, 1, lambda lengths, masked: 10.0 * sum(lengths)) == (30.0, 3, 1.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert net[0](torch.zeros(1, 4)).dtype == torch.bfloat16  # outside the module's own calls: not recorded
        assert probe.dtypes == {"float32"} and probe.synced == 6
        net(torch.zeros(2, 4))  # inside: recorded
    assert probe.dtypes == {"float32", "bfloat16"} and probe.synced == 9 and len(probe.times) == 3


def test_the_throughput_checks_fail_below_their_floors(
    workspace: gpu_check.Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert gpu_check.throughput_verdict({"encode": 0.5, "train": 0.2}, {"encode": 0.02, "train": 0.005}) == (True, [])
    ok, low = gpu_check.throughput_verdict({"encode": 0.01, "train": float("nan")}, {"encode": 0.02, "train": 0.005})
    assert not ok and len(low) == 2
    monkeypatch.setattr(gpu_check, "matmul_rate", lambda dtype, device, size, **kw: 1e18)  # a far faster "GPU"
    monkeypatch.setattr(workspace.sizes, "cpu", False)  # the GPU's fixed floors (the CPU's follow a reference run)
    res = gpu_check.check_encode(workspace)
    assert res["ok"] is False and res["share of the float32 matmul rate"] < workspace.sizes.floors["encode"]
    assert "encode reached" in res["below the floor"]
    res = gpu_check.check_train(workspace, "mlm")
    assert res["ok"] is False and "mlm reached" in res["below the floor"] and "not bf16" not in res
    assert res["Linear output dtypes"] == ["bfloat16"] and res["steps measured"] == "5-7 of 8"


SHARE_OF = {"encode": "float32", "encode_fp16": "fp16"}  # the matmul rate a throughput check is a share of


def test_encode_in_half_precision_that_stays_float32_fails_on_its_dtypes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bf16 asked, but the weights left in float32 (a silent float32): the check fails with a line that says so."""
    import torch

    from sentkit.models import transformer as E

    monkeypatch.setattr(E, "dtype_of", lambda precision: torch.float32)
    out = tmp_path / "out"
    assert gpu_check.main(["--cpu", "--out", str(out), "--only", "encode_bf16"]) == gpu_check.FAILED
    res = json.loads((out / "gpu_check.json").read_text())["checks"][gpu_check.NAMES["encode_bf16"]]
    assert res["ok"] is False and res["Linear output dtypes"] == ["float32"]
    assert "not bfloat16: the model was not cast (a silent float32)" in res["wrong dtype"]


def _slowed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow: str) -> dict[str, Any]:
    monkeypatch.setenv("SENTKIT_GPU_CHECK_SLOW", slow)
    out = tmp_path / "out"
    code = gpu_check.main(["--cpu", "--out", str(out), "--only", ",".join(("matmul", *gpu_check.THROUGHPUT))])
    data = json.loads((out / "gpu_check.json").read_text())
    assert data["finished"] is True and code == gpu_check.FAILED
    return {k: data["checks"][gpu_check.NAMES[k]] for k in gpu_check.THROUGHPUT}


@pytest.mark.slow
@pytest.mark.parametrize("slowed", [("declutr", "mlm", "mntp", "encode_fp16"), ("encode", "encode_bf16", "simcse")])
def test_each_floor_fails_a_step_slowed_10_times(
    slowed: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """SENTKIT_GPU_CHECK_SLOW stretches the measured steps of some checks 10 times: exactly those
    fail (one readable line each, exit 1), the others pass in the same run, all are in the JSON."""
    checks = _slowed_run(tmp_path, monkeypatch, ",".join(f"{k}:10" for k in slowed))
    assert {k: r["ok"] for k, r in checks.items()} == {k: k not in slowed for k in gpu_check.THROUGHPUT}
    printed = capsys.readouterr().out
    for k in slowed:
        assert checks[k]["slowed by"] == 10.0 and checks[k]["seconds waited"] > 0
        line = checks[k]["below the floor"]
        assert line.startswith(f"{k} reached ") and "below its floor" in line and "\n" not in line
        assert f"[FAIL] {gpu_check.NAMES[k]}" in printed and line in printed
    for k in set(gpu_check.THROUGHPUT) - set(slowed):
        assert "below the floor" not in checks[k] and "slowed by" not in checks[k]
    for k, r in checks.items():  # on a CPU each floor is a quarter of the share its unslowed reference run reached
        share = r[f"share of the {SHARE_OF.get(k, 'bf16')} matmul rate"]
        ref = r["reference run's share (unslowed)"]
        assert r["floor"] == pytest.approx(0.25 * ref, abs=1e-4), k
        assert (share < 0.25 * ref) == (k in slowed), (k, share, ref)
    n = 1 + len(gpu_check.THROUGHPUT)  # the matmul rate and each throughput check
    assert f"{n - len(slowed)} of {n} checks passed" in printed


def test_a_step_without_autocast_is_caught_by_its_dtypes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bf16 asked, but the loop's autocast gone (a silent fp32): every Linear output is float32 and
    the check fails with a line that says so, whatever its throughput."""
    import sentkit.training.loop as loop

    monkeypatch.setattr(loop, "autocast_factory", lambda device, precision: contextlib.nullcontext)
    out = tmp_path / "out"
    assert gpu_check.main(["--cpu", "--out", str(out), "--only", "declutr"]) == gpu_check.FAILED
    res = json.loads((out / "gpu_check.json").read_text())["checks"][gpu_check.NAMES["declutr"]]
    assert res["ok"] is False and res["precision asked"] == "bf16" and res["Linear output dtypes"] == ["float32"]
    assert res["not bf16"].startswith("the step's Linear layers gave float32 where bf16 was asked")


def test_a_check_that_cannot_build_its_inputs_fails_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The corpus cannot be written: every check that needs it fails with that error (tried once),
    the four that need no corpus (the matmul rate, encode in each precision) pass, the JSON is written, the runs'
    folder is removed, exit 1 (the encode checks need no corpus either)."""
    import check_support

    calls: list[Path] = []

    def no_room(folder: Path, n_docs: int, n_words: int) -> Path:
        calls.append(folder)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(check_support, "write_corpus", no_room)
    out = tmp_path / "out"
    assert gpu_check.main(["--cpu", "--out", str(out)]) == gpu_check.FAILED == 1
    data = json.loads((out / "gpu_check.json").read_text())
    assert data["finished"] is True and len(data["checks"]) == len(gpu_check.NAMES) == 14
    no_corpus = {gpu_check.NAMES[k] for k in ("matmul", "encode", "encode_bf16", "encode_fp16")}
    for name, res in data["checks"].items():
        if name in no_corpus:
            assert res["ok"] is True, (name, res)
        elif name == gpu_check.NAMES["train_memory"]:  # a GPU's check: skipped on a CPU, before any input
            assert res["ok"] is None and res["skipped"] == gpu_check.GPU_ONLY["train_memory"]
        else:
            assert res["ok"] is False and "No space left on device" in res["error"], name
    assert len(calls) == 1
    assert [p.name for p in out.iterdir()] == ["gpu_check.json"]
    assert "5 of 14 checks passed or skipped" in capsys.readouterr().out


# ----------------------------------------------------------------------------- training memory
def test_the_memory_check_skips_on_a_cpu_and_judges_the_plan_within_a_quarter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a CPU the check is skipped with its reason (exit 0, nothing built); on a GPU its verdict is the plan
    (less the CUDA context) within 25 % of max_memory_allocated, and the plan it compares is the one
    `sentkit train --plan` prints for that run on a GPU."""

    from sentkit.training.plan import CUDA_CONTEXT, ModelShape, RunSettings, plan

    out = tmp_path / "out"
    assert gpu_check.main(["--cpu", "--only", "train_memory", "--out", str(out)]) == gpu_check.PASSED
    data = json.loads((out / "gpu_check.json").read_text())
    assert data["checks"] == {
        gpu_check.NAMES["train_memory"]: {"ok": None, "skipped": gpu_check.GPU_ONLY["train_memory"]}
    }
    assert "[SKIP] training memory" in capsys.readouterr().out
    assert gpu_check.memory_ratio(125, 100)["ok"] and gpu_check.memory_ratio(75, 100)["ok"]
    assert not gpu_check.memory_ratio(126, 100)["ok"] and not gpu_check.memory_ratio(74, 100)["ok"]
    assert gpu_check.memory_ratio(90, 100)["planned / measured"] == 0.9
    from check_support import bert_mlm

    model = bert_mlm(tmp_path / "bert")
    ws = gpu_check.Workspace(tmp_path / "ws", gpu_check.Sizes(False, None))
    ws._made["corpus"], ws._made["decoder"] = tmp_path / "corpus", model  # stand-ins: nothing is built
    cfg = gpu_check.memory_config(ws, tmp_path / "run", lora_r=16, base_precision="bf16", gradient_checkpointing=True)
    shape = ModelShape.from_config(json.loads((model / "config.json").read_text()))
    expected = plan(shape, RunSettings.from_config(cfg, "mntp", shape, device="cuda")).total - CUDA_CONTEXT
    assert gpu_check.planned_bytes(cfg, model, 1) == expected
    assert cfg.lora_r == 16 and cfg.gradient_checkpointing and cfg.max_steps == 4


# ----------------------------------------------------------------------------- the CPU self-test
@pytest.mark.slow
def test_every_check_that_runs_on_a_cpu_passes(tmp_path: Path) -> None:
    """`bash scripts/gpu_check.sh --cpu --out DIR`, with pytest and the tests' helpers made
    unimportable (the script needs neither)."""
    block = blockers(tmp_path / "block", "pytest", "conftest", "support")
    res = run_script(
        REPO / "scripts" / "gpu_check.sh",
        "--cpu",
        "--out",
        str(tmp_path / "out"),
        env=env_with(PYTHONPATH=str(block)),
        timeout=900,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    data = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert data["mode"] == "cpu" and data["finished"] is True
    skipped = gpu_check.NAMES["train_memory"]  # needs a GPU's max_memory_allocated
    assert {n: c["ok"] for n, c in data["checks"].items()} == {
        n: None if n == skipped else True for n in gpu_check.NAMES.values()
    }
    assert f"[SKIP] {skipped}: {gpu_check.GPU_ONLY['train_memory']}" in res.stdout
    checks = data["checks"]
    assert checks[gpu_check.NAMES["resume"]]["max diff straight vs resumed"] == 0.0
    assert checks[gpu_check.NAMES["grad_cache"]]["cached vs dropout off (must differ)"] > 0
    assert checks[gpu_check.NAMES["two_procs"]]["backend"] == "gloo (CPU)"
    assert checks[gpu_check.NAMES["two_procs"]]["killed rank reported"] is True
    for key in ("declutr", "simcse", "mlm", "mntp"):  # each share of peak printed, the step computed in bf16
        assert checks[gpu_check.NAMES[key]]["Linear output dtypes"] == ["bfloat16"], key
        assert checks[gpu_check.NAMES[key]]["share of the bf16 matmul rate"] >= checks[gpu_check.NAMES[key]]["floor"]
    assert "share of the bf16 matmul rate: " in res.stdout and "share of the float32 matmul rate: " in res.stdout
    assert "[PASS] precision" in res.stdout and "[FAIL]" not in res.stdout
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["gpu_check.json"]  # the runs' folders are removed


# ----------------------------------------------------------------------------- scripts/setup.sh
def test_setup_installs_torch_from_the_index_it_is_given(tmp_path: Path) -> None:
    """setup.sh in a copy of the repository whose .venv holds stand-ins for python and pip that
    record their arguments: pip's own index by default; --index-url SENTKIT_TORCH_INDEX when set,
    a torch of another build uninstalled first, one of that build kept."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "setup.sh", tmp_path / "scripts")
    log = tmp_path / "pip.log"
    version = tmp_path / "torch_version"
    fake_torch = tmp_path / "mods" / "torch"
    fake_torch.mkdir(parents=True)
    (fake_torch / "__init__.py").write_text(f"__version__ = open({str(version)!r}).read().strip()\n")
    bin_dir(
        tmp_path / ".venv" / "bin",
        pip=f'echo "$*" >> {log}',  # python -c runs for real, on that torch
        python=f'[ "$1" = -c ] && PYTHONPATH={tmp_path / "mods"} exec {sys.executable} "$@"; exit 0',
    )
    fake = bin_dir(tmp_path / "fakebin", **{"apt-get": "exit 0"})  # never the real one
    env = {**env_with(PATH=f"{fake}:{os.environ['PATH']}")}
    env.pop("SENTKIT_TORCH_INDEX", None)

    def setup(**extra: str) -> list[str]:
        log.write_text("")
        res = run_script(tmp_path / "scripts" / "setup.sh", env={**env, **extra})
        assert res.returncode == 0, res.stderr
        return log.read_text().splitlines()

    version.write_text("2.13.0+cpu\n")
    assert setup() == [
        "install -q --disable-pip-version-check torch==2.13.0",
        "install -q --disable-pip-version-check -e .[dev]",
    ]
    index = "https://download.pytorch.org/whl/cu128"
    assert setup(SENTKIT_TORCH_INDEX=index) == [
        "uninstall -q -y torch",
        f"install -q --disable-pip-version-check --index-url {index} torch==2.13.0",
        "install -q --disable-pip-version-check -e .[dev]",
    ]
    version.write_text("2.13.0+cu128\n")
    assert (
        setup(SENTKIT_TORCH_INDEX=index + "/")[0]
        == f"install -q --disable-pip-version-check --index-url {index}/ torch==2.13.0"
    )
