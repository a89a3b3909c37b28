"""What the tests share (plain functions, no fixtures): the tiny corpus and models of
scripts/check_support.py (which the GPU check shares too), the training helpers (`support.training`),
tiny random decoders (`support.decoders`) and the torchrun worker (`support/ddp_worker.py`).

`tests/` and `scripts/` are on the import path through pytest's `pythonpath` setting
(pyproject.toml) and, for the processes a test starts, through PYTHONPATH (tests/conftest.py)."""

from __future__ import annotations

from check_support import WORDS, bert_mlm, make_docs

__all__ = ["WORDS", "bert_mlm", "make_docs"]
