"""References between cells of an experiment grid: a setting ``"@cell"`` names the model an earlier cell
trained, ``"@cell/1-base"`` a phase folder inside it (a recipe of phases), ``"@cell/snapshots/step-N"`` a
snapshot saved part-way through its run. :class:`CellRef` is such a reference, parsed once from its text."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from sentkit.core.errors import InputError

PREFIX = "@"
SNAPSHOTS = "snapshots"  # the folder of a run's snapshots (sentkit.training: `snapshots = [...]`)
_STEP = re.compile(r"step-(\d+)")


class BadRefError(InputError):
    """A setting starts with "@" but is not ``@cell[/folder...]``; the message says what a reference looks like."""


@dataclass(frozen=True)
class CellRef:
    """``@<cell>[/<sub>]``: the model of `cell` (same seed), or the folder `sub` inside it."""

    cell: str
    sub: PurePosixPath | None = None

    def __post_init__(self) -> None:
        if not self.cell or "/" in self.cell:
            raise BadRefError(f"{self.cell!r} is not a cell name (non-empty, no '/')")
        if self.sub is not None and (
            self.sub.is_absolute() or not self.sub.parts or any(p in ("", ".", "..") for p in self.sub.parts)
        ):
            raise BadRefError(f"{self.sub} is not a folder inside cell {self.cell!r}'s model")

    @classmethod
    def parse(cls, value: Any) -> CellRef | None:
        """The reference a setting holds; None when it holds none (not a string starting with "@").
        A string starting with "@" that is not ``@cell[/folder]`` raises :class:`BadRefError`."""
        if not (isinstance(value, str) and value.startswith(PREFIX)):
            return None
        cell, _, sub = value[len(PREFIX) :].partition("/")
        parts = sub.split("/") if sub else []
        if not cell or any(p in ("", ".", "..") for p in parts):
            raise BadRefError(
                f'{value!r} is not a reference: write "@cell" (an earlier cell\'s model) or '
                '"@cell/folder" (a phase or snapshot inside it, e.g. "@recipe/1-base" or '
                '"@run/snapshots/step-500")'
            )
        return cls(cell, PurePosixPath(sub) if sub else None)

    @property
    def phase(self) -> str | None:
        """The first folder named inside the cell's model (a recipe's phase: ``"1-base"``), or None."""
        return self.sub.parts[0] if self.sub is not None else None

    @property
    def snapshot_step(self) -> int | None:
        """N of ``@cell/snapshots/step-N``; None for any other reference."""
        if self.sub is None or len(self.sub.parts) != 2 or self.sub.parts[0] != SNAPSHOTS:
            return None
        m = _STEP.fullmatch(self.sub.parts[1])
        return int(m.group(1)) if m else None

    def __str__(self) -> str:
        return f"{PREFIX}{self.cell}" + (f"/{self.sub.as_posix()}" if self.sub is not None else "")


def refs_of(settings: dict[str, Any]) -> dict[str, CellRef]:
    """{setting: the reference it holds} for the settings that hold one, in the settings' order."""
    out: dict[str, CellRef] = {}
    for key, value in settings.items():
        ref = CellRef.parse(value)
        if ref is not None:
            out[key] = ref
    return out
