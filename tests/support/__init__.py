"""What the tests share (plain functions, no fixtures): the tiny corpus and models of
scripts/check_support.py (which the GPU check shares too), the training helpers (`support.training`),
tiny random decoders (`support.decoders`) and the torchrun worker (`support/ddp_worker.py`).

`tests/` and `scripts/` are on the import path through pytest's `pythonpath` setting
(pyproject.toml) and, for the processes a test starts, through PYTHONPATH (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from check_support import WORDS, bert_mlm, make_docs

__all__ = ["WORDS", "bert_mlm", "make_docs", "write_sentence_docs"]


def write_sentence_docs(folder: Path, docs: int = 4, per_doc: int = 12, seed: int = 0) -> Path:
    """`folder` filled with `docs` documents of `per_doc` short random sentences each (a corpus for a
    sentence store: SimCSE, TSDAE); the same files for the same arguments."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for d in range(docs):
        sents = [" ".join(rng.choice(WORDS, size=int(rng.integers(5, 12)))).capitalize() + "." for _ in range(per_doc)]
        (folder / f"doc{d}.txt").write_text(" ".join(sents), encoding="utf-8")
    return folder
