"""Time the SentEval suite (sentkit's re-implementation) against the original SentEval.

Two timings per run:
- encoding: every unique sentence of the chosen tasks, once (cold cache), with the model;
- classifiers: the whole protocol on cached embeddings (what the peer figures measure).

Peer figures: original SentEval (facebookresearch/SentEval @ 5d6dc11, patched only to run on
CPU), one thread pinned to one core, on this machine (2026-11-30), classifier time only.

    python benchmarks/eval_speed.py --model glove-average --preset literature --threads 1 \
        --json /tmp/speed_glove_lit.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

# (model, preset) -> (seconds, what it covers)
PEER = {
    ("glove-50d-average", "prototyping"): (234.0, "16 tasks with data"),
    ("all-minilm-l6-v2", "prototyping"): (287.0, "16 tasks with data"),
    ("glove-50d-average", "literature"): (1851.0, "14 tasks (all but SUBJ, MPQA)"),
    ("all-minilm-l6-v2", "literature"): (2171.0, "14 tasks (all but SUBJ, MPQA); MR alone 1,186 s"),
}
PEER_ENCODE_MINILM = 1317.0  # s, SentEval end to end with all-MiniLM-L6-v2: 216k sentences asked
# SentEval end to end (encoding + classifiers) with all-MiniLM-L6-v2, from the same peer run: prototyping 1,596 s
# measured; literature 1,317 s of encoding + 4,540 s of classifiers, the latter estimated (its 14 tasks took 2,171 s,
# and SUBJ and MPQA, left out of that run, were counted as MR's 1,186 s each).
PEER_END_TO_END = {
    ("all-minilm-l6-v2", "prototyping"): (1596.0, "measured"),
    ("all-minilm-l6-v2", "literature"): (5860.0, "1,317 s encoding measured + 4,540 s classifiers estimated"),
}
LIT14 = [
    "MR",
    "CR",
    "SST2",
    "SST5",
    "TREC",
    "MRPC",
    "SICKE",
    "SICKR",
    "STSB",
    "STS12",
    "STS13",
    "STS14",
    "STS15",
    "STS16",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="glove-average", help="anything `sentkit evaluate --model` takes")
    ap.add_argument("--preset", default="literature", choices=["prototyping", "literature"])
    ap.add_argument("--tasks", default="all")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--precision", default=None, help="a transformer's arithmetic (sentkit evaluate --precision)")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--cache-dir", default=None, help="embedding cache (default: a fresh temporary folder)")
    ap.add_argument("--json", default=None, help="write the timings here")
    ap.add_argument("--results", default=None, help="write the full results JSON of the timed run here")
    ap.add_argument(
        "--encode-sample",
        type=int,
        default=0,
        help="also time encoding N random unique sentences without cache (extrapolated to all)",
    )
    args = ap.parse_args()

    from sentkit.evaluation.cli import set_threads

    set_threads(args.threads)
    import tempfile

    from sentkit.evaluation import evaluate
    from sentkit.evaluation.cache import EmbeddingCache
    from sentkit.evaluation.runner import EmbeddingStore
    from sentkit.evaluation.tasks import expand_tasks, load_task

    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="sentkit-speed-")
    from sentkit.core.identity import fingerprint
    from sentkit.models.loading import load

    encoder = load(args.model, **({"precision": args.precision} if args.precision else {}))
    fp = fingerprint(encoder, args.model)
    names = expand_tasks(args.tasks, args.data_dir)

    # 1) encoding: each unique sentence once (whatever is already in the cache is not re-encoded)
    cache = EmbeddingCache(cache_dir, fp) if fp else None
    store = EmbeddingStore(encoder.encode, 128, cache)
    t0, c0 = time.perf_counter(), time.process_time()
    for name in names:
        store.ensure(list(load_task(name, args.data_dir).sentences()), name)
    enc_wall, enc_cpu = time.perf_counter() - t0, time.process_time() - c0

    # 2) classifiers on cached embeddings
    t0, c0 = time.perf_counter(), time.process_time()
    res = evaluate(
        encoder,
        tasks=names,
        preset=args.preset,
        data_dir=args.data_dir,
        fingerprint=fp,
        model_name=args.model,
        cache_dir=cache_dir,
    )
    clf_wall, clf_cpu = time.perf_counter() - t0, time.process_time() - c0

    sample = None
    if args.encode_sample:
        import numpy as np

        texts = sorted(store.rows)
        pick = np.random.default_rng(0).choice(len(texts), min(args.encode_sample, len(texts)), replace=False)
        batch = [texts[i] for i in pick]
        fresh = EmbeddingStore(encoder.encode, 128, None)
        t0, c0 = time.perf_counter(), time.process_time()
        fresh.ensure(batch, "sample")
        w, c = time.perf_counter() - t0, time.process_time() - c0
        sample = {
            "n": len(batch),
            "wall_s": round(w, 1),
            "cpu_s": round(c, 1),
            "all_unique_cpu_s_estimate": round(c / len(batch) * len(store.rows), 1),
            "all_requested_cpu_s_estimate": round(c / len(batch) * store.n_requested, 1),
        }

    per_task = {t: res["timings"]["tasks"][t]["classify_s"] for t in res["timings"]["tasks"]}
    per_task_cpu = {t: res["timings"]["tasks"][t]["classify_cpu_s"] for t in res["timings"]["tasks"]}
    lit14 = sum(v for t, v in per_task.items() if t in LIT14)
    lit14_cpu = sum(v for t, v in per_task_cpu.items() if t in LIT14)
    peer = PEER.get((args.model, args.preset))
    end_peer = PEER_END_TO_END.get((args.model, args.preset))
    cold = store.n_cached == 0  # every unique sentence encoded in this run
    out = {
        "model": args.model,
        "preset": args.preset,
        "threads": args.threads,
        "precision": getattr(encoder, "precision", None),
        "tasks": names,
        "sentences": {
            "requested": store.n_requested,
            "unique": len(store.rows),
            "encoded": store.n_encoded,
            "from_cache": store.n_cached,
        },
        "encode": {"wall_s": round(enc_wall, 1), "cpu_s": round(enc_cpu, 1), "sample": sample},
        "classify": {
            "wall_s": round(clf_wall, 1),
            "cpu_s": round(clf_cpu, 1),
            "per_task_wall_s": per_task,
            "per_task_cpu_s": per_task_cpu,
            "lit14_wall_s": round(lit14, 1),
            "lit14_cpu_s": round(lit14_cpu, 1),
        },
        "peer": {"seconds": peer[0], "covers": peer[1]} if peer else None,
        "end_to_end": {
            "cold_cache": cold,
            "cpu_s": round(enc_cpu + clf_cpu, 1),
            "wall_s": round(enc_wall + clf_wall, 1),
            **(
                {
                    "peer_s": end_peer[0],
                    "peer_is": end_peer[1],
                    "speedup_cpu": round(end_peer[0] / max(enc_cpu + clf_cpu, 1e-9), 2),
                }
                if end_peer and cold
                else {}
            ),
        },
        "errors": res["errors"],
        "scores": res["declutr_average"]["per_task"],
    }
    print(json.dumps(out, indent=1))
    if peer:
        wall = lit14 if args.preset == "literature" else clf_wall
        cpu = lit14_cpu if args.preset == "literature" else clf_cpu
        print(
            f"\nclassifier time ({peer[1]}): {wall:.1f} s wall, {cpu:.1f} s CPU vs SentEval {peer[0]:.0f} s: "
            f"{peer[0] / max(wall, 1e-9):.1f}x (wall), {peer[0] / max(cpu, 1e-9):.1f}x (CPU)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    if args.results:
        Path(args.results).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
