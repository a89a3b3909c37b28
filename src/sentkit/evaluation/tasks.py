"""Task registry (metadata for the 18 SentEval downstream and 10 probing tasks) and loaders for
SentEval's file formats.

A task is one `add_task(TaskSpec(...))`: its `group` puts it in `DOWNSTREAM` or `PROBING` (and so in
`--tasks all`, `downstream` or `probing`, in registration order: the report's column order), its
`kind` picks the protocol that scores it (a runner in `sentkit.evaluation.runner.RUNNERS`), its
`cohorts` the averages it joins (`cohort(name)` lists a cohort: the report's and the averages' task
lists are derived from it, never typed), its quirks (`f1`, `features`, `noreg`, `nhid`) what the
runner does beside the kind's protocol, and its `columns` where `load_columns` finds its fields.
`TaskSpec` takes keywords only and checks them when it is built (an unknown, missing or wrong-typed
field is one line); a task joins the DeCLUTR averages only with `in_declutr_average=True`, which the
SentEval tasks set. Installed distributions add tasks and kinds through entry points (groups
``sentkit.tasks`` and ``sentkit.kinds``, `TASK_PLUGINS` and `KIND_PLUGINS`), imported when the tasks
are listed or a name is missed, so `sentkit evaluate --tasks NAME` finds them.
This module is the one place that lists task names; `tests/evaluation/test_task_names.py` fails on
a list of task names anywhere else in src/.

Loaders return rows in the order SentEval feeds them to its classifiers: SentEval sorts every
split by sentence length (then label) before encoding, and its fold splits and minibatch
permutations index into that order, so we reproduce it to get SentEval's numbers.
"""

from __future__ import annotations

import codecs
import os
import pickle
import types
from collections.abc import Callable, Iterator
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import numpy as np

from sentkit.core.errors import InputError, InputTypeError, MissingInputError, SentkitError
from sentkit.core.registry import Plugins, Registry, loose_key, suggest
from sentkit.data.probing.files import PROBING_ALIASES, PROBING_FILES

TaskKind = Literal["cv", "kfold", "split", "relatedness", "sts", "ranking", "retrieval"]  # the built-in kinds
# Every kind a task may have: the built-ins, and those added with `sentkit.evaluation.runner.register_kind`
# (which also puts the kind's runner in RUNNERS and its headline-score reader in KIND_SCORES).
KINDS: set[str] = set(get_args(TaskKind))
KIND_SCORES: dict[str, Callable[[dict[str, Any]], float | None]] = {}


# --------------------------------------------------------------------------------------------
# Data containers
# --------------------------------------------------------------------------------------------
@dataclass
class Split:
    """One split: sentences `a` (and `b` for pair tasks) and labels / gold scores `y`."""

    a: list[str]
    y: np.ndarray  # [n] int64 class ids or float64 gold scores
    b: list[str] | None = None

    def __post_init__(self) -> None:
        if len(self.a) != len(self.y) or (self.b is not None and len(self.b) != len(self.a)):
            raise ValueError(f"split lengths differ: a={len(self.a)} y={len(self.y)}")

    def __len__(self) -> int:
        return len(self.a)


@dataclass
class TaskData:
    """A loaded task: named splits (for STS12-16 one per subset) plus task-specific extras."""

    name: str
    splits: dict[str, Split]
    nclasses: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def sentences(self) -> Iterator[str]:
        for s in self.splits.values():
            yield from s.a
            if s.b is not None:
                yield from s.b

    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.splits.items()}


COHORTS = ("downstream", "downstream_without_snli", "supervised", "unsupervised_sts", "cosine_sts", "probing")


@dataclass(frozen=True)
class Columns:
    """Where `load_columns` finds a task's fields in its row-per-line files (one file per split, `keys`).

    With `b` None a row is one sentence: the line is split `line.strip().split(sep, maxsplit)` into
    exactly two fields, the sentence (`a`) and the label (`y`). With `b` a row is a pair: tab-separated
    columns `a`, `b` and `y` (their raw originals in `raw/<file>`, same columns). `labels` names the
    classes in id order (else `y` is a number: `score` float gold scores, else int class ids)."""

    a: int
    y: int
    b: int | None = None
    nclasses: int = 0
    keys: tuple[str, ...] = ("train", "dev", "test")
    header: bool = False
    encoding: str = "utf-8"
    sep: str | None = "\t"
    maxsplit: int = -1
    labels: tuple[str, ...] | None = None
    score: bool = False

    def label(self, text: str) -> Any:
        if self.labels is not None:
            return {lab: i for i, lab in enumerate(self.labels)}[text]  # KeyError: an unknown label
        return float(text) if self.score else int(text)


class TaskSpecError(InputError, TypeError):
    """A `TaskSpec` built with a positional argument, or an unknown, missing or wrong-typed field."""


