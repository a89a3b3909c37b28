"""Bidirectional attention of a decoder (sentkit.models.decoder.set_attention, through transformers 5's mask
interface): with it a token's state depends on later tokens and without it does not, under the SDPA and the eager
attention implementations; it is saved with the model, so the folder loads bidirectional again in sentkit and in
sentence-transformers with the same vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from sentkit.core.config import ConfigError
from support.decoders import FAMILIES, tiny_decoder

TEXTS = ["The river runs past the old stone bridge.", "winter bread", "stone"]


@pytest.fixture(scope="module", params=FAMILIES)
def decoder_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_decoder(request.param, tmp_path_factory.mktemp(request.param) / "model")


def first_state_moves(model: torch.nn.Module, mask: bool) -> bool:
    """Whether changing the last of 6 tokens changes the first token's state."""
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    later = ids.clone()
    later[0, -1] = 11
    kw = {"attention_mask": torch.ones_like(ids)} if mask else {}
    with torch.inference_mode():
        a, b = (model(input_ids=x, **kw).last_hidden_state[0, 0] for x in (ids, later))
    return bool((a - b).abs().max() > 1e-6)


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_bidirectional_states_depend_on_later_tokens_causal_ones_do_not(decoder_dir: Path, implementation: str) -> None:
    import sentkit

    for attention, moves in (("causal", False), ("bidirectional", True), ("causal", False)):  # and back
        enc = sentkit.load(str(decoder_dir), attention=attention)
        enc.model.set_attn_implementation(implementation)
        assert enc.model.config._attn_implementation == implementation
        for mask in (False, True):  # without a mask (no padding) and with one
            assert first_state_moves(enc.model, mask) is moves, (attention, mask)
    # the model's own attention, unless told
    assert not first_state_moves(sentkit.load(str(decoder_dir)).model, False)


def test_saved_bidirectional_loads_bidirectional_in_sentkit_and_sentence_transformers(
    decoder_dir: Path, tmp_path: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    import sentkit
    from sentkit.models.decoder import attention_of

    enc = sentkit.load(str(decoder_dir), attention="bidirectional", pooling="mean")
    got = enc.encode(TEXTS)
    causal = sentkit.load(str(decoder_dir)).encode(TEXTS)
    assert np.abs(got - causal).max() > 1e-3  # the switch changes the vectors
    out = enc.save(tmp_path / "saved")
    again = sentkit.load(str(out))
    assert attention_of(again.model.config) == "bidirectional"
    np.testing.assert_allclose(again.encode(TEXTS), got, atol=1e-6)
    st = SentenceTransformer(str(out), device="cpu")  # nothing to pass: config.json says is_causal = false
    np.testing.assert_allclose(st.encode(TEXTS), got, atol=1e-5)
    assert not first_state_moves(sentkit.load(str(out), attention="causal").model, True)  # overridden at load


def test_attention_is_checked(tiny_model_dir: Path) -> None:
    import sentkit
    from sentkit.training.config import TrainConfig

    with pytest.raises(ConfigError, match="Did you mean 'bidirectional'"):
        TrainConfig(corpus="c", out="o", attention="bidirectonal")
    assert TrainConfig(corpus="c", out="o", attention="bidirectional").attention == "bidirectional"
    with pytest.raises(ConfigError, match="applies to decoder language models"):
        sentkit.load(str(tiny_model_dir), attention="bidirectional")
