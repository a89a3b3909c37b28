"""scripts/gpu_check.sh: without a GPU it stops at once with a clear message and exit status 3;
with --cpu its checks run on the CPU (tiny model, few steps) and pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHON": sys.executable}


def gpu_check(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO / "scripts" / "gpu_check.sh"), *args], env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def test_without_a_gpu_it_fails_loudly(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    res = gpu_check("--out", str(tmp_path))
    assert res.returncode == 3
    assert res.stderr.strip().startswith("gpu_check: error: no CUDA GPU is visible")
    assert not (tmp_path / "gpu_check.json").exists()


@pytest.mark.slow
def test_its_checks_pass_on_the_cpu(tmp_path: Path) -> None:
    res = gpu_check("--cpu", "--out", str(tmp_path))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    data = json.loads((tmp_path / "gpu_check.json").read_text())
    assert data["mode"] == "cpu"
    assert [c["ok"] for c in data["checks"].values()] == [True, True, True, True, None]  # NCCL: skipped
    resume = data["checks"]["resume bit for bit (dropout on)"]
    assert resume["max diff straight vs resumed"] == 0.0
    assert data["checks"]["gradient caching with dropout replay"]["cached vs dropout off (must differ)"] > 0
    assert "[PASS] precision" in res.stdout and "[SKIP] 2 processes" in res.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["gpu_check.json"]  # the runs' folders are removed