def _is_a(value: Any, hint: Any) -> bool:
    """Whether `value` fits `hint`, a `TaskSpec` field's type (the few shapes its fields use)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        return value in args
    if origin in (Union, types.UnionType):
        return any(_is_a(value, a) for a in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_is_a(v, args[0]) for v in value)
        return len(value) == len(args) and all(_is_a(v, a) for v, a in zip(value, args))
    if origin is Callable or hint is Callable:
        return callable(value)
    if hint is type(None):
        return value is None
    if hint in (int, float):  # a bool is no number here; a float field takes an int
        return isinstance(value, (int, float) if hint is float else int) and not isinstance(value, bool)
    return isinstance(value, hint)


# the cohorts that are DeCLUTR's averages (sentkit.evaluation.report.declutr_average): a task joins
# them only with in_declutr_average=True
DECLUTR_COHORTS = ("downstream", "downstream_without_snli", "probing")


@dataclass(frozen=True, kw_only=True)
class TaskSpec:
    """Metadata of one task and how to load it, given by keyword (``TaskSpec(name=..., kind=...)``),
    and checked when built like MTEB's task metadata: an unknown, missing or wrong-typed field is a
    `TaskSpecError` of one line.

    `metric` is the key of its headline score in its results (`sentkit.evaluation.report.main_score`
    reads it). `cohorts` are the averages it joins (any of `COHORTS`); empty: derived from its group
    and kind (`task_cohorts`). `cohort_rank` gives its place in a cohort's list where that is not its
    registration order. The quirks: `f1` (also score F1; its DeCLUTR score is the mean of accuracy
    and F1), `features` (`protocols.pair_features` kind of a pair), `noreg` (no L2 search), `nhid`
    (force the classifier's hidden size, 0: logistic regression). `in_declutr_average`: the task counts
    in DeCLUTR's downstream or probing average (`DECLUTR_COHORTS`); False for a new task unless it
    says so, True on the 18 downstream and 10 probing tasks of SentEval that DeCLUTR averages."""

    name: str
    kind: str  # one of KINDS: a TaskKind, or a kind added with register_kind
    metric: str  # main metric key in the task's results
    folder: str  # folder under the data dir
    files: tuple[str, ...]  # files SentEval reads (relative to folder)
    splits: str  # human description of the splits / protocol
    citation: str
    licence: str
    loader: Callable[..., TaskData]
    group: Literal["downstream", "probing", "user"] = "downstream"  # user: sentkit.evaluation.user_tasks
    aliases: tuple[str, ...] = ()
    pair: bool = False
    description: str = ""
    cohorts: tuple[str, ...] = ()
    cohort_rank: tuple[tuple[str, float], ...] = ()
    f1: bool = False
    features: str = "absdiff_prod"
    noreg: bool = False
    nhid: int | None = None
    columns: Columns | None = None
    in_declutr_average: bool = False

    def __new__(cls, *args: Any, **kwargs: Any) -> TaskSpec:
        if args or kwargs:  # (copy and pickle call it with neither)
            _check_arguments(args, kwargs)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        hints = get_type_hints(TaskSpec)
        for f in fields(self):
            value = getattr(self, f.name)
            if not _is_a(value, hints[f.name]):
                raise TaskSpecError(
                    f"TaskSpec {self.name!r}: {f.name}={value!r} is a {type(value).__name__}, not {f.type}"
                )
        if not self.name.strip():
            raise TaskSpecError("TaskSpec: name is empty; give the task a name")
        _check_kind_name(self.name, self.kind)
        unknown = [c for c in self.cohorts if c not in COHORTS]
        if unknown:
            raise TaskSpecError(
                f"TaskSpec {self.name!r}: unknown cohort {unknown[0]!r}.{suggest(unknown[0], list(COHORTS))} "
                f"Cohorts: {', '.join(COHORTS)}"
            )
        declutr = [c for c in self.cohorts if c in DECLUTR_COHORTS]
        if declutr and not self.in_declutr_average:
            raise TaskSpecError(
                f"TaskSpec {self.name!r}: cohort {declutr[0]!r} is DeCLUTR's average; set in_declutr_average=True "
                "to join it, or leave it out of cohorts"
            )
        if self.in_declutr_average and self.group not in ("downstream", "probing"):
            raise TaskSpecError(
                f"TaskSpec {self.name!r}: a {self.group} task is in no DeCLUTR average; drop in_declutr_average"
            )

    def paths(self, data_dir: Path) -> list[Path]:
        return [data_dir / self.folder / f for f in self.files]

    def missing(self, data_dir: Path) -> list[Path]:
        return [p for p in self.paths(data_dir) if not p.is_file()]


def _check_kind_name(task: str, kind: str) -> None:
    """What of a task's `kind` can be checked when the `TaskSpec` is built: a name, and not a known kind
    misspelt in case or separators (``"STS"``, ``"k-fold"``). Whether the kind exists is checked when the
    task is added (`add_task`, which imports the plug-in kinds first): a kind of sentkit's own, or of a
    plug-in, may register its runner after a task of it is built."""
    if not kind.strip() or kind != kind.strip():
        raise TaskSpecError(f"TaskSpec {task!r}: kind {kind!r} is not a kind's name; kinds: {', '.join(sorted(KINDS))}")
    if kind in KINDS:
        return
    same = [k for k in KINDS if loose_key(k) == loose_key(kind)]
    if same:
        raise TaskSpecError(f"TaskSpec {task!r}: unknown kind {kind!r}. Did you mean {same[0]!r}?")


def unknown_kind(task: str, kind: str) -> InputError:
    """The one line for a task of a kind that has no runner: the closest kind, every kind, the way to add one."""
    known = sorted(KINDS)
    return TaskSpecError(
        f"task {task}: unknown kind {kind!r}.{suggest(kind, known)} Kinds: {', '.join(known)}; a new kind needs "
        "its runner in sentkit.evaluation.runner.RUNNERS: a TaskKindRunner subclass decorated with @register_kind "
        "(in a plug-in: an entry point of group sentkit.kinds)"
    )


def _check_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """A `TaskSpec(...)` call's arguments: keywords only, each a field, every field without a default given."""
    names = [f.name for f in fields(TaskSpec)]
    what = f"TaskSpec {kwargs['name']!r}" if isinstance(kwargs.get("name"), str) else "TaskSpec"
    if args:
        raise TaskSpecError(
            f"{what}: takes keywords only, got {len(args)} positional argument(s); name each field "
            f"(TaskSpec(name=..., kind=..., metric=..., ...))"
        )
    unknown = [k for k in kwargs if k not in names]
    if unknown:
        raise TaskSpecError(
            f"{what}: unknown field {unknown[0]!r}.{suggest(unknown[0], names)} Fields: {', '.join(names)}"
        )
    required = [f.name for f in fields(TaskSpec) if f.default is MISSING and f.default_factory is MISSING]
    missing = [n for n in required if n not in kwargs]
    if missing:
        raise TaskSpecError(f"{what}: missing field(s) {', '.join(missing)}; every task gives {', '.join(required)}")


TASKS: Registry[TaskSpec] = Registry("task")
_ALIASES: dict[str, str] = {}
_norm = loose_key  # (user_tasks imports it under this name)

# The groups, filled by add_task in registration order (user tasks are listed by `user_tasks()`).
DOWNSTREAM: list[str] = []
PROBING: list[str] = []
ALL_TASKS: list[str] = []  # DOWNSTREAM and PROBING tasks, in registration order
_GROUPS = {"downstream": DOWNSTREAM, "probing": PROBING}


def add_task(spec: TaskSpec) -> TaskSpec:
    """Register a task: its name and aliases, and its group's list (`--tasks all` and the group's name
    then include it). Its kind must be one of `KINDS` (each has a runner in evaluation/runner.py), or
    a plug-in kind (an entry point of group ``sentkit.kinds``, imported here when first needed): an
    unknown kind is refused here, with the closest kind, not when the `TaskSpec` is built (a kind's
    runner may register after a task of it is built; the spec checks only the kind's spelling)."""
    if spec.kind not in KINDS:
        KIND_PLUGINS.load_all()
    if spec.kind not in KINDS:
        raise unknown_kind(spec.name, spec.kind)
    if spec.group not in (*_GROUPS, "user"):
        raise InputError(f"task {spec.name}: group {spec.group!r} is none of downstream, probing, user")
    TASKS.add(spec.name, spec)
    for alias in (spec.name, *spec.aliases):
        _ALIASES[_norm(alias)] = spec.name
    if spec.group in _GROUPS:
        _GROUPS[spec.group].append(spec.name)
        ALL_TASKS.append(spec.name)
    return spec


SUPERVISED_KINDS = ("cv", "kfold", "split", "relatedness")  # the kinds scored by a trained classifier


def task_cohorts(spec: TaskSpec) -> tuple[str, ...]:
    """The cohorts (averages) `spec` joins: its own `cohorts`, else by group and kind: a downstream task
    joins `downstream` and `downstream_without_snli` (DeCLUTR's averages) when `in_declutr_average`,
    `supervised` when a classifier scores it, `unsupervised_sts` when a cosine does (kind `sts`, or
    `relatedness`: its cosine Spearman `NAME-cos`) and `cosine_sts` for kind `sts`; a probing task
    `probing` when `in_declutr_average`."""
    if spec.cohorts:
        return spec.cohorts
    if spec.group == "probing":
        return ("probing",) if spec.in_declutr_average else ()
    if spec.group != "downstream":
        return ()
    out = ["downstream", "downstream_without_snli"] if spec.in_declutr_average else []
    if spec.kind in SUPERVISED_KINDS:
        out.append("supervised")
    if spec.kind in ("sts", "relatedness"):
        out.append("unsupervised_sts")
    if spec.kind == "sts":
        out.append("cosine_sts")
    return tuple(out)


def cohort(name: str) -> list[str]:
    """The registered tasks of cohort `name` (one of `COHORTS`), in registration order unless a task's
    `cohort_rank` places it elsewhere."""
    if name not in COHORTS:
        raise InputError(f"unknown cohort {name!r}: one of {', '.join(COHORTS)}")
    members = [
        (dict(s.cohort_rank).get(name, float(i)), s.name)
        for i, s in enumerate(TASKS.get(n) for n in ALL_TASKS)
        if name in task_cohorts(s)
    ]
    return [n for _, n in sorted(members)]


def find_task(name: str) -> TaskSpec | None:
    """`get_task(name)`, or None for a name no task has (a task of another process)."""
    try:
        return get_task(name)
    except KeyError:
        return None


def get_task(name: str) -> TaskSpec:
    """Look a task up by name or alias (case, '-' and '_' ignored), the plug-ins' included."""
    if _norm(name) not in _ALIASES:
        TASK_PLUGINS.load_all()
    canonical = _ALIASES.get(_norm(name), name)
    return TASKS.get(canonical)


def _add_plugin_task(name: str, obj: Any) -> None:
    """The entry point `name` of group ``sentkit.tasks``, loaded: a `TaskSpec` (added here unless its
    module added it) or a module whose import added task `name` with `add_task`."""
    if isinstance(obj, TaskSpec) and (obj.name not in TASKS or TASKS.get(obj.name) is not obj):
        add_task(obj)
    if _norm(name) not in _ALIASES:
        raise InputError(f"loading it added no task {name!r} (it names a TaskSpec, or a module that calls add_task)")


def _add_plugin_kind(name: str, obj: Any) -> None:
    """The entry point `name` of group ``sentkit.kinds``, loaded: a `TaskKindRunner` subclass of kind
    `name`, registered here unless its module did (``@register_kind``)."""
    from sentkit.evaluation.runner import RUNNERS, TaskKindRunner, register_kind

    if not (isinstance(obj, type) and issubclass(obj, TaskKindRunner)):
        raise InputTypeError(f"{obj!r} is not a TaskKindRunner subclass")
    if obj.kind != name:
        raise InputError(f"its class {obj.__name__} is of kind {obj.kind!r}, not {name!r}")
    if name not in RUNNERS:
        register_kind(obj)
    elif type(getattr(RUNNERS.get(name), "__self__", None)) is not obj:
        raise InputError(f"task kind {name!r} is taken (another runner has it); give the kind another name")


# the plug-ins of installed distributions: tasks (entry points of group sentkit.tasks) and kinds of task
# (sentkit.kinds), each imported when the tasks are listed (`available_tasks`), a name is missed
# (`get_task`) or a task of an unknown kind is added (`add_task`)
TASK_PLUGINS = Plugins("sentkit.tasks", "task", _add_plugin_task)
KIND_PLUGINS = Plugins("sentkit.kinds", "task kind", _add_plugin_kind)


def default_data_dir() -> Path:
    """Where the SentEval data lives when no ``--data-dir`` is given: ``$SENTKIT_DATA``, else the
    user cache folder ``$XDG_CACHE_HOME/sentkit/data`` (``~/.cache/sentkit/data``), which
    ``sentkit data download`` fills. Never a path computed from where the package is installed."""
    env = os.environ.get("SENTKIT_DATA")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "sentkit" / "data"


def data_dir_origin(data_dir: str | Path | None) -> str:
    """How the data folder was chosen, for error lines: ``--data-dir``, ``$SENTKIT_DATA`` or the cache."""
    if data_dir is not None:
        return "--data-dir"
    return "$SENTKIT_DATA" if os.environ.get("SENTKIT_DATA") else "the user cache folder ($SENTKIT_DATA is unset)"


def data_dir_origin_of(path: Path) -> str:
    """`data_dir_origin` for a folder already resolved: the default's origin when it is the default."""
    return data_dir_origin(None) if Path(path) == default_data_dir() else "--data-dir"


def resolve_data_dir(data_dir: str | Path | None) -> Path:
    return Path(data_dir) if data_dir is not None else default_data_dir()


def download_hint(task: str, data_dir: Path) -> str:
    return f"sentkit data download {task} --data-dir {data_dir}"


def require_files(task: str, paths: list[Path], data_dir: Path) -> None:
    """Raise FileNotFoundError naming the task, the first missing path and the fix."""
    for p in paths:
        if not p.is_file():
            raise MissingInputError(
                f"task {task}: missing file {p} (data folder {data_dir}, from {data_dir_origin_of(data_dir)}). "
                f"Fetch it with `{download_hint(task, data_dir)}` (or point --data-dir / SENTKIT_DATA at a "
                f"folder that has it)."
            )


# --------------------------------------------------------------------------------------------
# Low-level readers
# --------------------------------------------------------------------------------------------
class TaskDataError(SentkitError, ValueError):
    """A task file that is not in SentEval's format; the message names the file (and line)."""


def _lines(path: Path, encoding: str = "utf-8") -> list[str]:
    """The lines of a SentEval text file; TaskDataError for a UTF-16 / binary file (NUL bytes) or
    one that is not in `encoding` (SentEval's files are UTF-8 or latin-1 and never hold NUL)."""
    raw = path.read_bytes()
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise TaskDataError(f"{path}: UTF-16 text, not SentEval's {encoding} file")
    if b"\x00" in raw:
        raise TaskDataError(f"{path}: has NUL bytes (a binary or UTF-16 file), not SentEval's {encoding} text")
    try:
        return raw.decode(encoding).splitlines()
    except UnicodeDecodeError as e:
        raise TaskDataError(f"{path}: not {encoding} text (byte {e.start}: {raw[e.start : e.start + 1]!r})") from None


def _parse(path: Path, lines: list[str], parse: Callable[[str], Any], first: int = 0) -> list[Any]:
    """`parse(line)` for every non-blank line from index `first`; a line that does not parse is a
    TaskDataError naming the file and the line."""
    out = []
    for i in range(first, len(lines)):
        line = lines[i]
        if not line.strip():
            continue
        try:
            out.append(parse(line))
        except (ValueError, IndexError, KeyError) as e:
            why = (
                f"unknown label {e}"
                if isinstance(e, KeyError)
                else ("too few columns" if isinstance(e, IndexError) else str(e))
            )
            raise TaskDataError(f"{path}, line {i + 1}: {why}: {line[:80]!r}") from None
    return out


def _join(tokens: list[str]) -> str:
    return " ".join(tokens)


def _sorted_rows(rows: list[tuple[Any, ...]], key: Callable[[tuple[Any, ...]], Any]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=key)


def _single(rows: list[tuple[list[str], Any, str]]) -> Split:
    """rows: (tokens, label, text) -> Split, sorted like SentEval: (len(tokens), label)."""
    rows = sorted(rows, key=lambda z: (len(z[0]), z[1]))
    return Split(a=[r[2] for r in rows], y=np.array([r[1] for r in rows]))


def _pair(rows: list[tuple[list[str], list[str], Any, str, str]], y_dtype: Any = None) -> Split:
    """rows: (tokA, tokB, label, textA, textB) sorted like SentEval: (len A, len B, label)."""
    rows = sorted(rows, key=lambda z: (len(z[0]), len(z[1]), z[2]))
    y = np.array([r[2] for r in rows], dtype=y_dtype)
    return Split(a=[r[3] for r in rows], b=[r[4] for r in rows], y=y)


def _raw_texts(raw: list[str] | None, tokens: list[list[str]], what: Path) -> list[str]:
    if raw is None:
        return [_join(t) for t in tokens]
    if len(raw) != len(tokens):
        raise TaskDataError(f"{what}: raw file has {len(raw)} rows, processed file {len(tokens)}")
    return raw


# --------------------------------------------------------------------------------------------
# Loaders (one per file format)
# --------------------------------------------------------------------------------------------
def load_binary(data_dir: Path, spec: TaskSpec, raw: bool = False) -> TaskData:
    """MR/CR/SUBJ/MPQA: one sentence per line (latin-1, as SentEval); first file = label 1."""
    paths = spec.paths(data_dir)
    require_files(spec.name, paths, data_dir)
    pos, neg = ([ln.split() for ln in _lines(p, "latin-1")] for p in paths)
    rows = [(t, 1, _join(t)) for t in pos] + [(t, 0, _join(t)) for t in neg]
    return TaskData(spec.name, {"all": _single(rows)}, nclasses=2)


TREC_LABELS = {"ABBR": 0, "DESC": 1, "ENTY": 2, "HUM": 3, "LOC": 4, "NUM": 5}


def load_trec(data_dir: Path, spec: TaskSpec, raw: bool = False) -> TaskData:
    """TREC: `COARSE:fine question` lines, ISO-8859-1."""
    paths = spec.paths(data_dir)
    require_files(spec.name, paths, data_dir)

    def parse(line: str) -> tuple[list[str], int, str]:
        target, sample = line.strip().split(":", 1)
        if target not in TREC_LABELS:
            raise InputError(f"unknown TREC class {target!r}")
        toks = sample.split(" ", 1)[1].split()
        return toks, TREC_LABELS[target], _join(toks)

    splits = {key: _single(_parse(p, _lines(p, "latin-1"), parse)) for key, p in zip(("train", "test"), paths)}
    return TaskData(spec.name, splits, nclasses=6)


PairRows = tuple[list[list[str]], list[list[str]], list[Any]]


def _read_pairs(
    p: Path, ca: int, cb: int, cy: int, label: Callable[[str], Any], *, header: bool, encoding: str = "utf-8"
) -> PairRows:
    """Tab-separated pair rows: tokens of columns `ca`, `cb` and `label(column cy)`."""

    def parse(line: str) -> tuple[list[str], list[str], Any]:
        t = line.strip().split("\t")
        return t[ca].split(), t[cb].split(), label(t[cy])

    rows = _parse(p, _lines(p, encoding), parse, 1 if header else 0)
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def _read_raw_pairs(p: Path, ca: int, cb: int, header: bool) -> tuple[list[str], list[str]]:
    def parse(line: str) -> tuple[str, str]:
        t = line.rstrip("\r\n").split("\t")
        return t[ca].strip(), t[cb].strip()

    rows = _parse(p, _lines(p, "utf-8-sig"), parse, 1 if header else 0)
    return [r[0] for r in rows], [r[1] for r in rows]


def _pair_split(spec: TaskSpec, data_dir: Path, c: Columns, p: Path, raw: bool) -> Split:
    a, b, y = _read_pairs(p, c.a, c.b or 0, c.y, c.label, header=c.header, encoding=c.encoding)
    ra: list[str] | None = None
    rb: list[str] | None = None
    if raw:
        rp = p.parent / "raw" / p.name
        require_files(spec.name, [rp], data_dir)
        ra, rb = _read_raw_pairs(rp, c.a, c.b or 0, c.header)
    ta, tb = _raw_texts(ra, a, p), _raw_texts(rb, b, p)
    return _pair(list(zip(a, b, y, ta, tb)), np.float64 if c.score else np.int64)


def _single_split(c: Columns, p: Path) -> Split:
    def parse(line: str) -> tuple[list[str], int, str]:
        first, second = line.strip().split(c.sep, c.maxsplit)
        fields = (first, second)
        toks = fields[c.a].split()
        return toks, c.label(fields[c.y]), _join(toks)

    return _single(_parse(p, _lines(p, c.encoding), parse))


def load_columns(data_dir: Path, spec: TaskSpec, raw: bool = False) -> TaskData:
    """The loader of every task whose files are one row per line (one file per split), driven by
    `spec.columns`: SST2 (`sentence<TAB>label`), SST5 (`label sentence`), SICK-E / SICK-R
    (`pair_ID<TAB>A<TAB>B<TAB>relatedness<TAB>entailment`, a header), STS-B (`genre file year id score
    A B`) and MRPC (`Quality #1ID #2ID #1String #2String`, a header, UTF-8 with BOM)."""
    c = spec.columns
    if c is None:
        raise ValueError(f"task {spec.name}: load_columns needs the spec's columns")
    paths = spec.paths(data_dir)
    require_files(spec.name, paths, data_dir)
    splits = {
        key: (_single_split(c, p) if c.b is None else _pair_split(spec, data_dir, c, p, raw))
        for key, p in zip(c.keys, paths)
    }
    return TaskData(spec.name, splits, nclasses=c.nclasses)


STS_SUBSETS: dict[str, tuple[str, ...]] = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}


