from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sentkit.models.encoder import TransformerEncoder, length_batches


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=0, max_size=200), st.integers(1, 40), st.sampled_from([None, 64, 500]))
def test_length_batches_cover_every_index_once(lengths: list[int], bs: int, budget: int | None) -> None:
    batches = length_batches(lengths, bs, budget)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    for b in batches:
        cap = bs if budget is None else max(bs, budget // lengths[b[0]])
        assert 1 <= len(b) <= cap
    # longest first
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)


def test_encode_order_and_batch_independence(tiny_model_dir: Path) -> None:
    enc = TransformerEncoder.from_pretrained(str(tiny_model_dir))
    texts = ["short", "a somewhat longer sentence about rivers", "mid length text", "", "short"]
    full = enc.encode(texts, batch_size=2)
    one_by_one = np.vstack([enc.encode([t]) for t in texts])
    assert full.dtype == np.float32 and full.shape == (5, 32)
    assert np.abs(full - one_by_one).max() < 1e-5
    assert np.abs(full[0] - full[4]).max() < 1e-6


def test_chunk_long_averages_windows(tiny_model_dir: Path) -> None:
    enc = TransformerEncoder.from_pretrained(str(tiny_model_dir))
    assert enc.max_length == 128
    body = enc.max_length - 2
    ids = enc.tokenizer("river " * 300, add_special_tokens=False)["input_ids"]
    assert len(ids) == 300
    windows = [enc.tokenizer.decode(ids[s : s + body]) for s in range(0, len(ids), body)]
    expected = enc.encode(windows).mean(axis=0)
    got = enc.encode(["river " * 300], chunk_long=True)[0]
    assert np.abs(got - expected).max() < 1e-5
    truncated = enc.encode(["river " * 300])[0]
    assert np.abs(truncated - enc.encode([windows[0]])[0]).max() < 1e-5
