"""The encoder of an RNN translation model (Hill et al.'s NMT En->Fr / En->De baselines).

Bring parallel text: ``corpus`` is a ``.tsv``/``.txt`` file of ``source<TAB>target`` lines
or a ``.jsonl`` file with ``source`` and ``target`` fields (names are settings). A GRU/LSTM
encoder reads the source sentence and a conditional decoder generates the translation; the
sentence vector is the encoder's last hidden state (source language only).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sentkit.baselines.configs import NMTConfig
from sentkit.baselines.seq2seq import (
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
from sentkit.data.corpus import CorpusError
from sentkit.data.sentences import Vocabulary, tokenize

log = logging.getLogger(__name__)


def read_parallel(path: str | Path, source_field: str = "source", target_field: str = "target",
                  limit: int | None = None) -> list[tuple[str, str]]:
    """(source, target) pairs from a TSV/TXT (``src<TAB>tgt``) or JSONL file."""
    p = Path(path)
    if not p.is_file():
        raise CorpusError(f"parallel corpus {p} not found: give a .tsv file of source<TAB>target "
                          "lines or a .jsonl file with source/target fields")
    pairs: list[tuple[str, str]] = []
    with p.open(encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            if p.suffix.lower() in (".jsonl", ".json"):
                obj = json.loads(line)
                if source_field not in obj or target_field not in obj:
                    raise CorpusError(f"{p}:{i}: needs fields {source_field!r} and {target_field!r}")
                pairs.append((str(obj[source_field]), str(obj[target_field])))
            else:
                parts = line.rstrip("\n").split("\t")
                if len(parts) < 2:
                    raise CorpusError(f"{p}:{i}: expected source<TAB>target")
                pairs.append((parts[0], parts[1]))
            if limit is not None and len(pairs) >= limit:
                break
    if not pairs:
        raise CorpusError(f"parallel corpus {p} holds no sentence pairs")
    return pairs


class NMTEncoder(RecurrentModel[NMTConfig]):
    """Learned state: ``in_vocab_`` (source words), ``target_vocab_``, ``net_``, ``dim_``."""

    method = "nmt"
    config_cls = NMTConfig

    def _net_state(self) -> dict[str, Any]:
        return {"n_src": len(self.in_vocab_), "n_tgt": len(self.target_vocab_)}

    def _build_net(self, state: dict[str, Any]) -> EncoderDecoders:
        cfg = self.config
        with seeded(cfg.seed):
            enc = RNNEncoder(make_embedding(int(state["n_src"]), cfg.emb_dim), cfg.hidden, cfg.cell)
            dec = ConditionalDecoder(int(state["n_tgt"]), cfg.emb_dim, cfg.hidden, cfg.hidden, cfg.cell)
            return EncoderDecoders(enc, [dec])

    def fit(self, corpus: str | Path | list[tuple[str, str]]) -> NMTEncoder:
        cfg = self.config
        self._setup_threads()
        pairs = corpus if isinstance(corpus, list) else read_parallel(
            corpus, cfg.source_field, cfg.target_field, cfg.max_sentences)
        src = [tokenize(s, lowercase=cfg.lowercase) for s, _ in pairs]
        tgt = [tokenize(t, lowercase=cfg.lowercase) for _, t in pairs]
        self.in_vocab_ = Vocabulary(cfg.min_count, max_size=cfg.vocab_size, specials=SPECIALS).fit(src)
        self.target_vocab_ = Vocabulary(cfg.min_count, max_size=cfg.vocab_size, specials=SPECIALS).fit(tgt)
        src_ids = [self.in_vocab_.encode(s, unk=True)[: cfg.max_len] for s in src]
        tgt_ids = [with_eos(self.target_vocab_.encode(t, unk=True), cfg.max_len) for t in tgt]
        usable = np.array([i for i, s in enumerate(src_ids) if s], dtype=np.int64)
        self.net_ = net = self._build_net(self._net_state())
        self.dim_ = cfg.hidden
        enc, dec = net.encoder, net.decoders[0]
        n_tgt = len(self.target_vocab_)

        def batches(epoch: int) -> Iterator[tuple[int, Callable[[], torch.Tensor]]]:
            rng = np.random.default_rng([cfg.seed, epoch])
            for idx in batch_order(len(usable), cfg.batch_size, rng):
                b = usable[idx]
                x, xl = pad_batch([src_ids[i] for i in b])
                tgt_b = [tgt_ids[i] for i in b]
                y, _ = pad_batch(tgt_b)
                cand = softmax_candidates(tgt_b, n_tgt, cfg.softmax_samples, rng)

                def closure(x: torch.Tensor = x, xl: torch.Tensor = xl, y: torch.Tensor = y,
                            cand: torch.Tensor | None = cand) -> torch.Tensor:
                    return dec(enc(x, xl), y, cand)  # type: ignore[no-any-return]

                yield int(xl.sum()) + int((y != 0).sum()), closure

        total = -(-len(usable) // cfg.batch_size) * cfg.epochs
        self.train_stats_ = train_loop(net, batches, epochs=cfg.epochs, lr=cfg.lr, clip=cfg.clip,
                                       max_steps=cfg.max_steps, what=self.method,
                                       progress=cfg.progress, total=total)
        return self

    def _save_state(self, d: Path) -> dict[str, Any]:
        state = super()._save_state(d)
        self.target_vocab_.save(d / "target_vocab.tsv")
        return state

    def _restore_extra(self, d: Path, state: dict[str, Any]) -> None:
        self.target_vocab_ = Vocabulary.load(d / "target_vocab.tsv")
