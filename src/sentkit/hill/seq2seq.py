"""Recurrent building blocks shared by SDAE/SAE, SkipThought, NMT, DictRep and CaptionRep:
padding, a GRU/LSTM sentence encoder, a decoder conditioned on the sentence vector, the
training loop (Adam, gradient clipping, ``max_steps``, words/s logging) and a base class
that encodes, saves and loads any model whose ``net_`` has an ``encoder``."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from sentkit.core.errors import InputError
from sentkit.data.sentences import Vocabulary
from sentkit.hill.common import HillModel, RateLogger
from sentkit.hill.configs import HillConfig

log = logging.getLogger(__name__)

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
SPECIALS = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

C = TypeVar("C", bound=HillConfig)


def pad_batch(seqs: list[list[int]], pad: int = PAD_ID) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists: (long [B, T], lengths long [B]); empty lists get length 1 (a pad)."""
    lengths = [max(1, len(s)) for s in seqs]
    out = torch.full((len(seqs), max(lengths) if seqs else 1), pad, dtype=torch.long)
    for i, s in enumerate(seqs):
        if s:
            out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out, torch.as_tensor(lengths, dtype=torch.long)


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run a block (module construction) under torch seed ``seed``; global RNG restored after."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def make_rnn(cell: str, input_size: int, hidden: int) -> nn.RNNBase:
    cls = {"gru": nn.GRU, "lstm": nn.LSTM}[cell]
    return cls(input_size, hidden, batch_first=True)


def make_embedding(n: int, dim: int, pretrained: np.ndarray | None = None) -> nn.Embedding:
    """An embedding [n, dim]; with ``pretrained`` ([n, dim]) it is copied in and frozen."""
    if pretrained is not None:
        if pretrained.shape != (n, dim):
            raise ValueError(f"pretrained embeddings {pretrained.shape} != {(n, dim)}")
        return nn.Embedding.from_pretrained(
            torch.from_numpy(np.asarray(pretrained, np.float32)), freeze=True, padding_idx=PAD_ID
        )
    return nn.Embedding(n, dim, padding_idx=PAD_ID)


class RNNEncoder(nn.Module):
    """Embedding + GRU/LSTM; the sentence vector is the last hidden state. [B, T] -> [B, H]."""

    def __init__(self, emb: nn.Embedding, hidden: int, cell: str) -> None:
        super().__init__()
        self.emb = emb
        self.rnn = make_rnn(cell, emb.embedding_dim, hidden)
        # vocabulary expansion: ids >= emb.num_embeddings index rows of `extra` (not saved)
        self.register_buffer("extra", torch.zeros(0, emb.embedding_dim), persistent=False)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        n = self.emb.num_embeddings
        extra: torch.Tensor = self.extra  # type: ignore[assignment]
        if extra.shape[0] == 0:
            return self.emb(ids)  # type: ignore[no-any-return]
        base = self.emb(ids.clamp(max=n - 1))
        ext = extra[(ids - n).clamp(min=0)]
        return torch.where((ids >= n).unsqueeze(-1), ext, base)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)  # [B, T, E]
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, h = self.rnn(packed)
        if isinstance(h, tuple):  # LSTM: (h, c)
            h = h[0]
        return h[-1]  # [B, H]


class BOWEncoder(nn.Module):
    """Sum of word embeddings (padding is a zero row). [B, T] -> [B, E]."""

    def __init__(self, emb: nn.Embedding) -> None:
        super().__init__()
        self.emb = emb

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        mask = (ids != PAD_ID).unsqueeze(-1).float()  # [B, T, 1]
        return (self.emb(ids) * mask).sum(dim=1)


