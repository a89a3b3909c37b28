"""Nearest-neighbour sentence search for any encoder (the paper's Table 5 comparison).

An index holds every sentence of a corpus and its L2-normalised embedding (float32, or a
SciPy CSR matrix for encoders with ``encode_sparse`` such as TF-IDF). It is built once
and cached in a folder keyed by the corpus files (path, size, mtime), the model, the
sentence limit and the prompt. Exact search (:func:`exact_top_k`) scores blocks of queries x rows and
keeps a running top-k per query, so its memory is bounded whatever the number of queries and rows;
ties rank the lower row first, as a stable full sort would.

A prompted model (E5, BGE: sentence-transformers' ``prompts``) embeds the corpus with its document
prompt and the queries with its query prompt (`sentkit.core.interface.role_prompt_name`), as
sentence-transformers' ``encode_document`` / ``encode_query`` do.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.errors import InputError
from sentkit.core.identity import NEIGHBOURS_DIR, config_id, corpus_files_id, model_name_id
from sentkit.core.io import cache_writable
from sentkit.data.sentences import ReadReport, iter_document_sentences

log = logging.getLogger(__name__)

EMB_FILE, SPARSE_FILE, SENT_FILE, META_FILE = "embeddings.npy", "embeddings.npz", "sentences.txt", "meta.json"


def normalise_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero). [n, d] -> float32 [n, d]."""
    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return x / n


# Exact search scores QUERY_BLOCK queries x ROW_BLOCK rows at a time: the block and the selection's
# temporaries take about 17 bytes a score (~17 MiB at 256 x 4096), and a block of rows ROW_BLOCK x dim
# floats, whatever the number of queries and rows.
QUERY_BLOCK, ROW_BLOCK = 256, 4096


