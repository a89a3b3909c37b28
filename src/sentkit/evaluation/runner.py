"""`evaluate(encoder, tasks=..., preset=...)`: load tasks, encode each unique sentence once
(with an on-disk cache), run SentEval's protocol per task, return a results dict.

A prompted encoder (sentence-transformers' ``prompts``) encodes every task with its default prompt,
except the queries and documents of retrieval tasks, which get its query and document prompts
(`sentkit.core.interface.role_prompt_name`); each prompt has its own embedding cache, and the results
record the prompt texts under ``model.prompts``."""

from __future__ import annotations

import logging
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.config import to_dict
from sentkit.core.errors import MissingInputError, SentkitError
from sentkit.core.identity import fingerprint as own_fingerprint
from sentkit.core.identity import with_precision
from sentkit.core.interface import as_encoder, check_embeddings
from sentkit.core.registry import Registry
from sentkit.evaluation import protocols as P
from sentkit.evaluation.cache import EmbeddingCache, default_cache_root
from sentkit.evaluation.config import EvalConfig, make_config
from sentkit.evaluation.data import size_mismatches
from sentkit.evaluation.progress import EvalProgress
from sentkit.evaluation.tasks import (
    TaskData,
    TaskDataError,
    download_hint,
    expand_tasks,
    find_task,
    get_task,
    load_task,
    resolve_data_dir,
)

logger = logging.getLogger(__name__)


NO_TASKS = "none"  # `tasks` naming no SentEval task (MTEB tasks only)


class EncoderOutputError(SentkitError, ValueError):
    """The encoder returned the wrong shape, NaN or inf, or raised."""


class EvaluationInterrupted(KeyboardInterrupt):
    """Ctrl-C during `evaluate`: `.results` is the results dict of the tasks finished so far (the
    others are listed under `errors` as interrupted)."""

    def __init__(self, results: dict[str, Any]) -> None:
        super().__init__("interrupted")
        self.results = results


