"""The `sif` method (`sentkit train --method sif --model NAME --corpus C --out DIR`, or a cell of an experiment
grid): SIF weighting (`sentkit.models.sif`, Arora et al. 2017) of any model that averages word vectors, fitted
on the user's own corpus. It counts the words of the whole corpus with the base's own tokenization, fits the
first singular vector on the seeded sample of sentences `sentkit whiten` takes (100,000 sentences of >= 3 words
by default), and saves `sif.npz` with the base (as `sentkit whiten` keeps it), which `sentkit.load` reads back
as the base's vectors, SIF-weighted. It takes a model by name, so it lives above the resolver.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.config import ConfigError
from sentkit.core.methods import Method
from sentkit.models.sif import SIF, first_components, sif_weights

log = logging.getLogger(__name__)

SIF_FILE = "sif.npz"


def count_tokens(
    encoder: Any, corpus: str, *, field: str = "text", batch: int = 2048, progress: bool = False
) -> tuple[np.ndarray, int]:
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
            report.add_document(len(sents))
            pending.extend(sents)
            n += len(sents)
            bar.update(len(sents))
            if len(pending) >= batch:
                flush()
        if pending:
            flush()
    if n == 0:
        raise report.error("no sentence to count words in", "bring documents of plain text")
    if counts.sum() == 0:
        raise report.error(
            "no word of the corpus is in the model's vocabulary, nothing to weigh",
            "bring documents of plain text in the model's language",
        )
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
    from sentkit.core.interface import BagOfVectors
    from sentkit.core.io import atomic_open
    from sentkit.core.methods import write_marker
    from sentkit.models.loading import load
    from sentkit.training.whiten import keep_base, require_inputs, sample_sentences

    require_inputs("sif", cfg.model, cfg.corpus, cfg.out, "the word-vector encoder to weigh")
    base = load(cfg.model)
    if not isinstance(base, BagOfVectors):
        raise ConfigError(
            f"sif: {cfg.model} is not an encoder that averages word vectors (averaged GloVe, CBOW / "
            f"SkipGram, FastSent, wordpiece-skipgram); whiten it instead (--method whiten)"
        )
    counts, n_sents = count_tokens(base, cfg.corpus, field=cfg.text_field, progress=cfg.progress)
    weights = sif_weights(counts, cfg.a)
    sentences, total = sample_sentences(
        cfg.corpus,
        cfg.max_sentences,
        min_words=cfg.min_words,
        seed=cfg.seed,
        field=cfg.text_field,
        purpose="to fit the common component on",
    )
    log.info(
        "sif: word counts over %d sentences (%d tokens); components fitted on %d of %d sentences",
        n_sents,
        int(counts.sum()),
        len(sentences),
        total,
    )
    unfitted = SIF(base, weights, np.zeros((0, int(base.token_table().shape[1])), dtype=np.float32))
    x = np.concatenate(
        [unfitted.raw(sentences[i : i + cfg.batch_size]) for i in range(0, len(sentences), cfg.batch_size)]
    )
    pcs = first_components(x, cfg.components)
    out = Path(cfg.out)
    kept = keep_base(cfg.model, out)
    with atomic_open(out / SIF_FILE, "wb") as f:
        np.savez(f, weights=weights, pcs=pcs, counts=counts)
    info = {
        "base_model": cfg.model,
        "fitted_on": cfg.corpus,
        "a": cfg.a,
        "components": cfg.components,
        "counted_sentences": n_sents,
        "counted_tokens": int(counts.sum()),
        "sentences": len(sentences),
        "corpus_sentences": total,
        "seed": cfg.seed,
    }
    write_marker(out, "sif", base=kept, sif=info)
    return out


def load_sif(path: Path) -> SIF:
    """What `train_sif` saved."""
    from sentkit.training.whiten import load_base, read_kept

    path = Path(path)
    marker = read_kept(path, SIF_FILE, "sentkit train --method sif")
    with np.load(path / SIF_FILE) as z:
        return SIF(load_base(path, marker), z["weights"], z["pcs"], name=f"{marker['base']} SIF")


SIF_METHOD = Method("sif", SifConfig, train_sif, load_sif)  # listed in sentkit.core.methods.METHODS
