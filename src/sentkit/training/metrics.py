"""Training metrics to CSV (and TensorBoard). Append-only: a resumed run adds rows, never rewrites
the file, so a kill at any moment loses at most the row being written."""

from __future__ import annotations

import csv
import logging
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


def read_metrics(path: str | Path) -> list[dict[str, float]]:
    """Rows of a metrics.csv, one per step (the latest written wins), in step order; a torn last
    line of a killed write is skipped."""
    rows: dict[int, dict[str, float]] = {}
    with Path(path).open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if None in r.values() or None in r:  # a torn row of a killed write
                continue
            try:
                step = int(r["step"])
                rows[step] = {k: float(v) for k, v in r.items() if k and v not in ("", None)}
            except (TypeError, ValueError, KeyError):
                continue
    return [rows[s] for s in sorted(rows)]
