"""MTEB from sentkit: any model name `sentkit.load` resolves, scored by the `mteb` package (2.x) on
its own tasks, with its own code.

Nothing of MTEB's protocol is re-implemented here: mteb loads each task, calls the model, trains its
classifiers, searches its corpora, computes its scores and writes its results files. This module holds
only what joins the two:

- :class:`MTEBEncoder`: a sentkit encoder as an mteb model (mteb's ``EncoderProtocol``:
  ``encode(DataLoader, *, task_metadata, hf_split, hf_subset, prompt_type)``, ``similarity``,
  ``similarity_pairwise``, ``mteb_model_meta``). It encodes through sentkit's embedding store: unique
  texts once, length-sorted batches, the on-disk embedding cache shared with SentEval runs, output
  checks and progress. Queries and documents get their prompts (:func:`st_prompt`: mteb's choice for a
  SentenceTransformer of the folder, with sentkit's document prompt; docs/evaluation.md "Prompts"; none for
  an unprompted model), each prompt's vectors with a cache of their own, and similarity is cosine;
- :func:`resolve_tasks`: what ``--mteb`` names: an mteb task (``STS12``) or benchmark
  (``MTEB(eng, v2)``); a task with a local copy of its dataset (``STS12=path/to/copy``, a folder laid out
  as the task's Hugging Face dataset repository); or a user's own task files in the formats of
  :mod:`sentkit.evaluation.user_tasks` (``TYPE:NAME=PATH``, or a ``.toml`` of ``[[task]]`` tables), read
  by that module's readers and run through mteb's task class of the type (:func:`local_task`);
- :func:`check_data`: before any model loads, each task's data: a local copy compared with mteb's
  metadata for the task (splits, sizes, dataset revision: :func:`check_local_copy`; a subset is refused
  unless allowed, then filed apart), a registry task's dataset looked for in the local caches
  (:func:`data_missing`), with one summary line for many missing (:func:`missing_summary`);
- :func:`model_identity`: the (name, revision) results are filed under: the weights' content hash, or
  the published model's own name and revision where the weights are a registry entry's published model;
- :func:`run`: each task through ``mteb.evaluate`` with mteb's results files written under a folder,
  and a summary for sentkit's results JSON (``results["mteb"]``); a task whose dataset is neither cached
  nor reachable fails with one line saying what is missing and the command that fetches it.

mteb is imported only when one of these runs (:func:`require_mteb`); without it, the error names the
extra to install.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from sentkit.core.config import ConfigError
from sentkit.core.errors import SentkitError
from sentkit.core.identity import content_id, files_id, is_model_file, mteb_revision, variant_id
from sentkit.core.registry import Registry

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'sentkit[mteb]'"
LANGUAGE = "und-Zyyy"  # a user's own task: language and script undetermined (BCP-47 / ISO 15924)
RESULTS_FOLDER = "mteb"  # mteb's results files, next to sentkit's results JSON


class MTEBInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run`: `.section` is the MTEB section of the tasks finished so far (the
    others listed under `errors` as interrupted)."""

    def __init__(self, section: dict[str, Any]) -> None:
        super().__init__("interrupted")
        self.section = section


class MTEBDataMissing(SentkitError, RuntimeError):
    """An mteb task's dataset is neither in the local cache nor reachable: the message names the task,
    the dataset and the commands that get it."""


def require_mteb() -> ModuleType:
    """The `mteb` module; a ConfigError naming the extra to install when it is absent."""
    try:
        return importlib.import_module("mteb")
    except ImportError as e:
        raise ConfigError(
            f"MTEB tasks need the mteb package, which is not installed ({e}); install the extra: {INSTALL_HINT}"
        ) from None


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------
def meta_name(model: str) -> str:
    """The model name mteb files results under: a Hugging Face id `org/name` as it is, any other
    sentkit name as `sentkit/<name>` (a folder by its last part), in characters safe in a path."""
    text = str(model).strip()
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*", text) and not Path(text).exists():
        return text
    if ":" in text:  # file.py:attr / module:attr
        path, attr = text.rsplit(":", 1)
        text = f"{Path(path).stem}.{attr}"
    elif Path(text).exists():
        text = Path(text).resolve().name
    return "sentkit/" + (re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._") or "model")


REVISION_CHARS = 40  # a content hash as long as a git commit id, the form mteb's registry gives revisions in
SUBSET_SUFFIX = "_local_subset"  # the model revision folder of the tasks scored on a local subset of their data


def _weights_folder(text: str, kind: str) -> Path | None:
    """The folder whose files `text` loads (a folder, a registry name's package folder, a hub id's
    snapshot in the local cache); None for word vectors, code, and a hub id not cached."""
    if kind == "folder":
        return Path(text).expanduser().resolve()
    if kind == "registry":
        from sentkit.models.hub import resolve

        return Path(resolve(text))
    if kind == "hub":
        try:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(text, local_files_only=True))
        except Exception:  # not in the local cache (or no hub client)
            return None
    return None


def _model_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and is_model_file(f.relative_to(folder)))


def published_model(folder: Path, digest: str) -> tuple[str, str] | None:
    """(hub id, revision) of the published model whose weights the folder holds: a registry entry
    that declares one (`sentkit.models.hub.NamedModel.published`) and whose files have `digest`."""
    from sentkit.models.hub import NAMED_MODELS

    size = None
    for name in NAMED_MODELS.names():
        nm = NAMED_MODELS.get(name)
        if nm.published is None:
            continue
        try:
            theirs = nm.locate()
        except ModuleNotFoundError:
            continue
        size = _model_bytes(folder) if size is None else size
        if theirs.resolve() == folder.resolve() or (size == _model_bytes(theirs) and content_id(theirs) == digest):
            return nm.published
    return None


def model_identity(spec: str, *, variant: str = "") -> tuple[str, str]:
    """(name, revision) mteb files the results of the model `spec` under: one per set of weights.

    The revision is the weights' content hash (`sentkit.core.identity.content_id` of the folder the name
    loads, its first 40 hex digits; for word vectors and code, a hash of `sentkit.models.loading.content_id`),
    so a folder, its copy elsewhere and the registry name of the same files share it. Weights that are
    a published model's (a registry entry's `published`, recognised by content) are filed under that
    model's own name and revision, as mteb's registry has them. `variant` (e.g. a pooling other than
    the model's own) makes another model of the same weights: its revision hashes both, and it is never
    the published model."""
    from sentkit.models.loading import content_id as spec_content_id
    from sentkit.models.loading import describe

    text = str(spec).strip()
    kind = describe(text)
    folder = _weights_folder(text, kind)
    content = content_id(folder) if folder is not None else spec_content_id(text)
    if folder is not None and not variant:
        published = published_model(folder, content)
        if published is not None:
            return published
    if variant or folder is None:
        content = variant_id(content, variant)
    name = meta_name(text)
    if kind == "registry":
        from sentkit.models.hub import model_aliases

        name = meta_name(model_aliases().get(text, text))
    return name, content[:REVISION_CHARS]


