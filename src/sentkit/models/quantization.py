"""Quantized embeddings: ``sentkit embed --quantize int8|binary``, ``sentkit evaluate --quantize``,
``sentkit.load(name, quantize=..., calibration=...)`` and binary search (sentkit.retrieval.index).

The codes are sentence-transformers' (`quantize` gives exactly ``sentence_transformers.quantization.
quantize_embeddings``' on the same ranges; tests/models/test_quantization.py holds it to that oracle):

- ``int8`` / ``uint8``: each dimension cut into 255 equal steps between its calibration minimum and maximum
  (``ranges`` [2, dim]: row 0 the minima, row 1 the maxima), ``floor((x - min) / step)`` clipped to 0..255
  (minus 128 for int8). The ranges are fitted on a calibration sample (`fit_ranges`) and stored beside the codes
  (`Calibration`, ``<vectors>.quantization.json``) so that a query is quantized the same way;
- ``binary`` / ``ubinary``: one bit a dimension, ``x > 0``, packed eight to a byte (``np.packbits``; minus 128 for
  binary). No calibration: the threshold is 0.

`as_float` turns codes into the float32 vectors a task scores (`QuantizedEncoder`: every SentEval and MTEB-style task
runs unchanged): int8 codes as their integer values; bits as +1 / -1, so that the cosine of two binary vectors is
``1 - 2 * hamming / dim``, an affine function of their Hamming distance (a task ranks them as Hamming does).
"""

from __future__ import annotations

import json
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.config import ConfigError
from sentkit.core.interface import PostProcessed

QUANTIZE_CHOICES = ("int8", "binary")  # what the command-line flags offer
PRECISIONS = ("int8", "uint8", "binary", "ubinary")  # what `quantize` computes (sentence-transformers' names)
SCALAR = ("int8", "uint8")  # the precisions that need calibration ranges
CALIBRATION_SUFFIX = ".quantization.json"
CALIBRATION_FORMAT, CALIBRATION_VERSION = "sentkit-quantization", 1
DEFAULT_CALIBRATION_ROWS = 10_000  # the sample the ranges are fitted on (sentence-transformers' examples: 10k-100k)


# a binary search's rescoring (sentkit.retrieval.index.BinaryCodes): the best k * multiplier Hamming candidates rescored
# with the float query against each one's float vector (`float`), its int8 codes (`int8`), or not at all (`none`)
RESCORE = ("float", "int8", "none")
RESCORE_MULTIPLIER = 4  # candidates per result that are rescored (sentence-transformers' default is 2)


def check_rescore(rescore: Any, multiplier: Any) -> tuple[str, int]:
    """`rescore` (float, int8, none) and the multiplier (a whole number >= 1), checked: one line each."""
    from sentkit.core.registry import suggest

    if rescore not in RESCORE:
        raise ConfigError(
            f"--rescore must be one of {', '.join(RESCORE)}, got {rescore!r}.{suggest(str(rescore), list(RESCORE))}"
        )
    if isinstance(multiplier, str) and multiplier.strip().isdigit():
        multiplier = int(multiplier)
    if isinstance(multiplier, bool) or not isinstance(multiplier, (int, np.integer)) or multiplier < 1:
        raise ConfigError(f"--rescore-multiplier must be a whole number >= 1, got {multiplier!r}")
    return str(rescore), int(multiplier)


def check_rescoring(precision: str, rescore: Any, multiplier: Any) -> tuple[str | None, int | None]:
    """The (rescore, multiplier) of codes of `precision` searched with rescoring, checked (one line each): only binary
    codes are searched so; (None, None) for the codes alone (`rescore` None or "none", and no multiplier)."""
    if rescore is None or rescore == "none":
        if multiplier is not None:
            raise ConfigError("--rescore-multiplier goes with --rescore float or int8; give one (or leave it out)")
        return None, None
    if precision in SCALAR:
        raise ConfigError(
            f"--rescore rescores the candidates of a binary search; give --quantize binary, not {precision} "
            "(or leave --rescore out)"
        )
    return check_rescore(rescore, RESCORE_MULTIPLIER if multiplier is None else multiplier)


def check_quantize(name: Any, *, choices: tuple[str, ...] = QUANTIZE_CHOICES) -> str:
    """`name` as a precision of `choices`; ConfigError, one line with the closest name, for anything else."""
    from sentkit.core.registry import suggest

    text = str(name).strip().lower() if isinstance(name, str) else name
    if text not in choices:
        raise ConfigError(
            f"--quantize must be one of {', '.join(choices)}, got {name!r}.{suggest(str(name), list(choices))}"
        )
    return str(text)


