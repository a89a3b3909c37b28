"""The encoder of an RNN translation model (Hill et al.'s NMT En->Fr / En->De baselines).

Bring parallel text: ``corpus`` is a ``.tsv``/``.txt`` file of ``source<TAB>target`` lines
or a ``.jsonl`` file with ``source`` and ``target`` fields (names are settings). A GRU/LSTM
encoder reads the source sentence and a conditional decoder generates the translation; the
sentence vector is the encoder's last hidden state (source language only).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sentkit.data.sentences import ReadReport, Vocabulary, source_name, tokenize
from sentkit.hill.common import require_vocabulary
from sentkit.hill.configs import NMTConfig
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


def read_parallel(
    path: str | Path, source_field: str = "source", target_field: str = "target", limit: int | None = None
) -> list[tuple[str, str]]:
    """(source, target) pairs from a TSV/TXT (``src<TAB>tgt``) or JSONL file. Lines that are
    binary, not UTF-8, bad JSON, lack a side or have an empty one are skipped and counted; no
    pair at all is a CorpusError with the counts."""
    from sentkit.hill.common import read_records, text_value

    def convert(values: tuple[Any, ...]) -> tuple[str, str] | None:
        src, tgt = text_value(values[0]), text_value(values[1])
        return (src, tgt) if src is not None and tgt is not None else None

    what = (
        f"a .tsv file of source<TAB>target lines or a .jsonl file with fields {source_field!r} and "
        f"{target_field!r} (their names are the settings source_field and target_field)"
    )
    return read_records(path, (source_field, target_field), convert, limit=limit, what=what, kind="sentence pair")


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
        pairs = (
            corpus
            if isinstance(corpus, list)
            else read_parallel(corpus, cfg.source_field, cfg.target_field, cfg.max_sentences)
        )
        src = [tokenize(s, lowercase=cfg.lowercase) for s, _ in pairs]
        tgt = [tokenize(t, lowercase=cfg.lowercase) for _, t in pairs]
        self.in_vocab_ = Vocabulary(cfg.min_count, max_size=cfg.vocab_size, specials=SPECIALS).fit(src)
        self.target_vocab_ = Vocabulary(cfg.min_count, max_size=cfg.vocab_size, specials=SPECIALS).fit(tgt)
        report = ReadReport(source_name(corpus), kept=len(pairs), sentences=len(pairs))
        report.files.read = len(pairs)
        for vocab in (self.in_vocab_, self.target_vocab_):
            require_vocabulary(report, len(vocab) - len(SPECIALS), cfg.min_count, self.method)
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

                def closure(
                    x: torch.Tensor = x, xl: torch.Tensor = xl, y: torch.Tensor = y, cand: torch.Tensor | None = cand
                ) -> torch.Tensor:
                    return dec(enc(x, xl), y, cand)  # type: ignore[no-any-return]

                yield int(xl.sum()) + int((y != 0).sum()), closure

        total = -(-len(usable) // cfg.batch_size) * cfg.epochs
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
        return self

    def _save_state(self, d: Path) -> dict[str, Any]:
        state = super()._save_state(d)
        self.target_vocab_.save(d / "target_vocab.tsv")
        return state

    def _restore_extra(self, d: Path, state: dict[str, Any]) -> None:
        self.target_vocab_ = Vocabulary.load(d / "target_vocab.tsv")
