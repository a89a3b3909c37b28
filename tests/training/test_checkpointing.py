"""Gradient checkpointing (`--set gradient_checkpointing=true`) on every transformer method: one step's gradients equal
the step without it (dropout off; the tiny BERT and a tiny Llama built from a config), while the forward keeps fewer
activations; DeCLUTR with GradCache and dropout on (its replay and checkpointing's recompute both restore the dropout
masks) too; llm2vec passes the key to both phases; a model that does not support it is one ConfigError."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import torch

from sentkit.core.config import ConfigError, from_dict
from sentkit.core.methods import get_method, method_target
from sentkit.data.store import TokenStore
from sentkit.models.mlm import is_checkpointing
from sentkit.training.distributed import DistInfo
from sentkit.training.loop import train
from sentkit.training.step import StepContext, forward_backward
from support.decoders import tiny_decoder

# method, base, settings: every method of the loop (CLM shares MNTP's module; TSDAE pools CLS, whose last layer is
# not checkpointed, see sentkit.models.mlm.first_token_only)
CASES = [
    ("declutr", "bert", {"num_anchors": 2, "num_positives": 2, "min_span_len": 8, "max_span_len": 32}),
    ("mlm", "bert", {"seq_len": 32}),
    ("simcse", "bert", {}),
    ("tsdae", "bert", {}),
    ("mntp", "llama", {"seq_len": 32}),
    ("simcse", "llama", {"dropout": 0.0, "pooling": "mean", "attention": "bidirectional"}),  # llm2vec phase 2
]
UNITS = [0, 1, 2, 3]


@pytest.fixture()
def sentences(tmp_path: Path) -> Path:
    """Documents of many short sentences (a sentence store for SimCSE and TSDAE)."""
    from support import write_sentence_docs

    return write_sentence_docs(tmp_path / "sents")


def config(method: str, corpus: Path, out: Path, model: Path, **kw: Any) -> Any:
    base = {"corpus": str(corpus), "out": str(out), "model": str(model), "progress": False, "batch_size": 4}
    return from_dict(get_method(method).config_cls, {**base, "checkpoint_every": 1000, **kw}, where=method)


def step(method: str, cfg: Any, store: Path, units: list[int]) -> tuple[dict[str, torch.Tensor], tuple[int, int]]:
    """(gradients of one loop step on `units`, (elements of the tensors saved for the backward, calls of linear
    layers): checkpointing saves less and calls the layers again in the backward pass)."""
    from sentkit.models.hub import position_limit

    recipe_cls = method_target(method)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        lm, tok = recipe_cls.load_model(cfg, Path(cfg.out))
        recipe = recipe_cls(cfg, lm, tok, position_limit(lm.config))
        module = recipe.module()
    for m in (lm, getattr(module, "decoder", lm)):  # TSDAE's decoder too
        assert is_checkpointing(m) == cfg.gradient_checkpointing
    module.train()
    module.token_budget = 1024
    module.autocast = contextlib.nullcontext
    tokens = TokenStore(store)
    recipe.units(tokens)
    batch = recipe.batch(tokens, units, 0)
    ctx = StepContext(recipe, module, cfg, torch.device("cpu"), DistInfo(), torch.amp.GradScaler("cpu", enabled=False))
    saved, calls = [0], [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved[0] += t.numel()
        return t

    def count(*_: Any) -> None:
        calls[0] += 1

    for m in module.modules():
        if isinstance(m, torch.nn.Linear):
            m.register_forward_hook(count)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        forward_backward(ctx, batch, 0)
    return {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}, (saved[0], calls[0])


def assert_equal_grads(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys() and a
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=1e-6, rtol=1e-5, msg=k)


@pytest.mark.parametrize(("method", "base", "settings"), CASES, ids=[f"{m}-{b}" for m, b, _ in CASES])
def test_checkpointed_step_has_the_same_gradients(
    method: str,
    base: str,
    settings: dict[str, Any],
    tiny_model_dir: Path,
    tiny_corpus: Path,
    sentences: Path,
    tmp_path: Path,
) -> None:
    model = tiny_model_dir if base == "bert" else tiny_decoder(base, tmp_path / base)
    corpus = sentences if method in ("simcse", "tsdae") else tiny_corpus
    # the loop itself runs with the key (and prepares the store both steps read)
    cfg = config(method, corpus, tmp_path / "run", model, max_steps=1, gradient_checkpointing=True, **settings)
    out = train(cfg, method_target(method))
    plain, (saved_plain, calls_plain) = step(method, config(method, corpus, tmp_path / "a", model, **settings),
                                             out / "prepared", UNITS)  # fmt: skip
    ckpt, (saved_ckpt, calls_ckpt) = step(method, cfg, out / "prepared", UNITS)
    assert_equal_grads(ckpt, plain)
    assert saved_ckpt < saved_plain and calls_ckpt > calls_plain  # the layers ran again instead of keeping activations


def test_checkpointing_keeps_grad_cache_dropout_replay_exact(
    tiny_dropout_model_dir: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    """GradCache re-runs each micro-batch under its saved dropout seed, and the checkpointed layers recompute under
    the RNG state they saved: with dropout on, the checkpointed cached step equals the cached step without it."""
    settings = {**CASES[0][2], "grad_accum": 2, "grad_cache": True}
    cfg = config("declutr", tiny_corpus, tmp_path / "run", tiny_dropout_model_dir, max_steps=1, **settings)
    store = train(cfg, method_target("declutr")) / "prepared"
    plain, (_, calls_plain) = step("declutr", cfg, store, [0, 1, 2, 3])
    on = config("declutr", tiny_corpus, tmp_path / "b", tiny_dropout_model_dir, gradient_checkpointing=True, **settings)
    ckpt, (_, calls_ckpt) = step("declutr", on, store, [0, 1, 2, 3])
    assert_equal_grads(ckpt, plain)
    assert calls_ckpt > calls_plain  # checkpointed: the layers ran again in the backward pass
    other, _ = step("declutr", config("declutr", tiny_corpus, tmp_path / "c", tiny_dropout_model_dir, seed=1,
                                      gradient_checkpointing=True, **settings), store, [0, 1, 2, 3])  # fmt: skip
    k = next(k for k in plain if k.endswith("layer.0.attention.self.query.weight"))
    assert not torch.allclose(other[k], plain[k], atol=1e-5), "dropout was not on"


def test_llm2vec_passes_checkpointing_to_both_phases() -> None:
    from sentkit.training.llm2vec import LLM2VecConfig

    cfg = LLM2VecConfig(corpus="c", out="o", model="m", gradient_checkpointing=True, lora_r=4, base_precision="bf16")
    assert [(p.gradient_checkpointing, p.base_precision) for _, p in cfg.phases(Path("o"))] == [(True, "bf16")] * 2


def test_a_model_without_checkpointing_is_one_config_error(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import BertForMaskedLM

    from sentkit.models.hub import load_mlm
    from sentkit.training.recipes.declutr import Declutr

    monkeypatch.setattr(BertForMaskedLM, "supports_gradient_checkpointing", False)
    lm, tok = load_mlm(str(tiny_model_dir))
    cfg = config("declutr", Path("c"), Path("o"), tiny_model_dir, gradient_checkpointing=True)
    with pytest.raises(ConfigError, match=r"does not support it; set gradient_checkpointing=false") as e:
        Declutr(cfg, lm, tok, 128)
    assert "\n" not in str(e.value)