# ---------------------------------------------------------------------------------------------
# Embedding store: every unique sentence encoded once per run
# ---------------------------------------------------------------------------------------------
@dataclass
class EmbeddingStore:
    encode: Callable[[list[str]], Any]
    batch_size: int
    cache: EmbeddingCache | None = None
    progress: EvalProgress | None = None
    rows: dict[str, int] = field(default_factory=dict)
    chunks: list[np.ndarray] = field(default_factory=list)
    n_encoded: int = 0
    n_cached: int = 0
    n_requested: int = 0
    n_checked: int = 0  # cached sentences encoded again to check their shard
    encode_s: float = 0.0
    dim: int | None = None
    _matrix: np.ndarray | None = None
    sides: dict[str, EmbeddingStore] = field(default_factory=dict)  # role -> the store of its prompt
    # whole vectors kept (and cached) and the model's own made from them as they are read (whole_vectors: a cut, codes)
    post: Callable[[np.ndarray], np.ndarray] | None = None
    float_post: Callable[[np.ndarray], np.ndarray] | None = None  # the float vectors codes are made of
    searcher: Any = None  # an encoder whose retrieval ranks by a search of its own (a binary search with rescoring)

    def side(self, role: str) -> EmbeddingStore:
        """The store of a retrieval side ("query", "document"): its own when its prompt differs."""
        return self.sides.get(role, self)

    def stores(self) -> list[EmbeddingStore]:
        """This store and those of the sides, each once."""
        return list({id(s): s for s in (self, *self.sides.values())}.values())

    def total(self, what: str) -> Any:
        """A counter (``encode_s``, ``n_encoded``, ...) summed over `stores`."""
        return sum(getattr(s, what) for s in self.stores())

    def _encode_batch(self, batch: list[str], what: str) -> np.ndarray:
        """The encoder's embeddings of `batch`, checked: [len(batch), dim] float32, finite, the same
        dim as before. Anything else (or an exception in the encoder) is an EncoderOutputError."""
        try:
            out = self.encode(batch)
        except Exception as e:
            raise EncoderOutputError(f"task {what}: encoder raised {type(e).__name__}: {e}") from e
        try:
            arr = check_embeddings(out, len(batch), what=f"task {what}: encoder")
        except (ValueError, TypeError) as e:
            raise EncoderOutputError(
                str(e) if str(e).startswith("task ") else f"task {what}: encoder output: {e}"
            ) from None
        if arr.shape[1] == 0:
            raise EncoderOutputError(f"task {what}: encoder returned embeddings of dim 0")
        if self.dim is not None and arr.shape[1] != self.dim:
            raise EncoderOutputError(f"task {what}: encoder returned dim {arr.shape[1]}, earlier batches {self.dim}")
        self.dim = int(arr.shape[1])
        return arr

    def _check_cache(self, texts: list[str], what: str) -> None:
        """Encode one sentence of every cache shard not checked yet; shards that disagree go."""
        assert self.cache is not None
        samples = self.cache.unverified(texts)
        if not samples:
            return
        sample_texts = list(samples.values())
        t0 = time.perf_counter()
        fresh = self._encode_batch(sample_texts, what)
        self.encode_s += time.perf_counter() - t0
        self.n_checked += len(sample_texts)
        for (shard, text), vec in zip(samples.items(), fresh):
            self.cache.settle(shard, vec, text)

    def ensure(self, texts: list[str], what: str) -> None:
        """Encode the texts not seen yet (cache first); errors name `what` (the task)."""
        self.n_requested += len(texts)
        unique = list(dict.fromkeys(texts))
        new = [t for t in unique if t not in self.rows]
        n_cached = 0
        if new and self.cache is not None:
            self._check_cache(new, what)
            found, emb = self.cache.lookup(new)
            if emb is not None:
                self._append([t for t, f in zip(new, found) if f], emb)
                n_cached = int(found.sum())
                self.n_cached += n_cached
            new = [t for t, f in zip(new, found) if not f]
        if self.progress is not None:
            self.progress.encode_start(what, len(new), n_cached, len(unique) - len(new) - n_cached)
        if not new:
            return
        order = sorted(range(len(new)), key=lambda i: len(new[i]))  # length-sorted batches
        t0 = time.perf_counter()
        outs: list[np.ndarray] = []
        for s in range(0, len(order), self.batch_size):
            batch = [new[i] for i in order[s : s + self.batch_size]]
            arr = self._encode_batch(batch, what)
            if not outs:  # every task that adds rows: all embeddings so far plus these must fit
                _check_memory(len(self.rows) + len(new), int(arr.shape[1]), what)
            outs.append(arr)
            if self.progress is not None:
                self.progress.encoded_batch(len(batch))
        emb = np.empty((len(new), self.dim or 0), dtype=np.float32)
        emb[np.array(order)] = np.concatenate(outs)
        self.encode_s += time.perf_counter() - t0
        self.n_encoded += len(new)
        if self.cache is not None:
            self.cache.add(new, emb)
        self._append(new, emb)

    def _append(self, texts: list[str], emb: np.ndarray) -> None:
        if self.dim is not None and emb.shape[1] != self.dim:
            raise EncoderOutputError(f"cached embeddings have dim {emb.shape[1]}, encoder {self.dim}")
        self.dim = int(emb.shape[1])
        base = sum(len(c) for c in self.chunks)
        self.chunks.append(emb)
        self._matrix = None
        for i, t in enumerate(texts):
            self.rows[t] = base + i

    def get(self, texts: list[str], *, floats: bool = False) -> np.ndarray:
        """[len(texts), dim] float32: the model's vectors; `floats`: the float vectors its codes are made of."""
        if self._matrix is None:
            self._matrix = np.concatenate(self.chunks) if self.chunks else np.zeros((0, 0), np.float32)
        rows = self._matrix[np.array([self.rows[t] for t in texts], dtype=np.int64)]
        step = self.float_post if floats else self.post
        return rows if step is None else np.asarray(step(rows), dtype=np.float32)

    def out_dim(self) -> int | None:
        """The size of the vectors `get` gives (`dim` is that of the vectors kept)."""
        if self.dim is None or self.post is None:
            return self.dim
        return int(self.post(np.ones((1, self.dim), np.float32)).shape[-1])


