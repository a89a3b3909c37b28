"""LoRA adapters (Hu et al. 2022) through `peft` (the optional extra ``lora``): low-rank updates of a transformer's
linear layers trained in place of its weights, merged into the weights when the model is saved.

`add_lora` injects adapters into every linear layer of the model's base (not its LM / MLM head, not BERT's unused
pooler) and freezes every other parameter of the model; the model stays the same object of the same class, so every
recipe of the loop trains it unchanged, and its checkpoints hold the adapters beside the frozen weights (a resume
injects them again, then loads them). `merged` gives a copy with each adapter folded into its layer's weight
(W + B A alpha / r): a plain transformers model that sentence-transformers and `AutoModel` load, the training model
untouched. `default_rank` is what training uses unless told: LoRA of rank 16 (LLM2Vec's) for a decoder language
model over 1B parameters, none otherwise.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from sentkit.core.config import ConfigError

log = logging.getLogger(__name__)

DEFAULT_RANK = 16  # LLM2Vec's lora_r
LARGE_DECODER = 1_000_000_000  # parameters: above this a decoder trains with LoRA by default
SKIPPED = ["pooler"]  # linear layers of a base no recipe trains (BERT's pooler gets no gradient)


def check_rank(r: int | None) -> None:
    """A config's ``lora_r``: None (the default rank), 0 (no LoRA) or a positive rank."""
    if r is not None and r < 0:
        raise ConfigError(f"lora_r must be 0 (no LoRA) or a positive rank, got {r}")


def default_rank(model: Any) -> int:
    """The rank training uses when `lora_r` is not set: DEFAULT_RANK for a large decoder, else 0 (no LoRA)."""
    from sentkit.models.decoder import is_decoder_config

    big = sum(p.numel() for p in model.parameters()) > LARGE_DECODER
    return DEFAULT_RANK if big and is_decoder_config(model.config) else 0


def add_lora(model: Any, r: int, *, alpha: float | None = None, dropout: float = 0.05) -> int:
    """Inject LoRA adapters of rank `r` (scale alpha / r; alpha None: 2 r, LLM2Vec's 32 for 16) into every linear
    layer of `model`'s base model and freeze every other parameter; returns the number of trainable parameters."""
    try:
        from peft import LoraConfig, inject_adapter_in_model
    except ModuleNotFoundError:
        raise ConfigError("lora_r needs the peft package: pip install 'sentkit[lora]'") from None
    if r < 1:
        raise ConfigError(f"lora_r must be at least 1 to add adapters, got {r}")
    from transformers.pytorch_utils import Conv1D

    base = getattr(model, "base_model", model)
    # GPT-2's linear layers are Conv1D (weight [in, out]): peft must know, or it merges the transposed update
    conv = any(isinstance(m, Conv1D) for m in base.modules())
    skipped = [n for n in SKIPPED if any(name.split(".")[0] == n for name, _ in base.named_modules())]
    cfg = LoraConfig(
        r=r,
        lora_alpha=2 * r if alpha is None else alpha,  # type: ignore[arg-type]
        lora_dropout=dropout,
        target_modules="all-linear",
        exclude_modules=skipped or None,
        fan_in_fan_out=conv,
    )
    inject_adapter_in_model(cfg, base)
    trainable = 0
    for name, p in model.named_parameters():
        p.requires_grad_("lora_" in name)
        trainable += p.numel() if p.requires_grad else 0
    if not trainable:
        raise ConfigError(f"lora_r: the {model.config.model_type!r} model has no linear layer LoRA can adapt")
    log.info("LoRA rank %d: %d trainable parameters of %d", r, trainable, sum(p.numel() for p in model.parameters()))
    return trainable


def is_lora_layer(module: Any) -> bool:
    try:
        from peft.tuners.lora import LoraLayer
    except ModuleNotFoundError:  # no peft: no adapters
        return False
    return isinstance(module, LoraLayer)


def has_lora(model: Any) -> bool:
    return any(is_lora_layer(m) for m in model.modules())


def base_precision(setting: str, model: Any, device: Any, precision: str = "auto") -> str:
    """The precision the frozen base of `model` trains in (TrainConfig.base_precision): `auto` is bf16 for a decoder
    with adapters on a GPU that computes bf16 natively while `precision` is auto or bf16, else fp32; bf16 / fp16
    need adapters (a ConfigError without them)."""
    import torch

    from sentkit.models.decoder import is_decoder_config

    if setting == "fp32":
        return "fp32"
    if not has_lora(model):
        if setting == "auto":
            return "fp32"
        raise ConfigError(
            f"base_precision={setting} keeps a frozen base under LoRA adapters, and this run has none (lora_r unset "
            "adds them only to a decoder over 1B parameters): set lora_r (e.g. 16) or base_precision=fp32"
        )
    if setting != "auto":
        return setting
    native = device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False)
    return "bf16" if native and precision in ("auto", "bf16") and is_decoder_config(model.config) else "fp32"


def half_base(module: Any, precision: str) -> int:
    """Cast every frozen floating-point parameter of `module` (the base around its adapters) to `precision` (bf16,
    fp16) in place: the same Parameter objects, so tied and shared weights stay tied; trainable parameters (the
    adapters, a method's own layers) stay as they are. Returns the number of tensors cast."""
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    cast = 0
    for p in module.parameters():  # each shared tensor once
        if not p.requires_grad and p.is_floating_point() and p.dtype != dtype:
            p.data = p.data.to(dtype)
            cast += 1
    log.info("the frozen base in %s: %d tensors; the adapters stay float32", precision, cast)
    return cast


def merged(model: Any) -> Any:
    """`model` itself when it has no adapters; else a copy with every adapter merged into its layer's weight and the
    layer back to its plain class (the training model keeps its adapters). A half-precision base is upcast first, so
    the merge runs in float32 (each weight: the base's half-precision value, exactly, plus the adapters' update) and
    the copy is a float32 model."""
    import torch

    if not has_lora(model):
        return model
    out = copy.deepcopy(model)
    if any(p.is_floating_point() and p.dtype != torch.float32 for p in out.parameters()):
        out.float()
    for name, module in list(out.named_modules()):
        if is_lora_layer(module):
            module.merge()
            parent, _, child = name.rpartition(".")
            setattr(out.get_submodule(parent) if parent else out, child, module.get_base_layer())
    return out
