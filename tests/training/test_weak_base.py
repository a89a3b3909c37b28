"""DeCLUTR's start-up check: a base too weak for spans far longer than the corpus's sentences is named."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from sentkit.objectives.spans import SpanSettings
from sentkit.training.recipes.declutr import base_report, mean_anchor_tokens, warn_weak_base

PAPER = SpanSettings(2, 2, 32, 512)
SHORT = SpanSettings(2, 2, 4, 32)


def test_the_rule(caplog: pytest.LogCaptureFixture) -> None:
    assert mean_anchor_tokens(SpanSettings(2, 2, 8, 128)) == pytest.approx(88.0)  # the plain study measured 87
    weak = {"sentence_tokens": 21.0, "anisotropy": 0.70, "mlm_loss": 5.9}  # the plain study's base
    strong = {"sentence_tokens": 21.0, "anisotropy": 0.90, "mlm_loss": 1.8}  # a trained masked LM: anisotropic too
    headless = {"sentence_tokens": 21.0, "anisotropy": 0.75, "mlm_loss": float("nan")}
    with caplog.at_level(logging.WARNING, logger="sentkit.training.recipes.declutr"):
        assert warn_weak_base(weak, PAPER) and warn_weak_base(weak, SpanSettings(2, 2, 8, 128))
        assert "masked-LM loss 5.9 > 4" in caplog.text and "--set min_span_len=4 --set max_span_len=32" in caplog.text
        assert not warn_weak_base(weak, SHORT)  # anchors of 23 tokens: sentence length
        assert not warn_weak_base(strong, PAPER)
        assert warn_weak_base(headless, PAPER) and "anisotropy 0.75 > 0.6" in caplog.text
        assert not warn_weak_base({**headless, "anisotropy": 0.2}, PAPER)


def test_base_report_measures_the_base(tiny_model_dir: Path, tmp_path: Path) -> None:
    import torch

    from sentkit.data.store import TokenStore, prepare_store
    from sentkit.models.hub import load_mlm, special_affixes

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.txt").write_text(" ".join(f"The river number {i} runs past the stone." for i in range(200)))
    model, tok = load_mlm(str(tiny_model_dir))
    prepare_store(str(corpus), tok, tmp_path / "store", min_doc_tokens=1)
    store = TokenStore(tmp_path / "store")
    pre, suf = special_affixes(tok)
    rep = base_report(model, tok, store, pre, suf, samples=16)
    assert rep["sentence_tokens"] == pytest.approx(
        len(tok("The river number 7 runs past the stone.", add_special_tokens=False)["input_ids"]), abs=1.0
    )
    assert -1 <= rep["anisotropy"] <= 1 and 0 < rep["mlm_loss"] < 20
    # the anisotropy against a loop over the pairs of the same windows, encoded one by one
    width = int(np.clip(round(rep["sentence_tokens"]), 4, 64))
    rng = np.random.default_rng(0)
    docs = rng.choice(len(store), size=64, replace=True)  # the same draws as base_report
    wins = []
    for d in docs:
        t = store.doc(int(d))
        s = int(rng.integers(len(t) - width))
        wins.append(pre + t[s : s + width].tolist() + suf)
        if len(wins) == 16:
            break
    with torch.no_grad():
        vecs = [model.base_model(input_ids=torch.tensor([w])).last_hidden_state[0].mean(0) for w in wins]
    cos = [
        float(torch.nn.functional.cosine_similarity(a, b, dim=0))
        for i, a in enumerate(vecs)
        for j, b in enumerate(vecs)
        if i != j
    ]
    assert rep["anisotropy"] == pytest.approx(np.mean(cos), abs=2e-3)
