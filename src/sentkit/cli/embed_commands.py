"""`sentkit embed | similarity`: vectors of texts under any encoder."""

from __future__ import annotations

import argparse
import codecs
import errno
import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentkit.core.config import ConfigError

if TYPE_CHECKING:
    import numpy as np


def register(sub: Any) -> None:
    # ---- embed
    e = sub.add_parser(
        "embed",
        help="embed a .txt (one text per line) or .jsonl file into .npy or .parquet",
        description="Stream texts through an encoder and write float32 (or float16) embeddings, atomically, in "
        "input order. With --shard I/N, or under torchrun, each process embeds one share of the input into "
        "part files (resumable) that are joined into --output; see docs/safety.md. A prompted model (E5, BGE, ...) "
        "gets its default prompt, or the one --prompt-name / --prompt names.",
    )
    e.add_argument(
        "--model",
        required=True,
        help="any model name: a folder saved by `sentkit train`, glove-average, a registry name, "
        "a transformers folder or HF id, file.py:attr",
    )
    e.add_argument("--input", required=True, help=".txt (one text per line) or .jsonl")
    e.add_argument("--output", required=True, help=".npy or .parquet")
    e.add_argument("--text-field", default="text", help="field of .jsonl input (default: text)")
    e.add_argument("--batch-size", type=int, default=32)
    e.add_argument("--block", type=int, default=10000, help="texts read and written per block (bounds memory)")
    e.add_argument("--chunk-long", action="store_true", help="split texts longer than the model limit and average")
    e.add_argument(
        "--dtype",
        choices=["float32", "float16"],
        default="float32",
        help="stored precision of the vectors (float16 halves the file; default float32)",
    )
    e.add_argument(
        "--shard",
        default=None,
        metavar="I/N",
        help="embed shard I of N (from 0) into parts beside --output, resumable part by part; the last "
        "shard to finish joins them (default under torchrun: RANK/WORLD_SIZE)",
    )
    e.add_argument(
        "--quantize",
        default=None,
        metavar="int8|binary",
        help="write codes instead of floats (.npy only), sentence-transformers' quantize_embeddings: int8 (1 byte a "
        "dimension, ranges fitted on a seeded sample of the input) or binary (1 bit a dimension, packed: int8 "
        "[n, ceil(dim/8)]); X.quantization.json beside X.npy keeps the calibration that queries are quantized with",
    )
    e.add_argument(
        "--calibration-size",
        dest="calibration",
        default=None,
        metavar="N",
        help="texts of the input, a seeded sample, that --quantize int8 fits its ranges on (default 10000, all of a "
        "smaller input)",
    )
    from sentkit.core.interface import add_prompt_flags
    from sentkit.models.loading import add_model_settings

    add_prompt_flags(e)
    add_model_settings(e)
    e.set_defaults(func=cmd_embed)

    register_similarity(sub)


# ----------------------------------------------------------------------------- embed
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
OUTPUT_SUFFIXES = (".npy", ".parquet")
PARQUET_MARKER = b"sentkit-embeddings"  # schema metadata key of embed's Parquet files
BINARY_SUFFIXES = (".npy", ".npz", ".parquet", ".gz", ".bz2", ".xz", ".zst", ".zip", ".tar", ".pt", ".arrow")


def _strip_eol(line: str) -> str:
    """A line without its ``\n`` and one ``\r`` before it (a lone ``\r`` inside is kept)."""
    line = line[:-1] if line.endswith("\n") else line
    return line[:-1] if line.endswith("\r") else line


class _Hashing(io.RawIOBase):
    """A binary file that feeds every byte read from it to `digest` (a hash object's update)."""

    def __init__(self, raw: Any, digest: Any) -> None:
        self.raw, self.digest = raw, digest

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self.raw.readinto(b)
        if n:
            self.digest.update(memoryview(b)[:n])
        return int(n or 0)


