"""``mean-no-specials`` / ``weighted-mean-no-specials`` (LLM2Vec's convention: the BOS out of the pooling) on a tiny
Llama built from a config, against vectors computed by hand from the model's own hidden states; the folder saved with
it reloads with it in sentkit (``sentkit.json``) while sentence-transformers reads the plain pooling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from sentkit.models.pooling import POOLINGS, pooling_of, saveable_poolings, text_mask
from support.decoders import tiny_decoder

TEXTS = ["The river runs past the old stone bridge.", "the bridge", "river"]


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_decoder("llama", tmp_path_factory.mktemp("dec") / "llama")


def test_text_mask_drops_the_specials_of_each_row() -> None:
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]])
    want = torch.tensor([[0, 1, 1, 0, 0], [0, 0, 0, 0, 0], [0, 1, 1, 1, 0]])  # by hand: first and last token out
    torch.testing.assert_close(text_mask(mask, 1, 1), want)
    torch.testing.assert_close(text_mask(mask, 1, 0), torch.tensor([[0, 1, 1, 1, 0], [0, 1, 0, 0, 0], [0, 1, 1, 1, 1]]))


def by_hand(folder: Path, text: str, weighted: bool) -> np.ndarray:
    """The model's last hidden states of `text` alone (BOS first, as its tokenizer puts it), pooled over the text
    tokens: the mean, or weights 1, 2, ... from the first text token (llm2vec 0.2.3's ``weighted_mean``)."""
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    ids = tok(text, return_tensors="pt")["input_ids"]
    assert int(ids[0, 0]) == tok.bos_token_id
    with torch.no_grad():
        h = AutoModel.from_pretrained(folder).eval()(input_ids=ids).last_hidden_state[0, 1:].double()  # [n, d]
    w = torch.arange(1, h.shape[0] + 1, dtype=h.dtype) if weighted else torch.ones(h.shape[0], dtype=h.dtype)
    return ((w[:, None] * h).sum(0) / w.sum()).numpy()


@pytest.mark.parametrize(("name", "weighted"), [("mean-no-specials", False), ("weighted-mean-no-specials", True)])
def test_the_bos_is_left_out_of_the_pooling(llama: Path, name: str, weighted: bool) -> None:
    import sentkit

    got = sentkit.load(str(llama), pooling=name, device="cpu").encode(TEXTS, batch_size=3)  # padded together
    want = np.stack([by_hand(llama, t, weighted) for t in TEXTS])
    np.testing.assert_allclose(got, want, atol=1e-5)
    plain = sentkit.load(str(llama), pooling=name.replace("-no-specials", ""), device="cpu").encode(TEXTS)
    assert np.abs(plain - want).max() > 1e-3  # the BOS counts in the plain pooling


def test_a_saved_folder_reloads_with_it_and_sentence_transformers_reads_the_plain_pooling(
    llama: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import sentkit

    enc = sentkit.load(str(llama), pooling="mean-no-specials", device="cpu")
    with caplog.at_level("WARNING"):
        enc.save(tmp_path / "saved")  # type: ignore[attr-defined]
    assert "sentence-transformers' Pooling cannot" in caplog.text
    again = sentkit.load(str(tmp_path / "saved"), device="cpu")
    assert again.pooling == "mean-no-specials"  # type: ignore[attr-defined]
    np.testing.assert_allclose(again.encode(TEXTS), enc.encode(TEXTS), atol=1e-6)
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(tmp_path / "saved"), device="cpu").encode(TEXTS)
    plain = sentkit.load(str(llama), pooling="mean", device="cpu").encode(TEXTS)
    np.testing.assert_allclose(st, plain, atol=1e-5)  # ST: the Pooling's mean, the BOS in


def test_the_registry_keeps_them_out_of_training_and_of_the_flags_mapping() -> None:
    assert POOLINGS.get("mean-no-specials").specials is False
    assert "mean-no-specials" not in saveable_poolings()  # training pools every token
    assert pooling_of({"pooling_mode_mean_tokens"}, None) == "mean"
    assert pooling_of({"pooling_mode_weightedmean_tokens"}, None) == "weighted-mean"
