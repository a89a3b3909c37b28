"""`sentkit train`: any registered method, one config convention."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from sentkit.core.config import ConfigError, from_dict, load_toml, parse_overrides


def register(sub: Any) -> None:
    # ---- train
    t = sub.add_parser(
        "train",
        help="train a sentence encoder (DeCLUTR by default, or any registered method)",
        description="Train with --method on --corpus and save an encoder at --out. Settings come from the "
        "method's defaults, then --config run.toml, then flags, then --set key=value (last wins). The resolved "
        "config is saved next to the model. --out must be new, empty or an earlier run of the same method "
        "(--resume continues it, --overwrite replaces it); one training at a time may use it.",
    )
    t.add_argument("--method", default="declutr", help="training method (default: declutr); see --list-methods")
    t.add_argument("--list-methods", action="store_true", help="print the registered methods and exit")
    t.add_argument(
        "--model",
        default=None,
        help="base model: registry name, local dir or HF id (transformer methods; whiten: any model name)",
    )
    t.add_argument("--corpus", default=None, help="corpus path or a store made by `sentkit prepare`")
    t.add_argument("--out", default=None, help="output directory (model, checkpoint, metrics.csv, config)")
    t.add_argument(
        "--txt-mode",
        default=None,
        choices=["file", "lines"],
        help="a single .txt corpus: one document (file, default) or one per line (lines: DeCLUTR's format)",
    )
    t.add_argument("--max-steps", type=int, default=None, help="stop after this many optimizer steps")
    t.add_argument("--seed", type=int, default=None, help="random seed (default 0)")
    t.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    t.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier sentkit run in --out (never a folder of other files)",
    )
    t.add_argument(
        "--allow-config-change",
        action="store_true",
        help="with --resume: accept settings that differ from the run's (they are listed)",
    )
    t.add_argument(
        "--prepare-only",
        action="store_true",
        help="take --out and do the one-off work (token store, a vocabulary trained on the corpus), then "
        "stop; start the processes on it afterwards (torchrun ... train, same options)",
    )
    t.add_argument("--config", default=None, help="TOML file of settings (flat keys, or a [train] table)")
    t.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any config key, e.g. --set batch_size=8 --set mlm=false (repeatable)",
    )
    t.add_argument("--show-config", action="store_true", help="print the resolved config and exit")
    t.add_argument(
        "--plan",
        action="store_true",
        help="print the memory plan (peak per process: weights, gradients, optimizer state, activations, overhead) "
        "from the model's config and these settings, then exit without preparing or training",
    )
    t.add_argument(
        "--gpu-memory",
        default=None,
        metavar="SIZE",
        help="with --plan (implies it): plan for a GPU with SIZE of memory (24GB, 24GiB, 80G, or bytes) and say "
        "whether the run fits and the cheapest change that makes it fit",
    )
    t.add_argument(
        "--processes",
        type=int,
        default=None,
        metavar="N",
        help="with --plan: the number of processes the run will have (torchrun; default $WORLD_SIZE, else 1)",
    )
    t.set_defaults(func=cmd_train)

    # ---- whiten: `sentkit train --method whiten`, with its own words
    w = sub.add_parser(
        "whiten",
        help="whiten any model's vectors, fitted on your corpus (saved so sentence-transformers loads it)",
        description="Centre a model's sentence vectors and give them identity covariance (BERT-whitening), fitted on "
        "a seeded sample of the corpus's sentences. A transformer gets it as a sentence-transformers Dense module "
        "after its pooling (the folder loads unchanged in sentence-transformers); any other model name "
        "(glove-average, a Hill et al. model folder, file.py:attr) is saved with its base. The same as "
        "`sentkit train --method whiten`.",
    )
    w.add_argument("--model", required=True, help="the model to whiten: any model name")
    w.add_argument("--corpus", required=True, help="the corpus whose sentences the whitening is fitted on")
    w.add_argument("--out", required=True, help="output folder")
    w.add_argument(
        "--max-sentences", type=int, default=None, help="fit on at most this many sentences (default 100000)"
    )
    w.add_argument("--dim", type=int, default=None, help="keep the first DIM whitened directions (default: all)")
    w.add_argument("--seed", type=int, default=None, help="seed of the sentence sample (default 0)")
    w.add_argument(
        "--precision",
        default=None,
        metavar="auto|fp32|bf16|fp16",
        help="the arithmetic a transformer encodes the sample in (default fp32; the saved folder keeps the base's "
        "float32 weights whatever is chosen)",
    )
    w.add_argument("--overwrite", action="store_true", help="replace an earlier sentkit run in --out")
    w.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other setting (min_words, batch_size, text_field)",
    )
    w.set_defaults(func=cmd_whiten)


# ----------------------------------------------------------------------------- train
def resolve_train_config(args: argparse.Namespace) -> tuple[Any, Any]:
    """(method, config) from defaults < TOML < flags < --set."""
    from sentkit.core.methods import get_method

    data: dict[str, Any] = {}
    if args.config:
        raw = load_toml(args.config)
        data.update(raw.get("train", raw))
    method_name = args.method if args.method != "declutr" or "method" not in data else data["method"]
    data.pop("method", None)
    method = get_method(method_name)
    all_fields = dataclasses.fields(method.config_cls)
    fields = {f.name for f in all_fields}
    required = {
        f.name for f in all_fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    flags = {
        "model": args.model,
        "corpus": args.corpus,
        "out": args.out,
        "max_steps": args.max_steps,
        "seed": args.seed,
        "txt_mode": getattr(args, "txt_mode", None),
    }
    for flag in ("resume", "overwrite", "allow_config_change"):
        if getattr(args, flag, False):
            flags[flag] = True
    for k, v in flags.items():
        if v is None or (k == "overwrite" and k not in fields):  # handled by cmd_train for such methods
            continue
        if k not in fields:
            raise ConfigError(f"method {method.name!r} does not take --{k.replace('_', '-')}")
        data[k] = v
    if getattr(args, "quiet", False) and "progress" in fields:  # -q: no progress bars (unless --set progress=true)
        data["progress"] = False
    data.update(parse_overrides(args.overrides))
    for req in ("corpus", "out"):
        if req in required and req not in data:
            raise ConfigError(f"--{req} is required (or set `{req}` in --config)")
    return method, from_dict(method.config_cls, data, where=f"{method.name} config")


def cmd_train(args: argparse.Namespace) -> int:
    from sentkit.core.config import to_dict
    from sentkit.core.methods import METHODS, method_names

    if args.list_methods:  # from the table alone: no method's code is imported
        for name in method_names():
            print(f"{name:24s} {METHODS[name].description}")
        return 0
    budget = None
    if getattr(args, "gpu_memory", None) is not None:
        from sentkit.training.plan import parse_size

        budget = parse_size(args.gpu_memory)  # a bad size is one line before anything else
    planning = getattr(args, "plan", False) or budget is not None
    if getattr(args, "processes", None) is not None and not planning:
        from sentkit.core.errors import InputError

        raise InputError("--processes only applies to --plan (torchrun --nproc_per_node sets a run's processes)")
    if planning:  # nothing is read or written: a plan needs no corpus or output folder
        args.corpus, args.out = args.corpus or "-", args.out or "-"
    method, cfg = resolve_train_config(args)
    if planning:
        print(memory_plan(method.name, cfg, budget, getattr(args, "processes", None)))
        return 0
    if args.show_config:
        print(json.dumps(to_dict(cfg), indent=2))
        return 0
    import os

    from sentkit.training.config import TrainConfig

    prepare_only = getattr(args, "prepare_only", False)
    if isinstance(cfg, TrainConfig):  # the transformer loop guards its folder itself
        out = method.train(cfg, prepare_only=True) if prepare_only else method.train(cfg)
    elif prepare_only:
        raise ConfigError(
            f"method {method.name!r} does not take --prepare-only (it prepares nothing to share between processes)"
        )
    else:
        out = _train_guarded(method, cfg, overwrite=args.overwrite)
    if os.environ.get("RANK", "0") == "0":
        print(
            f"prepared {out}; start the training on it with the same options (torchrun --nproc_per_node N "
            "-m sentkit.cli.main train ...)"
            if prepare_only
            else f"saved {method.name} encoder to {out}"
        )
    return 0


def memory_plan(method: str, cfg: Any, budget: int | None, processes: int | None) -> str:
    """`sentkit train ... --plan`: the plan's table for each phase of the run (llm2vec: MNTP, then SimCSE) and,
    given a budget, whether it fits and the cheapest change that makes it fit (`sentkit.training.plan`)."""
    import os

    from sentkit.core.errors import InputError
    from sentkit.training.plan import ModelShape, RunSettings, plan, table, verdict

    if processes is not None and processes < 1:
        raise InputError(f"--processes must be at least 1, got {processes}")
    world = processes or int(os.environ.get("WORLD_SIZE", "1") or 1)
    device = "cuda" if budget is not None else _plan_device(getattr(cfg, "device", "auto"))
    from sentkit.training.config import TrainConfig

    if method != "llm2vec" and not isinstance(cfg, TrainConfig):
        raise InputError(
            f"--plan: the memory plan covers the transformer loop's methods and llm2vec, not {method!r} "
            "(it trains no transformer through the loop)"
        )
    if method == "llm2vec":
        common = {k: getattr(cfg, k) for k in ("precision", "lora_r", "lora_dropout", "base_precision")}
        common["gradient_checkpointing"] = cfg.gradient_checkpointing
        phases = [
            (
                "mntp",
                {
                    **common,
                    "batch_size": cfg.mntp_batch_size,
                    "seq_len": cfg.seq_len,
                    "mlm_probability": cfg.mlm_probability,
                },
            ),
            ("simcse", {**common, "batch_size": cfg.simcse_batch_size, "max_len": cfg.max_len, "pooling": cfg.pooling}),
        ]
    else:
        phases = [(method, cfg)]
    shape = ModelShape.from_config(plan_model_config(cfg))
    blocks = []
    for name, phase_cfg in phases:
        p = plan(shape, RunSettings.from_config(phase_cfg, name, shape, device=device, world_size=world))
        text = f"memory plan ({name}, per process, peak; sentkit.training.plan):\n{table(p)}"
        if budget is not None:
            text += "\n" + verdict(shape, p, budget)
        blocks.append(text)
    return "\n\n".join(blocks)


def _plan_device(device: str) -> str:
    if device.startswith("cuda"):
        return "cuda"
    if device != "auto":
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def plan_model_config(cfg: Any) -> Any:
    """The config of the model `cfg` trains (its config.json through transformers' AutoConfig: no weights), with a
    from-scratch architecture's overrides (layers, hidden, heads, intermediate, max_positions) applied."""
    from sentkit.core.errors import MissingInputError
    from sentkit.models.hub import ARCH_KEYS, resolve

    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(resolve(cfg.model))
    except (OSError, ValueError) as e:
        raise MissingInputError(
            f"--plan reads the model's config.json: {cfg.model!r} has none here ({str(e).splitlines()[0][:200]})"
        ) from None
    if getattr(cfg, "train_tokenizer", False):  # a vocabulary trained on the corpus, of vocab_size
        config.vocab_size = int(cfg.vocab_size)
    arch = cfg.arch() if hasattr(cfg, "arch") else {}
    for key, value in arch.items():
        attr = next((a for a in ARCH_KEYS.get(key, ()) if hasattr(config, a)), None)
        if attr is not None:
            setattr(config, attr, int(value))
    return config


def cmd_whiten(args: argparse.Namespace) -> int:
    given = (("max_sentences", args.max_sentences), ("dim", args.dim), ("precision", args.precision))
    extra = [f"{k}={v}" for k, v in given if v is not None]
    return cmd_train(
        argparse.Namespace(
            method="whiten",
            list_methods=False,
            model=args.model,
            corpus=args.corpus,
            out=args.out,
            max_steps=None,
            seed=args.seed,
            resume=False,
            overwrite=args.overwrite,
            allow_config_change=False,
            config=None,
            overrides=[*extra, *args.overrides],
            show_config=False,
            quiet=getattr(args, "quiet", False),
        )
    )


def _train_guarded(method: Any, cfg: Any, *, overwrite: bool) -> Any:
    """Run a method that has no run-folder rules of its own (the Hill et al. models) under the
    transformer loop's: a new, empty or earlier-run folder (--overwrite), one process at a time."""
    from types import SimpleNamespace

    from sentkit.training.rundir import claim, run_lock, write_run

    target = getattr(cfg, "out", None)
    if not target:
        return method.train(cfg)
    out = Path(target)
    # a config with its own resume / overwrite fields (the raw-text recipe) is checked as it is
    guard = cfg if hasattr(cfg, "resume") else SimpleNamespace(overwrite=overwrite, resume=False)
    claim(out, method.name, guard, dry_run=True)
    with run_lock(out):
        claim(out, method.name, guard)
        result = method.train(cfg)
        write_run(out, method.name, cfg, status="done")
    return result