def iter_lines(path: Path, digest: Any = None) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line of a text file, split on ``\n`` only (never on a lone ``\r``,
    form feed or Unicode line separator inside a line). UTF-8, with or without a byte-order mark;
    UTF-16/32 with a byte-order mark. Binary, NUL bytes or invalid UTF-8 raise ConfigError naming
    the file and line. `digest` (a hash object, `sentkit.core.identity.hasher`), when given, is fed every
    byte of the file as it is read: once the lines are exhausted it is the hash of the whole file."""
    from sentkit.data.corpus import bom_encoding

    with path.open("rb") as probe:
        wide = bom_encoding(probe.read(4))
    with path.open("rb", buffering=0) as fileio:
        f = io.BufferedReader(_Hashing(fileio, digest) if digest is not None else fileio)
        if wide is not None:
            text = io.TextIOWrapper(f, encoding=wide, newline="\n")
            i = 0
            try:
                for i, line in enumerate(text, 1):
                    if "\x00" in line:
                        raise ConfigError(f"{path}, line {i}: contains a NUL character; give text, not binary data")
                    yield i, _strip_eol(line)
            except UnicodeDecodeError as e:
                raise ConfigError(f"{path}, after line {i}: not valid {wide.upper()} text ({e.reason})") from None
            return
        for i, raw in enumerate(f, 1):
            if i == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            if b"\x00" in raw:
                raise ConfigError(
                    f"{path}, line {i}: contains a NUL byte (a binary file, or UTF-16 without a byte-order mark); "
                    "give UTF-8 text"
                )
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ConfigError(
                    f"{path}, line {i}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
                    "convert the file to UTF-8"
                ) from None
            yield i, _strip_eol(line)


def _read_texts(path: Path, field: str, digest: Any = None) -> Iterator[str]:
    """Texts of a .txt (one per line, every line counts, empty ones too) or .jsonl file (one per
    non-blank line, the string under `field`); errors name the file and line. `digest`: see
    `iter_lines`."""
    from sentkit.data.corpus import CorpusError, Fix

    jsonl = path.suffix.lower() in JSONL_SUFFIXES
    for i, line in iter_lines(path, digest):
        if not jsonl:
            yield line
            continue
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            hint = (
                " (a .json input must hold one JSON object per line)"
                if i == 1 and line.lstrip().startswith("[")
                else ""
            )
            raise ConfigError(f"{path}, line {i}: not valid JSON ({err.msg}){hint}") from None
        if not isinstance(obj, dict):
            raise ConfigError(
                f"{path}, line {i}: expected a JSON object with a {field!r} field, got {type(obj).__name__}"
            )
        if field not in obj:
            strings = [k for k, v in obj.items() if isinstance(v, str)]
            raise CorpusError(
                f"{path}, line {i}: no field {field!r} (keys: {sorted(obj)})",
                fixes=[Fix({"text_field": strings[0]})] if strings else [],
            )
        value = obj[field]
        if not isinstance(value, str):
            shown = json.dumps(value)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise ConfigError(f"{path}, line {i}: field {field!r} is {shown}, not a string")
        yield value


def _check_embed_paths(src: Path, dst: Path, *, sharded: bool = False) -> None:
    from sentkit.core.io import PathError, check_writable
    from sentkit.sharding.embed import MANIFEST, check_parts_folder, parts_folder

    if dst.suffix.lower() not in OUTPUT_SUFFIXES:
        raise ConfigError(f"--output must end in .npy or .parquet, got {dst}")
    if not src.exists():
        raise PathError(errno.ENOENT, "does not exist", "--input", src)
    if src.is_dir():
        raise PathError(errno.EISDIR, "is a directory; give a .txt (one text per line) or .jsonl file", "--input", src)
    if not src.is_file():
        raise PathError(
            errno.EINVAL, "is not a regular file (a pipe or a device); write the texts to a file first", "--input", src
        )
    if src.suffix.lower() in BINARY_SUFFIXES:
        raise PathError(
            errno.EINVAL, f"is a {src.suffix} file; embed reads .txt (one text per line) or .jsonl", "--input", src
        )
    if not os.access(src, os.R_OK):
        raise PathError(errno.EACCES, "is not readable (permission denied)", "--input", src)
    if sharded:
        check_parts_folder(parts_folder(dst), "--output")  # new, empty, or the parts of an earlier run
    if sharded and dst.is_dir():  # a Parquet output: a folder of parts
        check_writable(dst / MANIFEST, what="--output")
        return
    check_writable(dst, what="--output")
    if dst.exists() and os.path.samefile(src, dst):
        raise PathError(errno.EEXIST, "is the --input file; writing it would destroy the input", "--output", dst)
    if dst.exists() and not _is_embed_output(dst):
        raise PathError(
            errno.EEXIST,
            "exists and is not a file that sentkit embed wrote; give another --output, or move that file away yourself",
            "--output",
            dst,
        )


def _is_embed_output(path: Path) -> bool:
    """Whether an existing file looks like embed's output (so replacing it loses nothing of the user's):
    a .npy of float32 or float16 [n, dim], or a .parquet with sentkit's schema metadata."""
    import numpy as np

    try:
        if path.suffix.lower() == ".npy":
            with path.open("rb") as f:
                version = np.lib.format.read_magic(f)
                reader = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(
                    version
                )
                if reader is None:
                    return False
                shape, _, dtype = reader(f)
            if dtype == np.int8:  # codes of `--quantize`, with their calibration beside
                from sentkit.models.quantization import calibration_path

                return len(shape) == 2 and calibration_path(path).is_file()
            return len(shape) == 2 and dtype in (np.float32, np.float16)
        import pyarrow.parquet as pq

        meta = pq.read_schema(path).metadata or {}
        return PARQUET_MARKER in meta
    except Exception:  # unreadable or another format: not ours
        return False


