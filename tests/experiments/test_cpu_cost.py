"""One CPU cost per result: a cell's `cpu_seconds.train` counts every process of a resumed run
(docs/experiments.md, Cost), the same figure a recipe of phases records for itself."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sentkit
from sentkit.core.methods import METHODS, Method, register_method, write_marker
from sentkit.experiments import load_experiment, run_experiment
from sentkit.training.raw_text import RECIPE_FILE

EARLIER_CPU = 500.0  # the loop CPU of the process a resumed run continued from
RECIPE_CPU = 2499.5  # what a recipe of phases records: its phases, each across the processes that ran it


@dataclass
class _Cfg:
    corpus: str
    out: str
    seed: int = 0
    recipe: bool = False


class _Enc:
    def encode(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 2), dtype=np.float32)


def _train(cfg: _Cfg) -> Path:
    """A run that was resumed: its marker says what its earlier processes spent, as the loop's does."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.recipe:
        phases = {"0-a": {"cpu_seconds": 1000.0}, "1-b": {"cpu_seconds": RECIPE_CPU - 1000.0}}
        (out / RECIPE_FILE).write_text(json.dumps({"phases": phases, "cpu_seconds": RECIPE_CPU}))
        write_marker(out, "fake-cpu", cpu_seconds=RECIPE_CPU)
    else:
        write_marker(out, "fake-cpu", resumed_seconds=40.0, resumed_cpu_seconds=EARLIER_CPU)
    return out


@pytest.fixture()
def fake_method(monkeypatch: pytest.MonkeyPatch) -> None:
    if "fake-cpu" not in METHODS:
        register_method("fake-cpu", Method("fake-cpu", _Cfg, _train, lambda path: _Enc()), "test method")

    def fake_evaluate(encoder: Any, **kw: Any) -> dict[str, Any]:
        return {"results": {}, "declutr_average": {"per_task": {"MR": 60.0}, "downstream": 60.0}}

    monkeypatch.setattr(sentkit, "evaluate", fake_evaluate)


def test_a_resumed_run_costs_every_process_once(tmp_path: Path, fake_method: None) -> None:
    f = tmp_path / "exp.toml"
    f.write_text(f'''
name = "t"
output = "{tmp_path / "out"}"
corpus = "unused"
seeds = [0]
[[cell]]
name = "resumed"
method = "fake-cpu"
[[cell]]
name = "recipe"
method = "fake-cpu"
settings = {{ recipe = true }}
''')
    assert set(run_experiment(load_experiment(f)).values()) == {"done"}
    resumed = json.loads((tmp_path / "out" / "resumed" / "seed-0" / "results.json").read_text())["experiment"]
    assert EARLIER_CPU <= resumed["cpu_seconds"]["train"] < EARLIER_CPU + 60  # this process's CPU on top
    recipe = json.loads((tmp_path / "out" / "recipe" / "seed-0" / "results.json").read_text())["experiment"]
    # the result's one training CPU cost is the recipe's own, not this process's share of it
    assert recipe["cpu_seconds"]["train"] == recipe["recipe"]["cpu_seconds"] == RECIPE_CPU
