"""Which units a step trains on, length chunks and padding (shared by every method)."""

from __future__ import annotations

import logging

import numpy as np
import torch

from sentkit.models.transformer import pad_batch
from sentkit.objectives.mlm import IGNORE_INDEX

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- units per step
def doc_order(num_docs: int, epoch: int, seed: int) -> np.ndarray:
    """The unit permutation of an epoch (a pure function of seed and epoch)."""
    return np.random.default_rng([seed, epoch, 0xD0C]).permutation(num_docs)


class StepUnits:
    """Global unit indices of each optimizer step (drop-last epochs). The permutation of an epoch
    (`doc_order`) is made once, when the loop first asks for a step of that epoch, and kept until
    the next epoch: a permutation of a million units takes about 13 ms, too much for every step."""

    def __init__(self, num_docs: int, batch_size: int, seed: int) -> None:
        self.num_docs, self.batch_size, self.seed = num_docs, batch_size, seed
        self.per_epoch = num_docs // batch_size
        self._epoch = -1
        self._order = np.empty(0, dtype=np.int64)

    def __call__(self, step: int) -> np.ndarray:
        epoch, pos = divmod(step, self.per_epoch)
        if epoch != self._epoch:
            self._epoch, self._order = epoch, doc_order(self.num_docs, epoch, self.seed)
        return self._order[pos * self.batch_size : (pos + 1) * self.batch_size]


def length_chunks(lengths: list[int], token_budget: int) -> list[list[int]]:
    """Group sequence indices, longest first, into chunks whose padded size fits `token_budget`."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    chunks: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        width = lengths[cur[0]] if cur else lengths[i]
        if cur and (len(cur) + 1) * width > token_budget:
            chunks.append(cur)
            cur = []
        cur.append(i)
    if cur:
        chunks.append(cur)
    return chunks


def pad_with_labels(
    seqs: list[list[int]], labels: list[list[int] | None], pad_id: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Right-pad ids and MLM labels -> (ids [n, L], mask [n, L], labels [n, L] or None if no labels)."""
    batch = pad_batch(seqs, pad_id, device)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    if all(lb is None for lb in labels):
        return ids, mask, None
    lab = torch.full_like(ids, IGNORE_INDEX)
    for i, lb in enumerate(labels):
        if lb is not None:
            lab[i, : len(lb)] = torch.as_tensor(lb, dtype=torch.long, device=lab.device)
    return ids, mask, lab
