"""A run's results as the runner writes them, typed: the `experiment` record (which cell, seed, method and
settings ran, and what the run cost) beside what `sentkit.evaluate` returned (scores, timings, config; that
room's format, kept as it wrote it). The runner writes :meth:`RunResults.to_json`; the report and the explore
page read :meth:`RunResults.from_json`. The JSON on disk keeps its format: a file the runner wrote reads back
and writes again byte for byte (tests/experiments/test_results.py checks every committed one)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sentkit.core.errors import InputError

RECORD = "experiment"  # the key of the run's record in a results file


class NotARunError(InputError):
    """A results file without the `experiment` record `sentkit experiment run` writes (or a malformed one)."""


@dataclass(frozen=True)
class CpuSeconds:
    """CPU seconds of the process that ran the cell (all its threads): what a run costs whatever shares the machine."""

    train: float | None  # None: the model was trained by an earlier process (its CPU time unknown)
    evaluate: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"train": self.train, "evaluate": self.evaluate}


@dataclass(frozen=True)
class RunRecord:
    """The `experiment` record of a results file. `recipe` (the `recipe.json` of a recipe of phases) and `snapshot`
    (a snapshot's step and the CPU its run had spent to it) are kept as their writers wrote them; `extra` holds keys
    this version does not know (a note added by hand, a later version's), written back after the others."""

    cell: str
    seed: int = 0
    name: str = ""
    method: str = ""
    group: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    train_seconds: float = 0.0
    across_resumes: bool = False  # train_seconds counts the earlier processes of a resumed run
    cpu_seconds: CpuSeconds | None = None
    trained_earlier: bool = False  # the model was trained by an earlier process, this one evaluated it
    retrained_bases: list[str] = field(default_factory=list)  # bases trained again for this cell (a fresh clone)
    recipe: dict[str, Any] | None = None
    snapshot: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _KEYS = (
        "name",
        "cell",
        "method",
        "group",
        "seed",
        "settings",
        "train_seconds",
        "train_seconds_across_resumes",
        "cpu_seconds",
        "trained_earlier",
        "retrained_bases",
        "recipe",
        "snapshot",
    )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        if not isinstance(data, Mapping) or not isinstance(data.get("cell"), str):
            raise NotARunError("its 'experiment' record names no cell")
        cpu = data.get("cpu_seconds")
        return cls(
            cell=data["cell"],
            seed=data.get("seed", 0),
            name=data.get("name", ""),
            method=data.get("method", ""),
            group=data.get("group", ""),
            settings=dict(data.get("settings") or {}),
            train_seconds=data.get("train_seconds", 0.0),
            across_resumes=bool(data.get("train_seconds_across_resumes", False)),
            cpu_seconds=CpuSeconds(cpu.get("train"), cpu.get("evaluate", 0.0)) if cpu else None,
            trained_earlier=bool(data.get("trained_earlier", False)),
            retrained_bases=list(data.get("retrained_bases") or []),
            recipe=data.get("recipe"),
            snapshot=data.get("snapshot"),
            extra={k: v for k, v in data.items() if k not in cls._KEYS},
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "cell": self.cell,
            "method": self.method,
            "group": self.group,
            "seed": self.seed,
            "settings": self.settings,
            "train_seconds": self.train_seconds,
        }
        if self.across_resumes:
            out["train_seconds_across_resumes"] = True
        if self.cpu_seconds is not None:
            out["cpu_seconds"] = self.cpu_seconds.to_json()
        if self.trained_earlier:
            out["trained_earlier"] = True
        if self.retrained_bases:
            out["retrained_bases"] = self.retrained_bases
        if self.recipe is not None:
            out["recipe"] = self.recipe
        if self.snapshot is not None:
            out["snapshot"] = self.snapshot
        return {**out, **self.extra}

    @property
    def train_cpu(self) -> float | None:
        """The training CPU seconds this run recorded (None: not recorded, or trained by an earlier process)."""
        return None if self.cpu_seconds is None else self.cpu_seconds.train

    @property
    def snapshot_cpu(self) -> float | None:
        """The CPU seconds the run whose snapshot this cell evaluates had spent to that step (None: not a snapshot)."""
        cpu = (self.snapshot or {}).get("cpu_seconds")
        return None if cpu is None else float(cpu)

    @property
    def phase_cpu(self) -> dict[str, float]:
        """{phase folder: CPU seconds} of a recipe of phases, in the recipe's order (empty for any other run)."""
        return {k: float(v.get("cpu_seconds", 0.0)) for k, v in ((self.recipe or {}).get("phases") or {}).items()}


@dataclass(frozen=True)
class RunResults:
    """One (cell, seed) run's results file: `evaluation` is what `sentkit.evaluate` returned (with the cell's MTEB
    results under "mteb"), `experiment` the runner's record of the run."""

    experiment: RunRecord
    evaluation: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunResults:
        if not isinstance(data, Mapping) or not isinstance(data.get(RECORD), Mapping):
            raise NotARunError("it has no 'experiment' record (the section `sentkit experiment run` writes)")
        return cls(RunRecord.from_json(data[RECORD]), {k: v for k, v in data.items() if k != RECORD})

    def to_json(self) -> dict[str, Any]:
        return {**self.evaluation, RECORD: self.experiment.to_json()}

    @property
    def cell(self) -> str:
        return self.experiment.cell

    @property
    def evaluate_seconds(self) -> float:
        """Wall-clock seconds of the evaluation: encoding and classifiers over every task."""
        tasks = (self.evaluation.get("timings") or {}).get("tasks", {})
        return sum(float(t.get("load_encode_s", 0)) + float(t.get("classify_s", 0)) for t in tasks.values())


Runs = Iterable["RunResults | Mapping[str, Any]"]


def as_runs(runs: Runs) -> list[RunResults]:
    """Results files as typed runs: each one a `RunResults` already, or the JSON a results file holds."""
    return [r if isinstance(r, RunResults) else RunResults.from_json(r) for r in runs]
