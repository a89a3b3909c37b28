"""scripts/gpu_check.sh must work on its first run on a GPU machine. Where it cannot run it says so
in one line with an exit status of its own (no .venv 4, torch missing 5, a CPU-only torch on a
machine with an NVIDIA GPU 6, no GPU 3); `--cpu --out DIR` runs every check that runs on a CPU,
without pytest or the tests/ tree, and leaves only DIR/gpu_check.json. What only a GPU would
exercise is checked here with stand-ins: fp16 steps that the loss scaler skips, the throughput
floor, a check that cannot build what it needs. scripts/setup.sh passes SENTKIT_TORCH_INDEX to pip."""

from __future__ import annotations

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

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import gpu_check  # noqa: E402


def run_script(script: Path, *args: str, env: dict[str, str] | None = None,
               timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(script), *args], env=env if env is not None else {**os.environ},
                          capture_output=True, text=True, timeout=timeout)


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
    res = run_script(REPO / "scripts" / "gpu_check.sh", "--cpu",
                     env=env_with(PYTHONPATH=str(blockers(tmp_path / "block2", "transformers"))))
    assert res.returncode == 5 and "transformers cannot be imported" in one_line(res)


def test_a_cpu_only_torch_on_a_machine_with_an_nvidia_gpu_is_exit_6(tmp_path: Path) -> None:
    """The machine's GPU is seen through nvidia-smi (a stand-in on PATH that lists one)."""
    import torch

    if torch.version.cuda is not None:
        pytest.skip(f"torch {torch.__version__} is a CUDA build")
    fake = bin_dir(tmp_path / "bin", **{"nvidia-smi": 'echo "GPU 0: NVIDIA H200 (UUID: GPU-1234)"'})
    res = run_script(REPO / "scripts" / "gpu_check.sh", "--out", str(tmp_path / "out"),
                     env=env_with(PATH=f"{fake}:{os.environ['PATH']}"))
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


def test_the_throughput_check_fails_below_its_floor(workspace: gpu_check.Workspace,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert gpu_check.throughput_verdict({"encode": 0.5, "train": 0.2}, {"encode": 0.02, "train": 0.005}) == (True, [])
    ok, low = gpu_check.throughput_verdict({"encode": 0.01, "train": float("nan")}, {"encode": 0.02, "train": 0.005})
    assert not ok and len(low) == 2
    monkeypatch.setattr(gpu_check, "matmul_rate", lambda dtype, device, size: 1e18)  # a far faster "GPU"
    res = gpu_check.check_throughput(workspace)
    assert res["ok"] is False and len(res["below the floor"]) == 2
    assert res["encode share of fp32 matmul rate"] < workspace.sizes.floors["encode"]


def test_a_check_that_cannot_build_its_inputs_fails_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The corpus cannot be written: every check that needs it fails with that error (tried once),
    the JSON is written, the runs' folder is removed, exit 1."""
    import check_support

    calls: list[Path] = []

    def no_room(folder: Path, n_docs: int, n_words: int) -> Path:
        calls.append(folder)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(check_support, "write_corpus", no_room)
    out = tmp_path / "out"
    assert gpu_check.main(["--cpu", "--out", str(out)]) == gpu_check.FAILED == 1
    data = json.loads((out / "gpu_check.json").read_text())
    assert data["finished"] is True and len(data["checks"]) == 5
    for name, res in data["checks"].items():
        assert res["ok"] is False and "No space left on device" in res["error"], name
    assert len(calls) == 1
    assert [p.name for p in out.iterdir()] == ["gpu_check.json"]
    assert "0 of 5 checks passed" in capsys.readouterr().out


# ----------------------------------------------------------------------------- the CPU self-test
@pytest.mark.slow
def test_every_check_that_runs_on_a_cpu_passes(tmp_path: Path) -> None:
    """`bash scripts/gpu_check.sh --cpu --out DIR`, with pytest and the tests' helpers made
    unimportable (the script needs neither)."""
    block = blockers(tmp_path / "block", "pytest", "conftest", "_helpers")
    res = run_script(REPO / "scripts" / "gpu_check.sh", "--cpu", "--out", str(tmp_path / "out"),
                     env=env_with(PYTHONPATH=str(block)), timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    data = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert data["mode"] == "cpu" and data["finished"] is True
    assert {n: c["ok"] for n, c in data["checks"].items()} == {n: True for n in gpu_check.NAMES.values()}
    checks = data["checks"]
    assert checks[gpu_check.NAMES["resume"]]["max diff straight vs resumed"] == 0.0
    assert checks[gpu_check.NAMES["grad_cache"]]["cached vs dropout off (must differ)"] > 0
    assert checks[gpu_check.NAMES["two_procs"]]["backend"] == "gloo (CPU)"
    assert checks[gpu_check.NAMES["two_procs"]]["killed rank reported"] is True
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
    bin_dir(tmp_path / ".venv" / "bin", pip=f'echo "$*" >> {log}',  # python -c runs for real, on that torch
            python=f'[ "$1" = -c ] && PYTHONPATH={tmp_path / "mods"} exec {sys.executable} "$@"; exit 0')
    fake = bin_dir(tmp_path / "fakebin", **{"apt-get": "exit 0"})  # never the real one
    env = {**env_with(PATH=f"{fake}:{os.environ['PATH']}")}
    env.pop("SENTKIT_TORCH_INDEX", None)

    def setup(**extra: str) -> list[str]:
        log.write_text("")
        res = run_script(tmp_path / "scripts" / "setup.sh", env={**env, **extra})
        assert res.returncode == 0, res.stderr
        return log.read_text().splitlines()

    version.write_text("2.13.0+cpu\n")
    assert setup() == ["install -q --disable-pip-version-check torch==2.13.0",
                       "install -q --disable-pip-version-check -e .[dev]"]
    index = "https://download.pytorch.org/whl/cu128"
    assert setup(SENTKIT_TORCH_INDEX=index) == [
        "uninstall -q -y torch", f"install -q --disable-pip-version-check --index-url {index} torch==2.13.0",
        "install -q --disable-pip-version-check -e .[dev]"]
    version.write_text("2.13.0+cu128\n")
    assert setup(SENTKIT_TORCH_INDEX=index + "/")[0] == f"install -q --disable-pip-version-check --index-url {index}/ torch==2.13.0"
