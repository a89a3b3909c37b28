"""The one interface where training and evaluation meet."""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Encoder(Protocol):
    """What every sentkit encoder (transformer, Hill models, wrapped callables) implements::

        encode(texts: str | Sequence[str], batch_size: int = 32, *, show_progress: bool = False)

    A list gives float32 ``[n, dim]`` (``[0, dim]`` for an empty list), one ``str`` a vector
    ``[dim]`` (sentence-transformers' convention); an item that is not ``str`` raises TypeError
    naming its index. Encoders may take more keyword arguments of their own."""

    def encode(self, texts: str | Sequence[str], batch_size: int = 32, *, show_progress: bool = False) -> np.ndarray: ...


@runtime_checkable
class BagOfVectors(Protocol):
    """An encoder whose sentence vector is a sum or mean of rows of one table (averaged GloVe, CBOW /
    SkipGram, FastSent, wordpiece skip-gram): what frequency weighting (SIF, `sentkit.models.sif`) needs.

    ``token_ids(texts)`` gives, per text, the rows of ``token_table()`` [V, dim] its vector is made of."""

    def token_ids(self, texts: list[str]) -> list[list[int]]: ...

    def token_table(self) -> np.ndarray: ...


class CallableEncoder:
    """Wrap a plain callable `list[str] -> array [n, dim]` as an Encoder (same arguments as any)."""

    def __init__(self, fn: Callable[[list[str]], Any], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "callable")

    def encode(self, texts: str | Sequence[str], batch_size: int = 32, *, show_progress: bool = False) -> np.ndarray:
        """Call `fn` on batches of `batch_size` texts; checks the shape and returns float32."""
        items, single = as_text_list(texts)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        parts = [check_embeddings(self.fn(list(b)), len(b), what=f"encoder {self.name}") for b in batched(items, batch_size)]
        if not parts:
            out = np.zeros((0, 0), dtype=np.float32)
        else:
            dims = {p.shape[1] for p in parts}
            if len(dims) != 1:
                raise ValueError(f"encoder {self.name}: batches gave different dimensions {sorted(dims)}")
            out = np.concatenate(parts)
        return out[0] if single else out


class TextsOnlyEncoder(CallableEncoder):
    """An object whose `encode` takes only the texts (``encode(texts)``), given every Encoder
    argument: its `encode` is called on batches of `batch_size` texts. Its other attributes
    (``dim``, ``fingerprint``, ...) are the object's own."""

    def __init__(self, obj: Any) -> None:
        super().__init__(obj.encode, name=type(obj).__name__)
        self.wrapped = obj

    def __getattr__(self, name: str) -> Any:
        if name == "wrapped":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.wrapped, name)


def derived_fingerprint(kind: str, base: Any, *arrays: np.ndarray) -> str | None:
    """The fingerprint of an encoder made of ``base`` and fitted ``arrays`` (whitened, SIF-weighted): a
    hash of ``kind``, the base's own fingerprint and the arrays' bytes; None when the base has none."""
    fp = getattr(base, "fingerprint", None)
    base_fp = fp() if callable(fp) else fp
    if base_fp is None:
        return None
    h = hashlib.sha256(f"{kind}|{base_fp}".encode())
    h.update(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays))
    return h.hexdigest()[:20]


def takes_encoder_arguments(fn: Callable[..., Any]) -> bool:
    """Whether `fn` accepts the Encoder's keyword arguments (``batch_size``, ``show_progress``)
    by name or through ``**kwargs``; a callable whose signature cannot be read is trusted."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return True
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return {"batch_size", "show_progress"} <= named


def as_encoder(obj: Any) -> Encoder:
    """Accept an Encoder, an object whose `encode` takes only the texts, or a callable
    `list[str] -> array`."""
    if hasattr(obj, "encode") and callable(obj.encode):
        return obj if takes_encoder_arguments(obj.encode) else TextsOnlyEncoder(obj)  # type: ignore[no-any-return]
    if callable(obj):
        return CallableEncoder(obj)
    raise TypeError(
        f"expected an object with encode(list[str]) -> array or a callable, got {type(obj).__name__}"
    )


def as_text_list(texts: Any) -> tuple[list[str], bool]:
    """The texts of an ``encode`` call as a list, and whether a single string was given.

    Follows sentence-transformers: ``encode("one text")`` embeds one text (the caller returns a
    vector ``[dim]``), ``encode(["a", "b"])`` a matrix ``[2, dim]``. Items that are not strings raise
    TypeError naming their index (``str(None)`` would silently embed the text "None")."""
    if isinstance(texts, str):
        return [texts], True
    if isinstance(texts, (bytes, bytearray)):
        raise TypeError("encode() takes str or a list of str, got bytes; decode it first")
    try:
        items = list(texts)
    except TypeError:
        raise TypeError(f"encode() takes str or a list of str, got {type(texts).__name__}") from None
    for i, t in enumerate(items):
        if not isinstance(t, str):
            raise TypeError(f"encode(): item {i} is {type(t).__name__} ({t!r:.60}), not str")
    return items, False


def check_embeddings(emb: Any, n: int, *, what: str = "encoder") -> np.ndarray:
    """Validate an encoder's output: shape [n, dim], finite; returns float32."""
    arr = np.asarray(emb)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise ValueError(f"{what}: expected an array of shape [{n}, dim], got {arr.shape}")
    arr = arr.astype(np.float32, copy=False)
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).any(axis=1).sum())
        raise ValueError(f"{what}: {bad} of {n} embeddings contain NaN or inf")
    return arr


def batched(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def encode_texts(
    fn: Callable[[list[str]], Any],
    texts: str | Sequence[str],
    batch_size: int,
    *,
    dim: int,
    show_progress: bool = False,
    desc: str = "encode",
) -> np.ndarray:
    """The one ``encode`` convention, around ``fn(list[str]) -> [n, dim]``: a single ``str`` gives a
    vector ``[dim]``, a list ``[n, dim]`` float32; texts go to ``fn`` length-sorted in batches of
    ``batch_size`` (a tqdm bar with ``show_progress``); non-string items raise TypeError."""
    from tqdm.auto import tqdm

    items, single = as_text_list(texts)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    out = np.zeros((len(items), dim), dtype=np.float32)
    order = np.argsort([len(t) for t in items], kind="stable")
    for s in tqdm(range(0, len(items), batch_size), desc=desc, unit=" batch", disable=not show_progress):
        idx = order[s : s + batch_size]
        out[idx] = np.asarray(fn([items[i] for i in idx]), dtype=np.float32)
    return out[0] if single else out


def sum_rows(
    ids: list[list[int]], table: np.ndarray, *, average: bool = False, accumulate: type = np.float32
) -> np.ndarray:
    """Sum (or mean) of ``table`` rows per list of ids; zeros for an empty list.

    ids: n lists; table: [V, d] -> float32 [n, d]. ``accumulate`` is the dtype the sums are taken in.
    """
    n, d = len(ids), int(table.shape[1])
    out = np.zeros((n, d), dtype=np.float32)
    lengths = np.fromiter((len(t) for t in ids), dtype=np.int64, count=n)
    nonempty = np.flatnonzero(lengths)
    if nonempty.size == 0:
        return out
    flat = np.fromiter((i for t in ids for i in t), dtype=np.int64, count=int(lengths.sum()))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[nonempty]
    sums = np.add.reduceat(table[flat].astype(accumulate), starts, axis=0)  # [k, d]
    if average:
        sums = sums / lengths[nonempty, None]
    out[nonempty] = sums
    return out
