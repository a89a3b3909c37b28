"""Learning-rate schedules (pure functions of the step)."""

from __future__ import annotations

from collections.abc import Callable

from sentkit.core.registry import Registry


def slanted_triangular(step: int, total_steps: int, *, cut_frac: float = 0.1, ratio: float = 32.0) -> float:
    """Multiplier of the peak lr at `step` (0-based) for Howard & Ruder's slanted triangular schedule.

    Rises linearly for the first `cut_frac` of training, then decays linearly; the lowest value is
    1/ratio of the peak."""
    total = max(1, total_steps)
    cut = max(1, int(total * cut_frac))
    t = min(step, total)
    if t < cut:
        p = t / cut
    else:
        p = 1.0 - (t - cut) / max(1, total - cut)
    return (1.0 + p * (ratio - 1.0)) / ratio


def linear(step: int, total_steps: int, *, cut_frac: float = 0.0, ratio: float = 1.0) -> float:
    """Linear warm-up over `cut_frac` of the steps, then linear decay to 0 (BERT, SimCSE)."""
    total = max(1, total_steps)
    cut = int(total * cut_frac)
    t = min(step, total)
    if t < cut:
        return t / max(1, cut)
    return max(0.0, (total - t) / max(1, total - cut))


def constant(step: int, total_steps: int, *, cut_frac: float = 0.0, ratio: float = 1.0) -> float:
    """The peak lr throughout (TSDAE)."""
    return 1.0


SCHEDULES: Registry[Callable[..., float]] = Registry("lr schedule")
SCHEDULES.add("slanted_triangular", slanted_triangular)
SCHEDULES.add("linear", linear)
SCHEDULES.add("constant", constant)
