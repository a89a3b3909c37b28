"""How the report writes a score (mean ± std over seeds) and a cost in CPU-hours."""

from __future__ import annotations


def fmt(v: tuple[float, float, int] | None) -> str:
    if v is None:
        return "—"
    mean, std, n = v
    return f"{mean:.1f} ± {std:.1f}" if n > 1 else f"{mean:.1f}"


def fmt_hours(entry: tuple[float, bool] | None) -> str:
    if entry is None:
        return ""
    return f"{'~' if entry[1] else ''}{entry[0] / 3600:.2f}"
