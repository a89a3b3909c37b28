"""embed and similarity with a Hill model (the same Encoder arguments as a transformer)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import make_docs
from sentkit.cli.main import main


@pytest.fixture(scope="module")
def tfidf_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tfidf")
    corpus = d / "corpus.txt"
    corpus.write_text("\n".join(make_docs(30, 40)) + "\n")
    out = d / "model"
    assert main(["-q", "train", "--method", "tfidf", "--corpus", str(corpus), "--out", str(out),
                 "--set", "progress=false"]) == 0
    return out


def test_embed_with_a_hill_model(tfidf_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sentkit

    dim = sentkit.load(str(tfidf_model)).encode("river stone").shape[0]
    src = tmp_path / "in.txt"
    src.write_bytes(b"")
    assert main(["embed", "--model", str(tfidf_model), "--input", str(src), "--output", str(tmp_path / "e.npy")]) == 0
    assert np.load(tmp_path / "e.npy").shape == (0, dim)
    src.write_text("river stone\n\nwinter bread\n")
    assert main(["embed", "--model", str(tfidf_model), "--input", str(src), "--output", str(tmp_path / "v.npy"),
                 "--batch-size", "1"]) == 0
    assert np.load(tmp_path / "v.npy").shape == (3, dim)
    assert main(["embed", "--model", str(tfidf_model), "--input", str(src), "--output", str(tmp_path / "c.npy"),
                 "--chunk-long"]) == 2
    assert "--chunk-long needs a transformer model" in capsys.readouterr().err
    assert main(["similarity", "--model", str(tfidf_model), "river stone", "stone river"]) == 0
    assert "cosine similarity" in capsys.readouterr().out
