"""Diagnostics beside the scores: anisotropy against known answers, and `experiment diagnose` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sentkit.core.interface import CallableEncoder
from sentkit.experiments.diagnostics import anisotropy, collect_diagnostics, diagnose


def test_anisotropy_of_encoders_whose_answer_is_known() -> None:
    sentences = [f"sentence {i}" for i in range(300)]
    same = CallableEncoder(lambda t: np.tile([1.0, 2.0, 3.0], (len(t), 1)))
    assert anisotropy(same, sentences) == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    table = {s: rng.standard_normal(512) for s in sentences}
    iso = CallableEncoder(lambda t: np.stack([table[s] for s in t]))
    assert abs(anisotropy(iso, sentences)) < 0.01
    shifted = CallableEncoder(lambda t: np.stack([table[s] / 10 + 1.0 for s in t]))  # a common direction
    assert anisotropy(shifted, sentences) > 0.9


def test_diagnose_writes_what_the_report_shows(
    tmp_path: Path, tiny_model_dir: Path, tiny_corpus: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sentkit.experiments import load_experiment
    from sentkit.experiments.report import diagnostics_section
    from sentkit.experiments.runner import plan
    from sentkit.training.loop import train
    from sentkit.training.recipes.declutr import Declutr, DeclutrConfig

    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.toml").write_text(
        f'name = "d"\noutput = "out"\nresults = "res"\ncorpus = "{tiny_corpus}"\ndata_dir = "{shared_data}"\n'
        f'[[cell]]\nname = "run"\nmethod = "declutr"\nsettings = {{ model = "{tiny_model_dir}" }}\n'
        f'[[cell]]\nname = "later"\nmethod = "declutr"\nsettings = {{ model = "{tiny_model_dir}" }}\n'
    )
    spec = load_experiment(tmp_path / "d.toml")
    run = plan(spec)[0]
    train(
        DeclutrConfig(
            corpus=str(tiny_corpus),
            out=str(run.folder / "model"),
            model=str(tiny_model_dir),
            min_span_len=8,
            max_span_len=32,
            batch_size=4,
            max_steps=3,
            log_every=1,
            progress=False,
        ),
        Declutr,
    )
    assert diagnose(spec) == {"run/seed-0": "written", "later/seed-0": "missing"}
    d = json.loads((tmp_path / "res" / "run" / "diagnostics-seed-0.json").read_text())
    assert 0 < d["anisotropy"] <= 1
    assert d["training"]["steps"] == 3 and d["training"]["tokens"] > 0
    assert set(d["training"]["first"]) == {"loss", "contrastive", "mlm"}
    assert 8 <= d["spans"]["positive_tokens"] <= d["spans"]["anchor_tokens"] <= 32
    assert sum(d["spans"]["relations"].values()) == pytest.approx(1.0, abs=0.01)
    assert diagnose(spec)["run/seed-0"] == "unchanged"
    section = "\n".join(diagnostics_section("res", ["run", "later"]))
    assert "| run | " in section and "later" not in section.split("|---|")[-1]
    assert collect_diagnostics("res").keys() == {"run"}
