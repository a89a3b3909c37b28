"""What `evaluate` shows while it works: progress per task and overall.

On a terminal: an overall tqdm bar over the tasks (sentences encoded and taken from the cache so
far, elapsed time and ETA) and, under it, a bar over the sentences a task encodes (rate, ETA).
Elsewhere (a log file, a pipe): an INFO log line when a task starts encoding and then every
`interval` seconds, so a long run is never silent. The counts are kept in :attr:`EvalProgress.tasks`.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger("sentkit.evaluation")


@dataclass
class TaskCounts:
    """Unique sentences of one task: to encode now, from the disk cache, already encoded earlier
    in this run (another task shares them); encoded so far."""

    to_encode: int = 0
    from_cache: int = 0
    reused: int = 0
    encoded: int = 0


def _duration(s: float) -> str:
    n = round(s)
    return f"{n // 3600}h{n % 3600 // 60:02d}m" if n >= 3600 else (f"{n // 60}m{n % 60:02d}s" if n >= 60 else f"{n}s")


class EvalProgress:
    """Progress of one evaluation (see the module docstring). ``enabled=False`` shows nothing;
    ``tty`` (default: whether stderr is a terminal) picks bars or log lines."""

    def __init__(
        self, tasks: list[str], *, enabled: bool = True, tty: bool | None = None, interval: float = 30.0
    ) -> None:
        self.names = list(tasks)
        self.enabled = enabled
        self.tty = sys.stderr.isatty() if tty is None else tty
        self.interval = interval
        self.tasks: dict[str, TaskCounts] = {}
        self._current: str | None = None
        self._t0 = self._last = self._encode_t0 = time.monotonic()
        self._overall: Any = None
        self._bar: Any = None
        if enabled and self.tty:
            from tqdm.auto import tqdm

            self._overall = tqdm(
                total=len(self.names), desc="evaluate", unit=" task", file=sys.stderr, position=0, dynamic_ncols=True
            )

    # -- totals ---------------------------------------------------------------------------
    @property
    def encoded(self) -> int:
        return sum(c.encoded for c in self.tasks.values())

    @property
    def from_cache(self) -> int:
        return sum(c.from_cache for c in self.tasks.values())

    # -- events from the runner -------------------------------------------------------------
    def encode_start(self, task: str, to_encode: int, from_cache: int, reused: int) -> None:
        """A task's unique sentences are known: `to_encode` go to the encoder now."""
        self._current = task
        self.tasks[task] = TaskCounts(to_encode, from_cache, reused)
        self._encode_t0 = self._last = time.monotonic()
        if not self.enabled:
            return
        k = self.names.index(task) + 1 if task in self.names else len(self.tasks)
        if self.tty:
            from tqdm.auto import tqdm

            self._overall.set_description(f"evaluate ({k}/{len(self.names)}: {task})")
            self._set_postfix()
            if to_encode:
                self._bar = tqdm(
                    total=to_encode,
                    desc=f"{task} encode",
                    unit=" sent",
                    file=sys.stderr,
                    position=1,
                    leave=False,
                    dynamic_ncols=True,
                    unit_scale=True,
                )
        else:
            logger.info(
                "%s (%d/%d): %s sentences to encode, %s from the cache, %s already encoded "
                "(run so far: %s encoded, %s from the cache, %s)",
                task,
                k,
                len(self.names),
                f"{to_encode:,}",
                f"{from_cache:,}",
                f"{reused:,}",
                f"{self.encoded:,}",
                f"{self.from_cache:,}",
                _duration(time.monotonic() - self._t0),
            )

    def encoded_batch(self, n: int) -> None:
        """`n` more sentences of the current task were encoded."""
        if self._current is None:
            return
        c = self.tasks[self._current]
        c.encoded += n
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(n)
            self._set_postfix()
            return
        now = time.monotonic()
        if not self.tty and now - self._last >= self.interval and c.encoded < c.to_encode:
            self._last = now
            rate = c.encoded / max(now - self._encode_t0, 1e-9)
            logger.info(
                "%s: encoded %s of %s sentences (%.0f/s, about %s left)",
                self._current,
                f"{c.encoded:,}",
                f"{c.to_encode:,}",
                rate,
                _duration((c.to_encode - c.encoded) / max(rate, 1e-9)),
            )

    def task_end(self, task: str) -> None:
        """The task is done (scored or failed)."""
        self.tasks.setdefault(task, TaskCounts())
        self._current = None
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._overall is not None:
            self._overall.update(1)
            self._set_postfix()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._overall is not None:
            self._overall.close()
        self._bar = self._overall = None

    def _set_postfix(self) -> None:
        if self._overall is not None:
            self._overall.set_postfix_str(f"{self.encoded:,} encoded, {self.from_cache:,} from cache", refresh=False)
