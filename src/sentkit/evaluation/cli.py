"""CLI: `sentkit evaluate`, `sentkit report`, `sentkit data check|download|build-probing`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "evaluate",
        help="score an encoder on SentEval tasks (SentEval's protocol), your own task files, MTEB tasks",
        description="Score a sentence encoder on SentEval's downstream and probing tasks with "
        "SentEval's own protocol, on your own task files (--task-file, --user-task) and on MTEB's "
        "tasks run by the mteb package (--mteb). Writes a results JSON (and optionally Markdown/PNG). "
        "docs/evaluation.md.",
    )
    p.add_argument(
        "--model",
        "-m",
        required=True,
        help="any model name: a folder saved by `sentkit train`, glove-average, a registry name "
        "(all-minilm-l6-v2), a transformers / sentence-transformers folder or HF id, "
        "module:attr or file.py:attr",
    )
    from sentkit.models.loading import add_model_settings

    add_model_settings(p)
    p.add_argument(
        "--quantize",
        default=None,
        metavar="int8|binary",
        help="score the codes of the model's vectors, as sentence-transformers' quantize_embeddings gives them: int8 "
        "values, or binary as +1/-1 (cosine = 1 - 2*hamming/dim, so tasks rank by Hamming distance), made from the "
        "float vectors (cached once for every code and width); results and MTEB revisions are kept apart "
        "(docs/smaller_vectors.md)",
    )
    p.add_argument(
        "--calibration",
        default=None,
        metavar="FILE",
        help="where --quantize int8 takes its ranges, never from the tasks' own sentences: a .txt of texts (a seeded "
        "sample of 10000 is encoded) or the .quantization.json `sentkit embed --quantize int8` wrote",
    )
    p.add_argument(
        "--rescore",
        default=None,
        metavar="float|int8|none",
        help="with --quantize binary: retrieval tasks rank as `sentkit index --quantize binary` searches, the best "
        "10 of 10 x --rescore-multiplier Hamming candidates rescored with the float query against each candidate's "
        "float vector (float) or int8 codes (int8), the rest in Hamming order; other tasks score the codes "
        "(default: none, the codes alone)",
    )
    p.add_argument(
        "--rescore-multiplier",
        default=None,
        type=int,
        metavar="N",
        help="candidates per result that --rescore rescores (default 4)",
    )
    p.add_argument(
        "--tasks",
        default=None,
        help="comma-separated task names, 'all' (every task whose data is present, and the user "
        "tasks), 'downstream', 'probing', 'user' or 'none' (default: all; only the user tasks when "
        "--task-file / --user-task are given; none with --mteb alone)",
    )
    p.add_argument(
        "--task-file",
        action="append",
        default=[],
        metavar="TOML",
        help="your own tasks, declared as [[task]] tables (docs/evaluation.md); repeatable",
    )
    p.add_argument(
        "--user-task",
        action="append",
        default=[],
        metavar="TYPE:NAME=PATH",
        help="one of your own tasks: TYPE classification | pair-classification | sts | retrieval, "
        "PATH a row file, a folder of train/dev/test files or a BEIR folder; repeatable",
    )
    p.add_argument(
        "--mteb",
        action="append",
        nargs="+",
        default=[],
        metavar="TASK",
        help="also run MTEB tasks with the mteb package (extra: sentkit[mteb]): task or benchmark names "
        "as mteb spells them (STS12, Banking77Classification, 'MTEB(eng, v2)'), NAME=DIR for a local "
        "copy of a task's dataset, or your own task files as TYPE:NAME=PATH or a .toml; mteb's "
        "results files go to <output folder>/mteb (docs/evaluation.md, MTEB)",
    )
    p.add_argument(
        "--allow-subset",
        action="store_true",
        help="--mteb TASK=DIR: score a local copy whose splits or sizes differ from mteb's metadata for "
        "the task (refused otherwise), filed under a revision that says local subset",
    )
    p.add_argument(
        "--preset",
        default="prototyping",
        choices=["prototyping", "literature"],
        help="prototyping: kfold 5, rmsprop, batch 128, tenacity 3, epoch size 2; "
        "literature: kfold 10, adam, batch 64, tenacity 5, epoch size 4",
    )
    p.add_argument("--output", "-o", default="results.json", help="results JSON path (default: results.json)")
    p.add_argument("--markdown", help="also write the Markdown table here")
    p.add_argument("--plot", help="also write a PNG bar chart of the per-task scores here")
    p.add_argument("--data-dir", help="SentEval data folder (default: $SENTKIT_DATA, else ~/.cache/sentkit/data)")
    p.add_argument(
        "--cache-dir", help="embedding cache folder (default: $SENTKIT_CACHE or ./.sentkit_cache/embeddings)"
    )
    p.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    p.add_argument(
        "--raw", action="store_true", help="pair tasks: feed the untokenized originals in raw/ (for subword models)"
    )
    p.add_argument("--seed", type=int, help="seed (default 1111, as SentEval)")
    p.add_argument("--batch-size", type=int, dest="encode_batch_size", help="sentences per encoder call (default 128)")
    p.add_argument("--threads", type=int, help="torch and numpy-BLAS threads (default: library default)")
    p.add_argument("--fingerprint", help="cache key for a model without one (e.g. a plain callable)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any config field, e.g. --set kfold=10 --set optim=adam,lr=0.01 --set nhid=50",
    )
    from sentkit.core.interface import add_prompt_flags

    add_prompt_flags(
        p, what="the texts of every task (retrieval queries and documents keep the model's query and document prompts)"
    )
    p.set_defaults(func=_evaluate)

    r = subparsers.add_parser(
        "report",
        help="set several results files side by side",
        description="Print a Markdown table comparing results JSON files (DeCLUTR convention scores, MTEB's "
        "main scores unrounded): each average with the number of tasks it covers, averages over different tasks "
        "marked † (a footnote names them), failed tasks as rows with their reason, the best of a row in bold.",
    )
    r.add_argument("results", nargs="+", help="results JSON files written by `sentkit evaluate`")
    r.add_argument("--labels", help="comma-separated column labels (default: model and preset)")
    r.add_argument("--output", "-o", help="also write the table to this Markdown file")
    r.add_argument("--plot", help="also write a PNG grouped bar chart here (SentEval's and MTEB's tasks)")
    r.add_argument("--detail", action="store_true", help="for one file: print its full per-task table")
    r.add_argument(
        "--include-subsets",
        action="store_true",
        help="count MTEB tasks scored on a local subset (--allow-subset; rows marked (subset)) in the MTEB averages",
    )
    r.set_defaults(func=_report)

    d = subparsers.add_parser(
        "data",
        help="check or download SentEval task data, build the probing tasks",
        description="Check which SentEval tasks have their files, fetch them (or MTEB "
        "tasks' datasets), or build SentEval's ten probing tasks from your own corpus.",
    )
    dsub = d.add_subparsers(dest="data_command", metavar="ACTION")
    c = dsub.add_parser(
        "check",
        help="list each task as present or missing, with the fix",
        description="List each task as present or missing, with the command that fixes it.",
    )
    c.add_argument("--data-dir", help="SentEval data folder (default: $SENTKIT_DATA, else ~/.cache/sentkit/data)")
    c.set_defaults(func=_data_check)
    dl = dsub.add_parser(
        "download",
        help="fetch task files from their canonical sources (needs internet)",
        description="Fetch task files (sha256-checked where known) into the data folder.",
    )
    dl.add_argument("tasks", nargs="*", help="task names (default: all)")
    dl.add_argument("--data-dir", help="target folder (default: $SENTKIT_DATA, else ~/.cache/sentkit/data)")
    dl.add_argument("--force", action="store_true", help="download again even if a file is present")
    dl.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    dl.add_argument(
        "--mteb",
        action="append",
        nargs="+",
        default=[],
        metavar="TASK",
        help="instead, fetch these MTEB tasks' datasets (or a benchmark's) into the Hugging Face cache, "
        "through mteb's own loading; copy that cache to a machine without network",
    )
    dl.set_defaults(func=_data_download)
    from sentkit.data.probing.cli import register as register_build_probing

    register_build_probing(dsub)
    d.set_defaults(func=_data_help(d))


def _data_help(parser: argparse.ArgumentParser) -> Any:
    def show(args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    return show


def set_threads(n: int) -> None:
    """Limit torch and the BLAS behind numpy to `n` threads (for fair timings)."""
    import torch

    torch.set_num_threads(n)
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        pass


def check_outputs(
    outputs: list[tuple[str | None, str]], *, plot: str | None = None, inputs: Sequence[str] = ()
) -> None:
    """Before any expensive work: every output path can be written (PathError naming the flag
    otherwise), no two outputs are one file, no output is one of the `inputs`, and matplotlib
    is there when a chart is asked for."""
    from sentkit.core.config import ConfigError
    from sentkit.core.io import check_writable

    seen: dict[Path, str] = {Path(p).resolve(): "an input" for p in inputs}
    for path, flag in outputs:
        if path is None:
            continue
        check_writable(path, what=flag)
        key = Path(path).resolve()
        if key in seen:
            raise ConfigError(f"{flag} {path} is also {seen[key]}: it would be overwritten; give another path")
        seen[key] = flag
    if plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ConfigError("--plot needs matplotlib: pip install matplotlib (or 'sentkit[report]')") from None


def save_or_keep(path: str, text: str, what: str) -> str | None:
    """Write `text` to `path` atomically. If that fails, keep it in a fallback file (the temp
    folder, else the current folder) and return the error line naming both; None on success."""
    import tempfile
    import time

    from sentkit.core.io import atomic_write_text, describe_os_error

    try:
        atomic_write_text(path, text)
        return None
    except OSError as e:
        why = describe_os_error(e)
    name = f"sentkit-{what.replace(' ', '-')}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}{Path(path).suffix}"
    for folder in (Path(tempfile.gettempdir()), Path.cwd()):
        try:
            atomic_write_text(folder / name, text)
            return f"cannot write the {what} to {path} ({why}); they were saved to {folder / name}"
        except OSError:
            continue
    sys.stdout.write(text)
    return f"cannot write the {what} to {path} ({why}), nor to a fallback file; they were printed above"


def _refuse_foreign_file(path: str) -> None:
    """The results JSON may replace an earlier results file, never another file of the user's."""
    from sentkit.core.config import ConfigError
    from sentkit.evaluation.report import load_run

    p = Path(path)
    if not p.is_file() or p.stat().st_size == 0:
        return
    try:
        load_run(p)
    except (ValueError, OSError):
        raise ConfigError(
            f"--output {p} exists and is not a sentkit results file; it would be overwritten. "
            "Give another --output, or move that file away"
        ) from None


