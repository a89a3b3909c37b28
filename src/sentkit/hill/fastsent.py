"""FastSent and FastSent+AE (Hill et al., 2016).

Each word has a source vector ``u_w`` and a target vector ``v_w``. A sentence is the sum of
its source vectors, ``s_i = sum_{w in S_i} u_w``; training maximises, with negative
sampling, ``log sigma(s_i . v_w)`` for every word ``w`` of the adjacent sentences
S(i-1), S(i+1) of the same document (and of S_i itself for +AE), against ``k`` words drawn
from the unigram distribution to the power 3/4.

The training loop is compiled with numba when it is installed (``pip install numba``,
part of the ``hill`` extra); without numba the same code runs in pure Python, which is
correct but about 100x slower. Randomness is a word2vec-style linear congruential generator
seeded from ``config.seed``, so a run is reproducible bit for bit.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.interface import sum_rows
from sentkit.data.sentences import CorpusSource, TokenizedCorpus, Vocabulary
from sentkit.hill.common import (
    HillModel,
    RateLogger,
    adjacent_pairs,
    load_corpus,
    require_neighbours,
    require_vocabulary,
    save_array,
)
from sentkit.hill.configs import FastSentAEConfig, FastSentConfig

log = logging.getLogger(__name__)

try:  # pragma: no cover - depends on the environment
    from numba import njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False

    def njit(*args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        if args and callable(args[0]):
            return args[0]
        return lambda f: f


NEG_TABLE_SIZE = 10_000_000


def negative_table(counts: np.ndarray, size: int = NEG_TABLE_SIZE, power: float = 0.75) -> np.ndarray:
    """Word ids laid out so that a uniform index draws word w with p ~ count_w ** power.

    counts: int [V] -> int32 [size]."""
    p = counts.astype(np.float64) ** power
    cum = np.cumsum(p / p.sum())
    cum[-1] = 1.0
    return np.searchsorted(cum, (np.arange(size) + 0.5) / size).astype(np.int32)


def keep_probabilities(counts: np.ndarray, sample: float) -> np.ndarray:
    """word2vec's sub-sampling: keep w with p = (sqrt(f/(s*T)) + 1) * s*T/f (capped at 1)."""
    if sample <= 0:
        return np.ones(counts.shape[0], dtype=np.float32)
    thr = sample * float(counts.sum())
    f = counts.astype(np.float64)
    return np.minimum(1.0, (np.sqrt(f / thr) + 1.0) * thr / np.maximum(f, 1.0)).astype(np.float32)


@njit(cache=True, fastmath=True, nogil=True)
def _train_fastsent(
    tokens: np.ndarray,  # int32 [n_tokens]
    offsets: np.ndarray,  # int64 [n_sent + 1]
    doc_ids: np.ndarray,  # int32 [n_sent]
    w_in: np.ndarray,  # float32 [V, d]
    w_out: np.ndarray,  # float32 [V, d]
    table: np.ndarray,  # int32 [T]
    keep: np.ndarray,  # float32 [V]
    start: int,
    stop: int,
    autoencode: bool,
    mean: bool,
    negative: int,
    alpha0: float,
    min_alpha: float,
    words_before: int,
    total_words: int,
    rng_state: np.uint64,
    stable: bool,
) -> tuple[np.uint64, int]:
    """Train on sentences [start, stop); returns (rng state, words processed).

    ``stable`` scales the updates by the sentence's size (see ``FastSentConfig.stable``);
    without it the updates are Hill et al.'s, which diverge at alpha 0.025 on long runs."""
    d = w_in.shape[1]
    n_sent = offsets.shape[0] - 1
    tsize = np.uint64(table.shape[0])
    mul = np.uint64(25214903917)
    inc = np.uint64(11)
    sh = np.uint64(16)
    r = rng_state
    h = np.zeros(d, dtype=np.float32)
    grad = np.zeros(d, dtype=np.float32)
    src = np.empty(512, dtype=np.int64)
    words_done = 0
    for i in range(start, stop):
        a, b = offsets[i], offsets[i + 1]
        n_words = b - a
        words_done += n_words
        if n_words == 0:
            continue
        frac = (words_before + words_done) / max(total_words, 1)
        alpha = alpha0 - (alpha0 - min_alpha) * frac
        if alpha < min_alpha:
            alpha = min_alpha
        # source: the sentence's (sub-sampled) words, at most 512
        ns = 0
        for j in range(a, b):
            w = tokens[j]
            if keep[w] < 1.0:
                r = r * mul + inc
                if keep[w] < ((r >> sh) & np.uint64(0xFFFF)) / 65536.0:
                    continue
            if ns < 512:
                src[ns] = w
                ns += 1
        if ns == 0:
            continue
        h[:] = 0.0
        for j in range(ns):
            h += w_in[src[j]]
        if mean:
            h /= ns
        # stable, sum: target vectors move by g * h / ns (the mean of the source vectors), so
        # a step's change of s_i . v_c no longer grows with the square of the sentence's length
        out_scale = np.float32(1.0 / ns) if stable and not mean else np.float32(1.0)
        n_targets = 0
        grad[:] = 0.0
        for rel in range(-1, 2):
            k = i + rel
            if rel == 0 and not autoencode:
                continue
            if k < 0 or k >= n_sent or doc_ids[k] != doc_ids[i]:
                continue
            for j in range(offsets[k], offsets[k + 1]):
                t = tokens[j]
                if keep[t] < 1.0:
                    r = r * mul + inc
                    if keep[t] < ((r >> sh) & np.uint64(0xFFFF)) / 65536.0:
                        continue
                n_targets += 1
                for neg in range(negative + 1):
                    if neg == 0:
                        c = t
                        label = 1.0
                    else:
                        r = r * mul + inc
                        c = table[(r >> sh) % tsize]
                        if c == t:
                            continue
                        label = 0.0
                    f = np.float32(0.0)
                    for x in range(d):
                        f += h[x] * w_out[c, x]
                    if f > 6.0:
                        sig = 1.0
                    elif f < -6.0:
                        sig = 0.0
                    else:
                        sig = 1.0 / (1.0 + math.exp(-f))
                    g = np.float32((label - sig) * alpha)
                    for x in range(d):
                        grad[x] += g * w_out[c, x]
                        w_out[c, x] += g * out_scale * h[x]
        # As in Hill et al.'s code, s_i stays fixed over the sentence's targets and, for the
        # sum, each source word gets the error divided by the number of source words.
        if not mean:
            grad /= ns
        elif stable and n_targets > 0:
            # stable, mean: the error is averaged over the targets (a mini-batch mean)
            grad /= n_targets
        for j in range(ns):
            w_in[src[j]] += grad
    return r, words_done