def _dim_of(enc: Any) -> int:
    """The encoder's dimension: its `dim`, else the width of one encoded text."""
    dim = getattr(enc, "dim", None)
    if isinstance(dim, int) and dim > 0:
        return dim
    from sentkit.core.interface import check_embeddings

    return int(check_embeddings(enc.encode([""]), 1, what="encoder").shape[1])


def cmd_embed(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    import sentkit
    from sentkit.cli.data_commands import check_positive
    from sentkit.core.identity import hasher
    from sentkit.core.interface import check_embeddings
    from sentkit.core.io import atomic_path, remove_stale_temps
    from sentkit.sharding.embed import Shard, finished, record_path

    src, dst = Path(args.input), Path(args.output)
    check_positive(args, "batch_size", "block")
    shard = Shard.parse(args.shard) if args.shard else Shard.from_env()
    quantize, calibration_rows = _quantize_flags(args, dst, sharded=shard is not None)
    _check_embed_paths(src, dst, sharded=shard is not None)
    digest = hasher()
    # reads and checks every line before loading the model; hashes the whole input on the way
    n = sum(1 for _ in _read_texts(src, args.text_field, digest))
    quiet = bool(getattr(args, "quiet", False))
    if shard is not None:
        settings = _shard_settings(args, src, n, digest.hexdigest())
        done = finished(dst, {k: v for k, v in settings.items() if k != "model_name"})
        if done is not None:
            print(done)
            return 0
    _use_local_gpu()
    from sentkit.core.interface import encode_with_prompt, prompt_used
    from sentkit.models.loading import model_settings

    enc = sentkit.load(args.model, **model_settings(args))
    prompt = {"prompt_name": args.prompt_name, "prompt": args.prompt}
    prompt_used(enc, **prompt)  # an unknown prompt name fails here, before any text is encoded
    kw: dict[str, Any] = {"batch_size": args.batch_size, **prompt}
    if args.chunk_long:
        import inspect

        if "chunk_long" not in inspect.signature(enc.encode).parameters:
            raise ConfigError(
                f"--chunk-long needs a transformer model; {args.model} ({type(enc).__name__}) "
                "has no length limit to split at"
            )
        kw["chunk_long"] = True

    def floats(texts: list[str]) -> np.ndarray:
        return check_embeddings(encode_with_prompt(enc, texts, **kw), len(texts), what=f"model {args.model}")

    encode: Any = floats
    dim = _dim_of(enc)
    cal = None
    if quantize is not None:  # the calibration first (a seeded sample of the input), then every block's codes
        import numpy as np

        from sentkit.models.loading import model_settings, used_settings
        from sentkit.models.quantization import Calibration, code_width, sample_rows

        about = {"model": args.model, "settings": used_settings(enc, model_settings(args)), "of_rows": n}
        if quantize == "int8":
            picked = set(sample_rows(n, calibration_rows, seed=0).tolist())
            sample = [t for i, t in enumerate(_read_texts(src, args.text_field)) if i in picked]
            if len(sample) < 2:
                raise ConfigError(f"--quantize int8 fits its ranges on at least 2 texts; {src} has {len(sample)}")
            emb = np.concatenate([floats(sample[i : i + args.block]) for i in range(0, len(sample), args.block)])
            cal = Calibration.fit(emb, "int8", seed=0, source=str(src), **about)
        else:
            cal = Calibration("binary", dim, source="sign (no calibration)", extra=about)
        dim, codes = code_width(quantize, dim), cal.codes
        encode = lambda texts: codes(floats(texts))  # noqa: E731

    writer = _write_npy if dst.suffix.lower() == ".npy" else _write_parquet
    if shard is not None:
        from sentkit.sharding.embed import embed_shard

        print(
            embed_shard(
                dst,
                shard,
                lambda: _read_texts(src, args.text_field),
                n,
                _dim_of(enc),
                encode,
                writer,
                block=args.block,
                dtype=args.dtype,
                settings={k: v for k, v in settings.items() if k not in ("rows", "block", "dtype")},
                progress=os.environ.get("LOCAL_RANK", "0") == "0" and not quiet,
            )
        )
        return 0

    def blocks() -> Iterator[tuple[list[str], np.ndarray]]:
        buf: list[str] = []
        for t in _read_texts(src, args.text_field):
            buf.append(t)
            if len(buf) == args.block:
                yield buf, encode(buf)
                buf = []
        if buf:
            yield buf, encode(buf)

    remove_stale_temps(dst.parent, dst.name)
    from sentkit.models.quantization import calibration_path

    with tqdm(total=n, desc="embed", unit="text", file=sys.stderr, disable=quiet) as bar, atomic_path(dst) as tmp:
        written = writer(tmp, n, dim, blocks(), bar.update, dtype="int8" if cal is not None else args.dtype)
        if written != n:
            raise ConfigError(f"{src} changed while it was being embedded ({n} texts, then {written}); run again")
    if cal is not None:
        cal.save(calibration_path(dst))
    else:  # the calibration of codes this file replaced
        calibration_path(dst).unlink(missing_ok=True)
    record_path(dst).unlink(missing_ok=True)  # a sharded run's record of the file this one replaced
    print(
        f"wrote {n} embeddings to {dst}"
        + (f" ({cal.precision} codes; calibration {calibration_path(dst)})" if cal else "")
    )
    return 0


def _quantize_flags(args: argparse.Namespace, dst: Path, *, sharded: bool) -> tuple[str | None, int]:
    """--quantize and --calibration-size, checked before anything is read (one line each): the precision (None: floats)
    and the rows int8's ranges are fitted on."""
    from sentkit.models.quantization import DEFAULT_CALIBRATION_ROWS, check_quantize

    quantize, rows = getattr(args, "quantize", None), getattr(args, "calibration", None)
    if quantize is None:
        if rows is not None:
            raise ConfigError(
                "--calibration-size is the sample --quantize int8 fits its ranges on: give --quantize int8 too"
            )
        return None, 0
    quantize = check_quantize(quantize)
    if rows is not None and quantize != "int8":
        raise ConfigError("--calibration-size applies to --quantize int8 (binary codes need no calibration)")
    if rows is not None and (not str(rows).strip().isdigit() or int(rows) < 2):
        raise ConfigError(f"--calibration-size must be a whole number of texts >= 2, got {rows!r}")
    if dst.suffix.lower() != ".npy":
        raise ConfigError(f"--quantize writes a .npy of codes; give --output X.npy, not {dst.name}")
    if sharded:
        raise ConfigError(
            "--quantize is not sharded: int8 ranges are fitted on one sample of the whole input; run embed --quantize "
            "without --shard (or embed floats in shards and build `sentkit index --quantize binary` of them)"
        )
    return quantize, int(rows) if rows is not None else DEFAULT_CALIBRATION_ROWS


def _shard_settings(args: argparse.Namespace, src: Path, n: int, sha256: str) -> dict[str, Any]:
    """What a sharded run records and compares before it joins parts (sentkit.sharding.embed): the
    input by the hash of all its bytes, the model by its content (`sentkit.models.loading.content_id`),
    every setting that changes the vectors; `model_name` (the name typed) is recorded only."""
    from sentkit.models.loading import content_id, model_settings, settings_before_loading

    given = settings_before_loading(args.model, model_settings(args))  # half precision as resolved: parts never mix
    return {
        "rows": n,
        "block": args.block,
        "dtype": args.dtype,
        "input": {"bytes": src.stat().st_size, "sha256": sha256},
        "model": content_id(args.model),
        "model_name": args.model,
        "chunk_long": bool(args.chunk_long),
        **({"settings": given} if given else {}),
        **(
            {"prompt": {"name": args.prompt_name, "text": args.prompt}}
            if args.prompt_name or args.prompt is not None
            else {}
        ),
        "text_field": args.text_field if src.suffix.lower() in JSONL_SUFFIXES else None,
    }


def _use_local_gpu() -> None:
    """Under torchrun, make this process's GPU (LOCAL_RANK) the current one before the model loads."""
    if "LOCAL_RANK" not in os.environ or os.environ.get("WORLD_SIZE", "1") == "1":
        return
    import torch

    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())