def available_memory() -> int | None:
    """Bytes of physical memory available now (None where the OS does not say)."""
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def _check_memory(n_rows: int, dim: int, what: str) -> None:
    """Refuse early, with the fix, when the embeddings would not fit (held twice: chunks + matrix)."""
    need = 2 * 4 * n_rows * dim
    have = available_memory()
    if have is not None and need > have:
        raise EncoderOutputError(
            f"task {what}: {n_rows:,} sentences x {dim:,} dims of float32 need ~{need / 2**30:.1f} GiB, more than "
            f"the {have / 2**30:.1f} GiB available; use an encoder with fewer dimensions (e.g. TF-IDF: "
            f"--set max_features=10000) or evaluate fewer tasks at a time (--tasks)"
        )


# ---------------------------------------------------------------------------------------------
# Per-kind task runners
# ---------------------------------------------------------------------------------------------
TaskRunner = Callable[[TaskData, EmbeddingStore, EvalConfig], dict[str, Any]]
RUNNERS: Registry[TaskRunner] = Registry("task kind")


class TaskKindRunner:
    """A kind of task beyond the built-in ones: a subclass names it (`kind`), scores a loaded task
    (`run`: the task's data, its embeddings (`emb.get(sentences) -> [n, dim]`) and the evaluation
    config -> the results dict saved for it) and reads the headline number off those results
    (`score`: 0-100, None when undefined). `@register_kind` on the subclass makes it a kind that
    `add_task` accepts; nothing else changes for a new kind."""

    kind: str = ""

    def run(self, data: TaskData, emb: EmbeddingStore, cfg: EvalConfig) -> dict[str, Any]:
        raise NotImplementedError

    def score(self, res: dict[str, Any]) -> float | None:
        raise NotImplementedError


def register_kind(cls: type[TaskKindRunner]) -> type[TaskKindRunner]:
    """Class decorator: a new kind of task, its runner in RUNNERS and its score reader beside it. A kind
    of sentkit's own is also named in `tasks.TaskKind` (so that `tasks.py` adds its tasks before this
    module is imported); it is registered here, once, like a plug-in's."""
    from sentkit.evaluation.tasks import KIND_SCORES, KINDS

    if not cls.kind or cls.kind in RUNNERS:
        raise ValueError(f"task kind {cls.kind!r} is empty or already registered")
    runner = cls()
    RUNNERS.add(cls.kind, runner.run)
    KINDS.add(cls.kind)
    KIND_SCORES[cls.kind] = runner.score
    return cls


def _counts(data: TaskData) -> dict[str, int]:
    return data.counts()


@RUNNERS.register("cv")
def _run_cv(data: TaskData, emb: EmbeddingStore, cfg: EvalConfig) -> dict[str, Any]:
    s = data.splits["all"]
    return P.inner_kfold(emb.get(s.a), s.y, data.nclasses, cfg)


def _features(emb: EmbeddingStore, s: Any, kind: str = "absdiff_prod") -> np.ndarray:
    if s.b is None:
        return emb.get(s.a)
    return P.pair_features(emb.get(s.a), emb.get(s.b), kind)


@RUNNERS.register("kfold")
def _run_kfold(data: TaskData, emb: EmbeddingStore, cfg: EvalConfig) -> dict[str, Any]:
    tr, te = data.splits["train"], data.splits["test"]
    res = P.kfold_then_test(_features(emb, tr), tr.y, _features(emb, te), te.y, data.nclasses, cfg)
    pred = res.pop("pred")
    spec = find_task(data.name)
    if spec is not None and spec.f1:
        res["f1"] = round(100 * P.f1_binary(te.y, pred), 2)
        res["acc_f1_mean"] = (res["acc"] + res["f1"]) / 2
    return res


