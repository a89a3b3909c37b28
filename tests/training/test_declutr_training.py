"""DeCLUTR through the one loop: exact gradients (caching, ranks, dropout replay), resume, saving."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from sentkit.data.store import TokenStore, prepare_store
from sentkit.models.hub import load_tokenizer
from sentkit.training.distributed import DistInfo
from sentkit.training.loop import corpus_subset, train
from sentkit.training.metrics import read_metrics
from sentkit.training.recipe import Seeds, dropout_seed
from sentkit.training.recipes.declutr import Declutr
from support.training import build, small_config, step_gradients, torchrun

HERE = Path(__file__).parent
Q = "model.encoder.encoder.layer.0.attention.self.query.weight"


@pytest.fixture()
def store(tiny_corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> Path:
    tok = load_tokenizer(str(tiny_model_dir))
    prepare_store(tiny_corpus, tok, tmp_path / "store", min_doc_tokens=2 * 32 * 2, show_progress=False)
    return tmp_path / "store"


def _assert_grads_close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], atol: float = 1e-6) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=atol, rtol=1e-4), (
            k,
            float((a[k] - b[k]).abs().max()),
            float(a[k].abs().max()),
        )


def _key(grads: dict[str, torch.Tensor]) -> str:
    return next(k for k in grads if k.endswith("layer.0.attention.self.query.weight"))


def test_grad_cache_equals_full_batch(store: Path, tiny_model_dir: Path) -> None:
    docs = [0, 1, 2, 3]
    full = step_gradients(str(tiny_model_dir), str(store), small_config(str(store), "x"), docs, DistInfo())
    cached = step_gradients(
        str(tiny_model_dir), str(store), small_config(str(store), "x", grad_accum=2, grad_cache=True), docs, DistInfo()
    )
    plain = step_gradients(
        str(tiny_model_dir), str(store), small_config(str(store), "x", grad_accum=2), docs, DistInfo()
    )
    _assert_grads_close(full, cached)
    # without caching each micro-batch only sees its own negatives: gradients differ
    k = _key(full)
    assert not torch.allclose(full[k], plain[k], atol=1e-6)


def test_grad_cache_replays_dropout(store: Path, tiny_model_dir: Path) -> None:
    """With dropout on, the cached step equals one graph over the same micro-batches and dropout
    seeds; a replay with other dropout masks would not."""
    cfg = small_config(str(store), "x", grad_accum=2, grad_cache=True)
    cached = step_gradients(str(tiny_model_dir), str(store), cfg, [0, 1, 2, 3], DistInfo(), dropout=0.1)
    oracle = step_gradients(str(tiny_model_dir), str(store), cfg, [0, 1, 2, 3], DistInfo(), dropout=0.1, reference=True)
    no_drop = step_gradients(str(tiny_model_dir), str(store), cfg, [0, 1, 2, 3], DistInfo())
    _assert_grads_close(cached, oracle)
    k = _key(cached)
    assert not torch.allclose(cached[k], no_drop[k], atol=1e-5), "dropout was not on"


@pytest.mark.parametrize("objective", [{"contrastive": False}, {"mlm": False}, {}])
@pytest.mark.parametrize("cache", [{}, {"grad_accum": 2, "grad_cache": True}])
def test_each_objective_alone_gives_its_own_gradients(
    store: Path, tiny_model_dir: Path, objective: dict[str, bool], cache: dict[str, object]
) -> None:
    """The loop's step equals one graph of exactly the losses switched on (contrastive=false once still
    trained the contrastive loss, unlogged: the MLM-only ablation was full DeCLUTR)."""
    cfg = small_config(str(store), "x", **objective, **cache)
    got = step_gradients(str(tiny_model_dir), str(store), cfg, [0, 1, 2, 3], DistInfo())
    oracle = step_gradients(str(tiny_model_dir), str(store), cfg, [0, 1, 2, 3], DistInfo(), reference=True)
    _assert_grads_close(got, oracle)
    if objective:
        both = step_gradients(
            str(tiny_model_dir), str(store), small_config(str(store), "x", **cache), [0, 1, 2, 3], DistInfo()
        )
        k = _key(got)
        assert not torch.allclose(got[k], both[k], atol=1e-6)


def test_dropout_streams_follow_seed_rank_step_and_chunk() -> None:
    base = dropout_seed(0, 0, 5, 0, 0)
    assert base == dropout_seed(0, 0, 5, 0, 0)
    others = {
        dropout_seed(1, 0, 5, 0, 0),
        dropout_seed(0, 1, 5, 0, 0),
        dropout_seed(0, 0, 6, 0, 0),
        dropout_seed(0, 0, 5, 1, 0),
        dropout_seed(0, 0, 5, 0, 1),
    }
    assert base not in others and len(others) == 5
    assert Seeds(3, 1, 7, 2).chunk(4) == dropout_seed(3, 1, 7, 2, 4)


def test_seed_changes_dropout_masks(store: Path, tiny_model_dir: Path) -> None:
    a = step_gradients(
        str(tiny_model_dir), str(store), small_config(str(store), "x", seed=0), [0, 1, 2, 3], DistInfo(), dropout=0.1
    )
    cfg1 = small_config(str(store), "x", seed=1)
    recipe, module = build(str(tiny_model_dir), cfg1, dropout=0.1)
    # same data (the spans of seed 0), other seed's dropout: rebuild seed-0 batch, run with seed-1 streams
    from sentkit.training.step import StepContext, forward_backward

    b_batch = build(str(tiny_model_dir), small_config(str(store), "x", seed=0))[0].batch(
        TokenStore(store), [0, 1, 2, 3], 0
    )
    ctx = StepContext(recipe, module, cfg1, torch.device("cpu"), DistInfo(), torch.amp.GradScaler("cpu", enabled=False))
    forward_backward(ctx, b_batch, 0)
    b = {n: p.grad for n, p in module.named_parameters() if p.grad is not None}
    k = _key(a)
    assert not torch.allclose(a[k], b[k], atol=1e-6)


def test_anchors_are_masked_and_positives_are_not(store: Path, tiny_model_dir: Path) -> None:
    tok = load_tokenizer(str(tiny_model_dir))
    recipe, _ = build(str(tiny_model_dir), small_config(str(store), "x"))
    batch = recipe.batch(TokenStore(store), [0, 1, 2, 3], 0)
    n_anchor = batch.num_units * batch.per_unit
    anchors, positives = batch.seqs[:n_anchor], batch.seqs[n_anchor:]
    assert len(positives) == n_anchor * batch.num_positives
    mask_id = tok.mask_token_id
    masked = sum(t == mask_id for s in anchors for t in s)
    labelled = sum(t != -100 for lb in batch.labels[:n_anchor] for t in lb)
    assert labelled > 0 and masked >= 0.6 * labelled, "anchors carry [MASK] where they have labels"
    assert all(mask_id not in s for s in positives), "positives are never masked"
    assert all(lb is None for lb in batch.labels[n_anchor:])
    assert batch.counts["mlm"] == labelled
    for s, lb in zip(anchors, batch.labels[:n_anchor]):
        assert all(y != mask_id for y in lb), "a label is the original token"
        assert all(t != mask_id for t, y in zip(s, lb) if y == -100), "no [MASK] where nothing is predicted"


def test_positives_are_averaged(store: Path, tiny_model_dir: Path) -> None:
    """The second view of an anchor is the mean of its P positive embeddings."""
    cfg = small_config(str(store), "x", mlm=False)
    recipe, module = build(str(tiny_model_dir), cfg)
    module.eval()
    batch = recipe.batch(TokenStore(store), [0, 1], 0)
    with torch.no_grad():
        out = module(batch, [0, 1], Seeds(0, 0, 0, 0))
        n_anchor = 2 * batch.per_unit
        pos = [batch.seqs[n_anchor + i] for i in range(n_anchor * batch.num_positives)]
        single = torch.stack([module.model(torch.tensor([s]), None, None)[0][0] for s in pos])  # [k*P, d]
    expected = single.view(n_anchor, batch.num_positives, -1).mean(dim=1)
    assert out.views is not None
    assert torch.allclose(out.views[1], expected, atol=1e-5)
    assert not torch.allclose(out.views[1], single.view(n_anchor, batch.num_positives, -1)[:, 0], atol=1e-4)


def run_ddp(model_dir: Path, store: Path, tmp_path: Path, *specs: dict) -> list[dict]:
    """Each spec's step under torchrun (2 processes), all in one launch (see tests/support/ddp_worker.py)."""
    out = tmp_path / f"ddp_{abs(hash(json.dumps(specs, sort_keys=True)))}.pt"
    res = torchrun(HERE.parent / "support" / "ddp_worker.py", str(model_dir), str(store), str(out), json.dumps(specs))
    assert res.returncode == 0, res.stderr[-3000:]
    return torch.load(out)  # type: ignore[no-any-return]


