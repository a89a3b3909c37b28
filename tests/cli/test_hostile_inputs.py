"""Every command that reads files, on every hostile input: an exit 0 with a right output, or one clean
error line; never a traceback, an internal error, or exit 0 with garbage (cases of scripts/hostile_inputs.py,
the same table that script prints)."""

from __future__ import annotations

from pathlib import Path

import pytest

# the cases are test tooling, kept out of the package: scripts/hostile_inputs.py
from hostile_inputs import (
    COMMANDS,
    build_cases,
    hostile_inputs,
    run_in_process,
    run_subprocess,
    verdict,
)

INPUTS = list(hostile_inputs(0.001))
BIG = {"prepare", "embed"}  # these get the full 5 MB single line; the others 1 MB (same code paths, faster)

KNOWN: dict[tuple[str, str], str] = {}  # (command, input) -> reason, for a known defect (strict xfail)


def _params() -> list[object]:
    out: list[object] = []
    for command in COMMANDS:
        for name in INPUTS:
            reason = KNOWN.get((command, name))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(command, name, marks=marks, id=f"{command}-{name}"))
    return out


@pytest.mark.parametrize(("command", "name"), _params())
def test_hostile_input(command: str, name: str, tmp_path: Path, tiny_model_dir: Path) -> None:
    (case,) = build_cases(
        tmp_path, str(tiny_model_dir), giant_mb=5.0 if command in BIG else 1.0, commands=[command], inputs=[name]
    )
    out = run_in_process(case.argv)
    v = verdict(case, out)
    assert v in ("ok", "clean error"), f"{case.argv[:1]} on {name}: {v}; exit {out.rc}\n{out.stderr[-3000:]}"
    if out.rc:
        assert out.error_line().count("\n") == 0 and out.error_line().startswith(f"sentkit {command}: error: ")


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("embed", "binary"),
        ("prepare", "utf-16"),
        ("report", "latin-1"),
        ("experiment", "nul-byte"),
        ("embed", "malformed-jsonl"),
    ],
)
def test_hostile_input_as_a_process(command: str, name: str, tmp_path: Path, tiny_model_dir: Path) -> None:
    """What a user sees: one line on stderr after any progress output, no traceback."""
    (case,) = build_cases(tmp_path, str(tiny_model_dir), giant_mb=0.01, commands=[command], inputs=[name])
    out = run_subprocess(case.argv)
    assert verdict(case, out) == "clean error", out.stderr
    assert "Traceback" not in out.stderr
    assert [ln for ln in out.stderr.splitlines() if ": error: " in ln] == [out.error_line()]


def test_debug_shows_the_traceback(tmp_path: Path, tiny_model_dir: Path) -> None:
    (case,) = build_cases(tmp_path, str(tiny_model_dir), giant_mb=0.01, commands=["embed"], inputs=["binary"])
    out = run_subprocess(case.argv, env={"SENTKIT_DEBUG": "1"})
    assert out.rc == 1 and "Traceback (most recent call last)" in out.stderr and "NUL byte" in out.stderr
