"""Shared machinery of the baselines: the base estimator (scikit-learn habits, directory
save/load), corpus loading with a config, and words-per-second logging."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from sentkit.baselines.configs import BaselineConfig
from sentkit.data.sentences import CorpusSource, TokenizedCorpus, read_corpus, tokenize

log = logging.getLogger(__name__)

C = TypeVar("C", bound=BaselineConfig)
M = TypeVar("M", bound="BaselineModel[Any]")

CONFIG_FILE = "config.json"


class NotFittedError(RuntimeError):
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
        log.info("%s: done, %d words in %.1fs (%.0f words/s)", self.what, self.words,
                 self.elapsed, self.rate)
        return {"words": float(self.words), "seconds": self.elapsed, "words_per_s": self.rate}


def load_corpus(source: CorpusSource | TokenizedCorpus, cfg: BaselineConfig) -> TokenizedCorpus:
    """A TokenizedCorpus from a path, a list of document strings, or as is."""
    if isinstance(source, TokenizedCorpus):
        return source if cfg.punctuation else source.without_punctuation()
    if isinstance(source, (str, Path)) and not str(source):
        from sentkit.config import ConfigError

        raise ConfigError("no corpus given: pass --corpus PATH (or corpus = \"...\" in the config)")
    return read_corpus(
        source,
        lowercase=cfg.lowercase,
        punctuation=cfg.punctuation,
        max_sentences=cfg.max_sentences,
        field=cfg.text_field,
        txt_mode=cfg.txt_mode,
        progress=cfg.progress,
    )


class BaselineModel(Generic[C]):
    """Base of every method: ``Model(config, **overrides).fit(corpus) -> self``;
    learned state in attributes ending with ``_``; ``save(dir)`` / ``Model.load(dir)``."""

    method: ClassVar[str] = ""
    config_cls: ClassVar[type[BaselineConfig]] = BaselineConfig

    def __init__(self, config: C | None = None, **overrides: Any) -> None:
        base = config if config is not None else self.config_cls()
        self.config: C = dataclasses.replace(base, **overrides) if overrides else base  # type: ignore[assignment]

    # -- to implement -----------------------------------------------------------------------
    def fit(self: M, corpus: Any) -> M:
        raise NotImplementedError

    def encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def _save_state(self, d: Path) -> dict[str, Any]:
        """Write learned arrays/files into ``d``; return JSON-able extra state."""
        raise NotImplementedError

    def _load_state(self, d: Path, state: dict[str, Any]) -> None:
        raise NotImplementedError

    # -- shared -----------------------------------------------------------------------------
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
        from sentkit.config import save_json
        from sentkit.io import atomic_write_text
        from sentkit.methods import write_marker

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
        from sentkit.config import from_dict

        d = Path(path)
        f = d / CONFIG_FILE
        if not f.is_file():
            raise FileNotFoundError(f"{f} not found: {d} is not a saved {cls.__name__} model")
        cfg = from_dict(cls.config_cls, json.loads(f.read_text(encoding="utf-8")), where=str(f))
        obj = cls(cfg)  # type: ignore[arg-type]
        state = json.loads((d / "state.json").read_text(encoding="utf-8"))
        obj._load_state(d, state)
        obj.fingerprint_ = directory_digest(d)
        return obj


def directory_digest(d: Path) -> str:
    """sha256 (16 hex digits) of the method and the contents of every file of a model folder
    (sub-folders such as the neighbour-index cache are left out)."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(p for p in d.iterdir() if p.is_file()):
        h.update(f.name.encode() + b"\0")
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def save_array(path: Path, arr: np.ndarray) -> None:
    from sentkit.io import atomic_open

    with atomic_open(path, "wb") as f:
        np.save(f, arr)


def sum_rows(
    ids: list[list[int]], table: np.ndarray, *, average: bool = False, accumulate: type = np.float32
) -> np.ndarray:
    """Sum (or mean) of ``table`` rows per list of ids; zeros for an empty list.

    ids: n lists; table: [V, d] -> float32 [n, d]. ``accumulate`` is the dtype the sums are taken in.
    """
    n, d = len(ids), int(table.shape[1])
    out = np.zeros((n, d), dtype=np.float32)
    lengths = np.fromiter((len(t) for t in ids), dtype=np.int64, count=n)
    nonempty = np.flatnonzero(lengths)
    if nonempty.size == 0:
        return out
    flat = np.fromiter((i for t in ids for i in t), dtype=np.int64, count=int(lengths.sum()))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[nonempty]
    sums = np.add.reduceat(table[flat].astype(accumulate), starts, axis=0)  # [k, d]
    if average:
        sums = sums / lengths[nonempty, None]
    out[nonempty] = sums
    return out
