"""`--method clm` (sentkit.training.recipes.clm): its loss equals transformers' own shifted causal-LM loss and a
hand-written reference on a fixed batch, its batches label every token but the first with causal attention, and
`sentkit train --method clm` builds a GPT-2 from scratch with a BERT WordPiece vocabulary (the decoder study's base)
into a folder that loads with every decoder pooling."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from sentkit.core.config import ConfigError
from sentkit.training.loop import train
from sentkit.training.recipe import Seeds
from sentkit.training.recipes.clm import CLM, CLMConfig
from sentkit.training.recipes.mntp import MNTPBatch
from support.decoders import decoder_recipe, decoder_recipe_config, tiny_decoder


def config(corpus: Path, out: Path, model: Path, **kw: object) -> CLMConfig:
    return decoder_recipe_config(CLMConfig, corpus, out, model, **kw)


def recipe_of(cfg: CLMConfig) -> CLM:
    return decoder_recipe(CLM, cfg)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_loss_equals_the_causal_lm_loss_and_a_hand_written_reference(family: str, tmp_path: Path) -> None:
    from sentkit.models.decoder import attention_of

    recipe = recipe_of(config(tmp_path, tmp_path / "out", tiny_decoder(family, tmp_path / family)))
    module = recipe.module().eval()
    module.autocast = lambda: torch.autocast("cpu", enabled=False)  # type: ignore[method-assign]
    assert attention_of(recipe.mlm_model.config) == "causal"
    ids = torch.randint(5, len(recipe.tokenizer), (3, 10), generator=torch.Generator().manual_seed(1))
    labels = ids.clone()
    labels[:, 0] = -100
    batch = MNTPBatch(3, {"clm": 27.0}, int(ids.numel()), ids, labels)
    with torch.no_grad():
        got = float(module(batch, [0, 1, 2], Seeds(0, 0, 0, 0)).sums["clm"]) / 27
        lm = recipe.mlm_model
        want_hf = float(lm(input_ids=ids, labels=ids).loss)  # transformers shifts labels itself
        logp = lm(input_ids=ids).logits.log_softmax(-1)
    by_hand = [-float(logp[r, c - 1, int(ids[r, c])]) for r in range(3) for c in range(1, 10)]
    assert got == pytest.approx(want_hf, abs=1e-5)
    assert got == pytest.approx(math.fsum(by_hand) / 27, abs=1e-5)


def test_batches_label_every_token_but_the_first(tiny_corpus: Path, tmp_path: Path) -> None:
    from sentkit.data.store import TokenStore

    model = tiny_decoder("llama", tmp_path / "llama")
    cfg = config(tiny_corpus, tmp_path / "out", model, max_steps=1)
    train(cfg, CLM)
    recipe = recipe_of(cfg)
    store = TokenStore(tmp_path / "out" / "prepared")
    n = recipe.units(store)
    batch = recipe.batch(store, list(range(n)), 0)
    assert batch.ids is not None and batch.labels is not None and batch.mask is None
    assert (batch.labels[:, 0] == -100).all()
    assert torch.equal(batch.labels[:, 1:], batch.ids[:, 1:])  # nothing masked, nothing replaced
    assert batch.counts["clm"] == float(batch.ids[:, 1:].numel())
    eos = recipe.tokenizer.eos_token_id
    assert (batch.ids == eos).any()  # the end-of-sequence token between packed documents


def test_bidirectional_attention_is_refused() -> None:
    with pytest.raises(ConfigError, match="causal attention"):
        CLMConfig(corpus="c", out="o", model="m", attention="bidirectional")
    with pytest.raises(ConfigError, match="from_scratch"):
        CLMConfig(corpus="c", out="o", model="m", family="gpt2")
    with pytest.raises(ConfigError, match="not a decoder"):
        CLMConfig(corpus="c", out="o", model="m", family="bert", from_scratch=True)


def test_a_gpt2_from_scratch_with_a_wordpiece_vocabulary(
    tiny_model_dir: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    """The decoder study's base: a GPT-2 built from transformers' defaults, resized, with a BERT tokenizer whose [SEP]
    becomes the end-of-sequence token (saved), so that last-token pooling reads it."""
    import sentkit
    from sentkit.cli.main import main
    from sentkit.training.metrics import read_metrics

    out = tmp_path / "run"
    sets = [
        "from_scratch=true",
        "family=gpt2",
        "layers=2",
        "hidden=32",
        "heads=4",
        "intermediate=64",
        "max_positions=34",
        "seq_len=32",
        "batch_size=4",
        "lr=1e-3",
        "log_every=1",
        "progress=false",
    ]
    rc = main(
        [
            "train",
            "--method",
            "clm",
            "--model",
            str(tiny_model_dir),
            "--corpus",
            str(tiny_corpus),
            "--out",
            str(out),
            "--max-steps",
            "3",
            *[a for s in sets for a in ("--set", s)],
        ]
    )
    assert rc == 0
    config_json = json.loads((out / "config.json").read_text())
    assert config_json["model_type"] == "gpt2" and config_json["n_layer"] == 2 and config_json["n_inner"] == 64
    rows = read_metrics(out / "metrics.csv")
    assert [r["step"] for r in rows] == [1, 2, 3] and all(np.isfinite(r["clm"]) for r in rows)
    assert rows[0]["clm"] == pytest.approx(math.log(config_json["vocab_size"]), rel=0.1)  # random start: ~ln V
    enc = sentkit.load(str(out), pooling="last-token")
    assert enc.tokenizer.eos_token == "[SEP]" and enc.tokenizer("a b").input_ids[-1] == enc.tokenizer.sep_token_id
    texts = ["the river runs", "stone"]
    for pooling in ("mean", "weighted-mean"):
        assert sentkit.load(str(out), pooling=pooling).encode(texts).shape == (2, 32)
    assert enc.encode(texts).shape == (2, 32)
