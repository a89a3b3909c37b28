"""Masked-language-model training of any Hugging Face masked LM: continued from a checkpoint, or from
scratch with a small architecture (and, if asked, a WordPiece vocabulary trained on the corpus).

Sequences are packed from the token store (a separator between documents), masked anew at every
step (15 %; 80 % [MASK], 10 % random, 10 % kept), special tokens never chosen. The output is a
masked-LM checkpoint that `--method declutr --model DIR` continues from, and a mean-pooled
sentence encoder: the DeCLUTR paper's "Transformer" baseline, made from any corpus."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sentkit.core.config import ConfigError
from sentkit.data.packing import Packing
from sentkit.models.mlm import MLM_HEADS, MaskedLM
from sentkit.objectives.mlm import IGNORE_INDEX
from sentkit.training.config import TrainConfig
from sentkit.training.recipe import Batch, Recipe, Seeds, StepOut, StoreSpec, TrainModule

log = logging.getLogger(__name__)

TOKENIZER_DIR = "tokenizer"


# ----------------------------------------------------------------------------- config
@dataclass
class MLMConfig(TrainConfig):
    """Packed sequences of `seq_len` tokens, `batch_size` sequences a step, the DeCLUTR paper's
    optimiser and schedule. From scratch: the architecture of `model` resized by layers / hidden /
    heads / intermediate / max_positions (None keeps the model's), and optionally a WordPiece
    vocabulary of `vocab_size` trained on the corpus (`train_tokenizer`)."""

    seq_len: int = 128
    batch_size: int = 32
    mlm_probability: float = 0.15
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    intermediate: int | None = None
    max_positions: int | None = None
    train_tokenizer: bool = False
    tokenizer: str | None = None  # from scratch: a tokenizer folder to build the model with (e.g. a corpus vocabulary)
    vocab_size: int = 30522
    lowercase: bool = True  # for a trained tokenizer
    # input embeddings that start from word vectors: a folder saved by `sentkit train --method wordpiece-skipgram`
    # (with this model's tokenizer and dim = hidden) or a .npy [vocab, hidden]; centred, scaled to init_std
    init_embeddings: str | None = None
    init_std: float = 0.05

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.seq_len < 3:
            raise ConfigError(f"seq_len must be at least 3, got {self.seq_len}")
        if not 0 < self.mlm_probability < 1:
            raise ConfigError("mlm_probability must be in (0, 1)")
        arch = self.arch()
        if (arch or self.train_tokenizer) and not self.from_scratch:
            what = ", ".join(sorted(arch)) or "train_tokenizer"
            raise ConfigError(f"{what} only apply to a model built from scratch: add --set from_scratch=true")
        for k, v in arch.items():
            if v < 1:
                raise ConfigError(f"{k} must be at least 1, got {v}")
        if self.vocab_size < 100:
            raise ConfigError(f"vocab_size must be at least 100, got {self.vocab_size}")
        if self.init_embeddings is not None and not self.from_scratch:
            raise ConfigError("init_embeddings only applies to a model built from scratch: add --set from_scratch=true")
        if self.init_embeddings is not None and self.train_tokenizer:
            raise ConfigError("init_embeddings needs the vectors' own tokenizer: drop train_tokenizer")
        if self.tokenizer is not None and (self.train_tokenizer or not self.from_scratch):
            raise ConfigError(
                "tokenizer (a folder to build the model with) applies to a model built from scratch "
                "without train_tokenizer: add --set from_scratch=true, drop train_tokenizer"
            )
        if not self.init_std > 0:
            raise ConfigError(f"init_std must be positive, got {self.init_std}")

    def arch(self) -> dict[str, int]:
        keys = ("layers", "hidden", "heads", "intermediate", "max_positions")
        return {k: int(getattr(self, k)) for k in keys if getattr(self, k) is not None}


# ----------------------------------------------------------------------------- tokenizer
def train_wordpiece(texts: Any, vocab_size: int, *, lowercase: bool = True) -> Any:
    """A BERT-style WordPiece tokenizer ([PAD] [UNK] [CLS] [SEP] [MASK]) trained on `texts` (an iterable of
    documents, read twice), as a transformers fast tokenizer. Deterministic: the same texts give the same
    vocabulary, id for id, in every run.

    The tokenizers library's trainer numbers the continuation pieces (``##c``) in the order its hash map
    yields the words, which changes from run to run, and breaks ties between pairs of equal count by those
    numbers; so every character of the normalised texts and its ``##`` form are given fixed ids first (sorted),
    and the tokenizer is then rebuilt from the trained vocabulary with only the five special tokens."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    docs = texts if isinstance(texts, (list, tuple)) else list(texts)
    chars: set[str] = set()
    for d in docs:
        chars.update(normalizer.normalize_str(d))
    alphabet = sorted(c for c in chars if not c.isspace())
    fixed = [*special, *alphabet, *(f"##{c}" for c in alphabet)]
    if len(fixed) >= vocab_size:
        raise ConfigError(
            f"vocab_size {vocab_size} leaves no room for merges: the corpus has {len(alphabet)} characters "
            f"(a vocabulary needs {len(fixed)} entries for them and their ## forms); raise vocab_size"
        )
    trainer_tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    trainer_tok.normalizer = normalizer
    trainer_tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer_tok.train_from_iterator(
        docs, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=fixed, show_progress=False)
    )
    vocab = trainer_tok.get_vocab(with_added_tokens=True)
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", continuing_subword_prefix="##"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens(special)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        do_lower_case=lowercase,
    )


