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
    p.set_defaults(func=_neighbours)


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
