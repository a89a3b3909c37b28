"""`evaluate()` end to end on fixtures: oracle encoders, dedupe, cache, bad input."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import sentkit
from sentkit.evaluation import evaluate, load_task
from sentkit.evaluation.report import declutr_average, markdown_table, side_by_side

from .conftest import HashEncoder


class OracleEncoder:
    """Features that give away the label: a one-hot of the class of each sentence."""

    def __init__(self, table: dict[str, np.ndarray], dim: int) -> None:
        self.table, self.dim = table, dim

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.table.get(t, np.zeros(self.dim, np.float32)) for t in texts])


def _oracle(tasks: list[str], data_dir) -> OracleEncoder:
    table: dict[str, np.ndarray] = {}
    dim = 8
    for name in tasks:
        data = load_task(name, data_dir)
        for s in data.splits.values():
            for i, (a, y) in enumerate(zip(s.a, s.y)):
                v = np.zeros(dim, np.float32)
                v[int(y)] = 3.0
                v[dim - 1] = 1.0 + 0.01 * (i % 3)
                table[a] = v
                if s.b is not None:
                    table[s.b[i]] = v  # u == v: |u-v| = 0 and u*v = one-hot of the class
    return OracleEncoder(table, dim)


def test_oracle_encoder_scores_perfectly(senteval_dir, tmp_path):
    tasks = ["MR", "TREC", "SST5", "SICKE", "MRPC", "SNLI", "Tense"]
    res = evaluate(_oracle(tasks, senteval_dir), tasks=tasks, data_dir=senteval_dir, cache_dir=str(tmp_path))
    assert res["errors"] == {}
    for t in tasks:
        assert res["results"][t]["acc"] == 100.0, t
    assert res["results"]["MRPC"]["f1"] == 100.0


def test_random_encoder_scores_chance(senteval_dir, tmp_path):
    res = evaluate(HashEncoder(), tasks="MR,SUBJ,MPQA,CR", data_dir=senteval_dir, cache_dir=str(tmp_path))
    accs = [res["results"][t]["acc"] for t in ("MR", "SUBJ", "MPQA", "CR")]
    assert 30.0 <= np.mean(accs) <= 70.0


def test_every_task_runs_and_each_sentence_is_encoded_once(senteval_dir, tmp_path):
    enc = HashEncoder()
    res = sentkit.evaluate(
        enc,
        tasks="all",
        data_dir=senteval_dir,
        cache_dir=str(tmp_path),
        relatedness_max_epoch=100,
        coco_projdim=16,
        coco_max_epoch=2,
    )
    assert res["errors"] == {}
    assert len(res["results"]) == 28
    assert len(enc.seen) == len(set(enc.seen)) == res["timings"]["sentences_unique"]
    assert res["timings"]["sentences_requested"] > res["timings"]["sentences_unique"]  # SICK-E/R share
    for key in ("config", "seed", "versions", "counts", "timings", "model", "declutr_average"):
        assert key in res
    assert res["seed"] == 1111 and res["config"]["kfold"] == 5
    avg = res["declutr_average"]
    assert avg["n_downstream"] == 18 and avg["n_probing"] == 10
    assert avg["downstream"] is not None and avg["probing"] is not None
    coco = res["results"]["COCO"]
    assert {"r1_i2t", "r5_i2t", "r10_i2t", "medr_i2t", "r1_t2i", "r5_t2i", "r10_t2i", "medr_t2i"} <= set(coco)
    md = markdown_table(res)
    assert "| MR |" in md and "DeCLUTR average" in md
    # second run: everything comes from the cache (one sentence per shard used is encoded again, as a check)
    enc2 = HashEncoder()
    res2 = evaluate(enc2, tasks="STS12,SICKE", data_dir=senteval_dir, cache_dir=str(tmp_path))
    t2 = res2["timings"]
    assert t2["sentences_encoded"] == 0 and t2["sentences_from_cache"] == t2["sentences_unique"]
    assert len(enc2.seen) == t2["sentences_checked"] == 2  # the STS12 and SICKE shards
    assert res2["results"]["SICKE"] == res["results"]["SICKE"]


def test_callable_encoder_and_no_cache_without_fingerprint(senteval_dir, tmp_path):
    calls: list[int] = []

    def fn(texts: list[str]) -> list[list[float]]:
        calls.append(len(texts))
        return [[float(len(t)), 1.0] for t in texts]

    res = evaluate(fn, tasks="STS13", data_dir=senteval_dir, cache_dir=str(tmp_path))
    assert "STS13" in res["results"] and res["model"]["fingerprint"] is None
    assert not any(tmp_path.iterdir())  # nothing cached for an opaque callable


@pytest.mark.parametrize(
    "bad,match",
    [
        (lambda texts: np.full((len(texts), 4), np.nan, np.float32), "NaN or inf"),
        (lambda texts: np.zeros((len(texts) + 1, 4), np.float32), "shape"),
        (lambda texts: np.zeros(len(texts), np.float32), "shape"),
    ],
)
def test_bad_encoder_output_is_stopped_with_the_task_named(senteval_dir, bad, match):
    res = evaluate(bad, tasks="TREC", data_dir=senteval_dir, use_cache=False)
    assert "TREC" in res["errors"]
    assert "task TREC" in res["errors"]["TREC"] and match in res["errors"]["TREC"]


def test_one_failing_task_keeps_the_others(senteval_dir, tmp_path):
    base = HashEncoder()

    def nan_on_trec(texts: list[str]) -> np.ndarray:
        out = base.encode(texts)
        out[[i for i, t in enumerate(texts) if t.startswith("trec")]] = np.inf
        return out

    res = evaluate(nan_on_trec, tasks="MR,TREC,STS12", data_dir=senteval_dir, use_cache=False)
    assert set(res["results"]) == {"MR", "STS12"} and set(res["errors"]) == {"TREC"}


def test_missing_data_is_reported_per_task(senteval_dir, tmp_path):
    d = tmp_path / "d"
    shutil.copytree(senteval_dir / "MR", d / "MR")
    res = evaluate(HashEncoder(), tasks="MR,CR", data_dir=d, use_cache=False)
    assert "MR" in res["results"]
    assert "sentkit data download CR" in res["errors"]["CR"] and str(d / "CR") in res["errors"]["CR"]
    assert evaluate(HashEncoder(), tasks="all", data_dir=d, use_cache=False)["tasks_requested"] == ["MR"]


def test_unknown_override_is_a_config_error(senteval_dir):
    from sentkit.core.config import ConfigError

    with pytest.raises(ConfigError, match="Did you mean 'kfold'"):
        evaluate(HashEncoder(), tasks="MR", data_dir=senteval_dir, kfolds=3)


def test_literature_preset_and_overrides(senteval_dir):
    res = evaluate(HashEncoder(), tasks="TREC", preset="literature", data_dir=senteval_dir, use_cache=False, tenacity=1)
    cfg = res["config"]
    assert (cfg["kfold"], cfg["optim"], cfg["batch_size"], cfg["epoch_size"], cfg["tenacity"]) == (10, "adam", 64, 4, 1)


def test_declutr_average_convention():
    results = {
        "MR": {"acc": 80.0},
        "MRPC": {"acc": 70.0, "f1": 80.0},
        "SICKR": {"spearman": 0.5},
        "STS12": {"all": {"spearman": {"mean": 0.6}}},
        "SNLI": {"acc": 50.0},
        "Tense": {"acc": 90.0},
    }
    avg = declutr_average(results)
    assert avg["per_task"]["MRPC"] == 75.0 and avg["per_task"]["SICKR"] == 50.0
    assert avg["downstream"] == pytest.approx((80 + 75 + 50 + 60 + 50) / 5)
    assert avg["downstream_without_snli"] == pytest.approx((80 + 75 + 50 + 60) / 4)
    assert avg["probing"] == 90.0


def test_side_by_side_marks_the_best(senteval_dir):
    a = {"model": {"name": "a"}, "config": {"preset": "prototyping"}, "results": {"MR": {"acc": 70.0}}}
    b = {"model": {"name": "b"}, "config": {"preset": "prototyping"}, "results": {"MR": {"acc": 75.0}}}
    table = side_by_side([a, b])
    assert "| MR | 70.00 | **75.00** |" in table


def test_empty_data_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="sentkit data check"):
        evaluate(HashEncoder(), tasks="all", data_dir=tmp_path / "nothing")


def test_embeddings_that_cannot_fit_are_refused_with_the_fix(senteval_dir, monkeypatch):
    import sentkit.evaluation.runner as runner

    monkeypatch.setattr(runner, "available_memory", lambda: 10_000)  # bytes: far below 2 x n x 64 x 4
    res = evaluate(
        lambda texts: np.ones((len(texts), 64), np.float32), tasks="TREC", data_dir=senteval_dir, use_cache=False
    )
    assert "TREC" not in res["results"]
    assert "GiB" in res["errors"]["TREC"] and "max_features" in res["errors"]["TREC"]
    monkeypatch.setattr(runner, "available_memory", lambda: None)  # unknown: no check
    assert (
        "TREC"
        in evaluate(
            lambda texts: np.ones((len(texts), 64), np.float32), tasks="TREC", data_dir=senteval_dir, use_cache=False
        )["results"]
    )


def test_memory_is_checked_again_for_every_later_task(senteval_dir, monkeypatch):
    import sentkit.evaluation.runner as runner

    calls = []

    def shrinking() -> int:  # plenty for the first task, too little once a later task adds rows
        calls.append(1)
        return 10**12 if len(calls) == 1 else 10_000

    monkeypatch.setattr(runner, "available_memory", shrinking)
    res = evaluate(
        lambda texts: np.ones((len(texts), 64), np.float32), tasks="MR,TREC", data_dir=senteval_dir, use_cache=False
    )
    assert len(calls) == 2
    assert len(res["results"]) == 1 and len(res["errors"]) == 1
    assert "GiB" in next(iter(res["errors"].values()))
