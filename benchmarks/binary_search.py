"""Binary and int8 search against exact float search: recall@10 on small seeded data (what
docs/smaller_vectors.md quotes and tests/retrieval/test_binary_search.py holds the code to).

    python benchmarks/binary_search.py [--out benchmarks/results/binary_search.json]

Data: a seeded low-rank Gaussian, `n` = 3000 rows and `queries` = 100 held-out rows of `dim` dimensions (64 and
384), rank 16 plus isotropic noise of standard deviation 0.5 (`data`): clustered like sentence embeddings, with no
ties. Each configuration's recall@10 is the share of the exact float cosine top 10 (`sentkit.retrieval.index.
exact_search`) it finds, averaged over the queries:

- ``binary`` (an in-memory `sentkit.retrieval.index.BinaryCodes`, as ``neighbours --quantize binary`` builds it)
  with ``rescore`` none / float / int8 at each multiplier: Hamming candidates, rescored with the float query;
- ``int8 codes`` / ``binary codes`` (`sentkit.retrieval.index.codes_search`, what ``sentkit.search`` does over the
  codes ``sentkit embed --quantize`` writes), the int8 ranges fitted on the first 1000 rows.

Takes a few seconds on one core.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

CONFIGS = (
    [("binary", "none", 1)]
    + [("binary", r, m) for r in ("float", "int8") for m in (1, 2, 4, 10)]
    + [("int8 codes", "none", 4), ("int8 codes", "float", 4), ("binary codes", "none", 4), ("binary codes", "float", 4)]
)


def data(
    n: int = 3000, queries: int = 100, dim: int = 64, rank: int = 16, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Rows [n, dim] and held-out queries [queries, dim] of a seeded low-rank Gaussian, float32."""
    rng = np.random.default_rng(seed)
    basis = rng.normal(size=(rank, dim))
    x = (rng.normal(size=(n + queries, rank)) @ basis + 0.5 * rng.normal(size=(n + queries, dim))).astype(np.float32)
    return x[:n], x[n:]


def recall(ids: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(a.tolist()) & set(b.tolist())) / exact.shape[1] for a, b in zip(ids, exact)]))


def measure(kind: str, rescore: str, multiplier: int, x: np.ndarray, q: np.ndarray, k: int = 10) -> float:
    """recall@k of one configuration against exact float search."""
    from sentkit.models.quantization import Calibration
    from sentkit.retrieval.index import BinaryCodes, codes_search, exact_search

    exact, _ = exact_search(x, q, k)
    if kind == "binary":
        ids, _ = BinaryCodes.of(x, rescore=rescore, multiplier=multiplier).search(q, k)
    else:
        cal = Calibration.fit(x[:1000], "int8") if kind == "int8 codes" else Calibration("binary", x.shape[1])
        ids, _ = codes_search(cal.codes(x), cal, q, k, rescore=rescore, multiplier=multiplier)
    return recall(ids, exact)


def run() -> dict[str, Any]:
    import faiss

    rows = []
    for dim in (64, 384):
        x, q = data(dim=dim)
        for kind, rescore, multiplier in CONFIGS:
            rows.append(
                {
                    "dim": dim,
                    "kind": kind,
                    "rescore": rescore,
                    "multiplier": multiplier,
                    "recall_at_10": round(measure(kind, rescore, multiplier, x, q), 3),
                }
            )
    return {
        "data": "seeded low-rank Gaussian: n=3000, 100 held-out queries, rank 16, noise sd 0.5 (data())",
        "k": 10,
        "faiss": faiss.__version__,
        "rows": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "binary_search.json"))
    args = ap.parse_args()
    result = run()
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for r in result["rows"]:
        print(
            f"{r['dim']:4d} {r['kind']:13s} rescore={r['rescore']:5s} x{r['multiplier']:<3d} "
            f"recall@10 {r['recall_at_10']:.3f}"
        )


if __name__ == "__main__":
    main()