def _n_parameters(encoder: Any) -> int | None:
    model = getattr(encoder, "model", None)
    params = getattr(model, "parameters", None)
    if not callable(params):
        return None
    try:
        return int(sum(p.numel() for p in params()))
    except Exception:  # not a torch module after all
        return None


def _max_tokens(encoder: Any) -> int | None:
    n = getattr(encoder, "max_length", None)
    return int(n) if isinstance(n, int) and not isinstance(n, bool) else None


class MTEBEncoder:
    """A sentkit encoder as an mteb model (see the module docstring).

    `encoder`: anything with ``encode(list[str]) -> [n, dim]`` (what `sentkit.load` returns);
    `name`: the model name given to sentkit; `fingerprint`: the embedding-cache key; `identity`: the
    (name, revision) mteb files results under (:func:`model_identity`; default: ``sentkit/<name>`` and
    the fingerprint, or ``no_revision_available`` without one). `subset` (set per task by :func:`run`):
    the task is scored on a local subset of its data, filed under the revision + ``_local_subset``."""

    def __init__(
        self,
        encoder: Any,
        *,
        name: str,
        fingerprint: str | None = None,
        batch_size: int = 128,
        cache_dir: str | Path | None = None,
        use_cache: bool = True,
        progress: Any = None,
        identity: tuple[str, str] | None = None,
        whole_fingerprint: str | None = None,
    ) -> None:
        from sentkit.core.interface import as_encoder
        from sentkit.evaluation.cache import EmbeddingCache, default_cache_root
        from sentkit.evaluation.runner import store_plan

        self.encoder = as_encoder(encoder)
        self.name = name
        self.fingerprint = fingerprint
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch size must be a positive integer, got {batch_size!r}")
        self.batch_size = batch_size
        # a cut or quantized model: its whole vectors encoded and cached, its own made from them (store_plan)
        self.source, self.cache_key, self.whole = store_plan(self.encoder, fingerprint, whole_fingerprint)
        self.rescoring = getattr(self.encoder, "rescore", None) is not None  # binary search, candidates rescored
        self.cache = (
            EmbeddingCache(cache_dir or default_cache_root(), self.cache_key) if use_cache and self.cache_key else None
        )
        self.progress = progress
        self.dim: int | None = None
        self.counts = {"requested": 0, "encoded": 0, "from_cache": 0}
        self.encode_s = 0.0
        self.identity = identity or (meta_name(name), mteb_revision(fingerprint))
        self.subset = False
        self._meta: dict[bool, Any] = {}

    def probe_dim(self) -> int:
        """The embedding dimension: the encoder's `dim`, else the width of one text's vector."""
        dim = getattr(self.encoder, "dim", None)
        if not isinstance(dim, int) or isinstance(dim, bool):
            dim = int(np.asarray(self.encoder.encode(["dimension"])).shape[-1])
        self.dim = self.dim or dim
        return dim

    @property
    def mteb_model_meta(self) -> Any:
        """mteb's ModelMeta of this model: the name and revision results are filed under (+ the local
        subset suffix while `subset`), embedding dimension, parameter count, max tokens, cosine
        similarity, text only, and the model's prompts (``loader_kwargs["model_prompts"]``, as mteb's
        registry records a sentence-transformers model's; ``default_prompt_name`` beside them)."""
        if self.subset not in self._meta:
            from mteb.models.model_meta import ModelMeta, ScoringFunction

            name, revision = self.identity
            prompts = dict(getattr(self.encoder, "prompts", None) or {})
            default = getattr(self.encoder, "default_prompt_name", None)
            loader_kwargs = {"model_prompts": prompts, "default_prompt_name": default} if prompts else {}
            self._meta[self.subset] = ModelMeta.create_empty(
                overwrites={
                    "name": name,
                    "revision": revision + (SUBSET_SUFFIX if self.subset else ""),
                    "similarity_fn_name": ScoringFunction.COSINE,
                    "use_instructions": bool(prompts),
                    "modalities": ["text"],
                    "embed_dim": self.dim,
                    "n_parameters": _n_parameters(self.encoder),
                    "max_tokens": _max_tokens(self.encoder),
                    "loader_kwargs": loader_kwargs,
                }
            )
        return self._meta[self.subset]

    def encode(
        self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str, prompt_type: Any = None, **kwargs: Any
    ) -> np.ndarray:
        """Embed the texts of mteb's DataLoader (batches with a ``text`` column) -> float32 [n, dim],
        in order; each unique text once, the cache first (sentkit's embedding store). The prompt is
        the one mteb + sentence-transformers would use (`st_prompt`); each prompt has its own cache."""
        from functools import partial

        from sentkit.core.interface import encode_with_prompt
        from sentkit.evaluation.runner import EmbeddingStore

        texts = [t for batch in inputs for t in batch["text"]]
        prompt = st_prompt(self.encoder, self._mteb_prompts(), task_metadata, prompt_type)
        source = self.source
        encode = source.encode if prompt is None else partial(encode_with_prompt, source, prompt=prompt)
        steps = {} if self.whole is None else {"post": self.whole.step, "float_post": self.whole.float_step}
        store = EmbeddingStore(encode, self.batch_size, self._prompt_cache(prompt), self.progress, **steps)
        store.ensure(texts, task_metadata.name)
        # a search that rescores (RescoredSearch) gets the float vectors the codes are made of
        floats = self.rescoring and searches(task_metadata)
        out = store.get(texts, floats=floats) if texts else np.zeros((0, self.dim or 0), np.float32)
        if not floats:
            self.dim = store.out_dim() or self.dim
        self.counts["requested"] += store.n_requested
        self.counts["encoded"] += store.n_encoded
        self.counts["from_cache"] += store.n_cached
        self.encode_s += store.encode_s
        return out

    def _mteb_prompts(self) -> dict[str, str]:
        """The encoder's prompts as mteb's sentence-transformers wrapper holds them: ST's empty "query" and
        "document" under the model's own, names mteb does not know left out (mteb's own check, once); and
        "document" the model's document prompt by sentkit's rule (`sentkit.core.interface.role_prompt_name`: an
        E5-style "passage" too, as mteb's E5 entries set it)."""
        if "_valid_prompts" not in self.__dict__:
            from mteb.models.abs_encoder import AbsEncoder

            from sentkit.core.interface import ST_DEFAULT_PROMPTS, prompts_of, role_prompt_name

            own = prompts_of(self.encoder)[0]
            role = role_prompt_name(self.encoder, "document")
            document = own.get(role, "")  # sentkit's rule: "passage" too
            if role != "document":  # mapped to "document" here: not a key for mteb to refuse (and warn about)
                own.pop(role, None)
            valid, _ = AbsEncoder.validate_task_to_prompt_name(
                {**ST_DEFAULT_PROMPTS, **own, "document": document}, raise_for_invalid_keys=False
            )
            self.__dict__["_valid_prompts"] = dict(valid or {})
        return dict(self.__dict__["_valid_prompts"])

    def _prompt_cache(self, prompt: str | None) -> Any:
        """The embedding cache of vectors encoded with `prompt` (None: the default prompt's, `self.cache`)."""
        from sentkit.core.interface import prompt_used, prompted_fingerprint

        text = prompt_used(self.encoder) if prompt is None else prompt
        if self.cache is None or not text:
            return self.cache
        caches = self.__dict__.setdefault("_prompt_caches", {})
        if text not in caches:
            from sentkit.evaluation.cache import EmbeddingCache

            key = prompted_fingerprint(
                self.cache_key, text, include_prompt=bool(getattr(self.encoder, "include_prompt", True))
            )
            caches[text] = EmbeddingCache(self.cache.dir.parent, str(key))
        return caches[text]

    def similarity(self, embeddings1: Any, embeddings2: Any) -> Any:
        """Cosine similarity of every row of `embeddings1` with every row of `embeddings2` (mteb's)."""
        from mteb.similarity_functions import cos_sim

        return cos_sim(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> Any:
        """Cosine similarity of each row of `embeddings1` with the same row of `embeddings2` (mteb's)."""
        from mteb.similarity_functions import pairwise_cos_sim

        return pairwise_cos_sim(embeddings1, embeddings2)


def searches(task_metadata: Any) -> bool:
    """Whether a task ranks a whole corpus for each query (mteb's Retrieval type), which a binary search with
    rescoring can serve (`RescoredSearch`); other tasks score the codes themselves."""
    return getattr(task_metadata, "type", None) == "Retrieval"


class RescoredSearch:
    """mteb's index backend (``IndexEncoderSearchProtocol``) for a model whose codes are binary and searched with
    rescoring (`sentkit.models.quantization.QuantizedEncoder` with ``rescore``): the documents' float vectors are
    kept, and each query's ranking is `sentkit.retrieval.index.rescored_search` (Hamming candidates, the best
    rescored, then the rest in Hamming order). A task that gives candidates to rerank is refused."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder
        self.docs: list[np.ndarray] = []

    def add_documents(self, embeddings: Any, idxs: list[str]) -> None:
        self.docs.append(np.asarray(embeddings, dtype=np.float32))

    def search(
        self,
        embeddings: Any,
        top_k: int,
        similarity_fn: Any = None,
        top_ranked: Any = None,
        query_idx_to_id: Any = None,
    ) -> tuple[list[list[float]], list[list[int]]]:
        if top_ranked is not None:
            raise ConfigError("a binary search with rescoring ranks a whole corpus; this task reranks given candidates")
        if not self.docs:
            raise ConfigError("no documents were added to the binary search")
        from sentkit.retrieval.index import rescored_search

        queries = np.asarray(embeddings, dtype=np.float32)
        ids, scores = rescored_search(self.encoder, queries, np.concatenate(self.docs), top_k)
        return scores.tolist(), ids.tolist()

    def clear(self) -> None:
        self.docs = []


def st_prompt(encoder: Any, model_prompts: dict[str, str], task_metadata: Any, prompt_type: Any) -> str | None:
    """The prompt text mteb's sentence-transformers wrapper encodes with (None: the model's default
    prompt applies): mteb picks a name from `model_prompts` (``get_prompt_name``: "{task}-{type}", the
    task, "{task type}-{type}", the task type, the prompt type); then ST's ``encode_query`` /
    ``encode_document`` / ``encode`` (a query without one: "query"; a document: "document", "passage"
    or "corpus"; neither type: the default prompt). One departure, as in sentkit's retrieval tasks and
    neighbours: an E5-style model (``query`` + ``passage``, no ``document``) encodes documents with its
    ``passage`` prompt (`sentkit.core.interface.role_prompt_name`; `MTEBEncoder._mteb_prompts` holds it as
    "document"), where sentence-transformers would find its empty "document" first."""
    from mteb.models.abs_encoder import get_prompt_name

    from sentkit.core.interface import prompts_of, resolve_prompt, role_prompt_name

    name = get_prompt_name(model_prompts, task_metadata, prompt_type) if model_prompts else None
    if name:
        return model_prompts.get(name)
    kind = getattr(prompt_type, "value", prompt_type)
    prompts, default = prompts_of(encoder)
    if kind in ("query", "document"):
        return resolve_prompt(prompts, default, prompt_name=role_prompt_name(encoder, kind))
    return None


# ---------------------------------------------------------------------------------------------
# Tasks: mteb's registry, a local copy of a task's dataset, a user's own task files
# ---------------------------------------------------------------------------------------------
def split_names(values: list[str]) -> list[str]:
    """The names in ``--mteb`` values: each value split at commas outside parentheses, so that
    ``STS12,STS13`` gives two names and ``MTEB(eng, v2)`` one."""
    out: list[str] = []
    for value in values:
        depth, cur = 0, ""
        for ch in value:
            depth += (ch == "(") - (ch == ")")
            if ch == "," and depth == 0:
                out.append(cur.strip())
                cur = ""
            else:
                cur += ch
        out.append(cur.strip())
    return [n for n in out if n]


def _did_you_mean(e: KeyError) -> str:
    m = re.search(r"Did you mean:? '?([^'?]+)'?\?", str(e))
    return m.group(1) if m else ""


def _mteb_names() -> tuple[list[str], list[str]]:
    """mteb's task names and benchmark names (its registries; empty where this mteb keeps them elsewhere)."""
    require_mteb()
    try:
        tasks = list(importlib.import_module("mteb.get_tasks")._TASKS_REGISTRY)
    except (ImportError, AttributeError):
        tasks = []
    try:
        import mteb

        benchmarks = [b.name for b in mteb.get_benchmarks()]
    except Exception:  # mteb's benchmark registry failed to build: suggest tasks only
        benchmarks = []
    return tasks, benchmarks