# ----------------------------------------------------------------------------- the codes (pure functions)
def fit_ranges(calibration: np.ndarray) -> np.ndarray:
    """The int8 ranges of `calibration` [m, dim] (m >= 2): float32 [2, dim], each dimension's minimum and maximum."""
    x = np.asarray(calibration, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ConfigError(
            "int8 calibration needs at least 2 vectors to fit each dimension's range, "
            f"got {x.shape[0] if x.ndim else 0}"
        )
    return np.vstack((x.min(axis=0), x.max(axis=0))).astype(np.float32)


def _steps(ranges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r = np.asarray(ranges, dtype=np.float32)
    steps = (r[1] - r[0]) / 255
    return r[0], np.where(steps == 0, 1, steps)


def quantize(
    emb: np.ndarray,
    precision: str = "int8",
    *,
    ranges: np.ndarray | None = None,
    calibration: np.ndarray | None = None,
) -> np.ndarray:
    """The codes of float vectors `emb` [n, dim] in `precision` (int8, uint8, binary, ubinary), exactly
    sentence-transformers' ``quantize_embeddings(emb, precision, ranges, calibration_embeddings)``: int8 / uint8 take
    `ranges` [2, dim], else those of `calibration`, else (not advised) those of `emb` itself; bits pack to
    ceil(dim / 8) bytes."""
    precision = check_quantize(precision, choices=PRECISIONS)
    x = np.asarray(emb)
    if x.dtype in (np.int8, np.uint8):
        raise ConfigError("the vectors to quantize are already codes (int8 / uint8); give float vectors")
    if precision in SCALAR:
        if ranges is None:
            ranges = fit_ranges(calibration if calibration is not None else x)
        if np.asarray(ranges).shape != (2, x.shape[-1]):
            raise ConfigError(
                f"the calibration ranges are for {np.asarray(ranges).shape[-1]}-dimensional vectors, these are "
                f"{x.shape[-1]}-dimensional: calibrate with the same model and --dim"
            )
        starts, steps = _steps(ranges)
        q = np.clip(np.floor((x - starts) / steps), 0, 255)
        return (q - 128).astype(np.int8) if precision == "int8" else q.astype(np.uint8)
    bits = np.packbits(x > 0, axis=-1)
    return (bits - 128).astype(np.int8) if precision == "binary" else bits


def dequantize(codes: np.ndarray, precision: str, ranges: np.ndarray) -> np.ndarray:
    """int8 / uint8 `codes` back in the coordinates of the float vectors (each at the bottom of its step):
    sentence-transformers' own, used to rescore candidates with a float query. float32 [n, dim]."""
    starts, steps = _steps(ranges)
    x = np.asarray(codes).astype(np.float64)
    if precision == "int8":
        x += 128
    return (x * steps + starts).astype(np.float32)


def unpack_bits(codes: np.ndarray, precision: str, dim: int) -> np.ndarray:
    """The 0/1 bits [n, dim] of binary (int8, offset by -128) or ubinary (uint8) `codes` [n, ceil(dim / 8)]."""
    raw = np.asarray(codes)
    packed = (raw.astype(np.int16) + 128).astype(np.uint8) if precision == "binary" else raw.astype(np.uint8)
    return np.unpackbits(packed, axis=-1)[..., :dim]


def packed_bits(codes: np.ndarray, precision: str) -> np.ndarray:
    """ubinary bytes (what faiss's binary indexes take) of binary or ubinary `codes`."""
    raw = np.asarray(codes)
    return (raw.astype(np.int16) + 128).astype(np.uint8) if precision == "binary" else raw.astype(np.uint8)


def as_float(codes: np.ndarray, precision: str, dim: int) -> np.ndarray:
    """float32 vectors [n, dim] a task scores in place of the codes: int8 / uint8 codes as their values, bits as
    +1 / -1 (the cosine of two is ``1 - 2 * hamming / dim``: ranks as Hamming distance ranks)."""
    if precision in SCALAR:
        return np.asarray(codes, dtype=np.float32)
    return unpack_bits(codes, precision, dim).astype(np.float32) * 2 - 1


def code_width(precision: str, dim: int) -> int:
    """Bytes a vector of `dim` dimensions takes as codes."""
    return dim if precision in SCALAR else -(-dim // 8)


def sample_rows(n: int, size: int, seed: int = 0) -> np.ndarray:
    """Sorted row numbers of a seeded sample of `size` of `n` rows (all of them when size >= n)."""
    if size >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=size, replace=False))


# ----------------------------------------------------------------------------- the calibration (state)
@dataclass
class Calibration:
    """How vectors were quantized: the `precision`, their `dim` (before packing) and, for int8, the `ranges` fitted on
    `rows` vectors of `source` (a seeded sample, `seed`). Stored beside the codes as ``<vectors>.quantization.json``
    (`calibration_path`), read back to quantize queries the same way."""

    precision: str
    dim: int
    ranges: np.ndarray | None = None
    rows: int = 0
    seed: int = 0
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.precision = check_quantize(self.precision, choices=PRECISIONS)
        if isinstance(self.dim, bool) or not isinstance(self.dim, numbers.Integral) or self.dim < 1:
            raise ConfigError(f"a quantization's dim must be a whole number >= 1, got {self.dim!r}")
        self.dim = int(self.dim)
        if self.precision in SCALAR:
            if self.ranges is None:
                raise ConfigError(f"{self.precision} quantization needs calibration ranges")
            self.ranges = np.asarray(self.ranges, dtype=np.float32)
            if self.ranges.shape != (2, self.dim):
                raise ConfigError(f"calibration ranges of shape {self.ranges.shape}, expected (2, {self.dim})")
        else:
            self.ranges = None

    @classmethod
    def fit(cls, sample: np.ndarray, precision: str, *, seed: int = 0, source: str = "", **extra: Any) -> Calibration:
        """The calibration of `precision` fitted on `sample` [m, dim] (the ranges of int8; nothing for binary)."""
        x = np.asarray(sample, dtype=np.float32)
        precision = check_quantize(precision, choices=PRECISIONS)
        ranges = fit_ranges(x) if precision in SCALAR else None
        return cls(precision, int(x.shape[1]), ranges, rows=int(x.shape[0]), seed=seed, source=source, extra=extra)

    def codes(self, emb: np.ndarray) -> np.ndarray:
        """The codes of float vectors `emb` under this calibration."""
        x = np.asarray(emb)
        if x.shape[-1] != self.dim:
            raise ConfigError(
                f"the vectors are {x.shape[-1]}-dimensional, the quantization {self.source or ''} is for "
                f"{self.dim}: quantize with the calibration of the same model and --dim"
            )
        return quantize(x, self.precision, ranges=self.ranges)

    def floats(self, codes: np.ndarray) -> np.ndarray:
        """`as_float` of `codes` under this calibration."""
        return as_float(codes, self.precision, self.dim)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": CALIBRATION_FORMAT,
            "version": CALIBRATION_VERSION,
            "precision": self.precision,
            "dim": self.dim,
            "ranges": None if self.ranges is None else self.ranges.tolist(),
            "rows": self.rows,
            "seed": self.seed,
            "source": self.source,
            **({"extra": self.extra} if self.extra else {}),
        }

    @classmethod
    def from_json(cls, obj: Any, where: str = "calibration") -> Calibration:
        if not isinstance(obj, dict) or obj.get("format") != CALIBRATION_FORMAT:
            raise ConfigError(f"{where}: not a sentkit quantization file (written by `sentkit embed --quantize`)")
        try:
            return cls(
                obj["precision"],
                obj["dim"],
                None if obj.get("ranges") is None else np.asarray(obj["ranges"], dtype=np.float32),
                rows=int(obj.get("rows", 0)),
                seed=int(obj.get("seed", 0)),
                source=str(obj.get("source", "")),
                extra=dict(obj.get("extra") or {}),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(
                f"{where}: a damaged quantization file ({type(e).__name__}: {e}); write it again"
            ) from None

    def save(self, path: str | Path) -> Path:
        from sentkit.core.io import atomic_write_text

        atomic_write_text(Path(path), json.dumps(self.to_json()) + "\n")
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        p = Path(path)
        if p.is_dir():
            raise ConfigError(f"calibration {p} is a folder, not a file; give the .quantization.json beside the codes")
        if not p.is_file():
            raise ConfigError(f"calibration {p}: no such file; `sentkit embed --quantize` writes it beside the codes")
        try:
            obj = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as e:
            raise ConfigError(f"calibration {p}: not valid JSON ({type(e).__name__}); write it again") from None
        return cls.from_json(obj, str(p))

    def key(self) -> str:
        """What keys caches and fingerprints on this calibration: the precision, and the ranges' digest for int8."""
        from sentkit.core.identity import calibration_id

        return calibration_id(self.precision, self.ranges)


def calibration_path(vectors: str | Path) -> Path:
    """Where the calibration of the codes at `vectors` (``X.npy``) is kept: ``X.quantization.json``."""
    from sentkit.core.io import sidecar_path

    return sidecar_path(Path(vectors), CALIBRATION_SUFFIX, after_stem=True)  # a name too long: cut, with its hash


def calibration_of(vectors: str | Path) -> Calibration | None:
    """The calibration beside the codes at `vectors`, None when there is none (float vectors)."""
    p = calibration_path(vectors)
    return Calibration.load(p) if p.is_file() else None


# ----------------------------------------------------------------------------- an encoder of codes
class QuantizedEncoder(PostProcessed):
    """An encoder whose vectors are the codes of another's (`Calibration`), as float32 (`as_float`): int8 values, or
    +1 / -1 bits, so that every task that scores float vectors scores the quantized ones unchanged. Other attributes
    are the wrapped encoder's; ``quantize`` names the precision (what keys and results record).

    Binary codes may be searched with rescoring (`rescore` "float" or "int8", `rescore_multiplier`), as ``sentkit
    index --quantize binary`` searches them: a retrieval task then ranks by that search
    (`sentkit.retrieval.index.rescored_search`); every other task scores the codes themselves."""

    codes = True

    def __init__(
        self,
        encoder: Any,
        calibration: Calibration,
        *,
        rescore: str | None = None,
        rescore_multiplier: int | None = None,
    ) -> None:
        self.wrapped = encoder
        self.calibration = calibration
        self.quantize = calibration.precision
        self.rescore, self.rescore_multiplier = check_rescoring(calibration.precision, rescore, rescore_multiplier)

    @property
    def dim(self) -> int:
        return self.calibration.dim

    def post(self, emb: np.ndarray) -> np.ndarray:
        return self.calibration.floats(self.calibration.codes(emb))

    def tag(self) -> str:
        rescored = f"|rescore={self.rescore}x{self.rescore_multiplier}" if self.rescore else ""
        return f"quantized|{self.calibration.key()}{rescored}"


def read_calibration_texts(path: Path, size: int, seed: int = 0) -> list[str]:
    """A seeded sample of `size` non-empty lines of the text file `path` (the texts an evaluation's int8 ranges are
    fitted on: a corpus of the user's, never the tasks' own sentences)."""
    if path.is_dir():
        raise ConfigError(f"--calibration {path} is a folder, not a file; give a .txt (one text per line)")
    if not path.is_file():
        raise ConfigError(f"--calibration {path}: no such file; give a .txt of texts or a .quantization.json")
    try:
        lines = [t for t in path.read_text(encoding="utf-8").splitlines() if t.strip()]
    except UnicodeDecodeError:
        raise ConfigError(f"--calibration {path}: not UTF-8 text; give a .txt (one text per line)") from None
    if len(lines) < 2:
        raise ConfigError(f"--calibration {path}: int8 ranges need at least 2 texts, it has {len(lines)}")
    return [lines[i] for i in sample_rows(len(lines), size, seed)]


def calibrate(
    encoder: Any, precision: str, *, calibration: str | Path | None, rows: int = DEFAULT_CALIBRATION_ROWS, seed: int = 0
) -> Calibration:
    """The calibration an encoder's vectors are quantized with where no codes file gives it (evaluation,
    ``sentkit.load(quantize=...)``): binary needs none; int8 is fitted on `calibration`, a .txt whose seeded sample
    of `rows` lines is encoded, or read from a ``.quantization.json`` written by ``sentkit embed --quantize``."""
    precision = check_quantize(precision)
    dim = getattr(encoder, "dim", None)
    if precision not in SCALAR and calibration is None:
        if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
            dim = int(np.asarray(encoder.encode(["a"])).shape[-1])
        return Calibration(precision, int(dim), rows=0, source="sign (no calibration)")
    if calibration is None:
        raise ConfigError(
            "--quantize int8 needs calibration ranges fitted on texts that are not the test data: give "
            "--calibration TEXTS.txt (a seeded sample is encoded) or the .quantization.json that "
            "`sentkit embed --quantize int8` wrote"
        )
    p = Path(calibration)
    if p.name.endswith(CALIBRATION_SUFFIX) or p.suffix.lower() == ".json":
        cal = Calibration.load(p)
        if cal.precision != precision:
            raise ConfigError(f"--calibration {p} quantizes to {cal.precision}, not {precision}")
        return cal
    if precision not in SCALAR:
        raise ConfigError(
            f"--calibration {p}: binary codes need no calibration texts (the threshold is 0); leave --calibration out"
        )
    texts = read_calibration_texts(p, rows, seed)
    emb = np.asarray(encoder.encode(texts), dtype=np.float32)
    return Calibration.fit(emb, precision, seed=seed, source=str(p))
