"""``sentkit index``: an approximate nearest-neighbour index of an ``embed`` output (sentkit.retrieval.index)."""

from __future__ import annotations

import argparse
import time
from dataclasses import fields

# flags of the command that are IndexSettings fields
SETTINGS_FLAGS = ("nlist", "nprobe", "candidates", "train_size", "kmeans_iters", "codes", "chunk", "seed")


def register(subparsers: argparse._SubParsersAction) -> None:
    from sentkit.retrieval.index import CODES, EXACT_BELOW, IndexSettings

    d = {f.name: f.default for f in fields(IndexSettings)}
    p = subparsers.add_parser(
        "index",
        help="build an approximate nearest-neighbour index of an embed output (.npy)",
        description="Build a faiss IVF index (8-bit codes, exact re-ranking of the candidates from the vectors) "
        "of the [n, dim] vectors `sentkit embed --output X.npy` wrote, reading them through a memory map in "
        "chunks: sentkit index --input vectors.npy --output vectors.index. The folder records the settings, the "
        "metric (cosine) and the .npy's size and sha256; an index whose .npy changed is refused. "
        f"neighbours and explore use an index past {EXACT_BELOW} vectors and search exactly below. "
        "Needs faiss: pip install 'sentkit[index]'.",
    )
    p.add_argument("--input", required=True, help="the .npy of vectors that `sentkit embed` wrote")
    p.add_argument("--output", required=True, help="index folder (new, empty, or an index to replace)")
    p.add_argument("--nlist", type=int, default=None, help="inverted lists (default: about 4*sqrt(n), a power of two)")
    p.add_argument(
        "--nprobe",
        type=int,
        default=None,
        help="lists probed per query (default: about 8*sqrt(nlist), all lists up to 64; recall@10 >= 0.95 "
        "at 100k and 1M vectors in docs/benchmarks.md)",
    )
    p.add_argument(
        "--candidates",
        type=int,
        default=None,
        help=f"approximate hits re-ranked exactly per query (default {d['candidates']})",
    )
    p.add_argument(
        "--train-size", type=int, default=None, help=f"rows sampled to train k-means (default {d['train_size']})"
    )
    p.add_argument("--kmeans-iters", type=int, default=None, help=f"k-means iterations (default {d['kmeans_iters']})")
    p.add_argument(
        "--codes",
        choices=list(CODES),
        default=None,
        help=f"stored codes: sq8 (1 byte a dimension), sq4, fp16 (default {d['codes']})",
    )
    p.add_argument("--chunk", type=int, default=None, help=f"rows read and added at a time (default {d['chunk']})")
    p.add_argument(
        "--seed", type=int, default=None, help=f"seed of the training sample and k-means (default {d['seed']})"
    )
    p.add_argument(
        "--quantize",
        default=None,
        metavar="binary",
        help="a binary index instead: the vectors' sign bits (sentence-transformers' binary codes, 1 bit a "
        "dimension) searched by Hamming distance (faiss IndexBinaryFlat, exact), the best k * --rescore-multiplier "
        "rescored with the float query against the float vectors or int8 codes kept in the index (neighbours "
        "--rescore, sentkit.search(rescore=...)); --nlist, --nprobe, --candidates, --codes and --kmeans-iters do "
        "not apply, --train-size is the sample int8's ranges are fitted on",
    )
    p.set_defaults(func=_index)


def _index(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sentkit.core.config import ConfigError, from_dict
    from sentkit.retrieval.index import IndexSettings, build, build_binary
    from sentkit.sharding.prepare import naming_output

    if Path(args.input).is_dir():
        raise ConfigError(
            f"--input {args.input} is a folder, not a file; give the .npy of vectors that `sentkit embed --output "
            "X.npy` wrote"
        )
    given = {k: getattr(args, k) for k in SETTINGS_FLAGS if getattr(args, k) is not None}
    settings = from_dict(IndexSettings, given, where="sentkit index")
    if args.quantize is not None:
        if args.quantize != "binary":
            raise ConfigError(f"--quantize of an index must be binary, got {args.quantize!r}")
        ivf = [
            f"--{k.replace('_', '-')}" for k in ("nlist", "nprobe", "candidates", "codes", "kmeans_iters") if k in given
        ]
        if ivf:
            raise ConfigError(f"{', '.join(ivf)} set the IVF index; a --quantize binary index takes none of them")
        t = time.perf_counter()
        with naming_output(args.output, "--output"):
            meta = build_binary(args.input, args.output, settings, progress=not getattr(args, "quiet", False))
        print(
            f"indexed {meta['n']} vectors of {meta['dim']} dimensions as binary codes (Hamming, rescored by "
            f"cosine; int8 codes kept) in {time.perf_counter() - t:.1f}s into {args.output}"
        )
        return 0
    t = time.perf_counter()
    with naming_output(args.output, "--output"):  # not the write check's or the temporary folder's name
        meta = build(args.input, args.output, settings, progress=not getattr(args, "quiet", False))
    print(
        f"indexed {meta['n']} vectors of {meta['dim']} dimensions ({meta['nlist']} lists, {settings.codes} codes, "
        f"cosine) in {time.perf_counter() - t:.1f}s into {args.output}"
    )
    return 0
