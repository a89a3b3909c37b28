"""DeCLUTR, SimCSE and TSDAE on a decoder base (issue 36.3): DeCLUTR's masked-LM term on a decoder is masked
next-token prediction (checked against transformers' shifted causal-LM loss); each method trains a tiny GPT-2 or
Llama end to end through `sentkit train` into a folder that sentkit and sentence-transformers load with equal
vectors; SimCSE's `dropout` reaches a decoder (and is refused on a masked LM); CLS pooling on a causal decoder and
TSDAE on a family without cross-attention are refused in one line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from support.decoders import tiny_decoder

TEXTS = ["The river runs past the old stone bridge.", "winter bread", "stone"]


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_decoder("gpt2", tmp_path_factory.mktemp("gpt2") / "model")


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_decoder("llama", tmp_path_factory.mktemp("llama") / "model")


def train_args(method: str, model: Path, corpus: Path, out: Path, *sets: str) -> list[str]:
    extra = [a for s in ("progress=false", "batch_size=4", "log_every=1", "lr=1e-3", *sets) for a in ("--set", s)]
    return ["train", "--method", method, "--model", str(model), "--corpus", str(corpus), "--out", str(out),
            "--max-steps", "3", *extra]  # fmt: skip


def loads_equal_in_sentence_transformers(out: Path, base: Path) -> np.ndarray:
    """sentkit's vectors of the trained folder, checked equal to sentence-transformers' and unlike the base's."""
    from sentence_transformers import SentenceTransformer

    import sentkit

    got = sentkit.load(str(out)).encode(TEXTS)
    np.testing.assert_allclose(SentenceTransformer(str(out), device="cpu").encode(TEXTS), got, atol=1e-5)
    assert np.abs(got - sentkit.load(str(base)).encode(TEXTS)).max() > 1e-5  # trained: not the base's vectors
    return got


# ----------------------------------------------------------------------------- DeCLUTR
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_masked_lm_term_of_a_decoder_is_the_shifted_next_token_loss(family: str, tmp_path: Path) -> None:
    """`MaskedLM.mlm_sum` on a causal LM: token i predicted from the output at i-1 through the LM head, which is
    transformers' own causal-LM loss on the same labels; read at its own position it would be another number."""
    from sentkit.models.hub import load_mlm
    from sentkit.models.mlm import MaskedLM

    lm, tok = load_mlm(str(tiny_decoder(family, tmp_path / family)), causal=True)
    lm.eval()
    model = MaskedLM(lm, "mean")
    assert model.next_token and model.head is lm.get_output_embeddings()
    ids = torch.randint(5, len(tok), (2, 10), generator=torch.Generator().manual_seed(3))
    labels = torch.full_like(ids, -100)
    for r, c in [(0, 0), (0, 4), (0, 9), (1, 2), (1, 7)]:  # (0, 0): nothing predicts it, not counted
        labels[r, c] = int(ids[r, c])
    with torch.no_grad():
        total, count = model.mlm_sum(model.hidden(ids, None), labels)
        want = lm(input_ids=ids, labels=labels).loss
        logits = lm(input_ids=ids).logits.log_softmax(-1)
    assert count == 4
    assert float(total) / count == pytest.approx(float(want), abs=1e-5)
    own = -sum(float(logits[r, c, int(ids[r, c])]) for r, c in [(0, 4), (0, 9), (1, 2), (1, 7)]) / 4
    assert abs(own - float(want)) > 1e-3