def load_sts(data_dir: Path, spec: TaskSpec, raw: bool = False) -> TaskData:
    """STS12-16: `STS.input.X.txt` (sent1<TAB>sent2) + `STS.gs.X.txt` (score or empty)."""
    require_files(spec.name, spec.paths(data_dir), data_dir)
    folder = data_dir / spec.folder
    splits = {}
    for subset in STS_SUBSETS[spec.name]:
        inp, gs = folder / f"STS.input.{subset}.txt", folder / f"STS.gs.{subset}.txt"
        pairs = [ln.split("\t") for ln in _lines(inp)]
        scores = _lines(gs)
        if len(scores) != len(pairs):
            raise TaskDataError(f"{gs}: {len(scores)} scores for {len(pairs)} pairs in {inp}")
        keep = [i for i, s in enumerate(scores) if s != ""]
        a = [pairs[i][0].split() for i in keep]
        b = [pairs[i][1].split() for i in keep]
        y = [float(scores[i]) for i in keep]
        ta, tb = [_join(t) for t in a], [_join(t) for t in b]
        if raw:
            rdir = folder / "raw"
            cands = [rdir / f"STS.input.{subset}.txt", rdir / f"STS2016.input.{subset}.txt"]
            rp = next((c for c in cands if c.is_file()), cands[0])
            require_files(spec.name, [rp], data_dir)
            rpairs = [ln.split("\t") for ln in _lines(rp, "utf-8-sig")]
            if len(rpairs) != len(pairs):
                raise TaskDataError(f"{rp}: {len(rpairs)} rows, processed file {len(pairs)}")
            ta = [rpairs[i][0].strip() for i in keep]
            tb = [rpairs[i][1].strip() for i in keep]
        splits[subset] = _pair(list(zip(a, b, y, ta, tb)), np.float64)
    return TaskData(spec.name, splits)