def _quantize_settings(args: argparse.Namespace) -> dict[str, Any]:
    """`load`'s quantize and calibration keywords from --quantize / --calibration, checked (one line each)."""
    from sentkit.core.config import ConfigError
    from sentkit.models.quantization import check_quantize

    quantize, calibration = getattr(args, "quantize", None), getattr(args, "calibration", None)
    rescore, multiplier = getattr(args, "rescore", None), getattr(args, "rescore_multiplier", None)
    if quantize is None:
        if calibration is not None:
            raise ConfigError("--calibration is for --quantize int8: give --quantize int8 too (or leave it out)")
        if rescore is not None or multiplier is not None:
            raise ConfigError("--rescore rescores a binary search: give --quantize binary too (or leave it out)")
        return {}
    quantize = check_quantize(quantize)
    if quantize == "int8" and calibration is None:
        raise ConfigError(
            "--quantize int8 needs ranges fitted on texts that are not the test data: give --calibration TEXTS.txt "
            "(a seeded sample is encoded) or the .quantization.json `sentkit embed --quantize int8` wrote"
        )
    out = {"quantize": quantize, "calibration": calibration}
    if rescore is not None or multiplier is not None:
        from sentkit.models.quantization import check_rescoring

        how, times = check_rescoring(quantize, rescore, multiplier)  # what QuantizedEncoder checks, before the load
        if how is not None:
            from sentkit.retrieval.index import _faiss

            _faiss()  # the binary search's index: missing, one line before anything is encoded
            out.update(rescore=how, rescore_multiplier=times)
    return out


