"""SimCSE, TSDAE and MLM on the one loop: their objectives against oracles, exact resume, the saved
encoder (two processes: test_multiprocess.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sentkit.core.config import from_dict
from sentkit.core.methods import get_method, method_target
from sentkit.data.packing import Packing
from sentkit.objectives.contrastive import info_nce
from sentkit.objectives.noise import delete_words, word_ids
from sentkit.training.loop import train
from sentkit.training.metrics import read_metrics, training_history
from sentkit.training.recipe import Seeds
from support.training import build

METHODS = ("simcse", "tsdae", "mlm")


def cfg_of(method: str, corpus: Path | str, out: Path | str, **kw: object) -> object:
    base: dict[str, object] = {
        "corpus": str(corpus),
        "out": str(out),
        "progress": False,
        "log_every": 1,
        "batch_size": 4,
        "checkpoint_every": 1000,
    }
    if method == "mlm":
        base["seq_len"] = 32
    return from_dict(get_method(method).config_cls, {**base, **kw}, where=method)


@pytest.fixture()
def sentences(tmp_path: Path) -> Path:
    """A folder of documents made of many short sentences (for sentence stores)."""
    from support import write_sentence_docs

    return write_sentence_docs(tmp_path / "sents")


def _store(method: str, corpus: Path, model_dir: Path, tmp_path: Path) -> Path:
    """The store `method` prepares from `corpus` (through one short training run)."""
    out = tmp_path / f"prep-{method}"
    train(cfg_of(method, corpus, out, model=str(model_dir), max_steps=1), method_target(method))
    return out / "prepared"


# ----------------------------------------------------------------------------- SimCSE
def test_simcse_loss_is_info_nce_of_two_dropout_views(
    sentences: Path, tiny_dropout_model_dir: Path, tmp_path: Path
) -> None:
    from sentkit.data.store import TokenStore

    store = _store("simcse", sentences, tiny_dropout_model_dir, tmp_path)
    cfg = cfg_of("simcse", store, "x")
    recipe, module = build(str(tiny_dropout_model_dir), cfg)
    batch = recipe.batch(TokenStore(store), [0, 1, 2, 3], 0)
    out = module(batch, [0, 1, 2, 3], Seeds(0, 0, 0, 0))
    assert out.views is not None
    a, p = out.views
    assert not torch.allclose(a, p, atol=1e-4), "dropout makes the two views differ"
    assert torch.allclose(recipe.contrastive(a, p), info_nce(a, p, 0.05, symmetric=False))
    # SimCSE's loss is one-directional over the N positives (not NT-Xent over 2N)
    sim = torch.nn.functional.normalize(a, dim=-1) @ torch.nn.functional.normalize(p, dim=-1).T / 0.05
    loop = sum(-sim[i, i] + torch.logsumexp(sim[i], 0) for i in range(4)) / 4
    assert float(recipe.contrastive(a, p).detach()) == pytest.approx(float(loop.detach()), rel=1e-5)


def test_simcse_without_dropout_has_identical_views(sentences: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """Dropout off: the two views are the same vector, so the loss is the mean over texts of
    logsumexp_j(S_ij / tau) - S_ii / tau with S_ii = 1; for identical texts, log(batch)."""
    from sentkit.data.store import TokenStore

    store = _store("simcse", sentences, tiny_model_dir, tmp_path)
    recipe, module = build(str(tiny_model_dir), cfg_of("simcse", store, "x"))
    batch = recipe.batch(TokenStore(store), [0, 1, 2, 3], 0)
    out = module(batch, [0, 1, 2, 3], Seeds(0, 0, 0, 0))
    assert out.views is not None
    a, p = out.views
    assert torch.allclose(a, p, atol=1e-6)
    z = torch.nn.functional.normalize(a, dim=-1)
    s = z @ z.T
    expected = (torch.logsumexp(s / 0.05, dim=1) - 1 / 0.05).mean()
    assert float(recipe.contrastive(a, p).detach()) == pytest.approx(float(expected.detach()), rel=1e-4)
    same = batch.seqs[0]
    batch.seqs = [same] * 4
    out = module(batch, [0, 1, 2, 3], Seeds(0, 0, 0, 0))
    assert out.views is not None
    assert float(recipe.contrastive(*out.views)) == pytest.approx(math.log(4), rel=1e-4)


# ----------------------------------------------------------------------------- TSDAE
@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=60), st.integers(0, 2**32 - 1), st.floats(0.0, 0.95))
def test_deletion_keeps_whole_words_and_never_nothing(starts: list[bool], seed: int, ratio: float) -> None:
    continues = np.array([False, True])  # id 0 starts a word, id 1 continues it
    ids = np.array([0 if s else 1 for s in starts])
    words = word_ids(ids, continues)
    kept = delete_words(np.arange(len(ids)), words, ratio, np.random.default_rng(seed))
    assert 1 <= len(kept) <= len(ids)
    kept_words = set(words[kept].tolist())
    assert sorted(kept.tolist()) == [i for i in range(len(ids)) if words[i] in kept_words], "words stay whole"


def test_deletion_removes_the_expected_fraction() -> None:
    rng = np.random.default_rng(1)
    ids = np.arange(20000)
    words = np.arange(20000)  # one token per word
    kept = sum(len(delete_words(ids[i : i + 20], words[i : i + 20] - i, 0.6, rng)) for i in range(0, 20000, 20))
    assert abs(1 - kept / 20000 - 0.6) < 0.02
    one = [len(delete_words(np.array([7]), np.array([0]), 0.9, np.random.default_rng(s))) for s in range(50)]
    assert one == [1] * 50


def test_tsdae_decoder_is_causal_and_tied(sentences: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    from sentkit.data.store import TokenStore

    store = _store("tsdae", sentences, tiny_model_dir, tmp_path)
    recipe, module = build(str(tiny_model_dir), cfg_of("tsdae", store, "x"))
    enc = dict(module.mlm_model.named_parameters())
    dec = dict(module.decoder.named_parameters())
    own = [n for n in dec if n not in enc]
    assert own and all("crossattention" in n for n in own), own
    assert all(dec[n] is enc[n] for n in dec if n in enc), "every other decoder weight is the encoder's"
    module.eval()
    memory = torch.randn(1, 32)
    t = TokenStore(store).doc(0)[:8].tolist()
    seq = recipe.prefix + t + recipe.suffix
    changed = [*seq[:-3], seq[-3] + 1, *seq[-2:]]
    hid = [
        module.decoder_base(input_ids=torch.tensor([s[:-1]]), encoder_hidden_states=memory[:, None]).last_hidden_state
        for s in (seq, changed)
    ]
    k = len(seq) - 4  # positions before the changed token see the same prefix
    assert torch.allclose(hid[0][0, : k + 1], hid[1][0, : k + 1], atol=1e-6)
    assert not torch.allclose(hid[0][0, k + 1 :], hid[1][0, k + 1 :], atol=1e-6)


def test_tsdae_decoder_overfits_a_tiny_fixture(sentences: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """Fed the pooled vector of its own (noise-free) input, the decoder learns to reconstruct four
    sentences: the loss per token falls to near zero."""
    from sentkit.data.store import TokenStore

    store = _store("tsdae", sentences, tiny_model_dir, tmp_path)
    recipe, module = build(str(tiny_model_dir), cfg_of("tsdae", store, "x", deletion_ratio=0.0))
    batch = recipe.batch(TokenStore(store), [0, 1, 2, 3], 0)
    assert batch.noisy == batch.original
    opt = torch.optim.Adam(module.parameters(), lr=3e-3)
    first = last = 0.0
    for i in range(150):
        opt.zero_grad()
        out = module(batch, [0, 1, 2, 3], Seeds(0, 0, i, 0))
        loss = out.sums["reconstruction"] / batch.counts["reconstruction"]
        loss.backward()
        opt.step()
        first, last = (float(loss), float(loss)) if i == 0 else (first, float(loss))
    assert first > 5 and last < 0.1, (first, last)


# ----------------------------------------------------------------------------- MLM
@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=12), st.integers(1, 17))
def test_packing_separates_documents(lengths: list[int], body: int) -> None:
    """Sequences tile the stream doc0 SEP doc1 SEP ...: every document boundary inside a sequence
    is a separator, and the tokens come in order with nothing lost but the last partial body."""
    sep = -1
    docs = [np.arange(1000 * (d + 1), 1000 * (d + 1) + n) for d, n in enumerate(lengths)]
    tokens = np.concatenate(docs)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    pack = Packing(offsets, body, sep)
    stream = np.concatenate([np.append(d, sep) for d in docs])
    got = np.concatenate([pack.sequence(i, tokens) for i in range(len(pack))])
    expected_len = len(stream) - len(stream) % body if len(stream) >= body else len(stream)
    assert np.array_equal(got, stream[:expected_len])
    for i in range(len(pack)):
        s = pack.sequence(i, tokens)
        owners = s // 1000
        for j in range(1, len(s)):
            if s[j] != sep and s[j - 1] != sep:
                assert owners[j] == owners[j - 1], "two documents meet without a separator"


def test_mlm_batches_follow_the_masking_rules(tiny_model_dir: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    from sentkit.data.store import TokenStore

    store = _store("mlm", tiny_corpus, tiny_model_dir, tmp_path)
    recipe, _ = build(str(tiny_model_dir), cfg_of("mlm", store, "x"), "mlm")
    n = recipe.units(TokenStore(store))
    batch = recipe.batch(TokenStore(store), list(range(n)), 0)
    ids, labels = batch.ids, batch.labels
    special = set(recipe.tokenizer.all_special_ids)
    chosen = labels != -100
    assert not any(int(labels[r, c]) in special for r, c in chosen.nonzero().tolist())
    assert all(int(ids[r, 0]) == recipe.tokenizer.cls_token_id for r in range(len(ids)))
    rate = float(chosen.sum()) / float(ids.numel())
    assert 0.11 < rate < 0.17
    as_mask = float(((ids == recipe.tokenizer.mask_token_id) & chosen).sum()) / float(chosen.sum())
    assert 0.7 < as_mask < 0.9
    again = recipe.batch(TokenStore(store), list(range(n)), 1)
    assert not torch.equal(again.labels, labels), "a new mask every step (dynamic masking)"
    assert torch.equal(recipe.batch(TokenStore(store), list(range(n)), 0).labels, labels), "seeded by the step"


def test_mlm_from_scratch_learns_and_continues_with_declutr(
    tiny_model_dir: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    out = train(
        cfg_of(
            "mlm",
            tiny_corpus,
            tmp_path / "mlm",
            model=str(tiny_model_dir),
            max_steps=40,
            lr=2e-3,
            from_scratch=True,
            layers=1,
            hidden=32,
            heads=2,
            intermediate=64,
            train_tokenizer=True,
            vocab_size=300,
            batch_size=8,
        ),
        method_target("mlm"),
    )
    losses = [r["mlm"] for r in read_metrics(out / "metrics.csv")]
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.3
    cfg = json.loads((out / "config.json").read_text())
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(out)
    assert cfg["num_hidden_layers"] == 1 and cfg["vocab_size"] == len(tok) <= 300  # the corpus has few words
    assert tok.tokenize("river stone") == ["river", "stone"]
    # its output is a masked-LM checkpoint that DeCLUTR continues from (its head, not a fresh one)
    from sentkit.training.recipes.declutr import Declutr
    from support.training import small_config

    d = train(small_config(str(tiny_corpus), str(tmp_path / "declutr"), model=str(out), max_steps=1), Declutr)
    assert json.loads((d / "sentkit.json").read_text())["method"] == "declutr"
    assert "no MLM head" not in (d / "train.log").read_text()


# ----------------------------------------------------------------------------- every method
def _corpus(method: str, sentences: Path, tiny_corpus: Path) -> Path:
    return tiny_corpus if method == "mlm" else sentences


@pytest.mark.parametrize("method", METHODS)
def test_exact_resume_each_method(
    method: str, sentences: Path, tiny_corpus: Path, tiny_dropout_model_dir: Path, tmp_path: Path
) -> None:
    corpus = _corpus(method, sentences, tiny_corpus)
    kw = {"model": str(tiny_dropout_model_dir), "max_steps": 4, "checkpoint_every": 2, "log_every": 1}
    train(cfg_of(method, corpus, tmp_path / "straight", **kw), method_target(method))
    train(cfg_of(method, corpus, tmp_path / "cut", **kw), method_target(method), stop_at=2)
    train(cfg_of(method, corpus, tmp_path / "cut", resume=True, **kw), method_target(method))
    a = torch.load(tmp_path / "straight" / "checkpoint" / "state.pt", weights_only=False)["model"]
    b = torch.load(tmp_path / "cut" / "checkpoint" / "state.pt", weights_only=False)["model"]
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # the history across both processes counts the same tokens as the straight run
    straight, cut = training_history(tmp_path / "straight"), training_history(tmp_path / "cut")
    assert (cut["segments"], straight["segments"], cut["steps"]) == (2, 1, 4)
    assert abs(cut["tokens"] - straight["tokens"]) <= 1 and cut["earlier_s"] > 0


def test_training_history_counts_the_steps_a_resumed_model_kept(tmp_path: Path) -> None:
    # process 1 logged steps 2, 4, 6 (100 tokens a step) and died; process 2 resumed from the checkpoint at
    # step 4 and logged 6, 8 (its clock and token rate start again)
    rows = [(2, 100, 2.0), (4, 100, 4.0), (6, 100, 6.0), (6, 50, 4.0), (8, 50, 8.0)]  # step, tokens/s, elapsed
    (tmp_path / "metrics.csv").write_text(
        "step,loss,tokens_per_s,elapsed_s\n" + "".join(f"{s},1.0,{r},{e}\n" for s, r, e in rows)
    )
    (tmp_path / "train.log").write_text("x INFO resumed from out/checkpoint/state.pt at step 4 of 8\n")
    h = training_history(tmp_path)
    # kept: steps 1-4 of process 1 (400 tokens, 4 s) and 5-8 of process 2 (400 tokens, 8 s); redone: 2 s
    assert h == {"steps": 8, "tokens": 800, "seconds": 12.0, "segments": 2, "redone_s": 2.0, "earlier_s": 4.0}


@pytest.mark.parametrize("method", METHODS)
def test_saved_encoder_matches_sentence_transformers(
    method: str, sentences: Path, tiny_corpus: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    import sentkit
    from sentkit.experiments.grid import CellSpec

    out = train(
        cfg_of(method, _corpus(method, sentences, tiny_corpus), tmp_path / "m", model=str(tiny_model_dir), max_steps=2),
        method_target(method),
    )
    texts = ["a river in winter", "the captain's letter arrived in the morning"]
    ours = sentkit.load(str(out)).encode(texts)
    theirs = SentenceTransformer(str(out), device="cpu").encode(texts)
    assert np.abs(ours - theirs).max() < 1e-5
    card = (out / "README.md").read_text()
    assert f"sentkit {method} encoder" in card and '"lr"' in card
    assert json.loads((out / "sentkit.json").read_text())["method"] == method
    assert method in __import__("sentkit.core.methods", fromlist=["method_names"]).method_names()
    CellSpec(name="c", method=method)  # a grid cell can name it


def test_one_registry_every_method_is_one_entry() -> None:
    """Every name of sentkit.core.methods.METHODS resolves to a method of that name whose config is a
    dataclass, and a class that calls itself by another name is refused (its folders would name it)."""
    import dataclasses

    from sentkit.core.methods import METHODS, MethodEntry
    from sentkit.hill.common import HillModel

    for name in METHODS:
        method = get_method(name)
        assert method.name == name and dataclasses.is_dataclass(method.config_cls), name
        assert method.description == METHODS[name].description != "", name
    with pytest.raises(KeyError, match="Did you mean 'fastsent'"):
        get_method("fastsnet")

    class Misnamed(HillModel):  # type: ignore[type-arg]
        method = "other-name"

    old = dict(METHODS)
    try:
        METHODS["misnamed"] = MethodEntry(Misnamed, "")
        with pytest.raises(ValueError, match="the folders it saves would name another method"):
            get_method("misnamed")
    finally:
        METHODS.clear()
        METHODS.update(old)
