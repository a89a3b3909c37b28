"""A user's own tasks in `sentkit evaluate`: the four types end to end on tiny fixtures, the
retrieval metrics against hand-computed values, malformed files refused before any encoding."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from sentkit.cli.main import main
from sentkit.evaluation import protocols as P
from sentkit.evaluation import user_tasks as U
from sentkit.evaluation.tasks import TASKS

BOW_ENCODER = """
import numpy as np
from pathlib import Path

MARK = {mark!r}

def vec(text):
    v = np.zeros(64, np.float32)
    for w in text.lower().split():
        v[sum(map(ord, w)) % 64] += 1.0
    return v

class Enc:
    fingerprint = "bow-64"
    def encode(self, texts):
        if MARK:
            Path(MARK).write_text("encoded")
        return np.stack([vec(t) for t in texts])
"""

TOPICS = {"sport": ["goal", "match", "team", "score", "coach"], "food": ["bread", "soup", "salt", "cook", "meal"]}


def bow(text: str) -> np.ndarray:
    v = np.zeros(64)
    for w in text.lower().split():
        v[sum(map(ord, w)) % 64] += 1.0
    return v


def encoder(folder: Path, mark: Path | None = None) -> str:
    p = folder / "bow_encoder.py"
    p.write_text(BOW_ENCODER.format(mark=str(mark) if mark else ""))
    return f"{p}:Enc"


def topic_rows(rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
    rows = []
    for i in range(n):
        label = ["sport", "food"][i % 2]
        words = [*rng.choice(TOPICS[label], 3).tolist(), "the", "a"]
        rows.append((" ".join(rng.permutation(words).tolist()), label))
    return rows


@pytest.fixture(autouse=True)
def _forget_user_tasks():
    yield
    from sentkit.evaluation import tasks as T

    for name in [n for n in TASKS.names() if TASKS.get(n).group == "user"]:
        del TASKS._items[name]
        T._ALIASES.pop(T._norm(name), None)


def _run(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "res.json"
    rc = main(["evaluate", "--model", encoder(tmp_path), "--no-cache", "--output", str(out), *args])
    assert rc == 0
    return json.loads(out.read_text())


def test_classification_from_a_toml_with_train_dev_test(tmp_path, capsys):
    rng = np.random.default_rng(0)
    for split, n in (("train", 60), ("dev", 20), ("test", 20)):
        lines = ["text\tlabel"] + [f"{t}\t{lab}" for t, lab in topic_rows(rng, n)]
        (tmp_path / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    (tmp_path / "tasks.toml").write_text(
        '[[task]]\nname = "topics"\ntype = "classification"\ntrain = "train.tsv"\ndev = "dev.tsv"\ntest = "test.tsv"\n'
    )
    res = _run(tmp_path, "--task-file", str(tmp_path / "tasks.toml"))
    r = res["results"]["topics"]
    assert r["kind"] == "split" and r["group"] == "user" and r["ntest"] == 20
    assert r["acc"] >= 80  # the topic words separate the classes
    assert res["tasks_requested"] == ["topics"]  # only the user tasks when --tasks is not given
    # the same report code reads it back, without the task being declared in this process
    TASKS._items.pop("topics")
    assert main(["report", str(tmp_path / "res.json")]) == 0
    assert "| topics |" in capsys.readouterr().out
    from sentkit.explore.results_view import open_results  # and `sentkit explore`'s results view

    view = open_results(tmp_path / "res.json")
    assert "topics" in view["tasks"]
    assert next(iter(view["scores"].values()))["topics"][0] == pytest.approx(r["acc"])


def test_pair_classification_from_a_folder_on_the_command_line(tmp_path):
    rng = np.random.default_rng(1)
    folder = tmp_path / "pairs"
    folder.mkdir()
    for split, n in (("train", 200), ("test", 40)):
        rows = []
        for i, (a, topic) in enumerate(topic_rows(rng, n)):
            same = i % 4 < 2
            other = "sport" if (topic == "sport") == same else "food"
            b = " ".join(rng.choice(TOPICS[other], 3).tolist())
            rows.append((a, b, "same" if same else "different"))
        text = "sentence1,sentence2,label\n" + "".join(f'"{a}","{b}",{lab}\n' for a, b, lab in rows)
        (folder / f"{split}.csv").write_text(text)
    res = _run(tmp_path, "--user-task", f"pair-classification:pairs={folder}", "--set", "kfold=3")
    r = res["results"]["pairs"]
    assert r["kind"] == "kfold" and r["ntest"] == 40
    assert r["acc"] >= 75  # same-topic pairs have a small |u - v|


def test_sts_scored_pairs_match_a_cosine_spearman_oracle(tmp_path):
    rng = np.random.default_rng(2)
    rows = []
    for _ in range(30):
        a = rng.choice(TOPICS["sport"] + TOPICS["food"], 4).tolist()
        k = int(rng.integers(0, 5))
        b = a[:k] + rng.choice(TOPICS["food"], 4 - k).tolist()
        rows.append({"text1": " ".join(a), "text2": " ".join(b), "score": float(k)})
    (tmp_path / "sts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = _run(tmp_path, "--user-task", f"sts:mysts={tmp_path / 'sts.jsonl'}")
    r = res["results"]["mysts"]
    cos = [
        float(bow(x["text1"]) @ bow(x["text2"]) / (np.linalg.norm(bow(x["text1"])) * np.linalg.norm(bow(x["text2"]))))
        for x in rows
    ]
    want = spearmanr(cos, [x["score"] for x in rows])[0]
    assert r["sts"]["spearman"] == pytest.approx(want, abs=1e-9)
    assert r["all"]["spearman"]["mean"] == pytest.approx(want, abs=1e-9)


def write_beir(folder: Path) -> None:
    (folder / "qrels").mkdir(parents=True)
    docs = {
        "d1": ("Sport", "goal match team"),
        "d2": ("", "bread soup salt"),
        "d3": ("", "coach score goal"),
        "d4": ("Food", "cook meal bread"),
    }
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n" for k, (t, x) in docs.items())
    )
    queries = {"q1": "goal team", "q2": "bread cook", "q3": "unjudged query"}
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": x}) + "\n" for k, x in queries.items()))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t1\nq2\td4\t1\n")


def test_retrieval_without_the_split_names_the_splits_and_how_to_pick_one(tmp_path, capsys):
    folder = tmp_path / "beir"
    write_beir(folder)
    (folder / "qrels" / "test.tsv").rename(folder / "qrels" / "dev.tsv")
    out = tmp_path / "res.json"
    base = ["evaluate", "--model", encoder(tmp_path), "--no-cache", "--output", str(out)]
    assert main([*base, "--user-task", f"retrieval:faq={folder}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"qrels/test.tsv: missing: the split is 'test', and {folder}/qrels has dev.tsv" in err[0]
    toml = f'[[task]] name = "faq", type = "retrieval", path = "{folder}", split = "dev"'
    assert f"to score split dev, declare the task in a .toml ({toml}) and pass --task-file FILE.toml" in err[0]
    (tmp_path / "faq.toml").write_text(toml.replace("[[task]] ", "[[task]]\n").replace(", ", "\n") + "\n")
    res = _run(tmp_path, "--task-file", str(tmp_path / "faq.toml"))  # the fix, as given, works
    assert res["results"]["faq"]["nqueries"] == 2


def test_retrieval_in_beir_layout_end_to_end(tmp_path):
    write_beir(tmp_path / "beir")
    res = _run(tmp_path, "--user-task", f"retrieval:faq={tmp_path / 'beir'}")
    r = res["results"]["faq"]
    assert r["kind"] == "retrieval" and r["nqueries"] == 2 and r["ndocs"] == 4
    # the oracle: the same ranking computed by hand from the bag-of-words vectors
    docs = {
        "d1": "Sport goal match team",
        "d2": "bread soup salt",
        "d3": "coach score goal",
        "d4": "Food cook meal bread",
    }
    qrels = {"q1": {"d1": 2, "d3": 1}, "q2": {"d4": 1}}
    ranked = {}
    for q, text in (("q1", "goal team"), ("q2", "bread cook")):
        s = {
            d: float(bow(text) @ bow(t) / (np.linalg.norm(bow(text)) * np.linalg.norm(bow(t)))) for d, t in docs.items()
        }
        ranked[q] = sorted(s.items(), key=lambda kv: (-kv[1], [-ord(c) for c in kv[0]]))
    want = P.ir_metrics(qrels, ranked)
    assert r["ndcg_at_10"] == pytest.approx(100 * want["ndcg_at_10"])
    assert r["mrr_at_10"] == pytest.approx(100 * want["mrr_at_10"])
    assert r["recall_at_100"] == pytest.approx(100 * want["recall_at_100"])


def test_ir_metrics_against_hand_computed_values():
    qrels = {"q1": {"d1": 2, "d3": 1}, "q2": {"d2": 1}, "q3": {"d4": 0}}
    ranked = {
        "q1": [("d2", 0.9), ("d1", 0.8), ("d3", 0.7)],
        "q2": [("d1", 0.9), ("d3", 0.8), ("d4", 0.7), ("d2", 0.6)],
        "q3": [("d4", 0.9)],
    }
    m = P.ir_metrics(qrels, ranked)
    # q1: DCG = 2/log2(3) + 1/log2(4) = 1.7618595, IDCG = 2 + 1/log2(3) = 2.6309298; q2: 1/log2(5); q3: 0
    assert m["ndcg_at_10"] == pytest.approx((1.7618595 / 2.6309298 + 0.4306766 + 0) / 3, abs=1e-6)
    assert m["mrr_at_10"] == pytest.approx((1 / 2 + 1 / 4 + 0) / 3)
    assert m["recall_at_100"] == pytest.approx((1 + 1 + 0) / 3)
    cut = P.ir_metrics(qrels, ranked, ndcg_k=1, mrr_k=3, recall_k=1)
    assert cut["mrr_at_3"] == pytest.approx(0.5 / 3)  # q2's relevant document is 4th
    assert cut["ndcg_at_1"] == pytest.approx(0.0)
    assert cut["recall_at_1"] == pytest.approx(0.0)


def test_exact_search_orders_ties_as_trec_eval_and_drops_identical_ids():
    q = np.array([[1.0, 0.0]])
    d = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    got = P.exact_search(q, d, ["x"], ["a", "b", "c", "x"], k=3)
    assert [doc for doc, _ in got["x"]] == ["b", "a", "c"]  # a tie: the larger id first; x dropped
    got = P.exact_search(q, d, ["x"], ["a", "b", "c", "x"], k=4, ignore_identical_ids=False)
    assert [doc for doc, _ in got["x"]] == ["b", "a", "x", "c"]


BAD = [
    (
        "classification",
        "data.tsv",
        "text\tlabel\nfine text\tpos\nno label column here\n",
        "data.tsv, line 3",
        "separate the columns with a tab",
    ),
    (
        "classification",
        "data.jsonl",
        '{"text": "a", "label": "x"}\n{"text": "b", "label": \n',
        "data.jsonl, line 2",
        "one JSON object per line",
    ),
    ("sts", "pairs.tsv", "one\ttwo\t3.5\nthree\tfour\thigh\n", "pairs.tsv, line 2", "as a number"),
    ("classification", "data.csv", "text,label\n,pos\n", "data.csv, line 2", "give every row a text"),
    # a header naming other columns is not data (it became a third class with one example)
    (
        "classification",
        "data.csv",
        "sentence,category\ngoal match,sport\nbread soup,food\n",
        "data.csv, line 1: "
        "the first line is a header (sentence, category) that does not name every column: expected text, label",
        "name the columns text (or sentence), label, in any order, or remove the header line",
    ),
    (
        "classification",
        "data.tsv",
        "\ntxt\tlabel\ngoal match\tsport\nbread soup\tfood\n",
        "data.tsv, line 2: the first line is a header (txt, label)",
        "name the columns text (or sentence), label",
    ),
    (
        "pair-classification",
        "data.csv",
        "text,label\na,b,same\n",
        "data.csv, line 1: the first line is a header "
        "(text, label) that does not name every column: expected text1, text2, label",
        "name the columns text1 (or "
        "sentence1 / text_a / sentence_a), text2 (or sentence2 / text_b / sentence_b), label",
    ),
]


@pytest.mark.parametrize(("kind", "fname", "content", "where", "fix"), BAD)
def test_malformed_files_fail_with_file_line_and_fix_before_encoding(
    tmp_path, capsys, kind, fname, content, where, fix
):
    (tmp_path / fname).write_text(content)
    mark = tmp_path / "encoded.flag"
    rc = main(
        [
            "evaluate",
            "--model",
            encoder(tmp_path, mark),
            "--no-cache",
            "--output",
            str(tmp_path / "r.json"),
            "--user-task",
            f"{kind}:t={tmp_path / fname}",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert where in err and fix in err, err
    assert err.count("\n") == 1 and err.startswith("sentkit evaluate: error:")
    assert not mark.exists()  # nothing was encoded


def test_a_header_is_recognised_by_its_names_in_any_order_and_a_first_data_line_is_data(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("label,id,Sentence\nsport,1,goal match\nfood,2,bread soup\n")
    assert U.read_rows(f, "classification") == [("goal match", "sport"), ("bread soup", "food")]
    f = tmp_path / "d.tsv"
    f.write_text("goal match\tsport\nbread soup\tfood\n")  # no header: the columns in the documented order
    assert U.read_rows(f, "classification") == [("goal match", "sport"), ("bread soup", "food")]


ANGLE_ENCODER = """
import numpy as np

