"""Word2vec and paragraph-vector baselines through gensim (``pip install gensim``).

- ``cbow`` / ``skipgram``: word vectors trained on the corpus; a sentence is the sum (the
  paper) or mean of its words' vectors.
- ``paragraph-vector-dbow`` / ``-dm``: Doc2Vec with one paragraph per sentence; new
  sentences are embedded by gensim's ``infer_vector`` (gradient steps, hence slow).

gensim seeds its vectors with ``hash(word + str(seed))``; Python's ``hash`` changes between
processes, so a deterministic hash is passed (also to ``infer_vector``'s start vector) and
``workers=1`` (default) makes runs reproducible bit for bit. `sentkit.training.wordpiece_skipgram`
(skip-gram over a transformer's wordpieces) trains through the same gensim and hash.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.interface import sum_rows
from sentkit.data.sentences import CorpusSource, TokenizedCorpus
from sentkit.hill.common import (
    HillModel,
    RateLogger,
    load_corpus,
    require_vocabulary,
)
from sentkit.hill.configs import ParagraphVectorConfig, Word2VecConfig

log = logging.getLogger(__name__)


def stable_hash(text: str) -> int:
    """A hash that is the same in every process (gensim's ``hashfxn``)."""
    return zlib.crc32(text.encode("utf-8"))


@contextlib.contextmanager
def _stable_start_vectors() -> Iterator[None]:
    """Within the block, ``Doc2Vec.infer_vector`` seeds its start vector with ``stable_hash``."""
    import gensim.models.doc2vec as d2v

    original = d2v.pseudorandom_weak_vector
    d2v.pseudorandom_weak_vector = functools.partial(original, hashfxn=stable_hash)
    try:
        yield
    finally:
        d2v.pseudorandom_weak_vector = original


def _gensim() -> Any:
    try:
        import gensim
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("gensim is needed for this method: pip install gensim (or 'sentkit[hill]')") from None
    return gensim


def gensim_options(cfg: Any) -> dict[str, Any]:
    """The keyword arguments every gensim model here shares (Word2Vec, Doc2Vec): sizes, negative sampling or,
    with ``negative = 0``, hierarchical softmax, subsampling, threads, and the seed with a hash stable across
    processes (so that a run is reproducible)."""
    return {
        "vector_size": cfg.dim,
        "window": cfg.window,
        "min_count": cfg.min_count,
        "negative": cfg.negative,
        "hs": 0 if cfg.negative > 0 else 1,
        "sample": cfg.sample,
        "workers": cfg.workers,
        "seed": cfg.seed,
        "hashfxn": stable_hash,
    }


class _Sentences:
    """Restartable iterable of token lists (at most ``limit`` sentences)."""

    def __init__(self, data: TokenizedCorpus, limit: int | None) -> None:
        self.data, self.limit = data, limit

    def __iter__(self) -> Iterator[list[str]]:
        for i, s in enumerate(self.data.iter_sentences()):
            if self.limit is not None and i >= self.limit:
                return
            yield s

    def __len__(self) -> int:
        return len(self.data) if self.limit is None else min(self.limit, len(self.data))


def _gensim_corpus(corpus: CorpusSource | TokenizedCorpus, cfg: Any, method: str) -> TokenizedCorpus:
    """The corpus, refused (with the fix) when no word of the sentences trained on reaches min_count."""
    data = load_corpus(corpus, cfg, method)
    n = len(data) if cfg.max_steps is None else min(cfg.max_steps, len(data))
    counts = np.bincount(data.tokens[: int(data.offsets[n])], minlength=len(data.words))
    require_vocabulary(data, int((counts >= cfg.min_count).sum()), cfg.min_count, method)
    return data


class Word2VecSum(HillModel[Word2VecConfig]):
    """Sum of word2vec vectors. Learned state: ``vocab_`` (word -> row), ``vectors_`` [V, dim]."""

    method = "cbow"
    config_cls = Word2VecConfig
    sg = 0

    def fit(self, corpus: CorpusSource | TokenizedCorpus) -> Word2VecSum:
        gensim = _gensim()
        cfg = self.config
        data = _gensim_corpus(corpus, cfg, self.method)
        sents = _Sentences(data, cfg.max_steps)
        n_words = int(data.offsets[len(sents)])
        rate = RateLogger(f"{self.method} training")
        model = gensim.models.Word2Vec(sg=self.sg, **gensim_options(cfg))
        model.build_vocab(sents)
        model.train(sents, total_examples=len(sents), epochs=cfg.epochs)
        rate.update(n_words * cfg.epochs)
        self.train_stats_ = rate.close()
        kv = model.wv
        self.vocab_: dict[str, int] = {w: i for i, w in enumerate(kv.index_to_key)}
        self.vectors_ = np.asarray(kv.vectors, dtype=np.float32)
        self.dim_ = cfg.dim
        return self

    def _encode(self, texts: list[str]) -> np.ndarray:
        """float32 [n, dim]: sum (or mean) of the vectors of known words; zeros if none."""
        return sum_rows(self.token_ids(texts), self.vectors_, average=self.config.average)

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Rows of `token_table()` per text: its known words (sentkit.core.interface.BagOfVectors)."""
        self._check_fitted("vectors_")
        v = self.vocab_
        return [[v[w] for w in self.tokenize(t) if w in v] for t in texts]

    def token_table(self) -> np.ndarray:
        self._check_fitted("vectors_")
        return self.vectors_

    def _save_state(self, d: Path) -> dict[str, Any]:
        self._check_fitted("vectors_")
        from sentkit.core.io import atomic_write_text
        from sentkit.hill.common import save_array

        words = sorted(self.vocab_, key=self.vocab_.__getitem__)
        atomic_write_text(d / "vocab.txt", "\n".join(words) + "\n")
        save_array(d / "vectors.npy", self.vectors_)
        return {"dim": self.dim_, "train_stats": self.train_stats_}

    def _load_state(self, d: Path, state: dict[str, Any]) -> None:
        words = (d / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
        self.vocab_ = {w: i for i, w in enumerate(words)}
        self.vectors_ = np.load(d / "vectors.npy")
        self.dim_ = int(state["dim"])
        self.train_stats_ = state.get("train_stats", {})


class SkipGramSum(Word2VecSum):
    method = "skipgram"
    sg = 1


class ParagraphVector(HillModel[ParagraphVectorConfig]):
    """Doc2Vec DBOW (``dm = 0``) or DM (``dm = 1``); learned state ``model_`` (gensim Doc2Vec)."""

    method = "paragraph-vector-dbow"
    config_cls = ParagraphVectorConfig
    dm = 0

    def fit(self, corpus: CorpusSource | TokenizedCorpus) -> ParagraphVector:
        gensim = _gensim()
        from gensim.models.doc2vec import TaggedDocument

        cfg = self.config
        data = _gensim_corpus(corpus, cfg, self.method)
        sents = _Sentences(data, cfg.max_steps)

        class _Tagged:
            def __iter__(self) -> Iterator[Any]:
                for i, s in enumerate(sents):
                    yield TaggedDocument(s, [i])

        n_words = int(data.offsets[len(sents)])
        rate = RateLogger(f"{self.method} training")
        model = gensim.models.Doc2Vec(dm=self.dm, epochs=cfg.epochs, **gensim_options(cfg))
        tagged = _Tagged()
        model.build_vocab(tagged)
        model.train(tagged, total_examples=len(sents), epochs=cfg.epochs)
        rate.update(n_words * cfg.epochs)
        self.train_stats_ = rate.close()
        self.model_ = model
        self.dim_ = cfg.dim
        return self

    def _encode(self, texts: list[str]) -> np.ndarray:
        """float32 [n, dim] by ``infer_vector`` (zeros for a sentence without words). A sentence
        always gets the same vector, in any order and any process: the model's RNG is reseeded
        per sentence from its text, and gensim's start vector (seeded with Python's ``hash``,
        which changes between processes) is seeded with a stable hash instead."""
        self._check_fitted("model_")
        epochs = self.config.infer_epochs or self.config.epochs
        out = np.zeros((len(texts), self.dim_), dtype=np.float32)
        with _stable_start_vectors():
            for i, t in enumerate(texts):
                toks = self.tokenize(t)
                if not toks:  # gensim would seed the start vector from global state
                    continue
                self.model_.random = np.random.RandomState(stable_hash(t) + self.config.seed)
                out[i] = self.model_.infer_vector(toks, epochs=epochs)
        return out

    def _save_state(self, d: Path) -> dict[str, Any]:
        self._check_fitted("model_")
        self.model_.save(str(d / "doc2vec.model"))
        return {"dim": self.dim_, "train_stats": self.train_stats_}

    def _load_state(self, d: Path, state: dict[str, Any]) -> None:
        gensim = _gensim()
        self.model_ = gensim.models.Doc2Vec.load(str(d / "doc2vec.model"))
        self.dim_ = int(state["dim"])
        self.train_stats_ = state.get("train_stats", {})


class ParagraphVectorDM(ParagraphVector):
    method = "paragraph-vector-dm"
    dm = 1
