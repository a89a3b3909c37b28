"""Prepared token store: a corpus tokenized once into memory-mapped arrays.

Layout of a store directory::

    tokens.bin   uint32 token ids of all kept documents, back to back
    offsets.npy  int64 [num_docs + 1], document i is tokens[offsets[i]:offsets[i+1]]
    meta.json    tokenizer fingerprint, length rule, what was kept and skipped
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.data.corpus import CorpusError, CorpusStats, Document, iter_documents

log = logging.getLogger(__name__)

STORE_FORMAT = "sentkit-token-store"
STORE_VERSION = 1


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A short hash that changes whenever the tokenizer's vocabulary or rules change."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    blob = backend.to_str() if backend is not None else json.dumps(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:16]


def is_store(path: str | Path) -> bool:
    meta = Path(path) / "meta.json"
    if not meta.is_file():
        return False
    try:
        return bool(json.loads(meta.read_text()).get("format") == STORE_FORMAT)
    except (json.JSONDecodeError, OSError):
        return False


@dataclass
class PrepareReport:
    documents_read: int = 0
    kept: int = 0
    too_short: int = 0
    pieces_from_splits: int = 0
    tokens_kept: int = 0
    seconds: float = 0.0
    corpus: dict[str, Any] = field(default_factory=dict)

    def summary(self, min_tokens: int) -> str:
        c = self.corpus
        lines = [
            f"read {self.documents_read} documents; kept {self.kept} ({self.tokens_kept:,} tokens)",
            f"skipped: {self.too_short} shorter than {min_tokens} tokens, {c.get('empty', 0)} empty, "
            f"{c.get('binary', 0)} binary, {c.get('not_utf8', 0)} not UTF-8, {c.get('bad_json', 0)} bad JSON lines",
        ]
        if self.pieces_from_splits:
            lines.append(f"long documents were split into {self.pieces_from_splits} pieces")
        lines.append(f"took {self.seconds:.1f} s")
        return "\n".join(lines)


def _batches(docs: Iterator[Document], size: int) -> Iterator[list[Document]]:
    batch: list[Document] = []
    for d in docs:
        batch.append(d)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def prepare_store(
    corpus: str | Path,
    tokenizer: Any,
    out: str | Path,
    *,
    min_doc_tokens: int,
    max_doc_tokens: int | None = None,
    text_field: str = "text",
    txt_mode: str = "file",
    tokenizer_name: str = "",
    show_progress: bool = True,
) -> PrepareReport:
    """Tokenize `corpus` once and write a store at `out` (atomically). Returns what was kept/skipped.

    A document is kept when it has at least `min_doc_tokens` tokens (the paper's rule is
    num_anchors * max_span_len * 2). With `max_doc_tokens`, longer documents are cut into pieces of
    at most that many tokens, each kept if it passes the rule."""
    from tqdm.auto import tqdm

    from sentkit.models.hub import quiet_transformers

    if max_doc_tokens is not None and max_doc_tokens < min_doc_tokens:
        raise CorpusError(
            f"max_doc_tokens ({max_doc_tokens}) is below the minimum document length ({min_doc_tokens}): "
            "no piece could be kept; raise max_doc_tokens"
        )
    out = Path(out)
    tmp = out.with_name(f".{out.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    t0 = time.perf_counter()
    stats = CorpusStats()
    rep = PrepareReport()
    offsets = [0]
    bar = tqdm(desc="prepare", unit="doc", disable=not show_progress)
    with open(tmp / "tokens.bin", "wb") as fout:
        for batch in _batches(iter_documents(corpus, field=text_field, txt_mode=txt_mode, stats=stats), 32):
            with quiet_transformers():
                ids = tokenizer([d.text for d in batch], add_special_tokens=False)["input_ids"]
            for seq in ids:
                rep.documents_read += 1
                arr = np.asarray(seq, dtype=np.uint32)
                pieces = [arr]
                if max_doc_tokens is not None and len(arr) > max_doc_tokens:
                    pieces = [arr[s : s + max_doc_tokens] for s in range(0, len(arr), max_doc_tokens)]
                    rep.pieces_from_splits += len(pieces)
                for piece in pieces:
                    if len(piece) < min_doc_tokens:
                        rep.too_short += 1
                        continue
                    fout.write(piece.tobytes())
                    offsets.append(offsets[-1] + len(piece))
                    rep.kept += 1
            bar.update(len(batch))
    bar.close()
    rep.tokens_kept = offsets[-1]
    rep.corpus = stats.as_dict()
    rep.seconds = time.perf_counter() - t0
    if rep.kept == 0:
        shutil.rmtree(tmp)
        raise CorpusError(
            f"corpus {corpus}: no usable document. A document needs at least {min_doc_tokens} tokens "
            f"(num_anchors * max_span_len * 2); read {rep.documents_read}, {rep.too_short} too short, "
            f"{stats.skipped} unreadable. Relax the rule with smaller spans (--set max_span_len=64 "
            "min_span_len=8) or --set num_anchors=1, or bring longer documents."
        )
    np.save(tmp / "offsets.npy", np.asarray(offsets, dtype=np.int64))
    meta = {
        "format": STORE_FORMAT,
        "version": STORE_VERSION,
        "corpus": str(corpus),
        "tokenizer": tokenizer_name,
        "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer),
        "min_doc_tokens": min_doc_tokens,
        "max_doc_tokens": max_doc_tokens,
        "text_field": text_field,
        "num_docs": rep.kept,
        "num_tokens": rep.tokens_kept,
        "report": {k: v for k, v in rep.__dict__.items()},
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return rep


class TokenStore:
    """Read-only view of a prepared store; documents are memory-mapped uint32 arrays."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not is_store(self.path):
            raise CorpusError(f"{self.path} is not a prepared store (run `sentkit prepare` first)")
        self.meta: dict[str, Any] = json.loads((self.path / "meta.json").read_text())
        self.offsets = np.load(self.path / "offsets.npy")
        n_tokens = int(self.offsets[-1])
        self.tokens = np.memmap(self.path / "tokens.bin", dtype=np.uint32, mode="r", shape=(n_tokens,))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def doc(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    def check_tokenizer(self, tokenizer: Any, min_doc_tokens: int) -> None:
        """Fail clearly when the store was made with another tokenizer or a laxer length rule."""
        fp = tokenizer_fingerprint(tokenizer)
        if self.meta.get("tokenizer_fingerprint") != fp:
            raise CorpusError(
                f"store {self.path} was prepared with another tokenizer ({self.meta.get('tokenizer')!r}); "
                "run `sentkit prepare` again with this model"
            )
        if int(self.meta.get("min_doc_tokens", 0)) < min_doc_tokens:
            short = int((self.lengths() < min_doc_tokens).sum())
            if short:
                raise CorpusError(
                    f"store {self.path} keeps documents of {self.meta.get('min_doc_tokens')} tokens but the "
                    f"span settings need {min_doc_tokens}; {short} documents are too short. Prepare again "
                    "with the same span settings"
                )
