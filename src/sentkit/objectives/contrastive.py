"""InfoNCE / NT-Xent over anchor and positive embeddings (takes embeddings, never a model)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def at_least_float32(x: torch.Tensor) -> torch.Tensor:
    """`x` in float32, or as it is in float64 (a test's oracle precision)."""
    return x if x.dtype == torch.float64 else x.float()


def info_nce(
    anchors: torch.Tensor, positives: torch.Tensor, temperature: float = 0.05, *, symmetric: bool = True
) -> torch.Tensor:
    """Contrastive loss of N pairs; row i of `anchors` [N, d] and `positives` [N, d] is a pair.

    ``symmetric=True`` (NT-Xent, DeCLUTR): each of the 2N embeddings is classified against the
    other 2N - 1, mean over the 2N rows. ``symmetric=False`` (SimCSE, sentence-transformers'
    MultipleNegativesRankingLoss): each anchor is classified against the N positives, mean over the
    N anchors. Cosine similarity divided by `temperature`."""
    n = anchors.shape[0]
    # in float32 even under autocast: a bf16 similarity is off by up to ~0.004, i.e. ~0.08 in a logit at 0.05
    with torch.autocast(device_type=anchors.device.type, enabled=False):
        a = F.normalize(at_least_float32(anchors), dim=-1)
        p = F.normalize(at_least_float32(positives), dim=-1)
        if not symmetric:
            return F.cross_entropy(a @ p.T / temperature, torch.arange(n, device=a.device))  # [N, N]
        z = torch.cat([a, p], dim=0)  # [2N, d]
        sim = z @ z.T / temperature  # [2N, 2N]
        sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
        target = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(z.device)  # [2N]
        return F.cross_entropy(sim, target)
