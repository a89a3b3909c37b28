"""A masked-LM transformer used both as a sentence encoder and as an MLM (heads per architecture)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from sentkit.models.pooling import POOLINGS
from sentkit.objectives.mlm import IGNORE_INDEX
from sentkit.registry import Registry

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- model
def _bert_head(m: Any) -> Any:
    return m.cls


def _roberta_head(m: Any) -> Any:
    return m.lm_head


def _distilbert_head(m: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    def head(h: torch.Tensor) -> torch.Tensor:
        h = m.activation(m.vocab_transform(h))
        return m.vocab_projector(m.vocab_layer_norm(h))  # type: ignore[no-any-return]

    return head


# The MLM head of each architecture, applied to masked positions only (cheaper than full logits).
MLM_HEADS: Registry[Callable[[Any], Any]] = Registry("MLM head")
for _t in ("bert", "electra"):
    MLM_HEADS.add(_t, _bert_head)
for _t in ("roberta", "xlm-roberta", "camembert", "mpnet", "deberta-v2"):
    MLM_HEADS.add(_t, _roberta_head)
MLM_HEADS.add("distilbert", _distilbert_head)


class DeclutrModel(nn.Module):
    """A masked-LM transformer used as (encoder + pooling) and (MLM head on masked positions)."""

    def __init__(self, mlm_model: Any, pooling: str = "mean") -> None:
        super().__init__()
        self.mlm_model = mlm_model
        self.encoder = mlm_model.base_model
        self.pool = POOLINGS.get(pooling)
        mtype = getattr(mlm_model.config, "model_type", "")
        self.head = MLM_HEADS.get(mtype)(mlm_model) if mtype in MLM_HEADS else None

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, int]:
        """ids, mask, labels [n, L] -> (embeddings [n, d], summed MLM loss, masked count)."""
        if labels is not None and self.head is None:  # unknown architecture: full logits
            out = self.mlm_model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
            hidden = out.hidden_states[-1]
            sel = labels != IGNORE_INDEX
            mlm_sum = F.cross_entropy(out.logits[sel].float(), labels[sel], reduction="sum")
            return self.pool(hidden, mask), mlm_sum, int(sel.sum())
        hidden = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state  # [n, L, d]
        emb = self.pool(hidden, mask)  # [n, d]
        if labels is None:
            return emb, hidden.new_zeros(()), 0
        sel = labels != IGNORE_INDEX  # [n, L]
        if not bool(sel.any()):
            return emb, hidden.new_zeros(()), 0
        assert self.head is not None
        logits = self.head(hidden[sel])  # [m, V]
        return emb, F.cross_entropy(logits.float(), labels[sel], reduction="sum"), int(sel.sum())
