"""`sentkit` entry point. Each command module exposes ``register(subparsers)``.

Command modules keep heavy imports (torch, transformers) inside their handlers so that
``sentkit --help`` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from sentkit.core.errors import one_line

# Modules that add sub-commands. A module that does not exist yet is skipped.
COMMAND_MODULES = (
    "sentkit.cli.data_commands",  # prepare, spans
    "sentkit.cli.train_commands",  # train
    "sentkit.cli.embed_commands",  # embed, similarity
    "sentkit.evaluation.cli",  # evaluate, report, data
    "sentkit.cli.neighbours_command",  # neighbours
    "sentkit.cli.index_command",  # index
    "sentkit.cli.experiment",  # experiment
    "sentkit.explore.cli",
)


def build_parser() -> argparse.ArgumentParser:
    from sentkit import __version__

    parser = argparse.ArgumentParser(
        prog="sentkit",
        description="Learn sentence embeddings from unlabelled text and measure any sentence encoder.",
    )
    parser.add_argument("--version", action="version", version=f"sentkit {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod_name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            if e.name == mod_name:
                continue
            raise
        mod.register(sub)
    return parser


def _setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.WARNING if quiet else (logging.DEBUG if verbose > 1 else logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for noisy in ("transformers", "datasets", "urllib3", "filelock", "huggingface_hub", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


def debug_enabled(verbose: int = 0) -> bool:
    """Tracebacks are shown with ``SENTKIT_DEBUG=1`` or ``-vv``; otherwise errors are one line."""
    return os.environ.get("SENTKIT_DEBUG", "").strip().lower() not in ("", "0", "false", "no") or verbose > 1


def command_parser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser | None:
    """The sub-parser of `command` (``prepare``, ``train``, ...)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(command or "")  # type: ignore[no-any-return]
    return None


def render_fix(fix: Any, sub: argparse.ArgumentParser | None) -> str | None:
    """A Fix's settings as flags of `sub`: its own option for a key when it has one (``--text-field
    body``), else ``--set key=value`` when it takes ``--set``; None when the command cannot take it."""
    if sub is None:
        return None
    by_dest = {a.dest: a for a in sub._actions if a.option_strings}
    parts: list[str] = []
    for key, value in fix.settings.items():
        action = by_dest.get(key)
        if action is not None:
            flag = next((o for o in action.option_strings if o.startswith("--")), action.option_strings[0])
            if action.nargs == 0:  # store_true / store_false
                if bool(value) != bool(action.const):
                    return None
                parts.append(flag)
            else:
                parts.append(f"{flag} {shlex.quote(str(value))}")
        elif "overrides" in by_dest:
            parts.append(f"--set {shlex.quote(f'{key}={value}')}")
        else:
            return None
    return " ".join(parts)


def _with_fixes(e: BaseException, sub: argparse.ArgumentParser | None) -> str | None:
    """``<message>; rerun with `--flag v` (note) or `...` `` when every fix renders for the command."""
    fixes = getattr(e, "fixes", None)
    message = getattr(e, "message", None)
    if not fixes or not isinstance(message, str):
        return None
    rendered = []
    for fix in fixes:
        flags = render_fix(fix, sub)
        if flags is None:
            return None
        rendered.append(f"`{flags}`" + (f" ({fix.note})" if fix.note else ""))
    return f"{message}; rerun with {' or '.join(rendered)}"


INTERNAL = "internal error"  # what `main` prints instead of "error" when describe_error's line starts with it


def describe_error(e: BaseException, sub: argparse.ArgumentParser | None = None) -> tuple[str, int]:
    """The one-line ``<what>: <why>`` and exit status for an error that ends a command.

    The error's class decides, never where it was raised: a :class:`SentkitError` carries its exit
    code (2: the input or the command line is wrong; 1: the environment failed) and its line; of the
    standard library's errors, an ``OSError`` is read by its errno (a missing file: 2; permissions, a
    full disk: 1), ``MemoryError`` is 1 and a ``UnicodeDecodeError`` (input that is not UTF-8) is 2.
    Anything else, a plain ``ValueError`` or ``TypeError`` included, is a bug of sentkit: the line
    starts with ``internal error:``, says how to see the traceback and asks for a report; exit 1."""
    from sentkit.core.errors import SentkitError
    from sentkit.core.io import describe_os_error

    if isinstance(e, SentkitError):  # the class carries the exit code and the line
        return one_line(_with_fixes(e, sub) or e.user_line()), e.exit_code
    if isinstance(e, OSError):
        return one_line(describe_os_error(e)), 2 if isinstance(e, FileNotFoundError) else 1
    if isinstance(e, MemoryError):
        return "out of memory; use smaller batches (--batch-size, --block) or a machine with more memory", 1
    if isinstance(e, UnicodeDecodeError):
        return one_line(f"not UTF-8 text ({e.reason} at byte {e.start})"), 2
    return (
        one_line(f"{INTERNAL}: {type(e).__name__}: {e}")
        + "; please report it (rerun with SENTKIT_DEBUG=1 or -vv to see the traceback)",
        1,
    )


def _silence_stdout() -> None:
    """After a broken pipe (``sentkit ... | head``), point stdout at /dev/null so the interpreter's
    final flush does not print another error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    _setup_logging(args.verbose, args.quiet)
    try:
        rc = args.func(args)
    except KeyboardInterrupt:
        print(f"sentkit {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 141
    except Exception as e:
        if debug_enabled(args.verbose):
            raise
        msg, code = describe_error(e, command_parser(parser, args.command))
        said = msg if msg.startswith(f"{INTERNAL}:") else f"error: {msg}"
        print(f"sentkit {args.command}: {said}", file=sys.stderr)
        return code
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
