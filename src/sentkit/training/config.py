"""Settings every transformer method shares (validated on construction); each method's config
subclasses `TrainConfig` with its own fields."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from sentkit.core.config import PRECISIONS, ConfigError, check_precision
from sentkit.core.registry import suggest
from sentkit.models.hub import DEFAULT_MODEL
from sentkit.models.pooling import POOLINGS, load_with, saveable_poolings

log = logging.getLogger(__name__)

SCHEDULES = ("slanted_triangular", "linear", "constant")
DISTRIBUTED = ("ddp", "fsdp")  # how several processes (torchrun) share the model: sentkit.training.fsdp


# ----------------------------------------------------------------------------- config
@dataclass
class TrainConfig:
    """What the one training loop needs, whatever the method. Defaults are DeCLUTR's paper settings
    except the offline base model; each method overrides its own defaults."""

    corpus: str
    out: str
    model: str = DEFAULT_MODEL  # registry name, local directory or Hugging Face id
    from_scratch: bool = False  # random initialisation from the model's config
    text_field: str = "text"  # .jsonl / .parquet / HF dataset column
    txt_mode: Literal["file", "lines"] = (
        "file"  # a single .txt corpus: one document, or one per line (DeCLUTR's format)
    )
    corpus_fraction: float = 1.0  # train on this share of the usable units (data-size studies)
    prepared_dir: str | None = None  # where to prepare (or reuse) the token store; None: <out>/prepared
    pooling: str = "mean"  # a saveable pooling of sentkit.models.pooling: mean, cls, mean+max, last-token, ...
    attention: str | None = None  # a decoder's attention: causal or bidirectional (None: the model's own)
    # LoRA adapters (sentkit.models.lora; extra `lora`), merged on export. None: rank 16 for a decoder over 1B
    # parameters, else none; 0: none
    lora_r: int | None = None
    lora_alpha: float | None = None  # None: 2 x lora_r
    lora_dropout: float = 0.05
    # the frozen base under LoRA: auto = bf16 for a decoder on a GPU with native bf16 (precision auto or bf16), else
    # fp32; bf16 / fp16 need adapters (the adapters and their optimizer state stay float32; saved merged in float32)
    base_precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    gradient_checkpointing: bool = False  # recompute each layer's activations in the backward pass (less memory)
    # optimisation
    batch_size: int = 16  # units (documents, texts, sequences) per optimizer step, all ranks and micro-batches
    grad_accum: int = 1  # micro-batches per step
    grad_cache: bool = False  # contrastive methods: one negative pool over the whole step under accumulation
    lr: float = 5e-5
    weight_decay: float = 0.1
    schedule: Literal["slanted_triangular", "linear", "constant"] = "slanted_triangular"
    cut_frac: float = 0.1  # share of steps spent warming up (slanted triangular, linear)
    lr_ratio: float = 32.0  # peak / lowest lr (slanted triangular)
    max_grad_norm: float = 1.0
    epochs: int = 1
    max_steps: int | None = None  # overrides epochs
    token_budget: int | None = None  # padded tokens per forward chunk; None: 1024 on CPU, 16384 on GPU
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    device: str = "auto"
    seed: int = 0
    # several processes (torchrun): ddp (a whole copy of the model on each) or fsdp (each holds a shard of every
    # parameter, gradient and optimizer state; sentkit.training.fsdp). Not resume-safe: the checkpoints differ (a
    # file, or a sharded folder)
    distributed: Literal["ddp", "fsdp"] = "ddp"
    dist_timeout: float = 1800.0  # seconds a collective of a training step may wait for another process
    prepare_timeout: float = 86400.0  # seconds the other processes wait while rank 0 prepares (tokenizer, store)
    # bookkeeping (may change on --resume)
    checkpoint_every: int = 100
    snapshots: list[int] = dataclasses.field(default_factory=list)  # steps at which the encoder is also saved aside
    log_every: int = 10
    logger: Literal["csv", "tensorboard"] = "csv"
    resume: bool = False
    overwrite: bool = False  # replace an earlier sentkit run in `out`
    allow_config_change: bool = False  # --resume with settings that differ from the checkpoint's
    progress: bool = True

    # Keys that only change how a run is watched or saved, never what it computes.
    RESUME_SAFE: ClassVar[frozenset[str]] = frozenset(
        {
            "resume",
            "overwrite",
            "allow_config_change",
            "progress",
            "log_every",
            "logger",
            "checkpoint_every",
            "device",
            "dist_timeout",
            "prepare_timeout",
            "snapshots",
            "gradient_checkpointing",  # the same gradients in less memory: a run out of memory may resume with it
        }
    )
    POSITIVE_INTS: ClassVar[tuple[str, ...]] = ("batch_size", "grad_accum", "epochs", "checkpoint_every", "log_every")

    def __post_init__(self) -> None:
        if self.pooling not in saveable_poolings():
            why = f" (a folder cannot be saved with it; {load_with(self.pooling)})" if self.pooling in POOLINGS else ""
            hint = "" if why else suggest(self.pooling, saveable_poolings())
            raise ConfigError(f"pooling must be one of {saveable_poolings()}, got {self.pooling!r}{why}.{hint}")
        if self.attention is not None:
            from sentkit.models.decoder import check_attention

            check_attention(self.attention)
        from sentkit.models.lora import check_rank

        check_rank(self.lora_r)
        if self.lora_alpha is not None and not self.lora_alpha > 0:
            raise ConfigError(
                f"lora_alpha must be positive (the adapters' scale is lora_alpha / lora_r), got {self.lora_alpha}"
            )
        check_precision(self.precision)
        check_base_precision(self.base_precision, self.precision, self.lora_r)
        if not 0 <= self.lora_dropout < 1:
            raise ConfigError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if self.txt_mode not in ("file", "lines"):
            raise ConfigError(f"txt_mode must be 'file' or 'lines', got {self.txt_mode!r}")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"schedule must be one of {list(SCHEDULES)}, got {self.schedule!r}")
        for name in self.POSITIVE_INTS:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if any(not isinstance(k, int) or k < 1 for k in self.snapshots):
            raise ConfigError(f"snapshots must be steps (positive integers), got {self.snapshots!r}")
        if self.batch_size % self.grad_accum:
            raise ConfigError(f"batch_size ({self.batch_size}) must be divisible by grad_accum ({self.grad_accum})")
        if self.token_budget is not None and self.token_budget < 1:
            raise ConfigError("token_budget must be at least 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError("max_steps must be at least 1")
        if not 0 < self.corpus_fraction <= 1:
            raise ConfigError(f"corpus_fraction must be in (0, 1], got {self.corpus_fraction}")
        for name in ("dist_timeout", "prepare_timeout"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be a positive number of seconds, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ConfigError(f"lr must be positive, got {self.lr}")
        if not 0 <= self.cut_frac < 1:
            raise ConfigError(f"cut_frac must be in [0, 1), got {self.cut_frac}")
        if self.lr_ratio < 1:
            raise ConfigError(f"lr_ratio must be at least 1, got {self.lr_ratio}")
        check_distributed(self.distributed, self.precision, self.lora_r)
        if self.overwrite and self.resume:
            raise ConfigError("--overwrite and --resume contradict each other: pick one")


def check_distributed(distributed: str, precision: str, lora_r: int | None) -> None:
    """`distributed` is ddp or fsdp; fsdp refuses what it does not support (sentkit.training.fsdp): LoRA adapters,
    and fp16, whose loss scaler would see only one rank's gradient shard."""
    if distributed not in DISTRIBUTED:
        hint = suggest(distributed, list(DISTRIBUTED))
        raise ConfigError(f"distributed must be one of {', '.join(DISTRIBUTED)}, got {distributed!r}.{hint}")
    if distributed != "fsdp":
        return
    if lora_r:
        raise ConfigError(
            f"distributed=fsdp does not support LoRA adapters (lora_r={lora_r}): set lora_r=0, or distributed=ddp"
        )
    if precision == "fp16":
        raise ConfigError(
            "distributed=fsdp does not support precision=fp16 (its loss scaler sees one rank's gradient shard): "
            "set precision=bf16 or fp32, or distributed=ddp"
        )


