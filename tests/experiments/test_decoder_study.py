"""experiments/decoder.toml (issue 36.5): it loads, every committed result is the run it declares, and the plain-MLM
and word-vector references are plain.toml's own committed runs (skipped as published: never trained again here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sentkit.experiments.grid import load_experiment
from sentkit.experiments.runner import plan, published_run, stale

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = ("plain-base", "mlm-continued", "simcse-mean", "declutr-sentence-spans", "glove-average", "skipgram")


def test_the_decoder_grid_holds_its_references_as_published_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the file's paths are relative to the repository
    spec = load_experiment(ROOT / "experiments" / "decoder.toml")
    runs = {(r.cell.name, r.seed): r for r in plan(spec)}
    for (cell, seed), run in runs.items():
        committed = ROOT / "experiments" / "results" / "decoder" / cell / f"seed-{seed}.json"
        if committed.is_file():
            assert not stale(run, json.loads(committed.read_text())), (cell, seed)
        if cell in REFERENCES:
            assert published_run(run, spec), (cell, seed)
            plain = ROOT / "experiments" / "results" / "plain" / cell / f"seed-{seed}.json"
            assert committed.read_bytes() == plain.read_bytes()  # plain.toml's run, copied
    assert {c.name for c in spec.cells} >= {
        "clm-base",
        "clm-base-last-token",
        "clm-base-bidirectional",
        "mntp",
        "llm2vec",
        "clm-continued",
        *REFERENCES,
    }
