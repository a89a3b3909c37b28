"""sentkit: learn universal sentence embeddings from unlabelled text and measure any encoder."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from sentkit.core.interface import Encoder


def load(path_or_name: str, **kwargs: Any) -> Encoder:
    """Load an encoder: a sentkit output directory, a registry name, a HF id or a local model dir."""
    from sentkit.models.loading import load as _load

    return _load(path_or_name, **kwargs)


def evaluate(encoder: Any, **kwargs: Any) -> dict[str, Any]:
    """Score `encoder` (an object with `.encode` or a callable) on SentEval tasks."""
    from sentkit.evaluation import evaluate as _evaluate

    return _evaluate(encoder, **kwargs)


def search(
    encoder: Any, queries: Any, k: int = 10, *, vectors: Any, index: Any = None, **kwargs: Any
) -> tuple[Any, Any]:
    """The `k` nearest rows of `vectors` (the .npy ``sentkit embed`` wrote of a corpus) to each query
    text, embedded by `encoder` (with its query prompt), by cosine: (ids [m, k], cosines [m, k]).
    Exact below 200k rows (in blocks of queries x rows: bounded memory); past it through `index`, the
    folder ``sentkit index`` built of `vectors`, opened once and kept open for the next call while its
    files are unchanged (see `sentkit.retrieval.index.search`, which takes the same keywords). A binary index
    (``sentkit index --quantize binary``) is searched by Hamming distance and rescored (``rescore="float"``, "int8"
    or "none"; ``rescore_multiplier``); codes that ``sentkit embed --quantize`` wrote are searched with the query
    quantized by their calibration (docs/smaller_vectors.md)."""
    from sentkit.retrieval.index import search as _search

    return _search(queries, k, vectors=vectors, index=index, encoder=encoder, **kwargs)


__all__ = ["__version__", "evaluate", "load", "search"]