# ----------------------------------------------------------------------------- data and model
@dataclass
class PackedBatch(Batch):
    """Equal-length masked sequences and their labels ([n, L] each, -100 where not masked)."""

    ids: torch.Tensor | None = None
    labels: torch.Tensor | None = None
    pad_id: int = 0
    padded: bool = False  # only a corpus shorter than one sequence gives a short one


class MLMModule(TrainModule):
    def __init__(self, mlm_model: Any) -> None:
        super().__init__()
        self.model = MaskedLM(mlm_model, "mean")
        self.mlm_model = mlm_model

    def forward(self, batch: Batch, group: Sequence[int], seeds: Seeds) -> StepOut:
        assert isinstance(batch, PackedBatch) and batch.ids is not None and batch.labels is not None
        device = next(self.parameters()).device
        rows = torch.as_tensor(list(group))
        ids, labels = batch.ids[rows].to(device), batch.labels[rows].to(device)
        mask = (ids != batch.pad_id).long() if batch.padded else None  # only the lone short sequence pads

        def run(chunk: list[int]) -> torch.Tensor:
            c = torch.as_tensor(chunk, device=device)
            hidden = self.model.hidden(ids[c], mask[c] if mask is not None else None)
            return self.model.mlm_sum(hidden, labels[c])[0]

        total = torch.zeros((), device=device)
        for _, s in self.run_chunks([ids.shape[1]] * len(group), seeds, run):
            total = total + s
        return StepOut(None, {"mlm": total})


