"""A user's own tasks in `sentkit evaluate`: task files in simple formats, registered in the task
registry so that they run through the same protocols, embedding cache and report as SentEval's.

Four types (``type`` in the TOML, ``TYPE`` on the command line):

- ``classification``: rows (text, label);
- ``pair-classification``: rows (text1, text2, label);
- ``sts``: rows (text1, text2, score), scored by cosine similarity (Spearman and Pearson), one
  subset per file;
- ``retrieval``: a folder in BEIR's layout (``corpus.jsonl`` with ``_id``, ``title``, ``text``;
  ``queries.jsonl`` with ``_id``, ``text``; ``qrels/<split>.tsv`` with ``query-id``,
  ``corpus-id``, ``score``), scored by exact cosine search: nDCG@10, MRR@10, Recall@100.

Row files are ``.tsv`` (tab-separated), ``.csv`` or ``.jsonl`` (keys ``text`` / ``text1``,
``text2`` / ``label`` or ``score``; ``sentence``, ``sentence1``, ``sentence2`` also work); a first
line naming the columns is a header (one naming only some of them is an error, never data); a
qrels header is recognised by its names, and a qrels score must be an integer (``2.0`` is 2).
Classification tasks take ``train`` + ``dev`` + ``test`` (L2 penalty picked on dev, as SST),
``train`` + ``test`` (k-fold on train picks it, as TREC) or one ``data`` file (k-fold
cross-validation, as MR). Every file is read and checked when the tasks are
declared, before anything is encoded: a malformed file is a :class:`UserTaskError` naming the
file, the line and the fix.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.config import ConfigError
from sentkit.evaluation.tasks import TASKS, Split, TaskData, TaskSpec, _norm

TYPES = ("classification", "pair-classification", "sts", "retrieval")
ROW_SUFFIXES = (".tsv", ".csv", ".jsonl")
COLUMNS = {
    "classification": ("text", "label"),
    "pair-classification": ("text1", "text2", "label"),
    "sts": ("text1", "text2", "score"),
}
ALIASES = {
    "sentence": "text",
    "sentence1": "text1",
    "sentence2": "text2",
    "text_a": "text1",
    "text_b": "text2",
    "sentence_a": "text1",
    "sentence_b": "text2",
    "gold": "score",
    "similarity": "score",
}
SPLIT_KEYS = ("data", "train", "dev", "test")


class UserTaskError(ConfigError):
    """A user task declaration or file that cannot be used: file, line and fix in the message."""


@dataclass
class UserTask:
    """One declared task (see the module docstring); paths resolved."""

    name: str
    type: str
    files: dict[str, Path] = field(default_factory=dict)  # data / train / dev / test, or sts subsets
    path: Path | None = None  # retrieval folder
    split: str = "test"  # retrieval qrels split


def _fail(where: str, what: str, fix: str) -> UserTaskError:
    return UserTaskError(f"{where}: {what}; {fix}")


# ---------------------------------------------------------------------------------------------
# Row files
# ---------------------------------------------------------------------------------------------
def _text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UserTaskError(f"{path}: no such file; check the path in the task declaration") from None
    if b"\x00" in raw:
        raise _fail(str(path), "has NUL bytes (a binary or UTF-16 file)", "save it as UTF-8 text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise _fail(f"{path}, line {line}", "not UTF-8 text", "save the file as UTF-8") from None


def _json_lines(path: Path, fix: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line of a .jsonl file; a line that is not a JSON
    object is a UserTaskError naming the line, with `fix`."""
    out = []
    for i, line in enumerate(_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise _fail(
                f"{path}, line {i}", f"not valid JSON ({e.msg})", f"write one JSON object per line ({fix})"
            ) from None
        if not isinstance(obj, dict):
            raise _fail(f"{path}, line {i}", "not a JSON object", f"write one JSON object per line ({fix})")
        out.append((i, obj))
    return out


def _header(cells: list[str], want: tuple[str, ...]) -> list[str] | None:
    names = [ALIASES.get(c.strip().lower(), c.strip().lower()) for c in cells]
    return names if set(want) <= set(names) else None


def _column_names(want: tuple[str, ...]) -> str:
    """The names a header may give the columns ``want``: ``text (or sentence), label``."""
    out = []
    for k in want:
        alias = [a for a, v in ALIASES.items() if v == k]
        out.append(f"{k} (or {' / '.join(alias)})" if alias else k)
    return ", ".join(out)


def _not_a_header(cells: list[str], want: tuple[str, ...], where: str) -> None:
    """A first line that names some of the columns but not all of them is a header with a wrong name
    (``sentence,category``), not data: a UserTaskError naming the expected columns."""
    named = [c.strip() for c in cells if ALIASES.get(c.strip().lower(), c.strip().lower()) in want]
    if named:
        raise _fail(
            where,
            f"the first line is a header ({', '.join(c.strip() for c in cells)}) that does not name "
            f"every column: expected {', '.join(want)}",
            f"name the columns {_column_names(want)}, in any order, or remove the header line",
        )


def read_rows(path: Path, kind: str) -> list[tuple[str, ...]]:
    """Rows of a .tsv / .csv / .jsonl file as tuples in COLUMNS[kind] order (scores as text);
    a malformed line is a UserTaskError naming the file, the line and the fix."""
    want = COLUMNS[kind]
    suffix = path.suffix.lower()
    if suffix not in ROW_SUFFIXES:
        raise _fail(str(path), f"unsupported file type {suffix!r}", f"use {', '.join(ROW_SUFFIXES)}")
    text = _text(path)
    rows: list[tuple[str, ...]] = []
    if suffix == ".jsonl":
        for i, obj in _json_lines(path, f"keys {', '.join(want)}"):
            where = f"{path}, line {i}"
            obj = {ALIASES.get(k.lower(), k.lower()): v for k, v in obj.items()}
            missing = [k for k in want if k not in obj]
            if missing:
                raise _fail(
                    where,
                    f"no key {missing[0]!r} (keys: {sorted(obj)})",
                    f"give every object the keys {', '.join(want)}",
                )
            rows.append(tuple(_cell(obj[k], where, k) for k in want))
        return _checked(rows, path, kind, first=1)
    reader = csv.reader(
        io.StringIO(text),
        delimiter="\t" if suffix == ".tsv" else ",",
        quoting=csv.QUOTE_NONE if suffix == ".tsv" else csv.QUOTE_MINIMAL,
    )
    order: list[int] | None = None
    first_data = 1
    try:
        for i, cells in enumerate(reader, 1):
            if not cells or not any(c.strip() for c in cells):
                continue
            if order is None and not rows:
                names = _header(cells, want)
                if names is not None:
                    order = [names.index(k) for k in want]
                    first_data = i + 1
                    continue
                _not_a_header(cells, want, f"{path}, line {i}")
            idx = order or list(range(len(want)))
            if len(cells) <= max(idx):
                sep = "tab" if suffix == ".tsv" else "comma"
                raise _fail(
                    f"{path}, line {i}",
                    f"{len(cells)} column(s), {len(want)} expected ({', '.join(want)})",
                    f"separate the columns with a {sep}"
                    + (
                        " (a text holding a tab cannot be written in .tsv: use .csv or .jsonl)"
                        if suffix == ".tsv"
                        else ""
                    ),
                )
            rows.append(tuple(cells[j].strip() for j in idx))
    except csv.Error as e:
        raise _fail(f"{path}, line {reader.line_num}", f"not readable as {suffix} ({e})", "check its quoting") from None
    return _checked(rows, path, kind, first=first_data)


def _cell(v: Any, where: str, key: str) -> str:
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise _fail(
            where,
            f"{key!r} is {type(v).__name__}",
            f"give {key!r} as a string" + (" or a number" if key in ("label", "score") else ""),
        )
    return str(v).strip()


def _checked(rows: list[tuple[str, ...]], path: Path, kind: str, first: int) -> list[tuple[str, ...]]:
    if not rows:
        raise _fail(str(path), "no rows", f"write one row per line: {', '.join(COLUMNS[kind])}")
    lines = _data_lines(path)
    for n, row in enumerate(rows):
        where = f"{path}, line {lines[n] if n < len(lines) else first + n}"
        for k, v in zip(COLUMNS[kind], row):
            if k.startswith("text") and not v:
                raise _fail(where, f"empty {k}", "give every row a text, or remove the row")
        if kind == "sts":
            try:
                score = float(row[2])
            except ValueError:
                raise _fail(
                    where, f"score {row[2]!r} is not a number", "write the gold score as a number (e.g. 3.8)"
                ) from None
            if not np.isfinite(score):
                raise _fail(where, f"score {row[2]!r} is not finite", "write a finite number")
        elif not row[-1]:
            raise _fail(where, "empty label", "give every row a label")
    return rows


def _data_lines(path: Path) -> list[int]:
    """Line numbers of the non-blank lines after a header (for messages; approximate for .csv
    files with quoted line breaks)."""
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8-sig", errors="replace").splitlines(), 1):
        if line.strip():
            out.append(i)
    if out and path.suffix.lower() != ".jsonl":
        first = path.read_text(encoding="utf-8-sig", errors="replace").splitlines()[out[0] - 1]
        sep = "\t" if path.suffix.lower() == ".tsv" else ","
        cells = next(csv.reader([first], delimiter=sep)) if first else []
        kinds = {tuple(v) for v in COLUMNS.values()}
        if any(_header(cells, k) is not None for k in kinds):
            out = out[1:]
    return out


# ---------------------------------------------------------------------------------------------
# Loading one task
# ---------------------------------------------------------------------------------------------
def _classification(task: UserTask) -> TaskData:
    pair = task.type == "pair-classification"
    parts = {k: read_rows(p, task.type) for k, p in task.files.items()}
    base = "data" if "data" in parts else "train"
    labels = sorted({r[-1] for r in parts[base]})
    if len(labels) < 2:
        raise _fail(
            str(task.files[base]), f"one label only ({labels[0]!r})", "a classification task needs two labels or more"
        )
    index = {lab: i for i, lab in enumerate(labels)}
    splits = {}
    for key, rows in parts.items():
        unknown = [r[-1] for r in rows if r[-1] not in index]
        if unknown:
            n = next(i for i, r in enumerate(rows) if r[-1] in unknown)
            line = _data_lines(task.files[key])[n]
            raise _fail(
                f"{task.files[key]}, line {line}",
                f"label {unknown[0]!r} is not in {task.files[base].name}",
                f"every {key} label must occur in the {base} file (labels there: {', '.join(labels[:10])})",
            )
        name = "all" if key == "data" else key
        y = np.array([index[r[-1]] for r in rows], dtype=np.int64)
        splits[name] = Split(a=[r[0] for r in rows], b=[r[1] for r in rows] if pair else None, y=y)
    return TaskData(task.name, splits, nclasses=len(labels), extra={"labels": labels})


def _sts(task: UserTask) -> TaskData:
    splits = {}
    for key, p in task.files.items():
        rows = read_rows(p, "sts")
        splits[key] = Split(a=[r[0] for r in rows], b=[r[1] for r in rows], y=np.array([float(r[2]) for r in rows]))
    return TaskData(task.name, splits)


def _read_jsonl_ids(path: Path, what: str, title: bool) -> tuple[list[str], list[str]]:
    ids, texts, seen = [], [], set()
    for i, obj in _json_lines(path, "BEIR's layout"):
        where = f"{path}, line {i}"
        if "_id" not in obj or "text" not in obj:
            raise _fail(where, f"a {what} needs the keys '_id' and 'text'", 'write {"_id": "...", "text": "..."}')
        doc_id = str(obj["_id"])
        if doc_id in seen:
            raise _fail(where, f"{what} id {doc_id!r} occurs twice", "give every id once")
        seen.add(doc_id)
        body = str(obj["text"])
        if title and obj.get("title"):
            body = f"{obj['title']} {body}"  # BEIR's dense models encode title + " " + text
        body = body.strip()
        if not body:
            raise _fail(where, f"{what} {doc_id!r} has no text", "give it a text, or remove it")
        ids.append(doc_id)
        texts.append(body)
    if not ids:
        raise _fail(str(path), f"no {what}", "write one JSON object per line")
    return ids, texts


QRELS_HEADER = ("query-id", "corpus-id", "score")  # BEIR's header line


def _relevance(cell: str) -> int | None:
    """A judged relevance: an integer, also written as an integral decimal (``2.0``); None otherwise."""
    try:
        value = float(cell)
    except ValueError:
        return None
    return int(value) if value.is_integer() else None


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """BEIR qrels: ``query-id<TAB>corpus-id<TAB>score`` lines. A first line naming those columns
    (``query_id`` / ``corpus_id`` spellings too) is the header, recognised by its names; every
    other line is a judgement whose score is an integer (``2`` or ``2.0``; ``1.5`` is an error)."""
    qrels: dict[str, dict[str, int]] = {}
    first = True
    for i, line in enumerate(_text(path).splitlines(), 1):
        if not line.strip():
            continue
        cells = line.rstrip("\r\n").split("\t")
        if first and tuple(c.strip().lower().replace("_", "-") for c in cells[:3]) == QRELS_HEADER:
            first = False
            continue  # the header
        first = False
        if len(cells) < 3:
            raise _fail(f"{path}, line {i}", f"{len(cells)} column(s)", "write query-id<TAB>corpus-id<TAB>score")
        score = _relevance(cells[2].strip())
        if score is None:
            header = " (a header line must be query-id<TAB>corpus-id<TAB>score)" if not qrels else ""
            raise _fail(
                f"{path}, line {i}",
                f"score {cells[2]!r} is not an integer",
                f"write the relevance as an integer (0, 1, 2 ...){header}",
            )
        qrels.setdefault(cells[0].strip(), {})[cells[1].strip()] = score
    if not qrels:
        raise _fail(str(path), "no judgements", "write query-id<TAB>corpus-id<TAB>score lines")
    return qrels


def _retrieval(task: UserTask) -> TaskData:
    assert task.path is not None
    folder = task.path
    qpath = folder / "qrels" / f"{task.split}.tsv"
    for p in (folder / "corpus.jsonl", folder / "queries.jsonl", qpath):
        if not p.is_file():
            others = sorted(f.stem for f in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
            if p == qpath and others:  # the split is the default (test) or mistyped: say which there are
                raise _fail(
                    str(p),
                    f"missing: the split is {task.split!r}, and {folder}/qrels has "
                    + ", ".join(f"{x}.tsv" for x in others),
                    f'to score split {others[0]}, declare the task in a .toml ([[task]] name = "{task.name}", '
                    f'type = "retrieval", path = "{folder}", split = "{others[0]}") and pass --task-file FILE.toml',
                )
            raise _fail(
                str(p),
                "missing",
                f"a retrieval task is a folder with corpus.jsonl, queries.jsonl and qrels/{task.split}.tsv "
                "(BEIR's layout)",
            )
    doc_ids, docs = _read_jsonl_ids(folder / "corpus.jsonl", "document", title=True)
    q_ids, queries = _read_jsonl_ids(folder / "queries.jsonl", "query", title=False)
    qrels = read_qrels(qpath)
    known_q, known_d = set(q_ids), set(doc_ids)
    for qid, rels in qrels.items():
        if qid not in known_q:
            raise _fail(
                str(qpath), f"query {qid!r} is not in queries.jsonl", "judge only queries that queries.jsonl holds"
            )
        bad = [d for d in rels if d not in known_d]
        if bad:
            raise _fail(
                str(qpath),
                f"document {bad[0]!r} (query {qid!r}) is not in corpus.jsonl",
                "judge only documents that corpus.jsonl holds",
            )
    keep = [i for i, q in enumerate(q_ids) if q in qrels]  # BEIR evaluates the judged queries
    return TaskData(
        task.name,
        {
            "corpus": Split(a=docs, y=np.zeros(len(docs), np.int64)),
            "queries": Split(a=[queries[i] for i in keep], y=np.zeros(len(keep), np.int64)),
        },
        extra={"doc_ids": doc_ids, "query_ids": [q_ids[i] for i in keep], "qrels": qrels},
    )


def kind_of(task: UserTask) -> str:
    if task.type == "sts":
        return "sts"
    if task.type == "retrieval":
        return "retrieval"
    if "data" in task.files:
        return "cv"
    return "split" if "dev" in task.files else "kfold"


def load(task: UserTask) -> TaskData:
    if task.type == "retrieval":
        return _retrieval(task)
    if task.type == "sts":
        return _sts(task)
    return _classification(task)


# ---------------------------------------------------------------------------------------------
# Declarations: TOML and command line
# ---------------------------------------------------------------------------------------------
def _check(task: UserTask, where: str) -> UserTask:
    if task.type not in TYPES:
        from sentkit.core.registry import suggest

        raise _fail(
            where,
            f"unknown task type {task.type!r}",
            f"use one of {', '.join(TYPES)}." + suggest(task.type, list(TYPES)),
        )
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", task.name) or ":" in task.name:
        raise _fail(where, f"task name {task.name!r}", "use letters, digits, '_', '.' or '-'")
    if task.type == "retrieval":
        if task.path is None:
            raise _fail(where, f"retrieval task {task.name} has no path", "give path = the BEIR folder")
        return task
    if not task.files:
        raise _fail(where, f"task {task.name} has no file", "give data = FILE, or train + test (+ dev)")
    if task.type != "sts":
        keys = set(task.files)
        if keys not in ({"data"}, {"train", "test"}, {"train", "dev", "test"}):
            raise _fail(
                where,
                f"task {task.name} has files {sorted(keys)}",
                "give data = FILE (k-fold), train + test (k-fold on train), or train + dev + test",
            )
    return task


def from_toml(path: str | Path) -> list[UserTask]:
    """``[[task]]`` tables: name, type, and data / train / dev / test (classification), test or
    files = [...] (sts), path and split (retrieval). Paths are relative to the TOML's folder."""
    from sentkit.core.config import load_toml

    p = Path(path)
    data = load_toml(p)
    unknown_top = [k for k in data if k != "task"]
    if unknown_top or not isinstance(data.get("task"), list):
        raise _fail(
            str(p),
            f"unknown key {unknown_top[0]!r}" if unknown_top else "no [[task]] table",
            "declare each task as a [[task]] table with name, type and its files",
        )
    out = []
    base = p.parent
    allowed = {"name", "type", "data", "train", "dev", "test", "files", "path", "split"}
    for i, t in enumerate(data["task"], 1):
        where = f"{p}, task {i}"
        extra = sorted(set(t) - allowed)
        if extra:
            from sentkit.core.registry import suggest

            raise _fail(
                where,
                f"unknown key {extra[0]!r}",
                f"keys: {', '.join(sorted(allowed))}." + suggest(extra[0], sorted(allowed)),
            )
        if "name" not in t or "type" not in t:
            raise _fail(where, "no name or type", "give name = ... and type = " + " | ".join(TYPES))
        files = {k: base / t[k] for k in SPLIT_KEYS if k in t}
        if "files" in t:
            files.update({Path(f).stem: base / f for f in t["files"]})
        out.append(
            _check(
                UserTask(
                    str(t["name"]),
                    str(t["type"]),
                    files,
                    base / t["path"] if "path" in t else None,
                    str(t.get("split", "test")),
                ),
                where,
            )
        )
    return out


def from_cli(spec: str) -> UserTask:
    """``TYPE:NAME=PATH``: PATH a row file (classification: k-fold on it; sts: its only subset), a
    folder with train / dev / test row files, or (retrieval) a BEIR folder."""
    where = f"--user-task {spec}"
    m = re.fullmatch(r"([a-z-]+):([^=]+)=(.+)", spec.strip())
    if m is None:
        raise _fail(
            where,
            "not TYPE:NAME=PATH",
            f"write e.g. --user-task classification:tickets=data/tickets/ (types: {', '.join(TYPES)})",
        )
    kind, name, raw = m.groups()
    p = Path(raw)
    if kind == "retrieval":
        return _check(UserTask(name, kind, path=p), where)
    if p.is_file():
        return _check(UserTask(name, kind, {p.stem if kind == "sts" else "data": p}), where)
    if not p.is_dir():
        raise _fail(where, f"{p} does not exist", "give a row file or a folder with train / dev / test files")
    files: dict[str, Path] = {}
    for key in ("data", "train", "dev", "test"):
        found = [f for f in (p / f"{key}{s}" for s in ROW_SUFFIXES) if f.is_file()]
        if found:
            files[key] = found[0]
    if kind == "sts":
        files = {f.stem: f for f in sorted(p.iterdir()) if f.suffix.lower() in ROW_SUFFIXES}
    return _check(UserTask(name, kind, files), where)


def register(tasks: list[UserTask]) -> list[str]:
    """Read and check every task's files (before anything is encoded), then add the tasks to the
    registry (group ``user``; a user task declared again replaces the earlier one). Returns their
    names."""
    from sentkit.evaluation import tasks as T

    names: list[str] = []
    for t in tasks:
        if t.name in names:
            raise UserTaskError(f"user task {t.name} is declared twice; give each task its own name")
        clash = T._ALIASES.get(_norm(t.name))
        if clash is not None and TASKS.get(clash).group != "user":
            raise UserTaskError(f"user task {t.name}: {clash} is a built-in task; give the task another name")
        data = load(t)  # every file read and checked here, before any encoding
        files = tuple(str(f) for f in ([t.path] if t.path is not None else t.files.values()))
        metric = {"retrieval": "ndcg_at_10", "sts": "spearman"}.get(t.type, "acc")
        spec = TaskSpec(
            name=t.name,
            kind=kind_of(t),
            metric=metric,
            folder="",
            files=files,  # type: ignore[arg-type]
            splits=t.type,
            citation="user task",
            licence="user data",
            loader=_cached_loader(data),
            group="user",  # type: ignore[arg-type]
            pair=t.type in ("pair-classification", "sts"),
            description=t.type,
        )
        TASKS.add(spec.name, spec, overwrite=True)
        T._ALIASES[_norm(spec.name)] = spec.name
        names.append(t.name)
    return names


def _cached_loader(data: TaskData) -> Any:
    def loader(data_dir: Path, spec: TaskSpec, raw: bool = False) -> TaskData:
        return data

    return loader
