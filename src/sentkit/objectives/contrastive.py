"""NT-Xent / InfoNCE over anchor and positive embeddings (takes embeddings, never a model)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def info_nce(anchors: torch.Tensor, positives: torch.Tensor, temperature: float = 0.05) -> torch.Tensor:
    """NT-Xent over the 2N embeddings of a batch.

    anchors [N, d], positives [N, d] (row i of each is a positive pair). Every other of the 2N
    embeddings is a negative; cosine similarity divided by `temperature`; mean over the 2N rows."""
    n = anchors.shape[0]
    z = F.normalize(torch.cat([anchors, positives], dim=0).float(), dim=-1)  # [2N, d]
    sim = z @ z.T / temperature  # [2N, 2N]
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(z.device)  # [2N]
    return F.cross_entropy(sim, target)
