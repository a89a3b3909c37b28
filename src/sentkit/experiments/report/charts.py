"""The report's bar chart of each cell's averages (PNG, drawn with matplotlib)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def averages_chart(summary: dict[str, dict[str, tuple[float, float, int]]], avgs: list[str], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = list(summary)
    fig, ax = plt.subplots(figsize=(max(8.0, 0.5 * len(cells)), 5.5))
    width = 0.8 / max(1, len(avgs))
    for i, a in enumerate(avgs):
        xs = np.arange(len(cells)) + i * width
        ys = [summary[c].get(a, (np.nan, 0, 0))[0] for c in cells]
        es = [summary[c].get(a, (0, 0, 0))[1] for c in cells]
        ax.bar(xs, ys, width, yerr=es, label=a.split(":")[1], capsize=2)
    ax.set_xticks(np.arange(len(cells)) + 0.4 - width / 2, cells, rotation=60, ha="right", fontsize=8)
    vals = [summary[c][a][0] for c in cells for a in avgs if a in summary[c]]
    if vals:  # zoom in: the differences that matter are a few points
        ax.set_ylim(max(0.0, min(vals) - 5), max(vals) + 3)
    ax.set_ylabel("score (points)")
    ax.legend()
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110, metadata={"Software": None})  # no version stamp: same bytes on a rerun
    plt.close(fig)
