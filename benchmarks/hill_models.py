"""Training words/s and encoding sentences/s of the Hill et al. (2016) methods
(the paper's Table 1 reports training hours and time to encode 0.5M sentences).

    python benchmarks/hill_models.py --corpus ../shared/data/corpus/gutenberg --books 20 \
        --methods fastsent,cbow --json bench.json --neighbours

Each method trains on the first ``--books`` books (neural models stop after ``--steps``
optimiser steps at their CPU default sizes), then encodes ``--encode`` corpus sentences.
``--neighbours`` prints each model's 3 nearest neighbours of a few queries among the
encoded sentences, to check by eye that they are sensible. ``--trained DIR`` skips training and
loads each method's model from an experiment folder (``DIR/<method>/seed-0/model``, as
``sentkit experiment run`` writes it), then prints a Markdown table of the top neighbours:

    python benchmarks/hill_models.py --trained runs/experiments/laptop --books 209 --encode 20000

NMT and CaptionRep have no data in the shared folder: they are timed on synthetic parallel text /
features built from the corpus (speed only).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("hill_bench")

ALL = [
    "fastsent",
    "fastsent-ae",
    "cbow",
    "skipgram",
    "paragraph-vector-dbow",
    "paragraph-vector-dm",
    "tfidf",
    "glove-average",
    "sdae",
    "sae",
    "skipthought",
    "dictrep-bow",
    "dictrep-rnn",
    "nmt",
    "captionrep",
]
NEURAL = {"sdae", "sae", "skipthought", "dictrep-bow", "dictrep-rnn", "nmt", "captionrep"}
QUERIES = [
    "She was very happy to see her sister again.",
    "The ship sailed out of the harbour at dawn.",
    "He drew his sword and rushed at the enemy.",
]


def settings_for(name: str, steps: int, epochs: int) -> dict[str, Any]:
    """Benchmark settings: paper/CPU defaults, capped neural training."""
    s: dict[str, Any] = {"progress": False}
    if name in NEURAL:
        s["max_steps"] = steps
    if name in ("fastsent", "fastsent-ae", "cbow", "skipgram", "paragraph-vector-dbow", "paragraph-vector-dm"):
        s["epochs"] = epochs
    return s


def synthetic_parallel(sentences: list[list[str]], path: Path) -> None:
    """A toy translation task (each word reversed, sentence order flipped)."""
    with path.open("w", encoding="utf-8") as f:
        for s in sentences:
            if s:
                f.write(" ".join(s) + "\t" + " ".join(w[::-1] for w in reversed(s)) + "\n")


def run_method(
    name: str, data: Any, texts: list[str], args: argparse.Namespace, tmp: Path
) -> tuple[dict[str, Any], Any]:
    import sentkit
    from sentkit.hill import model_class

    kw = settings_for(name, args.steps, args.epochs)
    t0 = time.perf_counter()
    if name == "glove-average":  # nothing to train: a registry encoder, its load timed as the fit
        model = sentkit.load(name)
    elif name == "nmt":
        cls = model_class(name)
        n = args.steps * 64
        synthetic_parallel([data.sentence(i) for i in range(min(n, len(data)))], tmp / "pairs.tsv")
        model = cls(**kw).fit(tmp / "pairs.tsv")
    elif name == "captionrep":
        cls = model_class(name)
        rng = np.random.default_rng(0)
        n = min(args.steps * 128, len(data))
        feats = rng.normal(size=(1000, 512)).astype(np.float32)
        pairs = [(" ".join(data.sentence(i)), int(i % 1000)) for i in range(n)]
        model = cls(**kw).fit(pairs, feats)
    elif name in ("dictrep-bow", "dictrep-rnn"):
        model = model_class(name)(**kw).fit(None)
    else:
        model = model_class(name)(**kw).fit(data)
    fit_s = time.perf_counter() - t0
    stats = dict(getattr(model, "train_stats_", {}) or {})
    enc_texts = texts[: (args.encode // 10 if name.startswith("paragraph") else args.encode)]
    model.encode(enc_texts[:10])  # warm-up
    t1 = time.perf_counter()
    emb = model.encode(enc_texts, batch_size=256)  # the recurrent models' batch before encode(batch_size=)
    enc_s = time.perf_counter() - t1
    row = {
        "method": name,
        "dim": int(emb.shape[1]),
        "fit_seconds": round(fit_s, 1),
        "train_words": int(stats.get("words", 0)),
        "train_words_per_s": round(float(stats.get("words_per_s", 0.0))),
        "steps": int(stats.get("steps", 0)),
        **({"first_loss": stats["first_loss"], "last_loss_smoothed": stats["loss"]} if "first_loss" in stats else {}),
        "encode_seconds": round(enc_s, 1),
        "encode_sentences": len(enc_texts),
        "encode_sentences_per_s": round(len(enc_texts) / max(enc_s, 1e-9)),
        "settings": {k: v for k, v in kw.items() if k != "progress"},
    }
    return row, model


def show_neighbours(name: str, model: Any, texts: list[str]) -> list[dict[str, Any]]:
    from sentkit.retrieval.neighbours import build_index

    index = build_index(model, texts, progress=False)
    out = []
    for q in QUERIES:
        qe = model.encode_sparse([q]) if index.sparse else model.encode([q])
        idx, scores = index.search(qe, 3)
        out.append(
            {"query": q, "neighbours": [[round(float(s), 3), index.sentences[i]] for i, s in zip(idx[0], scores[0])]}
        )
        print(f"[{name}] {q}")
        for i, s in zip(idx[0], scores[0]):
            print(f"    {s:.3f}  {index.sentences[i][:110]}")
    return out


def neighbours_of_trained(root: Path, methods: list[str], texts: list[str]) -> int:
    """Top neighbours of QUERIES among `texts` for every trained model under an experiment folder."""
    import sentkit

    table: dict[str, list[str]] = {}
    for name in methods:
        path = root / name / "seed-0" / "model"
        if not path.is_dir():
            print(f"{name}: no trained model at {path}, skipped")
            continue
        found = show_neighbours(name, sentkit.load(str(path)), texts)
        table[name] = [f"{r['neighbours'][0][1][:90]} ({r['neighbours'][0][0]:.2f})" for r in found]
    print(f"\nTop neighbour (cosine) among {len(texts):,} Gutenberg sentences:\n")
    for qi, q in enumerate(QUERIES):
        print(f"| method | {q} |\n|---|---|")
        for name, tops in table.items():
            print(f"| {name} | {tops[qi].replace('|', '/')} |")
        print()
    return 0


def index_speed(n: int, dims: list[int], k: int = 10, repeats: int = 20) -> list[dict[str, Any]]:
    """Query time of a NeighbourIndex of ``n`` random unit vectors (median of ``repeats``)."""
    from sentkit.retrieval.neighbours import NeighbourIndex, normalise_rows

    rng = np.random.default_rng(0)
    out = []
    for d in dims:
        emb = normalise_rows(rng.standard_normal((n, d), dtype=np.float32))
        index = NeighbourIndex([""] * n, emb)
        times = []
        for _ in range(repeats):
            q = rng.standard_normal((1, d), dtype=np.float32)
            t = time.perf_counter()
            index.search(q, k)
            times.append(time.perf_counter() - t)
        out.append(
            {
                "sentences": n,
                "dim": d,
                "query_ms_median": round(1000 * float(np.median(times)), 1),
                "query_ms_max": round(1000 * float(np.max(times)), 1),
            }
        )
        print(json.dumps(out[-1]))
        del emb, index
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default=os.environ.get("SENTKIT_DATA", "../shared/data") + "/corpus/gutenberg")
    p.add_argument("--books", type=int, default=20, help="first N books of a folder corpus")
    p.add_argument("--methods", default=",".join(ALL))
    p.add_argument("--steps", type=int, default=100, help="optimiser steps for neural models")
    p.add_argument("--epochs", type=int, default=1, help="epochs for fastsent / word2vec / PV")
    p.add_argument("--encode", type=int, default=10_000, help="sentences to encode (PV: a tenth)")
    p.add_argument("--neighbours", action="store_true", help="print nearest neighbours of queries")
    p.add_argument("--json", default=None, help="write results here")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads for neural models")
    p.add_argument(
        "--trained", default=None, help="experiment output folder: load <method>/seed-0/model instead of training"
    )
    p.add_argument(
        "--index-speed", action="store_true", help="only time neighbour queries over 500,000 random sentence vectors"
    )
    args = p.parse_args()
    if args.index_speed:
        rows = index_speed(500_000, [50, 100, 256, 1024])
        if args.json:
            machine = f"{platform.machine()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}"
            out = {"machine": machine, "load_average_at_end": os.getloadavg()[0], "index_speed": rows}
            Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("gensim").setLevel(logging.WARNING)

    from sentkit.data.corpus import iter_documents
    from sentkit.data.sentences import read_corpus, split_sentences

    corpus = Path(args.corpus)
    if not corpus.exists():
        raise SystemExit(f"corpus {corpus} not found (set SENTKIT_DATA or --corpus)")
    docs = [d.text for _, d in zip(range(args.books), iter_documents(corpus))]
    t0 = time.perf_counter()
    data = read_corpus(docs, progress=False)
    read_s = time.perf_counter() - t0
    texts = [s for d in docs for s in split_sentences(d) if len(s.split()) >= 4]
    rng = np.random.default_rng(0)
    texts = [texts[i] for i in sorted(rng.choice(len(texts), size=min(args.encode, len(texts)), replace=False))]
    if args.trained:
        return neighbours_of_trained(Path(args.trained), [m for m in args.methods.split(",") if m], texts)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    header = {
        "corpus": str(corpus),
        "books": len(docs),
        "sentences": len(data),
        "words": data.n_tokens,
        "read_seconds": round(read_s, 1),
        "read_words_per_s": round(data.n_tokens / read_s),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"torch threads {torch.get_num_threads()}",
        "load_average_at_start": os.getloadavg()[0],
    }
    print(json.dumps(header))
    rows, nbrs = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in [m for m in args.methods.split(",") if m]:
            try:
                row, model = run_method(name, data, texts, args, Path(tmp))
            except (FileNotFoundError, ImportError) as e:
                print(f"{name}: skipped ({e})")
                continue
            rows.append(row)
            print(json.dumps(row))
            if args.neighbours and name not in ("nmt", "captionrep"):
                nbrs[name] = show_neighbours(name, model, texts)
            if args.json:  # after every method, so that a long run keeps what it measured
                out = {"header": header, "rows": rows, "neighbours": nbrs}
                Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    print("\n| method | dim | train words/s | steps | fit s | encode sentences/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['method']} | {r['dim']} | {r['train_words_per_s']:,} | {r['steps'] or '-'} | "
            f"{r['fit_seconds']} | {r['encode_sentences_per_s']:,} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
