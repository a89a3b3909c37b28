"""One streaming corpus reader for every method.

Accepted corpora:
- a folder of ``.txt`` files (searched recursively, sorted): one document per file;
- a single ``.txt`` file: one document (``txt_mode="file"``) or one per line (``"lines"``);
- ``.jsonl`` / ``.json`` lines: one document per line, text under ``field``;
- ``.parquet``: one document per row, text in column ``field``;
- a folder written by ``datasets.Dataset.save_to_disk``: text in column ``field``.

Text is UTF-8 (a byte-order mark is dropped); UTF-16 and UTF-32 files that start with a byte-order
mark are decoded too. Documents that are empty, binary (a NUL byte), not UTF-8, unreadable, bad
JSON lines or JSON records without the text field are skipped and counted in ``CorpusStats``, never
a crash; a corpus where *no* record has the text field is an error naming the keys found.

Two views of the same reader: :func:`iter_document_streams` gives each document as a `DocStream`
whose text is decoded a block at a time as it is read (memory flat in the document's size: what
``sentkit prepare`` uses), and :func:`iter_documents` gives each document's whole text (memory
bounded by the largest single document).
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentkit.core.errors import SentkitError

log = logging.getLogger(__name__)

TEXT_SUFFIXES = (".txt", ".text")
READ_BYTES = 1 << 20  # a text file is read and decoded this many bytes at a time
ProgressFn = Callable[[int], None]  # called with the number of corpus bytes just read


@dataclass(frozen=True)
class Fix:
    """A change of settings that would fix an error: config keys and values, and what it gives.

    The CLI shows it as flags of the command the user ran (``--text-field body`` for ``prepare``,
    ``--set text_field=body`` for ``train``), so the suggestion works as printed."""

    settings: Mapping[str, Any]
    note: str = ""

    def plain(self) -> str:
        text = " ".join(f"{k}={v}" for k, v in self.settings.items())
        return f"{text} ({self.note})" if self.note else text


class CorpusError(SentkitError, ValueError):
    """The corpus cannot be read; the message names the path and the fix.

    `fixes` are alternative settings that would work; ``str()`` lists them as ``key=value``."""

    def __init__(self, message: str, *, fixes: Iterable[Fix] = ()) -> None:
        self.message = message
        self.fixes = tuple(fixes)
        super().__init__(message + (f"; set {' or '.join(f.plain() for f in self.fixes)}" if self.fixes else ""))


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
    no_field: int = 0
    unreadable: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)

    def skip(self, reason: str, doc_id: str) -> None:
        setattr(self, reason, getattr(self, reason) + 1)
        ex = self.examples.setdefault(reason, [])
        if len(ex) < 3:
            ex.append(doc_id)

    @property
    def skipped(self) -> int:
        return self.empty + self.binary + self.not_utf8 + self.bad_json + self.no_field + self.unreadable

    def skipped_text(self) -> str:
        """``3 empty, 1 binary, ...`` for a summary line (reasons with a count of zero left out,
        except the first four, which are always shown)."""
        names = {
            "empty": "empty",
            "binary": "binary",
            "not_utf8": "not UTF-8",
            "bad_json": "bad JSON lines",
            "no_field": "without the text field",
            "unreadable": "unreadable",
        }
        always = ("empty", "binary", "not_utf8", "bad_json")
        return ", ".join(f"{getattr(self, k)} {v}" for k, v in names.items() if k in always or getattr(self, k))

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def _is_hf_dataset_dir(p: Path) -> bool:
    return p.is_dir() and (
        (p / "dataset_info.json").exists() or (p / "state.json").exists() or (p / "dataset_dict.json").exists()
    )


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def bom_encoding(head: bytes) -> str | None:
    """``"utf-16"`` / ``"utf-32"`` when `head` starts with that byte-order mark, else None."""
    for bom, enc in _BOMS:  # UTF-32 LE first: its mark starts with UTF-16 LE's
        if head.startswith(bom):
            return enc
    return None


def _decode(raw: bytes, doc_id: str, stats: CorpusStats) -> str | None:
    wide = bom_encoding(raw[:4])
    try:
        if wide is not None:
            text = raw.decode(wide)
        elif b"\x00" in raw[:8192]:
            stats.skip("binary", doc_id)
            return None
        else:
            text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        stats.skip("not_utf8", doc_id)
        return None
    if "\x00" in text:
        stats.skip("binary", doc_id)
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


class SkipDocument(SentkitError):
    """Raised by `DocStream.chunks` when the document turns out to be unusable part-way (not UTF-8,
    binary, empty, unreadable); it is already counted in the `CorpusStats`. Text it gave before is to
    be dropped. Caught inside prepare (the document is skipped), so it never reaches a user."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass
