"""Pooling of token states into one vector per sequence (pure functions), and the registry of poolings.

A pooling is a function ``(hidden [n, L, d], mask [n, L]) -> [n, width * d]`` of the hidden states of
``layers`` averaged (the last layer, -1, for most; 0 is the input embeddings' output):

- ``mean``: the mean over tokens (sentence-transformers' default);
- ``cls``: the first token's state;
- ``mean+max``: the max over tokens, then the mean, concatenated ([max, mean]: sentence-transformers' order
  when both of its pooling flags are on), twice the width;
- ``first-last-avg``: the mean over tokens of the average of the input layer and the last layer (Su et al.
  2021's "first-last-avg", which keeps the input embeddings' word information beside the contextual states);
  sentence-transformers computes it with a WeightedLayerPooling module (weight 1 on the two layers) before
  its mean Pooling;
- ``last-token``: the state of the last non-padding token (the pooling of decoder language models, whose last token
  is the only one that has seen the whole text under causal attention), right for left and right padding alike;
- ``weighted-mean``: a mean whose token weights grow with position, 1, 2, ..., n from the first non-padding token
  (Muennighoff 2022, SGPT: later tokens of a causal model have seen more of the text).

The last two are sentence-transformers' Pooling modes ``lasttoken`` and ``weightedmean``, computed as it does.

``mean-no-specials`` and ``weighted-mean-no-specials`` are ``mean`` and ``weighted-mean`` over the text's own tokens:
the special tokens the tokenizer puts around every text (a Llama or Mistral decoder's BOS, a BERT's [CLS] and [SEP])
are left out (`text_mask`), and the weights of ``weighted-mean-no-specials`` count 1, 2, ... from the first text token.
That is LLM2Vec's convention (llm2vec 0.2.3 pools over an ``embed_mask`` of the text tokenized without special
tokens). sentence-transformers' Pooling cannot express it (its ``include_prompt`` leaves out a prompt, never the
special tokens of a text without one): a folder saved with it holds the Pooling of ``mean`` / ``weighted-mean``,
which sentence-transformers uses, and records the pooling in ``sentkit.json``, which sentkit reloads it with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from sentkit.core.registry import Registry


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over non-padding tokens. hidden [n, L, d], mask [n, L] (1 = token) -> [n, d]."""
    m = mask.to(hidden.dtype).unsqueeze(-1)  # [n, L, 1]
    summed = (hidden * m).sum(dim=1)  # [n, d]
    counts = m.sum(dim=1).clamp(min=1e-9)  # [n, 1]
    return summed / counts


def cls_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The first token's state. hidden [n, L, d] -> [n, d]."""
    return hidden[:, 0]


def max_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Max over non-padding tokens (sentence-transformers' max pooling: padding counts as -1e9). -> [n, d]."""
    return hidden.masked_fill(mask.unsqueeze(-1) == 0, -1e9).amax(dim=1)


def max_mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[max, mean] over non-padding tokens -> [n, 2d]."""
    return torch.cat([max_pool(hidden, mask), mean_pool(hidden, mask)], dim=-1)


def last_token_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The state of the last non-padding token of each row (left or right padding); a row without a token gives
    zeros. hidden [n, L, d], mask [n, L] -> [n, d]."""
    length = mask.shape[1]
    last = length - 1 - mask.flip(1).to(torch.int32).argmax(dim=1)  # [n]: the last position whose mask is 1
    picked = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]  # [n, d]
    return picked * mask.any(dim=1, keepdim=True).to(hidden.dtype)


def position_weights(mask: torch.Tensor) -> torch.Tensor:
    """SGPT's token weights [n, L]: position 1, 2, ... counted from each row's first non-padding token, zero at
    padding (sentence-transformers' ``weightedmean``)."""
    first = mask.to(torch.int32).argmax(dim=1, keepdim=True)  # [n, 1]
    pos = torch.arange(1, mask.shape[1] + 1, device=mask.device).unsqueeze(0) - first  # [n, L]
    return pos * mask


def text_mask(mask: torch.Tensor, prefix: int, suffix: int) -> torch.Tensor:
    """`mask` [n, L] (1 = token, right padding) without the first `prefix` and the last `suffix` tokens of each row:
    the special tokens a tokenizer puts before and after every text."""
    pos = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0)  # [1, L]
    length = mask.sum(dim=1, keepdim=True)  # [n, 1]
    return mask * ((pos >= prefix) & (pos < length - suffix)).to(mask.dtype)


