"""Models trained to map a text to a given vector with a cosine loss:

- DictRep (Hill et al., 2016): a WordNet definition -> the defined word's GloVe-50d vector,
  with a BOW encoder (linear map of summed word embeddings) or an RNN encoder (LSTM/GRU,
  then a linear map); input embeddings learned, or fixed GloVe-50d ("+embs").
- CaptionRep: an image caption -> its image's feature vector (bring captions + features).

The sentence vector is the model's output (in the target space).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from sentkit.data.corpus import CorpusError, Fix
from sentkit.data.sentences import Vocabulary, tokenize
from sentkit.hill.configs import CaptionRepConfig, DictRepConfig
from sentkit.hill.seq2seq import (
    PAD,
    UNK,
    BOWEncoder,
    RecurrentModel,
    RNNEncoder,
    batch_order,
    make_embedding,
    pad_batch,
    seeded,
    train_loop,
)

log = logging.getLogger(__name__)

SPECIALS2 = (PAD, UNK)


class ProjectedEncoder(nn.Module):
    """A BOW/RNN encoder followed by a linear map to the target space. [B, T] -> [B, D]."""

    def __init__(self, base: nn.Module, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.base = base
        self.proj = nn.Linear(in_dim, out_dim)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.proj(self.base(ids, lengths))  # type: ignore[no-any-return]


class _Net(nn.Module):
    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder


def cosine_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean of 1 - cos(pred, target) over the batch. [B, D] x [B, D] -> scalar."""
    return (1.0 - nn.functional.cosine_similarity(pred, target, dim=-1)).mean()