def check_base_precision(base_precision: str, precision: str, lora_r: int | None) -> None:
    """`base_precision` is a precision; a half-precision base needs adapters and computes in its own precision."""
    if base_precision not in PRECISIONS:
        raise ConfigError(
            f"base_precision must be one of {', '.join(PRECISIONS)}, got {base_precision!r}."
            f"{suggest(base_precision, list(PRECISIONS))}"
        )
    if base_precision in ("bf16", "fp16") and lora_r == 0:
        raise ConfigError(
            f"base_precision={base_precision} keeps a frozen base under LoRA adapters, and lora_r=0 trains every "
            "weight (full fine-tuning of a half-precision base is not supported): set lora_r (e.g. 16) or "
            "base_precision=fp32"
        )
    if base_precision in ("bf16", "fp16") and precision not in ("auto", base_precision):
        raise ConfigError(
            f"base_precision={base_precision} computes in {base_precision}, not precision={precision}: "
            f"set precision=auto (or {base_precision}), or base_precision=fp32"
        )


def config_diff(saved: dict[str, Any], current: Any) -> list[str]:
    """Keys whose values differ between a run's saved config and `current` (a config dataclass),
    ignoring the bookkeeping keys a resume may change; each entry reads `key: saved -> current`. A key
    the saved config lacks (added to the method since the run started) that `current` holds at its
    default is not a change: the run trained as that default says."""
    now = dataclasses.asdict(current)
    defaults: dict[str, Any] = {}
    for f in dataclasses.fields(current):
        if f.default is not dataclasses.MISSING:
            defaults[f.name] = f.default
        elif callable(f.default_factory):
            defaults[f.name] = f.default_factory()
    keys = sorted((set(saved) | set(now)) - set(getattr(current, "RESUME_SAFE", TrainConfig.RESUME_SAFE)))
    return [
        f"{k}: {saved.get(k, '(absent)')!r} -> {now.get(k, '(absent)')!r}"
        for k in keys
        if saved.get(k) != now.get(k) and not (k not in saved and k in defaults and now.get(k) == defaults[k])
    ]