class ConditionalDecoder(nn.Module):
    """A GRU/LSTM language model over ``n_words`` conditioned on a sentence vector ``ctx``:
    the initial state is a projection of ctx and ctx is fed with every input word."""

    def __init__(self, n_words: int, emb_dim: int, hidden: int, ctx_dim: int, cell: str) -> None:
        super().__init__()
        self.cell = cell
        self.emb = nn.Embedding(n_words, emb_dim, padding_idx=PAD_ID)
        self.init = nn.Linear(ctx_dim, hidden)
        self.rnn = make_rnn(cell, emb_dim + ctx_dim, hidden)
        self.out = nn.Linear(hidden, n_words)

    def forward(self, ctx: torch.Tensor, targets: torch.Tensor, candidates: torch.Tensor | None = None) -> torch.Tensor:
        """Mean cross-entropy of ``targets`` [B, T] (ending in EOS, padded) given ctx [B, C].

        With ``candidates`` (sorted unique word ids that include every id of ``targets``),
        the softmax runs over those words only: a sampled softmax (Jean et al., 2015)."""
        b, t = targets.shape
        inp = torch.cat(
            [torch.full((b, 1), BOS_ID, dtype=torch.long, device=targets.device), targets[:, :-1]], dim=1
        )  # teacher forcing, [B, T]
        x = torch.cat([self.emb(inp), ctx.unsqueeze(1).expand(b, t, ctx.shape[1])], dim=-1)
        h0 = torch.tanh(self.init(ctx)).unsqueeze(0)  # [1, B, H]
        state: Any = (h0, torch.zeros_like(h0)) if self.cell == "lstm" else h0
        y, _ = self.rnn(x, state)  # [B, T, H]
        if candidates is None:
            logits = self.out(y)  # [B, T, V]
            return nn.functional.cross_entropy(logits.reshape(b * t, -1), targets.reshape(-1), ignore_index=PAD_ID)
        w = self.out.weight[candidates]  # [K, H]
        logits = y @ w.T + self.out.bias[candidates]  # [B, T, K]
        local = torch.searchsorted(candidates, targets)  # position of each target among candidates
        flat = local.reshape(-1).masked_fill(targets.reshape(-1) == PAD_ID, -100)
        return nn.functional.cross_entropy(logits.reshape(b * t, -1), flat, ignore_index=-100)


def softmax_candidates(
    targets: list[list[int]], n_words: int, samples: int, rng: np.random.Generator
) -> torch.Tensor | None:
    """Sorted unique ids: every target word plus ``samples`` words drawn uniformly;
    None (full softmax) when ``samples`` is 0 or the union would cover most of the vocabulary."""
    if samples <= 0 or samples >= n_words // 2:
        return None
    ids = np.unique(
        np.concatenate(
            [np.fromiter((i for t in targets for i in t), dtype=np.int64), rng.integers(0, n_words, size=samples)]
        )
    )
    return torch.from_numpy(ids)


class EncoderDecoders(nn.Module):
    """One sentence encoder and any number of conditional decoders."""

    def __init__(self, encoder: nn.Module, decoders: Sequence[nn.Module]) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoders = nn.ModuleList(decoders)


def with_eos(ids: list[int], max_len: int) -> list[int]:
    return [*ids[:max_len], EOS_ID]


def train_loop(
    net: nn.Module,
    batches: Callable[[int], Iterator[tuple[int, Callable[[], torch.Tensor]]]],
    *,
    epochs: int,
    lr: float,
    clip: float,
    max_steps: int | None,
    what: str,
    progress: bool,
    total: int | None = None,
) -> dict[str, float]:
    """Adam over ``batches(epoch)``, which yields (words in batch, closure -> loss).
    Stops after ``max_steps`` optimiser steps; returns words, seconds, words/s, the first step's loss and the last
    smoothed loss (an exponential moving average, 0.95)."""
    from tqdm.auto import tqdm

    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr)
    rate = RateLogger(f"{what} training")
    step, loss_ema, first_loss = 0, float("nan"), float("nan")
    net.train()
    with tqdm(
        total=total if max_steps is None else min(max_steps, total or max_steps),
        desc=what,
        unit=" step",
        disable=not progress,
        mininterval=1.0,
    ) as bar:
        for epoch in range(epochs):
            for words, closure in batches(epoch):
                opt.zero_grad(set_to_none=True)
                loss = closure()
                loss.backward()
                nn.utils.clip_grad_norm_(params, clip)
                opt.step()
                value = float(loss.detach())
                if np.isnan(loss_ema):
                    first_loss = loss_ema = value
                else:
                    loss_ema = 0.95 * loss_ema + 0.05 * value
                rate.update(words)
                step += 1
                bar.update(1)
                if step % 50 == 0:
                    bar.set_postfix(loss=f"{loss_ema:.3f}", wps=f"{rate.rate:.0f}")
                if max_steps is not None and step >= max_steps:
                    break
            if max_steps is not None and step >= max_steps:
                break
    net.eval()
    stats = rate.close()
    stats.update(steps=float(step), loss=loss_ema, first_loss=first_loss)
    return stats