class _TextToVector(RecurrentModel[Any]):
    """Shared fit loop: ``_fit_pairs(token lists, targets [n, D])``."""

    encoder_kind = "rnn"

    def _pretrained(self) -> bool:
        return bool(getattr(self.config, "pretrained_inputs", False))

    def _net_state(self) -> dict[str, Any]:
        return {"n_in": len(self.in_vocab_), "out_dim": self.dim_}

    def _frozen_prefixes(self) -> tuple[str, ...]:
        return ("encoder.base.emb.",) if self._pretrained() else ()

    def _load_in_vocab(self, d: Path, state: dict[str, Any]) -> Vocabulary:
        if self._pretrained():
            from sentkit.hill.pretrained import glove_vocabulary

            return glove_vocabulary(SPECIALS2, self.config.glove_root)[0]
        return Vocabulary.load(d / "vocab.tsv")

    def _save_state(self, d: Path) -> dict[str, Any]:
        state = super()._save_state(d)
        if self._pretrained():
            (d / "vocab.tsv").unlink(missing_ok=True)  # rebuilt from GloVe at load
        return state

    def _build_net(self, state: dict[str, Any]) -> _Net:
        cfg = self.config
        with seeded(cfg.seed):
            if self._pretrained():
                from sentkit.hill.pretrained import glove_vocabulary

                _, table = glove_vocabulary(SPECIALS2, cfg.glove_root)
                emb = make_embedding(table.shape[0], table.shape[1], table)
            else:
                emb = make_embedding(int(state["n_in"]), cfg.emb_dim)
            base: nn.Module
            if self.encoder_kind == "bow":
                base, width = BOWEncoder(emb), emb.embedding_dim
            else:
                base, width = RNNEncoder(emb, cfg.hidden, cfg.cell), cfg.hidden
            return _Net(ProjectedEncoder(base, width, int(state["out_dim"])))

    def _fit_pairs(self, texts: list[list[str]], targets: np.ndarray) -> None:
        cfg = self.config
        self._setup_threads()
        if self._pretrained():
            from sentkit.hill.pretrained import glove_vocabulary

            self.in_vocab_ = glove_vocabulary(SPECIALS2, cfg.glove_root)[0]
        else:
            self.in_vocab_ = Vocabulary(cfg.min_count, max_size=cfg.vocab_size, specials=SPECIALS2).fit(texts)
        ids = [self.in_vocab_.encode(t, unk=True)[: cfg.max_len] for t in texts]
        usable = np.array([i for i, s in enumerate(ids) if s], dtype=np.int64)
        self.dim_ = int(targets.shape[1])
        self.net_ = net = self._build_net(self._net_state())
        tgt = torch.from_numpy(np.ascontiguousarray(targets, dtype=np.float32))

        def batches(epoch: int) -> Iterator[tuple[int, Callable[[], torch.Tensor]]]:
            rng = np.random.default_rng([cfg.seed, epoch])
            for idx in batch_order(len(usable), cfg.batch_size, rng):
                b = usable[idx]
                x, xl = pad_batch([ids[i] for i in b])
                y = tgt[torch.from_numpy(b)]

                def closure(x: torch.Tensor = x, xl: torch.Tensor = xl, y: torch.Tensor = y) -> torch.Tensor:
                    return cosine_loss(net.encoder(x, xl), y)

                yield int(xl.sum()), closure

        total = -(-len(usable) // cfg.batch_size) * cfg.epochs
        self.train_stats_ = train_loop(
            net,
            batches,
            epochs=cfg.epochs,
            lr=cfg.lr,
            clip=5.0,
            max_steps=cfg.max_steps,
            what=self.method,
            progress=cfg.progress,
            total=total,
        )


class DictRepBOW(_TextToVector):
    """DictRep with a bag-of-words encoder. Learned state: ``in_vocab_``, ``net_``, ``dim_`` (50)."""

    method = "dictrep-bow"
    config_cls = DictRepConfig
    corpus_optional = True
    encoder_kind = "bow"

    def fit(self, corpus: Any = None) -> DictRepBOW:
        """Train on WordNet (``config.wordnet_dir``, or ``corpus`` if it is a WordNet folder)
        or on given ``(word, definition)`` pairs."""
        from sentkit.hill.pretrained import glove_rows
        from sentkit.hill.wordnet import definition_pairs

        cfg = self.config
        if isinstance(corpus, list):
            pairs = corpus
        else:
            wn = corpus if corpus and (Path(corpus) / "data.noun").is_file() else cfg.wordnet_dir
            if corpus and wn != corpus:
                log.info("%s trains on WordNet (%s); corpus %s is not used", self.method, wn, corpus)
            pairs = definition_pairs(wn)
        targets, found = glove_rows([w for w, _ in pairs], cfg.glove_root)
        keep = np.flatnonzero(found)
        if cfg.max_sentences is not None:
            keep = keep[: cfg.max_sentences]
        if keep.size == 0:
            raise CorpusError(
                f"{self.method}: none of the {len(pairs)} defined words has a GloVe vector; "
                "point wordnet_dir at Princeton WordNet's files (apt-get install wordnet-base)"
            )
        log.info("%s: %d definitions of words with GloVe vectors", self.method, keep.size)
        texts = [tokenize(pairs[i][1], lowercase=cfg.lowercase) for i in keep]
        self._fit_pairs(texts, targets[keep])
        return self


class DictRepRNN(DictRepBOW):
    """DictRep with an LSTM/GRU encoder."""

    method = "dictrep-rnn"
    encoder_kind = "rnn"


def read_captions(
    path: str | Path, caption_field: str, image_field: str, limit: int | None = None
) -> list[tuple[str, int]]:
    """(caption, image row) pairs from a .jsonl file (or ``caption<TAB>row`` lines); bad lines
    are skipped and counted, no pair at all is a CorpusError."""
    from sentkit.hill.common import read_records, text_value

    def convert(values: tuple[Any, ...]) -> tuple[str, int] | None:
        caption, row = text_value(values[0]), values[1]
        if isinstance(row, str) and row.strip().isdigit():
            row = int(row)
        ok = caption is not None and isinstance(row, int) and not isinstance(row, bool)
        return (caption, row) if ok else None  # type: ignore[return-value]

    what = (
        f"a .jsonl file with fields {caption_field!r} (the caption) and {image_field!r} (its row of the features .npy)"
    )
    return read_records(
        path, (caption_field, image_field), convert, limit=limit, what=what, kind="caption with an image row"
    )


def _load_features(path: str) -> np.ndarray:
    """The image features .npy of CaptionRep, or a CorpusError saying what is wrong with it."""
    if not path:
        raise CorpusError(
            "captionrep needs image features", fixes=[Fix({"features": "PATH.npy"}, "a float32 array [n_images, dim]")]
        )
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise CorpusError(f"image features {path} not found") from None
    except (ValueError, OSError, EOFError) as e:
        raise CorpusError(f"image features {path}: not a readable .npy array ({e})") from None


class CaptionRep(_TextToVector):
    """CaptionRep: RNN over a caption -> its image's feature vector (cosine loss)."""

    method = "captionrep"
    config_cls = CaptionRepConfig
    corpus_optional = True
    encoder_kind = "rnn"

    def fit(self, corpus: Any = None, features: np.ndarray | None = None) -> CaptionRep:
        """``corpus``: a .jsonl path (default ``config.corpus``) or (caption, image) pairs;
        ``features``: float32 [n_images, D] (default: ``np.load(config.features)``)."""
        cfg = self.config
        src = corpus if corpus is not None else cfg.corpus
        pairs = (
            src if isinstance(src, list) else read_captions(src, cfg.caption_field, cfg.image_field, cfg.max_sentences)
        )
        if features is None:
            features = _load_features(cfg.features)
        feats = np.asarray(features, dtype=np.float32)
        if feats.ndim != 2 or feats.shape[0] == 0 or not np.isfinite(feats).all():
            raise CorpusError(f"image features must be a finite float array [n_images, dim], got shape {feats.shape}")
        rows = np.array([r for _, r in pairs], dtype=np.int64)
        if rows.size == 0 or rows.min() < 0 or rows.max() >= feats.shape[0]:
            raise CorpusError(f"image indices must be in [0, {feats.shape[0]}) (rows of the features)")
        texts = [tokenize(c, lowercase=cfg.lowercase) for c, _ in pairs]
        self._fit_pairs(texts, feats[rows])
        return self