def _evaluate(args: argparse.Namespace) -> int:
    from sentkit.core.config import ConfigError, parse_overrides
    from sentkit.core.identity import fingerprint, with_precision
    from sentkit.evaluation import evaluate
    from sentkit.evaluation.report import markdown_table, plot_runs
    from sentkit.evaluation.runner import EvaluationInterrupted, whole_key
    from sentkit.models.loading import load, model_settings, used_settings

    check_outputs([(args.output, "--output"), (args.markdown, "--markdown"), (args.plot, "--plot")], plot=args.plot)
    if args.data_dir is not None and not Path(args.data_dir).is_dir():  # before anything is loaded or written
        raise ConfigError(
            f"--data-dir {args.data_dir} is not a folder; give the folder of the SentEval task files "
            "(`sentkit data check --data-dir DIR` says what it holds; `sentkit data download` fetches them)"
        )
    _refuse_foreign_file(args.output)
    settings = model_settings(args)
    quantized = _quantize_settings(args)  # checked before anything loads
    if settings.get("precision") == "auto":  # evaluation's own rule (sentkit.models.precision.EVAL_AUTO_KEEPS_FP32)
        from sentkit.models.loading import takes_precision
        from sentkit.models.precision import for_evaluation
        from sentkit.models.transformer import usable_device

        settings["precision"], said = for_evaluation("auto", usable_device("auto"))
        if said and takes_precision(args.model):
            print(f"sentkit evaluate: {said}", file=sys.stderr)
    tasks = "all" if args.tasks is None else args.tasks
    if args.task_file or args.user_task:  # every file read and checked before the model loads
        from sentkit.evaluation import user_tasks as U

        declared = [t for f in args.task_file for t in U.from_toml(f)] + [U.from_cli(x) for x in args.user_task]
        names = U.register(declared)
        tasks = ",".join(names) if args.tasks is None else args.tasks
    mteb_tasks: list[Any] = []
    checked: Any = None
    if args.mteb:  # names resolved, local task files read and every task's data checked before the model loads
        from sentkit.core.io import check_output_dir
        from sentkit.evaluation import mteb_adapter

        mteb_tasks = mteb_adapter.resolve_tasks(
            [x for group in args.mteb for x in group], allow_subset=args.allow_subset
        )
        check_output_dir(Path(args.output).parent / mteb_adapter.RESULTS_FOLDER, what="the MTEB results folder")
        checked = mteb_adapter.check_data(mteb_tasks, allow_subset=args.allow_subset)
        if args.tasks is None and not (args.task_file or args.user_task):
            tasks = "none"
    if args.threads is not None:
        if args.threads < 1:
            raise ConfigError(f"--threads must be >= 1, got {args.threads}")
        set_threads(args.threads)
    overrides: dict[str, Any] = parse_overrides(args.set)
    for key in ("seed", "encode_batch_size", "cache_dir"):
        if getattr(args, key) is not None:
            overrides[key] = getattr(args, key)
    if args.no_cache:
        overrides["use_cache"] = False
    if args.raw:
        overrides["raw"] = True
    nothing_to_run = tasks == "none" and checked is not None and len(checked.missing) == len(mteb_tasks)
    if nothing_to_run:  # every MTEB dataset is missing: say so without loading the model
        encoder: Any = _not_loaded
        fp = whole_fp = None
    else:
        from sentkit.core.interface import prompt_load_kwargs

        encoder = load(args.model, **settings, **prompt_load_kwargs(args), **quantized)
        fp = with_precision(args.fingerprint, encoder) if args.fingerprint else fingerprint(encoder, args.model)
        whole_fp = whole_key(encoder, args.model, args.fingerprint)  # a cut or codes: the whole vectors' key
    progress = not getattr(args, "quiet", False)
    results: dict[str, Any] | None = None
    try:
        results = evaluate(
            encoder,
            tasks=tasks,
            preset=args.preset,
            data_dir=args.data_dir,
            fingerprint=fp,
            whole_fingerprint=whole_fp,
            model_name=args.model,
            progress=progress and not nothing_to_run,
            **overrides,
        )
        if mteb_tasks:
            results["mteb"] = _run_mteb(encoder, mteb_tasks, results, args, (fp, whole_fp), progress, checked)
    except KeyboardInterrupt as e:  # Ctrl-C: keep what was finished
        partial = e.results if isinstance(e, EvaluationInterrupted) else results
        if partial is None:
            raise
        section = getattr(e, "section", None)  # mteb_adapter.MTEBInterrupted: the MTEB tasks finished
        if isinstance(section, dict):
            partial["mteb"] = section
        done = len(partial["results"]) + len(partial.get("mteb", {}).get("tasks", {}))
        line = save_or_keep(args.output, json.dumps(partial, indent=1, allow_nan=False) + "\n", "results")
        print(
            "sentkit evaluate: interrupted; "
            + (f"the results of the {done} finished tasks were written to {args.output}" if line is None else line),
            file=sys.stderr,
        )
        return 130
    assert results is not None
    used = used_settings(encoder, settings)
    if used:  # --pooling / --attention / half precision: another model of the same weights, said in the results
        results["model"]["settings"] = used
    mteb_line, failures = _mteb_failures(results, mteb_tasks, checked, args.output)
    failed = [save_or_keep(args.output, json.dumps(results, indent=1, allow_nan=False) + "\n", "results")]
    if failures is not None:
        failed.append(save_or_keep(results["mteb"]["failures_file"], failures, "MTEB failures"))
    if not nothing_to_run:  # a run that scored nothing prints no table (and names no results files)
        table = markdown_table(results)
        if args.markdown:
            failed.append(save_or_keep(args.markdown, table, "Markdown table"))
        if args.plot and results["results"]:
            try:
                plot_runs([results], args.plot)
            except OSError as e:
                from sentkit.core.io import describe_os_error

                failed.append(f"cannot write the chart to {args.plot} ({describe_os_error(e)})")
        print(table)
    if failed[0] is None:
        print(f"results written to {args.output}")
    problems = [p for p in failed if p]
    if results["errors"]:  # the table has a row per failed task; the error line sums them up
        errs = results["errors"]
        n = len(results["tasks_requested"])
        lines = [_one_line(msg) for msg in errs.values()]
        lines = [ln if ln.startswith(f"task {name}") else f"task {name}: {ln}" for name, ln in zip(errs, lines)]
        problems.insert(0, f"{len(errs)} of {n} tasks failed: " + "; ".join(lines))
    if mteb_line:
        problems.append(mteb_line)
    if problems:
        print(f"sentkit evaluate: error: {'; '.join(problems)}", file=sys.stderr)
    return 1 if problems else 0


