"""Learning-rate schedules (pure functions of the step)."""

from __future__ import annotations


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
