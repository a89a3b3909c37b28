"""A masked-LM transformer as (encoder, pooling) and (MLM head on chosen positions), per architecture.

The head of each architecture is looked up in `MLM_HEADS` and applied only to the hidden states of
masked positions, so the vocabulary projection of every other token is never computed. An
architecture that is not listed falls back to the model's full logits (slower, same loss). A decoder
language model's causal LM uses its LM head, and its masked-LM term is masked next-token prediction
(LLM2Vec's MNTP): what DeCLUTR's MLM term becomes on a decoder base.

Likewise, when only the first token's state is used (CLS pooling, no MLM loss), the last layer of
a BERT-style encoder runs for the first position alone: its query attends to every position's key
and value, as in the full layer, but no other position's output is computed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from sentkit.core.config import ConfigError
from sentkit.core.registry import Registry
from sentkit.models.decoder import is_decoder_config, mntp_sum
from sentkit.models.pooling import POOLINGS
from sentkit.objectives.mlm import IGNORE_INDEX

log = logging.getLogger(__name__)

Head = Callable[[torch.Tensor], torch.Tensor]  # hidden [m, d] -> logits [m, V]


# ----------------------------------------------------------------------------- heads
def _bert_head(m: Any) -> Head:
    return m.cls  # type: ignore[no-any-return]


def _lm_head(m: Any) -> Head:
    return m.lm_head  # type: ignore[no-any-return]


def _electra_head(m: Any) -> Head:
    def head(h: torch.Tensor) -> torch.Tensor:
        return m.generator_lm_head(m.generator_predictions(h))  # type: ignore[no-any-return]

    return head


def _deberta_v2_head(m: Any) -> Head:
    if getattr(m, "legacy", True) and hasattr(m, "cls"):
        return m.cls  # type: ignore[no-any-return]

    def head(h: torch.Tensor) -> torch.Tensor:
        return m.lm_predictions(h, m.deberta.embeddings.word_embeddings)  # type: ignore[no-any-return]

    return head


def _distilbert_head(m: Any) -> Head:
    def head(h: torch.Tensor) -> torch.Tensor:
        h = m.activation(m.vocab_transform(h))
        return m.vocab_projector(m.vocab_layer_norm(h))  # type: ignore[no-any-return]

    return head


MLM_HEADS: Registry[Callable[[Any], Head]] = Registry("MLM head")
MLM_HEADS.add("bert", _bert_head)
for _t in ("roberta", "xlm-roberta", "camembert", "mpnet"):
    MLM_HEADS.add(_t, _lm_head)
MLM_HEADS.add("electra", _electra_head)
MLM_HEADS.add("deberta-v2", _deberta_v2_head)
MLM_HEADS.add("distilbert", _distilbert_head)


def head_modules(mlm_model: Any) -> list[nn.Module]:
    """The modules of the masked-LM that are not the base model (its MLM head)."""
    base = mlm_model.base_model
    return [m for m in mlm_model.children() if m is not base and any(True for _ in m.parameters())]


# ----------------------------------------------------------------------------- first token only
FIRST_TOKEN_TYPES = frozenset({"bert", "roberta", "xlm-roberta", "camembert", "electra"})  # BERT's layer layout
# The layer contract `first_token_forward` replaces: in transformers 5 an encoder layer returns its
# hidden states as one tensor (4.x returned a tuple, and the encoder took element 0 of it).
FIRST_TOKEN_TRANSFORMERS_MAJOR = 5


def _transformers_major() -> int:
    import transformers

    return int(transformers.__version__.split(".")[0])


def _bert_layout(layer: Any) -> bool:
    att = getattr(getattr(layer, "attention", None), "self", None)
    return (
        all(hasattr(att, a) for a in ("query", "key", "value", "dropout", "attention_head_size", "scaling"))
        and all(hasattr(layer, a) for a in ("intermediate", "output"))
        and hasattr(layer.attention, "output")
    )


def first_token_layer(encoder: Any) -> Any:
    """The last layer of `encoder` if it is a BERT-style bidirectional layer that `first_token_forward`
    can run (plain absolute positions, no decoder, transformers 5's layer contract), else None."""
    if _transformers_major() != FIRST_TOKEN_TRANSFORMERS_MAJOR:  # another layer contract: run the whole layer
        return None
    cfg = getattr(encoder, "config", None)
    layers = getattr(getattr(encoder, "encoder", None), "layer", None)
    if (
        cfg is None
        or getattr(cfg, "model_type", "") not in FIRST_TOKEN_TYPES
        or not layers
        or getattr(cfg, "is_decoder", False)
    ):
        return None
    if getattr(cfg, "position_embedding_type", "absolute") != "absolute":
        return None
    return layers[-1] if _bert_layout(layers[-1]) and not layers[-1].attention.self.is_causal else None


def first_token_forward(layer: Any) -> Callable[..., torch.Tensor]:
    """A forward for BERT-style `layer` that returns the output of position 0 only ([n, 1, d]): its
    query attends to the keys and values of all positions (with the same mask and dropout), then
    the attention output, feed-forward and layer norms run on that one position."""
    full = type(layer).forward
    att = layer.attention.self

    def forward(
        hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, *args: Any, **kwargs: Any
    ) -> torch.Tensor:
        if attention_mask is not None and attention_mask.dim() != 4:  # e.g. flash attention's 2-D mask
            return full(layer, hidden_states, attention_mask, *args, **kwargs)[:, :1]  # type: ignore[no-any-return]
        n, length, _ = hidden_states.shape
        first = hidden_states[:, :1]
        heads, size = att.query.out_features // att.attention_head_size, att.attention_head_size
        q = att.query(first).view(n, 1, heads, size).transpose(1, 2)  # [n, h, 1, s]
        k = att.key(hidden_states).view(n, length, heads, size).transpose(1, 2)  # [n, h, L, s]
        v = att.value(hidden_states).view(n, length, heads, size).transpose(1, 2)
        mask = attention_mask[..., :1, :] if attention_mask is not None else None  # the first query's row
        if mask is not None and mask.is_floating_point():  # an additive mask, as eager attention adds it
            mask = mask.to(q.dtype)
        ctx = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, scale=att.scaling, dropout_p=att.dropout.p if att.training else 0.0
        )
        out = layer.attention.output(ctx.transpose(1, 2).reshape(n, 1, heads * size), first)
        return layer.output(layer.intermediate(out), out)  # type: ignore[no-any-return]

    return forward


