"""`sentkit embed | similarity`: vectors of texts under any encoder."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sentkit.config import ConfigError


def register(sub: Any) -> None:
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

    register_similarity(sub)


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
