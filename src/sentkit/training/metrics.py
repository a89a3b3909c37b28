"""Training metrics to CSV (and TensorBoard)."""

from __future__ import annotations

import csv
import logging
from pathlib import Path

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- metrics
class MetricsLogger:
    """Append rows to <out>/metrics.csv (and TensorBoard when asked and installed)."""

    FIELDS = ("step", "loss", "contrastive", "mlm", "lr", "grad_norm", "tokens_per_s", "docs_per_s", "elapsed_s")

    def __init__(self, out: Path, kind: str, resume_step: int) -> None:
        self.path = out / "metrics.csv"
        rows: list[dict[str, str]] = []
        if resume_step and self.path.is_file():
            with self.path.open() as f:
                rows = [r for r in csv.DictReader(f) if int(r["step"]) <= resume_step]
        self.file = self.path.open("w", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=self.FIELDS)
        self.writer.writeheader()
        self.writer.writerows(rows)
        self.tb = None
        if kind == "tensorboard":
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(out / "tensorboard"))
            except ImportError:
                log.warning("tensorboard is not installed (pip install 'sentkit[tensorboard]'); logging to CSV only")

    def log(self, row: dict[str, float]) -> None:
        self.writer.writerow({k: row.get(k, "") for k in self.FIELDS})
        self.file.flush()
        if self.tb is not None:
            for k, v in row.items():
                if k != "step":
                    self.tb.add_scalar(f"train/{k}", v, int(row["step"]))

    def close(self) -> None:
        self.file.close()
        if self.tb is not None:
            self.tb.close()
