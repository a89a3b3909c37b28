"""SIF: smooth inverse frequency weighting of word vectors with the first principal component removed
(Arora, Liang and Ma, ICLR 2017, "A simple but tough-to-beat baseline for sentence embeddings"), fitted on
the user's own corpus, for any encoder that averages rows of one table (`sentkit.encoder.BagOfVectors`:
averaged GloVe, CBOW / SkipGram, FastSent, wordpiece skip-gram).

The maths (pure functions): a word w of corpus probability p(w) weighs a / (a + p(w)); a sentence is the
weighted mean of its word vectors, (1/|s|) sum_w a / (a + p(w)) v_w (the paper's Algorithm 1 and its code,
which divides by the number of words); the first singular vector u of the matrix of those vectors over a
corpus sample (not centred, as the paper's code) is removed, v - u u^T v.

`sentkit train --method sif --model NAME --corpus C --out DIR` (or a cell of an experiment grid) counts the
words of the whole corpus with the base's own tokenization, fits u on the same seeded sample of sentences
`sentkit whiten` uses (100,000 sentences of >= 3 words by default), and saves a folder that `sentkit.load`
reads back as the base's vectors, SIF-weighted (`sif.npz` and the base, as `sentkit whiten` keeps it).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.config import ConfigError

log = logging.getLogger(__name__)

SIF_FILE = "sif.npz"


# ----------------------------------------------------------------------------- the maths
def sif_weights(counts: np.ndarray, a: float = 1e-3) -> np.ndarray:
    """a / (a + p(w)) per row of the table, p(w) = counts / counts.sum(); float32 [V]. A word the corpus
    lacks has p = 0 and weight 1 (the paper's code gives words missing from its frequency file 1.0)."""
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1 or (c < 0).any():
        raise ValueError("counts must be a 1-d array of non-negative numbers")
    if a <= 0:
        raise ValueError(f"a must be positive, got {a}")
    total = c.sum()
    p = c / total if total > 0 else c
    return (a / (a + p)).astype(np.float32)


def weighted_average(ids: list[list[int]], table: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per list of rows: (1/len) sum_i weights[i] table[i]; zeros for an empty list. float32 [n, dim]."""
    from sentkit.encoder import sum_rows

    return sum_rows(ids, table * weights[:, None], average=True, accumulate=np.float64)


def first_components(x: np.ndarray, k: int = 1) -> np.ndarray:
    """The first k right singular vectors of x [n, d] (rows not centred), float32 [k, d]."""
    x64 = np.asarray(x, dtype=np.float64)
    if x64.ndim != 2 or len(x64) < 1 or not 0 <= k <= x64.shape[1]:
        raise ValueError(f"need a matrix [n >= 1, d >= k], got {x64.shape} with k = {k}")
    s, u = np.linalg.eigh(x64.T @ x64)  # x^T x = V S^2 V^T, ascending
    return u[:, np.argsort(s)[::-1][:k]].T.astype(np.float32)


def remove_components(x: np.ndarray, pcs: np.ndarray) -> np.ndarray:
    """x - x pcs^T pcs: each row without its projection on the (orthonormal) rows of pcs; float32."""
    x64 = np.asarray(x, dtype=np.float64)
    p = np.asarray(pcs, dtype=np.float64)
    return (x64 - (x64 @ p.T) @ p).astype(np.float32)


# ----------------------------------------------------------------------------- an encoder, SIF-weighted
class SIF:
    """A bag-of-vectors encoder's words SIF-weighted, first component(s) removed."""

    def __init__(self, base: Any, weights: np.ndarray, pcs: np.ndarray, name: str = "sif") -> None:
        from sentkit.encoder import BagOfVectors

        if not isinstance(base, BagOfVectors):
            raise ConfigError(f"{name}: SIF needs an encoder that averages word vectors (averaged GloVe, CBOW / "
                              f"SkipGram, FastSent, wordpiece-skipgram), got {type(base).__name__}")
        table = base.token_table()
        if weights.shape != (len(table),) or pcs.shape[1:] != (table.shape[1],):
            raise ConfigError(f"{name}: the saved weights {weights.shape} / components {pcs.shape} do not fit the "
                              f"base's table {table.shape}; fit the SIF again")
        self.base, self.weights, self.pcs, self.name = base, weights, pcs, name
        self._table = table

    @property
    def dim(self) -> int:
        return int(self._table.shape[1])

    def raw(self, texts: list[str]) -> np.ndarray:
        """The weighted averages before component removal, float32 [n, dim]."""
        return weighted_average(self.base.token_ids(texts), self._table, self.weights)

    def encode(self, texts: str | Sequence[str], batch_size: int = 32, *, show_progress: bool = False) -> np.ndarray:
        from sentkit.encoder import encode_texts

        return encode_texts(lambda b: remove_components(self.raw(b), self.pcs), texts, batch_size, dim=self.dim,
                            show_progress=show_progress, desc=f"{self.name} encode")

    def fingerprint(self) -> str | None:
        base = getattr(self.base, "fingerprint", None)
        base_fp = base() if callable(base) else base
        if base_fp is None:
            return None
        h = hashlib.sha256(f"sif|{base_fp}".encode())
        h.update(np.ascontiguousarray(self.weights).tobytes() + np.ascontiguousarray(self.pcs).tobytes())
        return h.hexdigest()[:20]


def count_tokens(encoder: Any, corpus: str, *, field: str = "text", batch: int = 2048,
                 progress: bool = False) -> tuple[np.ndarray, int]:
    """How often each row of `encoder.token_table()` occurs in every sentence of `corpus` (the base's own
    tokenization), and the number of sentences read."""
    from tqdm.auto import tqdm

    from sentkit.data.corpus import CorpusStats
    from sentkit.data.sentences import ReadReport, iter_document_sentences

    counts = np.zeros(len(encoder.token_table()), dtype=np.int64)
    report = ReadReport(str(corpus), CorpusStats())
    pending: list[str] = []
    n = 0

    def flush() -> None:
        ids = encoder.token_ids(pending)
        flat = np.fromiter((i for x in ids for i in x), dtype=np.int64)
        counts[:] += np.bincount(flat, minlength=len(counts))
        pending.clear()

    with tqdm(desc="sif: counting words", unit=" sent", disable=not progress) as bar:
        for sents in iter_document_sentences(corpus, field=field, stats=report.files):
            pending.extend(sents)
            n += len(sents)
            bar.update(len(sents))
            if len(pending) >= batch:
                flush()
        if pending:
            flush()
    if counts.sum() == 0:
        raise report.error("no word of the corpus is in the model's vocabulary, nothing to weigh",
                           "bring documents of plain text in the model's language")
    return counts, n


# ----------------------------------------------------------------------------- the method
@dataclass
class SifConfig:
    """`sentkit train --method sif`: SIF weights of `model`'s words counted on all of `corpus`, the first
    `components` singular vectors fitted on up to `max_sentences` sentences of it (the sample `sentkit whiten`
    takes with the same seed), saved at `out`."""

    model: str = ""  # any model name that averages word vectors (sentkit.load)
    corpus: str = ""
    out: str = ""
    a: float = 1e-3  # the paper's default (its range of good values: 1e-4 to 1e-3)
    components: int = 1
    max_sentences: int = 100_000
    min_words: int = 3
    seed: int = 0
    batch_size: int = 512
    text_field: str = "text"
    progress: bool = True

    def __post_init__(self) -> None:
        if not self.a > 0:
            raise ConfigError(f"a must be positive, got {self.a}")
        if self.components < 0:
            raise ConfigError(f"components must be 0 or more, got {self.components}")
        if self.max_sentences < 1 or self.min_words < 1 or self.batch_size < 1:
            raise ConfigError("max_sentences, min_words and batch_size must be at least 1")


def train_sif(cfg: SifConfig) -> Path:
    """Fit and save (see the module docstring)."""
    from sentkit.encoder import BagOfVectors
    from sentkit.io import atomic_open
    from sentkit.loading import load
    from sentkit.methods import write_marker
    from sentkit.models.whitening import keep_base, sample_sentences

    if not cfg.model:
        raise ConfigError("sif: no model given (--model NAME: the word-vector encoder to weigh)")
    if not cfg.corpus or not cfg.out:
        raise ConfigError("sif: --corpus and --out are required")
    base = load(cfg.model)
    if not isinstance(base, BagOfVectors):
        raise ConfigError(f"sif: {cfg.model} is not an encoder that averages word vectors (averaged GloVe, CBOW / "
                          f"SkipGram, FastSent, wordpiece-skipgram); whiten it instead (--method whiten)")
    counts, n_sents = count_tokens(base, cfg.corpus, field=cfg.text_field, progress=cfg.progress)
    weights = sif_weights(counts, cfg.a)
    sentences, total = sample_sentences(cfg.corpus, cfg.max_sentences, min_words=cfg.min_words, seed=cfg.seed,
                                        field=cfg.text_field)
    log.info("sif: word counts over %d sentences (%d tokens); components fitted on %d of %d sentences",
             n_sents, int(counts.sum()), len(sentences), total)
    unfitted = SIF(base, weights, np.zeros((0, int(base.token_table().shape[1])), dtype=np.float32))
    x = np.concatenate([unfitted.raw(sentences[i : i + cfg.batch_size])
                        for i in range(0, len(sentences), cfg.batch_size)])
    pcs = first_components(x, cfg.components)
    out = Path(cfg.out)
    kept = keep_base(cfg.model, out)
    with atomic_open(out / SIF_FILE, "wb") as f:
        np.savez(f, weights=weights, pcs=pcs, counts=counts)
    info = {"base_model": cfg.model, "fitted_on": cfg.corpus, "a": cfg.a, "components": cfg.components,
            "counted_sentences": n_sents, "counted_tokens": int(counts.sum()), "sentences": len(sentences),
            "corpus_sentences": total, "seed": cfg.seed}
    write_marker(out, "sif", base=kept, sif=info)
    return out


def load_sif(path: Path) -> SIF:
    """What `train_sif` saved."""
    from sentkit.methods import read_marker
    from sentkit.models.whitening import load_base

    path = Path(path)
    marker = read_marker(path) or {}
    if not (path / SIF_FILE).is_file() or "base" not in marker:
        raise ConfigError(f"{path}: not a folder written by `sentkit train --method sif` (no {SIF_FILE} or base); "
                          "the folder is damaged, fit the SIF again")
    with np.load(path / SIF_FILE) as z:
        return SIF(load_base(path, marker), z["weights"], z["pcs"], name=f"{marker['base']} SIF")


def _register() -> None:
    from sentkit.methods import Method, register_method

    register_method(Method("sif", SifConfig, train_sif, load_sif,
                           "SIF (Arora et al. 2017) of any averaged-word-vector model: word weights a/(a+p(w)) "
                           "counted on the corpus, first principal component removed"))


_register()
