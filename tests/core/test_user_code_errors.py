"""A user's encoder (file.py:attr) that raises inside encode: one line naming the model and the
exception, exit 1, not sentkit's "internal error"; prompts and Encoder arguments still reach it."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from sentkit.cli.main import describe_error, main
from sentkit.core.errors import UserCodeError
from sentkit.core.interface import as_encoder, encode_with_prompt, takes_prompts

ENCODER = """
import numpy as np


class Enc:
    prompts = {"query": "q: "}

    def encode(self, texts, batch_size=32, *, show_progress=False, prompt_name=None, prompt=None):
        if any("boom" in t for t in texts):
            raise ValueError("no vectors for boom")
        return np.ones((len(texts), 3), dtype=np.float32) * len(prompt_name or "")
"""


class Enc:
    def encode(self, texts: list[str], batch_size: int = 32, *, show_progress: bool = False) -> np.ndarray:
        if "boom" in texts:
            raise ValueError("no vectors for boom")
        return np.ones((len(texts), 3), dtype=np.float32)


def test_code_encoder_names_the_model_and_the_exception() -> None:
    enc = as_encoder(Enc(), spec="mine.py:Enc")
    assert enc.encode(["a"]).shape == (1, 3)
    with pytest.raises(UserCodeError) as info:
        enc.encode(["boom"])
    assert isinstance(info.value.__cause__, ValueError)
    line, code = describe_error(info.value)
    assert code == 1
    assert line.startswith("the model 'mine.py:Enc' raised ValueError: no vectors for boom")
    assert "internal error" not in line and "please report" not in line
    # without a spec (an object given in Python) nothing changes: the user's own exception
    with pytest.raises(ValueError):
        as_encoder(Enc()).encode(["boom"])
    assert type(pickle.loads(pickle.dumps(enc)).encode(["a"])) is np.ndarray  # picklable, as the object was


def test_code_encoder_keeps_prompts_and_texts_only_objects() -> None:
    class Prompted:
        def encode(
            self, texts: list[str], batch_size: int = 32, *, show_progress: bool = False, prompt_name: str | None = None
        ) -> np.ndarray:
            return np.full((len(texts), 2), float(prompt_name == "query"), dtype=np.float32)

        def encode_prompt(self) -> None: ...

    class TextsOnly:
        def encode(self, texts: list[str]) -> np.ndarray:
            raise KeyError("bad")

    p = as_encoder(Prompted(), spec="p.py:Prompted")
    assert "prompt_name" in __import__("inspect").signature(p.encode).parameters
    assert takes_prompts(p) is takes_prompts(Prompted())
    with pytest.raises(UserCodeError, match=r"the model 't.py:TextsOnly' raised KeyError: 'bad'"):
        as_encoder(TextsOnly(), spec="t.py:TextsOnly").encode(["x"])
    with pytest.raises(UserCodeError, match="raised ZeroDivisionError"):
        as_encoder(lambda texts: 1 / 0, spec="f.py:fn").encode(["x"])
    assert encode_with_prompt(p, ["x"], prompt_name="query").shape == (1, 2)
    p.prompts = {"query": "q: "}  # set on the user's object, as before (sentkit.load merges prompts so)
    assert p.wrapped.prompts == {"query": "q: "} and p.prompts is p.wrapped.prompts


def test_embed_with_a_failing_code_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "mine.py").write_text(ENCODER)
    src = tmp_path / "in.txt"
    src.write_text("fine\nboom\n")
    spec = f"{tmp_path / 'mine.py'}:Enc"
    rc = main(["embed", "--model", spec, "--input", str(src), "--output", str(tmp_path / "e.npy")])
    err = capsys.readouterr().err
    assert rc == 1
    assert f"sentkit embed: error: the model {spec!r} raised ValueError: no vectors for boom" in err
    assert "internal error" not in err
