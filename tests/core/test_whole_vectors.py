"""sentkit.core.interface.whole_vectors: how a cut or quantized encoder's vectors are made from whole ones (what an
evaluation caches once for every width and code), checked against the encoders' own vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import sentkit
from sentkit.core.interface import PromptedEncoder, whole_vectors
from sentkit.models.loading import Truncated

TEXTS = ["a river in winter", "the captain's letter arrived", "rain"]


def test_each_step_gives_the_encoders_own_vectors(tiny_model_dir: Path) -> None:
    name = str(tiny_model_dir)
    whole = sentkit.load(name).encode(TEXTS)
    cases = {
        "cut": sentkit.load(name, truncate_dim=8),
        "codes": sentkit.load(name, quantize="binary", rescore="float"),
        "cut codes": sentkit.load(name, truncate_dim=8, quantize="binary"),
        "codes cut": Truncated(sentkit.load(name, quantize="binary", rescore="float"), 8),
    }
    for label, enc in cases.items():
        plan = whole_vectors(enc)
        assert plan is not None, label
        np.testing.assert_array_equal(plan.encoder.encode(TEXTS), whole, err_msg=label)
        np.testing.assert_array_equal(plan.step(whole), enc.encode(TEXTS), err_msg=label)
    # what a binary search rescores with: the float vectors before the codes, cut where the cut comes after
    np.testing.assert_array_equal(whole_vectors(cases["codes"]).float_step(whole), whole)  # type: ignore[union-attr]
    np.testing.assert_array_equal(whole_vectors(cases["codes cut"]).float_step(whole), whole[:, :8])  # type: ignore[union-attr]
    np.testing.assert_array_equal(whole_vectors(cases["cut"]).float_step(whole), whole[:, :8])  # type: ignore[union-attr]


def test_a_model_whose_vectors_are_its_own_has_none(tiny_model_dir: Path) -> None:
    assert whole_vectors(sentkit.load(str(tiny_model_dir))) is None
    # a prompted wrapper of a cut model changes the texts: its vectors are not the cut of the unprompted whole ones
    prompted = PromptedEncoder(sentkit.load(str(tiny_model_dir), truncate_dim=8), {"q": "query: "}, "q")
    assert whole_vectors(prompted) is None