@RUNNERS.register("split")
def _run_split(data: TaskData, emb: EmbeddingStore, cfg: EvalConfig) -> dict[str, Any]:
    spec = find_task(data.name)  # the task's quirks: SNLI's features and no L2 search, WC's LR
    kind = spec.features if spec is not None else "absdiff_prod"
    tr, dv, te = data.splits["train"], data.splits["dev"], data.splits["test"]
    return P.split_classifier(
        _features(emb, tr, kind),
        tr.y,
        _features(emb, dv, kind),
        dv.y,
        _features(emb, te, kind),
        te.y,
        data.nclasses,
        cfg,
        noreg=spec is not None and spec.noreg,
        nhid=None if spec is None else spec.nhid,
    )


@RUNNERS.register("relatedness")
def _run_relatedness(data: TaskData, emb: EmbeddingStore, cfg: EvalConfig) -> dict[str, Any]:
    tr, dv, te = data.splits["train"], data.splits["dev"], data.splits["test"]
    res = P.relatedness(_features(emb, tr), tr.y, _features(emb, dv), dv.y, _features(emb, te), te.y, cfg)
    assert te.b is not None
    cos = P.sts_scores({"test": (emb.get(te.a), emb.get(te.b), te.y)}, {"test": P.pair_lengths(te.a, te.b)})
    res["unsupervised"] = {
        "pearson": cos["test"]["pearson"],
        "spearman": cos["test"]["spearman"],
        "by_length": cos["all"]["by_length"],
    }
    return res


@RUNNERS.register("sts")
def _run_sts(data: TaskData, emb: EmbeddingStore, cfg: EvalConfig) -> dict[str, Any]:
    subsets, lengths = {}, {}
    for name, s in data.splits.items():
        assert s.b is not None
        subsets[name] = (emb.get(s.a), emb.get(s.b), s.y)
        lengths[name] = P.pair_lengths(s.a, s.b)
    return P.sts_scores(subsets, lengths)


@RUNNERS.register("ranking")
def _run_ranking(data: TaskData, emb: EmbeddingStore, cfg: EvalConfig) -> dict[str, Any]:
    feats = data.extra["imgfeat"]
    parts = tuple((emb.get(data.splits[k].a), feats[k]) for k in ("train", "dev", "test"))
    return P.image_caption_retrieval(parts[0], parts[1], parts[2], cfg)


@RUNNERS.register("retrieval")
def _run_retrieval(data: TaskData, emb: EmbeddingStore, cfg: EvalConfig) -> dict[str, Any]:
    """User tasks in BEIR's layout: exact cosine search; nDCG@10, MRR@10, Recall@100 (x 100)."""
    q, d = data.splits["queries"], data.splits["corpus"]
    qs, ds = emb.side("query"), emb.side("document")
    if emb.searcher is not None:  # binary codes searched, the best candidates rescored (as `sentkit neighbours`)
        from sentkit.retrieval.index import rescored_beir_ranking

        floats = (qs.get(q.a, floats=True), ds.get(d.a, floats=True))
        ranked = rescored_beir_ranking(emb.searcher, *floats, data.extra["query_ids"], data.extra["doc_ids"], k=100)
    else:
        ranked = P.exact_search(qs.get(q.a), ds.get(d.a), data.extra["query_ids"], data.extra["doc_ids"], k=100)
    res = P.ir_metrics(data.extra["qrels"], ranked)
    out = {k: (100 * v if k != "nqueries" else v) for k, v in res.items()}
    out["ndocs"] = len(d.a)
    return out


