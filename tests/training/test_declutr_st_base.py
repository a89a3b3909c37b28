"""DeCLUTR continued from a sentence-transformers folder of a bare encoder (as all-minilm-l6-v2 is: no MLM
head, mean pooling, then Normalize): the saved encoder keeps the base's Normalize module, and the masked-LM
loss of the head that loading made fresh is not taken for a weak base."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from sentkit.data.store import TokenStore, prepare_store
from sentkit.models.hub import load_mlm, load_tokenizer, position_limit
from sentkit.training.loop import train
from sentkit.training.recipes.declutr import Declutr, DeclutrConfig, base_has_mlm_head
from support.training import small_config

ST = "sentence_transformers.models."


@pytest.fixture()
def st_base(tiny_model_dir: Path, tmp_path: Path) -> Path:
    """The tiny BERT's encoder alone (no MLM head) as a sentence-transformers folder ending in Normalize."""
    from transformers import AutoModelForMaskedLM

    base = tmp_path / "st-base"
    AutoModelForMaskedLM.from_pretrained(str(tiny_model_dir)).bert.save_pretrained(base)
    load_tokenizer(str(tiny_model_dir)).save_pretrained(base)
    (base / "1_Pooling").mkdir()
    (base / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True})
    )
    modules = [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")]
    (base / "modules.json").write_text(
        json.dumps([{"idx": i, "name": str(i), "path": p, "type": ST + t} for i, (p, t) in enumerate(modules)])
    )
    return base


def _store(tmp_path: Path, model: Path) -> Path:
    """Documents of short sentences (about 10 tokens)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir(exist_ok=True)
    for d in range(8):
        (corpus / f"d{d}.txt").write_text(" ".join(f"The river number {i} runs past stone {d}." for i in range(60)))
    out = tmp_path / f"store-{model.name}"
    prepare_store(str(corpus), load_tokenizer(str(model)), out, min_doc_tokens=64, show_progress=False)
    return out


def test_the_saved_encoder_keeps_the_bases_normalize(st_base: Path, tmp_path: Path) -> None:
    import sentkit

    out = train(
        small_config(str(_store(tmp_path, st_base)), str(tmp_path / "run"), model=str(st_base), max_steps=2), Declutr
    )
    types = [m["type"] for m in json.loads((out / "modules.json").read_text())]
    assert types[-1] == ST + "Normalize", types
    vecs = sentkit.load(str(out)).encode(["a river in winter", "the captain's letter arrived"])
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


def test_a_fresh_mlm_head_is_not_taken_for_a_weak_base(
    st_base: Path, tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Anchors of 16-128 tokens on sentences of about 10: the check looks at the base. The tiny BERT's own
    (random) head is in its checkpoint, so its loss is still judged; the head made fresh for the bare encoder is not."""
    warned, told = {}, {}
    for base in (st_base, tiny_model_dir):
        model, tok = load_mlm(str(base))
        cfg = DeclutrConfig(corpus="", out="", model=str(base), min_span_len=16, max_span_len=128)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="sentkit.training.recipes.declutr"):
            Declutr(cfg, model, tok, position_limit(model.config)).units(TokenStore(_store(tmp_path, base)))
        warned[base] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        said = caplog.text
        told[base] = ("is that of a fresh MLM head" in said, base_has_mlm_head(str(base), model))
    assert any("masked-LM loss" in w for w in warned[tiny_model_dir]), warned
    assert not any("masked-LM loss" in w for w in warned[st_base]), warned
    assert told == {st_base: (True, False), tiny_model_dir: (False, True)}
