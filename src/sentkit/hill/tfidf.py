"""Unigram TF-IDF bag of words over the ``max_features`` most common words (paper: 200,000).

``fit`` learns the vocabulary and idf weights with scikit-learn (each sentence is one
document; idf = ln((1 + n) / (1 + df)) + 1, rows L2-normalised, as ``TfidfVectorizer``).
``encode_sparse`` returns a SciPy CSR matrix; ``encode`` the same as a dense float32 array
(wide: pass small batches), which is what the evaluation suite needs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.data.sentences import CorpusSource, TokenizedCorpus
from sentkit.hill.common import (
    HillModel,
    RateLogger,
    load_corpus,
    require_vocabulary,
    save_array,
)
from sentkit.hill.configs import TfidfConfig

log = logging.getLogger(__name__)


def _identity(tokens: list[str]) -> list[str]:
    return tokens


def document_frequency(data: TokenizedCorpus, n: int) -> np.ndarray:
    """Sentences (of the first ``n``) that contain each word type: int64 [n_types]."""
    end = int(data.offsets[n])
    sent = np.repeat(np.arange(n), np.diff(data.offsets[: n + 1]))
    pairs = np.unique(sent.astype(np.int64) * len(data.words) + data.tokens[:end])
    return np.bincount(pairs % max(1, len(data.words)), minlength=len(data.words))


class TfidfBOW(HillModel[TfidfConfig]):
    """Learned state: ``vocab_`` (word -> column), ``idf_`` float32 [V]."""

    method = "tfidf"
    config_cls = TfidfConfig

    def fit(self, corpus: CorpusSource | TokenizedCorpus) -> TfidfBOW:
        from sklearn.feature_extraction.text import TfidfVectorizer

        cfg = self.config
        data = load_corpus(corpus, cfg, self.method)
        n = len(data) if cfg.max_steps is None else min(cfg.max_steps, len(data))
        require_vocabulary(data, int((document_frequency(data, n) >= cfg.min_count).sum()), cfg.min_count, self.method)
        rate = RateLogger(f"{self.method} training")
        sents = (s for i, s in zip(range(n), data.iter_sentences()))
        vec = TfidfVectorizer(
            analyzer=_identity,
            max_features=cfg.max_features,
            min_df=cfg.min_count,
            sublinear_tf=cfg.sublinear_tf,
            dtype=np.float32,
        )
        vec.fit(sents)
        rate.update(int(data.offsets[n]))
        self.train_stats_ = rate.close()
        self.vocab_: dict[str, int] = {str(w): int(i) for w, i in vec.vocabulary_.items()}
        self.idf_ = np.asarray(vec.idf_, dtype=np.float32)
        self.dim_ = len(self.vocab_)
        return self

    def encode_sparse(self, texts: str | Sequence[str]) -> Any:
        """scipy.sparse CSR float32 [n, V] (n = 1 for a single str), rows L2-normalised."""
        import scipy.sparse as sp

        from sentkit.core.interface import as_text_list

        self._check_fitted("idf_")
        texts, _ = as_text_list(texts)
        v = self.vocab_
        indptr = [0]
        indices: list[int] = []
        values: list[float] = []
        for t in texts:
            counts: dict[int, int] = {}
            for w in self.tokenize(t):
                j = v.get(w)
                if j is not None:
                    counts[j] = counts.get(j, 0) + 1
            for j in sorted(counts):
                tf = counts[j]
                indices.append(j)
                values.append((1.0 + np.log(tf)) if self.config.sublinear_tf else float(tf))
            indptr.append(len(indices))
        ind = np.asarray(indices, dtype=np.int64)
        val = np.asarray(values, dtype=np.float32) * self.idf_[ind]
        m = sp.csr_matrix((val, ind, np.asarray(indptr)), shape=(len(texts), self.dim_), dtype=np.float32)
        norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
        norms[norms == 0] = 1.0
        return sp.csr_matrix(sp.diags(1.0 / norms).astype(np.float32) @ m)

    def _encode(self, texts: list[str]) -> np.ndarray:
        """Dense float32 [n, V] (V up to max_features: encode in small batches)."""
        return np.asarray(self.encode_sparse(texts).toarray(), dtype=np.float32)

    def _save_state(self, d: Path) -> dict[str, Any]:
        self._check_fitted("idf_")
        from sentkit.core.io import atomic_write_text

        words = sorted(self.vocab_, key=self.vocab_.__getitem__)
        atomic_write_text(d / "vocab.txt", "\n".join(words) + "\n")
        save_array(d / "idf.npy", self.idf_)
        return {"dim": self.dim_, "train_stats": self.train_stats_}

    def _load_state(self, d: Path, state: dict[str, Any]) -> None:
        words = (d / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
        self.vocab_ = {w: i for i, w in enumerate(words)}
        self.idf_ = np.load(d / "idf.npy")
        self.dim_ = int(state["dim"])
        self.train_stats_ = state.get("train_stats", {})
