"""Training metrics to CSV (and TensorBoard). Append-only: a resumed run adds rows, never rewrites
the file, so a kill at any moment loses at most the row being written."""

from __future__ import annotations

import csv
import logging
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

COMMON_FIELDS = ("step", "loss", "lr", "grad_norm", "tokens_per_s", "docs_per_s", "elapsed_s")


# ----------------------------------------------------------------------------- metrics
class MetricsLogger:
    """Append rows to <out>/metrics.csv (and TensorBoard when asked and installed).

    A resumed run repeats the steps after its checkpoint; `read_metrics` keeps the latest row of
    each step."""

    def __init__(self, out: Path, kind: str, losses: tuple[str, ...] = ("contrastive", "mlm")) -> None:
        self.path = out / "metrics.csv"
        self.fields: tuple[str, ...] = (*COMMON_FIELDS[:2], *losses, *COMMON_FIELDS[2:])
        existing = _header(self.path)
        if existing is not None:
            self.fields = tuple(existing)  # keep the file's columns (new ones are dropped)
        torn = existing is not None and not _ends_with_newline(self.path)
        self.file = self.path.open("a", newline="", encoding="utf-8")
        if torn:  # a killed write left half a row: end it, so the next row starts on its own line
            self.file.write("\n")
        self.writer = csv.DictWriter(self.file, fieldnames=list(self.fields), extrasaction="ignore")
        if existing is None:
            self.writer.writeheader()
            self.file.flush()
        self.tb = None
        if kind == "tensorboard":
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(out / "tensorboard"))
            except ImportError:
                log.warning("tensorboard is not installed (pip install 'sentkit[tensorboard]'); logging to CSV only")

    def log(self, row: dict[str, float]) -> None:
        self.writer.writerow({k: row.get(k, "") for k in self.fields})
        self.file.flush()
        if self.tb is not None:
            for k, v in row.items():
                if k != "step":
                    self.tb.add_scalar(f"train/{k}", v, int(row["step"]))

    def close(self) -> None:
        self.file.close()
        if self.tb is not None:
            self.tb.close()


def _header(path: Path) -> list[str] | None:
    """The column names of an existing non-empty metrics file (a torn last line is fine)."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            first = next(csv.reader(f), None)
    except FileNotFoundError:
        return None
    return first if first and first[0] == "step" else None


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(0, 2)
        if f.tell() == 0:
            return True
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def _rows(path: str | Path) -> Iterator[dict[str, float]]:
    """The parsed rows of a metrics.csv in file order; a torn line of a killed write is skipped."""
    with Path(path).open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if None in r.values() or None in r:  # a torn row of a killed write
                continue
            try:
                row = {k: float(v) for k, v in r.items() if k and v not in ("", None)}
                int(row["step"])
            except (TypeError, ValueError, KeyError):
                continue
            yield row


def read_metrics(path: str | Path) -> list[dict[str, float]]:
    """Rows of a metrics.csv, one per step (the latest written wins), in step order; a torn last
    line of a killed write is skipped."""
    rows = {int(r["step"]): r for r in _rows(path)}
    return [rows[s] for s in sorted(rows)]


def read_segments(path: str | Path) -> list[list[dict[str, float]]]:
    """The rows of a metrics.csv in file order, split into the segments of each process that wrote
    them (a resumed run starts a new segment: its `elapsed_s` starts again from 0)."""
    segments: list[list[dict[str, float]]] = []
    last = float("inf")
    for row in _rows(path):
        el = row.get("elapsed_s")
        if el is None:
            continue
        if el < last or not segments:
            segments.append([])
        segments[-1].append(row)
        last = el
    return segments


def _at_step(rows: list[dict[str, float]], step: float, key: str) -> float:
    """A cumulative quantity (`key`) of one segment at `step`, linear between logged rows."""
    prev_s, prev_v = 0.0, 0.0
    for r in rows:
        if r["step"] >= step:
            span = r["step"] - prev_s
            return prev_v + (r[key] - prev_v) * ((step - prev_s) / span if span > 0 else 1.0)
        prev_s, prev_v = r["step"], r[key]
    return prev_v


def training_history(model_dir: str | Path) -> dict[str, float]:
    """What the final model's training took, across resumes: its steps, tokens and seconds of the
    training loop (each earlier process counted up to the step the next one resumed from, read from
    train.log), plus the seconds of steps that a resume did again (`redone_s`, older runs only).
    Empty when the folder has no metrics."""
    import re

    from sentkit.core.methods import read_marker

    d = Path(model_dir)
    if not (d / "metrics.csv").is_file():
        return {}
    segments = [s for s in read_segments(d / "metrics.csv") if s]
    if not segments:
        return {}
    log_text = (d / "train.log").read_text(encoding="utf-8", errors="replace") if (d / "train.log").is_file() else ""
    resumed = [int(m) for m in re.findall(r"resumed from .* at step (\d+)", log_text)]
    try:  # runs since the loop kept these counters in its checkpoints: exact
        marker = read_marker(d) or {}
    except (OSError, ValueError):
        marker = {}
    if "tokens_seen" in marker:
        return {
            "steps": int(marker.get("steps", segments[-1][-1]["step"])),
            "tokens": int(marker["tokens_seen"]),
            "seconds": float(marker["train_loop_seconds"]),
            "segments": len(resumed) + 1,
            "earlier_s": float(marker.get("resumed_seconds", 0.0)),
        }
    # older runs: reconstructed from the rows (a resumed process's clock starts again from 0)
    for seg in segments:
        for r in seg:
            r["tokens"] = r.get("tokens_per_s", 0.0) * r["elapsed_s"]
    seconds = segments[-1][-1]["elapsed_s"]
    tokens = segments[-1][-1]["tokens"]
    redone = 0.0
    for i, seg in enumerate(segments[:-1]):
        # the segment's steps up to the next one's checkpoint made it into the model; the rest were redone
        cut = resumed[i] if i < len(resumed) else seg[-1]["step"]
        used_s = _at_step(seg, cut, "elapsed_s")
        seconds += used_s
        tokens += _at_step(seg, cut, "tokens")
        redone += seg[-1]["elapsed_s"] - used_s
    return {
        "steps": int(segments[-1][-1]["step"]),
        "tokens": round(tokens),
        "seconds": round(seconds, 1),
        "segments": len(segments),
        "redone_s": round(redone, 1),
        "earlier_s": round(seconds - segments[-1][-1]["elapsed_s"], 1),
    }
