"""The one training loop of every transformer method (DeCLUTR, SimCSE, TSDAE, MLM), phases in order.

A method (`sentkit.training.recipe.Recipe`) supplies the batches and the objective; this loop owns
the output folder's safety, the token store, processes (DDP, or FSDP: `distributed=fsdp`, where only
the wrap, the no-sync switch and the checkpoint read/write differ, see `sentkit.training.fsdp`),
precision, the optimiser and schedule, exact resume, checkpoints, metrics and the saved encoder.
Each process of a multi-process run logs to its own file (train.log for rank 0, train-rank<N>.log
for the others); a rank that stops mid-run is reported by the others in one line that names it, its
log and the checkpoint to resume from (`stopped_report`)."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sentkit.core.config import ConfigError, save_json, to_dict
from sentkit.data.corpus import CorpusError, Fix
from sentkit.models.lora import base_precision, half_base
from sentkit.training.batching import StepUnits
from sentkit.training.checkpoint import (
    CheckpointError,
    has_checkpoint,
    last_checkpoint,
    load_checkpoint,
    read_checkpoint,
    restore,
    rng_state,
    save_checkpoint,
    save_sharded,
    set_rng_state,
)
from sentkit.training.config import TrainConfig
from sentkit.training.distributed import (
    DistInfo,
    RankFailed,
    main_first,
    ranks_text,
    unwrap,
    watch_peers,
    wrap,
)
from sentkit.training.fsdp import plain_module, shard
from sentkit.training.metrics import MetricsLogger
from sentkit.training.plan import run_line
from sentkit.training.recipe import Recipe, StoreSpec
from sentkit.training.rundir import claim, clean_stale, rank_log_name, run_lock, run_log, write_run
from sentkit.training.schedule import SCHEDULES
from sentkit.training.step import StepContext, forward_backward, make_optimizer, optimizer_step

log = logging.getLogger(__name__)

SNAPSHOTS = (
    "snapshots"  # <out>/snapshots/step-<N>: the encoder at the steps `snapshots` names (a scaling curve's points)
)


# ----------------------------------------------------------------------------- helpers
def pick_precision(device: torch.device, precision: str) -> str:
    """`auto`: bf16 on a GPU that computes it natively (never emulated bf16), else fp32."""
    if precision != "auto":
        return precision
    if device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False):
        return "bf16"
    return "fp32"


def autocast_factory(device: torch.device, precision: str) -> Callable[[], Any]:
    if precision == "fp32":
        return contextlib.nullcontext
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return lambda: torch.autocast(device_type=device.type, dtype=dtype)


def corpus_subset(num_units: int, fraction: float) -> np.ndarray:
    """A fixed share of the units; nested across fractions (10 % is inside 30 %), independent of the seed."""
    order = np.random.default_rng(0x5EB5E7).permutation(num_units)
    return np.sort(order[: max(1, round(num_units * fraction))]) if fraction < 1 else np.arange(num_units)


def open_or_prepare_store(
    cfg: TrainConfig, tokenizer: Any, spec: StoreSpec, out: Path, info: DistInfo, *, rule: Any = None
) -> Any:
    """Use cfg.corpus if it is a prepared store, else prepare it once into cfg.prepared_dir (default
    <out>/prepared); runs sharing a prepared_dir reuse the store when its settings match. Only rank 0
    prepares (the loop runs it before the other ranks, see `main_first`); they open what it made."""
    from sentkit.core.io import file_lock
    from sentkit.data.store import TokenStore, is_store, prepare_store

    if is_store(cfg.corpus):
        store = TokenStore(cfg.corpus)
    else:
        target = Path(cfg.prepared_dir) if cfg.prepared_dir else out / "prepared"
        if info.is_main:
            # runs sharing prepared_dir (several processes of an experiment grid) prepare it once
            with file_lock(target.with_name(f".{target.name}.lock")):
                if not _store_matches(target, spec, tokenizer, cfg.txt_mode):
                    kw: dict[str, Any] = {"rule": rule} if rule is not None else {}
                    kw["what"] = "prepared_dir" if cfg.prepared_dir else "store folder"
                    if spec.unit != "document":
                        kw["unit"] = spec.unit
                    rep = prepare_store(
                        cfg.corpus,
                        tokenizer,
                        target,
                        min_doc_tokens=spec.min_tokens,
                        max_doc_tokens=spec.max_tokens,
                        text_field=cfg.text_field,
                        txt_mode=cfg.txt_mode,
                        tokenizer_name=cfg.model,
                        show_progress=cfg.progress,
                        **kw,
                    )
                    log.info("prepared corpus:\n%s", rep.summary(spec.min_tokens))
        elif not _store_matches(target, spec, tokenizer, cfg.txt_mode):
            raise ConfigError(
                f"rank {info.rank} does not see the token store that rank 0 prepared in {target}: "
                "--out (and prepared_dir) must be on a file system that every process sees"
            )
        store = TokenStore(target)
    store.check_tokenizer(tokenizer, spec.min_tokens)
    if store.meta.get("unit", "document") != spec.unit:
        raise CorpusError(
            f"store {store.path} holds {store.meta.get('unit', 'document')}s, but this method trains on "
            f"{spec.unit}s; pass the raw corpus (it is prepared into <out>/prepared)"
        )
    return store


def _store_matches(target: Path, spec: StoreSpec, tokenizer: Any, txt_mode: str = "file") -> bool:
    """An existing store at target was prepared with these length settings, this tokenizer and this
    way of reading a single .txt (a store records `txt_mode` only when it is not "file")."""
    from sentkit.data.store import TokenStore, is_store, tokenizer_fingerprint

    if not is_store(target):
        return False
    meta = TokenStore(target).meta
    return bool(
        meta.get("min_doc_tokens") == spec.min_tokens
        and meta.get("max_doc_tokens") == spec.max_tokens
        and meta.get("unit", "document") == spec.unit
        and meta.get("txt_mode", "file") == txt_mode
        and meta.get("tokenizer_fingerprint") == tokenizer_fingerprint(tokenizer)
    )


def lr_lambda(cfg: TrainConfig, total: int) -> Callable[[int], float]:
    fn = SCHEDULES.get(cfg.schedule)
    return lambda s: fn(s, total, cut_frac=cfg.cut_frac, ratio=cfg.lr_ratio)


def too_few_units(recipe: Recipe, store: Any, n: int, cfg: TrainConfig, info: DistInfo) -> CorpusError:
    step = info.world_size * cfg.grad_accum
    fit = max(step, (n // step) * step) if n >= step else None
    fixes = [Fix({"batch_size": fit}, f"{fit} {recipe.unit_name}s a step")] if fit else []
    extra = recipe.more_units_fix(store, cfg.batch_size)
    if extra is not None:
        fixes.append(extra)
    return CorpusError(
        f"the corpus gives {n} usable {recipe.unit_name}s, fewer than batch_size={cfg.batch_size}", fixes=fixes
    )


# ----------------------------------------------------------------------------- the loop
def train(
    cfg: TrainConfig, recipe_cls: type[Recipe], *, stop_at: int | None = None, prepare_only: bool = False
) -> Path:
    """Train with `recipe_cls` on cfg.corpus; save an encoder (sentence-transformers layout, and
    the masked LM with its head) at cfg.out.

    `prepare_only`: take the output folder and do the one-off work (a vocabulary trained on the
    corpus, the token store), then return; a later run on the folder (`torchrun ...`, with or
    without --resume) starts training at once. `stop_at` ends the loop early after that step (as
    a kill would, after its checkpoint), for tests."""
    from sentkit.models.transformer import pick_device
    from sentkit.training.distributed import init_from_env

    # --- setup: device, processes, precision
    out = Path(cfg.out)
    device = pick_device(cfg.device)
    info = init_from_env(device.type, cfg.dist_timeout)
    if device.type == "cuda" and info.active:
        device = torch.device("cuda", info.local_rank)
        torch.cuda.set_device(device)
    precision = pick_precision(device, cfg.precision)
    if cfg.batch_size % (info.world_size * cfg.grad_accum):
        raise ConfigError(
            f"batch_size ({cfg.batch_size}) must be divisible by world size x grad_accum "
            f"({info.world_size} x {cfg.grad_accum})"
        )
    try:
        with contextlib.ExitStack() as stack:  # rank 0 holds the folder's lock and log until the end
            return _run(cfg, recipe_cls, out, device, info, precision, stack, stop_at, prepare_only)
    except RankFailed as e:  # another process stopped: one line, with its log and the checkpoint to resume from
        raise RankFailed(stopped_report(e, out), e.stopped, e.timed_out, e.doing) from None


def stopped_report(e: RankFailed, out: Path) -> str:
    """One line for a rank that stopped mid-run: which, its log, and the checkpoint --resume takes."""
    logs = [str(out / rank_log_name(r)) for r in e.stopped or []]
    if len(logs) == 1:
        where = f"its log: {logs[0]}"
    else:
        where = f"their logs: {', '.join(logs)}" if logs else f"the logs: {out / 'train*.log'}"
    last = last_checkpoint(out)
    resume = (
        f"resume with --resume (the last checkpoint: {last[0]}, step {last[1]})"
        if last is not None
        else "resume with --resume (no checkpoint was written yet: it starts from step 0)"
    )
    event = "did not answer in time" if e.timed_out else "stopped"
    return f"{ranks_text(e.stopped)} {event} while {e.doing or 'the run went on'} ({where}); {resume}"


def _claim(cfg: TrainConfig, recipe_cls: type[Recipe], out: Path, stack: contextlib.ExitStack) -> bool:
    """Rank 0: make the output folder ours (refused before anything is written, locked, a killed
    run's leftovers removed, logged to its train.log); returns whether to resume from a checkpoint."""
    claim(out, recipe_cls.name, cfg, dry_run=True)  # refuse before writing anything
    stack.enter_context(run_lock(out))
    prev = claim(out, recipe_cls.name, cfg)  # again, under the lock
    clean_stale(out)
    stack.enter_context(run_log(out))
    resuming = bool(cfg.resume and prev is not None and has_checkpoint(out))
    if cfg.resume and prev is not None and not resuming:
        if prev.get("status") == "prepared":
            log.info("starting the run prepared in %s from step 0", out)
        else:
            log.warning("%s holds a run that was stopped before its first checkpoint; starting from step 0", out)
    return resuming


def _run(
    cfg: TrainConfig,
    recipe_cls: type[Recipe],
    out: Path,
    device: torch.device,
    info: DistInfo,
    precision: str,
    stack: contextlib.ExitStack,
    stop_at: int | None,
    prepare_only: bool,
) -> Path:
    from tqdm.auto import tqdm

    from sentkit.models.hub import position_limit
    from sentkit.models.transformer import base_prompt_settings, save_st_directory

    sharded = cfg.distributed == "fsdp"  # FSDP: sharded model, optimizer and checkpoints (sentkit.training.fsdp)

    # --- rank 0 first: the output folder, and what only rank 0 makes (a vocabulary trained on the corpus)
    with main_first(info, cfg.prepare_timeout, "rank 0 prepared the run (prepare_timeout)") as plan:
        if info.is_main:
            plan["resuming"] = _claim(cfg, recipe_cls, out, stack)
            recipe_cls.prepare(cfg, out)
    if info.active:  # every process logs to its own file, in the folder that rank 0 has made ours
        import socket

        if not info.is_main:
            stack.enter_context(run_log(out, rank_log_name(info.rank)))
        log.info(
            "rank %d of %d: pid %d on %s, device %s",
            info.rank,
            info.world_size,
            os.getpid(),
            socket.gethostname(),
            device,
        )

    # --- model and tokenizer, every rank at once (random initialisation seeded by the run's seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        mlm_model, tokenizer = recipe_cls.load_model(cfg, out)
        limit = position_limit(mlm_model.config)
        recipe = recipe_cls(cfg, mlm_model, tokenizer, limit)
        module = recipe.module()
    # --- a frozen base under LoRA in half precision (base_precision): it computes in that precision; the adapters,
    # their gradients and optimizer state stay float32
    base = base_precision(cfg.base_precision, mlm_model, device, cfg.precision)
    if base != "fp32":
        half_base(module, base)
        precision = base
    log.info(run_line(cfg, recipe_cls.name, mlm_model.config, device.type, info.world_size))  # the memory plan
    module = module.to(device)

    # --- rank 0 first: the token store, and the checkpoint to resume from; then the other ranks
    # open the same store and read the checkpoint file that rank 0 chose
    with main_first(info, cfg.prepare_timeout, "rank 0 prepared the token store (prepare_timeout)") as chosen:
        store = open_or_prepare_store(cfg, tokenizer, recipe.store_spec(), out, info, rule=recipe.length_rule())
        state: dict[str, Any] | None = None
        if plan["resuming"] and not prepare_only:
            if info.is_main:  # the newest complete checkpoint (a torn one falls back to the one before)
                state, path = load_checkpoint(out, map_location="cpu", sharded=sharded)
                chosen.update(checkpoint=str(path), step=int(state["step"]))
            else:
                state = read_checkpoint(chosen["checkpoint"], map_location="cpu")
                if int(state["step"]) != chosen["step"]:
                    raise CheckpointError(
                        f"rank {info.rank} read step {state['step']} from {chosen['checkpoint']}, "
                        f"rank 0 step {chosen['step']}: the checkpoint changed while the run started"
                    )
    if prepare_only:
        if info.is_main:
            save_json(cfg, out / "train_config.json")
            write_run(out, recipe.name, cfg, status="prepared", step=0)
        return out
    module.train()
    module.token_budget = cfg.token_budget or (16384 if device.type == "cuda" else 1024)
    module.autocast = autocast_factory(device, precision)

    # --- data: this run's units, steps per epoch
    n_all = recipe.units(store)
    pool = corpus_subset(n_all, cfg.corpus_fraction)  # unit indices this run may use
    if cfg.corpus_fraction < 1:
        log.info("using %d of %d %ss (corpus_fraction=%g)", len(pool), n_all, recipe.unit_name, cfg.corpus_fraction)
    if len(pool) < cfg.batch_size:
        raise too_few_units(recipe, store, len(pool), cfg, info)
    steps_per_epoch = len(pool) // cfg.batch_size
    total = cfg.max_steps or cfg.epochs * steps_per_epoch
    step_units = StepUnits(len(pool), cfg.batch_size, cfg.seed)

    # --- processes: DDP around the module, or FSDP sharding it (before the optimizer: FSDP replaces the
    # parameters by their shards). Every collective from here to the end (DDP's start, the steps, the last
    # barrier) is watched: a rank that stops is reported by name (RankFailed, when the error leaves _run
    # through `stack`)
    step = 0
    stack.enter_context(watch_peers(info, lambda: f"training step {step + 1}" if step < total else "the run ended"))
    model = shard(module, info, device, precision) if sharded else wrap(module, info, device)

    # --- optimizer, schedule, loss scaling
    opt = make_optimizer(module, cfg.lr, cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg, total))
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    params = [p for p in module.parameters() if p.requires_grad]

    # --- resume (a file's tensors load on the CPU, load_state_dict moves them to the device; a sharded
    # checkpoint's shards load straight into the sharded model and optimizer)
    kept_tokens, kept_s, kept_cpu = 0, 0.0, 0.0  # tokens, loop seconds and CPU seconds before this process (a resume)
    if state is not None:
        restore(state, model, opt)
        sched.load_state_dict(state["scheduler"])
        if "scaler" in state:
            scaler.load_state_dict(state["scaler"])
        set_rng_state(state.get("rng", {}) or {"torch": None})
        step = int(state["step"])
        kept_tokens = int(state.get("progress", {}).get("tokens", 0))
        kept_s = float(state.get("progress", {}).get("seconds", 0.0))
        kept_cpu = float(state.get("progress", {}).get("cpu_seconds", 0.0))
        if info.is_main:
            log.info("resumed from %s at step %d of %d", chosen["checkpoint"], step, total)
        del state
    if info.is_main:
        save_json(cfg, out / "train_config.json")
        write_run(out, recipe.name, cfg, status="training", step=step)
    ctx = StepContext(recipe, model, cfg, device, info, scaler)
    metrics = MetricsLogger(out, cfg.logger, recipe.loss_names) if info.is_main else None
    local = cfg.batch_size // info.world_size

    # --- loop
    bar = tqdm(total=total, initial=step, desc=recipe.name, unit="step", disable=not (cfg.progress and info.is_main))
    t_start, c_start = time.perf_counter(), time.process_time()
    tokens_seen = units_seen = 0
    while step < total:
        units = pool[step_units(step)].tolist()
        batch = recipe.batch(store, units[info.rank * local : (info.rank + 1) * local], step)
        opt.zero_grad(set_to_none=True)
        m = forward_backward(ctx, batch, step)
        grad_norm = optimizer_step(params, opt, sched, scaler, cfg.max_grad_norm)
        step += 1
        tokens_seen += batch.tokens * info.world_size
        units_seen += cfg.batch_size
        if not math.isfinite(m["loss"]):
            raise FloatingPointError(
                f"loss became {m['loss']} at step {step}; lower lr (--set lr=...) or use --set precision=fp32"
            )
        bar.update(1)
        bar.set_postfix(loss=f"{m['loss']:.3f}", lr=f"{sched.get_last_lr()[0]:.2e}")
        if metrics is not None and (step % cfg.log_every == 0 or step == total or step == 1):
            el = time.perf_counter() - t_start
            metrics.log(
                {
                    "step": step,
                    **m,
                    "lr": float(sched.get_last_lr()[0]),
                    "grad_norm": grad_norm,
                    "tokens_per_s": tokens_seen / el,
                    "docs_per_s": units_seen / el,
                    "elapsed_s": el,
                }
            )
        if step % cfg.checkpoint_every == 0 or step == total:
            save_state(
                out,
                {
                    "scheduler": sched.state_dict(),
                    "scaler": scaler.state_dict(),
                    "rng": rng_state(),
                    "step": step,
                    "method": recipe.name,
                    "sampler": {"epoch": step // steps_per_epoch, "position": step % steps_per_epoch},
                    "config": to_dict(cfg),
                    "progress": {
                        "tokens": kept_tokens + tokens_seen,
                        "seconds": kept_s + time.perf_counter() - t_start,
                        "cpu_seconds": kept_cpu + time.process_time() - c_start,
                    },
                },
                model,
                opt,
                info,
                sharded,
            )
        whole = plain_module(model, info) if step in cfg.snapshots and step < total else None  # FSDP: a collective
        if whole is not None:  # rank 0: the encoder as it is now, beside the run
            save_st_directory(
                whole.mlm_model,
                tokenizer,
                out / SNAPSHOTS / f"step-{step}",
                max_length=limit,
                method=recipe.name,
                save_head=True,
                pooling=recipe.encoder_settings()["pooling"],
                **base_prompt_settings(cfg.model),
                normalize=base_normalizes(cfg.model),
                extra={
                    "base_model": cfg.model,
                    "steps": step,
                    "snapshot": {
                        "step": step,
                        "of": total,
                        "tokens_seen": kept_tokens + tokens_seen,
                        "seconds": round(kept_s + time.perf_counter() - t_start, 3),
                        "cpu_seconds": round(kept_cpu + time.process_time() - c_start, 3),
                    },
                },
                model_card=f"# A snapshot of a sentkit {recipe.name} run at step {step} of {total}\n\n"
                "The learning rate had not finished its schedule here: this is the run part-way, "
                "not a run of this length.\n",
            )
        if stop_at is not None and step >= stop_at:
            break
    bar.close()
    if metrics is not None:
        metrics.close()
    if info.active:
        import torch.distributed as dist

        dist.barrier()

    # --- save the encoder (sentence-transformers layout, masked LM with its head, config, card); under FSDP
    # every rank sends its shards to rank 0, which saves the whole model
    whole = plain_module(model, info) if step >= total else None
    if whole is not None:
        enc = recipe.encoder_settings()
        save_st_directory(
            whole.mlm_model,
            tokenizer,
            out,
            max_length=limit,
            method=recipe.name,
            save_head=True,
            extra={
                "base_model": cfg.model,
                "steps": step,
                **{k: v for k, v in enc.items() if k != "pooling"},
                # the steps the model kept, across resumes: tokens through the transformer, loop seconds
                "tokens_seen": kept_tokens + tokens_seen,
                "train_loop_seconds": round(kept_s + time.perf_counter() - t_start, 3),
                "train_loop_cpu_seconds": round(kept_cpu + time.process_time() - c_start, 3),
                "resumed_seconds": round(kept_s, 3),
                "resumed_cpu_seconds": round(kept_cpu, 3),  # the loop CPU of the processes it resumed from
            },
            model_card=model_card(recipe, step, store),
            pooling=enc["pooling"],
            **base_prompt_settings(cfg.model),  # a prompted base's prompts stay with what it became
            normalize=base_normalizes(cfg.model),  # and a base whose vectors are unit length keeps its Normalize
        )
        write_run(out, recipe.name, cfg, status="done", step=step)
    return out


def save_state(
    out: Path, state: dict[str, Any], model: torch.nn.Module, opt: Any, info: DistInfo, sharded: bool
) -> None:
    """Write a checkpoint of `state` with the model and optimizer: rank 0 alone writes the file of a
    run whose ranks hold whole copies; under FSDP every rank writes its shard (`save_sharded`)."""
    if sharded:
        save_sharded(out, state, model, opt, info)
    elif info.is_main:
        save_checkpoint(out, {"model": unwrap(model).state_dict(), "optimizer": opt.state_dict(), **state})


def base_normalizes(name_or_path: str) -> bool:
    """Whether the base is a sentence-transformers folder whose modules end in Normalize (unit-length
    vectors): the encoder trained from it keeps that module, as it keeps the base's prompts."""
    from sentkit.models.hub import resolve
    from sentkit.models.transformer import _read_st_settings

    return bool(name_or_path) and _read_st_settings(Path(resolve(name_or_path)))[2]


def model_card(recipe: Recipe, steps: int, store: Any) -> str:
    return (
        f"# sentkit {recipe.name} encoder\n\n{recipe.card(steps, store)}\n"
        "## Use\n\n```python\nimport sentkit\nvecs = sentkit.load('PATH').encode(['a sentence'])\n"
        "# or\nfrom sentence_transformers import SentenceTransformer\n"
        "vecs = SentenceTransformer('PATH').encode(['a sentence'])\n```\n\n"
        f"The directory also holds the masked LM with its head: `sentkit train --method declutr --model PATH` "
        f"continues from it.\n\nResolved training config: `train_config.json`.\n\n```json\n"
        f"{json.dumps(to_dict(recipe.cfg), indent=2)}\n```\n"
    )
