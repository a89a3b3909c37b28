"""`sentkit experiment run | report`."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("experiment", help="run a declared grid of train -> evaluate cells, and report it",
                       description="Run experiment grids (TOML) and regenerate their report.")
    ssub = p.add_subparsers(dest="experiment_command", metavar="SUBCOMMAND")
    r = ssub.add_parser("run", help="train and evaluate every unfinished cell (resumable)",
                        description="Finished cells (results.json present) are skipped; an interrupted "
                        "DeCLUTR cell resumes from its checkpoint. One failing cell does not stop the others.")
    r.add_argument("experiment", help="experiment TOML file")
    r.add_argument("--only", default=None, help="comma-separated cell names to run")
    r.add_argument("--seeds", default=None, help="comma-separated seeds to run (default: every cell's seeds)")
    r.add_argument("--stop-on-error", action="store_true", help="stop at the first failing cell")
    r.set_defaults(func=cmd_run)
    rep = ssub.add_parser("report", help="regenerate the Markdown report and PNG chart from results files")
    rep.add_argument("experiment", help="experiment TOML file")
    rep.add_argument("--output", default="docs/results.md", help="Markdown file to write (default docs/results.md)")
    rep.set_defaults(func=cmd_report)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def cmd_run(args: argparse.Namespace) -> int:
    from sentkit.experiments import load_experiment, run_experiment

    spec = load_experiment(args.experiment)
    only = [s for s in args.only.split(",") if s] if args.only else None
    seeds = [int(s) for s in args.seeds.split(",") if s] if args.seeds else None
    status = run_experiment(spec, only=only, seeds=seeds, keep_going=not args.stop_on_error)
    for key, st in status.items():
        print(f"{key:40s} {st}")
    return 1 if any(st.startswith("failed") for st in status.values()) else 0


def cmd_report(args: argparse.Namespace) -> int:
    from sentkit.experiments import load_experiment
    from sentkit.experiments.report import write_report
    from sentkit.experiments.runner import collect

    spec = load_experiment(args.experiment)
    path = write_report(collect(spec.output), args.output, title=f"Results: {spec.name}", spec=spec)
    print(f"wrote {path}")
    return 0