# Names that closest_name's spelling rules would map to the wrong task: the loose key of what is typed -> the
# mteb task meant (STS-B is the English STSBenchmark; mteb's "STSB" is a Chinese task)
NEAR_MISSES = {"stsb": "STSBenchmark"}


def closest_name(name: str, mteb_hint: str = "") -> str:
    """The name `name` most likely meant, for ``--mteb``: a known near-miss (:data:`NEAR_MISSES`: ``STS-B`` ->
    ``STSBenchmark``); the same name in another case (``sts12`` -> ``STS12``); a SentEval task of sentkit's
    own table: mteb's task of that name, or none; the shortest mteb task or benchmark name it begins
    (``Banking77`` -> ``Banking77Classification``); else the closest spelling (case ignored), else mteb's
    own suggestion `mteb_hint`; "" for none."""
    from sentkit.core.registry import loose_key
    from sentkit.evaluation.tasks import ALL_TASKS

    tasks, benchmarks = _mteb_names()
    names = tasks + benchmarks
    by_key: dict[str, str] = {}
    for n in names:
        by_key.setdefault(loose_key(n), n)
    key = loose_key(name)
    if NEAR_MISSES.get(key) in names:
        return NEAR_MISSES[key]
    if key in by_key:
        return by_key[key]
    senteval = next((t for t in ALL_TASKS if loose_key(t) == key), None)
    if senteval is not None:  # sentkit's own table first: a SentEval name mteb lacks is not an mteb near-miss
        return by_key.get(loose_key(senteval), "")
    starts = sorted((n for n in names if key and loose_key(n).startswith(key)), key=lambda n: (len(n), n))
    if starts:
        return starts[0]
    import difflib

    close = difflib.get_close_matches(key, list(by_key), n=1, cutoff=0.6)
    return by_key[close[0]] if close else mteb_hint


