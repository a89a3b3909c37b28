"""A frozen base in half precision under LoRA (`base_precision`): a run on a bf16 base trains only the adapters (every
other parameter bit-identical to the base rounded to bf16, and bf16; the adapters and their optimizer state float32),
its folder is merged in float32 (each adapted weight: the bf16 base, exactly, plus the adapters' update) and loads in
sentence-transformers with sentkit's vectors; `auto` is bf16 only for a decoder with adapters on a GPU with native
bf16 (nothing changes on the CPU); a half-precision base without adapters is one ConfigError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from sentkit.core.config import ConfigError, from_dict
from sentkit.core.methods import get_method, method_target
from sentkit.training.loop import train
from support.decoders import tiny_decoder

pytest.importorskip("peft")

TEXTS = ["The river runs past the old stone bridge.", "winter bread", "stone"]
SPANS = {"num_anchors": 2, "num_positives": 2, "min_span_len": 8, "max_span_len": 32}


def config(method: str, corpus: Path, out: Path, model: Path, **kw: Any) -> Any:
    base = {"corpus": str(corpus), "out": str(out), "model": str(model), "progress": False, "batch_size": 4}
    return from_dict(get_method(method).config_cls, {**base, "checkpoint_every": 1000, **kw}, where=method)


@pytest.mark.parametrize(("method", "base"), [("mntp", "llama"), ("declutr", "bert")])
def test_lora_on_a_bf16_base_trains_the_adapters_and_saves_a_float32_merge(
    method: str, base: str, tiny_model_dir: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    from safetensors.torch import load_file
    from sentence_transformers import SentenceTransformer

    import sentkit
    from sentkit.models.hub import position_limit

    model = tiny_model_dir if base == "bert" else tiny_decoder(base, tmp_path / base)
    settings = {"seq_len": 32} if method == "mntp" else SPANS
    cfg = config(method, tiny_corpus, tmp_path / "run", model, max_steps=3, lr=1e-2, lora_r=4, base_precision="bf16",
                 **settings)  # fmt: skip
    out = train(cfg, method_target(method))
    # the module the loop built, before training and in float32 (same seed)
    recipe_cls = method_target(method)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        lm, tok = recipe_cls.load_model(cfg, out)
        start = recipe_cls(cfg, lm, tok, position_limit(lm.config)).module().state_dict()
    ckpt = torch.load(out / "checkpoint" / "state.pt", weights_only=False)
    state = ckpt["model"]
    assert state.keys() == start.keys()
    frozen = [k for k, v in start.items() if "lora_" not in k and v.is_floating_point()]
    adapters = [k for k in state if "lora_" in k]
    assert frozen and adapters
    for k in frozen:  # untouched by training, kept in bf16
        assert state[k].dtype == torch.bfloat16 and torch.equal(state[k], start[k].to(torch.bfloat16)), k
    assert all(state[k].dtype == torch.float32 for k in adapters)
    assert any(not torch.equal(state[k], start[k]) for k in adapters if "lora_B" in k)  # the adapters trained
    moments = [t for s in ckpt["optimizer"]["state"].values() for t in s.values() if t.dim() > 0]
    assert moments and all(t.dtype == torch.float32 for t in moments)  # AdamW's state of float32 adapters

    # merged in float32: each adapted weight is the bf16 base upcast plus B A alpha / r computed in float32
    saved = load_file(str(out / "model.safetensors"))
    assert saved and all(v.dtype == torch.float32 for v in saved.values() if v.is_floating_point())
    scale = 2.0  # alpha = 2 r
    checked = 0
    for k in adapters:
        if not k.endswith("lora_A.default.weight") or "mlm_model." not in k:
            continue
        layer = k[: -len(".lora_A.default.weight")]
        weight = state[f"{layer}.base_layer.weight"].float()
        delta = state[f"{layer}.lora_B.default.weight"] @ state[k] * scale
        name = layer.rsplit("mlm_model.", 1)[1] + ".weight"  # the layer in the saved (merged) model
        torch.testing.assert_close(saved[name], weight + delta, atol=1e-7, rtol=0)
        checked += 1
    assert checked

    ours = sentkit.load(str(out)).encode(TEXTS)
    theirs = SentenceTransformer(str(out), device="cpu").encode(TEXTS)
    np.testing.assert_allclose(theirs, ours, atol=1e-5)


def test_a_half_precision_base_needs_adapters_and_its_own_precision(tiny_model_dir: Path) -> None:
    from sentkit.models.hub import load_mlm
    from sentkit.models.lora import base_precision
    from sentkit.training.recipes.declutr import DeclutrConfig

    for kw, said in (
        ({"lora_r": 0}, "full fine-tuning of a half-precision base is not supported"),
        ({"lora_r": 4, "precision": "fp16"}, "set precision=auto"),
    ):
        with pytest.raises(ConfigError, match=said) as e:
            DeclutrConfig(corpus="c", out="o", base_precision="bf16", **kw)
        assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="Did you mean 'bf16'"):
        DeclutrConfig(corpus="c", out="o", base_precision="bf17")
    lm, _ = load_mlm(str(tiny_model_dir))  # lora_r unset on a small model: no adapters
    with pytest.raises(ConfigError, match="this run has none"):
        base_precision("bf16", lm, torch.device("cpu"))
    assert base_precision("auto", lm, torch.device("cpu")) == "fp32"


def test_auto_is_bf16_only_for_a_decoder_with_adapters_on_a_native_bf16_gpu(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    from sentkit.models.lora import add_lora, base_precision

    dec = AutoModelForCausalLM.from_pretrained(tiny_decoder("llama", tmp_path / "llama"))
    bert = AutoModelForMaskedLM.from_pretrained(tiny_model_dir)
    gpu, cpu = torch.device("cuda"), torch.device("cpu")
    assert base_precision("auto", dec, gpu) == "fp32"  # no adapters
    add_lora(dec, 4)
    add_lora(bert, 4)
    assert base_precision("auto", dec, cpu) == "fp32"  # the CPU: nothing changes
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: not including_emulation)
    assert base_precision("auto", dec, gpu) == "bf16"
    assert base_precision("auto", dec, gpu, "fp16") == "fp32"  # precision asked otherwise
    assert base_precision("auto", bert, gpu) == "fp32"  # encoders keep a float32 base
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    assert base_precision("auto", dec, gpu) == "fp32"  # emulated bf16 only


def test_exact_resume_on_a_bf16_base_turning_checkpointing_on(tiny_corpus: Path, tmp_path: Path) -> None:
    """A run on a bf16 base stopped at step 2 and resumed (with gradient checkpointing turned on, which a resume may
    change: the same gradients) ends bit-identical to the run straight through."""
    model = tiny_decoder("llama", tmp_path / "llama")
    kw = {"seq_len": 32, "lora_r": 4, "base_precision": "bf16", "max_steps": 4, "checkpoint_every": 2, "lr": 1e-2}
    train(config("mntp", tiny_corpus, tmp_path / "straight", model, **kw), method_target("mntp"))
    train(config("mntp", tiny_corpus, tmp_path / "cut", model, **kw), method_target("mntp"), stop_at=2)
    cut = config("mntp", tiny_corpus, tmp_path / "cut", model, resume=True, gradient_checkpointing=True, **kw)
    train(cut, method_target("mntp"))
    a = torch.load(tmp_path / "straight" / "checkpoint" / "state.pt", weights_only=False)["model"]
    b = torch.load(tmp_path / "cut" / "checkpoint" / "state.pt", weights_only=False)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(v.dtype == torch.bfloat16 for v in b.values())
