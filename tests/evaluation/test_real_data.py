"""Real SentEval data (skipped when the data folder is absent): file counts, and averaged
GloVe-50d reproducing SentEval's own scores (prototyping preset) on the fast tasks."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from sentkit.evaluation import evaluate, load_task

REAL_DATA = Path(os.environ["SENTKIT_DATA"])  # conftest sets the default

pytestmark = [
    pytest.mark.data,
    pytest.mark.skipif(
        not (REAL_DATA / "MR" / "rt-polarity.pos").is_file(),
        reason=f"SentEval data folder {REAL_DATA} is absent (set SENTKIT_DATA)",
    ),
]

COUNTS = {
    "MR": {"all": 10662},
    "CR": {"all": 3775},
    "SUBJ": {"all": 10000},
    "MPQA": {"all": 10606},
    "TREC": {"train": 5452, "test": 500},
    "SST2": {"train": 67349, "dev": 872, "test": 1821},
    "SST5": {"train": 8544, "dev": 1101, "test": 2210},
    "MRPC": {"train": 4076, "test": 1725},
    "SICKE": {"train": 4500, "dev": 500, "test": 4927},
    "STSB": {"train": 5749, "dev": 1500, "test": 1379},
}
STS_PAIRS = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186}


@pytest.mark.parametrize("task", list(COUNTS))
def test_counts_match_senteval(task):
    assert load_task(task, REAL_DATA).counts() == COUNTS[task]


@pytest.mark.parametrize("task", list(STS_PAIRS))
def test_sts_pairs_match_senteval(task):
    assert sum(load_task(task, REAL_DATA).counts().values()) == STS_PAIRS[task]


def test_raw_pair_files_align_with_processed():
    for task in ("SICKR", "STSB", "MRPC", "STS16"):
        tok, raw = load_task(task, REAL_DATA), load_task(task, REAL_DATA, raw=True)
        for k in tok.splits:
            np.testing.assert_array_equal(tok.splits[k].y, raw.splits[k].y)
            assert tok.splits[k].a != raw.splits[k].a or task == "STS16"


# SentEval's scores for averaged GloVe-50d, prototyping preset (from the issue)
REFERENCE = {
    "CR": 71.60,
    "TREC": 68.0,
    "SICKE": 72.34,
    "MRPC": 72.58,
    "MRPC_f1": 79.95,
    "STS12": 51.31,
    "STS13": 45.07,
    "STS14": 49.69,
    "STS15": 53.22,
    "STS16": 51.77,
}


def test_glove_average_reproduces_senteval(tmp_path):
    from sentkit.models.wordvectors import GloveAverage

    res = evaluate(
        GloveAverage(),
        tasks=["CR", "TREC", "SICKE", "MRPC", "STS12", "STS13", "STS14", "STS15", "STS16"],
        data_dir=REAL_DATA,
        cache_dir=str(tmp_path),
    )
    assert res["errors"] == {}
    r = res["results"]
    for task in ("CR", "TREC", "SICKE", "MRPC"):
        assert abs(r[task]["acc"] - REFERENCE[task]) <= 0.5, task
    assert abs(r["MRPC"]["f1"] - REFERENCE["MRPC_f1"]) <= 0.5
    for task in ("STS12", "STS13", "STS14", "STS15", "STS16"):
        assert abs(100 * r[task]["all"]["spearman"]["mean"] - REFERENCE[task]) <= 0.5, task


def test_the_default_data_folder_is_the_env_var_else_the_user_cache(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from sentkit.evaluation.tasks import default_data_dir, require_files

    monkeypatch.setenv("SENTKIT_DATA", str(tmp_path / "d"))
    assert default_data_dir() == tmp_path / "d"
    monkeypatch.delenv("SENTKIT_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_data_dir() == tmp_path / "cache" / "sentkit" / "data"
    try:
        require_files("STS12", [default_data_dir() / "x.tsv"], default_data_dir())
    except FileNotFoundError as e:
        line = str(e)
    assert "\n" not in line and str(tmp_path / "cache" / "sentkit" / "data") in line
    assert "the user cache folder ($SENTKIT_DATA is unset)" in line and "sentkit data download STS12" in line