def weighted_mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Position-weighted mean over non-padding tokens (`position_weights`). hidden [n, L, d] -> [n, d]."""
    w = position_weights(mask).to(hidden.dtype).unsqueeze(-1)  # [n, L, 1]
    return (hidden * w).sum(dim=1) / w.sum(dim=1).clamp(min=1e-9)


@dataclass(frozen=True)
class Pooling:
    """A pooling function, the hidden-state layers it averages first (another than the last: a
    sentence-transformers WeightedLayerPooling module does it), its width in multiples of d, and the flags of
    sentence-transformers' Pooling module that compute the same (none: a folder cannot be saved with it, since
    sentence-transformers would load it with another pooling). ``specials`` False: the encoder pools over the text
    tokens alone (`text_mask`), which sentence-transformers cannot express (it pools with the same flags and the
    special tokens)."""

    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    layers: tuple[int, ...] = (-1,)
    width: int = 1
    st_flags: tuple[str, ...] = ()
    specials: bool = True

    @property
    def last_layer_only(self) -> bool:
        return self.layers == (-1,)

    def __call__(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.fn(hidden, mask)

    def states(self, hidden_states: Sequence[torch.Tensor]) -> torch.Tensor:
        """The average of this pooling's layers, from a model's ``hidden_states`` (input layer first)."""
        if self.last_layer_only:
            return hidden_states[-1]
        return torch.stack([hidden_states[i] for i in self.layers]).mean(dim=0)


POOLINGS: Registry[Pooling] = Registry("pooling")
POOLINGS.add("mean", Pooling(mean_pool, st_flags=("pooling_mode_mean_tokens",)))
POOLINGS.add("cls", Pooling(cls_pool, st_flags=("pooling_mode_cls_token",)))
POOLINGS.add(
    "mean+max", Pooling(max_mean_pool, width=2, st_flags=("pooling_mode_max_tokens", "pooling_mode_mean_tokens"))
)
POOLINGS.add("first-last-avg", Pooling(mean_pool, layers=(0, -1), st_flags=("pooling_mode_mean_tokens",)))
POOLINGS.add("last-token", Pooling(last_token_pool, st_flags=("pooling_mode_lasttoken",)))
POOLINGS.add("weighted-mean", Pooling(weighted_mean_pool, st_flags=("pooling_mode_weightedmean_tokens",)))
# LLM2Vec's: the text's tokens alone (see the module docstring)
POOLINGS.add("mean-no-specials", Pooling(mean_pool, st_flags=("pooling_mode_mean_tokens",), specials=False))
POOLINGS.add(
    "weighted-mean-no-specials",
    Pooling(weighted_mean_pool, st_flags=("pooling_mode_weightedmean_tokens",), specials=False),
)


def layer_weights(pooling: Pooling, num_layers: int) -> list[float]:
    """The weights of sentence-transformers' WeightedLayerPooling (hidden states 0..num_layers, layer_start 0) that
    average this pooling's layers."""
    chosen = {i % (num_layers + 1) for i in pooling.layers}
    return [1.0 if i in chosen else 0.0 for i in range(num_layers + 1)]


def pooling_of(flags: set[str], weights: list[float] | None) -> str | None:
    """The registered pooling with these Pooling flags on and, when given, these layer weights (None: the last
    layer alone); None when no pooling matches."""
    for name in POOLINGS.names():
        p = POOLINGS.get(name)
        if not p.st_flags or set(p.st_flags) != flags or not p.specials:  # sentence-transformers' own poolings
            continue
        if weights is None and p.last_layer_only:
            return name
        if weights is not None and not p.last_layer_only and len(weights) > 1:
            on = [w for w in weights if w != 0]
            if len(set(on)) == 1 and weights == [on[0] * w for w in layer_weights(p, len(weights) - 1)]:
                return name
    return None


def saveable_poolings() -> list[str]:
    """The poolings a sentence-transformers folder can hold (what training may use: its pooling modules pool over
    every token, so the ``-no-specials`` poolings are for encoding, `load_with`)."""
    return [n for n in POOLINGS.names() if POOLINGS.get(n).st_flags and POOLINGS.get(n).specials]


def recorded_pooling(recorded: Any, st_pooling: str | None) -> str | None:
    """The pooling a folder's ``sentkit.json`` records (`recorded`), where it is a registered pooling that
    sentence-transformers saves as `st_pooling` (the one its Pooling module reads: ``mean`` for
    ``mean-no-specials``); else `st_pooling`."""
    if not (isinstance(recorded, str) and recorded in POOLINGS and st_pooling is not None and st_pooling in POOLINGS):
        return st_pooling
    mine, theirs = POOLINGS.get(recorded), POOLINGS.get(st_pooling)
    same = mine.st_flags == theirs.st_flags and mine.layers == theirs.layers
    return recorded if same else st_pooling


def load_with(pooling: str) -> str:
    """How to use a pooling at load time (the way for one a folder cannot hold): no command takes it."""
    return (
        f'load the model with it: sentkit evaluate --pooling {pooling}, sentkit.load(NAME, pooling="{pooling}") in '
        f'Python, or method = "pretrained", settings = {{ model = NAME, pooling = "{pooling}" }} in an experiment cell'
    )