SNLI_LABELS = {"entailment": 0, "neutral": 1, "contradiction": 2}
SICK_LABELS = ("CONTRADICTION", "NEUTRAL", "ENTAILMENT")  # SICK-E's class ids, in order


def load_snli(data_dir: Path, spec: TaskSpec, raw: bool = False) -> TaskData:
    """SNLI: s1.* premises, s2.* hypotheses, labels.* (train, dev, test); sorted by s2 first."""
    folder = data_dir / spec.folder
    require_files(spec.name, spec.paths(data_dir), data_dir)
    splits = {}
    for key, suffix in (("train", "train"), ("dev", "dev"), ("test", "test")):
        s1 = [ln.split() for ln in _lines(folder / f"s1.{suffix}", "latin-1")]
        s2 = [ln.split() for ln in _lines(folder / f"s2.{suffix}", "latin-1")]
        lab = _lines(folder / f"labels.{suffix}")
        if not (len(s1) == len(s2) == len(lab)):
            raise TaskDataError(f"{folder}: s1/s2/labels .{suffix} have different lengths")
        rows = sorted(zip(s2, s1, lab), key=lambda z: (len(z[0]), len(z[1]), z[2]))
        splits[key] = Split(
            a=[_join(r[1]) for r in rows],
            b=[_join(r[0]) for r in rows],
            y=np.array([SNLI_LABELS[r[2]] for r in rows], dtype=np.int64),
        )
    return TaskData(spec.name, splits, nclasses=3)


