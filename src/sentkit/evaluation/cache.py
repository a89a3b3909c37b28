"""On-disk embedding cache keyed by a model fingerprint and the sentence text.

Layout: `<root>/<fingerprint>/shard-<time>-<n>.npz`, each shard holding `keys` (16-byte
blake2b digests of the sentences) and `emb` (float32 [n, dim]). New embeddings go to a new
shard written atomically, so concurrent or interrupted runs never corrupt the cache.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path

import numpy as np

from sentkit.io import atomic_open

logger = logging.getLogger(__name__)


def default_cache_root() -> Path:
    env = os.environ.get("SENTKIT_CACHE")
    return Path(env) if env else Path.cwd() / ".sentkit_cache" / "embeddings"


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class EmbeddingCache:
    """Sentence -> embedding store for one model fingerprint."""

    def __init__(self, root: str | Path, fingerprint: str) -> None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in fingerprint)[:120]
        self.dir = Path(root) / safe
        self._index: dict[bytes, tuple[int, int]] = {}
        self._shards: list[np.ndarray] = []
        self.dim: int | None = None
        self._load()

    def _load(self) -> None:
        if not self.dir.is_dir():
            return
        for f in sorted(self.dir.glob("shard-*.npz")):
            try:
                with np.load(f) as z:
                    keys, emb = z["keys"], z["emb"].astype(np.float32, copy=False)
            except Exception as e:  # a damaged shard is skipped, not fatal
                logger.warning("skipping unreadable cache shard %s: %s", f, e)
                continue
            if self.dim is not None and emb.shape[1] != self.dim:
                logger.warning("skipping cache shard %s: dim %d != %d", f, emb.shape[1], self.dim)
                continue
            self.dim = int(emb.shape[1])
            s = len(self._shards)
            self._shards.append(emb)
            for i, k in enumerate(keys):
                self._index[bytes(k)] = (s, i)
        if self._index:
            logger.info("embedding cache %s: %d sentences", self.dir, len(self._index))

    def __len__(self) -> int:
        return len(self._index)

    def lookup(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray | None]:
        """-> (found mask [n] bool, embeddings of the found ones [n_found, dim] or None)."""
        hits = [self._index.get(text_key(t)) for t in texts]
        found = np.array([h is not None for h in hits], dtype=bool)
        if not found.any():
            return found, None
        rows = [self._shards[h[0]][h[1]] for h in hits if h is not None]
        return found, np.stack(rows).astype(np.float32, copy=False)

    def add(self, texts: list[str], emb: np.ndarray) -> None:
        if not texts:
            return
        keys = np.array([np.frombuffer(text_key(t), dtype=np.uint8) for t in texts])
        self.dir.mkdir(parents=True, exist_ok=True)
        name = self.dir / f"shard-{time.time_ns()}-{len(texts)}.npz"
        with atomic_open(name, "wb") as f:
            np.savez(f, keys=keys, emb=emb.astype(np.float32))
        s = len(self._shards)
        self._shards.append(emb.astype(np.float32))
        self.dim = int(emb.shape[1])
        for i, t in enumerate(texts):
            self._index[text_key(t)] = (s, i)