def _not_loaded(texts: list[str]) -> Any:
    """The encoder of a run that encodes nothing (every MTEB dataset missing): the model is not loaded."""
    raise RuntimeError("the model was not loaded: this run has nothing to encode")


FAILURES_SUFFIX = ".mteb-failures.txt"  # beside the results JSON: each failed MTEB task's reason and fix


def _mteb_failures(results: dict[str, Any], tasks: list[Any], checked: Any, output: str) -> tuple[str, str | None]:
    """The closing line for the failed MTEB tasks ("" for none) and, for more than one, the text of
    the failures file (one line per task: its reason and fix), whose path goes into the results
    JSON (``mteb.failures_file``) and into the line. One failure is told whole in the line."""
    from sentkit.evaluation import mteb_adapter

    section = results.get("mteb") or {}
    errs: dict[str, str] = section.get("errors") or {}
    if not errs:
        return "", None
    n = len(section["tasks_requested"])
    if len(errs) == 1:
        return f"1 of {n} MTEB tasks failed: {_one_line(next(iter(errs.values())))}", None
    path = str(Path(output).with_suffix("")) + FAILURES_SUFFIX
    section["failures_file"] = path
    text = "".join(f"{name}: {_one_line(msg).removeprefix(f'MTEB task {name}: ')}\n" for name, msg in errs.items())
    missing = {t: m for t, m in errs.items() if checked is not None and t in checked.missing}
    other = [t for t in errs if t not in missing]
    parts = [mteb_adapter.missing_summary(missing, tasks)] if missing else []
    if other:
        parts.append(
            f"{len(other)} failed in the run ({', '.join(other)})"
            if len(other) <= 5
            else f"{len(other)} failed in the run"
        )
    return f"{len(errs)} of {n} MTEB tasks failed: {'; '.join(parts)}; each task's reason and fix: {path}", text


