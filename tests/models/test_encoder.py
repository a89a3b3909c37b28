from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sentkit.models.transformer import TransformerEncoder, length_batches


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


def test_encode_follows_sentence_transformers_for_one_string(tiny_model_dir: Path) -> None:
    enc = TransformerEncoder.from_pretrained(str(tiny_model_dir))
    one = enc.encode("one sentence")
    assert one.shape == (32,)  # not one vector per character
    assert np.abs(one - enc.encode(["one sentence"])[0]).max() < 1e-6
    assert enc.encode([]).shape == (0, 32)
    assert enc.encode(("a", "b"), 1, show_progress=False).shape == (2, 32)  # the Encoder protocol's arguments


def test_encode_refuses_non_strings_and_bad_batch_sizes(tiny_model_dir: Path) -> None:
    enc = TransformerEncoder.from_pretrained(str(tiny_model_dir))
    for bad, where in (
        (["ok", None], "item 1 is NoneType"),
        (["ok", "fine", 3.5], "item 2 is float"),
        ([["nested"]], "item 0 is list"),
        (b"bytes", "got bytes"),
        (42, "got int"),
    ):
        with pytest.raises(TypeError, match=where):
            enc.encode(bad)  # type: ignore[arg-type]
    for size in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="batch_size must be a positive integer"):
            enc.encode(["x"], batch_size=size)  # type: ignore[arg-type]


def test_callable_encoder_takes_the_same_arguments() -> None:
    from sentkit.core.interface import CallableEncoder, Encoder

    calls: list[int] = []

    def fn(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return np.ones((len(texts), 3))

    enc = CallableEncoder(fn)
    assert isinstance(enc, Encoder)
    assert enc.encode(["a", "b", "c"], batch_size=2, show_progress=False).shape == (3, 3) and calls == [2, 1]
    assert enc.encode("a").shape == (3,)
    with pytest.raises(TypeError, match="item 0 is int"):
        enc.encode([1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"expected an array of shape \[2, dim\]"):
        CallableEncoder(lambda t: np.ones((1, 3))).encode(["a", "b"])


def test_a_damaged_model_directory_is_a_clear_error(tiny_model_dir: Path, tmp_path: Path) -> None:
    import shutil

    import sentkit
    from sentkit.core.config import ConfigError

    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    weights = next(p for p in broken.iterdir() if p.suffix in (".safetensors", ".bin"))
    weights.write_bytes(weights.read_bytes()[:100])  # torn by a full disk or a killed copy
    with pytest.raises(ConfigError, match="model directory .*broken cannot be loaded"):
        sentkit.load(str(broken))
    (broken / "modules.json").write_text("{not json")
    with pytest.raises(ConfigError, match="sentence-transformers settings cannot be read"):
        sentkit.load(str(broken))
    (broken / "sentkit.json").write_text("{not json")
    with pytest.raises(ConfigError, match="sentkit.json is not valid JSON"):
        sentkit.load(str(broken))
    with pytest.raises(ConfigError, match="is a file"):
        sentkit.load(str(weights))
    (tmp_path / "corpus").mkdir()
    with pytest.raises(ConfigError, match="is a folder but not a model folder"):
        sentkit.load(str(tmp_path / "corpus"))
    with pytest.raises(ValueError, match="device 'nonsense' cannot be used"):
        TransformerEncoder.from_pretrained(str(tiny_model_dir), device="nonsense")