class FastSent(HillModel[FastSentConfig]):
    """FastSent sentence encoder (``autoencode=True`` gives FastSent+AE).

    Learned state: ``vocab_`` (Vocabulary), ``source_`` [V, dim] and ``target_`` [V, dim]
    float32, ``train_stats_`` (words, seconds, words/s)."""

    method = "fastsent"
    config_cls = FastSentConfig

    def fit(self, corpus: CorpusSource | TokenizedCorpus) -> FastSent:
        cfg = self.config
        data = load_corpus(corpus, cfg, self.method)
        vocab = Vocabulary(min_count=cfg.min_count).fit(data)
        require_vocabulary(data, len(vocab), cfg.min_count, self.method)
        tokens, offsets = data.encode_with(vocab)
        if not cfg.autoencode:
            require_neighbours(
                data,
                adjacent_pairs(data, np.diff(offsets)),
                self.method,
                f"two adjacent sentences of one document with words seen >= {cfg.min_count} times",
            )
        n_sent = len(data)
        if cfg.max_steps is not None:
            n_sent = min(n_sent, cfg.max_steps)
        rng = np.random.default_rng(cfg.seed)
        dim = cfg.dim
        # word2vec initialisation: source uniform in [-0.5/d, 0.5/d], target zeros
        w_in = ((rng.random((len(vocab), dim), dtype=np.float32) - 0.5) / dim).astype(np.float32)
        w_out = np.zeros((len(vocab), dim), dtype=np.float32)
        table = negative_table(vocab.counts_, size=min(NEG_TABLE_SIZE, max(100_000, 100 * len(vocab))))
        keep = keep_probabilities(vocab.counts_, cfg.sample)
        total = int(offsets[n_sent]) * cfg.epochs
        state = np.uint64(int(rng.integers(1, 2**62)))
        rate = RateLogger(f"{self.method} training")
        from tqdm.auto import tqdm

        chunk = 20_000
        done = 0
        with tqdm(
            total=n_sent * cfg.epochs, desc=self.method, unit=" sent", disable=not cfg.progress, mininterval=1.0
        ) as bar:
            for _ in range(cfg.epochs):
                for s in range(0, n_sent, chunk):
                    e = min(n_sent, s + chunk)
                    state, words = _train_fastsent(
                        tokens,
                        offsets,
                        data.doc_ids,
                        w_in,
                        w_out,
                        table,
                        keep,
                        s,
                        e,
                        cfg.autoencode,
                        cfg.average,
                        cfg.negative,
                        cfg.alpha,
                        cfg.min_alpha,
                        done,
                        total,
                        state,
                        cfg.stable,
                    )
                    state = np.uint64(state)
                    done += int(words)
                    rate.update(int(words))
                    bar.update(e - s)
        self.train_stats_ = rate.close()
        if not HAVE_NUMBA:
            log.warning("numba is not installed: FastSent ran in pure Python (pip install numba)")
        self.vocab_ = vocab
        self.source_ = w_in
        self.target_ = w_out
        self.dim_ = dim
        return self

    def _encode(self, texts: list[str]) -> np.ndarray:
        """Sum (or mean, with ``average``) of source vectors: float32 [n, dim]."""
        return sum_rows(self.token_ids(texts), self.source_, average=self.config.average)

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Rows of `token_table()` per text (sentkit.core.interface.BagOfVectors)."""
        self._check_fitted("source_")
        return [self.vocab_.encode(self.tokenize(t)) for t in texts]

    def token_table(self) -> np.ndarray:
        self._check_fitted("source_")
        return self.source_

    def _save_state(self, d: Path) -> dict[str, Any]:
        self._check_fitted("source_")
        self.vocab_.save(d / "vocab.tsv")
        save_array(d / "source.npy", self.source_)
        save_array(d / "target.npy", self.target_)
        return {"dim": self.dim_, "train_stats": self.train_stats_}

    def _load_state(self, d: Path, state: dict[str, Any]) -> None:
        self.vocab_ = Vocabulary.load(d / "vocab.tsv")
        self.source_ = np.load(d / "source.npy")
        self.target_ = np.load(d / "target.npy")
        self.dim_ = int(state["dim"])
        self.train_stats_ = state.get("train_stats", {})


class FastSentAE(FastSent):
    """FastSent+AE: also predicts the sentence's own words."""

    method = "fastsent-ae"
    config_cls = FastSentAEConfig