PROBING_SPLITS = {"tr": "train", "va": "dev", "te": "test"}


def load_probing(data_dir: Path, spec: TaskSpec, raw: bool = False) -> TaskData:
    """Probing: `split<TAB>label<TAB>sentence` lines, split in {tr, va, te}."""
    (path,) = spec.paths(data_dir)
    require_files(spec.name, [path], data_dir)
    data: dict[str, list[tuple[list[str], str]]] = {"train": [], "dev": [], "test": []}
    for i, line in enumerate(_lines(path)):
        if not line.strip():
            continue
        t = line.rstrip().split("\t")
        if len(t) < 3 or t[0] not in PROBING_SPLITS:
            raise TaskDataError(f"{path}:{i + 1}: expected `tr|va|te<TAB>label<TAB>sentence`")
        data[PROBING_SPLITS[t[0]]].append((t[-1].split(), t[1]))
    labels = sorted({lab for _, lab in data["train"]})
    tok2label = {lab: i for i, lab in enumerate(labels)}
    splits = {}
    for key, rows in data.items():
        unknown = {lab for _, lab in rows} - set(tok2label)
        if unknown:
            raise TaskDataError(f"{path}: {key} labels {sorted(unknown)[:5]} absent from train")
        splits[key] = _single([(t, tok2label[lab], _join(t)) for t, lab in rows])
    return TaskData(spec.name, splits, nclasses=len(labels), extra={"labels": labels})