def _run_mteb(
    encoder: Any,
    tasks: list[Any],
    results: dict[str, Any],
    args: argparse.Namespace,
    keys: tuple[str | None, str | None],
    progress: bool,
    checked: Any,
) -> dict[str, Any]:
    """The MTEB tasks through mteb (sentkit.evaluation.mteb_adapter), with the run's encode batch
    size and embedding cache; mteb's results files in the folder of --output, under mteb/, filed
    under the model's identity (its weights' content hash; a published model's own name and
    revision); tasks whose data `checked` found missing are listed, not run. `keys`: the cache keys of the model's
    vectors and of the whole ones a cut or quantized model is made from."""
    from sentkit.evaluation import mteb_adapter
    from sentkit.models.loading import used_settings

    cfg = results["config"]
    folder = Path(args.output).parent
    # settings that make another model of the same weights (a pooling, a prompt given on the command line)
    parts = [f"{k}={getattr(args, k)}" for k in ("pooling", "attention") if getattr(args, k, None) is not None]
    used = used_settings(encoder, {}) if encoder is not _not_loaded else {}
    # half precision as resolved, the first dimensions kept, the code vectors are quantized to
    parts += [f"{k}={used[k]}" for k in ("precision", "dim", "quantize", "rescore") if used.get(k) is not None]
    parts += [f"{k}={getattr(args, k)}" for k in ("prompt_name", "prompt") if getattr(args, k, None) is not None]
    variant = ";".join(parts)
    identity = mteb_adapter.model_identity(args.model, variant=variant) if encoder is not _not_loaded else None
    return mteb_adapter.run(
        encoder,
        tasks,
        output_dir=folder / mteb_adapter.RESULTS_FOLDER,
        model_name=args.model,
        fingerprint=keys[0],
        whole_fingerprint=keys[1],
        batch_size=cfg["encode_batch_size"],
        cache_dir=cfg["cache_dir"],
        use_cache=cfg["use_cache"],
        progress=progress,
        results_root=folder,
        identity=identity,
        checked=checked,
    )


