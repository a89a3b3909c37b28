"""``sentkit neighbours``: the closest sentences of a corpus to each query, under any model name."""

from __future__ import annotations

import argparse
import json
import sys
import time


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "neighbours",
        help="closest corpus sentences to a query under any encoder",
        description="Embed every sentence of a corpus once (cached index), then print the "
        'sentences closest (cosine) to each query: sentkit neighbours --model M --corpus C "first query" '
        '"second query". A prompted model (E5, BGE, ...) embeds the queries with its query prompt and the '
        'corpus with its document prompt ("document", else "passage").',
    )
    p.add_argument("queries", nargs="*", metavar="QUERY", help="query sentences (several at once, like `similarity`)")
    p.add_argument(
        "--model",
        required=True,
        help="any model name: a folder saved by `sentkit train`, glove-average, a registry name, "
        "a Hugging Face id, file.py:attr",
    )
    p.add_argument("--corpus", required=True, help="corpus to search (folder of .txt, .txt, .jsonl, ...)")
    p.add_argument(
        "--query", action="append", default=[], help="a query sentence (repeatable; the same as a positional QUERY)"
    )
    p.add_argument("-k", "--top-k", type=int, default=10, help="neighbours per query (default 10)")
    p.add_argument("--max-sentences", type=int, default=None, help="index at most this many sentences of the corpus")
    p.add_argument(
        "--cache-dir", default=None, help="where indexes are cached (default: <model>/neighbours, or ~/.cache/sentkit)"
    )
    p.add_argument("--rebuild", action="store_true", help="rebuild the index even if cached")
    p.add_argument("--json", action="store_true", help="print JSON lines instead of text")
    from sentkit.core.interface import add_prompt_flags

    add_prompt_flags(
        p,
        what="every query",
        default="its prompt named query, if any (the corpus always gets its document prompt: document, else passage)",
    )
    from sentkit.models.loading import add_model_settings

    add_model_settings(p)
    add_binary_flags(p)
    p.set_defaults(func=_neighbours)


def add_binary_flags(p: argparse.ArgumentParser) -> None:
    """--quantize binary, --rescore and --rescore-multiplier (sentkit.retrieval.index.BinaryCodes)."""
    from sentkit.retrieval.index import RESCORE_MULTIPLIER

    p.add_argument(
        "--quantize",
        default=None,
        metavar="binary",
        help="search the corpus's sign bits (binary codes, 1 bit a dimension) by Hamming distance, then rescore the "
        "best k * --rescore-multiplier with the float query (default: float cosine search)",
    )
    p.add_argument(
        "--rescore",
        default=None,
        metavar="float|int8|none",
        help="with --quantize binary: rescore the candidates against their float vectors (default), their int8 "
        "codes, or not at all (Hamming order)",
    )
    p.add_argument(
        "--rescore-multiplier",
        default=None,
        metavar="M",
        help=f"with --quantize binary: candidates rescored per result (default {RESCORE_MULTIPLIER})",
    )


def binary_settings(args: argparse.Namespace) -> dict[str, object] | None:
    """The checked --quantize / --rescore / --rescore-multiplier (None: no binary search); one line each."""
    from sentkit.core.config import ConfigError
    from sentkit.retrieval.index import RESCORE_MULTIPLIER, check_rescore

    quantize = getattr(args, "quantize", None)
    if quantize is None:
        given = [
            f
            for f, k in (("--rescore", "rescore"), ("--rescore-multiplier", "rescore_multiplier"))
            if getattr(args, k, None) is not None
        ]
        if given:
            raise ConfigError(f"{' and '.join(given)} apply to --quantize binary: give it too (or leave them out)")
        return None
    if quantize != "binary":
        from sentkit.core.registry import suggest

        raise ConfigError(f"--quantize here must be binary, got {quantize!r}.{suggest(str(quantize), ['binary'])}")
    rescore, multiplier = check_rescore(args.rescore or "float", args.rescore_multiplier or RESCORE_MULTIPLIER)
    return {"rescore": rescore, "multiplier": multiplier}


def _neighbours(args: argparse.Namespace) -> int:
    from sentkit.core.config import ConfigError
    from sentkit.core.interface import prompt_used
    from sentkit.retrieval.neighbours import encode_side, get_index, side_prompt

    queries = [*args.queries, *args.query]
    if not queries:
        raise ConfigError('give at least one query: sentkit neighbours --model M --corpus C "a query"')
    if args.top_k < 1:
        raise ConfigError("--top-k must be >= 1")
    if args.max_sentences is not None and args.max_sentences < 1:
        raise ConfigError("--max-sentences must be >= 1")
    binary = binary_settings(args)
    import sentkit

    t0 = time.perf_counter()
    from sentkit.models.loading import model_settings, used_settings

    encoder = sentkit.load(args.model, **model_settings(args))
    query_side = side_prompt(encoder, "query", prompt_name=args.prompt_name, prompt=args.prompt)
    prompt_used(encoder, **query_side)  # an unknown prompt name fails before the corpus is indexed
    index, built, where = get_index(
        args.model,
        args.corpus,
        encoder,
        cache_dir=args.cache_dir,
        max_sentences=args.max_sentences,
        rebuild=args.rebuild,
        settings=used_settings(encoder, model_settings(args)),  # half precision as resolved: its own index
    )
    from sentkit.retrieval.index import attach

    if binary is not None:  # the corpus's sign bits, searched by Hamming distance and rescored
        from sentkit.retrieval.index import BinaryCodes

        if index.sparse:
            raise ConfigError(f"--quantize binary needs dense vectors; {args.model} gives sparse ones (TF-IDF)")
        index.ann = BinaryCodes.of(index.embeddings, **binary)  # type: ignore[arg-type]
    else:
        index = attach(index, where)  # past sentkit.retrieval.index.EXACT_BELOW sentences: the approximate index
    t1 = time.perf_counter()
    print(
        f"index: {len(index)} sentences, {'built' if built else 'loaded'} in {t1 - t0:.1f}s ({where})", file=sys.stderr
    )
    for q in queries:
        tq = time.perf_counter()
        qe = encode_side(encoder, [q], sparse=index.sparse, **query_side)
        idx, scores = index.search(qe, args.top_k)
        ms = 1000 * (time.perf_counter() - tq)
        if args.json:
            print(
                json.dumps(
                    {
                        "query": q,
                        "ms": round(ms, 2),
                        "neighbours": [
                            {"sentence": index.sentences[i], "score": float(s)} for i, s in zip(idx[0], scores[0])
                        ],
                    }
                )
            )
            continue
        print(f"query: {q}   ({ms:.1f} ms)")
        for rank, (i, s) in enumerate(zip(idx[0], scores[0]), 1):
            print(f"{rank:3d}. {s:.3f}  {index.sentences[i]}")
        print()
    return 0