def load_coco(data_dir: Path, spec: TaskSpec, raw: bool = False) -> TaskData:
    """COCO: `{train,valid,test}.pkl` with `features` [n_img, dim], `image_to_caption_ids`,
    `captions[id]['cleaned_caption']`; 5 captions per image, ' .' appended (as SentEval)."""
    paths = spec.paths(data_dir)
    require_files(spec.name, paths, data_dir)
    splits: dict[str, Split] = {}
    feats: dict[str, np.ndarray] = {}
    for key, p in zip(("train", "dev", "test"), paths):
        with open(p, "rb") as f:
            coco = pickle.load(f)  # trusted local data file in SentEval's format
        sents, img_rows = [], []
        for imgkey in range(len(coco["features"])):
            ids = coco["image_to_caption_ids"][imgkey]
            if len(ids) < 5:
                raise TaskDataError(f"{p}: image {imgkey} has {len(ids)} captions (< 5)")
            for cid in ids[:5]:
                sents.append(_join((coco["captions"][cid]["cleaned_caption"] + " .").split()))
                img_rows.append(imgkey)
        splits[key] = Split(a=sents, y=np.array(img_rows, dtype=np.int64))
        feats[key] = np.asarray(coco["features"], dtype=np.float32)[np.array(img_rows)]
    return TaskData(spec.name, splits, extra={"imgfeat": feats})


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------
_CIT_SENTEVAL = "Conneau & Kiela (2018), SentEval, LREC"
_CIT_PROBING = "Conneau et al. (2018), What you can cram into a single vector, ACL"

