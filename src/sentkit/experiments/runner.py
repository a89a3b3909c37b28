"""Run an experiment grid: train each (cell, seed), then evaluate it. Resumable: a finished cell
(its results.json exists) is skipped; an interrupted DeCLUTR cell resumes from its checkpoint."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentkit.config import from_dict
from sentkit.experiments.grid import CellSpec, ExperimentSpec
from sentkit.io import atomic_write_text
from sentkit.methods import get_method, read_marker

log = logging.getLogger(__name__)

RESULTS = "results.json"


@dataclass
class CellRun:
    cell: CellSpec
    seed: int
    folder: Path

    @property
    def results_path(self) -> Path:
        return self.folder / RESULTS

    @property
    def done(self) -> bool:
        return self.results_path.is_file()


def plan(spec: ExperimentSpec) -> list[CellRun]:
    root = Path(spec.output)
    return [CellRun(c, s, root / c.name / f"seed-{s}") for c in spec.cells for s in spec.cell_seeds(c)]


def _train(run: CellRun, spec: ExperimentSpec) -> tuple[Any, float]:
    """Train (or resume) the cell's model; returns (encoder, training seconds)."""
    import sentkit

    settings = dict(run.cell.settings)
    if run.cell.method == "pretrained":
        model = settings.pop("model")
        return sentkit.load(model, **settings), 0.0
    method = get_method(run.cell.method)
    out = run.folder / "model"
    if out.is_dir() and read_marker(out) is not None:  # methods write sentkit.json last
        log.info("%s seed %d: model already trained", run.cell.name, run.seed)
        model = sentkit.load(str(out))
        # re-evaluated only: keep the training time the model logged (0 when it logged none)
        return model, float(getattr(model, "train_stats_", {}).get("seconds", 0.0))
    data: dict[str, Any] = {"seed": run.seed, "out": str(out), **settings}
    if spec.corpus is not None:
        data.setdefault("corpus", spec.corpus)
    if (out / "checkpoint" / "state.pt").is_file():
        data["resume"] = True
    cfg: Any = from_dict(method.config_cls, data, where=f"cell {run.cell.name}")
    t = time.perf_counter()
    path = method.train(cfg)
    return sentkit.load(str(path)), time.perf_counter() - t


def cache_key(spec: ExperimentSpec, run: CellRun, encoder: Any) -> str:
    """Embedding-cache key of a run: readable (experiment/cell/seed) and tied to the model itself
    (its content digest when it has one, else a digest of the cell's settings), so a retrained
    or re-configured cell never reads the embeddings of an earlier model."""
    import hashlib

    from sentkit.evaluation.runner import encoder_fingerprint

    fp = encoder_fingerprint(encoder)
    if fp is None:
        fp = hashlib.sha256(json.dumps(run.cell.settings, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"{spec.name}/{run.cell.name}/seed-{run.seed}/{fp}"


def run_cell(run: CellRun, spec: ExperimentSpec) -> dict[str, Any]:
    import sentkit

    run.folder.mkdir(parents=True, exist_ok=True)
    encoder, train_s = _train(run, spec)
    fingerprint = cache_key(spec, run, encoder)
    res = sentkit.evaluate(encoder, tasks=spec.tasks, preset=spec.preset, data_dir=spec.data_dir,
                           fingerprint=fingerprint, model_name=run.cell.name, **spec.eval_settings)
    res["experiment"] = {"name": spec.name, "cell": run.cell.name, "method": run.cell.method, "group": run.cell.group,
                         "seed": run.seed, "settings": run.cell.settings, "train_seconds": round(train_s, 1)}
    atomic_write_text(run.results_path, json.dumps(res, indent=2, default=str) + "\n")
    return res


def run_experiment(spec: ExperimentSpec, *, only: list[str] | None = None, seeds: list[int] | None = None,
                   keep_going: bool = True) -> dict[str, str]:
    """Run every unfinished (cell, seed), optionally only some cells or seeds (to share a grid between
    processes or machines); returns {cell/seed: "done" | "skipped" | "failed: ..."}."""
    status: dict[str, str] = {}
    runs = [r for r in plan(spec) if (not only or r.cell.name in only) and (seeds is None or r.seed in seeds)]
    for i, run in enumerate(runs, 1):
        key = f"{run.cell.name}/seed-{run.seed}"
        if run.done:
            status[key] = "skipped (finished)"
            continue
        log.info("[%d/%d] %s", i, len(runs), key)
        try:
            run_cell(run, spec)
            status[key] = "done"
        except Exception as e:  # one failing cell must not stop the grid
            if not keep_going:
                raise
            log.error("%s failed: %s", key, e)
            status[key] = f"failed: {type(e).__name__}: {e}"
    return status


def collect(output: str | Path) -> list[dict[str, Any]]:
    """Every results.json under an experiment's output folder."""
    return [json.loads(p.read_text()) for p in sorted(Path(output).glob(f"*/seed-*/{RESULTS}"))]
