"""Shared by the benchmark scripts: real sentences, the data folder, machine facts."""

from __future__ import annotations

import os
import platform
import re
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    return Path(os.environ.get("SENTKIT_DATA", REPO.parent / "shared" / "data"))


def gutenberg_sentences(n: int, seed: int = 0, min_words: int = 3, max_words: int = 60) -> list[str]:
    """`n` real sentences from the Gutenberg corpus, sampled across books (seeded)."""
    books = sorted((data_dir() / "corpus" / "gutenberg").glob("*.txt"))
    rng = np.random.default_rng(seed)
    out: list[str] = []
    per_book = max(1, n // len(books) + 1)
    for b in rng.permutation(len(books)):
        text = " ".join(books[b].read_text(encoding="utf-8", errors="ignore").split())
        sents = [s for s in re.split(r"(?<=[.!?])\s+", text) if min_words <= len(s.split()) <= max_words]
        if sents:
            idx = rng.choice(len(sents), size=min(per_book, len(sents)), replace=False)
            out.extend(sents[i] for i in sorted(idx))
        if len(out) >= n:
            break
    return out[:n]


def matmul_gflops(size: int = 1024, reps: int = 20) -> float:
    """Measured float32 matmul rate of this machine (GFLOP/s) at the current thread count."""
    a = torch.randn(size, size)
    b = torch.randn(size, size)
    for _ in range(3):
        a @ b
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * size**3 * reps / (time.perf_counter() - t) / 1e9


def machine() -> str:
    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {time.strftime('%Y-%m-%d')}"
    )