class DocStream:
    """One document whose text is read on demand: iterate `chunks` once, in order; their
    concatenation is the document's text. A `SkipDocument` from it means the document is skipped."""

    id: str
    chunks: Iterator[str]


def corpus_size(path: str | Path, *, txt_mode: str = "file") -> int | None:
    """The bytes a plain-text or JSON-lines corpus holds (what the reader's progress callback
    counts up to), or None for one whose reading is counted in documents (Parquet, a saved dataset)."""
    p = Path(path)
    try:
        if _is_hf_dataset_dir(p):
            return None
        if p.is_dir():
            return sum(f.stat().st_size for f in corpus_files(p))
        if p.suffix.lower() == ".parquet":
            return None
        return p.stat().st_size
    except OSError:
        return None


def iter_documents(
    path: str | Path,
    *,
    field: str = "text",
    txt_mode: str = "file",
    stats: CorpusStats | None = None,
) -> Iterator[Document]:
    """Stream the usable documents of a corpus (see module docstring for formats), each whole."""
    for doc in iter_document_streams(path, field=field, txt_mode=txt_mode, stats=stats):
        try:
            text = "".join(doc.chunks)
        except SkipDocument:
            continue
        yield Document(doc.id, text)


def iter_document_streams(
    path: str | Path,
    *,
    field: str = "text",
    txt_mode: str = "file",
    stats: CorpusStats | None = None,
    progress: ProgressFn | None = None,
) -> Iterator[DocStream]:
    """The documents of a corpus as `DocStream` s (text decoded a block at a time), in corpus order.

    A document is counted in ``stats.read`` (or as skipped) when its chunks have been read to the end.
    `progress` is called with the bytes read as they are read (plain-text and JSON-lines corpora)."""
    p = Path(path)
    st = stats if stats is not None else CorpusStats()
    if not p.exists():
        raise CorpusError(
            f"corpus {p} does not exist (expected a folder of .txt files, a .txt, .jsonl or .parquet file, "
            "or a saved Hugging Face dataset)"
        )
    if _is_hf_dataset_dir(p):
        yield from _whole(_iter_hf(p, field, st))
    elif p.is_dir():
        files = corpus_files(p)
        if not files:
            raise CorpusError(
                f"corpus folder {p} holds no .txt files; put one document per .txt file there, "
                "or pass a .jsonl/.parquet file"
            )
        yield from iter_file_streams(files, stats=st, progress=progress)
    elif p.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        yield from _whole(_iter_jsonl(p, field, st, progress))
    elif p.suffix.lower() == ".parquet":
        yield from _whole(_iter_parquet(p, field, st))
    elif p.suffix.lower() in TEXT_SUFFIXES or p.suffix == "":
        yield from _iter_txt(p, txt_mode, st, progress)
    else:
        raise CorpusError(
            f"corpus {p}: unsupported file type {p.suffix!r}; use .txt, .jsonl, .parquet, a folder of .txt files "
            "or a saved Hugging Face dataset"
        )


def iter_file_streams(
    files: Iterable[Path], *, stats: CorpusStats, progress: ProgressFn | None = None
) -> Iterator[DocStream]:
    """The documents of these files of a folder corpus (one per file, `corpus_files` order), as
    `iter_document_streams` reads a folder: a file that cannot be read is skipped and counted."""
    for f in files:
        yield DocStream(str(f), _file_chunks(f, str(f), stats, progress, folder=True))


