"""Matryoshka representation learning (Kusupati et al., NeurIPS 2022) as a change of the objective: a contrastive
loss applied to the first `d` coordinates of the embeddings, re-normalised, for each trained `d`, weighted and
summed, as sentence-transformers' ``MatryoshkaLoss`` does. It takes embeddings, so whatever computed them (GradCache,
the gather across processes) is untouched; `MatryoshkaSettings` is the config keys the contrastive methods share."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from sentkit.core.config import ConfigError
from sentkit.objectives.contrastive import at_least_float32

PairLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def shrink(emb: torch.Tensor, dim: int) -> torch.Tensor:
    """The first `dim` coordinates of each row of `emb` [n, D], re-normalised to unit length (in float32, or
    float64)."""
    return F.normalize(at_least_float32(emb[..., :dim]), dim=-1)


def matryoshka(
    loss_fn: PairLoss,
    anchors: torch.Tensor,
    positives: torch.Tensor,
    dims: Sequence[int],
    weights: Sequence[float] | None = None,
) -> torch.Tensor:
    """Sum over `dims` of weight x `loss_fn` on the truncated, re-normalised views ([n, D] each, row i a pair).

    `weights` defaults to 1 for every dimension; a dimension above D is an error (as in sentence-transformers)."""
    weights = [1.0] * len(dims) if weights is None else list(weights)
    if len(weights) != len(dims):
        raise ValueError(f"{len(weights)} weights for {len(dims)} dimensions")
    width = anchors.shape[-1]
    if any(not 0 < d <= width for d in dims):
        raise ValueError(f"matryoshka dimensions {list(dims)} must each be in 1..{width} (the embedding width)")
    total = torch.zeros((), device=anchors.device)
    for d, w in zip(dims, weights):
        total = total + w * loss_fn(shrink(anchors, d), shrink(positives, d))
    return total


def _numbers(value: Any, key: str) -> list[Any] | None:
    """`value` as a list: a list, or a string as written after --set (``[384,256]`` or ``384,256``)."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("", "none", "null", "[]"):
            return None
        try:
            value = json.loads(text if text.startswith("[") else f"[{text}]")
        except json.JSONDecodeError:
            raise ConfigError(f"{key}: cannot read {text!r} as a list of numbers, e.g. [384,256,128]") from None
    if not isinstance(value, list | tuple):
        raise ConfigError(f"{key}: expected a list of numbers, e.g. [384,256,128], got {value!r}")
    return list(value)


@dataclass(kw_only=True)  # keyword-only: it mixes into configs whose first fields have no default
class MatryoshkaSettings:
    """The Matryoshka keys of a contrastive method's config (DeCLUTR, SimCSE, llm2vec's SimCSE phase).

    `matryoshka_dims` (empty or None: off, the loss as without it): the trained prefix widths, any order, each
    in 1..the model's hidden size (checked when the model is built: `check_matryoshka_width`), no duplicates.
    `matryoshka_weights`: one per dimension (default 1 each)."""

    matryoshka_dims: list[int] | str | None = None
    matryoshka_weights: list[float] | str | None = None

    def __post_init__(self) -> None:
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:
            parent()
        dims = _numbers(self.matryoshka_dims, "matryoshka_dims")
        weights = _numbers(self.matryoshka_weights, "matryoshka_weights")
        if dims:
            if any(isinstance(d, bool) or not isinstance(d, int) for d in dims):
                raise ConfigError(f"matryoshka_dims must be whole numbers, got {dims}")
            if any(d < 1 for d in dims):
                raise ConfigError(f"matryoshka_dims must each be at least 1, got {dims}")
            if len(set(dims)) != len(dims):
                raise ConfigError(f"matryoshka_dims has a dimension twice: {dims}")
        if weights:
            if not dims:
                raise ConfigError("matryoshka_weights without matryoshka_dims: set matryoshka_dims too")
            if len(weights) != len(dims):
                raise ConfigError(
                    f"matryoshka_weights has {len(weights)} values for {len(dims)} matryoshka_dims: one per dimension"
                )
            if any(isinstance(w, bool) or not isinstance(w, int | float) or not w >= 0 for w in weights):
                raise ConfigError(f"matryoshka_weights must be non-negative numbers, got {weights}")
        self.matryoshka_dims = [int(d) for d in dims] if dims else None
        self.matryoshka_weights = [float(w) for w in weights] if dims and weights else None

    @property
    def matryoshka_on(self) -> bool:
        return bool(self.matryoshka_dims)

    def matryoshka_loss(self, loss_fn: PairLoss, anchors: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
        """`loss_fn` as configured: unchanged when Matryoshka is off, else `matryoshka` over the dimensions."""
        if not self.matryoshka_dims:
            return loss_fn(anchors, positives)
        dims = [int(d) for d in self.matryoshka_dims]
        return matryoshka(loss_fn, anchors, positives, dims, self.matryoshka_weights)  # type: ignore[arg-type]

    def check_matryoshka_width(self, width: int) -> None:
        """A dimension above `width`, that of the pooled vector (the model's hidden size, twice it for ``mean+max``),
        is a ConfigError: called when the model is built."""
        too_wide = [int(d) for d in self.matryoshka_dims or [] if int(d) > width]  # type: ignore[union-attr]
        if too_wide:
            raise ConfigError(
                f"matryoshka_dims {too_wide} exceed the model's embedding width {width}: each must be in 1..{width}"
            )

    def matryoshka_marker(self) -> dict[str, Any]:
        """What the saved folder's sentkit.json says of it: ``matryoshka_dims`` (largest first), when on."""
        if not self.matryoshka_dims:
            return {}
        return {"matryoshka_dims": sorted((int(d) for d in self.matryoshka_dims), reverse=True)}  # type: ignore[union-attr]


def matryoshka_card(cfg: MatryoshkaSettings) -> str:
    """The model card's line on it ('' when off)."""
    if not cfg.matryoshka_dims:
        return ""
    weights = f", weights {cfg.matryoshka_weights}" if cfg.matryoshka_weights else ""
    return (
        f"- Matryoshka: the contrastive loss summed over the first {cfg.matryoshka_marker()['matryoshka_dims']} "
        f"coordinates{weights}: the vectors may be cut to one of these widths (and re-normalised)\n"
    )
