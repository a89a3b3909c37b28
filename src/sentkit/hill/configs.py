"""Config dataclasses of the Hill et al. (2016) methods (light: no torch / gensim import).

Every config has ``corpus``, ``out``, ``seed`` and ``max_steps`` (the fields
``sentkit train`` fills) plus its method's settings with the paper's defaults, or a small
CPU default where the paper's size needs a GPU (the paper's value is in the comment).
``max_steps`` caps optimiser steps for neural models and training sentences for the
count / word2vec-style ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sentkit.core.config import ConfigError


def _positive(name: str, value: float | int | None, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if value is None or value <= 0:
        raise ConfigError(f"{name} must be > 0, got {value!r}")


def _prob(name: str, value: float) -> None:
    if not 0.0 <= value < 1.0:
        raise ConfigError(f"{name} must be in [0, 1), got {value!r}")


@dataclass
class HillConfig:
    """Fields shared by every method."""

    corpus: str = ""  # a corpus sentkit.data.corpus.iter_documents reads
    out: str = ""  # output model directory
    seed: int = 0
    max_steps: int | None = None  # cap: optimiser steps (neural) or training sentences (others)
    max_sentences: int | None = None  # read at most this many sentences of the corpus
    lowercase: bool = True
    punctuation: bool = True  # keep punctuation marks as tokens
    text_field: str = "text"  # .jsonl / .parquet / HF dataset column
    txt_mode: str = "file"  # single .txt corpus: one document per "file" or per "lines"
    progress: bool = True  # tqdm progress bars

    def __post_init__(self) -> None:
        if self.seed < 0:
            raise ConfigError(f"seed must be >= 0, got {self.seed}")
        _positive("max_steps", self.max_steps, allow_none=True)
        _positive("max_sentences", self.max_sentences, allow_none=True)
        if self.txt_mode not in ("file", "lines"):
            raise ConfigError(f"txt_mode must be 'file' or 'lines', got {self.txt_mode!r}")


@dataclass
class FastSentConfig(HillConfig):
    """FastSent: defaults of Hill et al.'s code (dim 100, min-count 10)."""

    dim: int = 100
    min_count: int = 10
    # Sums are dominated by "." (in almost every sentence, its vector grows ~100x the
    # median norm); without punctuation, full-Gutenberg STS14 rose from 0.14 to 0.25
    # (TREC 54 -> 60, SUBJ 78 -> 73): see docs/benchmarks.md (Hill models).
    punctuation: bool = False
    autoencode: bool = False  # FastSent+AE also predicts the sentence's own words
    negative: int = 5  # negative samples per target word
    epochs: int = 1
    alpha: float = 0.025  # start learning rate, linear decay to min_alpha
    min_alpha: float = 0.0001
    sample: float = 0.0  # word2vec-style sub-sampling threshold (0 = off)
    average: bool = False  # encode as the mean instead of the paper's sum (better for classifiers)
    # Scale each sentence's updates by its size: target vectors move by g * s_i / |S_i| (sum), or the
    # source error is averaged over the targets (average). False is Hill et al.'s exact update, which
    # diverges on Gutenberg at alpha 0.025 (5 epochs: median word norm 1e10); see docs/hill_models.md.
    stable: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("dim", "min_count", "negative", "epochs", "alpha"):
            _positive(name, getattr(self, name))
        if not 0.0 <= self.min_alpha <= self.alpha:
            raise ConfigError(f"min_alpha must be in [0, alpha], got {self.min_alpha}")
        if self.sample < 0:
            raise ConfigError(f"sample must be >= 0, got {self.sample}")


@dataclass
class FastSentAEConfig(FastSentConfig):
    """FastSent+AE: FastSent that also predicts the sentence's own words."""

    autoencode: bool = True


@dataclass
class Word2VecConfig(HillConfig):
    """CBOW / SkipGram sums (gensim Word2Vec)."""

    punctuation: bool = False  # a sum of vectors is dominated by ever-present "." otherwise
    dim: int = 100
    window: int = 5
    min_count: int = 5
    negative: int = 5
    epochs: int = 1
    sample: float = 1e-3
    average: bool = False  # sum of word vectors as in the paper; mean if true
    workers: int = 1  # >1 is faster but not bit-reproducible

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("dim", "window", "min_count", "epochs", "workers"):
            _positive(name, getattr(self, name))
        if self.negative < 0 or self.sample < 0:
            raise ConfigError("negative and sample must be >= 0")


@dataclass
class ParagraphVectorConfig(HillConfig):
    """Paragraph Vector DBOW / DM (gensim Doc2Vec); each sentence is one paragraph."""

    dim: int = 100
    window: int = 5
    min_count: int = 5
    negative: int = 5
    epochs: int = 5
    sample: float = 1e-3
    infer_epochs: int | None = None  # epochs of inference for new sentences (default: epochs)
    workers: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("dim", "window", "min_count", "epochs", "workers"):
            _positive(name, getattr(self, name))
        _positive("infer_epochs", self.infer_epochs, allow_none=True)