def _one_line(text: str) -> str:
    """`text` on one line, without the exception class prefix the runner records."""
    flat = " ".join(part.strip() for part in str(text).splitlines() if part.strip())
    head, sep, rest = flat.partition(": ")
    return rest if sep and head.isidentifier() and head[:1].isupper() else flat


def _report(args: argparse.Namespace) -> int:
    from sentkit.core.config import ConfigError
    from sentkit.core.io import atomic_write_text
    from sentkit.evaluation.report import load_run, markdown_table, plot_runs, side_by_side

    check_outputs([(args.output, "--output"), (args.plot, "--plot")], plot=args.plot, inputs=args.results)
    runs = []
    for path in args.results:
        try:
            runs.append(load_run(path))
        except ValueError as e:
            raise ConfigError(str(e)) from None
    labels = [s.strip() for s in args.labels.split(",")] if args.labels else None
    if labels is not None and len(labels) != len(runs):
        raise ConfigError(f"--labels has {len(labels)} labels for {len(runs)} results files")
    subsets = bool(getattr(args, "include_subsets", False))
    text = (
        markdown_table(runs[0], include_subsets=subsets)
        if args.detail and len(runs) == 1
        else side_by_side(runs, labels, include_subsets=subsets)
    )
    print(text)
    if args.output:
        atomic_write_text(args.output, text)
    if args.plot:
        plot_runs(runs, args.plot, labels)
        print(f"chart written to {args.plot}")
    return 0


