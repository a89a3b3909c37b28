"""DeCLUTR continued pretraining (Giorgi et al. 2021): config, model wrapper, step, loop."""

from __future__ import annotations

import csv
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from sentkit.config import ConfigError, save_json, to_dict
from sentkit.methods import Method, register_method
from sentkit.models.hub import DEFAULT_MODEL, special_affixes
from sentkit.models.pooling import POOLINGS
from sentkit.objectives.contrastive import info_nce
from sentkit.objectives.mlm import IGNORE_INDEX, mask_tokens
from sentkit.objectives.spans import STRATEGIES, SpanSettings, sample_spans
from sentkit.registry import Registry
from sentkit.training.distributed import (
    DistInfo,
    all_reduce_sum,
    average_gradients,
    gather_with_grad,
)
from sentkit.training.schedule import slanted_triangular

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- config
@dataclass
class DeclutrConfig:
    """Every setting of a DeCLUTR run. Defaults are the paper's, except the offline base model."""

    corpus: str
    out: str
    model: str = DEFAULT_MODEL  # registry name, local directory or Hugging Face id
    from_scratch: bool = False  # random initialisation from the model's config
    text_field: str = "text"  # .jsonl / .parquet / HF dataset column
    max_doc_tokens: int | None = None  # split longer documents (books) into pieces of this size
    # spans
    num_anchors: int = 2
    num_positives: int = 2
    min_span_len: int = 32
    max_span_len: int = 512
    strategy: Literal["default", "adjacent", "subsuming"] = "default"
    # objective
    pooling: Literal["mean", "cls"] = "mean"
    temperature: float = 0.05
    contrastive: bool = True
    mlm: bool = True
    mlm_probability: float = 0.15
    # optimisation
    batch_size: int = 16  # documents per optimizer step (all ranks, all accumulation steps)
    grad_accum: int = 1  # micro-batches per step
    grad_cache: bool = False  # keep the negative pool = whole effective batch under accumulation
    lr: float = 5e-5
    weight_decay: float = 0.1
    cut_frac: float = 0.1
    lr_ratio: float = 32.0
    max_grad_norm: float = 1.0
    epochs: int = 1
    max_steps: int | None = None  # overrides epochs
    token_budget: int = 16384  # padded tokens per forward chunk (length bucketing)
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    device: str = "auto"
    seed: int = 0
    # bookkeeping
    checkpoint_every: int = 100
    log_every: int = 10
    logger: Literal["csv", "tensorboard"] = "csv"
    resume: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        if self.pooling not in POOLINGS:
            raise ConfigError(f"pooling must be one of {POOLINGS.names()}, got {self.pooling!r}")
        if not (self.contrastive or self.mlm):
            raise ConfigError("at least one of contrastive and mlm must be on")
        for name in ("num_anchors", "num_positives", "min_span_len", "batch_size", "grad_accum", "epochs", "checkpoint_every", "log_every", "token_budget"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.min_span_len > self.max_span_len:
            raise ConfigError(f"min_span_len ({self.min_span_len}) exceeds max_span_len ({self.max_span_len})")
        if self.batch_size % self.grad_accum:
            raise ConfigError(f"batch_size ({self.batch_size}) must be divisible by grad_accum ({self.grad_accum})")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError("max_steps must be at least 1")
        if not self.temperature > 0:
            raise ConfigError("temperature must be positive")
        if not 0 < self.mlm_probability < 1:
            raise ConfigError("mlm_probability must be in (0, 1)")

    def spans(self, max_len: int | None = None) -> SpanSettings:
        hi = min(self.max_span_len, max_len) if max_len else self.max_span_len
        return SpanSettings(self.num_anchors, self.num_positives, min(self.min_span_len, hi), hi, self.strategy)


# ----------------------------------------------------------------------------- model
def _bert_head(m: Any) -> Any:
    return m.cls


def _roberta_head(m: Any) -> Any:
    return m.lm_head


def _distilbert_head(m: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    def head(h: torch.Tensor) -> torch.Tensor:
        h = m.activation(m.vocab_transform(h))
        return m.vocab_projector(m.vocab_layer_norm(h))  # type: ignore[no-any-return]

    return head


# The MLM head of each architecture, applied to masked positions only (cheaper than full logits).
MLM_HEADS: Registry[Callable[[Any], Any]] = Registry("MLM head")
for _t in ("bert", "electra"):
    MLM_HEADS.add(_t, _bert_head)
for _t in ("roberta", "xlm-roberta", "camembert", "mpnet", "deberta-v2"):
    MLM_HEADS.add(_t, _roberta_head)
MLM_HEADS.add("distilbert", _distilbert_head)


class DeclutrModel(nn.Module):
    """A masked-LM transformer used as (encoder + pooling) and (MLM head on masked positions)."""

    def __init__(self, mlm_model: Any, pooling: str = "mean") -> None:
        super().__init__()
        self.mlm_model = mlm_model
        self.encoder = mlm_model.base_model
        self.pool = POOLINGS.get(pooling)
        mtype = getattr(mlm_model.config, "model_type", "")
        self.head = MLM_HEADS.get(mtype)(mlm_model) if mtype in MLM_HEADS else None

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, int]:
        """ids, mask, labels [n, L] -> (embeddings [n, d], summed MLM loss, masked count)."""
        if labels is not None and self.head is None:  # unknown architecture: full logits
            out = self.mlm_model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
            hidden = out.hidden_states[-1]
            sel = labels != IGNORE_INDEX
            mlm_sum = F.cross_entropy(out.logits[sel].float(), labels[sel], reduction="sum")
            return self.pool(hidden, mask), mlm_sum, int(sel.sum())
        hidden = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state  # [n, L, d]
        emb = self.pool(hidden, mask)  # [n, d]
        if labels is None:
            return emb, hidden.new_zeros(()), 0
        sel = labels != IGNORE_INDEX  # [n, L]
        if not bool(sel.any()):
            return emb, hidden.new_zeros(()), 0
        assert self.head is not None
        logits = self.head(hidden[sel])  # [m, V]
        return emb, F.cross_entropy(logits.float(), labels[sel], reduction="sum"), int(sel.sum())


# ----------------------------------------------------------------------------- data per step
@dataclass
class StepBatch:
    """Token ids (with special tokens) of one step's spans on this rank."""

    seqs: list[list[int]]  # anchors first (B*A), then positives (B*A*P)
    labels: list[list[int] | None]  # MLM labels per sequence (None = no MLM)
    num_anchors: int  # B*A
    num_positives: int  # P


def doc_order(num_docs: int, epoch: int, seed: int) -> np.ndarray:
    """The document permutation of an epoch (a pure function of seed and epoch)."""
    return np.random.default_rng([seed, epoch, 0xD0C]).permutation(num_docs)


def docs_for_step(step: int, num_docs: int, batch_size: int, seed: int) -> list[int]:
    """Global document indices of optimizer step `step` (drop-last epochs)."""
    per_epoch = num_docs // batch_size
    epoch, pos = divmod(step, per_epoch)
    order = doc_order(num_docs, epoch, seed)
    return [int(i) for i in order[pos * batch_size : (pos + 1) * batch_size]]


def build_step_batch(
    store: Any,
    doc_ids: list[int],
    step: int,
    cfg: DeclutrConfig,
    spans: SpanSettings,
    affixes: tuple[list[int], list[int]],
    mlm_info: tuple[int, int, set[int]] | None,
) -> StepBatch:
    """Sample spans (and MLM masks) for `doc_ids`. Randomness is seeded per (seed, step, doc), so a
    document's spans do not depend on which rank or micro-batch it lands in."""
    prefix, suffix = affixes
    anchors: list[list[int]] = []
    positives: list[list[int]] = []
    labels: list[list[int] | None] = []
    for d in doc_ids:
        rng = np.random.default_rng([cfg.seed, step, d, 0x5A])
        toks = store.doc(d)
        s = sample_spans(len(toks), spans, rng)
        for a, ps in zip(s.anchors, s.positives):
            ids = prefix + toks[a.start : a.end].tolist() + suffix
            if mlm_info is not None:
                mask_id, vocab, special = mlm_info
                gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
                t = torch.tensor(ids).unsqueeze(0)
                maskable = torch.ones_like(t, dtype=torch.bool)
                maskable[0, : len(prefix)] = False
                maskable[0, len(ids) - len(suffix) :] = False
                if special:
                    maskable &= ~torch.isin(t, torch.tensor(sorted(special)))
                masked, lab = mask_tokens(t, maskable, mask_token_id=mask_id, vocab_size=vocab, generator=gen, probability=cfg.mlm_probability)
                anchors.append(masked[0].tolist())
                labels.append(lab[0].tolist())
            else:
                anchors.append(ids)
                labels.append(None)
            positives.extend(prefix + toks[p.start : p.end].tolist() + suffix for p in ps)
    return StepBatch(anchors + positives, labels + [None] * len(positives), len(anchors), spans.num_positives)


def length_chunks(lengths: list[int], token_budget: int) -> list[list[int]]:
    """Group sequence indices, longest first, into chunks whose padded size fits `token_budget`."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    chunks: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        width = lengths[cur[0]] if cur else lengths[i]
        if cur and (len(cur) + 1) * width > token_budget:
            chunks.append(cur)
            cur = []
        cur.append(i)
    if cur:
        chunks.append(cur)
    return chunks


def _pad(seqs: list[list[int]], labels: list[list[int] | None], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    lab = torch.full((len(seqs), width), IGNORE_INDEX, dtype=torch.long)
    any_lab = False
    for i, (s, lb) in enumerate(zip(seqs, labels)):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
        if lb is not None:
            lab[i, : len(lb)] = torch.tensor(lb)
            any_lab = True
    return ids.to(device), mask.to(device), (lab.to(device) if any_lab else None)


# ----------------------------------------------------------------------------- one step
@dataclass
class StepContext:
    model: DeclutrModel
    cfg: DeclutrConfig
    pad_id: int
    device: torch.device
    dist: DistInfo
    autocast: Any  # () -> context manager


def _embed_chunks(ctx: StepContext, batch: StepBatch, idx: list[int], seed: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Forward a subset of the batch (chunked by length) -> (emb [len(idx), d] in idx order, mlm sum, count)."""
    lengths = [len(batch.seqs[i]) for i in idx]
    embs: list[torch.Tensor] = []
    order: list[int] = []
    mlm_sum: torch.Tensor = torch.zeros((), device=ctx.device)
    count = 0
    for c, chunk in enumerate(length_chunks(lengths, ctx.cfg.token_budget)):
        members = [idx[j] for j in chunk]
        ids, mask, lab = _pad([batch.seqs[i] for i in members], [batch.labels[i] for i in members], ctx.pad_id, ctx.device)
        with torch.random.fork_rng(devices=[ctx.device] if ctx.device.type == "cuda" else []):
            torch.manual_seed(seed * 1000 + c)  # dropout replayable (gradient caching)
            with ctx.autocast():
                e, s, k = ctx.model(ids, mask, lab if ctx.cfg.mlm else None)
        embs.append(e.float())
        order.extend(chunk)
        mlm_sum = mlm_sum + s
        count += k
    emb = torch.cat(embs)[torch.argsort(torch.tensor(order, device=ctx.device))]
    return emb, mlm_sum, count


def _contrastive(ctx: StepContext, emb: torch.Tensor, n_anchor: int, p: int) -> torch.Tensor:
    """emb [n_anchor + n_anchor*P, d] -> NT-Xent over all ranks' anchors and mean positives."""
    d = emb.shape[-1]
    anchors = emb[:n_anchor]  # [N, d]
    pos = emb[n_anchor:].view(n_anchor, p, d).mean(dim=1)  # [N, d]
    anchors = gather_with_grad(anchors, ctx.dist)
    pos = gather_with_grad(pos, ctx.dist)
    return info_nce(anchors, pos, ctx.cfg.temperature)


def _micro_indices(batch: StepBatch, group: list[int]) -> list[int]:
    """Sequence indices of the anchors in `group` (anchor numbers) and their positives."""
    p = batch.num_positives
    return group + [batch.num_anchors + a * p + j for a in group for j in range(p)]


def forward_backward(ctx: StepContext, batch: StepBatch, step: int) -> dict[str, float]:
    """Compute the loss of one optimizer step on this rank and accumulate gradients.

    Rank losses are scaled so that averaging gradients over ranks gives the gradient of one process
    on the whole batch. With grad_accum > 1, micro-batches either have their own negatives, or
    (grad_cache) share the whole batch's pool: embeddings are computed without a graph first, the
    loss's gradient wrt them is taken, and each micro-batch is re-run and back-propagated."""
    cfg, world = ctx.cfg, ctx.dist.world_size
    n_anchor, p = batch.num_anchors, batch.num_positives
    per_doc = cfg.num_anchors
    docs_here = n_anchor // per_doc
    micro_docs = max(1, docs_here // cfg.grad_accum) if cfg.grad_accum > 1 else docs_here
    groups = [list(range(s * per_doc, min(n_anchor, (s + micro_docs) * per_doc))) for s in range(0, docs_here, micro_docs)]
    # Global number of masked tokens normalises the MLM loss exactly across ranks and micro-batches.
    local_masked = sum(sum(1 for t in lb if t != IGNORE_INDEX) for lb in batch.labels if lb is not None)
    total_masked = max(1.0, all_reduce_sum(float(local_masked), ctx.dist, ctx.device)) if cfg.mlm else 1.0
    closs = torch.zeros(())
    mlm_total = 0.0

    if cfg.grad_cache and len(groups) > 1 and cfg.contrastive:
        with torch.no_grad():
            embs = [_embed_chunks(ctx, batch, _micro_indices(batch, g), step * 100 + k)[0] for k, g in enumerate(groups)]
        full = _assemble(embs, groups, n_anchor, p).requires_grad_(True)
        closs = _contrastive(ctx, full, n_anchor, p)
        closs.backward()  # the gather's backward already sums over ranks
        gfull = full.grad
        assert gfull is not None
        for k, g in enumerate(groups):
            idx = _micro_indices(batch, g)
            emb, msum, _ = _embed_chunks(ctx, batch, idx, step * 100 + k)
            surrogate = (emb * gfull[idx]).sum()
            if cfg.mlm:
                surrogate = surrogate + msum * world / total_masked
                mlm_total += float(msum.detach())
            surrogate.backward()
    else:
        for k, g in enumerate(groups):
            idx = _micro_indices(batch, g)
            emb, msum, _ = _embed_chunks(ctx, batch, idx, step * 100 + k)
            loss = emb.new_zeros(())
            if cfg.contrastive:
                cl = _contrastive(ctx, emb, len(g), p)
                loss = loss + cl / len(groups)
                closs = closs + cl.detach().cpu() / len(groups)
            if cfg.mlm:
                loss = loss + msum * world / total_masked
                mlm_total += float(msum.detach())
            loss.backward()
    mlm_loss = all_reduce_sum(mlm_total, ctx.dist, ctx.device) / total_masked if cfg.mlm else 0.0
    c = float(closs.detach()) if cfg.contrastive else 0.0
    return {"loss": c + mlm_loss, "contrastive": c, "mlm": mlm_loss}


def _assemble(embs: list[torch.Tensor], groups: list[list[int]], n_anchor: int, p: int) -> torch.Tensor:
    """Put micro-batch embeddings back into whole-batch order [n_anchor*(1+P), d]."""
    d = embs[0].shape[-1]
    full = embs[0].new_zeros((n_anchor * (1 + p), d))
    for e, g in zip(embs, groups):
        full[_micro_indices_static(g, n_anchor, p)] = e
    return full


def _micro_indices_static(group: list[int], n_anchor: int, p: int) -> list[int]:
    return group + [n_anchor + a * p + j for a in group for j in range(p)]


# ----------------------------------------------------------------------------- optimiser
def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """AdamW groups: no weight decay on biases and LayerNorm weights (as the paper)."""
    decay, no_decay = [], []
    seen: set[int] = set()
    for name, prm in model.named_parameters():
        if not prm.requires_grad or id(prm) in seen:
            continue
        seen.add(id(prm))
        if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name or "layernorm" in name.lower():
            no_decay.append(prm)
        else:
            decay.append(prm)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


# ----------------------------------------------------------------------------- checkpoints
CHECKPOINT = "checkpoint/state.pt"


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """torch.save to a temporary sibling, then rename: a kill never leaves a torn checkpoint."""
    from sentkit.io import atomic_path

    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def _rng_state() -> dict[str, Any]:
    st: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        st["cuda"] = torch.cuda.get_rng_state_all()
    return st


def _set_rng_state(st: dict[str, Any]) -> None:
    torch.set_rng_state(st["torch"])
    if "cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])


# ----------------------------------------------------------------------------- metrics
class MetricsLogger:
    """Append rows to <out>/metrics.csv (and TensorBoard when asked and installed)."""

    FIELDS = ("step", "loss", "contrastive", "mlm", "lr", "grad_norm", "tokens_per_s", "docs_per_s", "elapsed_s")

    def __init__(self, out: Path, kind: str, resume_step: int) -> None:
        self.path = out / "metrics.csv"
        rows: list[dict[str, str]] = []
        if resume_step and self.path.is_file():
            with self.path.open() as f:
                rows = [r for r in csv.DictReader(f) if int(r["step"]) <= resume_step]
        self.file = self.path.open("w", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=self.FIELDS)
        self.writer.writeheader()
        self.writer.writerows(rows)
        self.tb = None
        if kind == "tensorboard":
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(out / "tensorboard"))
            except ImportError:
                log.warning("tensorboard is not installed (pip install 'sentkit[tensorboard]'); logging to CSV only")

    def log(self, row: dict[str, float]) -> None:
        self.writer.writerow({k: row.get(k, "") for k in self.FIELDS})
        self.file.flush()
        if self.tb is not None:
            for k, v in row.items():
                if k != "step":
                    self.tb.add_scalar(f"train/{k}", v, int(row["step"]))

    def close(self) -> None:
        self.file.close()
        if self.tb is not None:
            self.tb.close()


# ----------------------------------------------------------------------------- the loop
def open_or_prepare_store(cfg: DeclutrConfig, tokenizer: Any, spans: SpanSettings, out: Path, info: DistInfo) -> Any:
    """Use cfg.corpus if it is a prepared store, else prepare it once into <out>/prepared."""
    import torch.distributed as dist

    from sentkit.data.store import TokenStore, is_store, prepare_store

    if is_store(cfg.corpus):
        store = TokenStore(cfg.corpus)
    else:
        target = out / "prepared"
        if info.is_main and not (is_store(target) and TokenStore(target).meta.get("min_doc_tokens") == spans.min_doc_tokens):
            rep = prepare_store(
                cfg.corpus, tokenizer, target, min_doc_tokens=spans.min_doc_tokens, max_doc_tokens=cfg.max_doc_tokens,
                text_field=cfg.text_field, tokenizer_name=cfg.model, show_progress=cfg.progress,
            )
            log.info("prepared corpus:\n%s", rep.summary(spans.min_doc_tokens))
        if info.active:
            dist.barrier()
        store = TokenStore(target)
    store.check_tokenizer(tokenizer, spans.min_doc_tokens)
    return store


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
    num_docs = len(store)
    if num_docs < cfg.batch_size:
        raise ConfigError(
            f"the corpus has {num_docs} usable documents, fewer than batch_size={cfg.batch_size}; lower batch_size "
            "or split long documents with --set max_doc_tokens=N"
        )
    steps_per_epoch = num_docs // cfg.batch_size
    total = cfg.max_steps or cfg.epochs * steps_per_epoch

    # --- optimizer and schedule
    opt = torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr)
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
        doc_ids = docs_for_step(step, num_docs, cfg.batch_size, cfg.seed)
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