@contextlib.contextmanager
def first_token_only(layer: Any) -> Iterator[None]:
    """Within the block, `layer` computes the first position only (see `first_token_forward`); never under gradient
    checkpointing (its recompute in the backward pass, after the block, would run the whole layer)."""
    layer.forward = first_token_forward(layer)  # an instance attribute: parameter names are unchanged
    checkpointed = getattr(layer, "gradient_checkpointing", None)
    if checkpointed:
        layer.gradient_checkpointing = False
    try:
        yield
    finally:
        del layer.forward
        if checkpointed:
            layer.gradient_checkpointing = checkpointed


# ----------------------------------------------------------------------------- gradient checkpointing
def enable_checkpointing(model: Any) -> None:
    """Gradient checkpointing of a transformers model (TrainConfig.gradient_checkpointing): each layer keeps its
    input alone and recomputes its activations in the backward pass, restoring the RNG state it ran with (the same
    dropout masks) under torch's non-reentrant checkpoint; a ConfigError if the architecture does not support it."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ConfigError(
            f"gradient_checkpointing: transformers' {type(model).__name__} ({model.config.model_type!r}) does not "
            "support it; set gradient_checkpointing=false"
        )
    kwargs = {"use_reentrant": False, "preserve_rng_state": True}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x; gradient_checkpointing_enable before
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def is_checkpointing(model: Any) -> bool:
    """Whether `enable_checkpointing` was applied to some layer of `model`."""
    return any(getattr(m, "gradient_checkpointing", False) is True for m in model.modules())


# ----------------------------------------------------------------------------- model
class MaskedLM(nn.Module):
    """Encoder + pooling + the MLM head on masked positions only."""

    def __init__(self, mlm_model: Any, pooling: str = "mean") -> None:
        super().__init__()
        self.mlm_model = mlm_model
        self.encoder = mlm_model.base_model
        self.pool = POOLINGS.get(pooling)
        # CLS pooling uses the first position alone: the last layer need not compute the others
        self.first_layer = first_token_layer(self.encoder) if pooling == "cls" else None
        mtype = getattr(mlm_model.config, "model_type", "")
        # a decoder's causal LM: its LM head, and the masked-LM term is masked next-token prediction (a token masked
        # at position i is predicted from the output at i-1, `sentkit.models.decoder.mntp_sum`)
        self.next_token = is_decoder_config(mlm_model.config)
        self.head: Head | None
        if self.next_token:
            self.head = mlm_model.get_output_embeddings()
        else:
            self.head = MLM_HEADS.get(mtype)(mlm_model) if mtype in MLM_HEADS else None
        if self.head is None:
            log.info("no MLM head mapping for %r: computing full logits for the MLM loss", mtype)

    def hidden(self, ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """ids, mask [n, L] -> last hidden states [n, L, d] (no mask: every position is a token)."""
        if mask is None:
            return self.encoder(input_ids=ids).last_hidden_state  # type: ignore[no-any-return]
        return self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state  # type: ignore[no-any-return]

    def layer_states(self, ids: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(last hidden states, the states the pooling averages) [n, L, d]: the same tensor for a pooling of the
        last layer; for first-last-avg, the average of the input layer and the last."""
        if self.pool.last_layer_only:
            h = self.hidden(ids, mask)
            return h, h
        kw = {} if mask is None else {"attention_mask": mask}
        states = self.encoder(input_ids=ids, output_hidden_states=True, **kw).hidden_states
        return states[-1], self.pool.states(states)

    def mlm_sum(self, hidden: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Summed cross-entropy at positions whose label is not ignored, and their number (a decoder: of each
        such token predicted from the output before it; position 0 is never counted).

        The head runs even when nothing is masked (on zero rows), so its parameters always take
        part in the backward pass (DDP expects a gradient for each of them every step)."""
        assert self.head is not None
        if self.next_token:
            return mntp_sum(hidden, labels, self.head)
        sel = labels != IGNORE_INDEX  # [n, L]
        logits = self.head(hidden[sel])  # [m, V]
        return F.cross_entropy(logits.float(), labels[sel], reduction="sum"), int(sel.sum())

    def forward(
        self, ids: torch.Tensor, mask: torch.Tensor | None, labels: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """ids, mask, labels [n, L] -> (pooled embeddings [n, d], summed MLM loss, masked count)."""
        m = mask if mask is not None else torch.ones_like(ids)
        if labels is not None and self.head is None:  # unknown architecture: full logits
            out = self.mlm_model(input_ids=ids, attention_mask=m, output_hidden_states=True)
            sel = labels != IGNORE_INDEX
            loss = F.cross_entropy(out.logits[sel].float(), labels[sel], reduction="sum")
            return self.pool(self.pool.states(out.hidden_states), m), loss, int(sel.sum())
        if labels is None and self.first_layer is not None:
            with first_token_only(self.first_layer):
                first = self.hidden(ids, mask)  # [n, 1, d]
            return first[:, 0], first.new_zeros(()), 0
        hidden, pooled_states = self.layer_states(ids, mask)  # [n, L, d]
        emb = self.pool(pooled_states, m)  # [n, width * d]
        if labels is None:
            return emb, hidden.new_zeros(()), 0
        loss, count = self.mlm_sum(hidden, labels)
        return emb, loss, count