# in SentEval's order (DOWNSTREAM, PROBING and the report's columns follow it).
# Every task below sets in_declutr_average=True: DeCLUTR (Giorgi et al. 2021, arXiv:2006.03659v4)
# averages all of SentEval: "SentEval is divided into 18 downstream tasks [...]
# and ten probing tasks" (section 4), "each of the ten probing tasks reports a simple accuracy, which we
# averaged" (appendix C.2), and "we compute average downstream scores without considering SNLI" (section
# 4: the cohort downstream_without_snli). A task added later joins those averages only by saying so.
for _name, _folder, _files, _cit, _desc in (
    ("MR", "MR", ("rt-polarity.pos", "rt-polarity.neg"), "Pang & Lee (2005), ACL", "movie review sentiment"),
    ("CR", "CR", ("custrev.pos", "custrev.neg"), "Hu & Liu (2004), KDD", "product review sentiment"),
    ("SUBJ", "SUBJ", ("subj.objective", "subj.subjective"), "Pang & Lee (2004), ACL", "subjectivity (objective=1)"),
    ("MPQA", "MPQA", ("mpqa.pos", "mpqa.neg"), "Wiebe et al. (2005), LRE", "opinion polarity"),
):
    add_task(
        TaskSpec(
            name=_name,
            kind="cv",
            metric="acc",
            folder=_folder,
            files=_files,
            splits="k-fold CV with inner k-fold for L2",
            citation=_cit,
            licence="research use; no explicit licence",
            loader=load_binary,
            description=_desc,
            in_declutr_average=True,
        )
    )

add_task(
    TaskSpec(
        name="SST2",
        kind="split",
        metric="acc",
        folder="SST2",
        files=("sentiment-train", "sentiment-dev", "sentiment-test"),
        splits="train / dev / test",
        citation="Socher et al. (2013), EMNLP",
        licence="research use",
        loader=load_columns,
        aliases=("SST-2", "SSTBinary"),
        description="binary sentiment",
        columns=Columns(a=0, y=1, nclasses=2),
        in_declutr_average=True,
    )
)
add_task(
    TaskSpec(
        name="SST5",
        kind="split",
        metric="acc",
        folder="SST5",
        files=("sentiment-train", "sentiment-dev", "sentiment-test"),
        splits="train / dev / test",
        citation="Socher et al. (2013), EMNLP",
        licence="research use",
        loader=load_columns,
        aliases=("SST-5", "SSTFine"),
        description="fine-grained sentiment, 5 classes",
        columns=Columns(a=1, y=0, nclasses=5, sep=" ", maxsplit=1),
        in_declutr_average=True,
    )
)
add_task(
    TaskSpec(
        name="TREC",
        kind="kfold",
        metric="acc",
        folder="TREC",
        files=("train_5500.label", "TREC_10.label"),
        splits="train (k-fold for L2) / test",
        citation="Li & Roth (2002), COLING",
        licence="research use; no explicit licence",
        loader=load_trec,
        description="question type, 6 classes",
        cohort_rank=(("supervised", 3.5),),
        in_declutr_average=True,
    )
)  # the reports list it after MPQA
add_task(
    TaskSpec(
        name="MRPC",
        kind="kfold",
        metric="acc",
        folder="MRPC",
        files=("msr_paraphrase_train.txt", "msr_paraphrase_test.txt"),
        splits="train (k-fold for L2) / test",
        citation="Dolan et al. (2004), COLING",
        licence="Microsoft Research licence",
        loader=load_columns,
        pair=True,
        description="paraphrase, acc and F1",
        f1=True,
        columns=Columns(a=3, b=4, y=0, nclasses=2, keys=("train", "test"), header=True, encoding="utf-8-sig"),
        in_declutr_average=True,
    )
)
add_task(
    TaskSpec(
        name="SICKE",
        kind="split",
        metric="acc",
        folder="SICK",
        files=("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"),
        splits="train / trial(dev) / test",
        citation="Marelli et al. (2014), SemEval",
        licence="CC BY-NC-SA 3.0",
        loader=load_columns,
        aliases=("SICK-E", "SICKEntailment"),
        pair=True,
        description="entailment, 3 classes",
        columns=Columns(a=1, b=2, y=4, nclasses=3, header=True, labels=SICK_LABELS),
        in_declutr_average=True,
    )
)
add_task(
    TaskSpec(
        name="SICKR",
        kind="relatedness",
        metric="spearman",
        folder="SICK",
        files=("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"),
        splits="train / trial(dev) / test",
        citation="Marelli et al. (2014), SemEval",
        licence="CC BY-NC-SA 3.0",
        loader=load_columns,
        aliases=("SICK-R", "SICKRelatedness"),
        pair=True,
        description="relatedness 1-5",
        cohort_rank=(("unsupervised_sts", 19),),  # the reports list SICKR-cos last
        columns=Columns(a=1, b=2, y=3, nclasses=5, header=True, score=True),
        in_declutr_average=True,
    )
)
add_task(
    TaskSpec(
        name="STSB",
        kind="relatedness",
        metric="spearman",
        folder="STSB",
        files=("sts-train.csv", "sts-dev.csv", "sts-test.csv"),
        splits="train / dev / test",
        citation="Cer et al. (2017), SemEval",
        licence="CC BY-SA 4.0 (scores)",
        loader=load_columns,
        aliases=("STS-B", "STSBenchmark"),
        pair=True,
        description="similarity 0-5",
        cohort_rank=(("unsupervised_sts", 18),),  # after STS12-16
        columns=Columns(a=5, b=6, y=4, nclasses=5, score=True),
        in_declutr_average=True,
    )
)
add_task(
    TaskSpec(
        name="SNLI",
        kind="split",
        metric="acc",
        folder="SNLI",
        files=(
            "s1.train",
            "s2.train",
            "labels.train",
            "s1.dev",
            "s2.dev",
            "labels.dev",
            "s1.test",
            "s2.test",
            "labels.test",
        ),
        splits="train / dev / test",
        citation="Bowman et al. (2015), EMNLP",
        licence="CC BY-SA 4.0",
        loader=load_snli,
        pair=True,
        description="entailment, features [u, v, u*v, |u-v|]",
        cohorts=("downstream", "supervised"),
        features="snli",
        noreg=True,
        in_declutr_average=True,
    )
)
add_task(
    TaskSpec(
        name="COCO",
        kind="ranking",
        metric="mean_recall",
        folder="COCO",
        files=("train.pkl", "valid.pkl", "test.pkl"),
        splits="train / valid / test (5 x 1k-image test folds)",
        citation="Lin et al. (2014), ECCV",
        licence="CC BY 4.0 (annotations)",
        loader=load_coco,
        aliases=("ImageCaptionRetrieval",),
        description="image-caption retrieval, recall@1/5/10 and median rank",
        in_declutr_average=True,
    )
)
for _name, _cit in (
    ("STS12", "Agirre et al. (2012)"),
    ("STS13", "Agirre et al. (2013)"),
    ("STS14", "Agirre et al. (2014)"),
    ("STS15", "Agirre et al. (2015)"),
    ("STS16", "Agirre et al. (2016)"),
):
    _sts_files = tuple(f"STS.{kind}.{s}.txt" for s in STS_SUBSETS[_name] for kind in ("input", "gs"))
    add_task(
        TaskSpec(
            name=_name,
            kind="sts",
            metric="spearman",
            folder=_name,
            files=_sts_files,
            splits="test only (unsupervised cosine)",
            citation=f"{_cit}, SemEval",
            licence="per-source terms",
            loader=load_sts,
            pair=True,
            description="cosine similarity per subset",
            in_declutr_average=True,
        )
    )

