"""STS12 with averaged GloVe: how much of sentkit's 0.04-point difference from SentEval comes from
pairs of identical sentences, whose cosine is 1 only up to rounding (docs/benchmarks.md).

    python benchmarks/sts12_ties.py --json benchmarks/results/sts12_ties.json   # STS12 from $SENTKIT_DATA

A pair whose two sentences get the same vector has cosine 1 +- a few 1e-16, so Spearman ranks the
pairs of that tied group by rounding noise. The script scores each subset with the suite's cosine,
with exact ties restored, with SentEval's cosine formula (numpy dot / (norm x norm)) on float64
embeddings, and with the tied group ordered worst-first and best-first against the gold scores
(the range any tie-break can give).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from sentkit.evaluation.protocols import cosine_rows
from sentkit.evaluation.tasks import load_task
from sentkit.models.wordvectors import GloveAverage


def senteval_cosines(enc: GloveAverage, a: list[str], b: list[str]) -> np.ndarray:
    """SentEval's bag-of-vectors batcher (float64 mean of word vectors) and its `cosine`."""
    v64 = enc.vectors_.astype(np.float64)

    def embed(text: str) -> np.ndarray:
        ids = [enc.vocab_[w] for w in enc.tokenize(text) if w in enc.vocab_]
        return v64[ids].mean(0) if ids else np.zeros(v64.shape[1])

    out = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for x, y in zip(a, b, strict=True):
            u, v = embed(x), embed(y)
            out.append(np.nan_to_num(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v))))
    return np.array(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the per-subset and mean scores here")
    args = ap.parse_args()
    enc = GloveAverage()
    data = load_task("STS12")
    variant_names = ("suite", "exact ties", "SentEval formula", "worst tie-break", "best tie-break")
    scores: dict[str, list[float]] = {k: [] for k in variant_names}
    subsets: dict[str, dict[str, int | float]] = {}
    for name, split in data.splits.items():
        assert split.b is not None
        a, b = enc.encode(split.a), enc.encode(split.b)
        cos = cosine_rows(a, b)
        same = np.all(a == b, axis=1)  # identical vectors: identical sentences, or differing only in unknown words
        texts = sum(x == y for x, y in zip(split.a, split.b, strict=True))
        tied = np.where(same, 1.0, cos)
        idx = np.flatnonzero(same)
        order = idx[np.argsort(split.y[same], kind="stable")]
        top = 1.0 + 1e-9 * np.arange(1, len(idx) + 1)  # distinct values above every other pair's cosine
        best, worst = cos.copy(), cos.copy()
        best[order], worst[order[::-1]] = top, top
        variants = {
            "suite": cos,
            "exact ties": tied,
            "SentEval formula": senteval_cosines(enc, split.a, split.b),
            "worst tie-break": worst,
            "best tie-break": best,
        }
        for k, v in variants.items():
            scores[k].append(100 * float(spearmanr(v, split.y)[0]))
        line = f"{name:17s} pairs {len(split.y):4d}  identical sentences {texts:3d}  identical vectors {same.sum():3d}"
        if same.any():
            line += (
                f"  their cosines: {len(np.unique(cos[same]))} distinct values in "
                f"[{cos[same].min():.17f}, {cos[same].max():.17f}]"
            )
        print(line)
        subsets[name] = {
            "pairs": len(split.y),
            "identical_sentences": int(texts),
            "identical_vectors": int(same.sum()),
            "distinct_tied_cosines": len(np.unique(cos[same])),
        }
    print("\nSTS12 mean Spearman x 100 over the five subsets (SentEval reports 51.31):")
    for k, per in scores.items():
        print(f"  {k:17s} {np.mean(per):.4f}   per subset: " + " ".join(f"{x:.3f}" for x in per))
    if args.json:
        out = {
            "task": "STS12",
            "model": "glove-average",
            "senteval_reported": 51.31,
            "subsets": subsets,
            "mean_spearman_x100": {k: round(float(np.mean(per)), 4) for k, per in scores.items()},
            "per_subset_spearman_x100": {k: [round(x, 4) for x in per] for k, per in scores.items()},
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
