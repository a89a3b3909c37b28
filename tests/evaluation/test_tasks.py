"""Task registry and loaders on small fixtures in SentEval's file formats."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from sentkit.core.registry import UnknownNameError
from sentkit.evaluation.tasks import (
    ALL_TASKS,
    DOWNSTREAM,
    PROBING,
    TASKS,
    expand_tasks,
    get_task,
    load_task,
)


def test_registry_has_every_task_with_metadata():
    assert len(DOWNSTREAM) == 18 and len(PROBING) == 10
    assert set(TASKS.names()) == set(ALL_TASKS)
    for name in ALL_TASKS:
        spec = get_task(name)
        assert spec.citation and spec.licence and spec.files and spec.metric and spec.splits


@pytest.mark.parametrize(
    "alias,name",
    [
        ("SICK-E", "SICKE"),
        ("sickrelatedness", "SICKR"),
        ("STSBenchmark", "STSB"),
        ("Length", "SentLen"),
        ("OddManOut", "SOMO"),
        ("ImageCaptionRetrieval", "COCO"),
    ],
)
def test_aliases(alias, name):
    assert get_task(alias).name == name


def test_unknown_task_suggests_the_closest_name():
    with pytest.raises(UnknownNameError, match="Did you mean 'TREC'"):
        get_task("TRECC")


def test_every_fixture_task_loads(senteval_dir):
    expected = {
        "MR": {"all": 40},
        "TREC": {"train": 36, "test": 12},
        "SST2": {"train": 30, "dev": 10, "test": 10},
        "SICKE": {"train": 30, "dev": 12, "test": 12},
        "MRPC": {"train": 30, "test": 12},
        "SNLI": {"train": 30, "dev": 12, "test": 12},
        "STSB": {"train": 30, "dev": 12, "test": 12},
        "SentLen": {"train": 30, "dev": 9, "test": 9},
        "COCO": {"train": 60, "dev": 25, "test": 25},
    }
    for name in ALL_TASKS:
        data = load_task(name, senteval_dir)
        assert sum(data.counts().values()) > 0
        if name in expected:
            assert data.counts() == expected[name], name
    assert expand_tasks("all", senteval_dir) == ALL_TASKS


def test_binary_sorted_like_senteval(senteval_dir):
    data = load_task("MR", senteval_dir)
    s = data.splits["all"]
    keys = [(len(a.split()), y) for a, y in zip(s.a, s.y)]
    assert keys == sorted(keys)
    assert set(s.y.tolist()) == {0, 1}
    # label 1 = first file (rt-polarity.pos)
    assert all(y == 1 for a, y in zip(s.a, s.y) if a.startswith("mr0 "))


def test_trec_latin1_and_labels(senteval_dir):
    data = load_task("TREC", senteval_dir)
    tr = data.splits["train"]
    assert data.nclasses == 6
    assert sorted(set(tr.y.tolist())) == [0, 1, 2, 3, 4, 5]
    assert all(a.endswith("caf\xe9") for a in tr.a)
    assert not any(a.split()[0].endswith(":") or ":" in a.split()[0] for a in tr.a)


def test_sts_skips_pairs_without_gold(senteval_dir):
    data = load_task("STS12", senteval_dir)
    for s in data.splits.values():
        assert len(s) == 7  # 8 pairs, one with an empty gold line
        assert s.b is not None


def test_snli_train_format_and_order(senteval_dir):
    data = load_task("SNLI", senteval_dir)
    tr = data.splits["train"]
    assert tr.b is not None
    assert all(a.startswith("snlia") for a in tr.a) and all(b.startswith("snlib") for b in tr.b)
    assert set(tr.y.tolist()) == {0, 1, 2}
    keys = [(len(b.split()), len(a.split())) for a, b in zip(tr.a, tr.b)]
    assert keys == sorted(keys)  # SentEval sorts by s2 length first


def test_probing_format(senteval_dir):
    data = load_task("Tense", senteval_dir)
    assert data.extra["labels"] == ["FUT", "PAST", "PRES"]  # sorted labels of train
    assert data.nclasses == 3
    assert data.counts() == {"train": 30, "dev": 9, "test": 9}


def test_probing_bad_line_names_file_and_line(tmp_path):
    (tmp_path / "PROBING").mkdir()
    (tmp_path / "PROBING" / "past_present.txt").write_text("tr\tPAST\tok .\nxx\tbad\n")
    with pytest.raises(ValueError, match=r"past_present.txt:2"):
        load_task("Tense", tmp_path)


def test_coco_five_captions_per_image_and_features(senteval_dir):
    data = load_task("COCO", senteval_dir)
    tr = data.splits["train"]
    assert len(tr) == 5 * 12
    assert tr.a[0].endswith(" .")  # SentEval appends ' .'
    feats = data.extra["imgfeat"]["train"]
    assert feats.shape == (60, 7)
    np.testing.assert_array_equal(feats[0], feats[4])  # one image row per caption


def test_mrpc_bom_header_and_raw(senteval_dir):
    data = load_task("MRPC", senteval_dir)
    assert data.counts() == {"train": 30, "test": 12}
    assert set(data.splits["train"].y.tolist()) == {0, 1}


def test_raw_option_feeds_originals_in_the_same_order(senteval_dir):
    tok = load_task("SICKE", senteval_dir)
    raw = load_task("SICKE", senteval_dir, raw=True)
    for k in tok.splits:
        a, r = tok.splits[k], raw.splits[k]
        np.testing.assert_array_equal(a.y, r.y)
        assert [s.replace(" .", ".").replace("sick", "Sick") for s in a.a] == r.a


def test_missing_file_names_task_path_and_fix(senteval_dir, tmp_path):
    d = tmp_path / "data"
    shutil.copytree(senteval_dir / "TREC", d / "TREC")
    (d / "TREC" / "TREC_10.label").unlink()
    with pytest.raises(FileNotFoundError) as e:
        load_task("TREC", d)
    msg = str(e.value)
    assert "task TREC" in msg and str(Path(d / "TREC" / "TREC_10.label")) in msg
    assert "sentkit data download TREC" in msg


def test_every_task_kind_has_a_runner_and_add_task_refuses_another() -> None:
    """A new kind of task takes two places (docs/architecture.md): TaskKind and the runner."""
    from typing import get_args

    from sentkit.evaluation.runner import RUNNERS
    from sentkit.evaluation.tasks import TaskKind, TaskSpec, add_task, load_probing

    assert set(get_args(TaskKind)) == set(RUNNERS.names())
    with pytest.raises(ValueError, match="needs its runner in sentkit.evaluation.runner.RUNNERS"):
        add_task(
            TaskSpec(
                name="Odd",
                kind="votes",
                metric="acc",
                folder="ODD",
                files=("x",),
                splits="",
                citation="",
                licence="",
                loader=load_probing,
            )
        )
    assert "Odd" not in TASKS
