"""experiments/decoder.toml (issue 36.5): it loads, every committed result is the run it declares, and the references
are other studies' own committed runs (skipped as published: never trained again here): the plain-MLM rows plain.toml's,
the word-vector rows in their best versions budget.toml's (GloVe's raw row is the same run in both)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sentkit.experiments.grid import load_experiment
from sentkit.experiments.runner import plan, published_run, stale

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = {  # cell: the study whose committed run it is
    **dict.fromkeys(("plain-base", "mlm-continued", "simcse-mean", "declutr-sentence-spans", "glove-average"), "plain"),
    **dict.fromkeys(("skipgram", "skipgram-whitened", "skipgram-sif"), "budget"),
    **dict.fromkeys(("glove-average-whitened", "glove-average-sif", "glove-average-mean-max"), "budget"),
}


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
            source = ROOT / "experiments" / "results" / REFERENCES[cell] / cell / f"seed-{seed}.json"
            assert committed.read_bytes() == source.read_bytes()  # the other study's run, copied
    assert {c.name for c in spec.cells} >= {
        "clm-base",
        "clm-base-last-token",
        "clm-base-bidirectional",
        "mntp",
        "llm2vec",
        "clm-continued",
        *REFERENCES,
    }
