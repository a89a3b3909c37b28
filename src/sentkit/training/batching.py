"""One step's spans: document order, span/MLM sampling per document, length chunks."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from sentkit.models.encoder import pad_batch
from sentkit.objectives.mlm import IGNORE_INDEX, mask_tokens
from sentkit.objectives.spans import SpanSettings, sample_spans
from sentkit.training.config import DeclutrConfig

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- data per step
@dataclass
class StepBatch:
    """Token ids (with special tokens) of one step's spans on this rank."""

    seqs: list[list[int]]  # anchors first (B*A), then positives (B*A*P)
    labels: list[list[int] | None]  # MLM labels per sequence (None = no MLM)
    num_anchors: int  # B*A
    num_positives: int  # P


def doc_order(num_docs: int, epoch: int, seed: int) -> np.ndarray:
    """The document permutation of an epoch (a pure function of seed and epoch)."""
    return np.random.default_rng([seed, epoch, 0xD0C]).permutation(num_docs)


def docs_for_step(step: int, num_docs: int, batch_size: int, seed: int) -> list[int]:
    """Global document indices of optimizer step `step` (drop-last epochs)."""
    per_epoch = num_docs // batch_size
    epoch, pos = divmod(step, per_epoch)
    order = doc_order(num_docs, epoch, seed)
    return [int(i) for i in order[pos * batch_size : (pos + 1) * batch_size]]


def build_step_batch(
    store: Any,
    doc_ids: list[int],
    step: int,
    cfg: DeclutrConfig,
    spans: SpanSettings,
    affixes: tuple[list[int], list[int]],
    mlm_info: tuple[int, int, set[int]] | None,
) -> StepBatch:
    """Sample spans (and MLM masks) for `doc_ids`. Randomness is seeded per (seed, step, doc), so a
    document's spans do not depend on which rank or micro-batch it lands in."""
    prefix, suffix = affixes
    anchors: list[list[int]] = []
    positives: list[list[int]] = []
    labels: list[list[int] | None] = []
    for d in doc_ids:
        rng = np.random.default_rng([cfg.seed, step, d, 0x5A])
        toks = store.doc(d)
        s = sample_spans(len(toks), spans, rng)
        for a, ps in zip(s.anchors, s.positives):
            ids = prefix + toks[a.start : a.end].tolist() + suffix
            if mlm_info is not None:
                mask_id, vocab, special = mlm_info
                gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
                t = torch.tensor(ids).unsqueeze(0)
                maskable = torch.ones_like(t, dtype=torch.bool)
                maskable[0, : len(prefix)] = False
                maskable[0, len(ids) - len(suffix) :] = False
                if special:
                    maskable &= ~torch.isin(t, torch.tensor(sorted(special)))
                masked, lab = mask_tokens(t, maskable, mask_token_id=mask_id, vocab_size=vocab, generator=gen, probability=cfg.mlm_probability)
                anchors.append(masked[0].tolist())
                labels.append(lab[0].tolist())
            else:
                anchors.append(ids)
                labels.append(None)
            positives.extend(prefix + toks[p.start : p.end].tolist() + suffix for p in ps)
    return StepBatch(anchors + positives, labels + [None] * len(positives), len(anchors), spans.num_positives)


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


def pad_with_labels(seqs: list[list[int]], labels: list[list[int] | None], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
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
