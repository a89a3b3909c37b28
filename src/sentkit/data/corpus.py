"""One streaming corpus reader for every method.

Accepted corpora:
- a folder of ``.txt`` files (searched recursively, sorted): one document per file;
- a single ``.txt`` file: one document (``txt_mode="file"``) or one per line (``"lines"``);
- ``.jsonl`` / ``.json`` lines: one document per line, text under ``field``;
- ``.parquet``: one document per row, text in column ``field``;
- a folder written by ``datasets.Dataset.save_to_disk``: text in column ``field``.

Documents that are empty, binary or not UTF-8 are skipped and counted in ``CorpusStats``,
never a crash. Memory stays bounded by the largest single document.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

TEXT_SUFFIXES = (".txt", ".text")


class CorpusError(ValueError):
    """The corpus cannot be read; the message names the path and the fix."""


@dataclass
class Document:
    id: str  # "path" or "path:line" / "path:row"
    text: str


@dataclass
class CorpusStats:
    """Counts of what the reader kept and skipped (filled in while iterating)."""

    read: int = 0
    empty: int = 0
    binary: int = 0
    not_utf8: int = 0
    bad_json: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)

    def skip(self, reason: str, doc_id: str) -> None:
        setattr(self, reason, getattr(self, reason) + 1)
        ex = self.examples.setdefault(reason, [])
        if len(ex) < 3:
            ex.append(doc_id)

    @property
    def skipped(self) -> int:
        return self.empty + self.binary + self.not_utf8 + self.bad_json

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def _is_hf_dataset_dir(p: Path) -> bool:
    return p.is_dir() and (
        (p / "dataset_info.json").exists() or (p / "state.json").exists() or (p / "dataset_dict.json").exists()
    )


def _decode(raw: bytes, doc_id: str, stats: CorpusStats) -> str | None:
    if b"\x00" in raw[:8192]:
        stats.skip("binary", doc_id)
        return None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        stats.skip("not_utf8", doc_id)
        return None
    if not text.strip():
        stats.skip("empty", doc_id)
        return None
    return text


def corpus_files(path: Path) -> list[Path]:
    """The text files of a folder corpus, sorted for reproducibility."""
    files = sorted(
        p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES and not p.name.startswith(".")
    )
    return files


def iter_documents(
    path: str | Path,
    *,
    field: str = "text",
    txt_mode: str = "file",
    stats: CorpusStats | None = None,
) -> Iterator[Document]:
    """Stream the usable documents of a corpus (see module docstring for formats)."""
    p = Path(path)
    st = stats if stats is not None else CorpusStats()
    if not p.exists():
        raise CorpusError(f"corpus {p} does not exist (expected a folder of .txt files, a .txt, .jsonl or .parquet file, or a saved Hugging Face dataset)")
    if _is_hf_dataset_dir(p):
        yield from _iter_hf(p, field, st)
    elif p.is_dir():
        files = corpus_files(p)
        if not files:
            raise CorpusError(f"corpus folder {p} holds no .txt files; put one document per .txt file there, or pass a .jsonl/.parquet file")
        for f in files:
            yield from _iter_txt(f, "file", st)
    elif p.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        yield from _iter_jsonl(p, field, st)
    elif p.suffix.lower() == ".parquet":
        yield from _iter_parquet(p, field, st)
    elif p.suffix.lower() in TEXT_SUFFIXES or p.suffix == "":
        yield from _iter_txt(p, txt_mode, st)
    else:
        raise CorpusError(f"corpus {p}: unsupported file type {p.suffix!r}; use .txt, .jsonl, .parquet, a folder of .txt files or a saved Hugging Face dataset")


def _iter_txt(p: Path, mode: str, st: CorpusStats) -> Iterator[Document]:
    if mode == "file":
        text = _decode(p.read_bytes(), str(p), st)
        if text is not None:
            st.read += 1
            yield Document(str(p), text)
        return
    if mode != "lines":
        raise CorpusError(f"txt_mode must be 'file' or 'lines', got {mode!r}")
    with p.open("rb") as f:
        for i, raw in enumerate(f, 1):
            text = _decode(raw.rstrip(b"\r\n"), f"{p}:{i}", st)
            if text is not None:
                st.read += 1
                yield Document(f"{p}:{i}", text)


def _iter_jsonl(p: Path, fld: str, st: CorpusStats) -> Iterator[Document]:
    with p.open("rb") as f:
        for i, raw in enumerate(f, 1):
            doc_id = f"{p}:{i}"
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                st.skip("bad_json", doc_id)
                if st.bad_json <= 3:
                    log.warning("%s: line %d is not valid JSON; skipped", p, i)
                continue
            if not isinstance(obj, dict) or fld not in obj:
                keys = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
                raise CorpusError(
                    f"{p}, line {i}: no field {fld!r} (found {keys}); pass the text field's name with --text-field"
                )
            text = obj[fld]
            if not isinstance(text, str) or not text.strip():
                st.skip("empty", doc_id)
                continue
            st.read += 1
            yield Document(doc_id, text)


def _iter_parquet(p: Path, fld: str, st: CorpusStats) -> Iterator[Document]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(p)
    except Exception as e:
        raise CorpusError(f"{p}: not a readable parquet file ({e})") from None
    if fld not in pf.schema_arrow.names:
        raise CorpusError(f"{p}: no column {fld!r} (columns: {pf.schema_arrow.names}); pass the text column with --text-field")
    row = 0
    for batch in pf.iter_batches(columns=[fld], batch_size=1024):
        for text in batch.column(0).to_pylist():
            row += 1
            if not isinstance(text, str) or not text.strip():
                st.skip("empty", f"{p}:{row}")
                continue
            st.read += 1
            yield Document(f"{p}:{row}", text)


def _iter_hf(p: Path, fld: str, st: CorpusStats) -> Iterator[Document]:
    import datasets

    ds = datasets.load_from_disk(str(p))
    if isinstance(ds, datasets.DatasetDict):
        split = "train" if "train" in ds else next(iter(ds))
        ds = ds[split]
    if fld not in ds.column_names:
        raise CorpusError(f"{p}: no column {fld!r} (columns: {ds.column_names}); pass the text column with --text-field")
    for row, text in enumerate(ds.select_columns([fld]).iter(batch_size=1024)):
        for j, t in enumerate(text[fld]):
            doc_id = f"{p}:{row * 1024 + j + 1}"
            if not isinstance(t, str) or not t.strip():
                st.skip("empty", doc_id)
                continue
            st.read += 1
            yield Document(doc_id, t)