def spans(total: int, block: int) -> list[tuple[int, int]]:
    """``[0, total)`` cut into ceil(total / block) spans of near-equal length: past one block, each about
    half a block or more, never a one-row tail (BLAS would multiply it by another kernel)."""
    parts = -(-total // max(1, block))
    return [(i * total // parts, (i + 1) * total // parts) for i in range(parts)]


def block_best(scores: np.ndarray, k: int) -> np.ndarray:
    """Column numbers of the ``k`` best scores of each row, ascending; ties at the k-th score go to
    the lower column, NaN ranks last. scores: [b, r] -> int64 [b, min(k, r)]."""
    b, r = scores.shape
    if k >= r:
        return np.broadcast_to(np.arange(r, dtype=np.int64), (b, r))
    neg = -scores
    part = np.argpartition(neg, k - 1, axis=1)[:, :k]  # the k best in some order; a tie at the k-th: any of it
    chosen = np.take_along_axis(neg, part, axis=1)
    kth = chosen.max(axis=1, keepdims=True)  # NaN when a NaN was chosen
    nan = kth[:, 0] != kth[:, 0]
    split = (neg == kth).sum(axis=1) > (chosen == kth).sum(axis=1)  # a tie straddles the k-th place
    if nan.any():
        split[nan] = np.isnan(neg[nan]).sum(axis=1) > np.isnan(chosen[nan]).sum(axis=1)
    if split.any():  # those rows by a stable sort: the tie's lower columns
        part[split] = np.argsort(neg[split], axis=1, kind="stable")[:, :k]
    return np.sort(part, axis=1)


def merge_best(
    ids: np.ndarray, vals: np.ndarray, new_ids: np.ndarray, new_vals: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of a running top-k (``ids``/``vals`` [b, w], best first, ties by id) and a block's
    candidates (ids above all of ``ids``, ascending), best first, ties by id: a stable sort keeps both
    halves' order, and the running half comes first."""
    i = np.concatenate([ids, new_ids], axis=1)
    v = np.concatenate([vals, new_vals], axis=1)
    order = np.argsort(-v, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(i, order, axis=1), np.take_along_axis(v, order, axis=1)


def stream_top_k(
    m: int,
    n: int,
    k: int,
    rows: Callable[[int, int], Any],
    score: Callable[[Any, int, int], np.ndarray],
    *,
    query_block: int = QUERY_BLOCK,
    row_block: int = ROW_BLOCK,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of an [m, n] score matrix never held whole: ``rows(r0, r1)`` prepares a block of rows
    (once), ``score(block, q0, q1)`` gives its scores for queries q0:q1 ([q1 - q0, r1 - r0]); each
    block's best (:func:`block_best`) is merged into a running top-k per query (:func:`merge_best`).
    Returns (int64 [m, k'], float32 [m, k']), best first, ties by row, k' = min(k, n)."""
    k = max(0, min(int(k), n))
    ids = np.zeros((m, k), np.int64)
    vals: np.ndarray | None = None
    if k == 0 or m == 0:
        return ids, np.zeros((m, k), np.float32)
    w = 0  # the running top-k's width: min(k, rows seen)
    for r0, r1 in spans(n, row_block):
        block = rows(r0, r1)
        w1 = min(k, r1)
        for q0, q1 in spans(m, query_block):
            s = np.asarray(score(block, q0, q1))
            if vals is None:
                vals = np.zeros((m, k), s.dtype)
            best = block_best(s, k)
            ids[q0:q1, :w1], vals[q0:q1, :w1] = merge_best(
                ids[q0:q1, :w], vals[q0:q1, :w], best + r0, np.take_along_axis(s, best, axis=1), k
            )
        w = w1
    assert vals is not None
    return ids, vals.astype(np.float32, copy=False)


def top_k(
    scores: np.ndarray, k: int, *, query_block: int = QUERY_BLOCK, row_block: int = ROW_BLOCK
) -> tuple[np.ndarray, np.ndarray]:
    """Indices and values of the ``k`` largest scores per row, best first; ties rank the lower index
    first (a stable sort's order), NaN last. Selected a block at a time (:func:`stream_top_k`): no
    temporary of the matrix's size. scores: [m, n] -> (int64 [m, k'], float32 [m, k']) with k' = min(k, n)."""
    scores = np.atleast_2d(scores)
    return stream_top_k(
        scores.shape[0],
        scores.shape[1],
        k,
        lambda r0, r1: (r0, r1),
        lambda b, q0, q1: scores[q0:q1, b[0] : b[1]],
        query_block=query_block,
        row_block=row_block,
    )


def exact_top_k(
    queries: Any,
    rows: Any,
    k: int,
    *,
    normalise: bool = False,
    query_block: int = QUERY_BLOCK,
    row_block: int = ROW_BLOCK,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine top-k of unit-length ``queries`` [m, d] over ``rows`` [n, d]: dense (an array or a
    memory map, scaled to unit length a block at a time when ``normalise``), or CSR queries over CSR
    rows. Scored ``query_block`` queries x ``row_block`` rows at a time (:func:`stream_top_k`): memory
    bounded whatever m and n, the answer :func:`top_k` of the full score matrix."""
    sparse = not isinstance(rows, np.ndarray) and hasattr(rows, "tocsr")

    def block(r0: int, r1: int) -> Any:
        if sparse:
            return rows[r0:r1]
        return normalise_rows(rows[r0:r1]) if normalise else np.asarray(rows[r0:r1])

    def score(r: Any, q0: int, q1: int) -> np.ndarray:
        if sparse:
            return np.asarray((r @ queries[q0:q1].T).T.todense())
        return queries[q0:q1] @ r.T  # type: ignore[no-any-return]

    return stream_top_k(queries.shape[0], rows.shape[0], k, block, score, query_block=query_block, row_block=row_block)


def default_cache_dir(model: str | Path) -> Path:
    """``<model>/neighbours`` for a writable model folder, else ``$SENTKIT_CACHE`` or
    ``~/.cache/sentkit/neighbours``."""
    p = Path(model)
    if p.is_dir() and os.access(p, os.W_OK):
        return p / NEIGHBOURS_DIR
    base = os.environ.get("SENTKIT_CACHE") or str(Path.home() / ".cache" / "sentkit")
    return Path(base) / "neighbours"


@dataclass
class NeighbourIndex:
    """Sentences and their normalised embeddings (dense [n, d] float32 or CSR)."""

    sentences: list[str]
    embeddings: Any
    sparse: bool = False
    ann: Any = field(
        default=None, repr=False, compare=False
    )  # sentkit.retrieval.index.attach: the approximate index past its size

    def __len__(self) -> int:
        return len(self.sentences)

    def search(self, queries: Any, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """Cosine top-k for query embeddings (dense [m, d] or CSR): (idx [m, k], scores)."""
        if self.ann is not None and not self.sparse:
            return self.ann.search(queries, k)  # type: ignore[no-any-return]
        if self.sparse:
            import scipy.sparse as sp

            q = sp.csr_matrix(queries, dtype=np.float32)
            norms = np.sqrt(np.asarray(q.multiply(q).sum(axis=1)).ravel())
            norms[norms == 0] = 1.0
            return exact_top_k((sp.diags(1.0 / norms) @ q).tocsr(), self.embeddings, k)
        return exact_top_k(normalise_rows(np.atleast_2d(queries)), self.embeddings, k)

    def save(self, d: Path, meta: dict[str, Any]) -> None:
        from sentkit.core.io import atomic_open, atomic_write_text

        d.mkdir(parents=True, exist_ok=True)
        if self.sparse:
            import scipy.sparse as sp

            with atomic_open(d / SPARSE_FILE, "wb") as f:
                sp.save_npz(f, self.embeddings)
        else:
            with atomic_open(d / EMB_FILE, "wb") as f:
                np.save(f, self.embeddings)
        atomic_write_text(d / SENT_FILE, "\n".join(self.sentences) + "\n")
        atomic_write_text(d / META_FILE, json.dumps({**meta, "sparse": self.sparse, "n": len(self)}, indent=2) + "\n")

    @classmethod
    def load(cls, d: Path) -> NeighbourIndex:
        """Load a saved index; ValueError when its files do not agree (a damaged cache)."""
        meta = json.loads((d / META_FILE).read_text(encoding="utf-8"))
        sentences = (d / SENT_FILE).read_text(encoding="utf-8").split("\n")[:-1]
        if meta.get("sparse"):
            import scipy.sparse as sp

            emb: Any = sp.load_npz(d / SPARSE_FILE).tocsr()
        else:
            emb = np.load(d / EMB_FILE, mmap_mode="r", allow_pickle=False)
        if emb.ndim != 2 or emb.shape[0] != len(sentences) or meta.get("n") != len(sentences):
            raise InputError(f"{emb.shape[0]} embeddings for {len(sentences)} sentences (meta says {meta.get('n')})")
        if not meta.get("sparse") and emb.dtype != np.float32:
            raise InputError(f"embeddings are {emb.dtype}, not float32")
        return cls(sentences, emb, bool(meta.get("sparse")))


def corpus_sentences(corpus: str | Path, max_sentences: int | None = None, min_words: int = 3) -> list[str]:
    """Raw sentences of a corpus in order (single-line, at least ``min_words`` words); a
    CorpusError with the read/kept/skipped counts when there is none."""
    report = ReadReport(str(corpus))
    out: list[str] = []
    for sents in iter_document_sentences(corpus, stats=report.files):
        kept = [s for s in sents if len(s.split()) >= min_words]
        report.add_document(len(kept))
        out += kept
        if max_sentences is not None and len(out) >= max_sentences:
            del out[max_sentences:]
            break
    report.sentences = len(out)  # the sentences kept, after the cut at max_sentences
    report.tokens = sum(len(s.split()) for s in out)  # whitespace-separated words of the kept sentences
    log.info("corpus %s:\n%s", corpus, report.summary())
    if not out:
        raise report.error(f"no sentence of at least {min_words} words to search", "bring documents of plain text")
    return out


def _load_cached(d: Path) -> NeighbourIndex | None:
    """The index cached in ``d``, or None (with a warning) when it is missing or damaged."""
    if not (d / META_FILE).is_file():
        return None
    try:
        return NeighbourIndex.load(d)
    except (OSError, ValueError, EOFError, UnicodeDecodeError) as e:  # json errors are ValueErrors
        log.warning("neighbour index cache %s is damaged (%s); rebuilding it", d, e)
        return None


def _save_cached(index: NeighbourIndex, d: Path, meta: dict[str, Any]) -> None:
    """Cache the index in ``d``; on a full disk or the like warn and go on without a cache."""
    from sentkit.core.io import describe_os_error

    try:
        index.save(d, meta)
    except OSError as e:
        log.warning(
            "cannot cache the neighbour index in %s (%s); continuing without the cache", d, describe_os_error(e)
        )


def side_prompt(
    encoder: Any, role: str, *, prompt_name: str | None = None, prompt: str | None = None
) -> dict[str, Any]:
    """The prompt arguments of one side of a search: `prompt_name` / `prompt` when given, else the
    encoder's prompt for `role` ("query" or "document")."""
    from sentkit.core.interface import role_prompt_name

    if prompt_name is None and prompt is None:
        prompt_name = role_prompt_name(encoder, role)
    return {"prompt_name": prompt_name, "prompt": prompt}


def encode_side(
    encoder: Any, texts: list[str], *, sparse: bool = False, prompt_name: str | None = None, prompt: str | None = None
) -> Any:
    """`texts` embedded with a prompt (`sentkit.core.interface.encode_with_prompt`); ``sparse``: through the
    encoder's ``encode_sparse``, the prompt's text prepended."""
    from sentkit.core.interface import encode_with_prompt, prompt_used

    if not sparse:
        return encode_with_prompt(encoder, texts, prompt_name=prompt_name, prompt=prompt)
    text = prompt_used(encoder, prompt_name=prompt_name, prompt=prompt)
    return encoder.encode_sparse([text + t for t in texts] if text else texts)


def build_index(
    encoder: Any,
    sentences: list[str],
    *,
    batch_size: int = 4096,
    progress: bool = True,
    prompt_name: str | None = None,
    prompt: str | None = None,
) -> NeighbourIndex:
    """Embed ``sentences`` in batches (sparse when the encoder has ``encode_sparse``) with the given
    prompt (none given: the encoder's document prompt)."""
    from tqdm.auto import tqdm

    from sentkit.core.interface import check_embeddings

    side = side_prompt(encoder, "document", prompt_name=prompt_name, prompt=prompt)
    sparse = hasattr(encoder, "encode_sparse")
    parts: list[Any] = []
    for i in tqdm(range(0, len(sentences), batch_size), desc="indexing", unit=" batch", disable=not progress):
        batch = sentences[i : i + batch_size]
        if sparse:
            parts.append(encode_side(encoder, batch, sparse=True, **side))
        else:
            parts.append(normalise_rows(check_embeddings(encode_side(encoder, batch, **side), len(batch))))
    if sparse:
        import scipy.sparse as sp

        emb: Any = sp.vstack(parts).tocsr() if parts else sp.csr_matrix((0, 0), dtype=np.float32)
    else:
        emb = np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)
    return NeighbourIndex(sentences, emb, sparse)


def get_index(
    model: str | Path,
    corpus: str | Path,
    encoder: Any = None,
    *,
    cache_dir: str | Path | None = None,
    max_sentences: int | None = None,
    rebuild: bool = False,
    progress: bool = True,
    prompt_name: str | None = None,
    prompt: str | None = None,
    settings: dict[str, Any] | None = None,
) -> tuple[NeighbourIndex, bool, Path]:
    """Load the cached index of (model, corpus) or build and cache it, the corpus embedded with
    `prompt_name` / `prompt` (neither: the encoder's document prompt). Returns (index, built_now,
    index folder). ``encoder`` defaults to ``sentkit.load(model, **settings)``; `settings` (the
    `sentkit.load` settings it was loaded with: pooling, attention) are part of the key."""
    from sentkit.core.interface import prompt_used

    if encoder is None:  # its prompts are part of the key
        from sentkit.models.loading import load

        encoder = load(str(model), **(settings or {}))
    side = side_prompt(encoder, "document", prompt_name=prompt_name, prompt=prompt)
    key: dict[str, Any] = {
        "model": model_name_id(model),
        "corpus": corpus_files_id(corpus),
        "max_sentences": max_sentences,
    }
    text = prompt_used(encoder, **side)
    if text:  # a prompted index has a key of its own (an unprompted one keeps the key it always had)
        key["prompt"] = {"text": text, "include_prompt": bool(getattr(encoder, "include_prompt", True))}
    from sentkit.models.loading import used_settings

    settings = used_settings(encoder, settings or {})  # the precision the encoder computes in (fp32: no key)
    if settings:  # so has a model loaded with another pooling, attention or precision
        key["settings"] = dict(sorted(settings.items()))
    d = Path(cache_dir) if cache_dir is not None else default_cache_dir(model)
    d = d / config_id(key, 20)
    cached = None if rebuild else _load_cached(d)
    if cached is not None:
        return cached, False, d
    writable = cache_writable(d, what="neighbour index cache", logger=log)
    t = time.perf_counter()
    sentences = corpus_sentences(corpus, max_sentences)
    index = build_index(encoder, sentences, progress=progress, **side)
    secs = time.perf_counter() - t
    log.info("indexed %d sentences in %.1fs (%.0f sentences/s)", len(index), secs, len(index) / max(secs, 1e-9))
    if writable:
        _save_cached(index, d, {**key, "build_seconds": secs})
    return index, True, d