def _write_npy(
    tmp: Path, n: int, dim: int, blocks: Iterator[tuple[list[str], np.ndarray]], done: Any, *, dtype: str = "float32"
) -> int:
    """Stream [n, dim] vectors of `dtype` into a .npy file (plain writes, so a full disk is an OSError,
    not a SIGBUS of a memory map). Returns the rows written; stops at `n`."""
    import numpy as np

    row = 0
    kind = np.dtype(dtype).newbyteorder("<")
    with open(tmp, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.lib.format.dtype_to_descr(kind), "fortran_order": False, "shape": (n, dim)}
        )
        for texts, v in blocks:
            _check_block(v, dim, row, n)
            f.write(np.ascontiguousarray(v, dtype=kind).tobytes())
            row += len(v)
            done(len(texts))
    return row


def _check_block(v: np.ndarray, dim: int, row: int, n: int) -> None:
    if v.shape[1] != dim:
        raise ConfigError(f"the model returned {v.shape[1]}-dimensional embeddings after announcing {dim}")
    if row + len(v) > n:
        raise ConfigError(f"the input grew while it was being embedded (more than {n} texts); run again")


def _write_parquet(
    tmp: Path, n: int, dim: int, blocks: Iterator[tuple[list[str], np.ndarray]], done: Any, *, dtype: str = "float32"
) -> int:
    """Stream (text, embedding) rows into a Parquet file; an empty input gives a valid empty table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kind = pa.float16() if dtype == "float16" else pa.float32()
    schema = pa.schema(
        [("text", pa.string()), ("embedding", pa.list_(kind, dim))],
        metadata={PARQUET_MARKER: json.dumps({"dim": dim, "dtype": dtype}).encode()},
    )
    row = 0
    with pq.ParquetWriter(tmp, schema) as writer:
        for texts, v in blocks:
            _check_block(v, dim, row, n)
            flat = pa.array(v.reshape(-1).astype(dtype, copy=False), type=kind)
            emb = pa.FixedSizeListArray.from_arrays(flat, dim)
            writer.write_table(pa.table({"text": pa.array(texts, type=pa.string()), "embedding": emb}, schema=schema))
            row += len(texts)
            done(len(texts))
    return row


# ----------------------------------------------------------------------------- similarity
def cmd_similarity(args: argparse.Namespace) -> int:
    import numpy as np

    import sentkit

    if len(args.texts) < 2:
        raise ConfigError("give at least two texts to compare")
    from sentkit.core.interface import encode_with_prompt
    from sentkit.models.loading import model_settings

    enc = sentkit.load(args.model, **model_settings(args))
    v = encode_with_prompt(enc, list(args.texts), prompt_name=args.prompt_name, prompt=args.prompt)
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
    s = sub.add_parser(
        "similarity",
        help="cosine similarity of a few texts under a model (a quick check)",
        description="Embed the given texts and print their cosine similarity matrix.",
    )
    s.add_argument(
        "--model",
        required=True,
        help="any model name: a folder saved by `sentkit train`, glove-average, a registry name, "
        "a transformers folder or HF id, file.py:attr",
    )
    s.add_argument("texts", nargs="+", help="texts to compare")
    from sentkit.core.interface import add_prompt_flags
    from sentkit.models.loading import add_model_settings

    add_prompt_flags(s)
    add_model_settings(s)
    s.set_defaults(func=cmd_similarity)
