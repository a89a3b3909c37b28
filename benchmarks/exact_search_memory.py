"""Memory and time of exact search (`sentkit.search` / `sentkit.retrieval.index.search` below the exact limit), and the
cost of a repeated `sentkit.search` through an index, for this checkout and the code before blocked search.

    nice -n 10 python benchmarks/exact_search_memory.py [--sizes 1000x150000,10000x199999] [--dim 384]
        [--before-src DIR] [--before-upto 1000x150000] [--index-at 150000] [--blas-threads 1]
        [--work /tmp/sentkit-exact-bench] [--out benchmarks/results/exact_search_memory.json]

Per size MxN (queries x rows): N float32 vectors of `--dim` dimensions (clustered, norms varying) are
written to a .npy in --work, and M queries drawn the same way are searched for their 10 nearest rows
by `sentkit.retrieval.index.search(queries, 10, vectors=NPY)` (the memory-mapped file, exactly) in a child
process of its own, once plainly and once under tracemalloc (numpy's allocations are traced). Recorded:
the child's wall time of the search, its peak resident memory (VmHWM: it counts the pages of the
memory-mapped file the search read, which the kernel can drop), its peak RssAnon (its own allocations,
read from outside every 20 ms) less its RssAnon just before the search, and tracemalloc's peak.

`--before-src DIR`: the `src` folder of the code before (made with `git archive COMMIT src | tar -x -C
/tmp/before`), run on the sizes up to `--before-upto` rows x queries (the full score matrix of larger ones
does not fit); its ids and scores are compared with this checkout's. `--index-at N`: an index
(`sentkit index`, default settings) of the first size's N rows is built, and five successive one-query
`sentkit.retrieval.index.search(..., index=DIR)` calls are timed in one process per code: before, each call
opened the index again. `--blas-threads T` (default 1: on a shared machine one thread per child is the
steadier comparison; 0 leaves the BLAS default) sets the children's OpenBLAS/OpenMP/MKL threads.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import REPO, machine

sys.path.insert(0, str(REPO / "src"))  # this checkout's sentkit, in this process too

CHILD = r"""
import json, resource, sys, time, tracemalloc
import numpy as np
from sentkit.retrieval.index import search

npy, qfile, out, traced = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"

def anon_kb():
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith("RssAnon:"))

q = np.load(qfile)
n = np.load(npy, mmap_mode="r").shape[0]
base = anon_kb()
if traced:
    tracemalloc.start()