def _whole(docs: Iterator[Document]) -> Iterator[DocStream]:
    for d in docs:
        yield DocStream(d.id, iter((d.text,)))


def _file_chunks(f: Path, doc_id: str, st: CorpusStats, progress: ProgressFn | None, *, folder: bool) -> Iterator[str]:
    """The decoded text of file `f`, a block at a time, by the rules of `_decode` (the same text,
    the same reason to skip). An unreadable file of a folder is skipped; a single file's OS error
    is raised."""
    try:
        with f.open("rb") as fh:
            head = fh.read(max(READ_BYTES, 8192))  # the binary check looks at the first 8192 bytes
            wide = bom_encoding(head[:4])
            decoder = codecs.getincrementaldecoder(wide or "utf-8-sig")("strict")
            if wide is None and b"\x00" in head[:8192]:
                st.skip("binary", doc_id)
                raise SkipDocument("binary")
            nul, blank = False, True
            raw = head
            while True:
                final = not raw
                try:
                    text = decoder.decode(raw, final=final)
                except UnicodeDecodeError:
                    st.skip("not_utf8", doc_id)
                    raise SkipDocument("not_utf8") from None
                if progress is not None and raw:
                    progress(len(raw))
                if not nul and "\x00" in text:
                    nul = True  # binary, unless a later byte is not UTF-8 (that reason comes first)
                if not nul and text:
                    if blank and text.strip():
                        blank = False
                    yield text
                if final:
                    break
                raw = fh.read(READ_BYTES)
    except OSError as e:
        if not folder:
            raise
        st.skip("unreadable", doc_id)
        if st.unreadable <= 3:
            log.warning("%s: cannot read (%s); skipped", f, e.strerror or e)
        raise SkipDocument("unreadable") from None
    if nul:
        st.skip("binary", doc_id)
        raise SkipDocument("binary")
    if blank:
        st.skip("empty", doc_id)
        raise SkipDocument("empty")
    st.read += 1


_LINES_HINT_MIN = 200  # newlines in the first block that, with no blank line, look like one document per line
_LONG_LINE = 2000  # bytes: a median line this long, with no blank line, looks like one document per line too
_LONG_LINES_MIN = 3  # ... when the first block holds at least this many whole lines