def registry_tasks(name: str) -> list[Any]:
    """The mteb task `name`, or the tasks of the mteb benchmark `name`; ConfigError (with the
    closest name, :func:`closest_name`) for neither."""
    mteb = require_mteb()
    try:
        return [mteb.get_task(name)]
    except KeyError as e:
        task_hint = _did_you_mean(e)
    try:
        return list(mteb.get_benchmark(name).tasks)
    except KeyError as e:
        bench_hint = _did_you_mean(e)
    from sentkit.core.registry import loose_key
    from sentkit.evaluation.tasks import ALL_TASKS

    hint = closest_name(name, task_hint or bench_hint)
    senteval = next((t for t in ALL_TASKS if loose_key(t) == loose_key(name)), None)
    also = f"; {senteval} is a SentEval task: pass --tasks {senteval}" if senteval and hint != senteval else ""
    raise ConfigError(
        f"--mteb {name}: not an MTEB task or benchmark{f'; did you mean {hint!r}?' if hint else ''}{also} "
        "(names as mteb spells them: STS12, Banking77Classification, SciFact, 'MTEB(eng, v2)'; "
        "your own task files: TYPE:NAME=PATH or a .toml file)"
    )


def with_local_copy(task: Any, folder: Path) -> Any:
    """`task` reading its dataset from `folder`, a copy of its Hugging Face dataset repository (e.g.
    ``hf download --repo-type dataset REPO --revision REV --local-dir FOLDER``), instead of the hub."""
    if not folder.is_dir():
        raise ConfigError(
            f"--mteb {task.metadata.name}={folder}: no such folder; give the folder holding a copy of "
            f"the task's dataset ({task.metadata.dataset['path']})"
        )
    # a class of its own: mteb restores the class's metadata when a task unloads its data
    dataset = {**task.metadata.dataset, "path": str(folder)}
    cls = type(
        type(task).__name__,
        (type(task),),
        {
            "metadata": task.metadata.model_copy(update={"dataset": dataset}),
            "hub_dataset": dict(task.metadata.dataset),
            "__module__": __name__,
        },
    )
    return cls()


