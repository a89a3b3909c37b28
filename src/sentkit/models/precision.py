"""The arithmetic a transformer encodes in: ``--precision auto|fp32|bf16|fp16`` on every command that encodes,
``sentkit.load(name, precision=...)``.

Only the transformer runs in the chosen precision (its weights are cast, as sentence-transformers' ``torch_dtype``
does); pooling, Dense modules (whitening), normalisation and everything after them stay in float32, and
``encode`` always returns float32. Word-vector and Hill et al. models compute in float32 whatever is asked.

`resolve` turns a requested precision into the one used, `auto` by this rule (docs/evaluation.md#precision):

- a GPU: bf16 where it computes bf16 natively (Ampere and later), else fp16;
- a CPU: bf16 where it has AMX (Intel Sapphire Rapids and later: ``amx_bf16``), measured faster than float32 on
  this project's machine (docs/benchmarks.md); every other CPU fp32 (AVX512-BF16 alone is unmeasured here, and
  without native bf16 the conversions cost more than they save);
- evaluation (``purpose="evaluate"``) takes the same rule unless the committed score table
  (benchmarks/results/precision_scores.json) shows a task moving by more than `EVAL_TOLERANCE`: then `auto`
  keeps fp32 for evaluation (`EVAL_AUTO_KEEPS_FP32` says which, and why).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from sentkit.core.config import ConfigError, check_precision

INFERENCE_PRECISIONS = ("fp32", "bf16", "fp16")  # what `auto` resolves to
EVAL_TOLERANCE = 0.2  # points (x 100) a task may move in half precision before `auto` keeps fp32 for evaluation
# Measured (benchmarks/precision_scores.py, committed in benchmarks/results/precision_scores.json): whether some
# task of the SentEval presets or the local MTEB-style tasks moved by more than EVAL_TOLERANCE in bf16.
EVAL_AUTO_KEEPS_FP32 = True
EVAL_AUTO_WHY = (
    "in bf16 some tasks moved by more than 0.2 although the vectors agree with fp32's to a cosine of 0.9999: "
    "SentEval's classifiers (early stopping) amplify tiny differences, most in the prototyping preset "
    "(benchmarks/results/precision_scores.json, docs/benchmarks.md)"
)


def dtype_of(precision: str) -> Any:
    """The torch dtype of a resolved precision."""
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="ignore")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


@functools.cache
def cpu_has_amx_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices natively with AMX tiles (torch's own check, else /proc/cpuinfo)."""
    import torch

    check = getattr(torch.cpu, "_is_amx_tile_supported", None)
    try:
        if check is not None:
            return bool(check()) and bool(getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)())
    except Exception:  # a torch build without the check's kernel: read the flags
        pass
    return "amx_bf16" in _cpu_flags()


def resolve(precision: str | None, device: Any, *, purpose: str = "encode") -> str:
    """The precision a model on `device` (a torch.device or its type, "cpu" / "cuda" / ...) encodes in when
    `precision` is asked (None: fp32). `purpose` "evaluate" applies evaluation's own `auto` rule."""
    import torch

    precision = "fp32" if precision is None else str(precision)
    check_precision(precision)
    kind = device.type if isinstance(device, torch.device) else str(device).split(":")[0]
    if precision != "auto":
        if precision == "bf16" and kind == "cuda" and not torch.cuda.is_bf16_supported(including_emulation=False):
            raise ConfigError(
                "precision bf16 is not native on this GPU (it would be emulated, slowly); use --precision fp16 "
                "or auto (fp16 on this GPU)"
            )
        return precision
    if purpose == "evaluate" and EVAL_AUTO_KEEPS_FP32:
        return "fp32"
    if kind == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported(including_emulation=False) else "fp16"
    if kind == "cpu":
        return "bf16" if cpu_has_amx_bf16() else "fp32"
    return "fp32"  # mps, xpu, ...: not measured


def for_evaluation(precision: str | None, device: Any) -> tuple[str | None, str | None]:
    """What `sentkit evaluate --precision P` loads the model in, and a line to print when `auto` keeps fp32 there
    (None: nothing to say). Anything but `auto` passes through unchanged."""
    if precision != "auto":
        return precision, None
    used = resolve("auto", device, purpose="evaluate")
    if EVAL_AUTO_KEEPS_FP32 and used == "fp32" and resolve("auto", device) != "fp32":
        why = f"--precision auto keeps fp32 for evaluation: {EVAL_AUTO_WHY}"
        return used, f"{why}; pass --precision bf16 to use it anyway"
    return used, None


def auto_rule() -> str:
    """What `auto` picks here, in words (for --help-style messages and the report)."""
    return (
        f"auto: bf16 on a GPU with native bf16, else fp16; on a CPU bf16 where it has AMX (here: "
        f"{'yes' if cpu_has_amx_bf16() else 'no'}), else fp32"
        + ("; evaluation keeps fp32 (" + EVAL_AUTO_WHY + ")" if EVAL_AUTO_KEEPS_FP32 else "")
    )