def looks_like_lines(head: bytes) -> bool:
    """Whether the start of a single .txt looks like one document per line (DeCLUTR's format): not one
    blank line (a book has blank lines between its paragraphs) and either many lines (short
    documents) or long ones (DeCLUTR's documents are thousands of words each: the median of the whole
    lines is at least `_LONG_LINE` bytes, where hard-wrapped prose has lines of 60 to 80 characters and
    a paragraph per line rarely averages 2000)."""
    import re

    if re.search(rb"\n[ \t\r]*\n", head) is not None:
        return False
    if head.count(b"\n") >= _LINES_HINT_MIN:
        return True
    lines = head.split(b"\n")[:-1]  # the whole lines (the last piece runs past the block, or is empty)
    return len(lines) >= _LONG_LINES_MIN and sorted(map(len, lines))[len(lines) // 2] >= _LONG_LINE


def _iter_txt(p: Path, mode: str, st: CorpusStats, progress: ProgressFn | None) -> Iterator[DocStream]:
    if mode == "file":
        with p.open("rb") as fh:
            head = fh.read(READ_BYTES)
        # A hint, not a switch: txt_mode "file" is a setting the user may have chosen, and a store
        # records it (a paragraph per line with no blank line is prose too, and stays one document).
        if looks_like_lines(head):
            log.warning(
                "%s is read as ONE document (txt_mode=file), but its lines are many or long and no blank "
                "line separates them: DeCLUTR's format is one document per line; to read it so, pass "
                "--txt-mode lines",
                p,
            )
        yield DocStream(str(p), _file_chunks(p, str(p), st, progress, folder=False))
        return
    if mode != "lines":
        raise CorpusError(f"txt_mode must be 'file' or 'lines', got {mode!r}")
    with p.open("rb") as f:
        for i, raw in enumerate(f, 1):
            if progress is not None:
                progress(len(raw))
            text = _decode(raw.rstrip(b"\r\n"), f"{p}:{i}", st)
            if text is not None:
                st.read += 1
                yield DocStream(f"{p}:{i}", iter((text,)))


def guess_text_field(keys: Counter[str]) -> str | None:
    """The key whose values were most often non-empty strings (the likely text field)."""
    return keys.most_common(1)[0][0] if keys else None


def _field_fixes(string_keys: Counter[str]) -> list[Fix]:
    guess = guess_text_field(string_keys)
    return [Fix({"text_field": guess})] if guess else []


def _iter_jsonl(p: Path, fld: str, st: CorpusStats, progress: ProgressFn | None = None) -> Iterator[Document]:
    kept = missing = 0
    keys_seen: set[str] = set()
    string_keys: Counter[str] = Counter()
    first_missing = 0
    with p.open("rb") as f:
        for i, raw in enumerate(f, 1):
            doc_id = f"{p}:{i}"
            if progress is not None:
                progress(len(raw))
            if i == 1 and raw.startswith(codecs.BOM_UTF8):  # json.loads refuses a byte-order mark
                raw = raw[len(codecs.BOM_UTF8) :]
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
                missing += 1
                first_missing = first_missing or i
                if isinstance(obj, dict) and len(keys_seen) < 50:
                    keys_seen.update(obj)
                    string_keys.update(k for k, v in obj.items() if isinstance(v, str) and v.strip())
                st.skip("no_field", doc_id)
                if st.no_field <= 3 and kept:
                    log.warning("%s, line %d: no field %r; skipped", p, i, fld)
                continue
            text = obj[fld]
            if not isinstance(text, str) or not text.strip():
                st.skip("empty", doc_id)
                continue
            kept += 1
            st.read += 1
            yield Document(doc_id, text)
    if missing and not kept:
        found = sorted(keys_seen) if keys_seen else "no JSON objects"
        raise CorpusError(
            f"{p}: no record has the text field {fld!r} ({missing} records, the first on line {first_missing}; "
            f"keys found: {found})",
            fixes=_field_fixes(string_keys),
        )
    if missing:
        log.warning("%s: %d of %d records have no field %r; they were skipped", p, missing, missing + kept, fld)


def _is_string_type(t: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _no_column(p: Path, fld: str, columns: list[str], string_columns: list[str]) -> CorpusError:
    return CorpusError(
        f"{p}: no column {fld!r} (columns: {columns})",
        fixes=[Fix({"text_field": string_columns[0]})] if string_columns else [],
    )


def _iter_parquet(p: Path, fld: str, st: CorpusStats) -> Iterator[Document]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(p)
    except OSError as e:
        if e.errno is not None:
            raise  # permission denied and the like: the OS error path reports it
        raise CorpusError(f"{p}: not a readable parquet file ({e})") from None
    except Exception as e:
        raise CorpusError(f"{p}: not a readable parquet file ({e})") from None
    if fld not in pf.schema_arrow.names:
        raise _no_column(p, fld, pf.schema_arrow.names, [f.name for f in pf.schema_arrow if _is_string_type(f.type)])
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

    try:
        ds = datasets.load_from_disk(str(p))
    except (FileNotFoundError, ValueError, json.JSONDecodeError) as e:
        raise CorpusError(f"{p}: not a readable saved Hugging Face dataset ({e})") from None
    if isinstance(ds, datasets.DatasetDict):
        split = "train" if "train" in ds else next(iter(ds))
        ds = ds[split]
    if fld not in ds.column_names:
        strings = [k for k, v in ds.features.items() if getattr(v, "dtype", None) in ("string", "large_string")]
        raise _no_column(p, fld, ds.column_names, strings)
    for row, text in enumerate(ds.select_columns([fld]).iter(batch_size=1024)):
        for j, t in enumerate(text[fld]):
            doc_id = f"{p}:{row * 1024 + j + 1}"
            if not isinstance(t, str) or not t.strip():
                st.skip("empty", doc_id)
                continue
            st.read += 1
            yield Document(doc_id, t)
