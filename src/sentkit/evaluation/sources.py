"""Where `sentkit data download` fetches each task's files: the table in ``sources.json`` (package
data), read once into :data:`SOURCES`.

Each folder names where SentEval's own download script takes it from (``senteval``) and what that
script does to it; each file lists its URLs in the order they are tried (SentEval's own location
first where the script uses the file as downloaded, then pinned mirrors of SentEval's processed
output) with its sha256 and size. Files whose checksum and size are unknown (SNLI train, probing,
COCO) carry ``None`` and are downloaded unchecked. tests/evaluation/test_sources.py checks the table
against the verified data folder.
"""

from __future__ import annotations

import json
from importlib import resources

# folder -> [(path inside the folder, urls in the order tried, sha256 or None, size in bytes or None)]
SourceFile = tuple[str, tuple[str, ...], str | None, int | None]


def _read() -> tuple[dict[str, list[SourceFile]], dict[str, dict[str, str | None]]]:
    table = json.loads(resources.files("sentkit.evaluation").joinpath("sources.json").read_text(encoding="utf-8"))
    files: dict[str, list[SourceFile]] = {}
    origin: dict[str, dict[str, str | None]] = {}
    for folder, entry in table["folders"].items():
        files[folder] = [(f["path"], tuple(f["urls"]), f["sha256"], f["size"]) for f in entry["files"]]
        origin[folder] = {"senteval": entry["senteval"], "processing": entry["processing"]}
    return files, origin


SOURCES, SENTEVAL_ORIGIN = _read()
