"""`sentkit experiment run | report`."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "experiment",
        help="run a declared grid of train -> evaluate cells, and report it",
        description="Run experiment grids (TOML) and regenerate their report.",
    )
    ssub = p.add_subparsers(dest="experiment_command", metavar="SUBCOMMAND")
    r = ssub.add_parser(
        "run",
        help="train and evaluate every unfinished cell (resumable)",
        description="Finished cells (results.json present in the run folder, or a committed copy "
        "of the cell as declared) are skipped; an interrupted DeCLUTR cell resumes from its "
        "checkpoint; a base whose folder is gone but whose results are committed (a fresh clone) is "
        "trained again for the cell that continues it. One failing cell does not stop the others.",
    )
    r.add_argument("experiment", help="experiment TOML file")
    r.add_argument("--only", default=None, help="comma-separated cell names to run")
    r.add_argument("--seeds", default=None, help="comma-separated seeds to run (default: every cell's seeds)")
    r.add_argument("--stop-on-error", action="store_true", help="stop at the first failing cell")
    r.set_defaults(func=cmd_run)
    rep = ssub.add_parser(
        "report",
        help="regenerate the Markdown report and PNG chart from results files",
        description="Reads the experiment's committed `results` folder (else its `output`).",
    )
    rep.add_argument(
        "experiment", nargs="+", help="experiment TOML file(s); several make a summary and a page each, in order"
    )
    rep.add_argument(
        "--output",
        default="docs/results.md",
        help="Markdown file to write (default docs/results.md); with several experiments, their summary, "
        "each one's page in the folder of its stem (docs/results/<experiment>.md)",
    )
    rep.add_argument(
        "--one-file",
        action="store_true",
        help="several experiments: one Markdown file, each experiment a section, instead of pages",
    )
    rep.add_argument(
        "--from",
        dest="source",
        default=None,
        metavar="DIR",
        help="read results from this folder instead (a run output or a results folder)",
    )
    rep.set_defaults(func=cmd_report)
    imp = ssub.add_parser(
        "import",
        help="copy finished results of a run output into the committed results folder",
        description="For every declared (cell, seed) with FROM/<cell>/seed-<s>/results.json, write "
        "<results>/<cell>/seed-<s>.json. Results whose method or settings differ from the file's "
        "(an older grid) are reported as stale and not copied.",
    )
    imp.add_argument("experiment", help="experiment TOML file (with `results = ...`)")
    imp.add_argument(
        "--from", dest="source", required=True, metavar="DIR", help="run output folder (the file's `output` layout)"
    )
    imp.add_argument("--only", default=None, help="comma-separated cell names to import")
    imp.set_defaults(func=cmd_import)
    d = ssub.add_parser(
        "diagnose",
        help="anisotropy, training curves and span statistics of trained runs",
        description="For every finished (cell, seed) with a model, write its diagnostics (mean "
        "cosine of random sentence pairs, first/last losses, tokens seen, DeCLUTR span statistics) "
        "beside its committed results; the report shows them.",
    )
    d.add_argument("experiment", help="experiment TOML file (with `results = ...`)")
    d.add_argument("--only", default=None, help="comma-separated cell names")
    d.add_argument("--force", action="store_true", help="recompute diagnostics that exist")
    d.set_defaults(func=cmd_diagnose)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def cmd_run(args: argparse.Namespace) -> int:
    from sentkit.experiments import load_experiment, run_experiment

    spec = load_experiment(args.experiment)
    only = _cells(args.only)
    seeds = [int(s) for s in args.seeds.split(",") if s] if args.seeds else None
    status = run_experiment(spec, only=only, seeds=seeds, keep_going=not args.stop_on_error)
    for key, st in status.items():
        print(f"{key:40s} {st}")
    return 1 if any(st.startswith("failed") for st in status.values()) else 0


def _cells(value: str | None) -> list[str] | None:
    return [s for s in value.split(",") if s] if value else None


def cmd_report(args: argparse.Namespace) -> int:
    from sentkit.core.config import ConfigError
    from sentkit.experiments import load_experiment
    from sentkit.experiments.report import write_pages, write_reports
    from sentkit.experiments.runner import collect, results_source

    specs = [load_experiment(e) for e in args.experiment]
    if args.source and len(specs) > 1:
        raise ConfigError("--from reads one experiment's results: give one experiment file with it")
    parts = [(collect(src), spec, src) for spec in specs for src in [args.source or results_source(spec)]]
    paths = [write_reports(parts, args.output)] if len(parts) == 1 or args.one_file else write_pages(parts, args.output)
    print(f"wrote {', '.join(map(str, paths))} from {', '.join(str(src) for _, _, src in parts)}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from sentkit.experiments import load_experiment
    from sentkit.experiments.runner import import_results, plan

    spec = load_experiment(args.experiment)
    status = import_results(spec, args.source, only=_cells(args.only))
    for key, st in status.items():
        print(f"{key:40s} {st}")
    copied = sum(st in ("published", "unchanged") for st in status.values())
    runs = [r for r in plan(spec) if f"{r.cell.name}/seed-{r.seed}" in status]
    have = sum(1 for r in runs if (p := r.published_path(spec)) is not None and p.is_file())
    print(
        f"{copied} of {len(status)} runs found in {args.source}; {have} of {len(status)} now have results "
        f"in {spec.results}"
    )
    return 1 if any(st.startswith("stale") for st in status.values()) else 0


def cmd_diagnose(args: argparse.Namespace) -> int:
    from sentkit.experiments import load_experiment
    from sentkit.experiments.diagnostics import diagnose

    status = diagnose(load_experiment(args.experiment), only=_cells(args.only), force=args.force)
    for key, st in status.items():
        print(f"{key:40s} {st}")
    return 0
