"""DeCLUTR continued pretraining (Giorgi et al. 2021): the training loop, phases in order."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sentkit.config import ConfigError, save_json, to_dict
from sentkit.methods import Method, register_method
from sentkit.models.hub import special_affixes
from sentkit.models.mlm import MLM_HEADS, DeclutrModel
from sentkit.objectives.spans import SpanSettings
from sentkit.training.batching import (
    StepBatch,
    build_step_batch,
    doc_order,
    docs_for_step,
    length_chunks,
)
from sentkit.training.checkpoint import CHECKPOINT, _rng_state, _set_rng_state, save_checkpoint
from sentkit.training.config import DeclutrConfig
from sentkit.training.distributed import (
    DistInfo,
    average_gradients,
)
from sentkit.training.metrics import MetricsLogger
from sentkit.training.schedule import slanted_triangular
from sentkit.training.step import StepContext, forward_backward, make_optimizer, param_groups

log = logging.getLogger(__name__)

__all__ = [
    "CHECKPOINT", "MLM_HEADS", "DeclutrConfig", "DeclutrModel", "MetricsLogger", "StepBatch", "StepContext",
    "build_step_batch", "doc_order", "docs_for_step", "forward_backward", "length_chunks", "load_trained",
    "make_optimizer", "param_groups", "save_checkpoint", "train",
]


# ----------------------------------------------------------------------------- the loop
def open_or_prepare_store(cfg: DeclutrConfig, tokenizer: Any, spans: SpanSettings, out: Path, info: DistInfo) -> Any:
    """Use cfg.corpus if it is a prepared store, else prepare it once into cfg.prepared_dir (default
    <out>/prepared); runs sharing a prepared_dir reuse the store when its settings match."""
    import torch.distributed as dist

    from sentkit.data.store import TokenStore, is_store, prepare_store
    from sentkit.io import file_lock

    if is_store(cfg.corpus):
        store = TokenStore(cfg.corpus)
    else:
        target = Path(cfg.prepared_dir) if cfg.prepared_dir else out / "prepared"
        if info.is_main:
            # runs sharing prepared_dir (several processes of an experiment grid) prepare it once
            with file_lock(target.with_name(f".{target.name}.lock")):
                if not _store_matches(target, cfg, spans):
                    rep = prepare_store(
                        cfg.corpus, tokenizer, target, min_doc_tokens=spans.min_doc_tokens,
                        max_doc_tokens=cfg.max_doc_tokens, text_field=cfg.text_field, tokenizer_name=cfg.model,
                        show_progress=cfg.progress,
                    )
                    log.info("prepared corpus:\n%s", rep.summary(spans.min_doc_tokens))
        if info.active:
            dist.barrier()
        store = TokenStore(target)
    store.check_tokenizer(tokenizer, spans.min_doc_tokens)
    return store


def _store_matches(target: Path, cfg: DeclutrConfig, spans: SpanSettings) -> bool:
    """An existing store at target was prepared with this run's document-length settings."""
    from sentkit.data.store import TokenStore, is_store

    if not is_store(target):
        return False
    meta = TokenStore(target).meta
    return bool(meta.get("min_doc_tokens") == spans.min_doc_tokens and meta.get("max_doc_tokens") == cfg.max_doc_tokens)


def corpus_subset(num_docs: int, fraction: float) -> np.ndarray:
    """A fixed share of the documents; nested across fractions (10 % is inside 30 %), independent of the seed."""
    order = np.random.default_rng(0x5EB5E7).permutation(num_docs)
    return np.sort(order[: max(1, round(num_docs * fraction))]) if fraction < 1 else np.arange(num_docs)


def _autocast_factory(device: torch.device, precision: str) -> tuple[Callable[[], Any], str]:
    import contextlib

    if precision == "auto":
        precision = "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    if precision == "fp32":
        return contextlib.nullcontext, precision
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return (lambda: torch.autocast(device_type=device.type, dtype=dtype)), precision


