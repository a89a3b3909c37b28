"""Shared machinery of the Hill et al. models: the base estimator (scikit-learn habits, directory
save/load, the one ``encode`` convention; every method that is not a transformer recipe uses it,
in hill/ or not), corpus loading with a config (read/kept/skipped counts, a clear refusal when
nothing is usable), and words-per-second logging."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np

from sentkit.core.errors import InputError, MissingInputError, SentkitError
from sentkit.core.identity import directory_digest
from sentkit.core.interface import encode_texts
from sentkit.data.corpus import Fix
from sentkit.data.sentences import CorpusSource, ReadReport, TokenizedCorpus, read_corpus, tokenize
from sentkit.hill.configs import HillConfig

if TYPE_CHECKING:
    from sentkit.core.methods import Method

log = logging.getLogger(__name__)

C = TypeVar("C", bound=HillConfig)
M = TypeVar("M", bound="HillModel[Any]")

CONFIG_FILE = "config.json"


class NotFittedError(SentkitError, RuntimeError):
    """``encode``/``save`` was called before ``fit``."""


class RateLogger:
    """Counts words processed and logs words/s every ``every`` seconds (and at ``close``)."""

    def __init__(self, what: str, every: float = 10.0) -> None:
        self.what = what
        self.every = every
        self.words = 0
        self.start = time.perf_counter()
        self._last = self.start

    def update(self, words: int) -> None:
        self.words += words
        now = time.perf_counter()
        if now - self._last >= self.every:
            self._last = now
            log.info("%s: %d words, %.0f words/s", self.what, self.words, self.rate)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    @property
    def rate(self) -> float:
        return self.words / max(self.elapsed, 1e-9)

    def close(self) -> dict[str, float]:
        log.info("%s: done, %d words in %.1fs (%.0f words/s)", self.what, self.words, self.elapsed, self.rate)
        return {"words": float(self.words), "seconds": self.elapsed, "words_per_s": self.rate}


def load_corpus(source: CorpusSource | TokenizedCorpus, cfg: HillConfig, method: str = "") -> TokenizedCorpus:
    """A TokenizedCorpus from a path, a list of document strings, or as is. Logs what was read,
    kept and skipped; raises CorpusError (naming the corpus and the fix) when no sentence is usable."""
    if isinstance(source, TokenizedCorpus):
        data = source if cfg.punctuation else source.without_punctuation()
    else:
        if isinstance(source, (str, Path)) and not str(source):
            from sentkit.core.config import ConfigError

            raise ConfigError('no corpus given: pass --corpus PATH (or corpus = "..." in the config)')
        data = read_corpus(
            source,
            lowercase=cfg.lowercase,
            punctuation=cfg.punctuation,
            max_sentences=cfg.max_sentences,
            field=cfg.text_field,
            txt_mode=cfg.txt_mode,
            progress=cfg.progress,
        )
        assert data.report is not None
        log.info("%s corpus %s:\n%s", method or "baseline", data.report.source, data.report.summary())
    if len(data) == 0 or data.n_tokens == 0:
        what = "word" if cfg.punctuation else "word (punctuation is dropped: punctuation=false)"
        raise corpus_report(data).error(
            f"no sentence with a {what}, nothing to train {method or 'the model'} on",
            "bring documents of plain UTF-8 text (a folder of .txt files, one document each, or .jsonl "
            "records whose text field is named by the setting text_field)",
        )
    return data


def corpus_report(data: TokenizedCorpus | ReadReport) -> ReadReport:
    """The read report of ``data``, or one built from its counts (a corpus made in Python)."""
    if isinstance(data, ReadReport):
        return data
    if data.report is not None:
        return data.report
    n_docs = len(np.unique(data.doc_ids))
    rep = ReadReport("<a TokenizedCorpus>", kept=n_docs, sentences=len(data), tokens=data.n_tokens)
    rep.files.read = n_docs
    return rep


def require_vocabulary(data: TokenizedCorpus | ReadReport, n_words: int, min_count: int, method: str) -> None:
    """Refuse (CorpusError with the fix) when no word reaches ``min_count``."""
    if n_words > 0:
        return
    fixes = [Fix({"min_count": 1}, "keep every word")] if min_count > 1 else []
    raise corpus_report(data).error(
        f"no word occurs >= min_count={min_count} times, so {method} has no vocabulary",
        "bring more text" + (" or lower the threshold" if fixes else ""),
        fixes,
    )


def adjacent_pairs(data: TokenizedCorpus, lengths: np.ndarray) -> int:
    """How many sentences i have a next sentence i + 1 in the same document, both non-empty."""
    if len(data) < 2:
        return 0
    same = data.doc_ids[1:] == data.doc_ids[:-1]
    return int((same & (lengths[1:] > 0) & (lengths[:-1] > 0)).sum())


def require_neighbours(data: TokenizedCorpus, found: int, method: str, need: str) -> None:
    """Refuse when a method that learns from neighbouring sentences finds none."""
    if found > 0:
        return
    raise corpus_report(data).error(
        f"{method} learns from neighbouring sentences and needs {need}; found none",
        "bring more text, with consecutive sentences in the same document (one .txt file or one JSONL "
        "record per document, not one per sentence)",
    )


def text_value(v: Any) -> str | None:
    """``v`` when it is a string with some text, else None (a record to skip)."""
    return v if isinstance(v, str) and v.strip() else None


def read_records(
    path: str | Path,
    fields: tuple[str, ...],
    convert: Callable[[tuple[Any, ...]], Any],
    *,
    limit: int | None,
    what: str,
    kind: str,
) -> list[Any]:
    """Rows of a line-oriented file: the values of ``fields`` in each JSONL record (.jsonl/.json),
    or the first ``len(fields)`` tab-separated columns of each line (other files), through
    ``convert`` (None: skip the row as empty). Unusable lines are skipped and counted, the
    counts are logged, and a file without one row is a CorpusError (``what``: the expected form)."""
    import json

    from sentkit.data.corpus import CorpusError, CorpusStats
    from sentkit.data.sentences import iter_text_lines

    p = Path(path)
    if p.is_dir():
        raise CorpusError(f"corpus {p} is a folder; give {what}")
    if not p.is_file():
        raise CorpusError(f"corpus {p} not found; give {what}")
    jsonl = p.suffix.lower() in (".jsonl", ".json", ".ndjson")
    stats = CorpusStats()
    rows: list[Any] = []
    for i, line in iter_text_lines(p, stats):
        values: tuple[Any, ...] | None = None
        reason = "no_field"
        if jsonl:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                obj, reason = None, "bad_json"
            if isinstance(obj, dict) and all(f in obj for f in fields):
                values = tuple(obj[f] for f in fields)
        else:
            parts = line.split("\t")
            values = tuple(parts[: len(fields)]) if len(parts) >= len(fields) else None
        row = convert(values) if values is not None else None
        if row is None:
            stats.read -= 1  # counted as skipped instead
            stats.skip(reason if values is None else "empty", f"{p}:{i}")
            continue
        rows.append(row)
        if limit is not None and len(rows) >= limit:
            break
    report = ReadReport(str(p), stats, kept=len(rows), sentences=len(rows))
    log.info("corpus %s:\n%s", p, report.summary())
    if not rows:
        raise report.error(f"no {kind} found", f"give {what}")
    return rows


class HillModel(Generic[C]):
    """Base of every estimator method (the Hill et al. models, and any method that is not a
    transformer recipe): ``Model(config, **overrides).fit(corpus) -> self``; learned state in
    attributes ending with ``_``; ``save(dir)`` / ``Model.load(dir)``; ``method`` is its name in
    `sentkit.core.methods.METHODS` (what the saved ``sentkit.json`` says)."""

    method: ClassVar[str] = ""
    config_cls: ClassVar[type[HillConfig]] = HillConfig
    corpus_optional: ClassVar[bool] = False  # fit(None) trains on data the config names (WordNet, captions)

    def __init__(self, config: C | None = None, **overrides: Any) -> None:
        base = config if config is not None else self.config_cls()
        self.config: C = dataclasses.replace(base, **overrides) if overrides else base  # type: ignore[assignment]

    @classmethod
    def as_method(cls, name: str) -> Method:
        """The method `sentkit.core.methods.METHODS` names by this class: train = ``fit(cfg.corpus)`` then
        ``save(cfg.out)``; load = ``load``."""
        from sentkit.core.methods import Method

        if cls.method != name:
            raise ValueError(
                f"{cls.__name__}.method is {cls.method!r} but sentkit.core.methods.METHODS lists it as "
                f"{name!r}: the folders it saves would name another method"
            )

        def train(cfg: Any) -> Path:
            from sentkit.core.config import ConfigError

            if not cfg.out:
                raise ConfigError(f"{name}: no output directory given (--out DIR)")
            model = cls(cfg)
            model.fit(cfg.corpus or None) if cls.corpus_optional else model.fit(cfg.corpus)
            out = model.save(cfg.out)
            log.info("%s model saved to %s", name, out)
            return Path(out)

        train.__name__ = f"train_{name.replace('-', '_')}"
        return Method(name, cls.config_cls, train, cls.load)

    # -- to implement -----------------------------------------------------------------------
    def fit(self: M, corpus: Any) -> M:
        raise NotImplementedError

    def _encode(self, texts: list[str]) -> np.ndarray:
        """One batch of texts -> float32 [len(texts), dim]."""
        raise NotImplementedError

    def _save_state(self, d: Path) -> dict[str, Any]:
        """Write learned arrays/files into ``d``; return JSON-able extra state."""
        raise NotImplementedError

    def _load_state(self, d: Path, state: dict[str, Any]) -> None:
        raise NotImplementedError

    # -- shared -----------------------------------------------------------------------------
    def encode(self, texts: str | Sequence[str], batch_size: int = 32, *, show_progress: bool = False) -> np.ndarray:
        """float32 ``[n, dim]`` for a list of texts, ``[dim]`` for a single ``str``
        (sentence-transformers' convention); items that are not ``str`` raise TypeError."""
        self._check_fitted("dim_")
        return encode_texts(
            self._encode, texts, batch_size, dim=self.dim, show_progress=show_progress, desc=f"{self.method} encode"
        )

    @property
    def dim(self) -> int:
        return int(getattr(self, "dim_", 0))

    def _check_fitted(self, attr: str) -> None:
        if not hasattr(self, attr):
            raise NotFittedError(f"{type(self).__name__} is not fitted: call fit(corpus) first")

    def tokenize(self, text: str) -> list[str]:
        return tokenize(text, lowercase=self.config.lowercase, punctuation=self.config.punctuation)

    def save(self, out: str | Path) -> Path:
        """Save config, learned state and the ``sentkit.json`` marker into directory ``out``."""
        from sentkit.core.config import save_json
        from sentkit.core.io import atomic_write_text
        from sentkit.core.methods import write_marker

        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        state = self._save_state(d)
        save_json(self.config, d / CONFIG_FILE)
        atomic_write_text(d / "state.json", json.dumps(state, indent=2, sort_keys=True, default=str) + "\n")
        write_marker(d, method=self.method, dim=self.dim, cls=type(self).__name__)
        self.fingerprint_ = directory_digest(d)
        return d

    def fingerprint(self) -> str | None:
        """Stable id of a saved or loaded model (the evaluation suite's embedding-cache key);
        None for a model that was fitted but not saved."""
        return getattr(self, "fingerprint_", None)

    @classmethod
    def load(cls: type[M], path: str | Path) -> M:
        """Load a model directory written by ``save``."""
        from sentkit.core.config import ConfigError, from_dict

        d = Path(path)
        f = d / CONFIG_FILE
        if not f.is_file():
            raise MissingInputError(f"{f} not found: {d} is not a saved {cls.__name__} model")
        try:
            cfg = from_dict(cls.config_cls, json.loads(f.read_text(encoding="utf-8")), where=str(f))
            obj = cls(cfg)  # type: ignore[arg-type]
            state = json.loads((d / "state.json").read_text(encoding="utf-8"))
            obj._load_state(d, state)
        except ConfigError:
            raise
        except (ValueError, KeyError, EOFError, RuntimeError, UnicodeDecodeError, zipfile.BadZipFile) as e:
            # a truncated .npy / model.pt, garbage JSON, a missing key: one line, not numpy's traceback
            raise InputError(
                f"{d}: cannot load this {cls.method or cls.__name__} model ({type(e).__name__}: "
                f"{e}); the folder is damaged or incomplete, train it again"
            ) from None
        obj.fingerprint_ = directory_digest(d)
        return obj


def save_array(path: Path, arr: np.ndarray) -> None:
    from sentkit.core.io import atomic_open

    with atomic_open(path, "wb") as f:
        np.save(f, arr)