# ---------------------------------------------------------------------------------------------
def library_versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("sentkit", "torch", "numpy", "scipy", "scikit-learn", "transformers", "sentence-transformers"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            continue
    return out


def evaluate(
    encoder: Any,
    tasks: str | list[str] | None = "all",
    preset: str = "prototyping",
    data_dir: str | Path | None = None,
    *,
    fingerprint: str | None = None,
    model_name: str | None = None,
    raise_errors: bool = False,
    progress: bool | EvalProgress = True,
    whole_fingerprint: str | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Score `encoder` (an object with `encode(list[str]) -> array`, or a callable) on SentEval
    tasks with SentEval's protocol. `tasks`: 'all' (every task whose data is present), a
    comma-separated string or a list of names, or 'none' (no task: an empty results dict, to which
    `sentkit evaluate --mteb` adds its MTEB section). `overrides`: any `EvalConfig` field.

    A task that fails (missing or malformed data, bad encoder output, an undefined score) is
    reported under `errors` and the others still run; `raise_errors=True` re-raises instead.
    `progress`: bars on a terminal, else log lines (see `EvalProgress`); False for none.
    `whole_fingerprint`: for a model whose vectors are made from whole ones after encoding (a cut to its first
    dimensions, codes: `sentkit.core.interface.whole_vectors`), the key the whole vectors are cached under, so that
    every width and code of one model is scored from one encoding (`store_plan`).
    """
    cfg = make_config(preset, **overrides)
    ddir = resolve_data_dir(data_dir)
    names = [] if tasks == NO_TASKS else expand_tasks(tasks, ddir)
    if not names and tasks != NO_TASKS:
        raise MissingInputError(
            f"no SentEval task files found under {ddir}: see `sentkit data check --data-dir {ddir}`, "
            f"fetch them with `sentkit data download --data-dir {ddir}`, or set SENTKIT_DATA / --data-dir"
        )
    enc = as_encoder(encoder)
    # a key given for the model: its half precision's vectors filed apart (identity.with_precision); else the
    # encoder's own, as text; None without one
    fp = with_precision(fingerprint, enc) if fingerprint else own_fingerprint(enc)
    if cfg.use_cache and fp is None:
        logger.info("encoder has no fingerprint: embeddings are not cached (pass fingerprint=...)")
    bar = progress if isinstance(progress, EvalProgress) else EvalProgress(names, enabled=bool(progress))
    given = whole_fingerprint or fingerprint  # the whole vectors' key, else the model's: with the whole vectors'
    if given:  # precision, as `fp` takes the model's (`whole_key`)
        whole_fingerprint = whole_key(enc, None, given)
    store, prompts = prompted_stores(enc, fp, cfg, bar, whole_fingerprint=whole_fingerprint)
    t_start = time.perf_counter()
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    warnings: dict[str, list[str]] = {}
    timings: dict[str, dict[str, float]] = {}
    counts: dict[str, dict[str, int]] = {}
    interrupted = False
    try:
        for name in names:
            warnings.update(_check_sizes(name, ddir))
            try:
                results[name], timings[name], counts[name] = _run_task(name, ddir, cfg, store)
            except Exception as e:
                if raise_errors:
                    raise
                logger.error("task %s failed: %s", name, e)
                errors[name] = f"{type(e).__name__}: {e}"
            finally:
                bar.task_end(name)
    except KeyboardInterrupt:
        interrupted = True
        errors.update({n: "interrupted" for n in names if n not in results and n not in errors})
    finally:
        if not isinstance(progress, EvalProgress):
            bar.close()
    from sentkit.evaluation.report import declutr_average
    from sentkit.models.loading import precision_of, used_settings

    quantized = getattr(enc, "quantize", None)  # codes (sentkit.models.quantization.QuantizedEncoder)
    out = {
        "model": {
            "name": model_name or getattr(enc, "name", type(enc).__name__),
            "fingerprint": fp,
            "dim": store.out_dim() or next((s.out_dim() for s in store.stores() if s.dim), None),
            "prompts": prompts,
            **({"precision": precision_of(enc)} if precision_of(enc) else {}),
            **({"quantize": quantized} if isinstance(quantized, str) else {}),
            **({"rescore": rescored} if (rescored := used_settings(enc, {}).get("rescore")) else {}),
        },
        "config": to_dict(cfg),
        "seed": cfg.seed,
        "data_dir": str(ddir),
        "tasks_requested": names,
        "results": _jsonable(results),
        "errors": errors,
        "warnings": warnings,
        "counts": counts,
        "timings": {
            "tasks": timings,
            "encode_s": round(store.total("encode_s"), 3),
            "total_s": round(time.perf_counter() - t_start, 3),
            "sentences_requested": store.total("n_requested"),
            "sentences_unique": sum(len(s.rows) for s in store.stores()),
            "sentences_encoded": store.total("n_encoded"),
            "sentences_from_cache": store.total("n_cached"),
            "sentences_checked": store.total("n_checked"),
        },
        "versions": library_versions(),
    }
    out["declutr_average"] = declutr_average(out["results"])
    if interrupted:
        raise EvaluationInterrupted(out)
    return out


def store_plan(enc: Any, fp: str | None, whole_fingerprint: str | None = None) -> tuple[Any, str | None, Any]:
    """What an embedding store of `enc` (cache key `fp`) encodes and caches under which key, and how its vectors
    become `enc`'s: ``(encoder, key, WholeVectors | None)``. For a model whose vectors are made from whole ones after
    encoding (`sentkit.core.interface.whole_vectors`: a cut, codes), the whole vectors under `whole_fingerprint` (else
    the whole encoder's own fingerprint), so that one encoding serves every width and code of the model; with no key
    for them, `enc` itself under `fp` (as before), unless its retrieval rescores with the float vectors."""
    from sentkit.core.interface import whole_vectors

    whole = whole_vectors(enc)
    if whole is None:
        return enc, fp, None
    key = whole_fingerprint or own_fingerprint(whole.encoder)
    if key is None and getattr(enc, "rescore", None) is None:
        return enc, fp, None
    return whole.encoder, key, whole


def whole_key(enc: Any, name: str | None, given: str | None = None) -> str | None:
    """The cache key of the whole vectors a cut or quantized `enc` is made from (`store_plan`), as a command keys a
    model it loaded by `name`: the user's key `given` with the whole encoder's precision, else
    `sentkit.core.identity.fingerprint` of the whole encoder and `name`; None for a model whose vectors are its own."""
    from sentkit.core.interface import whole_vectors

    whole = whole_vectors(enc)
    if whole is None:
        return None
    if given:
        return with_precision(given, whole.encoder)
    return own_fingerprint(whole.encoder, name) if name else own_fingerprint(whole.encoder)


def prompted_stores(
    enc: Any, fp: str | None, cfg: EvalConfig, bar: EvalProgress | None, *, whole_fingerprint: str | None = None
) -> tuple[EmbeddingStore, dict[str, str | None]]:
    """The embedding store of `enc`'s default prompt, with a store of its own for each retrieval side
    whose prompt differs, each cached (``cfg.use_cache`` and a fingerprint `fp`) under a key of its
    prompt (`sentkit.core.interface.prompted_fingerprint`: `fp` itself without one); and the prompt texts
    used: {"default": ..., "query": ..., "document": ...} (None: no prompt). A cut or quantized model's stores
    keep its whole vectors (`store_plan`, `whole_fingerprint`)."""
    from functools import partial

    from sentkit.core.interface import (
        encode_with_prompt,
        prompt_used,
        prompted_fingerprint,
        role_prompt_name,
    )

    include = bool(getattr(enc, "include_prompt", True))
    source, key, whole = store_plan(enc, fp, whole_fingerprint)
    steps: dict[str, Any] = {}
    if whole is not None:
        steps = {"post": whole.step, "float_post": whole.float_step}
        if getattr(enc, "rescore", None) is not None:
            steps["searcher"] = enc

    def cache(text: str | None) -> EmbeddingCache | None:
        k = prompted_fingerprint(key, text, include_prompt=include)
        return EmbeddingCache(cfg.cache_dir or default_cache_root(), k) if cfg.use_cache and k else None

    texts = {"default": prompt_used(enc) or None}
    store = EmbeddingStore(source.encode, cfg.encode_batch_size, cache(texts["default"]), bar, **steps)
    for role in ("query", "document"):
        name = role_prompt_name(enc, role)
        texts[role] = prompt_used(enc, prompt_name=name) or None
        if texts[role] != texts["default"]:
            store.sides[role] = EmbeddingStore(
                partial(encode_with_prompt, source, prompt_name=name),
                cfg.encode_batch_size,
                cache(texts[role]),
                bar,
                **steps,
            )
    return store, texts


def _check_sizes(name: str, ddir: Path) -> dict[str, list[str]]:
    """{task: files whose size differs from SentEval's copy} (with a warning), or {}."""
    changed = size_mismatches(name, ddir)
    if not changed:
        return {}
    more = f" (and {len(changed) - 1} more files)" if len(changed) > 1 else ""
    logger.warning(
        "task %s: %s%s; fetch SentEval's files again with `%s --force`",
        name,
        changed[0],
        more,
        download_hint(name, ddir),
    )
    return {name: changed}


def _run_task(
    name: str, ddir: Path, cfg: EvalConfig, store: EmbeddingStore
) -> tuple[dict[str, Any], dict[str, float], dict[str, int]]:
    """Load, encode and score one task -> (results, timings, counts); raises on any failure."""
    spec = get_task(name)
    t0 = time.perf_counter()
    data = load_task(name, ddir, raw=cfg.raw)
    if spec.kind in ("cv", "kfold"):
        n = len(data.splits["all" if spec.kind == "cv" else "train"])
        if n < 2 * cfg.kfold:
            raise TaskDataError(
                f"task {name}: {n} samples, too few for {cfg.kfold}-fold cross-validation "
                f"(SentEval's file has thousands): is {ddir / spec.folder} truncated?"
            )
    e0 = store.total("encode_s")
    if spec.kind == "retrieval":  # each side with its prompt
        store.side("query").ensure(list(data.splits["queries"].a), name)
        store.side("document").ensure(list(data.splits["corpus"].a), name)
    else:
        store.ensure(list(data.sentences()), name)
    t1, c1 = time.perf_counter(), time.process_time()
    res = RUNNERS.get(spec.kind)(data, store, cfg)
    t2, c2 = time.perf_counter(), time.process_time()
    _check_score(name, res)
    res["kind"] = spec.kind
    if spec.group == "user":  # a results file names its user tasks' kind, so reports read it alone
        res["group"] = "user"
    logger.info("%s: %s (%.1fs)", name, _headline(name, res), t2 - t0)
    timing = {
        "load_encode_s": round(t1 - t0, 3),
        "encode_s": round(store.total("encode_s") - e0, 3),
        "classify_s": round(t2 - t1, 3),
        "classify_cpu_s": round(c2 - c1, 3),
    }
    return res, timing, _counts(data)


def _check_score(name: str, res: dict[str, Any]) -> None:
    """A task whose headline score is NaN (e.g. every pair got the same similarity, so the
    correlation is undefined) failed: it must never be reported as a score."""
    from sentkit.evaluation.report import main_score

    v = main_score(name, res)
    if v is None:
        raise EncoderOutputError(
            f"task {name}: the score is undefined (NaN): the embeddings do not vary enough to be ranked "
            "(e.g. every sentence gets the same vector)"
        )


def _headline(name: str, res: dict[str, Any]) -> str:
    from sentkit.evaluation.report import main_score

    v = main_score(name, res)
    return "n/a" if v is None else f"{v:.2f}"


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, float | np.floating):
        return float(x) if np.isfinite(x) else None  # JSON has no NaN: an undefined metric is null
    return x