t = time.perf_counter()
ids, scores = search(q, 10, vectors=npy, exact_below=n + 1)
secs = time.perf_counter() - t
res = {"seconds": secs, "base_anon_kb": base, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
if traced:
    res["traced_peak_b"] = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
else:
    np.save(out + ".ids.npy", ids)
    np.save(out + ".scores.npy", scores)
print(json.dumps(res))
"""

REOPEN = r"""
import json, sys, time
import numpy as np
from sentkit.retrieval.index import search

npy, qfile, folder = sys.argv[1], sys.argv[2], sys.argv[3]
q = np.load(qfile)
ms = []
for r in range(5):
    t = time.perf_counter()
    search(q[r : r + 1], 10, vectors=npy, index=folder, exact_below=1)
    ms.append(1000 * (time.perf_counter() - t))
print(json.dumps({"call_ms": ms}))
"""


def clustered(n: int, d: int, seed: int, centres: int = 1000, chunk: int = 65_536) -> Any:
    """Rows around seeded random centres, norms varying (cosine must normalise), `chunk` at a time."""
    rng = np.random.default_rng(seed)
    c = np.random.default_rng(0).standard_normal((centres, d), dtype=np.float32)
    for s in range(0, n, chunk):
        m = min(chunk, n - s)
        x = c[rng.integers(0, centres, m)] + 0.5 * rng.standard_normal((m, d), dtype=np.float32)
        yield (x * rng.uniform(0.5, 3.0, (m, 1))).astype(np.float32)


def write_npy(path: Path, n: int, d: int, seed: int) -> None:
    if path.is_file():
        return
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (n, d)})
        for rows in clustered(n, d, seed):
            f.write(rows.tobytes())


def _anon_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(ln.split()[1]) for ln in f if ln.startswith("RssAnon:")), 0)
    except OSError:  # the child has just ended
        return 0


BLAS_THREADS: dict[str, str] = {}  # the children's thread settings (--blas-threads)


def child(code: str, args: list[str], src: Path) -> dict[str, Any]:
    """Run `code` in a child with `src` first on its path; its peak RssAnon sampled from outside."""
    env = {**os.environ, "PYTHONPATH": str(src), **BLAS_THREADS}
    with subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True, env=env) as p:
        anon = 0
        while p.poll() is None:
            anon = max(anon, _anon_kb(p.pid))
            time.sleep(0.02)
        stdout = p.stdout.read() if p.stdout else ""
    if p.returncode:
        raise SystemExit(f"a child failed (exit {p.returncode}) on {args}")
    return {**json.loads(stdout.strip().splitlines()[-1]), "peak_anon_kb": anon}


def measure(npy: Path, qfile: Path, out: Path, src: Path) -> dict[str, Any]:
    plain = child(CHILD, [str(npy), str(qfile), str(out), "0"], src)
    traced = child(CHILD, [str(npy), str(qfile), str(out), "1"], src)
    mb = 1 / 1024
    return {
        "search_s": round(plain["seconds"], 2),
        "peak_rss_mb": round(plain["maxrss_kb"] * mb, 1),
        "search_anon_mb": round((plain["peak_anon_kb"] - plain["base_anon_kb"]) * mb, 1),
        "tracemalloc_peak_mb": round(traced["traced_peak_b"] / 2**20, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000x150000,10000x199999", help="queries x rows, comma-separated")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--before-src", default="", help="src folder of the code before blocked search")
    ap.add_argument("--before-commit", default="", help="its commit, recorded")
    ap.add_argument("--before-upto", default="1000x150000", help="largest MxN run with --before-src")
    ap.add_argument("--index-at", type=int, default=150_000, help="rows of the index timed; 0: none")
    ap.add_argument("--blas-threads", type=int, default=1, help="the children's BLAS threads; 0: the default")
    ap.add_argument("--work", default="/tmp/sentkit-exact-bench")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "exact_search_memory.json"))
    args = ap.parse_args()
    if args.blas_threads:
        BLAS_THREADS.update(
            {v: str(args.blas_threads) for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
        )
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    upto = int(np.prod([int(v) for v in args.before_upto.split("x")]))
    codes = [("after", REPO / "src")] + ([("before", Path(args.before_src))] if args.before_src else [])
    record: dict[str, Any] = {
        "benchmark": "exact_search_memory",
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python benchmarks/exact_search_memory.py " + " ".join(sys.argv[1:]),
        "before_commit": args.before_commit or None,
        "dim": args.dim,
        "blas_threads": args.blas_threads or "default",
        "load_avg_at_start": [round(v, 2) for v in os.getloadavg()],  # the machine is shared: timings vary
        "rows": [],
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for size in args.sizes.split(","):
        m, n = (int(v) for v in size.split("x"))
        npy = work / f"rows_{n}x{args.dim}.npy"
        write_npy(npy, n, args.dim, seed=1)
        qfile = work / f"queries_{m}x{args.dim}.npy"
        np.save(qfile, next(clustered(m, args.dim, seed=2, chunk=max(m, 1))))
        got: dict[str, Path] = {}
        for code, src in codes:
            if code == "before" and m * n > upto:
                continue
            row: dict[str, Any] = {"queries": m, "rows": n, "code": code, **measure(npy, qfile, work / code, src)}
            row["full_matrix_mb"] = round(m * n * 4 / 2**20, 1)
            got[code] = work / code
            if code == "before":
                same = [
                    np.array_equal(np.load(f"{got['after']}.{p}.npy"), np.load(f"{got['before']}.{p}.npy"))
                    for p in ("ids", "scores")
                ]
                row["same_ids_as_after"], row["same_scores_as_after"] = same
            record["rows"].append(row)
            print(json.dumps(row), flush=True)
            out.write_text(json.dumps(record, indent=1) + "\n")
    if args.index_at:
        n = args.index_at
        npy = work / f"rows_{n}x{args.dim}.npy"
        write_npy(npy, n, args.dim, seed=1)
        folder = work / f"index_{n}"
        from sentkit.retrieval.index import build

        if not (folder / "index.json").is_file():
            t = time.perf_counter()
            build(npy, folder, progress=False)
            record["index_build_s"] = round(time.perf_counter() - t, 1)
        qfile = work / f"queries_5x{args.dim}.npy"
        np.save(qfile, next(clustered(5, args.dim, seed=3)))
        for code, src in codes:
            ms = child(REOPEN, [str(npy), str(qfile), str(folder)], src)["call_ms"]
            row = {"index_rows": n, "code": code, "call_ms": [round(v, 1) for v in ms]}
            record["rows"].append(row)
            print(json.dumps(row), flush=True)
            out.write_text(json.dumps(record, indent=1) + "\n")
    record["load_avg_at_end"] = [round(v, 2) for v in os.getloadavg()]
    out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
