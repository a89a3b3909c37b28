"""Pooling of token states into one vector per sequence (pure functions)."""

from __future__ import annotations

import torch

from sentkit.registry import Registry


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over non-padding tokens. hidden [n, L, d], mask [n, L] (1 = token) -> [n, d]."""
    m = mask.to(hidden.dtype).unsqueeze(-1)  # [n, L, 1]
    summed = (hidden * m).sum(dim=1)  # [n, d]
    counts = m.sum(dim=1).clamp(min=1e-9)  # [n, 1]
    return summed / counts


def cls_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The first token's state. hidden [n, L, d] -> [n, d]."""
    return hidden[:, 0]


POOLINGS: Registry = Registry("pooling")
POOLINGS.add("mean", mean_pool)
POOLINGS.add("cls", cls_pool)