def _data_check(args: argparse.Namespace) -> int:
    from sentkit.evaluation.data import check
    from sentkit.evaluation.tasks import resolve_data_dir

    statuses = check(args.data_dir)
    print(f"data folder: {resolve_data_dir(args.data_dir)}")
    width = max(len(s.task) for s in statuses)
    for s in statuses:
        if s.present and s.changed:
            more = f" (+{len(s.changed) - 1} more)" if len(s.changed) > 1 else ""
            print(f"  {s.task:<{width}}  CHANGED {s.changed[0]}{more} -> fix: {s.fix}")
        elif s.present:
            print(f"  {s.task:<{width}}  present")
        else:
            first = s.missing[0]
            more = f" (+{len(s.missing) - 1} more)" if len(s.missing) > 1 else ""
            print(f"  {s.task:<{width}}  MISSING {first}{more} -> fix: {s.fix}")
    n = sum(s.present for s in statuses)
    print(f"{n} of {len(statuses)} tasks present")
    return 0


def _data_download(args: argparse.Namespace) -> int:
    from sentkit.core.io import check_output_dir
    from sentkit.evaluation.data import download
    from sentkit.evaluation.tasks import get_task, resolve_data_dir

    if args.mteb:
        if args.tasks:
            from sentkit.core.config import ConfigError

            raise ConfigError("give SentEval task names or --mteb names, not both, to `sentkit data download`")
        return _mteb_download([x for group in args.mteb for x in group])
    tasks = [get_task(t).name for t in args.tasks] or None
    check_output_dir(resolve_data_dir(args.data_dir), what="--data-dir")
    try:
        fetched = download(tasks, args.data_dir, force=args.force, timeout=args.timeout)
    except OSError as e:  # network errors, checksum mismatches
        from sentkit.core.io import describe_os_error

        print(f"sentkit data download: error: {describe_os_error(e)}", file=sys.stderr)
        return 1
    for folder, files in fetched.items():
        print(f"{folder}: {len(files)} file(s) downloaded")
    if not fetched:
        print("nothing to download: every requested file is present")
    print(f"data folder: {Path(args.data_dir) if args.data_dir else 'default'}")
    return 0


def _mteb_download(names: list[str]) -> int:
    """`sentkit data download --mteb`: each task's dataset into the Hugging Face cache, by mteb."""
    from sentkit.evaluation import mteb_adapter

    try:
        fetched = mteb_adapter.download(names)
    except mteb_adapter.MTEBDataMissing as e:
        print(f"sentkit data download: error: {_one_line(str(e))}", file=sys.stderr)
        return 1
    for name, path in fetched.items():
        print(f"{name}: {path} is in the local cache")
    return 0
