"""`sentkit` entry point. Each command module exposes ``register(subparsers)``.

Command modules keep heavy imports (torch, transformers) inside their handlers so that
``sentkit --help`` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

# Modules that add sub-commands. A module that does not exist yet is skipped.
COMMAND_MODULES = (
    "sentkit.cli.data_commands",      # prepare, spans
    "sentkit.cli.train_commands",     # train
    "sentkit.cli.embed_commands",     # embed, similarity
    "sentkit.evaluation.cli",         # evaluate, report, data
    "sentkit.baselines.cli",          # neighbours
    "sentkit.cli.experiment",         # experiment
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    _setup_logging(args.verbose, args.quiet)
    from sentkit.config import ConfigError
    from sentkit.data.corpus import CorpusError
    from sentkit.registry import UnknownNameError

    try:
        rc = args.func(args)
    except (ConfigError, CorpusError, UnknownNameError, FileNotFoundError) as e:
        print(f"sentkit {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"sentkit {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
