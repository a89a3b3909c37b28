"""Tiny offline fixtures for the Hill et al. baselines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sentkit.data.sentences import TokenizedCorpus, read_corpus

TOPICS = {
    "sea": ["ship", "sailor", "waves", "ocean", "harbour", "captain", "boat", "storm", "anchor", "sail"],
    "farm": ["cow", "farmer", "barn", "field", "wheat", "plough", "horse", "hay", "pig", "tractor"],
    "city": ["street", "taxi", "office", "subway", "tower", "crowd", "market", "bus", "shop", "traffic"],
    "war": ["soldier", "army", "battle", "sword", "cannon", "general", "fort", "enemy", "rifle", "march"],
}
FILLER = ["the", "a", "he", "she", "saw", "and", "then", "with", "was", "near"]


def estimator_methods() -> list[str]:
    """Every method of the one registry (sentkit.core.methods.METHODS) whose code is an estimator
    (fit / encode / save / load): the Hill et al. models and the others, wherever they live."""
    from sentkit.core.methods import method_names
    from sentkit.hill import model_class

    def is_estimator(name: str) -> bool:
        try:
            model_class(name)
        except ValueError:
            return False
        return True

    return [n for n in method_names() if is_estimator(n)]


def make_documents(n_docs: int = 24, n_sent: int = 12, seed: int = 0) -> list[str]:
    """Documents that each stay on one topic: adjacent sentences share topic words."""
    rng = np.random.default_rng(seed)
    names = sorted(TOPICS)
    docs = []
    for d in range(n_docs):
        words = TOPICS[names[d % len(names)]]
        sents = []
        for _ in range(n_sent):
            n = int(rng.integers(4, 8))
            toks = [str(w) for w in rng.choice(words, size=n)]
            toks[1:1] = [str(rng.choice(FILLER))]
            sents.append(" ".join(toks).capitalize() + ".")
        docs.append(" ".join(sents))
    return docs


@pytest.fixture(scope="module")
def one_thread():  # type: ignore[no-untyped-def]
    """Tiny networks run fastest on one torch thread (and the CI box may be busy)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def documents() -> list[str]:
    return make_documents()


@pytest.fixture(scope="session")
def corpus(documents: list[str]) -> TokenizedCorpus:
    return read_corpus(documents, progress=False)


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory, documents: list[str]) -> Path:
    d = tmp_path_factory.mktemp("corpus")
    for i, text in enumerate(documents):
        (d / f"doc{i:02d}.txt").write_text(text + "\n", encoding="utf-8")
    return d


def topic_of(sentence: str) -> str:
    for name, words in TOPICS.items():
        if any(w in words for w in sentence.lower().replace(".", "").split()):
            return name
    raise AssertionError(sentence)


def neighbour_beats_random(emb: np.ndarray, data: TokenizedCorpus, seed: int = 0) -> float:
    """Fraction of sentences closer (cosine) to their next sentence than to a random
    sentence of another topic's document."""
    rng = np.random.default_rng(seed)
    e = emb / (np.linalg.norm(emb, axis=1, keepdims=True) + 1e-9)
    doc = data.doc_ids
    wins, total = 0, 0
    for i in range(len(data) - 1):
        if doc[i + 1] != doc[i]:
            continue
        others = np.flatnonzero(doc % 4 != doc[i] % 4)
        j = int(rng.choice(others))
        wins += float(e[i] @ e[i + 1]) > float(e[i] @ e[j])
        total += 1
    return wins / total


def topic_separation(vectors: np.ndarray, index: dict[str, int]) -> float:
    """Mean cosine of same-topic word pairs minus mean cosine of cross-topic pairs
    (about 0 for random vectors)."""
    names = sorted(TOPICS)
    rows = {t: np.stack([vectors[index[w]] for w in TOPICS[t]]) for t in names}
    rows = {t: r / np.linalg.norm(r, axis=1, keepdims=True) for t, r in rows.items()}
    same, cross = [], []
    for a in names:
        for b in names:
            s = rows[a] @ rows[b].T
            if a == b:
                same.append(s[~np.eye(len(s), dtype=bool)].mean())
            else:
                cross.append(s.mean())
    return float(np.mean(same) - np.mean(cross))
