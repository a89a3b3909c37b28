"""Decoder language models (GPT-2, Llama, Qwen2: tiny random-initialised configs) as encoders through the one
resolver: padding (the EOS where there is no padding token), the EOS appended for last-token pooling, the padding
side changing no vector, and the saved folder loading in sentence-transformers with sentkit's vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from support.decoders import FAMILIES, tiny_decoder

TEXTS = [
    "The river runs past the old stone bridge.",
    "winter bread",
    "A much longer sentence about music, bread and the harbor at evening.",
    "stone",
]
POOLINGS = ("mean", "last-token", "weighted-mean")


@pytest.fixture(scope="module", params=FAMILIES)
def decoder_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_decoder(request.param, tmp_path_factory.mktemp(request.param) / "model")


def test_loads_through_the_resolver_with_mean_pooling_and_a_padding_token(decoder_dir: Path) -> None:
    import sentkit
    from sentkit.models.decoder import is_decoder_config
    from sentkit.models.transformer import TransformerEncoder

    enc = sentkit.load(str(decoder_dir))
    assert isinstance(enc, TransformerEncoder) and is_decoder_config(enc.model.config)
    assert enc.pooling == "mean" and enc.tokenizer.pad_token is not None
    if enc.model.config.model_type == "gpt2":  # no padding token of its own: its end-of-sequence token
        assert enc.tokenizer.pad_token == enc.tokenizer.eos_token == "<|endoftext|>"
    got = enc.encode(TEXTS, batch_size=8, token_budget=None)
    assert got.shape == (len(TEXTS), 32) and np.isfinite(got).all()
    one = np.stack([enc.encode([t])[0] for t in TEXTS])  # one text at a time: no padding at all
    np.testing.assert_allclose(got, one, atol=1e-5)


def test_bert_is_not_a_decoder(tiny_model_dir: Path) -> None:
    from transformers import AutoConfig

    from sentkit.models.decoder import is_decoder_config

    assert not is_decoder_config(AutoConfig.from_pretrained(tiny_model_dir))


def test_last_token_pooling_appends_the_end_of_sequence_token(decoder_dir: Path) -> None:
    import sentkit

    mean = sentkit.load(str(decoder_dir))
    last = sentkit.load(str(decoder_dir), pooling="last-token")
    eos = last.tokenizer.eos_token_id
    assert last.suffix == [eos] and eos not in mean.suffix  # only last-token pooling adds it
    assert last.prefix == mean.prefix  # Llama's BOS stays before the text
    ids = last.tokenizer("stone")["input_ids"]
    assert ids[-1] == eos and ids.count(eos) == 1 - (ids[0] == eos)  # once, at the end (GPT-2's BOS is its EOS)
    # the vector is the final state of the text followed by its EOS
    with torch.inference_mode():
        want = last.model(input_ids=torch.tensor([ids])).last_hidden_state[0, -1].numpy()
    np.testing.assert_allclose(last.encode(["stone"])[0], want, atol=1e-5)


@pytest.mark.parametrize("pooling", POOLINGS)
def test_padding_side_changes_no_vector(decoder_dir: Path, pooling: str) -> None:
    import sentkit
    from sentkit.models.decoder import decoder_inputs

    enc = sentkit.load(str(decoder_dir), pooling=pooling)
    seqs = [enc.tokenizer(t)["input_ids"] for t in TEXTS]
    width = max(len(s) for s in seqs)
    pad = enc.pad_id

    def pooled(side: str) -> torch.Tensor:
        ids = torch.full((len(seqs), width), pad)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, s in enumerate(seqs):
            cols = slice(0, len(s)) if side == "right" else slice(width - len(s), width)
            ids[r, cols], mask[r, cols] = torch.tensor(s), 1
        with torch.inference_mode():
            hidden = enc.model(**decoder_inputs(ids, mask)).last_hidden_state
        return enc.pool_fn(hidden, mask)

    one = torch.from_numpy(np.stack([enc.encode([t])[0] for t in TEXTS]))
    torch.testing.assert_close(pooled("right"), one, atol=1e-5, rtol=0)
    torch.testing.assert_close(pooled("left"), one, atol=1e-5, rtol=0)


@pytest.mark.parametrize("pooling", POOLINGS)
def test_saved_folder_loads_in_sentence_transformers_with_equal_vectors(
    decoder_dir: Path, pooling: str, tmp_path: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    import sentkit

    enc = sentkit.load(str(decoder_dir), pooling=pooling)
    got = enc.encode(TEXTS)
    out = enc.save(tmp_path / "saved")
    st = SentenceTransformer(str(out), device="cpu")
    np.testing.assert_allclose(st.encode(TEXTS, batch_size=8), got, atol=1e-5)
    again = sentkit.load(str(out))
    assert again.pooling == pooling
    np.testing.assert_allclose(again.encode(TEXTS), got, atol=1e-6)
