"""Whitening: centre a model's sentence vectors and give them identity covariance (the BERT-whitening
post-process of Su et al. 2021).

`fit_whitening` / `apply_whitening` are the maths (pure), `as_dense` the whitening as a
sentence-transformers `Dense` module, `Whitened` any encoder with its vectors whitened. The `whiten`
method that fits it on a corpus and saves it (`sentkit whiten`) is `sentkit.training.whiten`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sentkit.core.errors import InputError


# ----------------------------------------------------------------------------- the maths
def fit_whitening(x: np.ndarray, dim: int | None = None, eps: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """Mean mu [d] and map W [d, k] such that (x - mu) @ W has zero mean and identity covariance
    over the rows of x [n, d]: W = U[:, :k] diag(1 / sqrt(s[:k])) from the eigen-decomposition
    cov = U diag(s) U^T (k = dim, default d; eps keeps flat directions finite)."""
    x64 = np.asarray(x, dtype=np.float64)
    if x64.ndim != 2 or len(x64) < 2:
        raise InputError(f"whitening needs a matrix of at least 2 rows, got shape {x64.shape}")
    k = x64.shape[1] if dim is None else int(dim)
    if not 1 <= k <= x64.shape[1]:
        raise InputError(f"dim must be between 1 and {x64.shape[1]}, got {dim}")
    mu = x64.mean(axis=0)
    xc = x64 - mu
    cov = xc.T @ xc / len(x64)
    s, u = np.linalg.eigh(cov)  # ascending
    order = np.argsort(s)[::-1][:k]
    w = u[:, order] / np.sqrt(np.clip(s[order], 0.0, None) + eps)
    return mu.astype(np.float32), w.astype(np.float32)


def apply_whitening(x: np.ndarray, mu: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(x - mu) @ w, float32 [n, k]."""
    return ((np.asarray(x, dtype=np.float64) - mu) @ w).astype(np.float32)


def as_dense(mu: np.ndarray, w: np.ndarray) -> Any:
    """The whitening as a sentence-transformers Dense layer: x @ W + b with W = w^T, b = -mu w."""
    import torch

    from sentkit.models.transformer import DenseLayer

    return DenseLayer(
        torch.from_numpy(np.ascontiguousarray(w.T)), torch.from_numpy((-mu.astype(np.float64) @ w).astype(np.float32))
    )


# ----------------------------------------------------------------------------- an encoder, whitened
class Whitened:
    """Any encoder's vectors, whitened: ``encode(texts) = (base.encode(texts) - mu) @ w``."""

    def __init__(self, base: Any, mu: np.ndarray, w: np.ndarray, name: str = "whitened") -> None:
        self.base, self.mu, self.w, self.name = base, mu, w, name

    @property
    def dim(self) -> int:
        return int(self.w.shape[1])

    def encode(self, texts: str | Sequence[str], batch_size: int = 32, *, show_progress: bool = False) -> np.ndarray:
        from sentkit.core.interface import as_text_list

        items, single = as_text_list(texts)
        out = apply_whitening(
            self.base.encode(items, batch_size=batch_size, show_progress=show_progress), self.mu, self.w
        )
        return out[0] if single else out

    @property
    def precision(self) -> str | None:
        """The base's arithmetic (a transformer's; None for a model that has no such setting)."""
        return getattr(self.base, "precision", None)

    def fingerprint(self) -> str | None:
        from sentkit.core.interface import derived_fingerprint

        return derived_fingerprint("whitened", self.base, self.w, self.mu)


class PromptedWhitened(Whitened):
    """A prompted base's vectors, whitened: the base's prompts (sentence-transformers' ``prompts``,
    ``default_prompt_name``) apply as in the base, before the whitening."""

    @property
    def prompts(self) -> dict[str, str]:
        from sentkit.core.interface import prompts_of

        return prompts_of(self.base)[0]

    @property
    def default_prompt_name(self) -> str | None:
        from sentkit.core.interface import prompts_of

        return prompts_of(self.base)[1]

    def encode(
        self,
        texts: str | Any,
        batch_size: int = 32,
        *,
        show_progress: bool = False,
        prompt_name: str | None = None,
        prompt: str | None = None,
    ) -> np.ndarray:
        from sentkit.core.interface import as_text_list, encode_with_prompt

        items, single = as_text_list(texts)
        base = encode_with_prompt(
            self.base, items, prompt_name=prompt_name, prompt=prompt, batch_size=batch_size, show_progress=show_progress
        )
        out = apply_whitening(base, self.mu, self.w)
        return out[0] if single else out