@dataclass
class TfidfConfig(HillConfig):
    """Unigram TF-IDF bag of words over the most common words."""

    max_features: int = 200_000
    min_count: int = 1
    sublinear_tf: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive("max_features", self.max_features)
        _positive("min_count", self.min_count)


@dataclass
class Seq2SeqConfig(HillConfig):
    """Shared settings of the recurrent encoder-decoder models."""

    cell: Literal["gru", "lstm"] = "gru"
    emb_dim: int = 100  # word embedding size (paper: 620 for SkipThought)
    hidden: int = 256  # sentence vector size (paper: 2400; use on a GPU)
    vocab_size: int = 20_000  # most common words kept (paper: 20k for SkipThought)
    min_count: int = 2
    max_len: int = 30  # sentences are cut to this many tokens
    batch_size: int = 64
    lr: float = 1e-3  # Adam
    epochs: int = 1
    clip: float = 5.0  # gradient norm clip
    softmax_samples: int = 1024  # sampled softmax: target words + this many random words (0 = full)
    device: str = "cpu"
    threads: int | None = None  # torch.set_num_threads (None: leave as is)
    encode_batch_size: int = 256  # unused since encode(texts, batch_size=...); kept so saved configs load

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.cell not in ("gru", "lstm"):
            raise ConfigError(f"cell must be 'gru' or 'lstm', got {self.cell!r}")
        for name in (
            "emb_dim",
            "hidden",
            "vocab_size",
            "min_count",
            "max_len",
            "batch_size",
            "lr",
            "epochs",
            "clip",
            "encode_batch_size",
        ):
            _positive(name, getattr(self, name))
        _positive("threads", self.threads, allow_none=True)
        if self.softmax_samples < 0:
            raise ConfigError(f"softmax_samples must be >= 0, got {self.softmax_samples}")


@dataclass
class SDAEConfig(Seq2SeqConfig):
    """(Sequential) Denoising Autoencoder. SAE is the same with p_o = p_x = 0."""

    p_drop: float = 0.1  # p_o: delete each word with this probability
    p_swap: float = 0.1  # p_x: swap each non-overlapping bigram with this probability
    pretrained_embeddings: bool = False  # "+embs": fixed GloVe-50d input vectors
    glove_root: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _prob("p_drop", self.p_drop)
        _prob("p_swap", self.p_swap)


@dataclass
class SAEConfig(SDAEConfig):
    """Sequential Autoencoder: SDAE without noise."""

    p_drop: float = 0.0
    p_swap: float = 0.0


@dataclass
class SkipThoughtConfig(Seq2SeqConfig):
    """Uni-skip SkipThought (paper: emb 620, hidden 2400, vocab 20k)."""

    expand_vocab: bool = True  # linear map GloVe -> input embeddings for unseen words
    glove_root: str | None = None


@dataclass
class NMTConfig(Seq2SeqConfig):
    """Encoder of an RNN translation model. ``corpus`` is parallel text: a .tsv / .txt file of
    ``source<TAB>target`` lines, or a .jsonl file with ``source`` and ``target`` fields."""

    source_field: str = "source"
    target_field: str = "target"


@dataclass
class DictRepConfig(HillConfig):
    """DictRep (BOW or RNN encoder, by method): map WordNet definitions to the defined
    word's GloVe-50d vector (cosine loss). Definitions come from ``wordnet_dir`` (or from
    ``corpus`` when it is a WordNet folder); no text corpus is read."""

    wordnet_dir: str = "/usr/share/wordnet"
    pretrained_inputs: bool = False  # "+embs": fixed GloVe-50d input embeddings
    emb_dim: int = 256  # input embedding size when not pre-trained
    hidden: int = 512  # RNN size (rnn encoder)
    cell: Literal["gru", "lstm"] = "lstm"
    vocab_size: int = 50_000
    min_count: int = 1
    max_len: int = 30
    batch_size: int = 128
    lr: float = 1e-3
    epochs: int = 2
    glove_root: str | None = None
    device: str = "cpu"
    threads: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.cell not in ("gru", "lstm"):
            raise ConfigError(f"cell must be 'gru' or 'lstm', got {self.cell!r}")
        for name in ("emb_dim", "hidden", "vocab_size", "min_count", "max_len", "batch_size", "lr", "epochs"):
            _positive(name, getattr(self, name))


@dataclass
class CaptionRepConfig(HillConfig):
    """CaptionRep: an RNN over captions trained to predict their image's feature vector.

    ``corpus`` is a .jsonl file with a caption (``caption_field``) and a row index into
    ``features`` (``image_field``); ``features`` is a float32 .npy [n_images, feat_dim]."""

    features: str = ""
    caption_field: str = "caption"
    image_field: str = "image"
    emb_dim: int = 256
    hidden: int = 512
    cell: Literal["gru", "lstm"] = "lstm"
    vocab_size: int = 20_000
    min_count: int = 1
    max_len: int = 30
    batch_size: int = 128
    lr: float = 1e-3
    epochs: int = 5
    device: str = "cpu"
    threads: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("emb_dim", "hidden", "vocab_size", "min_count", "max_len", "batch_size", "lr", "epochs"):
            _positive(name, getattr(self, name))
