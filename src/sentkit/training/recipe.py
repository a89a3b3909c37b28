"""What a transformer training method is: a batch builder plus an objective, plugged into the one
loop (`sentkit.training.loop.train`) that owns resume, DDP, gradient caching, precision and
checkpoints.

A method subclasses `Recipe`:

- ``prepare(cfg, out)`` (optional): one-off work before the model loads (MLM's vocabulary);
- ``store_spec()``: the token store it reads (documents or sentences, and a length rule);
- ``units(store)``: how many units (documents, texts, packed sequences) one epoch has;
- ``batch(store, units, step)``: this rank's token ids for those units, randomness seeded by
  (seed, step, unit) so that a unit's data never depends on which rank or micro-batch it lands in;
- ``module()``: the trainable `TrainModule`, whose ``forward(batch, group, seeds)`` embeds the
  micro-batch `group` and returns its contrastive views and summed local losses;
- ``contrastive(a, p)``: the loss over the gathered views of the whole step, if the method has one.

Its name (``name``) is listed in `sentkit.core.methods.METHODS`, which turns the class into a method with
`Recipe.as_method` (train = the loop with this recipe; load = `load_trained`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from sentkit.core.methods import Method
from sentkit.data.corpus import Fix
from sentkit.training.batching import length_chunks
from sentkit.training.config import TrainConfig

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- data of one step
@dataclass
class Batch:
    """This rank's data of one optimizer step. `num_units` units; methods subclass it."""

    num_units: int
    counts: dict[str, float] = field(default_factory=dict)  # local normalisers of each summed loss
    tokens: int = 0  # tokens fed to the model (throughput)


@dataclass
class StepOut:
    """A micro-batch's forward: contrastive views ([k, d] each, row i of both is a pair) and
    summed local losses (divided by the step's global counts by the loop)."""

    views: tuple[torch.Tensor, torch.Tensor] | None
    sums: dict[str, torch.Tensor]


@dataclass(frozen=True)
class StoreSpec:
    """The token store a method trains from."""

    unit: str = "document"  # "document" or "sentence"
    min_tokens: int = 1  # shorter units are skipped at preparation
    max_tokens: int | None = None  # longer documents are cut into pieces of this size


def dropout_seed(seed: int, rank: int, step: int, micro: int, chunk: int) -> int:
    """The dropout stream of one forward chunk: a function of the run's seed, the process rank, the
    step, the micro-batch and the chunk, so a replay (gradient caching, resume) draws the same masks."""
    return int(np.random.SeedSequence([seed, rank, step, micro, chunk, 0xD50]).generate_state(1, np.uint64)[0] >> 1)


@dataclass(frozen=True)
class Seeds:
    """Where a forward stands in the run: picks the dropout stream of each of its chunks."""

    seed: int
    rank: int
    step: int
    micro: int

    def chunk(self, c: int) -> int:
        return dropout_seed(self.seed, self.rank, self.step, self.micro, c)


class TrainModule(nn.Module):
    """The trainable part of a method. Holds the masked-LM (saved at the end as the encoder) and
    whatever the objective adds (a decoder, an MLP); ``forward`` runs one micro-batch."""

    mlm_model: Any
    token_budget: int = 1024
    autocast: Callable[[], Any]

    def forward(self, batch: Batch, group: Sequence[int], seeds: Seeds) -> StepOut:  # pragma: no cover
        raise NotImplementedError

    def run_chunks(
        self, lengths: Sequence[int], seeds: Seeds, fn: Callable[[list[int]], Any], *, offset: int = 0
    ) -> list[tuple[list[int], Any]]:
        """Call `fn(indices)` on length-sorted chunks of at most `token_budget` padded tokens, each
        under its own dropout seed; returns [(indices, result)] in chunk order."""
        out: list[tuple[list[int], Any]] = []
        device = next(self.parameters()).device
        for c, chunk in enumerate(length_chunks(list(lengths), self.token_budget)):
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                torch.manual_seed(seeds.chunk(offset + c))
                with self.autocast():
                    out.append((chunk, fn(chunk)))
        return out


def in_order(parts: list[tuple[list[int], torch.Tensor]], n: int) -> torch.Tensor:
    """Rows computed chunk by chunk ([len(idx), ...] each) back in index order [n, ...]."""
    order = [i for idx, _ in parts for i in idx]
    stacked = torch.cat([t for _, t in parts])
    inv = torch.empty(n, dtype=torch.long)
    inv[torch.tensor(order, dtype=torch.long)] = torch.arange(len(order))
    return stacked[inv.to(stacked.device)]


def freeze_unused(module: nn.Module, used: nn.Module | Sequence[nn.Module]) -> int:
    """Turn off gradients of parameters that no module of `used` holds (DDP needs every trainable
    parameter to get a gradient each step); returns how many tensors were frozen."""
    keep = {id(p) for m in ([used] if isinstance(used, nn.Module) else used) for p in m.parameters()}
    frozen = 0
    for p in module.parameters():
        if id(p) not in keep and p.requires_grad:
            p.requires_grad_(False)
            frozen += 1
    return frozen


