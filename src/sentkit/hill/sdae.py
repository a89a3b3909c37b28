"""Sequential (Denoising) Autoencoders, SDAE and SAE (Hill et al., 2016).

A GRU/LSTM encoder reads the corrupted sentence N(S | p_o, p_x) (see
:func:`sentkit.hill.noise.add_noise`) and a conditional decoder reconstructs S; the
sentence vector is the encoder's last hidden state. SAE is SDAE with p_o = p_x = 0. With
``pretrained_embeddings`` ("+embs") the encoder's input vectors are GloVe-50d, fixed, and
every GloVe word can be encoded (the decoder keeps the corpus vocabulary).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from sentkit.data.sentences import CorpusSource, TokenizedCorpus, Vocabulary
from sentkit.hill.common import load_corpus, require_vocabulary
from sentkit.hill.configs import SAEConfig, SDAEConfig
from sentkit.hill.noise import add_noise
from sentkit.hill.seq2seq import (
    SPECIALS,
    ConditionalDecoder,
    EncoderDecoders,
    RecurrentModel,
    RNNEncoder,
    batch_order,
    make_embedding,
    pad_batch,
    seeded,
    softmax_candidates,
    train_loop,
    with_eos,
)

log = logging.getLogger(__name__)


class SDAE(RecurrentModel[SDAEConfig]):
    """Learned state: ``in_vocab_`` (encoder input words), ``out_vocab_size_``, ``net_``,
    ``dim_`` (= hidden), ``train_stats_``."""

    method = "sdae"
    config_cls = SDAEConfig

    def _net_state(self) -> dict[str, Any]:
        return {"n_in": len(self.in_vocab_), "n_out": self.out_vocab_size_}

    def _frozen_prefixes(self) -> tuple[str, ...]:
        return ("encoder.emb.",) if self.config.pretrained_embeddings else ()

    def _build_net(self, state: dict[str, Any]) -> EncoderDecoders:
        cfg = self.config
        self.out_vocab_size_ = int(state["n_out"])
        with seeded(cfg.seed):
            if cfg.pretrained_embeddings:
                from sentkit.hill.pretrained import glove_vocabulary

                _, table = glove_vocabulary(SPECIALS, cfg.glove_root)
                emb = make_embedding(table.shape[0], table.shape[1], table)
            else:
                emb = make_embedding(int(state["n_in"]), cfg.emb_dim)
            enc = RNNEncoder(emb, cfg.hidden, cfg.cell)
            dec = ConditionalDecoder(self.out_vocab_size_, cfg.emb_dim, cfg.hidden, cfg.hidden, cfg.cell)
            return EncoderDecoders(enc, [dec])

    def _load_in_vocab(self, d: Any, state: dict[str, Any]) -> Vocabulary:
        if self.config.pretrained_embeddings:
            from sentkit.hill.pretrained import glove_vocabulary

            return glove_vocabulary(SPECIALS, self.config.glove_root)[0]
        return super()._load_in_vocab(d, state)

    def _save_state(self, d: Any) -> dict[str, Any]:
        state = super()._save_state(d)
        if self.config.pretrained_embeddings:
            (d / "vocab.tsv").unlink(missing_ok=True)  # rebuilt from GloVe at load
        return state

    def fit(self, corpus: CorpusSource | TokenizedCorpus) -> SDAE:
        cfg = self.config
        self._setup_threads()
        data = load_corpus(corpus, cfg, self.method)
        out_vocab = Vocabulary(cfg.min_count, max_size=cfg.vocab_size, specials=SPECIALS).fit(data)
        require_vocabulary(data, len(out_vocab) - len(SPECIALS), cfg.min_count, self.method)
        if cfg.pretrained_embeddings:
            from sentkit.hill.pretrained import glove_vocabulary

            in_vocab, _ = glove_vocabulary(SPECIALS, cfg.glove_root)
        else:
            in_vocab = out_vocab
        self.in_vocab_ = in_vocab
        self.out_vocab_size_ = len(out_vocab)
        out_tok, out_off = data.encode_with(out_vocab, unk=True)
        in_tok, in_off = data.encode_with(in_vocab, unk=True) if in_vocab is not out_vocab else (out_tok, out_off)
        lengths = np.diff(out_off)
        usable = np.flatnonzero(lengths > 0)
        self.net_ = net = self._build_net(self._net_state())
        self.dim_ = cfg.hidden
        enc, dec = net.encoder, net.decoders[0]

        def batches(epoch: int) -> Iterator[tuple[int, Callable[[], torch.Tensor]]]:
            rng = np.random.default_rng([cfg.seed, epoch])
            for idx in batch_order(len(usable), cfg.batch_size, rng):
                sents = usable[idx]
                src = [
                    add_noise(in_tok[in_off[i] : in_off[i + 1]][: cfg.max_len].tolist(), cfg.p_drop, cfg.p_swap, rng)
                    for i in sents
                ]
                tgt = [with_eos(out_tok[out_off[i] : out_off[i + 1]].tolist(), cfg.max_len) for i in sents]
                x, xl = pad_batch(src)
                y, _ = pad_batch(tgt)
                cand = softmax_candidates(tgt, self.out_vocab_size_, cfg.softmax_samples, rng)

                def closure(
                    x: torch.Tensor = x, xl: torch.Tensor = xl, y: torch.Tensor = y, cand: torch.Tensor | None = cand
                ) -> torch.Tensor:
                    return dec(enc(x, xl), y, cand)  # type: ignore[no-any-return]

                yield int(sum(len(t) for t in tgt)), closure

        n_batches = -(-len(usable) // cfg.batch_size) * cfg.epochs
        self.train_stats_ = train_loop(
            net,
            batches,
            epochs=cfg.epochs,
            lr=cfg.lr,
            clip=cfg.clip,
            max_steps=cfg.max_steps,
            what=self.method,
            progress=cfg.progress,
            total=n_batches,
        )
        return self


class SAE(SDAE):
    """Sequential autoencoder: SDAE without noise."""

    method = "sae"
    config_cls = SAEConfig
