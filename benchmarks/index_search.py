"""`sentkit index` at scale: build time, peak memory, query latency and recall@10 against exact search.

    nice -n 10 python benchmarks/index_search.py [--sizes 1000000] [--real-at 99800] [--base 100000]
        [--queries 200] [--compare-at 100000] [--work /tmp/sentkit-index-bench]
        [--out benchmarks/results/index_search.json]

Vectors: all-minilm-l6-v2 embeddings at 1M-10M are too slow to make on 2 cores, so the set is drawn
around real ones (`--encoder glove-average` makes 1M real ones in minutes: 50-d, `--real-at 1000000`).
`--base` Gutenberg sentences (benchmarks/_common.py) are embedded once with
all-minilm-l6-v2 (384-d, cached in --work); each synthetic vector is (1-w) e_i + w e_j + noise,
normalised, with e_i, e_j two random real embeddings, w ~ U(0, 0.4) and Gaussian noise of norm
about 0.25: clusters of paraphrase-like points around each real sentence, joined by mixtures.
Queries are drawn the same way (another seed). The .npy is written in chunks to --work and deleted
at the end. `--real-at N`: a size measured on real embeddings alone, the first N of the `--base`
embeddings, queried by the last `--queries` of them (held-out real sentences, not in the N).

Per size: the index is built by `sentkit.retrieval.index.build` with the default settings in a child process
(its peak RSS is the build's), then queried one at a time (one thread) at the default settings and
at several nprobe values;
recall@10 is against `sentkit.retrieval.index.exact_search` over the memory-mapped file. `--compare-at N`
measures faiss (sentkit's index) and usearch (HNSW, i8 codes, the same exact re-ranking) at N
vectors: how the library was chosen.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import REPO, data_dir, gutenberg_sentences, machine

NPROBES = (16, 32, 64, 128, 256)


def gutenberg_passages(n: int, seed: int = 0, words: int = 16) -> list[str]:
    """`n` passages of `words` consecutive words of the Gutenberg books (seeded sample of every such window):
    the books hold about 0.72M sentences of 3-60 words, too few for 1M real vectors; 16-word windows, 1.4M."""
    books = sorted((data_dir() / "corpus" / "gutenberg").glob("*.txt"))
    out: list[str] = []
    for b in books:
        w = b.read_text(encoding="utf-8", errors="ignore").split()
        out.extend(" ".join(w[i : i + words]) for i in range(0, len(w) - words + 1, words))
    if len(out) < n:
        raise SystemExit(f"the corpus gives {len(out)} passages, fewer than --base {n}: lower --base")
    idx = np.random.default_rng(seed).permutation(len(out))[:n]
    return [out[i] for i in idx]


def base_embeddings(work: Path, n: int, encoder: str = "all-minilm-l6-v2", texts: str = "sentences") -> np.ndarray:
    f = work / f"base_{encoder}_{texts}_{n}.npy"
    if not f.is_file():
        import sentkit

        enc = sentkit.load(encoder)
        s = gutenberg_sentences(n, seed=0) if texts == "sentences" else gutenberg_passages(n, seed=0)
        if len(s) < n:
            raise SystemExit(f"the corpus gives {len(s)} sentences, fewer than --base {n}: --texts passages")
        np.save(f, np.concatenate([np.asarray(enc.encode(s[i : i + 512]), np.float32) for i in range(0, len(s), 512)]))
    b = np.load(f).astype(np.float32)
    norm = np.linalg.norm(b, axis=1, keepdims=True)
    keep = norm[:, 0] > 0  # a text with no word the encoder knows (glove-average) has no direction: dropped
    if not keep.all():
        print(f"{int((~keep).sum())} of {len(b)} {encoder} vectors are zero (no known word): dropped", flush=True)
    return b[keep] / norm[keep]


def synth(base: np.ndarray, n: int, rng: np.random.Generator, sigma: float = 0.25) -> np.ndarray:
    d = base.shape[1]
    i, j = rng.integers(0, len(base), n), rng.integers(0, len(base), n)
    w = rng.uniform(0, 0.4, (n, 1)).astype(np.float32)
    v = (1 - w) * base[i] + w * base[j] + rng.standard_normal((n, d), dtype=np.float32) * np.float32(sigma / np.sqrt(d))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def write_npy(path: Path, base: np.ndarray, n: int, seed: int, chunk: int = 65_536) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (n, base.shape[1])})
        for s in range(0, n, chunk):
            f.write(synth(base, min(chunk, n - s), rng).tobytes())


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / truth.shape[1] for a, b in zip(found.tolist(), truth.tolist())]))


def _status_kb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(ln.split()[1]) for ln in f if ln.startswith(field + ":")), 0)
    except OSError:  # the child has just ended
        return 0


def build_in_child(npy: Path, out: Path) -> dict[str, Any]:
    """Build in a child process; its peak RSS counts the pages of the memory-mapped input the build touched (the
    kernel can drop them), its RssAnon (its own allocations, read from outside every 10 ms, so a faiss call that
    holds the GIL is sampled too) is the memory the build itself needs."""
    code = (
        "import json, resource, time; from sentkit.retrieval.index import build; t = time.perf_counter(); "
        f"m = build({str(npy)!r}, {str(out)!r}, progress=False); "
        "print(json.dumps({'seconds': time.perf_counter() - t, 'nlist': m['nlist'], "
        "'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env) as child:
        anon = 0
        while child.poll() is None:
            anon = max(anon, _status_kb(child.pid, "RssAnon"))
            time.sleep(0.01)
        stdout = child.stdout.read() if child.stdout else ""
    if child.returncode:
        raise SystemExit(f"the index build failed (exit {child.returncode})")
    return {**json.loads(stdout.strip().splitlines()[-1]), "peak_anon_mb": anon / 1024}


def latency(fn: Any, q: np.ndarray) -> tuple[np.ndarray, float, float]:
    out, ms = [], []
    for r in range(len(q)):
        t = time.perf_counter()
        out.append(fn(q[r : r + 1]))
        ms.append(1000 * (time.perf_counter() - t))
    return np.concatenate(out), statistics.median(ms), float(np.percentile(ms, 95))


def one_size(work: Path, base: np.ndarray, n: int, queries: np.ndarray, *, real: bool = False) -> dict[str, Any]:
    import faiss

    from sentkit.retrieval.index import VectorIndex, exact_search

    npy, folder = work / f"v{n}.npy", work / f"v{n}.index"
    t = time.perf_counter()
    if real:
        np.save(npy, base[:n])
    else:
        write_npy(npy, base, n, seed=n)
    gen_s = time.perf_counter() - t
    b = build_in_child(npy, folder)
    x = np.load(npy, mmap_mode="r")
    t = time.perf_counter()
    truth, _ = exact_search(x, queries, 10)
    exact_ms = 1000 * (time.perf_counter() - t) / len(queries)
    faiss.omp_set_num_threads(1)
    vi = VectorIndex(folder)
    found, med, p95 = latency(lambda q: vi.search(q, 10)[0], queries)
    default = {
        "nprobe": vi.nprobe,
        "candidates": vi.settings.candidates,
        "recall_at_10": round(recall(found, truth), 4),
        "median_ms": round(med, 2),
        "p95_ms": round(p95, 2),
    }
    print(n, "default", default, flush=True)
    rows = []
    for nprobe in NPROBES:
        found, med, p95 = latency(lambda q, p=nprobe: vi.search(q, 10, nprobe=p)[0], queries)
        rows.append(
            {
                "nprobe": nprobe,
                "recall_at_10": round(recall(found, truth), 4),
                "median_ms": round(med, 2),
                "p95_ms": round(p95, 2),
            }
        )
        print(n, rows[-1], flush=True)
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    result = {
        "n": n,
        "vectors": "real" if real else "synthetic",
        "dim": int(x.shape[1]),
        "file_gb": round(npy.stat().st_size / 1e9, 2),
        "generate_s": round(gen_s, 1),
        "build_s": round(b["seconds"], 1),
        "build_peak_rss_mb": round(b["peak_rss_mb"]),
        "build_peak_anon_mb": round(b["peak_anon_mb"]),
        "nlist": b["nlist"],
        "index_mb": round((folder / "index.faiss").stat().st_size / 1e6),
        "exact_ms_per_query_batched": round(exact_ms, 2),
        "default": default,
        "search": rows,
    }
    vi = x = None  # type: ignore[assignment]  # close the memory maps before the files go
    npy.unlink()
    shutil.rmtree(folder)
    return result


def compare(work: Path, base: np.ndarray, n: int, queries: np.ndarray) -> dict[str, Any]:
    """faiss (sentkit's index) vs usearch HNSW at n vectors, both with exact re-ranking of 100 candidates."""
    import usearch.index as ui

    from sentkit.retrieval.index import VectorIndex, build, exact_search

    npy = work / f"c{n}.npy"
    write_npy(npy, base, n, seed=n + 1)
    x = np.load(npy, mmap_mode="r")
    truth, _ = exact_search(x, queries, 10)
    t = time.perf_counter()
    build(npy, work / "c.index", progress=False)
    out: dict[str, Any] = {"n": n, "faiss": {"build_s": round(time.perf_counter() - t, 1)}}
    vi = VectorIndex(work / "c.index")
    found, med, _ = latency(lambda q: vi.search(q, 10)[0], queries)
    out["faiss"].update(
        recall_at_10=round(recall(found, truth), 4),
        median_ms=round(med, 2),
        nprobe=vi.nprobe,
        index_mb=round((work / "c.index" / "index.faiss").stat().st_size / 1e6),
    )
    t = time.perf_counter()
    u = ui.Index(ndim=x.shape[1], metric="ip", dtype="i8", connectivity=16, expansion_add=128, expansion_search=64)
    for s in range(0, n, 65_536):
        u.add(np.arange(s, min(n, s + 65_536)), np.ascontiguousarray(x[s : s + 65_536]), threads=os.cpu_count() or 1)
    ub = time.perf_counter() - t

    def usearch_one(q: np.ndarray) -> np.ndarray:
        c = np.unique(u.search(q[0], 100, threads=1).keys.astype(np.int64))
        s = np.asarray(x[c]) @ q[0]
        return c[np.argsort(-s)[:10]][None, :]

    found, med, _ = latency(usearch_one, queries)
    u.save(str(work / "u.usearch"))
    out["usearch"] = {
        "build_s": round(ub, 1),
        "recall_at_10": round(recall(found, truth), 4),
        "median_ms": round(med, 2),
        "expansion_search": 64,
        "index_mb": round((work / "u.usearch").stat().st_size / 1e6),
    }
    print(out, flush=True)
    shutil.rmtree(work / "c.index")
    (work / "u.usearch").unlink()
    npy.unlink()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000000", help="synthetic sizes, comma-separated ('' for none)")
    ap.add_argument("--real-at", default="", help="sizes of real embeddings alone (each <= --base - --queries)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--base", type=int, default=20_000)
    ap.add_argument("--encoder", default="all-minilm-l6-v2", help="the encoder of the --base texts")
    ap.add_argument(
        "--texts",
        choices=("sentences", "passages"),
        default="sentences",
        help="--base texts: Gutenberg sentences (0.72M at most) or 16-word passages (1.4M)",
    )
    ap.add_argument("--compare-at", type=int, default=100_000, help="0: skip the faiss / usearch comparison")
    ap.add_argument("--work", default="/tmp/sentkit-index-bench")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "index_search.json"))
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    every = base_embeddings(work, args.base, args.encoder, args.texts)
    base, held_out = every[: -args.queries], every[-args.queries :]  # the held-out rows query the real sets
    queries = synth(base, args.queries, np.random.default_rng(12345))
    result: dict[str, Any] = {
        "machine": machine(),
        "command": "nice -n 10 python benchmarks/index_search.py " + " ".join(sys.argv[1:]),
        "vectors": f"synthetic: {len(base)} {args.encoder} Gutenberg {args.texts} "
        "embeddings, mixtures (1-w) e_i + w e_j + noise (w ~ U(0, 0.4), noise norm ~0.25), "
        f"normalised; real: the first N of those embeddings, queried by the {args.queries} "
        "held-out ones",
        "queries": args.queries,
    }
    if args.compare_at:
        result["compare"] = compare(work, base, args.compare_at, queries)
    result["sizes"] = [one_size(work, base, int(n), held_out, real=True) for n in args.real_at.split(",") if n]
    result["sizes"] += [one_size(work, base, int(n), queries) for n in args.sizes.split(",") if n]
    result["bench_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