# ----------------------------------------------------------------------------- a method
class Recipe:
    """Base of every transformer method (see the module docstring)."""

    name: ClassVar[str] = ""
    config_cls: ClassVar[type[TrainConfig]] = TrainConfig
    unit_name: ClassVar[str] = "unit"  # what a unit is called in messages ("document", "text", ...)

    def __init__(self, cfg: Any, mlm_model: Any, tokenizer: Any, max_len: int) -> None:
        from sentkit.models import decoder
        from sentkit.models.hub import special_affixes

        decoder.check_pooling(mlm_model.config, getattr(cfg, "pooling", "mean"), getattr(cfg, "attention", None))
        if decoder.is_decoder_config(mlm_model.config):  # its padding token, EOS for last-token pooling
            decoder.prepare(mlm_model, tokenizer, getattr(cfg, "pooling", "mean"))
        if getattr(cfg, "attention", None) is not None:  # --set attention=bidirectional
            decoder.set_attention(mlm_model, cfg.attention)
        rank = getattr(cfg, "lora_r", None)
        if rank is None or rank > 0:  # --set lora_r=16 (unset: a large decoder's default); merged when saved
            from sentkit.models import lora

            rank = lora.default_rank(mlm_model) if rank is None else rank
            if rank:
                lora.add_lora(mlm_model, rank, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout)
        if not rank and getattr(cfg, "lora_alpha", None) is not None:
            log.warning("lora_alpha=%s has no effect: no LoRA adapters (set lora_r to add them)", cfg.lora_alpha)
        if getattr(cfg, "gradient_checkpointing", False):  # --set gradient_checkpointing=true: less memory, same grads
            from sentkit.models.mlm import enable_checkpointing

            enable_checkpointing(mlm_model)
        self.cfg = cfg
        self.mlm_model = mlm_model
        self.tokenizer = tokenizer
        self.max_len = max_len  # the model's longest sequence, special tokens included
        self.prefix, self.suffix = special_affixes(tokenizer)
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
        self.loss_names: tuple[str, ...] = ()  # the summed losses and "contrastive", as logged

    @classmethod
    def as_method(cls, name: str) -> Method:
        """The `sentkit.core.methods.Method` that `METHODS` names by this class: the one loop runs it."""
        from functools import partial

        from sentkit.training.loop import train

        if cls.name != name:
            raise ValueError(
                f"{cls.__name__}.name is {cls.name!r} but sentkit.core.methods.METHODS lists it as {name!r}"
            )
        return Method(name, cls.config_cls, partial(train, recipe_cls=cls), load_trained)

    @classmethod
    def prepare(cls, cfg: Any, out: Path) -> None:
        """One-off work in the output folder before any process loads the model (a vocabulary
        trained on the corpus); the loop runs it in rank 0 alone while the others wait."""

    @classmethod
    def load_model(cls, cfg: Any, out: Path) -> tuple[Any, Any]:
        """(masked-LM model, or the causal LM of a decoder base, and tokenizer) to train; torch's generator is
        seeded by the loop. A decoder keeps its LM head: a method's masked-LM term becomes masked next-token
        prediction (`sentkit.models.mlm.MaskedLM`)."""
        from sentkit.models.decoder import is_decoder_model
        from sentkit.models.hub import load_mlm, resolve

        causal = bool(cfg.model) and is_decoder_model(resolve(cfg.model))
        return load_mlm(cfg.model, from_scratch=cfg.from_scratch, causal=causal)

    @property
    def has_contrastive(self) -> bool:
        return False

    def length_rule(self) -> Any:
        """How the store's error messages word the minimum length and its fix: a fixed minimum here;
        DeCLUTR's is its span rule, SimCSE's and TSDAE's their `min_tokens`."""
        from sentkit.data.store import MinTokensRule

        return MinTokensRule(None)

    def more_units_fix(self, store: Any, want: int) -> Fix | None:
        """A setting that gives at least `want` units when the corpus has fewer than a batch."""
        return None

    def store_spec(self) -> StoreSpec:
        return StoreSpec()

    def units(self, store: Any) -> int:
        return len(store)

    def batch(self, store: Any, units: list[int], step: int) -> Batch:  # pragma: no cover
        raise NotImplementedError

    def module(self) -> TrainModule:  # pragma: no cover
        raise NotImplementedError

    def contrastive(self, a: torch.Tensor, p: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def encoder_settings(self) -> dict[str, Any]:
        """How the saved encoder pools (sentence-transformers layout)."""
        return {"pooling": self.cfg.pooling}

    def card(self, steps: int, store: Any) -> str:
        """The model card's method paragraph (Markdown)."""
        return f"Trained with `{self.name}` for {steps} steps."


def load_trained(path: Path) -> Any:
    """The encoder a transformer method saved (the same as sentence-transformers loads)."""
    from sentkit.models.transformer import TransformerEncoder

    return TransformerEncoder.from_pretrained(str(path))