def beir_splits(folder: Path) -> list[str]:
    """The qrels splits a BEIR folder holds (``qrels/<split>.tsv``), sorted."""
    return sorted(f.stem for f in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []


def split_hint(folder: Path, want: str, name: str) -> str:
    """For a BEIR folder without ``qrels/<want>.tsv``: the splits it has and how to score one of them
    ("" when it has none)."""
    found = [x for x in beir_splits(folder) if x != want]
    if not found:
        return ""
    return (
        f"; {folder}/qrels has {', '.join(f'{x}.tsv' for x in found)} (split {found[0]}), not {want}.tsv: to score "
        f'split {found[0]}, declare the task in a .toml ([[task]] name = "{name}", type = "retrieval", path = '
        f'"{folder}", split = "{found[0]}") and pass --mteb FILE.toml'
    )


def copy_revision(folder: Path) -> str | None:
    """The dataset revision a copy made by ``hf download --local-dir`` records (the commit in its
    ``.cache/huggingface/download/*.metadata`` files); None when it records none."""
    for meta in sorted((folder / ".cache" / "huggingface" / "download").rglob("*.metadata")):
        with contextlib.suppress(OSError, IndexError):
            commit = meta.read_text(encoding="utf-8").splitlines()[0].strip()
            if re.fullmatch(r"[0-9a-f]{40}", commit):
                return commit
    return None


def _nested(task: Any) -> bool:
    """Whether `task.dataset` is {subset: {split: ...}} (multilingual and retrieval tasks) rather than {split: ...}."""
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    return bool(task.metadata.is_multilingual or isinstance(task, AbsTaskRetrieval))


def found_splits(task: Any) -> list[str]:
    """The splits of a loaded task's dataset."""
    ds = task.dataset or {}
    keys = {k for sub in ds.values() for k in sub} if _nested(task) else set(ds)
    return sorted(keys)


def split_sizes(task: Any, splits: list[str]) -> dict[str, int]:
    """The number of samples of each of `splits` of a loaded task, counted by mteb's own descriptive
    statistics (the numbers its metadata holds for the published dataset)."""
    import io

    out = {}
    with contextlib.redirect_stderr(io.StringIO()):  # mteb's hashing progress bars
        for split in splits:
            stats = task._calculate_descriptive_statistics_from_split(
                split, compute_overall=task.metadata.is_multilingual
            )
            out[split] = int(stats["num_samples"])
    return out


def check_local_copy(task: Any, *, allow_subset: bool = False) -> dict[str, Any]:
    """Compare a local copy (:func:`with_local_copy`) with mteb's metadata of its task: the splits mteb
    counted and their sizes, and the dataset revision where the copy records one (:func:`copy_revision`).
    A mismatch is a ConfigError of one line (task, split, expected vs found, the fix) unless
    `allow_subset`: then the task is marked a local subset (its results are filed under the model
    revision + ``_local_subset`` and the dataset revision ``local_subset_of_<revision>``). Returns what
    sentkit's results JSON records of the copy: path, sizes found and expected, subset or not."""
    name, hub, folder = task.metadata.name, task.hub_dataset, Path(task.metadata.dataset["path"])
    fetch = (
        f"`hf download --repo-type dataset {hub['path']} --revision {hub['revision']} --local-dir DIR` "
        f"and pass --mteb {name}=DIR"
    )
    expected = dict(task.metadata.n_samples or {})
    revision = copy_revision(folder)
    try:
        load_task_data(task)
    except MTEBDataMissing as e:
        raise ConfigError(f"{e}{split_hint(folder, (task.metadata.eval_splits or ['test'])[0], name)}") from None
    try:
        found = found_splits(task)
        sizes = split_sizes(task, [x for x in expected if x in found])
    finally:
        task.unload_data()
    problems = []
    if revision is not None and revision != hub["revision"]:
        problems.append(f"it is revision {revision} of {hub['path']}, MTEB's {name} uses {hub['revision']}")
    for split, n in expected.items():
        if split not in found:
            problems.append(
                f"split {split} is missing (found: {', '.join(found) or 'none'}), MTEB's {name} has "
                f"{n:,} samples in it{split_hint(folder, split, name)}"
            )
        elif sizes[split] != n:
            problems.append(f"split {split} has {sizes[split]:,} samples, MTEB's {name} has {n:,}")
    if problems and not allow_subset:
        raise ConfigError(
            f"--mteb {name}={folder}: {'; '.join(problems)}: not the task's dataset; give a complete copy "
            f"({fetch}), or add --allow-subset to score it as a local subset, filed apart from full runs"
        )
    record = {
        "path": str(folder.resolve()),
        "dataset": hub["path"],
        "dataset_revision": hub["revision"],
        "copy_revision": revision,
        "sizes": sizes,
        "expected_sizes": expected,
        "subset": bool(problems),
        "checked": bool(expected) or revision is not None,
    }
    if problems:
        task.local_subset = record
        task.metadata.dataset["revision"] = f"local_subset_of_{hub['revision']}"
        log.warning(
            "MTEB task %s: scored on a local subset (%s); filed under a local-subset revision",
            name,
            "; ".join(problems),
        )
    return record


@dataclass
class LocalTask:
    """How one user-task type runs as an mteb task: mteb's abstract task class, its metadata type and
    main score, and `build(task, data) -> (dataset, eval_splits, eval_langs, class attributes)`."""

    base: str  # "module:Class" of mteb's abstract task
    type: str
    main_score: str
    build: Callable[[Any, Any], tuple[Any, list[str], Any, dict[str, Any]]]


LOCAL_TASKS: Registry[LocalTask] = Registry("task type")


def _datasets() -> ModuleType:
    return importlib.import_module("datasets")


def _classification(task: Any, data: Any) -> tuple[Any, list[str], Any, dict[str, Any]]:
    ds = _datasets()
    splits = {
        ("train" if k == "all" else k): ds.Dataset.from_dict({"text": s.a, "label": s.y.tolist()})
        for k, s in data.splits.items()
        if k != "dev"
    }  # MTEB's protocol has no dev split
    attrs: dict[str, Any] = {"is_cross_validation": "test" not in splits}
    return ds.DatasetDict(splits), ["test" if "test" in splits else "train"], [LANGUAGE], attrs


POSITIVE = {"1": 1, "0": 0, "true": 1, "false": 0, "yes": 1, "no": 0}


def _pair_classification(task: Any, data: Any) -> tuple[Any, list[str], Any, dict[str, Any]]:
    labels = [str(x).strip().lower() for x in data.extra["labels"]]
    if not set(labels) <= set(POSITIVE) or len({POSITIVE[x] for x in labels}) != 2:
        where = next(iter(task.files.values()))
        raise ConfigError(
            f"{where}: labels {data.extra['labels']}: an MTEB pair-classification task takes two labels, "
            "1 / 0 (or true / false, yes / no; 1: the texts match); relabel the rows"
        )
    key = "test" if "test" in data.splits else "all"
    s = data.splits[key]
    y = [POSITIVE[labels[i]] for i in s.y.tolist()]
    ds = _datasets()
    split = ds.Dataset.from_dict({"sentence1": s.a, "sentence2": s.b, "labels": y})
    return ds.DatasetDict({"test": split}), ["test"], [LANGUAGE], {}


def _sts(task: Any, data: Any) -> tuple[Any, list[str], Any, dict[str, Any]]:
    ds = _datasets()
    subsets = {
        name: ds.DatasetDict(
            {"test": ds.Dataset.from_dict({"sentence1": s.a, "sentence2": s.b, "score": s.y.tolist()})}
        )
        for name, s in data.splits.items()
    }
    ys = np.concatenate([s.y for s in data.splits.values()])
    if ys.min() == ys.max():  # mteb scales the gold scores to [0, 1] by their range
        raise ConfigError(
            f"{next(iter(task.files.values()))}: every gold score is {ys.min():g}; an STS task needs "
            "pairs of different scores"
        )
    attrs = {"min_score": float(ys.min()), "max_score": float(ys.max())}
    return subsets, ["test"], {name: [LANGUAGE] for name in subsets}, attrs


def _retrieval(task: Any, data: Any) -> tuple[Any, list[str], Any, dict[str, Any]]:
    ds = _datasets()
    corpus, queries = data.splits["corpus"], data.splits["queries"]
    split = {
        # the document's text is the user-task reader's (title and text joined, as BEIR's dense models)
        "corpus": ds.Dataset.from_dict({"id": data.extra["doc_ids"], "text": corpus.a}),
        "queries": ds.Dataset.from_dict({"id": data.extra["query_ids"], "text": queries.a}),
        "relevant_docs": data.extra["qrels"],
        "top_ranked": None,
    }
    # as sentkit's own retrieval (and BEIR's evaluation): a document with the query's id is not a result
    return {"default": {task.split: split}}, [task.split], [LANGUAGE], {"ignore_identical_ids": True}


LOCAL_TASKS.add(
    "classification",
    LocalTask("mteb.abstasks.classification:AbsTaskClassification", "Classification", "accuracy", _classification),
)
LOCAL_TASKS.add(
    "pair-classification",
    LocalTask(
        "mteb.abstasks.pair_classification:AbsTaskPairClassification",
        "PairClassification",
        "max_ap",
        _pair_classification,
    ),
)
LOCAL_TASKS.add("sts", LocalTask("mteb.abstasks.sts:AbsTaskSTS", "STS", "cosine_spearman", _sts))
LOCAL_TASKS.add(
    "retrieval", LocalTask("mteb.abstasks.retrieval:AbsTaskRetrieval", "Retrieval", "ndcg_at_10", _retrieval)
)


def _files_revision(paths: list[Path]) -> str:
    """A cheap id of the files' state (names, sizes, mtimes): the "revision" mteb records."""
    return files_id([f for p in paths for f in sorted([p] if p.is_file() else p.rglob("*")) if f.is_file()], length=20)


def local_task(task: Any) -> Any:
    """An mteb task over a user's task files (a :class:`sentkit.evaluation.user_tasks.UserTask`): the
    files are read and checked by sentkit's readers (a malformed line is an error naming it), then run
    by mteb's abstract task class of the type, with mteb's defaults (its classifier and few-shot
    sampling, its retrieval metrics)."""
    mteb = require_mteb()
    from mteb.abstasks.task_metadata import TaskMetadata

    from sentkit.evaluation import user_tasks as U

    try:
        mteb.get_task(task.name)
    except KeyError:
        pass
    else:
        raise ConfigError(f"user task {task.name}: {task.name} is an MTEB task; give your task another name")
    kind = LOCAL_TASKS.get(task.type)
    data = U.load(task)  # every file read and checked here, before any encoding
    dataset, splits, langs, attrs = kind.build(task, data)
    paths = [task.path] if task.path is not None else list(task.files.values())
    fields: dict[str, Any] = {
        "name": task.name,
        "description": f"a sentkit user task ({task.type}) from {', '.join(map(str, paths))}",
        "dataset": {"path": str(paths[0] if len(paths) == 1 else paths[0].parent), "revision": _files_revision(paths)},
        "type": kind.type,
        "category": "t2t",
        "modalities": ["text"],
        "eval_splits": splits,
        "eval_langs": langs,
        "main_score": kind.main_score,
        "license": "not specified",
        "bibtex_citation": "",
    }
    metadata = TaskMetadata(**fields)

    def load_data(self: Any, num_proc: int | None = None, **kwargs: Any) -> None:
        self.dataset = dataset
        self.data_loaded = True

    module, cls_name = kind.base.split(":")
    base = getattr(importlib.import_module(module), cls_name)
    cls = type(
        f"Local{cls_name[len('AbsTask') :]}",
        (base,),
        {"metadata": metadata, "load_data": load_data, "__module__": __name__, **attrs},
    )
    return cls()


USER_TASK = re.compile(r"[a-z-]+:[^=]+=.+")


def _with_split_hint(task: Any) -> Any:
    """A user's retrieval task whose BEIR folder lacks the split's qrels but has others: a ConfigError
    naming the splits found and how to score one (the user-task reader's own error says only "missing")."""
    if task.type == "retrieval" and task.path is not None and Path(task.path).is_dir():
        qrels = Path(task.path) / "qrels" / f"{task.split}.tsv"
        hint = split_hint(Path(task.path), task.split, task.name)
        if not qrels.is_file() and hint:
            raise ConfigError(f"{qrels}: missing{hint}")
    return task


def resolve_tasks(items: list[str], *, allow_subset: bool = False) -> list[Any]:
    """The mteb tasks that ``--mteb`` values name (see the module docstring), in order, each once;
    ConfigError for a name mteb does not know, a malformed task file, or a local copy that is not
    the task's dataset (:func:`check_local_copy`; `allow_subset`: scored as a local subset), all
    before any encoding."""
    from sentkit.evaluation import user_tasks as U

    require_mteb()
    tasks: list[Any] = []
    for item in split_names(items):
        if item.lower().endswith(".toml"):
            tasks += [local_task(_with_split_hint(t)) for t in U.from_toml(item)]
        elif USER_TASK.fullmatch(item):
            tasks.append(local_task(_with_split_hint(U.from_cli(item))))
        elif "=" in item:
            name, folder = (x.strip() for x in item.split("=", 1))
            found = registry_tasks(name)
            if len(found) != 1:
                raise ConfigError(
                    f"--mteb {item}: {name} is a benchmark of {len(found)} tasks; a local copy is the "
                    "dataset of one task: give TASK=DIR for each"
                )
            copy = with_local_copy(found[0], Path(folder))
            with _quiet_mteb():
                copy.local_copy = check_local_copy(copy, allow_subset=allow_subset)
            tasks.append(copy)
        else:
            found = registry_tasks(item)
            for t in found:
                t.sentkit_request = item  # the --mteb name it came from: the one command that fetches its data
            tasks += found
    seen: dict[str, Any] = {}
    for t in tasks:
        if t.metadata.name in seen:
            if type(seen[t.metadata.name]).__module__ == __name__ or type(t).__module__ == __name__:
                raise ConfigError(
                    f"--mteb: task {t.metadata.name} is named twice with different data; give each task its own name"
                )
            continue
        seen[t.metadata.name] = t
    return list(seen.values())


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------
def download_hint(task: Any) -> str:
    """The commands that get a task's dataset, to run where the Hugging Face hub is reachable."""
    name, ds = task.metadata.name, task.metadata.dataset
    return (
        f"where the hub is reachable run `sentkit data download --mteb {name}` and copy the Hugging Face cache "
        f"(~/.cache/huggingface, or $HF_HOME) here, or `hf download --repo-type dataset {ds['path']} --revision "
        f"{ds['revision']} --local-dir DIR` and pass --mteb {name}=DIR"
    )


def load_task_data(task: Any) -> None:
    """Load `task`'s dataset (mteb's own loading: the local cache, a local copy, or the hub); an
    :class:`MTEBDataMissing` naming the task, what is missing and how to get it when it cannot."""
    try:
        task.load_data()
    except OSError as e:  # datasets: ConnectionError (offline), DatasetNotFoundError, files absent
        name, ds = task.metadata.name, task.metadata.dataset
        reason = " ".join(str(e).split()) or type(e).__name__
        hub = getattr(task, "hub_dataset", None)  # a local copy (with_local_copy): where it came from
        if hub is not None:
            raise MTEBDataMissing(
                f"MTEB task {name}: its copy {ds['path']} cannot be read as the dataset {hub['path']} "
                f"({reason}); give a folder holding that dataset repository: `hf download --repo-type "
                f"dataset {hub['path']} --revision {hub['revision']} --local-dir DIR`"
            ) from e
        raise MTEBDataMissing(
            f"MTEB task {name}: its dataset {ds['path']} (revision {ds['revision']}) is not in the "
            f"local cache and cannot be fetched ({reason}); {download_hint(task)}"
        ) from e


def _offline() -> bool:
    import datasets
    from huggingface_hub import constants

    return bool(datasets.config.HF_DATASETS_OFFLINE or constants.HF_HUB_OFFLINE)


def _in_cache(task: Any) -> bool:
    """Whether the task's dataset is in a local cache: the hub's (its revision's snapshot) or
    the datasets library's (a prepared copy). Cheap: folders are looked at, nothing is read."""
    import datasets
    from huggingface_hub import constants

    path, revision = str(task.metadata.dataset["path"]), str(task.metadata.dataset.get("revision") or "")
    snapshot = Path(constants.HF_HUB_CACHE) / f"datasets--{path.replace('/', '--')}" / "snapshots" / revision
    prepared = Path(datasets.config.HF_DATASETS_CACHE) / path.replace("/", "___")
    return (bool(revision) and snapshot.is_dir()) or prepared.is_dir()


def data_missing(task: Any) -> str | None:
    """Why an mteb task's dataset cannot be had here (the :class:`MTEBDataMissing` line), or None.
    A dataset in a local cache, or any dataset while the hub is reachable (mteb fetches it in the
    run), counts as there; otherwise (offline, not seen in a cache) mteb's loading is tried."""
    for t in task.metadata.tasks if task.is_aggregate else [task]:  # an aggregate: its subtasks' datasets
        if _in_cache(t) or not _offline():
            continue
        try:
            load_task_data(t)
        except MTEBDataMissing as e:
            return (
                str(e).replace(f"MTEB task {t.metadata.name}:", f"MTEB task {task.metadata.name}:", 1)
                if t is not task
                else str(e)
            )
        finally:
            if t.data_loaded:
                t.unload_data()
    return None


@dataclass
class DataCheck:
    """What :func:`check_data` found: `missing` {task: the line saying what is missing and the fix},
    `local_copies` {task: what :func:`check_local_copy` recorded}."""

    missing: dict[str, str]
    local_copies: dict[str, dict[str, Any]]


def check_data(tasks: list[Any], *, allow_subset: bool = False, progress: bool = False) -> DataCheck:
    """Before any model loads: each task's data. A local copy is compared with mteb's metadata
    (:func:`check_local_copy`: a mismatch is a ConfigError unless `allow_subset`); a registry task's
    dataset is looked for (:func:`data_missing`); a user's task files were read by :func:`resolve_tasks`."""
    missing: dict[str, str] = {}
    copies: dict[str, dict[str, Any]] = {}
    with _quiet_mteb():
        for task in tasks:
            name = task.metadata.name
            if getattr(task, "hub_dataset", None) is not None:
                copies[name] = getattr(task, "local_copy", None) or check_local_copy(task, allow_subset=allow_subset)
            elif type(task).__module__ != __name__:
                why = data_missing(task)
                if why is not None:
                    missing[name] = why
    return DataCheck(missing, copies)


def missing_summary(missing: dict[str, str], tasks: list[Any]) -> str:
    """One line for several missing datasets: how many, of which benchmark(s) or tasks, and the one
    command that fetches them all where the hub is reachable."""
    import shlex

    requests: list[str] = []
    for t in tasks:
        if t.metadata.name in missing:
            req = getattr(t, "sentkit_request", t.metadata.name)
            if req not in requests:
                requests.append(req)
    groups = [r for r in requests if r not in missing]  # benchmarks (a task's own name is not a group)
    of = f" of {', '.join(groups)}" if groups else ""
    return (
        f"{len(missing)} MTEB datasets{of} are neither in the local cache nor reachable; where the hub is reachable "
        f"run `sentkit data download --mteb {' '.join(shlex.quote(r) for r in requests)}` and copy the Hugging Face "
        "cache (~/.cache/huggingface, or $HF_HOME) here"
    )


def download(names: list[str]) -> dict[str, str]:
    """Fetch the datasets of the mteb tasks `names` into the local cache (mteb's own loading, which
    needs the hub): {task: dataset path}."""
    out = {}
    for task in resolve_tasks(names):
        for t in task.metadata.tasks if task.is_aggregate else [task]:  # an aggregate: its subtasks' datasets
            load_task_data(t)
            out[t.metadata.name] = str(t.metadata.dataset["path"])
            t.unload_data()
    return out


@contextlib.contextmanager
def _quiet_mteb() -> Iterator[None]:
    """mteb logs each step at INFO; sentkit's own progress says what matters."""
    from datasets.utils import logging as dlog

    logger = logging.getLogger("mteb")
    before, bars = logger.level, dlog.is_progress_bar_enabled()
    logger.setLevel(max(logging.getLogger().getEffectiveLevel(), logging.WARNING))
    dlog.disable_progress_bar()  # mteb's dataset.map steps on a few rows
    try:
        yield
    finally:
        logger.setLevel(before)
        if bars:
            dlog.enable_progress_bar()


UNROUNDED = "_sentkit_unrounded"  # a task's attribute: {(split, subset): {metric: unrounded value}}
# mteb's retrieval metrics, as its score dicts name them, from trec_eval's per-query measures
_TREC = {
    "ndcg_at_": "ndcg_cut_",
    "map_at_": "map_cut_",
    "recall_at_": "recall_",
    "precision_at_": "P_",
    "hit_rate_at_": "success_",
}


def keep_unrounded(task: Any) -> Any:
    """`task`, made to keep the unrounded means of its retrieval metrics (nDCG, MAP, recall, precision,
    hit rate at each k) for :func:`task_summary`: mteb's retrieval scoring rounds each of them to 5
    decimals before any caller sees it, so that, x 100, a ranking whose nDCG@10 is 48.0354 reads 48.035
    (printed 48.03) where sentkit's own retrieval reads 48.04. The means are taken, in mteb's order, from
    the per-query measures mteb passes to the task's ``task_specific_scores`` hook, and kept on the task;
    mteb's scores and results files are left as mteb writes them. Any other task (not one of mteb's
    retrieval class: reranking and instruction retrieval are) is returned as it is."""
    from mteb.abstasks.retrieval import AbsTaskRetrieval  # also reranking and instruction retrieval

    if not isinstance(task, AbsTaskRetrieval):
        return task
    if isinstance(getattr(task, UNROUNDED, None), dict):  # kept already: a new run starts afresh
        getattr(task, UNROUNDED).clear()
        return task
    hook = task.task_specific_scores
    kept: dict[tuple[str, str], dict[str, float]] = {}

    def task_specific_scores(scores: Any, qrels: Any, results: Any, hf_split: str, hf_subset: str) -> Any:
        kept[(str(hf_split), str(hf_subset))] = retrieval_means(scores)
        return hook(scores, qrels, results, hf_split=hf_split, hf_subset=hf_subset)

    task.task_specific_scores = task_specific_scores  # type: ignore[method-assign]  # mteb calls self.<hook>
    setattr(task, UNROUNDED, kept)
    return task


def retrieval_means(per_query: dict[str, dict[str, float]]) -> dict[str, float]:
    """The unrounded mean over queries of each trec_eval measure in `per_query` ({query: {measure: v}}),
    under mteb's score names (``ndcg_cut_10`` -> ``ndcg_at_10``; ``accuracy``: recall@1, as mteb)."""
    if not per_query:
        return {}
    out: dict[str, float] = {}
    measures = next(iter(per_query.values()))
    for ours, trec in _TREC.items():
        for measure in measures:
            if measure.startswith(trec) and measure[len(trec) :].isdigit():
                out[ours + measure[len(trec) :]] = sum(q[measure] for q in per_query.values()) / len(per_query)
    if "recall_at_1" in out:
        out["accuracy"] = out["recall_at_1"]
    return out


def _unrounded(row: dict[str, Any], kept: dict[str, float], metric: str) -> float:
    """A split/subset's main score, mteb's unrounded value where :func:`keep_unrounded` kept one that
    mteb's rounded figure is the rounding of, else mteb's own."""
    value = float(row["main_score"])
    exact = kept.get(metric)
    return float(exact) if exact is not None and round(exact, 5) == round(value, 5) else value


def task_summary(task: Any, result: Any, path: Path, root: Path) -> dict[str, Any]:
    """What sentkit's results JSON keeps of one task: its type, main score (0-100, the mean over splits
    and subsets as mteb's ``get_score``, from unrounded values: see :func:`keep_unrounded`), per split and
    subset, mteb's own figure (``main_score_mteb``: its retrieval metrics rounded to 5 decimals), and
    where mteb's results file is. Rounding is for printing only."""
    kept = getattr(task, UNROUNDED, None) or {}
    metric = task.metadata.main_score
    per: dict[str, dict[str, float]] = {}
    values: list[float] = []
    for split, rows in result.scores.items():
        per[split] = {}
        for r in rows:
            subset = str(r.get("hf_subset", "default"))
            v = _unrounded(r, kept.get((str(split), subset), {}), metric)
            per[split][subset] = 100 * v
            values.append(v)
    try:
        rel = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        rel = str(path)
    return {
        "type": task.metadata.type,
        "main_score_name": metric,
        "main_score": 100 * float(np.mean(values)) if values else 100 * float(result.get_score()),
        "main_score_mteb": 100 * float(result.get_score()),
        "scores": per,
        "evaluation_time_s": round(float(result.evaluation_time or 0.0), 3),
        "file": rel,
    }


def averages(tasks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The MTEB leaderboard's two means of the tasks present: over tasks, and over task types of the
    mean within each type."""
    scores = {n: t["main_score"] for n, t in tasks.items() if t.get("main_score") is not None}
    by_type: dict[str, list[float]] = {}
    for n, v in scores.items():
        by_type.setdefault(tasks[n]["type"], []).append(v)
    type_means = {k: float(np.mean(v)) for k, v in sorted(by_type.items())}
    return {
        "mean_task": float(np.mean(list(scores.values()))) if scores else None,
        "mean_type": float(np.mean(list(type_means.values()))) if type_means else None,
        "by_type": type_means,
        "n_tasks": len(scores),
    }


def run(
    encoder: Any,
    tasks: list[Any],
    *,
    output_dir: str | Path,
    model_name: str,
    fingerprint: str | None = None,
    batch_size: int = 128,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
    progress: bool = True,
    results_root: str | Path | None = None,
    identity: tuple[str, str] | None = None,
    checked: DataCheck | None = None,
    whole_fingerprint: str | None = None,
) -> dict[str, Any]:
    """Run the mteb `tasks` (from :func:`resolve_tasks`) on `encoder` with ``mteb.evaluate``; mteb's
    results files go under `output_dir` (``results/<model>/<revision>/<task>.json``; `identity`: the
    model's (name, revision), :func:`model_identity`). Returns the section sentkit's results JSON keeps
    under ``mteb``: per task its summary, or under ``errors`` why it failed (the others still run), and
    the averages. `checked` (:func:`check_data`, run before the model loaded): tasks whose data is
    missing are not run (listed under ``errors``), local copies are recorded under ``local_copies``.
    File paths are relative to `results_root` (default: the parent of `output_dir`). No results
    folder is left behind when no task wrote a file. `whole_fingerprint`: the cache key of a cut or quantized
    model's whole vectors (`sentkit.evaluation.runner.store_plan`). A binary model that rescores
    (``QuantizedEncoder.rescore``) is searched on retrieval tasks by its own search (`RescoredSearch`)."""
    mteb = require_mteb()
    from sentkit.evaluation.progress import EvalProgress

    checked = checked or DataCheck({}, {t.metadata.name: t.local_copy for t in tasks if getattr(t, "local_copy", None)})
    names = [t.metadata.name for t in tasks]
    todo = [t for t in tasks if t.metadata.name not in checked.missing]
    bar = EvalProgress([t.metadata.name for t in todo], enabled=progress)
    model = MTEBEncoder(
        encoder,
        name=model_name,
        fingerprint=fingerprint,
        batch_size=batch_size,
        cache_dir=cache_dir,
        use_cache=use_cache,
        progress=bar,
        identity=identity,
        whole_fingerprint=whole_fingerprint,
    )
    out_dir = Path(output_dir)
    root = Path(results_root) if results_root is not None else out_dir.parent
    made = [p for p in (out_dir, *out_dir.parents) if not p.exists()]  # the folders this run would create
    summaries: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = dict(checked.missing)
    t0 = time.perf_counter()
    interrupted = False
    try:
        if todo:
            model.probe_dim()  # model_meta.json records the dimension: known before mteb asks for the meta
            cache = mteb.ResultCache(cache_path=out_dir)
        with _quiet_mteb():
            for task in todo:
                name = task.metadata.name
                model.subset = getattr(task, "local_subset", None) is not None
                try:
                    if not task.is_aggregate:  # an aggregate (e.g. CQADupstack) loads its subtasks in mteb.evaluate
                        load_task_data(task)
                    keep_unrounded(task)  # task_summary: the scores before mteb rounds its retrieval metrics
                    target: Any = model
                    if model.rescoring and searches(task.metadata):
                        from mteb.models.search_wrappers import SearchEncoderWrapper

                        target = SearchEncoderWrapper(model, index_backend=RescoredSearch(model.encoder))
                    res = mteb.evaluate(
                        target,
                        task,
                        cache=cache,
                        overwrite_strategy="always",
                        encode_kwargs={"batch_size": batch_size, "show_progress_bar": False},
                        show_progress_bar=False,
                        co2_tracker=False,
                        raise_error=True,
                    )
                    result = res.task_results[0]
                    path = cache.get_task_result_path(name, model.mteb_model_meta)
                    summaries[name] = task_summary(task, result, path, root)
                    log.info("MTEB %s: %s %.2f", name, task.metadata.main_score, summaries[name]["main_score"])
                except MTEBDataMissing as e:
                    errors[name] = str(e)
                    log.warning("MTEB task %s: no data; the others go on (its reason: the results' errors)", name)
                except Exception as e:
                    errors[name] = f"MTEB task {name}: {type(e).__name__}: {e}"
                    log.warning(
                        "MTEB task %s failed (%s); the others go on (its reason: the results' errors)",
                        name,
                        type(e).__name__,
                    )
                finally:
                    if task.data_loaded:
                        task.unload_data()
                    bar.task_end(name)
    except KeyboardInterrupt:
        interrupted = True
        errors.update({n: "interrupted" for n in names if n not in summaries and n not in errors})
    finally:
        bar.close()
        model.subset = False
        _remove_empty(made)
    meta = model.mteb_model_meta
    section = {
        "mteb_version": mteb.__version__,
        "model": meta.name,
        "revision": meta.revision,
        "results_dir": _relative(out_dir, root),
        "tasks_requested": names,
        "tasks": summaries,
        "errors": {n: errors[n] for n in names if n in errors},
        "average": averages(summaries),
        "dim": model.dim,
        "model_meta": {
            "embed_dim": meta.embed_dim,
            "n_parameters": meta.n_parameters,
            "max_tokens": meta.max_tokens,
            "similarity_fn_name": str(meta.similarity_fn_name.value if meta.similarity_fn_name else None),
            "prompts": dict(meta.loader_kwargs.get("model_prompts") or {}),
            "default_prompt_name": meta.loader_kwargs.get("default_prompt_name"),
        },
        "local_copies": checked.local_copies,
        "timings": {
            "total_s": round(time.perf_counter() - t0, 3),
            "encode_s": round(model.encode_s, 3),
            "sentences_requested": model.counts["requested"],
            "sentences_encoded": model.counts["encoded"],
            "sentences_from_cache": model.counts["from_cache"],
        },
    }
    for name, copy in checked.local_copies.items():
        if copy["subset"] and name in summaries:
            copy["revision"] = meta.revision + SUBSET_SUFFIX  # where mteb filed it
    if interrupted:
        raise MTEBInterrupted(section)
    return section


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders of `folders` (innermost first) that hold nothing: a run that wrote no file leaves none."""
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        if folder.is_dir():
            for sub in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
                with contextlib.suppress(OSError):
                    sub.rmdir()  # only succeeds on an empty folder
            with contextlib.suppress(OSError):
                folder.rmdir()


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
