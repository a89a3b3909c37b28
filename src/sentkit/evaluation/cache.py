"""On-disk embedding cache keyed by a model fingerprint and the sentence text.

Layout: `<root>/<fingerprint>/shard-<time>-<pid>-<n>.npz`, each shard holding `keys` (16-byte
blake2b digests of the sentences, uint8 [n, 16]) and `emb` (float32 [n, dim]). New embeddings go
to a new shard written atomically, so concurrent or interrupted (even kill -9) runs never leave a
torn shard under its final name; the temporaries of a killed write are removed at the next start.

Nothing read from the cache is trusted blindly: a shard that cannot be read (truncated, garbage
bytes: the zip CRC fails), has the wrong dtype, keys that do not match its rows, or NaN/inf is
discarded with a warning. A shard is also spot-checked against the encoder before its rows are
used (see :meth:`EmbeddingCache.unverified`): one of its sentences is encoded again, and a shard
of another dimension or with other values (a changed model under the same fingerprint) is
discarded, so its sentences are encoded afresh. A cache folder that cannot be written is read
but not written, with one warning.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
import zipfile
from pathlib import Path

import numpy as np

from sentkit.core.errors import SentkitError
from sentkit.core.identity import cache_folder_name as folder_name
from sentkit.core.io import atomic_open, cache_writable

logger = logging.getLogger(__name__)

KEY_BYTES = 16


def default_cache_root() -> Path:
    env = os.environ.get("SENTKIT_CACHE")
    return Path(env) if env else Path.cwd() / ".sentkit_cache" / "embeddings"


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=KEY_BYTES).digest()


class ShardError(SentkitError, ValueError):
    """A cache shard that cannot be used; the message says why."""


def read_shard(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(keys uint8 [n, 16], emb float32 [n, dim]) of a shard, fully read and checked; ShardError
    (or OSError for a file the OS will not give) when it is damaged."""
    try:
        with np.load(path, allow_pickle=False) as z:
            keys, emb = np.asarray(z["keys"]), np.asarray(z["emb"])
    except OSError as e:
        if e.errno is not None:
            raise  # permission denied and the like: not the shard's fault
        raise ShardError(f"unreadable ({e})") from None
    except (ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        raise ShardError(f"unreadable ({type(e).__name__}: {e})") from None
    if keys.dtype != np.uint8 or keys.ndim != 2 or keys.shape[1] != KEY_BYTES:
        raise ShardError(f"keys are {keys.dtype} {keys.shape}, not uint8 [n, {KEY_BYTES}]")
    if emb.dtype != np.float32 or emb.ndim != 2 or emb.shape[1] == 0:
        raise ShardError(f"embeddings are {emb.dtype} {emb.shape}, not float32 [n, dim]")
    if emb.shape[0] != keys.shape[0]:
        raise ShardError(f"{keys.shape[0]} keys for {emb.shape[0]} embeddings")
    tail = path.stem.rsplit("-", 1)[-1]
    if tail.isdigit() and int(tail) != keys.shape[0]:
        raise ShardError(f"{keys.shape[0]} rows, its name says {tail}")
    if not np.isfinite(emb).all():
        raise ShardError("embeddings contain NaN or inf")
    return keys, emb


def agreement(fresh: np.ndarray, cached: np.ndarray) -> str | None:
    """None when a cached vector matches the encoder's fresh one (cosine >= 0.999 and norms within
    1%, both zero counts as a match); else why not."""
    if fresh.shape != cached.shape:
        return f"dim {cached.shape[-1]}, the encoder gives {fresh.shape[-1]}"
    nf, nc = float(np.linalg.norm(fresh)), float(np.linalg.norm(cached))
    if max(nf, nc) < 1e-12:
        return None
    cos = float(fresh @ cached) / max(nf * nc, 1e-30)
    if cos >= 0.999 and abs(nf - nc) <= 0.01 * max(nf, nc):
        return None
    return f"its vectors differ from the encoder's (cosine {cos:.4f}, norms {nc:.4g} vs {nf:.4g})"


class EmbeddingCache:
    """Sentence -> embedding store for one model fingerprint."""

    def __init__(self, root: str | Path, fingerprint: str) -> None:
        self.dir = Path(root) / folder_name(fingerprint)
        self._index: dict[bytes, tuple[int, int]] = {}
        self._shards: list[np.ndarray | None] = []  # None: discarded
        self._paths: list[Path | None] = []  # None: written this run (already checked)
        self._verified: set[int] = set()
        self.discarded: dict[str, str] = {}  # shard file -> why
        self.writable = cache_writable(self.dir, what="embedding cache", logger=logger)
        self._load()

    def _load(self) -> None:
        try:
            files = sorted(self.dir.glob("shard-*.npz")) if self.dir.is_dir() else []
        except OSError as e:
            logger.warning("cannot list the embedding cache %s (%s); not using it", self.dir, e)
            return
        for f in files:
            try:
                keys, emb = read_shard(f)
            except ShardError as e:
                self._discard_file(f, str(e))
                continue
            except OSError as e:
                logger.warning("skipping cache shard %s: %s", f, e.strerror or e)
                continue
            self._add_shard(keys, emb, f)
        if self._index:
            logger.info("embedding cache %s: %d sentences", self.dir, len(self._index))

    def _add_shard(self, keys: np.ndarray, emb: np.ndarray, path: Path | None) -> int:
        s = len(self._shards)
        self._shards.append(emb)
        self._paths.append(path)
        for i, k in enumerate(keys):
            self._index[bytes(k)] = (s, i)
        return s

    def _discard_file(self, f: Path, why: str) -> None:
        """Warn, and delete a damaged shard (when the folder is writable) so that it is not met again."""
        self.discarded[str(f)] = why
        removed = False
        if self.writable:
            try:
                f.unlink()
                removed = True
            except OSError:
                pass
        logger.warning(
            "embedding cache: discarding shard %s: %s%s; its sentences will be encoded again",
            f,
            why,
            " (deleted)" if removed else "",
        )

    def __len__(self) -> int:
        return len(self._index)

    def unverified(self, texts: list[str]) -> dict[int, str]:
        """For each shard holding some of `texts` and not checked against the encoder yet, one of
        those texts (to encode again and pass to :meth:`settle`)."""
        out: dict[int, str] = {}
        for t in texts:
            hit = self._index.get(text_key(t))
            if hit is not None and hit[0] not in self._verified and hit[0] not in out:
                out[hit[0]] = t
        return out

    def vector(self, text: str) -> np.ndarray:
        s, i = self._index[text_key(text)]
        emb = self._shards[s]
        assert emb is not None
        return emb[i]

    def settle(self, shard: int, fresh: np.ndarray, text: str) -> None:
        """Keep `shard` if its vector of `text` agrees with the encoder's `fresh` one, else discard it."""
        why = agreement(fresh, self.vector(text))
        if why is None:
            self._verified.add(shard)
            return
        path = self._paths[shard]
        self._shards[shard] = None
        self._index = {k: v for k, v in self._index.items() if v[0] != shard}
        if path is not None:
            self._discard_file(path, why)

    def lookup(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray | None]:
        """-> (found mask [n] bool, embeddings of the found ones [n_found, dim] or None)."""
        hits = [self._index.get(text_key(t)) for t in texts]
        found = np.array([h is not None for h in hits], dtype=bool)
        if not found.any():
            return found, None
        rows = [self._shards[h[0]][h[1]] for h in hits if h is not None]  # type: ignore[index]
        return found, np.stack(rows).astype(np.float32, copy=False)

    def add(self, texts: list[str], emb: np.ndarray) -> None:
        """Store new embeddings (in memory always; on disk as a new shard when the folder is writable)."""
        if not texts:
            return
        emb = np.ascontiguousarray(emb, dtype=np.float32)
        keys = np.array([np.frombuffer(text_key(t), dtype=np.uint8) for t in texts])
        self._verified.add(self._add_shard(keys, emb, None))
        if not self.writable:
            return
        name = self.dir / f"shard-{time.time_ns()}-{os.getpid()}-{len(texts)}.npz"
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            with atomic_open(name, "wb") as f:
                np.savez(f, keys=keys, emb=emb)
        except OSError as e:
            from sentkit.core.io import describe_os_error

            self.writable = False
            logger.warning(
                "cannot write the embedding cache %s (%s); continuing without writing it",
                self.dir,
                describe_os_error(e),
            )
