"""embed and similarity with a Hill model (the same Encoder arguments as a transformer)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sentkit.cli.main import main
from support import make_docs


@pytest.fixture(scope="module")
def tfidf_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tfidf")
    corpus = d / "corpus.txt"
    corpus.write_text("\n".join(make_docs(30, 40)) + "\n")
    out = d / "model"
    assert (
        main(
            ["-q", "train", "--method", "tfidf", "--corpus", str(corpus), "--out", str(out), "--set", "progress=false"]
        )
        == 0
    )
    return out


def test_embed_with_a_hill_model(tfidf_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sentkit

    dim = sentkit.load(str(tfidf_model)).encode("river stone").shape[0]
    src = tmp_path / "in.txt"
    src.write_bytes(b"")
    assert main(["embed", "--model", str(tfidf_model), "--input", str(src), "--output", str(tmp_path / "e.npy")]) == 0
    assert np.load(tmp_path / "e.npy").shape == (0, dim)
    src.write_text("river stone\n\nwinter bread\n")
    assert (
        main(
            [
                "embed",
                "--model",
                str(tfidf_model),
                "--input",
                str(src),
                "--output",
                str(tmp_path / "v.npy"),
                "--batch-size",
                "1",
            ]
        )
        == 0
    )
    assert np.load(tmp_path / "v.npy").shape == (3, dim)
    assert (
        main(
            [
                "embed",
                "--model",
                str(tfidf_model),
                "--input",
                str(src),
                "--output",
                str(tmp_path / "c.npy"),
                "--chunk-long",
            ]
        )
        == 2
    )
    assert "--chunk-long needs a transformer model" in capsys.readouterr().err
    assert main(["similarity", "--model", str(tfidf_model), "river stone", "stone river"]) == 0
    assert "cosine similarity" in capsys.readouterr().out


# The Model names table (README): an object with `encode`, a class built with no arguments, or a
# function `list[str] -> array`. Each here takes only the texts, as a user's own code would.
USER_CODE = """
import numpy as np


def _vectors(texts):
    return np.array([[len(t), t.count("r"), 1.0] for t in texts], dtype=np.float64)


class Enc:
    def encode(self, texts):
        return _vectors(texts)


enc = Enc()


def embed(texts):
    return _vectors(texts)
"""


@pytest.mark.parametrize("attr", ["Enc", "enc", "embed"])
def test_embed_takes_code_whose_encode_takes_only_the_texts(
    attr: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = tmp_path / "my.py"
    code.write_text(USER_CODE)
    lines = ["river stone", "", "a rare winter river", "bread"]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n")
    expected = np.array([[len(t), t.count("r"), 1.0] for t in lines], dtype=np.float32)  # the oracle
    model = f"{code}:{attr}"
    one = tmp_path / "one.npy"
    assert (
        main(["-q", "embed", "--model", model, "--input", str(src), "--output", str(one), "--batch-size", "3"]) == 0
    ), capsys.readouterr().err
    assert np.array_equal(np.load(one), expected)
    sharded = tmp_path / "sharded.npy"
    for i in (1, 0):
        assert (
            main(
                [
                    "-q",
                    "embed",
                    "--model",
                    model,
                    "--input",
                    str(src),
                    "--output",
                    str(sharded),
                    "--block",
                    "1",
                    "--shard",
                    f"{i}/2",
                ]
            )
            == 0
        ), capsys.readouterr().err
    assert sharded.read_bytes() == one.read_bytes()
    assert main(["-q", "similarity", "--model", model, "river", "bread"]) == 0


def test_an_encode_that_takes_only_the_texts_keeps_the_objects_attributes() -> None:
    from sentkit.core.interface import TextsOnlyEncoder, as_encoder

    class Enc:
        dim = 2

        def encode(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 2))

    enc = as_encoder(Enc())
    assert isinstance(enc, TextsOnlyEncoder) and enc.dim == 2
    assert enc.encode(["a", "b", "c"], batch_size=2, show_progress=False).shape == (3, 2)
    assert enc.encode("a").shape == (2,)

    class Full:
        def encode(self, texts: list[str], batch_size: int = 32, *, show_progress: bool = False) -> np.ndarray:
            return np.ones((len(texts), 2))

    full = Full()
    assert as_encoder(full) is full  # an Encoder already: used as it is
