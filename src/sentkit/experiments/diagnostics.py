"""Why a cell scored as it did: numbers beside the scores, computed from a trained run's folder.

- **anisotropy**: the mean cosine similarity of random pairs of different sentences (STS-B test
  sentences); near 1 when every vector points the same way (plain MLM states are known to), near 0
  for an isotropic space;
- **training curve**: the first and last logged value of each loss, and the tokens seen;
- **spans** (DeCLUTR): mean anchor and positive lengths and how often a positive is adjacent to,
  overlaps or is subsumed by its anchor, sampled with the run's own settings.

``sentkit experiment diagnose EXP`` writes them next to each run's committed results as
``<results>/<cell>/diagnostics-seed-<s>.json`` (small; the report reads them), so they are
regenerable from the repository like the scores.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.errors import InputError
from sentkit.core.io import atomic_write_text
from sentkit.experiments.grid import ExperimentSpec
from sentkit.experiments.kinds import AsIs
from sentkit.experiments.runner import CellRun, plan, resolve_settings

log = logging.getLogger(__name__)

PAIRS = 2000  # random pairs for the anisotropy


def diagnostics_path(spec: ExperimentSpec, run: CellRun) -> Path | None:
    return None if spec.results is None else Path(spec.results) / run.cell.name / f"diagnostics-seed-{run.seed}.json"


def anisotropy(encoder: Any, sentences: list[str], *, pairs: int = PAIRS, seed: int = 0) -> float:
    """Mean cosine of `pairs` random pairs of different sentences (a seeded generator)."""
    rng = np.random.default_rng(seed)
    uniq = sorted(set(sentences))
    v = np.asarray(encoder.encode(uniq), dtype=np.float64)
    v /= np.linalg.norm(v, axis=1, keepdims=True).clip(min=1e-12)
    i = rng.integers(0, len(uniq), pairs)
    j = (i + rng.integers(1, len(uniq), pairs)) % len(uniq)  # never a sentence with itself
    return float(np.mean(np.sum(v[i] * v[j], axis=1)))


def sts_sentences(data_dir: str | None) -> list[str]:
    """The STS-B test sentences (both sides), the sample the anisotropy is measured on."""
    from sentkit.evaluation.tasks import get_task, resolve_data_dir

    spec = get_task("STSB")
    data = spec.loader(resolve_data_dir(data_dir), spec)
    split = data.splits["test"]
    return [*split.a, *(split.b or [])]


def training_curve(model_dir: Path) -> dict[str, Any]:
    """First and last logged value of every loss column, and the final model's steps, tokens and
    training-loop seconds across resumes (:func:`sentkit.training.metrics.training_history`)."""
    from sentkit.training.metrics import read_metrics, training_history

    path = model_dir / "metrics.csv"
    if not path.is_file():
        return {}
    rows = read_metrics(path)
    if not rows:
        return {}
    losses = [k for k in rows[0] if k in ("loss", "contrastive", "mlm", "reconstruction")]
    last = rows[-1]
    return {
        **training_history(model_dir),
        "first": {k: round(rows[0][k], 4) for k in losses},
        "last": {k: round(last[k], 4) for k in losses},
    }


def span_statistics(model_dir: Path, samples: int = 400) -> dict[str, Any]:
    """Mean span lengths and the share of each positive relation, for a DeCLUTR run's settings and
    the lengths of the documents it trained on."""
    from sentkit.data.store import TokenStore
    from sentkit.objectives.spans import relation, sample_spans
    from sentkit.training.recipes.declutr import DeclutrConfig

    try:
        raw = json.loads((model_dir / "train_config.json").read_text())
        cfg = DeclutrConfig(**{k: v for k, v in raw.items() if k in DeclutrConfig.__dataclass_fields__})
        meta = json.loads((model_dir / "sentkit.json").read_text())
    except (OSError, ValueError, TypeError):
        return {}
    store_dir = Path(cfg.prepared_dir) if cfg.prepared_dir else model_dir / "prepared"
    try:
        lengths = TokenStore(store_dir).lengths()
    except Exception:  # the store was removed: no statistics
        return {}
    spans = cfg.spans(int(meta.get("max_length", cfg.max_span_len + 2)) - 2)
    rng = np.random.default_rng(0)
    a_len: list[int] = []
    p_len: list[int] = []
    rel: dict[str, int] = {}
    for n in rng.choice(lengths, size=min(samples, len(lengths)), replace=False):
        s = sample_spans(int(n), spans, rng)
        for a, ps in zip(s.anchors, s.positives):
            a_len.append(len(a))
            for p in ps:
                p_len.append(len(p))
                r = relation(a, p)
                rel[r] = rel.get(r, 0) + 1
    total = sum(rel.values()) or 1
    return {
        "anchor_tokens": round(float(np.mean(a_len)), 1),
        "positive_tokens": round(float(np.mean(p_len)), 1),
        "relations": {k: round(v / total, 3) for k, v in sorted(rel.items())},
    }


def diagnose(spec: ExperimentSpec, *, only: list[str] | None = None, force: bool = False) -> dict[str, str]:
    """Write the diagnostics of every (cell, seed) whose model exists; returns {cell/seed: status}."""
    import sentkit

    sentences = sts_sentences(spec.data_dir)
    status: dict[str, str] = {}
    for run in plan(spec):
        if only and run.cell.name not in only:
            continue
        key = f"{run.cell.name}/seed-{run.seed}"
        dest = diagnostics_path(spec, run)
        if dest is None:
            raise InputError(f"experiment {spec.name!r} has no `results` folder")
        if dest.is_file() and not force:
            status[key] = "unchanged"
            continue
        kind = run.cell.kind
        if isinstance(kind, AsIs):  # a given model: no training to report
            model_dir = None
            encoder = kind.load(resolve_settings(spec, run))
        else:
            model_dir = run.folder / "model"
            if not (model_dir / "sentkit.json").is_file():
                status[key] = "missing"
                continue
            encoder = sentkit.load(str(model_dir))
        out: dict[str, Any] = {
            "cell": run.cell.name,
            "seed": run.seed,
            "anisotropy": round(anisotropy(encoder, sentences), 4),
        }
        if model_dir is not None:
            out["training"] = training_curve(model_dir)
            if run.cell.method == "declutr":
                out["spans"] = span_statistics(model_dir)
        atomic_write_text(dest, json.dumps(out, indent=2, sort_keys=True) + "\n")
        status[key] = "written"
    return status


def collect_diagnostics(results_dir: str | Path) -> dict[str, list[dict[str, Any]]]:
    """{cell: [diagnostics of each seed]} from a committed results folder."""
    out: dict[str, list[dict[str, Any]]] = {}
    for p in sorted(Path(results_dir).glob("*/diagnostics-seed-*.json")):
        d = json.loads(p.read_text())
        out.setdefault(d["cell"], []).append(d)
    return out