@pytest.mark.slow
def test_ddp_two_processes_match_one(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """2 gloo processes under DistributedDataParallel: the plain step and the gradient-cached step
    (dropout off) equal one process on the whole batch; with dropout on, the cached step equals the
    one-graph oracle under DDP (dropout is replayed on every rank). (The whole loop under torchrun,
    every method: test_multiprocess.py.)"""
    docs = [0, 1, 2, 3]
    single = step_gradients(str(tiny_model_dir), str(store), small_config(str(store), "x"), docs, DistInfo())
    single8 = step_gradients(
        str(tiny_model_dir), str(store), small_config(str(store), "x", batch_size=8), list(range(8)), DistInfo()
    )
    single_fl = step_gradients(
        str(tiny_model_dir), str(store), small_config(str(store), "x", pooling="first-last-avg"), docs, DistInfo()
    )
    plain, cached, cached_off, first_last = run_ddp(
        tiny_model_dir,
        store,
        tmp_path,
        {"units": docs, "config": small_config_dict()},
        {
            "units": [0, 1, 2, 3, 4, 5, 6, 7],
            "config": small_config_dict(batch_size=8, grad_accum=2, grad_cache=True),
            "dropout": 0.1,
            "reference": True,
        },
        {"units": list(range(8)), "config": small_config_dict(batch_size=8, grad_accum=2, grad_cache=True)},
        {"units": docs, "config": small_config_dict(pooling="first-last-avg")},
    )
    _assert_grads_close(single, plain["step"], atol=1e-6)
    _assert_grads_close(single_fl, first_last["step"], atol=1e-6)  # the raw-text recipe's pooling
    assert not torch.allclose(single_fl[_key(single_fl)], single[_key(single)])  # that pooling was used
    _assert_grads_close(cached["step"], cached["reference"], atol=1e-6)
    _assert_grads_close(single8, cached_off["step"], atol=1e-6)


def small_config_dict(**kw: object) -> dict:
    base = {"num_anchors": 2, "num_positives": 2, "min_span_len": 8, "max_span_len": 32, "batch_size": 4}
    return {**base, **kw}


def _state(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path / "checkpoint" / "state.pt", weights_only=False)["model"]


@pytest.mark.parametrize("dropout", [False, True])
def test_exact_resume(
    store: Path, tiny_model_dir: Path, tiny_dropout_model_dir: Path, tmp_path: Path, dropout: bool
) -> None:
    k = 3
    model = str(tiny_dropout_model_dir if dropout else tiny_model_dir)
    straight = small_config(str(store), str(tmp_path / "straight"), model=model, max_steps=2 * k, checkpoint_every=k)
    train(straight, Declutr)
    cut = small_config(str(store), str(tmp_path / "cut"), model=model, max_steps=2 * k, checkpoint_every=k)
    train(cut, Declutr, stop_at=k)  # "killed" right after the checkpoint at step k
    assert not (tmp_path / "cut" / "model.safetensors").exists()
    resumed = small_config(
        str(store), str(tmp_path / "cut"), model=model, max_steps=2 * k, checkpoint_every=k, resume=True
    )
    train(resumed, Declutr)
    a, b = _state(tmp_path / "straight"), _state(tmp_path / "cut")
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert [int(r["step"]) for r in read_metrics(tmp_path / "cut" / "metrics.csv")] == list(range(1, 2 * k + 1))


def test_snapshots_save_the_encoder_part_way_and_change_nothing(
    store: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """A snapshot at step k holds the weights a run stopped at k holds (the checkpoint's), with the CPU seconds spent
    so far; the run that saved it ends with the same weights as one that did not."""
    import sentkit
    from sentkit.core.methods import read_marker

    k, model = 2, str(tiny_model_dir)
    plain = small_config(str(store), str(tmp_path / "plain"), model=model, max_steps=4, checkpoint_every=k)
    train(plain, Declutr)
    snap = small_config(str(store), str(tmp_path / "snap"), model=model, max_steps=4, checkpoint_every=k, snapshots=[k])
    train(snap, Declutr)
    a, b = _state(tmp_path / "plain"), _state(tmp_path / "snap")
    assert all(torch.equal(a[n], b[n]) for n in a)
    folder = tmp_path / "snap" / "snapshots" / f"step-{k}"
    info = (read_marker(folder) or {})["snapshot"]
    assert (info["step"], info["of"]) == (k, 4) and info["cpu_seconds"] > 0 and info["seconds"] > 0
    cut = small_config(str(store), str(tmp_path / "cut"), model=model, max_steps=4, checkpoint_every=k)
    train(cut, Declutr, stop_at=k)
    from safetensors.torch import load_file

    got, want = load_file(str(folder / "model.safetensors")), _state(tmp_path / "cut")  # the checkpoint at step k
    suffix = "layer.0.attention.self.query.weight"
    assert torch.equal(
        next(v for n, v in got.items() if n.endswith(suffix)), next(v for n, v in want.items() if n.endswith(suffix))
    )
    assert not torch.equal(
        next(v for n, v in got.items() if n.endswith(suffix)), next(v for n, v in a.items() if n.endswith(suffix))
    )  # not the end of the run
    texts = ["The river runs.", "Bread and music."]
    assert sentkit.load(str(folder)).encode(texts).shape == (
        2,
        sentkit.load(str(tmp_path / "snap")).encode(texts).shape[1],
    )


def test_training_lowers_contrastive_loss(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    cfg = small_config(
        str(store), str(tmp_path / "run"), model=str(tiny_model_dir), max_steps=30, lr=1e-3, mlm=False, batch_size=8
    )
    out = train(cfg, Declutr)
    losses = np.array([r["contrastive"] for r in read_metrics(out / "metrics.csv")])
    assert losses[-5:].mean() < losses[:5].mean() - 0.3


def test_saved_model_loads_in_sentence_transformers(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    import sentkit
    from sentkit.models.hub import load_mlm

    out = train(small_config(str(store), str(tmp_path / "m"), model=str(tiny_model_dir), max_steps=2), Declutr)
    texts = ["a river in winter", "the captain's letter arrived in the morning", ""]
    ours = sentkit.load(str(out)).encode(texts)
    st = SentenceTransformer(str(out), device="cpu").encode(texts)
    assert ours.dtype == np.float32 and ours.shape == (3, 32)
    assert np.abs(ours - st).max() < 1e-5
    from transformers import AutoModel

    assert AutoModel.from_pretrained(str(out)).config.hidden_size == 32
    cfg = json.loads((out / "train_config.json").read_text())
    assert cfg["max_steps"] == 2 and cfg["model"] == str(tiny_model_dir)
    assert "DeCLUTR" in (out / "README.md").read_text()
    # the folder is also a masked-LM checkpoint: its MLM head is the trained one, not a fresh one
    mlm, _ = load_mlm(str(out))
    state = torch.load(out / "checkpoint" / "state.pt", weights_only=False)["model"]
    head = next(k for k in state if k.endswith("predictions.transform.dense.weight"))
    assert torch.equal(dict(mlm.named_parameters())[head.split("mlm_model.", 1)[1]].detach(), state[head])


def test_store_is_read_without_retokenizing(store: Path, tiny_model_dir: Path, tiny_corpus: Path) -> None:
    s = TokenStore(store)
    tok = load_tokenizer(str(tiny_model_dir))
    first = sorted(tiny_corpus.glob("*.txt"))[0].read_text()
    assert s.doc(0).tolist() == tok(first, add_special_tokens=False)["input_ids"]


def test_tensorboard_logger_and_cpu_bf16(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    out = train(
        small_config(
            str(store),
            str(tmp_path / "tb"),
            model=str(tiny_model_dir),
            max_steps=2,
            logger="tensorboard",
            precision="bf16",
        ),
        Declutr,
    )
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    rows = read_metrics(out / "metrics.csv")
    assert len(rows) == 2 and all(np.isfinite(r["loss"]) for r in rows)


def test_corpus_fraction_subsets_are_nested() -> None:
    small, mid, full = corpus_subset(1000, 0.1), corpus_subset(1000, 0.3), corpus_subset(1000, 1.0)
    assert len(small) == 100 and len(mid) == 300 and len(full) == 1000
    assert set(small) <= set(mid) <= set(full)


def test_runs_share_a_prepared_dir(tiny_corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """The first run prepares the raw corpus into prepared_dir; a second run reuses it unchanged; a run
    with other document-length settings prepares it again."""
    shared = tmp_path / "shared-store"
    kw = dict(model=str(tiny_model_dir), max_steps=1, prepared_dir=str(shared))
    train(small_config(str(tiny_corpus), str(tmp_path / "a"), **kw), Declutr)
    stamp = (shared / "meta.json").stat().st_mtime_ns
    assert not (tmp_path / "a" / "prepared").exists()
    train(small_config(str(tiny_corpus), str(tmp_path / "b"), **kw), Declutr)
    assert (shared / "meta.json").stat().st_mtime_ns == stamp  # reused, not rewritten
    train(small_config(str(tiny_corpus), str(tmp_path / "c"), max_doc_tokens=300, **kw), Declutr)
    assert json.loads((shared / "meta.json").read_text())["max_doc_tokens"] == 300


def test_a_few_long_books_train_with_defaults(tmp_path: Path, tiny_model_dir: Path) -> None:
    """Six long documents: the default cuts them into pieces, so a batch of 16 documents fits."""
    from support import make_docs

    books = tmp_path / "six_books"
    books.mkdir()
    for i, text in enumerate(make_docs(6, 4000, seed=3)):
        (books / f"book{i}.txt").write_text(text)
    cfg = small_config(str(books), str(tmp_path / "run"), model=str(tiny_model_dir), max_steps=2, batch_size=16)
    assert cfg.max_doc_tokens == "auto"
    out = train(cfg, Declutr)
    assert (out / "model.safetensors").is_file()
    assert TokenStore(out / "prepared").meta["max_doc_tokens"] == 2 * 2 * 32 * 2


def test_one_permutation_per_epoch(
    store: Path, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop permutes the units once per epoch (not once per step), and its steps take the same
    units as before: step s of an epoch is slice s of that epoch's permutation."""
    import sentkit.training.batching as batching

    calls: list[int] = []
    real = batching.doc_order

    def counted(num_docs: int, epoch: int, seed: int) -> np.ndarray:
        calls.append(epoch)
        return real(num_docs, epoch, seed)

    monkeypatch.setattr(batching, "doc_order", counted)
    seen: list[list[int]] = []
    real_batch = Declutr.batch
    monkeypatch.setattr(
        Declutr, "batch", lambda self, s, units, step: seen.append(units) or real_batch(self, s, units, step)
    )
    n = len(TokenStore(store))
    per_epoch = n // 4
    train(
        small_config(str(store), str(tmp_path / "r"), model=str(tiny_model_dir), max_steps=2 * per_epoch + 1), Declutr
    )
    assert calls == [0, 1, 2]
    expected = [
        real(n, s // per_epoch, 0)[(s % per_epoch) * 4 : (s % per_epoch + 1) * 4].tolist()
        for s in range(2 * per_epoch + 1)
    ]
    assert seen == expected