def train(cfg: DeclutrConfig, *, stop_at: int | None = None) -> Path:
    """Continue pretraining cfg.model on cfg.corpus with DeCLUTR; save an encoder at cfg.out.

    `stop_at` ends the loop early after that step (as a kill would, after its checkpoint), for tests."""
    from tqdm.auto import tqdm

    from sentkit.models.encoder import pick_device, save_st_directory
    from sentkit.models.hub import load_mlm
    from sentkit.training.distributed import init_from_env

    # --- setup: device, processes, precision, seeds
    out = Path(cfg.out)
    device = pick_device(cfg.device)
    info = init_from_env(device.type)
    if device.type == "cuda" and info.active:
        device = torch.device("cuda", info.local_rank)
        torch.cuda.set_device(device)
    autocast, precision = _autocast_factory(device, cfg.precision)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    torch.manual_seed(cfg.seed)
    if cfg.batch_size % (info.world_size * cfg.grad_accum):
        raise ConfigError(f"batch_size ({cfg.batch_size}) must be divisible by world size x grad_accum ({info.world_size} x {cfg.grad_accum})")
    out.mkdir(parents=True, exist_ok=True)
    ckpt_path = out / CHECKPOINT
    if ckpt_path.exists() and not cfg.resume:
        raise ConfigError(f"{out} already holds a checkpoint; pass --resume to continue it, or choose another --out")

    # --- model and tokenizer
    mlm_model, tokenizer = load_mlm(cfg.model, from_scratch=cfg.from_scratch)
    limit = int(getattr(mlm_model.config, "max_position_embeddings", 512) or 512)
    if mlm_model.config.model_type in ("roberta", "xlm-roberta", "camembert"):
        limit -= 2
    affixes = special_affixes(tokenizer)
    spans = cfg.spans(limit - len(affixes[0]) - len(affixes[1]))
    if spans.max_span_len < cfg.max_span_len:
        log.info("max_span_len lowered to %d to fit the model's %d positions", spans.max_span_len, limit)
    model = DeclutrModel(mlm_model, cfg.pooling).to(device)
    model.train()
    special = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    mlm_info = (int(tokenizer.mask_token_id), int(mlm_model.config.vocab_size), special) if cfg.mlm else None
    if cfg.mlm and tokenizer.mask_token_id is None:
        raise ConfigError(f"model {cfg.model!r} has no mask token; use --set mlm=false")

    # --- data
    store = open_or_prepare_store(cfg, tokenizer, spans, out, info)
    pool = corpus_subset(len(store), cfg.corpus_fraction)  # store indices this run may use
    num_docs = len(pool)
    if cfg.corpus_fraction < 1:
        log.info("using %d of %d documents (corpus_fraction=%g)", num_docs, len(store), cfg.corpus_fraction)
    if num_docs < cfg.batch_size:
        raise ConfigError(
            f"the corpus has {num_docs} usable documents, fewer than batch_size={cfg.batch_size}; lower batch_size "
            "or split long documents with --set max_doc_tokens=N"
        )
    steps_per_epoch = num_docs // cfg.batch_size
    total = cfg.max_steps or cfg.epochs * steps_per_epoch

    # --- optimizer and schedule
    opt = make_optimizer(model, cfg.lr, cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: slanted_triangular(s, total, cut_frac=cfg.cut_frac, ratio=cfg.lr_ratio))
    params = [p for p in model.parameters() if p.requires_grad]

    # --- resume
    step = 0
    if cfg.resume and ckpt_path.exists():
        state = torch.load(ckpt_path, map_location=device, weights_only=False)
        if state["config"]["seed"] != cfg.seed or state["config"]["batch_size"] != cfg.batch_size:
            raise ConfigError(f"{ckpt_path} was written with another seed or batch_size; resume with the saved config")
        model.mlm_model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        _set_rng_state(state["rng"])
        step = int(state["step"])
        log.info("resumed from %s at step %d of %d", ckpt_path, step, total)
    elif cfg.resume:
        log.warning("--resume given but %s does not exist; starting from step 0", ckpt_path)
    if info.is_main:
        save_json(cfg, out / "train_config.json")
    metrics = MetricsLogger(out, cfg.logger, step) if info.is_main else None
    ctx = StepContext(model, cfg, int(tokenizer.pad_token_id or 0), device, info, autocast)
    local_docs = cfg.batch_size // info.world_size

    # --- loop
    bar = tqdm(total=total, initial=step, desc="declutr", unit="step", disable=not (cfg.progress and info.is_main))
    t_start = time.perf_counter()
    tokens_seen = docs_seen = 0
    while step < total:
        doc_ids = [int(pool[i]) for i in docs_for_step(step, num_docs, cfg.batch_size, cfg.seed)]
        mine = doc_ids[info.rank * local_docs : (info.rank + 1) * local_docs]
        batch = build_step_batch(store, mine, step, cfg, spans, affixes, mlm_info)
        opt.zero_grad(set_to_none=True)
        m = forward_backward(ctx, batch, step)
        average_gradients(params, info)
        scaler.unscale_(opt)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm))
        scaler.step(opt)
        scaler.update()
        sched.step()
        step += 1
        tokens_seen += sum(len(s) for s in batch.seqs) * info.world_size
        docs_seen += cfg.batch_size
        if not math.isfinite(m["loss"]):
            raise FloatingPointError(f"loss became {m['loss']} at step {step}; lower lr or use fp32")
        bar.update(1)
        bar.set_postfix(loss=f"{m['loss']:.3f}", lr=f"{sched.get_last_lr()[0]:.2e}")
        if metrics is not None and (step % cfg.log_every == 0 or step == total or step == 1):
            el = time.perf_counter() - t_start
            metrics.log({"step": step, **m, "lr": float(sched.get_last_lr()[0]), "grad_norm": grad_norm,
                         "tokens_per_s": tokens_seen / el, "docs_per_s": docs_seen / el, "elapsed_s": el})
        if info.is_main and (step % cfg.checkpoint_every == 0 or step == total):
            save_checkpoint(ckpt_path, {
                "model": model.mlm_model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(), "scaler": scaler.state_dict(), "rng": _rng_state(),
                "step": step, "sampler": {"epoch": step // steps_per_epoch, "position": step % steps_per_epoch},
                "config": to_dict(cfg),
            })
        if stop_at is not None and step >= stop_at:
            break
    bar.close()
    if metrics is not None:
        metrics.close()
    if info.active:
        import torch.distributed as dist

        dist.barrier()

    # --- save the encoder (sentence-transformers layout + resolved config + model card)
    if info.is_main and step >= total:
        save_st_directory(
            model.mlm_model, tokenizer, out, pooling=cfg.pooling, max_length=limit,
            extra={"base_model": cfg.model, "steps": step}, model_card=model_card(cfg, step, store),
        )
    return out


def model_card(cfg: DeclutrConfig, steps: int, store: Any) -> str:
    return (
        f"# sentkit DeCLUTR encoder\n\n"
        f"Continued pretraining of `{cfg.model}` with the DeCLUTR objective (Giorgi et al., ACL 2021) "
        f"for {steps} steps on `{cfg.corpus}` ({len(store)} documents, {store.meta.get('num_tokens', 0):,} tokens).\n\n"
        f"- pooling: {cfg.pooling}; anchors {cfg.num_anchors}, positives {cfg.num_positives}, spans "
        f"{cfg.min_span_len}-{cfg.max_span_len} tokens ({cfg.strategy}); temperature {cfg.temperature}\n"
        f"- losses: contrastive={cfg.contrastive}, mlm={cfg.mlm}; batch {cfg.batch_size} documents, lr {cfg.lr}\n\n"
        "## Use\n\n```python\nimport sentkit\nvecs = sentkit.load('PATH').encode(['a sentence'])\n"
        "# or\nfrom sentence_transformers import SentenceTransformer\nvecs = SentenceTransformer('PATH').encode(['a sentence'])\n```\n\n"
        f"Resolved training config: `train_config.json`.\n\n```json\n{json.dumps(to_dict(cfg), indent=2)}\n```\n"
    )


def load_trained(path: Path) -> Any:
    from sentkit.models.encoder import TransformerEncoder

    return TransformerEncoder.from_pretrained(str(path))


register_method(Method("declutr", DeclutrConfig, train, load_trained, "DeCLUTR continued pretraining of a masked-LM transformer"))