def batch_order(n: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffled index batches of size ``batch_size`` (the last may be smaller)."""
    perm = rng.permutation(n)
    return [perm[i : i + batch_size] for i in range(0, n, batch_size)]


class RecurrentModel(HillModel[C]):
    """Base of torch models: learned state ``in_vocab_`` (Vocabulary of the encoder input),
    ``net_`` (nn.Module with ``.encoder``) and ``dim_``. Subclasses implement ``fit``,
    ``_build_net(state)`` and may add entries to ``_extra_state``."""

    max_encode_len = 100

    def _build_net(self, state: dict[str, Any]) -> nn.Module:
        raise NotImplementedError

    def _net_state(self) -> dict[str, Any]:
        """JSON-able facts needed to rebuild ``net_`` (sizes, vocab sizes)."""
        return {}

    def _input_ids(self, text: str) -> list[int]:
        return self.in_vocab_.encode(self.tokenize(text), unk=True)[: self.max_encode_len]

    def _frozen_prefixes(self) -> tuple[str, ...]:
        """State-dict keys not saved (frozen pre-trained tables rebuilt at load)."""
        return ()

    def _setup_threads(self) -> None:
        threads = getattr(self.config, "threads", None)
        if threads:
            torch.set_num_threads(int(threads))

    @torch.no_grad()
    def _encode(self, texts: list[str]) -> np.ndarray:
        """float32 [n, dim]: the encoder's last hidden state, the texts as one padded batch."""
        self._check_fitted("net_")
        net: Any = self.net_.eval()
        device = next(net.parameters()).device
        x, lengths = pad_batch([self._input_ids(t) for t in texts])
        return net.encoder(x.to(device), lengths).float().cpu().numpy()  # type: ignore[no-any-return]

    def _save_state(self, d: Path) -> dict[str, Any]:
        self._check_fitted("net_")
        from sentkit.core.io import atomic_path

        self.in_vocab_.save(d / "vocab.tsv")
        frozen = self._frozen_prefixes()
        sd = {k: v for k, v in self.net_.state_dict().items() if not k.startswith(frozen)}
        with atomic_path(d / "model.pt") as tmp:
            torch.save(sd, tmp)
        return {"dim": self.dim_, "net": self._net_state(), "train_stats": getattr(self, "train_stats_", {})}

    def _load_state(self, d: Path, state: dict[str, Any]) -> None:
        self.in_vocab_ = self._load_in_vocab(d, state)
        self.dim_ = int(state["dim"])
        self.train_stats_ = state.get("train_stats", {})
        self._restore_extra(d, state)
        net = self._build_net(state["net"])
        sd = torch.load(d / "model.pt", map_location="cpu", weights_only=True)
        missing, unexpected = net.load_state_dict(sd, strict=False)
        bad = [k for k in missing if not k.startswith(self._frozen_prefixes())]
        if bad or unexpected:
            raise InputError(f"{d}: model.pt does not match the config ({bad or unexpected})")
        self.net_ = net.eval()

    def _load_in_vocab(self, d: Path, state: dict[str, Any]) -> Vocabulary:
        return Vocabulary.load(d / "vocab.tsv")

    def _restore_extra(self, d: Path, state: dict[str, Any]) -> None:
        """Hook: restore extra learned state before the net is rebuilt."""


def json_dump(path: Path, obj: Any) -> None:
    from sentkit.core.io import atomic_write_text

    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")