# ----------------------------------------------------------------------------- the method
class MLM(Recipe):
    name = "mlm"
    config_cls = MLMConfig
    unit_name = "sequence"

    def __init__(self, cfg: MLMConfig, mlm_model: Any, tokenizer: Any, max_len: int) -> None:
        super().__init__(cfg, mlm_model, tokenizer, max_len)
        self.cfg: MLMConfig = cfg
        if tokenizer.mask_token_id is None:
            raise ConfigError(f"model {cfg.model!r} has no mask token: it cannot be trained as a masked LM")
        family = getattr(mlm_model.config, "model_type", "?")
        if family not in MLM_HEADS:  # MLMModule applies the head to the masked positions alone
            raise ConfigError(
                f"--method mlm: model {cfg.model!r} is a {family!r} model, and sentkit knows where the "
                f"MLM head is only for {', '.join(MLM_HEADS.names())}; choose a model of one of these "
                "families (--method declutr takes any masked LM)"
            )
        self.seq_len = min(cfg.seq_len, max_len)
        if self.seq_len < cfg.seq_len:
            log.info("seq_len lowered to %d to fit the model's positions", self.seq_len)
        self.sep_id = int(tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id)
        self.special = torch.tensor(sorted(set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}))
        self.packing: Packing | None = None
        self.loss_names = ("mlm",)

    @classmethod
    def prepare(cls, cfg: Any, out: Path) -> None:
        """With train_tokenizer: a WordPiece vocabulary trained on the corpus, saved in
        <out>/tokenizer (once: a resumed run and every process of a run load it from there)."""
        if cfg.train_tokenizer and not (out / TOKENIZER_DIR / "tokenizer.json").is_file():
            save_tokenizer(
                train_on_corpus(cfg.corpus, cfg.vocab_size, field=cfg.text_field, lowercase=cfg.lowercase),
                out / TOKENIZER_DIR,
            )

    @classmethod
    def load_model(cls, cfg: Any, out: Path) -> tuple[Any, Any]:
        """The masked LM to train; from scratch with the tokenizer `prepare` trained when asked."""
        from sentkit.models.hub import load_mlm, load_tokenizer

        tokenizer = load_tokenizer(cfg.tokenizer) if cfg.tokenizer is not None else None
        if cfg.train_tokenizer:
            saved = out / TOKENIZER_DIR
            if not (saved / "tokenizer.json").is_file():  # prepare() made it in rank 0 before this process got here
                raise ConfigError(
                    f"no tokenizer in {saved}, where rank 0 saved the one it trained: --out must be on a "
                    "file system that every process sees"
                )
            tokenizer = load_tokenizer(str(saved))
        arch = cfg.arch()
        if tokenizer is None and not arch:
            model, tokenizer = load_mlm(cfg.model, from_scratch=cfg.from_scratch)
        else:
            model, tokenizer = load_mlm(cfg.model, from_scratch=True, arch=arch or None, tokenizer=tokenizer)
        if cfg.init_embeddings is not None:
            init_embeddings(model, tokenizer, cfg.init_embeddings, cfg.init_std)
        return model, tokenizer

    def store_spec(self) -> StoreSpec:
        return StoreSpec("document", 1, None)

    def units(self, store: Any) -> int:
        body = self.seq_len - len(self.prefix) - len(self.suffix)
        self.packing = Packing(store.offsets, body, self.sep_id)
        return len(self.packing)

    def batch(self, store: Any, units: list[int], step: int) -> PackedBatch:
        """The packed sequences `units`, masked with a generator seeded per (seed, step, sequence)."""
        assert self.packing is not None, "call units(store) first"
        pre, suf = np.asarray(self.prefix, dtype=np.int64), np.asarray(self.suffix, dtype=np.int64)
        seqs = [np.concatenate([pre, self.packing.sequence(u, store.tokens), suf]) for u in units]
        lengths = [len(s) for s in seqs]
        width = max(lengths)
        if min(lengths) == width:
            ids = torch.from_numpy(np.stack(seqs))
        else:  # only a corpus shorter than one sequence gives a short one
            ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
            for r, s in enumerate(seqs):
                ids[r, : len(s)] = torch.from_numpy(s)
        ids, labels = self.mask(ids, lengths, [self.mask_seed(step, u) for u in units])
        return PackedBatch(
            len(units),
            {"mlm": float((labels != IGNORE_INDEX).sum())},
            sum(lengths),
            ids,
            labels,
            self.pad_id,
            min(lengths) < width,
        )

    def mask_seed(self, step: int, unit: int) -> int:
        """The seed of sequence `unit`'s mask at `step`."""
        return int(np.random.default_rng([self.cfg.seed, step, unit, 0x3A5]).integers(2**62))

    def mask(self, ids: torch.Tensor, lengths: list[int], seeds: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """`mask_tokens` applied to each row of ids [n, L] with its own generator (row r: the first
        lengths[r] positions, generator seeded with seeds[r]), the rule applied to all rows at once:
        the same draws, so the same masks, as calling it row by row."""
        n, width = ids.shape
        pick, u = torch.zeros(n, width), torch.zeros(n, width)
        rand = torch.zeros(n, width, dtype=torch.long)
        vocab = int(self.mlm_model.config.vocab_size)
        for r, (length, seed) in enumerate(zip(lengths, seeds)):  # mask_tokens' draws, in its order
            gen = torch.Generator().manual_seed(seed)
            pick[r, :length] = torch.bernoulli(torch.full((length,), self.cfg.mlm_probability), generator=gen)
            u[r, :length] = torch.rand(length, generator=gen)
            rand[r, :length] = torch.randint(vocab, (length,), generator=gen)
        chosen = pick.bool() & ~torch.isin(ids, self.special)  # never past a row's length: pick is 0 there
        labels = ids.masked_fill(~chosen, IGNORE_INDEX)
        out = torch.where(chosen & (u < 0.8), int(self.tokenizer.mask_token_id), ids)
        return torch.where(chosen & (u >= 0.8) & (u < 0.9), rand, out), labels

    def module(self) -> TrainModule:
        return MLMModule(self.mlm_model)

    def encoder_settings(self) -> dict[str, Any]:
        return {"pooling": "mean"}

    def card(self, steps: int, store: Any) -> str:
        c = self.cfg
        start = (
            f"built from scratch on the architecture of `{c.model}`" + (f" ({c.arch()})" if c.arch() else "")
            if c.from_scratch
            else f"continued from `{c.model}`"
        )
        vocab = (
            f"a WordPiece vocabulary of {c.vocab_size} trained on the corpus"
            if c.train_tokenizer
            else f"the tokenizer of {c.tokenizer}"
            if c.tokenizer
            else "the model's tokenizer"
        )
        return (
            f"Masked-language-model training, {start}, with {vocab}, for {steps} steps on `{c.corpus}` "
            f"({store.meta.get('num_tokens', 0):,} tokens packed into sequences of {self.seq_len}).\n\n"
            f"- masking {c.mlm_probability:.0%} of tokens (80 % [MASK], 10 % random, 10 % kept), "
            "a new mask every step\n"
            f"- batch {c.batch_size} sequences, lr {c.lr} ({c.schedule}); the encoder mean-pools\n"
        )


def word_vectors(source: str, tokenizer: Any) -> tuple[np.ndarray, np.ndarray]:
    """(vectors [vocab, d], seen [vocab] bool) of a folder saved by `wordpiece-skipgram` (its tokenizer
    must be this one) or of a .npy file (seen: the non-zero rows)."""
    import json

    from sentkit.data.store import tokenizer_fingerprint

    p = Path(source)
    if p.is_dir():
        state_file, vec_file = p / "state.json", p / "vectors.npy"
        if not vec_file.is_file() or not state_file.is_file():
            raise ConfigError(
                f"init_embeddings={source}: not a folder saved by `sentkit train --method wordpiece-skipgram` "
                "(no vectors.npy / state.json)"
            )
        state = json.loads(state_file.read_text())
        if state.get("tokenizer_fingerprint") != tokenizer_fingerprint(tokenizer):
            raise ConfigError(
                f"init_embeddings={source}: its vectors are of another tokenizer's wordpieces than this "
                "model's; train them with --set tokenizer=<this --model>"
            )
        vectors = np.load(vec_file)
        seen = np.load(p / "seen.npy") if (p / "seen.npy").is_file() else np.abs(vectors).sum(1) > 0
        return vectors, seen
    if p.suffix == ".npy" and p.is_file():
        vectors = np.load(p)
        return vectors, np.abs(vectors).sum(1) > 0
    raise ConfigError(f"init_embeddings={source}: no such folder or .npy file")


def init_embeddings(model: Any, tokenizer: Any, source: str, std: float) -> None:
    """Set the input embeddings of `model` (tied to its MLM output layer) from word vectors: the rows
    of wordpieces the vectors have are centred and scaled to standard deviation `std`; the others keep
    their random initialisation."""
    vectors, seen = word_vectors(source, tokenizer)
    emb = model.get_input_embeddings()
    vocab, dim = emb.weight.shape
    if vectors.shape != (vocab, dim):
        raise ConfigError(
            f"init_embeddings={source}: vectors of shape {tuple(vectors.shape)}, but the model's embeddings "
            f"are [{vocab}, {dim}]; train the vectors with --set dim={dim}"
        )
    rows = np.flatnonzero(seen)
    v = vectors[rows].astype(np.float64)
    v -= v.mean(axis=0)
    v *= std / max(float(v.std()), 1e-12)
    with torch.no_grad():
        emb.weight[torch.from_numpy(rows)] = torch.from_numpy(v).to(emb.weight.dtype)
    log.info("input embeddings of %d of %d wordpieces start from %s", len(rows), vocab, source)


def save_tokenizer(tokenizer: Any, target: Path) -> None:
    """Save `tokenizer` as the folder `target`, built aside and renamed into place (a kill never
    leaves a torn tokenizer that a resume would load)."""
    import os
    import shutil

    from sentkit.core.io import make_temp_dir

    tmp = make_temp_dir(target)
    try:
        tokenizer.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def train_on_corpus(corpus: str, vocab_size: int, *, field: str = "text", lowercase: bool = True) -> Any:
    """A WordPiece vocabulary of `vocab_size` trained on every document of `corpus` (`train_wordpiece`)."""
    from sentkit.data.corpus import CorpusError, CorpusStats, iter_documents

    log.info("training a WordPiece vocabulary of %d on %s", vocab_size, corpus)
    stats = CorpusStats()
    texts = [d.text for d in iter_documents(corpus, field=field, stats=stats)]
    if not texts:  # before anything is trained or written: a vocabulary of nothing is no vocabulary
        raise CorpusError(
            f"corpus {corpus}: no usable document to train a WordPiece vocabulary on "
            f"(skipped {stats.skipped_text()}); bring documents of plain UTF-8 text"
        )
    return train_wordpiece(texts, vocab_size, lowercase=lowercase)