# a probing task's quirks, as fields of its spec: SentEval forces logistic regression for WordContent
_PROBING_QUIRKS: dict[str, dict[str, Any]] = {"WC": {"nhid": 0}}
for _name, _file in PROBING_FILES.items():
    add_task(
        TaskSpec(
            name=_name,
            kind="split",
            metric="acc",
            folder="PROBING",
            files=(_file,),
            splits="tr / va / te",
            citation=_CIT_PROBING,
            licence="BSD (SentEval)",
            loader=load_probing,
            group="probing",
            aliases=(PROBING_ALIASES[_name],),
            description="probing task",
            in_declutr_average=True,
            **_PROBING_QUIRKS.get(_name, {}),
        )
    )


def load_task(name: str, data_dir: str | Path | None = None, *, raw: bool = False) -> TaskData:
    """Load task `name` from `data_dir` (raw=True: untokenized originals for pair tasks). A file
    that is not in SentEval's format is a TaskDataError naming the task, the file and the fix."""
    spec = get_task(name)
    ddir = resolve_data_dir(data_dir)
    try:
        data = spec.loader(ddir, spec, raw=raw and spec.pair)
        empty = [k for k, split in data.splits.items() if not any(t.strip() for t in split.a)]
        if empty:
            raise TaskDataError(
                f"no sentence in the {', '.join(empty)} split(s) of {', '.join(str(p) for p in spec.paths(ddir))}"
            )
        return data
    except (ValueError, KeyError, IndexError, EOFError, pickle.UnpicklingError) as e:
        why = str(e) if isinstance(e, TaskDataError) else f"malformed data ({type(e).__name__}: {e})"
        if spec.group == "user":
            raise TaskDataError(f"task {spec.name}: {why}") from None
        raise TaskDataError(
            f"task {spec.name}: {why}. Fetch the files again with `{download_hint(spec.name, ddir)} --force`"
        ) from None


def available_tasks(data_dir: str | Path | None = None) -> list[str]:
    """The downstream and probing tasks (the plug-ins' included) whose files are under `data_dir`."""
    TASK_PLUGINS.load_all()
    d = resolve_data_dir(data_dir)
    return [t for t in ALL_TASKS if not TASKS.get(t).missing(d)]


def user_tasks() -> list[str]:
    """The user tasks registered in this process (sentkit.evaluation.user_tasks)."""
    return [n for n in TASKS.names() if TASKS.get(n).group == "user"]


def expand_tasks(tasks: str | list[str] | None, data_dir: str | Path | None = None) -> list[str]:
    """'all' -> every task with data and every user task; 'downstream' / 'probing' / 'user' ->
    that group; else names."""
    if tasks is None or tasks == "all" or tasks == ["all"]:
        return available_tasks(data_dir) + user_tasks()
    items = [t.strip() for t in (tasks.split(",") if isinstance(tasks, str) else tasks) if t.strip()]
    if not items:
        from sentkit.core.config import ConfigError

        raise ConfigError("no task given: name tasks (e.g. --tasks MR,STSB), or use 'all', 'downstream' or 'probing'")
    out: list[str] = []
    for t in items:
        if _norm(t) == "user":
            out += user_tasks()
        elif _norm(t) in ("downstream", "probing"):
            group = DOWNSTREAM if _norm(t) == "downstream" else PROBING
            out += [g for g in group if g in available_tasks(data_dir)]
        else:
            out.append(get_task(t).name)
    return list(dict.fromkeys(out))
