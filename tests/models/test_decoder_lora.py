"""LoRA adapters (sentkit.models.lora, through peft) on tiny decoders and a tiny BERT: the merged copy computes what
the model with its adapters computes, without any adapter left and without touching the training model; only the
adapters train; `sentkit train --method mntp --set lora_r=4` saves a merged folder that sentkit and
sentence-transformers load with equal vectors; the default is no LoRA below 1B parameters."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from support.decoders import FAMILIES, tiny_decoder

pytest.importorskip("peft")

TEXTS = ["The river runs past the old stone bridge.", "winter bread", "stone"]


@pytest.mark.parametrize("family", FAMILIES)
def test_merged_equals_unmerged(family: str, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from sentkit.models.lora import add_lora, has_lora, merged

    model = AutoModelForCausalLM.from_pretrained(tiny_decoder(family, tmp_path / family)).eval()
    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 11], [12, 13, 14, 15, 16, 17, 18]])
    with torch.no_grad():
        before = model(input_ids=ids).logits
    trainable = add_lora(model, 4)
    model.eval()  # the new adapters' dropout too
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert (
        names
        and all("lora_" in n for n in names)
        and trainable == sum(p.numel() for p in model.parameters() if p.requires_grad)
    )
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=ids).logits, before)  # B starts at zero: nothing changes yet
        for n, p in model.named_parameters():
            if "lora_B" in n:  # as after some training
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
        adapted = model(input_ids=ids).logits
        out = merged(model)
        got = out(input_ids=ids).logits
    assert (adapted - before).abs().max() > 1e-3  # the adapters change the outputs
    torch.testing.assert_close(got, adapted, atol=1e-5, rtol=1e-5)
    assert not has_lora(out) and has_lora(model)  # a merged copy; the training model keeps its adapters
    assert set(out.state_dict()) == set(AutoModelForCausalLM.from_pretrained(tmp_path / family).state_dict())


def test_default_rank_is_none_below_a_billion_parameters(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    from sentkit.models import lora

    small = AutoModelForCausalLM.from_pretrained(tiny_decoder("llama", tmp_path / "llama"))
    bert = AutoModelForMaskedLM.from_pretrained(tiny_model_dir)
    assert lora.default_rank(small) == 0 and lora.default_rank(bert) == 0
    monkeypatch.setattr(lora, "LARGE_DECODER", 1000)  # as if they were large
    assert lora.default_rank(small) == lora.DEFAULT_RANK and lora.default_rank(bert) == 0  # decoders only


def test_mntp_with_lora_trains_the_adapters_and_saves_merged(tmp_path: Path, tiny_corpus: Path) -> None:
    from safetensors.torch import load_file
    from sentence_transformers import SentenceTransformer

    import sentkit
    from sentkit.cli.main import main

    model = tiny_decoder("llama", tmp_path / "llama")
    out = tmp_path / "run"
    rc = main(
        [
            "train",
            "--method",
            "mntp",
            "--model",
            str(model),
            "--corpus",
            str(tiny_corpus),
            "--out",
            str(out),
            "--max-steps",
            "3",
            "--set",
            "progress=false",
            "--set",
            "batch_size=4",
            "--set",
            "seq_len=32",
            "--set",
            "lr=1e-2",
            "--set",
            "lora_r=4",
        ]
    )
    assert rc == 0
    state = torch.load(out / "checkpoint" / "state.pt", weights_only=False)["model"]
    assert any("lora_B" in k for k in state)  # the checkpoint holds the adapters (a resume loads them)
    saved = load_file(str(out / "model.safetensors"))
    assert not any("lora" in k for k in saved)  # merged on export: a plain model
    base = load_file(str(model / "model.safetensors"))
    moved = [k for k in base if not torch.equal(base[k], saved[k])]
    assert moved and all(k.endswith("proj.weight") for k in moved)  # only adapted linear layers changed
    assert json.loads((out / "config.json").read_text())["is_causal"] is False
    enc = sentkit.load(str(out))
    got = enc.encode(TEXTS)
    np.testing.assert_allclose(SentenceTransformer(str(out), device="cpu").encode(TEXTS), got, atol=1e-5)


def test_lora_alpha_without_adapters_is_said_and_a_scale_of_zero_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from sentkit.core.config import ConfigError
    from sentkit.models.hub import load_mlm
    from sentkit.training.recipes.mntp import MNTP, MNTPConfig

    model = tiny_decoder("llama", tmp_path / "llama")
    lm, tok = load_mlm(str(model), causal=True)
    with caplog.at_level(logging.WARNING, logger="sentkit"):
        MNTP(MNTPConfig(corpus="c", out="o", model=str(model), lora_alpha=8), lm, tok, 64)
    assert "lora_alpha=8 has no effect" in caplog.text
    for alpha in (0, -3):
        with pytest.raises(ConfigError, match="lora_alpha must be positive"):
            MNTPConfig(corpus="c", out="o", model=str(model), lora_r=4, lora_alpha=alpha)