class Enc:
    fingerprint = "angle-2d"
    def encode(self, texts):
        a = np.radians([float(t.split()[-1]) for t in texts])
        return np.stack([np.cos(a), np.sin(a)], 1).astype(np.float32)
"""


def test_qrels_whose_first_line_is_data_with_a_decimal_score(tmp_path):
    """The issue's case: a qrels file without a header whose first line is `q1 d3 2.0`. Read as a
    judgement (2.0 is the integer 2), nDCG@10 is 42.08; dropped as a header, it read 45.01.

    Every text is a unit vector at the angle it names, so each query ranks d1 .. d5 (10, 20 ... 50
    degrees from the queries' 0 degrees). By hand, log2 of ranks + 1 (ranks 1..5): 1, 1.585, 2, 2.322, 2.585;
    q1 judges d1 = 1, d3 = 2, d5 = 1: DCG = 1/1 + 2/2 + 1/2.585 = 2.386853, ideal (2, 1, 1) =
    2/1 + 1/1.585 + 1/2 = 3.130930, nDCG 0.762346; q2 judges d2 = 0: nDCG 0; q3 judges d3 = 1:
    1/log2(4) = 0.5. Mean: (0.762346 + 0 + 0.5) / 3 = 42.08. Without the first line q1 is d1, d5:
    1.386853 / 1.630930 = 0.850345, and (0.850345 + 0 + 0.5) / 3 = 45.01."""
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": f"angle {10 * i}"}) + "\n" for i in range(1, 6))
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": "angle 0"}) + "\n" for q in ("q1", "q2", "q3"))
    )
    judgements = "q1\td1\t1\nq1\td5\t1\nq2\td2\t0\nq3\td3\t1\n"
    (folder / "qrels" / "test.tsv").write_text("q1\td3\t2.0\n" + judgements)
    enc = tmp_path / "angle.py"
    enc.write_text(ANGLE_ENCODER)

    def ndcg() -> float:
        out = tmp_path / "res.json"
        assert (
            main(
                [
                    "evaluate",
                    "--model",
                    f"{enc}:Enc",
                    "--no-cache",
                    "--output",
                    str(out),
                    "--user-task",
                    f"retrieval:r={folder}",
                ]
            )
            == 0
        )
        return json.loads(out.read_text())["results"]["r"]["ndcg_at_10"]

    full = (1 + 2 / 2 + 1 / np.log2(6)) / (2 + 1 / np.log2(3) + 1 / 2)
    assert full == pytest.approx(0.762346, abs=1e-6)
    assert ndcg() == pytest.approx(100 * (full + 0 + 0.5) / 3) and round(ndcg(), 2) == 42.08
    # the oracle of what dropping the line gave: the same file with BEIR's header in its place
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + judgements)
    dropped = (1 + 1 / np.log2(6)) / (1 + 1 / np.log2(3))
    assert ndcg() == pytest.approx(100 * (dropped + 0 + 0.5) / 3) and round(ndcg(), 2) == 45.01


def test_qrels_header_by_names_and_scores_that_are_not_integers(tmp_path):
    f = tmp_path / "q.tsv"
    f.write_text("query_id\tcorpus_id\tscore\nq1\td1\t2.0\nq1\td2\t1\n")  # BEIR's names, either spelling
    assert U.read_qrels(f) == {"q1": {"d1": 2, "d2": 1}}
    f.write_text("q1\td1\t1.5\n")
    with pytest.raises(
        U.UserTaskError,
        match=r"q.tsv, line 1: score '1.5' is not an integer; write the relevance "
        r"as an integer \(0, 1, 2 ...\) \(a header line must be "
        r"query-id<TAB>corpus-id<TAB>score\)",
    ):
        U.read_qrels(f)
    f.write_text("qid\tdocid\trel\nq1\td1\t1\n")  # another header is not skipped silently
    with pytest.raises(U.UserTaskError, match=r"line 1: score 'rel' is not an integer.*a header line must be"):
        U.read_qrels(f)
    f.write_text("q1\td1\t1\nq1\td2\tnan\n")
    with pytest.raises(
        U.UserTaskError,
        match=r"line 2: score 'nan' is not an integer; write the relevance as an "
        r"integer \(0, 1, 2 ...\)$",
    ):
        U.read_qrels(f)


def test_unknown_label_in_test_and_bad_qrels_name_the_file(tmp_path):
    (tmp_path / "train.tsv").write_text("a b\tx\nc d\ty\n")
    (tmp_path / "test.tsv").write_text("a b\tx\ne f\tz\n")
    task = U.UserTask("t", "classification", {"train": tmp_path / "train.tsv", "test": tmp_path / "test.tsv"})
    with pytest.raises(U.UserTaskError, match=r"test.tsv, line 2: label 'z' is not in train.tsv"):
        U.register([task])
    write_beir(tmp_path / "beir")
    (tmp_path / "beir" / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tnope\t1\n")
    with pytest.raises(U.UserTaskError, match=r"document 'nope' .* is not in corpus.jsonl"):
        U.register([U.UserTask("r", "retrieval", path=tmp_path / "beir")])


def test_toml_errors_suggest_the_fix(tmp_path):
    (tmp_path / "t.toml").write_text('[[task]]\nname = "x"\ntype = "clasification"\ndata = "d.tsv"\n')
    with pytest.raises(U.UserTaskError, match="Did you mean 'classification'"):
        U.from_toml(tmp_path / "t.toml")
    (tmp_path / "t.toml").write_text('[[task]]\nname = "MR"\ntype = "classification"\ndata = "d.tsv"\n')
    (tmp_path / "d.tsv").write_text("a\tx\nb\ty\n")
    with pytest.raises(U.UserTaskError, match="built-in task"):
        U.register(U.from_toml(tmp_path / "t.toml"))


def test_exact_search_matches_a_full_sort_on_random_data():
    rng = np.random.default_rng(3)
    q, d = rng.normal(size=(7, 5)), np.round(rng.normal(size=(300, 5)), 1)  # rounding makes ties
    d[10] = d[20]  # an exact tie
    ids = [f"d{i:03d}" for i in range(300)]
    got = P.exact_search(q, d, [f"q{i}" for i in range(7)], ids, k=25)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    dn = d / np.linalg.norm(d, axis=1, keepdims=True)
    for i in range(7):
        s = qn[i] @ dn.T
        want = sorted(range(300), key=lambda j: (-s[j], [-ord(c) for c in ids[j]]))[:25]
        assert [doc for doc, _ in got[f"q{i}"]] == [ids[j] for j in want]
