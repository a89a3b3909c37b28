"""Poolings of bag-of-vectors encoders (sentkit.models.bag): max and [max, mean] of the word vectors, by hand."""

from __future__ import annotations

import numpy as np
import pytest

import sentkit
from sentkit.core.config import ConfigError


def test_mean_max_of_glove_is_the_max_and_the_mean_of_its_word_vectors() -> None:
    from sentkit.models.wordvectors import load_glove

    glove = load_glove()
    row = {w: i for i, w in enumerate(glove.words)}
    texts = ["The river runs past the stone", "qqqqxqj zzzzxzj"]
    got = sentkit.load("glove-average", pooling="mean+max").encode(texts)
    v = glove.vectors[[row[w] for w in texts[0].lower().split()]]
    np.testing.assert_allclose(got[0], np.concatenate([v.max(axis=0), v.mean(axis=0)]), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[1], np.zeros(100, dtype=np.float32))  # no known word
    np.testing.assert_allclose(
        sentkit.load("glove-average", pooling="mean").encode(texts),
        sentkit.load("glove-average").encode(texts),
        atol=1e-6,
    )
    assert sentkit.load("glove-average", pooling="max").encode(texts).shape == (2, 50)


def test_pooling_a_model_that_does_not_average_word_vectors_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    code = tmp_path / "enc.py"
    code.write_text("import numpy as np\ndef enc(texts):\n    return np.ones((len(texts), 3))\n")
    with pytest.raises(ConfigError, match="takes no settings"):
        sentkit.load(f"{code}:enc", pooling="mean+max")