def test_declutr_trains_a_decoder_end_to_end(gpt2_dir: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    from sentkit.cli.main import main
    from sentkit.data.store import TokenStore
    from sentkit.training.metrics import read_metrics
    from sentkit.training.recipes.declutr import Declutr, DeclutrConfig
    from support.decoders import decoder_recipe

    out = tmp_path / "run"
    assert main(train_args("declutr", gpt2_dir, tiny_corpus, out, "min_span_len=4", "max_span_len=16")) == 0
    rows = read_metrics(out / "metrics.csv")
    assert [r["step"] for r in rows] == [1, 2, 3] and all(np.isfinite(r["mlm"]) and r["mlm"] > 0 for r in rows)
    loads_equal_in_sentence_transformers(out, gpt2_dir)
    # the decoder was given LLM2Vec's blank mask token; nothing masks a decoder's first token (nothing predicts it)
    # (90 % masked, so that a first token left unmasked by chance cannot pass for the rule)
    cfg = DeclutrConfig(corpus=str(tiny_corpus), out=str(tmp_path / "x"), model=str(gpt2_dir), min_span_len=4,
                        max_span_len=16, mlm_probability=0.9, progress=False)  # fmt: skip
    recipe = decoder_recipe(Declutr, cfg)
    assert recipe.tokenizer.mask_token == "_"
    store = TokenStore(out / "prepared")
    batch = recipe.batch(store, list(range(len(store)))[:4], 0)
    assert batch.labels is not None and batch.seqs is not None
    rows = [i for i, lab in enumerate(batch.labels) if lab is not None]
    assert len(rows) >= 8 and all(batch.labels[i][0] == -100 for i in rows)  # type: ignore[index]
    # the count the loop divides by is the count the loss sums over
    from sentkit.training.batching import pad_with_labels

    ids, _, labels = pad_with_labels([batch.seqs[i] for i in rows], [batch.labels[i] for i in rows], 0, "cpu")
    module = recipe.module()
    with torch.no_grad():
        _, count = module.model.mlm_sum(module.model.hidden(ids, None), labels)
    assert count > 0 and batch.counts["mlm"] == count


# ----------------------------------------------------------------------------- SimCSE
def test_simcse_trains_a_decoder_with_the_dropout_it_is_given(
    llama_dir: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    from sentkit.cli.main import main

    out = tmp_path / "run"
    assert main(train_args("simcse", llama_dir, tiny_corpus, out, "pooling=mean", "dropout=0.1", "max_len=32")) == 0
    assert json.loads((out / "config.json").read_text())["attention_dropout"] == 0.1  # saved with the model
    loads_equal_in_sentence_transformers(out, llama_dir)


def test_simcse_warns_of_a_decoder_without_dropout_and_refuses_dropout_on_a_masked_lm(
    llama_dir: Path, tiny_model_dir: Path, tiny_corpus: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from sentkit.core.config import ConfigError
    from sentkit.training.recipes.simcse import SimCSE, SimCSEConfig

    cfg = SimCSEConfig(corpus=str(tiny_corpus), out=str(tmp_path / "a"), model=str(llama_dir), pooling="mean")
    with caplog.at_level(logging.WARNING):
        SimCSE.load_model(cfg, tmp_path / "a")  # a tiny Llama: attention_dropout 0.0
    assert "has no dropout" in caplog.text and "dropout=0.3" in caplog.text
    cfg = SimCSEConfig(corpus=str(tiny_corpus), out=str(tmp_path / "b"), model=str(tiny_model_dir), dropout=0.2)
    with pytest.raises(ConfigError, match="applies to a decoder base"):
        SimCSE.load_model(cfg, tmp_path / "b")
    with pytest.raises(ConfigError, match=r"dropout must be in \[0, 1\)"):
        SimCSEConfig(corpus="c", out="o", dropout=1.0)


def test_cls_pooling_of_a_causal_decoder_is_refused_in_one_line(
    gpt2_dir: Path, tiny_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SimCSE's and TSDAE's default pooling (cls) reads a token that a causal decoder computes from itself alone."""
    from sentkit.cli.main import main

    for method in ("simcse", "tsdae"):
        capsys.readouterr()
        assert main(train_args(method, gpt2_dir, tiny_corpus, tmp_path / method)) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "pooling=cls" in err[0] and "--set pooling=mean" in err[0], (method, err)


# ----------------------------------------------------------------------------- TSDAE
def test_tsdae_trains_a_gpt2_through_a_causal_copy_with_cross_attention(
    gpt2_dir: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    from sentkit.cli.main import main
    from sentkit.models.decoder import set_attention
    from sentkit.models.hub import load_mlm
    from sentkit.training.recipes.tsdae import tied_decoder

    out = tmp_path / "run"
    assert main(train_args("tsdae", gpt2_dir, tiny_corpus, out, "pooling=mean", "max_len=32")) == 0
    loads_equal_in_sentence_transformers(out, gpt2_dir)
    # an encoder switched to bidirectional attention still gets a causal decoder: a state ignores later tokens
    lm, _ = load_mlm(str(gpt2_dir), causal=True)
    set_attention(lm, "bidirectional")
    decoder = tied_decoder(lm).eval()
    assert decoder.config.is_causal and any("crossattention" in n for n, _ in decoder.named_modules())
    assert decoder.transformer.wte.weight is lm.transformer.wte.weight  # tied to the encoder
    ids = torch.tensor([[5, 6, 7, 8]])
    memory = torch.randn(1, 1, lm.config.hidden_size)
    with torch.no_grad():
        a = decoder.transformer(input_ids=ids, encoder_hidden_states=memory).last_hidden_state
        b = decoder.transformer(input_ids=torch.tensor([[5, 6, 7, 9]]), encoder_hidden_states=memory).last_hidden_state
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert (a[:, 3] - b[:, 3]).abs().max() > 1e-4


@pytest.mark.parametrize("base", ["gpt2", "bert"])
def test_tsdae_with_lora_shares_the_adapted_layers_with_its_decoder(
    base: str, gpt2_dir: Path, tiny_model_dir: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    """Under LoRA the decoder computes with the encoder's own adapted layers (frozen weight and adapters, one object),
    so a step moves the adapters through both; the export is merged, and only adapted layers changed."""
    pytest.importorskip("peft")
    from safetensors.torch import load_file

    from sentkit.cli.main import main
    from sentkit.models.hub import load_mlm
    from sentkit.models.lora import add_lora, is_lora_layer
    from sentkit.training.recipes.tsdae import tied_decoder

    model = gpt2_dir if base == "gpt2" else tiny_model_dir
    lm, _ = load_mlm(str(model), causal=base == "gpt2")
    add_lora(lm, 4)
    decoder = tied_decoder(lm)
    adapted = {n: m for n, m in lm.named_modules() if is_lora_layer(m)}
    assert adapted
    for name, layer in adapted.items():
        assert decoder.get_submodule(name) is layer, name  # the same layer object, adapters included
    cross = [n for n, p in decoder.named_parameters() if "crossattention" in n]
    assert cross and all(decoder.get_parameter(n).requires_grad for n in cross)  # only the decoder has it: trains

    out = tmp_path / "run"
    assert main(train_args("tsdae", model, tiny_corpus, out, "pooling=mean", "max_len=32", "lora_r=4")) == 0
    saved = load_file(str(out / "model.safetensors"))
    assert not any("lora" in k for k in saved)  # merged on export
    before = load_file(str(model / "model.safetensors"))
    common = [k for k in saved if k in before]
    moved = [k for k in common if not torch.equal(before[k], saved[k])]
    assert moved, "the adapters did not train"
    linear = {n.removeprefix("bert.").removeprefix("transformer.") for n in adapted}
    assert all(k.rsplit(".", 1)[0].removeprefix("bert.").removeprefix("transformer.") in linear for k in moved), moved
    loads_equal_in_sentence_transformers(out, model)


def test_tsdae_refuses_a_decoder_family_without_cross_attention(llama_dir: Path) -> None:
    from sentkit.core.config import ConfigError
    from sentkit.models.hub import load_mlm
    from sentkit.training.recipes.tsdae import tied_decoder

    lm, _ = load_mlm(str(llama_dir), causal=True)
    with pytest.raises(ConfigError, match="transformers' 'llama' has none"):
        tied_decoder(lm)
