"""Uni-skip SkipThought (Kiros et al., 2015, as compared by Hill et al., 2016).

A GRU encoder reads S(i); two conditional GRU decoders predict S(i-1) and S(i+1) of the same
document. After training, the vocabulary is expanded as in the original: a linear map
``[g_w, 1] @ W ~ e_w`` from GloVe-50d vectors to the trained input embeddings is fitted by
least squares on the words both know, and every GloVe word the corpus vocabulary lacks gets
``[g_w, 1] @ W`` as its input embedding.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sentkit.data.sentences import CorpusSource, TokenizedCorpus, Vocabulary
from sentkit.hill.common import load_corpus, require_neighbours, require_vocabulary, save_array
from sentkit.hill.configs import SkipThoughtConfig
from sentkit.hill.seq2seq import (
    SPECIALS,
    UNK_ID,
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


def fit_linear_map(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares W with bias: [x, 1] @ W ~ y. x: [n, a], y: [n, b] -> W [a + 1, b]."""
    xa = np.concatenate([x, np.ones((x.shape[0], 1), dtype=x.dtype)], axis=1).astype(np.float64)
    w, *_ = np.linalg.lstsq(xa, y.astype(np.float64), rcond=None)
    return w.astype(np.float32)


def apply_linear_map(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """[x, 1] @ W: [n, a] -> float32 [n, b]."""
    return (x @ w[:-1] + w[-1]).astype(np.float32)


def triples(doc_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Indices i whose S(i-1), S(i), S(i+1) are non-empty and in one document."""
    n = doc_ids.shape[0]
    if n < 3:
        return np.zeros(0, dtype=np.int64)
    i = np.arange(1, n - 1)
    ok = (doc_ids[i - 1] == doc_ids[i]) & (doc_ids[i + 1] == doc_ids[i])
    ok &= (lengths[i - 1] > 0) & (lengths[i] > 0) & (lengths[i + 1] > 0)
    return i[ok]


class SkipThought(RecurrentModel[SkipThoughtConfig]):
    """Learned state: ``in_vocab_``, ``net_`` (encoder + previous/next decoders), ``dim_``,
    ``expansion_`` (W [51, emb_dim] or None), ``train_stats_``."""

    method = "skipthought"
    config_cls = SkipThoughtConfig

    def _net_state(self) -> dict[str, Any]:
        return {"n_words": len(self.in_vocab_)}

    def _build_net(self, state: dict[str, Any]) -> EncoderDecoders:
        cfg = self.config
        n = int(state["n_words"])
        with seeded(cfg.seed):
            enc = RNNEncoder(make_embedding(n, cfg.emb_dim), cfg.hidden, cfg.cell)
            decs = [ConditionalDecoder(n, cfg.emb_dim, cfg.hidden, cfg.hidden, cfg.cell) for _ in range(2)]
            net = EncoderDecoders(enc, decs)
        if getattr(self, "expansion_", None) is not None:
            self._attach_expansion(net)
        return net

    def fit(self, corpus: CorpusSource | TokenizedCorpus) -> SkipThought:
        cfg = self.config
        self._setup_threads()
        data = load_corpus(corpus, cfg, self.method)
        vocab = Vocabulary(cfg.min_count, max_size=cfg.vocab_size, specials=SPECIALS).fit(data)
        require_vocabulary(data, len(vocab) - len(SPECIALS), cfg.min_count, self.method)
        self.in_vocab_ = vocab
        self.expansion_: np.ndarray | None = None
        tok, off = data.encode_with(vocab, unk=True)
        centre = triples(data.doc_ids, np.diff(off))
        require_neighbours(data, centre.size, self.method, "documents of at least 3 consecutive sentences")
        self.net_ = net = self._build_net(self._net_state())
        self.dim_ = cfg.hidden
        enc, prev_dec, next_dec = net.encoder, net.decoders[0], net.decoders[1]

        def seq(i: int) -> list[int]:
            return tok[off[i] : off[i + 1]].tolist()  # type: ignore[no-any-return]

        def batches(epoch: int) -> Iterator[tuple[int, Callable[[], torch.Tensor]]]:
            rng = np.random.default_rng([cfg.seed, epoch])
            for idx in batch_order(len(centre), cfg.batch_size, rng):
                c = centre[idx]
                x, xl = pad_batch([seq(i)[: cfg.max_len] for i in c])
                prev = [with_eos(seq(i - 1), cfg.max_len) for i in c]
                nxt = [with_eos(seq(i + 1), cfg.max_len) for i in c]
                yp, _ = pad_batch(prev)
                yn, _ = pad_batch(nxt)
                cand = softmax_candidates(prev + nxt, len(vocab), cfg.softmax_samples, rng)

                def closure(
                    x: torch.Tensor = x,
                    xl: torch.Tensor = xl,
                    yp: torch.Tensor = yp,
                    yn: torch.Tensor = yn,
                    cand: torch.Tensor | None = cand,
                ) -> torch.Tensor:
                    h = enc(x, xl)
                    return prev_dec(h, yp, cand) + next_dec(h, yn, cand)  # type: ignore[no-any-return]

                words = int(xl.sum()) + sum(map(len, prev)) + sum(map(len, nxt))
                yield words, closure

        total = -(-len(centre) // cfg.batch_size) * cfg.epochs
        self.train_stats_ = train_loop(
            net,
            batches,
            epochs=cfg.epochs,
            lr=cfg.lr,
            clip=cfg.clip,
            max_steps=cfg.max_steps,
            what=self.method,
            progress=cfg.progress,
            total=total,
        )
        if cfg.expand_vocab:
            self.expansion_ = self._fit_expansion()
            if self.expansion_ is not None:
                self._attach_expansion(net)
        return self

    # -- vocabulary expansion -------------------------------------------------------------
    def _fit_expansion(self) -> np.ndarray | None:
        from sentkit.hill.pretrained import glove_rows

        words = self.in_vocab_.words_[len(SPECIALS) :]
        g, found = glove_rows(words, self.config.glove_root)
        encoder: Any = self.net_.encoder
        emb = encoder.emb.weight.detach().cpu().numpy()[len(SPECIALS) :]
        if found.sum() < 2:  # the trained model is kept, without expansion
            log.warning("vocabulary expansion skipped: only %d corpus word(s) have GloVe vectors", int(found.sum()))
            return None
        w = fit_linear_map(g[found], emb[found])
        log.info("vocabulary expansion: linear map fitted on %d words", int(found.sum()))
        return w

    def _attach_expansion(self, net: EncoderDecoders) -> None:
        """Give the encoder rows for every GloVe word outside ``in_vocab_``."""
        from sentkit.hill.pretrained import glove_table

        assert self.expansion_ is not None
        index, vectors = glove_table(self.config.glove_root)
        extra_words = [w for w in sorted(index, key=index.__getitem__) if w not in self.in_vocab_]
        rows = np.array([index[w] for w in extra_words], dtype=np.int64)
        n = len(self.in_vocab_)
        self.extra_index_ = {w: n + i for i, w in enumerate(extra_words)}
        extra = apply_linear_map(vectors[rows], self.expansion_)  # [n_extra, emb_dim]
        net.encoder.extra = torch.from_numpy(extra)

    def _input_ids(self, text: str) -> list[int]:
        if getattr(self, "expansion_", None) is None:
            return super()._input_ids(text)
        idx, extra = self.in_vocab_.index_, self.extra_index_
        return [idx.get(w, extra.get(w, UNK_ID)) for w in self.tokenize(text)][: self.max_encode_len]

    def _save_state(self, d: Path) -> dict[str, Any]:
        state = super()._save_state(d)
        state["expanded"] = self.expansion_ is not None
        if self.expansion_ is not None:
            save_array(d / "expansion.npy", self.expansion_)
        return state

    def _restore_extra(self, d: Path, state: dict[str, Any]) -> None:
        self.expansion_ = np.load(d / "expansion.npy") if state.get("expanded") else None
