"""The download table (src/sentkit/evaluation/sources.json) against the verified data folder: every
file it pins has the sha256 and size of the copy there; and `data download` tries SentEval's own
location first, then the mirrors, keeping only bytes that match."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sentkit.evaluation import data as data_mod
from sentkit.evaluation.sources import SENTEVAL_ORIGIN, SOURCES
from sentkit.evaluation.tasks import ALL_TASKS, get_task


def test_the_table_matches_the_verified_data_folder(shared_data: Path) -> None:
    checked, wrong = 0, []
    for folder, files in SOURCES.items():
        for rel, _urls, sha, size in files:
            p = shared_data / folder / rel
            if sha is None or not p.is_file():
                continue
            got = hashlib.sha256(p.read_bytes()).hexdigest()
            checked += 1
            if got != sha or p.stat().st_size != size:
                wrong.append(f"{folder}/{rel}")
    assert checked >= 100, f"only {checked} pinned files found under {shared_data}"
    assert not wrong, f"sources.json disagrees with the verified copies: {wrong}"


def test_every_task_folder_has_sources_and_its_senteval_origin() -> None:
    for name in ALL_TASKS:
        folder = get_task(name).folder
        assert SOURCES.get(folder), f"task {name}: no download source for folder {folder}"
        assert SENTEVAL_ORIGIN[folder]["senteval"], folder
    for folder, files in SOURCES.items():
        for rel, urls, sha, size in files:
            assert urls and all(u.startswith("https://") for u in urls), (folder, rel)
            assert (sha is None) == (size is None) or folder == "SNLI", (folder, rel)
    # SentEval's own location comes first where its script uses the file as downloaded
    assert SOURCES["MRPC"][0][1][0].startswith("https://s3.amazonaws.com/senteval/")
    assert SENTEVAL_ORIGIN["MRPC"]["processing"] is None and SENTEVAL_ORIGIN["MR"]["processing"]


def test_download_falls_back_to_a_mirror_with_the_right_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = tmp_path / "mirror.label"
    good.write_bytes(b"NUM:date when ?\n")
    changed = tmp_path / "official.label"
    changed.write_bytes(b"NUM:date when ? (edited upstream)\n")
    sha, size = hashlib.sha256(good.read_bytes()).hexdigest(), good.stat().st_size
    gone = (tmp_path / "gone.label").as_uri()
    monkeypatch.setitem(
        data_mod.SOURCES, "TREC", [("TREC_10.label", (gone, changed.as_uri(), good.as_uri()), sha, size)]
    )
    assert data_mod.download(["TREC"], tmp_path / "d") == {"TREC": ["TREC_10.label"]}
    assert (tmp_path / "d" / "TREC" / "TREC_10.label").read_bytes() == good.read_bytes()
    monkeypatch.setitem(data_mod.SOURCES, "TREC", [("TREC_10.label", (gone, changed.as_uri()), sha, size)])
    with pytest.raises(OSError, match="TREC/TREC_10.label: no source gave the expected file") as e:
        data_mod.download(["TREC"], tmp_path / "e")
    assert "gone.label" in str(e.value) and "bytes, expected" in str(e.value)
    assert not (tmp_path / "e" / "TREC" / "TREC_10.label").exists()
