"""LLM2Vec's unsupervised recipe (BehnamGhader et al. 2024) on the one loop: `sentkit train --method llm2vec --model
DECODER`, a decoder language model made a sentence encoder in two phases, each a recipe of the loop run in a
sub-folder of `--out`, both with bidirectional attention (LLM2Vec's step 1, saved in the model's config.json):

1. ``1-mntp``: masked next-token prediction (`sentkit.training.recipes.mntp`);
2. ``2-simcse``: unsupervised SimCSE of phase 1's model on the same corpus, mean pooling, dropout `simcse_dropout`
   (LLM2Vec's 0.3, on the attention weights) as the only augmentation.

Rerunning the command with ``--resume`` skips a finished phase and resumes the unfinished one from its last
checkpoint; `recipe.json` records each phase's settings and cost. The folder loads as phase 2's encoder, in sentkit
(`sentkit.load(out)`) and in sentence-transformers (`SentenceTransformer(out)`: its modules.json points into
``2-simcse``). The defaults are LLM2Vec's train_configs
(1000 steps each, MNTP batch 32 lr 5e-5, SimCSE batch 128 lr 3e-5, temperature 0.05 = its loss scale 20) except
the sequence lengths (128).

LoRA (`lora_r`, `lora_alpha`, `lora_dropout`, as every transformer method takes them) applies to both phases, as in
LLM2Vec: phase 1 trains adapters and saves them merged into the weights; phase 2 trains new adapters on that merged
model. Unset, a decoder over 1B parameters gets LLM2Vec's rank 16 (alpha 32) and a smaller one trains every weight;
``lora_r=0`` turns LoRA off for any size.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from sentkit.core.config import ConfigError
from sentkit.core.methods import Method
from sentkit.data.corpus import CorpusError, Fix
from sentkit.objectives.matryoshka import MatryoshkaSettings
from sentkit.training.recipes.simcse import SimCSE, SimCSEConfig

log = logging.getLogger(__name__)

PHASES = ("1-mntp", "2-simcse")
RECIPE_FILE = "recipe.json"
# the keys of each phase's config that this recipe names after the phase (the rest keep their names)
PHASE_KEYS: dict[str, dict[str, str]] = {
    PHASES[0]: {"max_steps": "mntp_steps", "batch_size": "mntp_batch_size", "lr": "mntp_lr"},
    PHASES[1]: {
        "max_steps": "simcse_steps",
        "batch_size": "simcse_batch_size",
        "lr": "simcse_lr",
        "dropout": "simcse_dropout",
    },
}


@dataclass
class LLM2VecConfig(MatryoshkaSettings):
    """Every setting of the recipe; each phase's config is derived from these (`phases`)."""

    corpus: str
    out: str
    model: str = ""  # a decoder language model (folder or Hugging Face id); required
    seed: int = 0
    text_field: str = "text"  # .jsonl / .parquet / HF dataset column
    txt_mode: str = "file"  # a single .txt corpus: one document, or one per line
    # phase 1: MNTP
    mntp_steps: int = 1000
    mntp_batch_size: int = 32
    mntp_lr: float = 5e-5
    seq_len: int = 128
    mlm_probability: float = 0.2
    mask_token: str = "blank"
    # phase 2: SimCSE
    simcse_steps: int = 1000
    simcse_batch_size: int = 128
    simcse_lr: float = 3e-5
    simcse_dropout: float = 0.3
    temperature: float = 0.05
    max_len: int = 128
    pooling: str = "mean"
    precision: str = "auto"
    # LoRA of both phases (None: rank 16 for a decoder over 1B parameters, else none; 0: none)
    lora_r: int | None = None
    lora_alpha: float | None = None  # None: 2 x lora_r
    lora_dropout: float = 0.05
    base_precision: str = "auto"  # both phases' frozen base under LoRA (TrainConfig.base_precision)
    gradient_checkpointing: bool = False  # both phases (TrainConfig.gradient_checkpointing)
    # bookkeeping
    checkpoint_every: int = 100
    resume: bool = False
    overwrite: bool = False
    allow_config_change: bool = False  # --resume with settings that differ from the run's (a failed phase's fix)
    progress: bool = True
    max_steps: int | None = None  # not taken (two phases, two step counts): --set mntp_steps=N / simcse_steps=N

    def __post_init__(self) -> None:
        super().__post_init__()  # matryoshka_dims / _weights (phase 2's) read and checked
        if self.max_steps is not None:
            raise ConfigError(
                f"--method llm2vec runs two phases with a step count each: instead of --max-steps {self.max_steps}, "
                f"give --set mntp_steps={self.max_steps} and/or --set simcse_steps={self.max_steps}"
            )
        if not self.model:
            raise ConfigError(
                "--method llm2vec needs --model: a decoder language model (a folder or Hugging Face id "
                "of GPT-2, Llama, Qwen2, Mistral, ...)"
            )
        for name in (
            "mntp_steps",
            "mntp_batch_size",
            "seq_len",
            "simcse_steps",
            "simcse_batch_size",
            "max_len",
            "checkpoint_every",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.simcse_dropout < 1:
            raise ConfigError(f"simcse_dropout must be in [0, 1), got {self.simcse_dropout}")
        self.phases(Path(self.out))  # each phase's config validates its share (pooling, LoRA, precision, ...)

    def phases(self, out: Path) -> list[tuple[str, Any]]:
        """(folder, config) of each phase, validated; an error names the phase and this recipe's keys."""
        from sentkit.training.recipes.mntp import MNTPConfig

        common: dict[str, Any] = {
            "corpus": self.corpus,
            "seed": self.seed,
            "text_field": self.text_field,
            "txt_mode": self.txt_mode,
            "progress": self.progress,
            "precision": self.precision,
            "attention": "bidirectional",
            "checkpoint_every": self.checkpoint_every,
            "allow_config_change": self.allow_config_change,
            "lora_r": self.lora_r,
            "lora_alpha": self.lora_alpha,
            "lora_dropout": self.lora_dropout,
            "base_precision": self.base_precision,
            "gradient_checkpointing": self.gradient_checkpointing,
        }

        def named(phase: str) -> dict[str, Any]:
            return {key: getattr(self, own) for key, own in PHASE_KEYS[phase].items()}

        per_phase: dict[str, tuple[type, dict[str, Any]]] = {
            PHASES[0]: (
                MNTPConfig,
                {
                    "model": self.model,
                    "seq_len": self.seq_len,
                    "mlm_probability": self.mlm_probability,
                    "mask_token": self.mask_token,
                    "prepared_dir": str(out / "prepared" / "documents"),
                },
            ),
            PHASES[1]: (
                DecoderSimCSEConfig,
                {
                    "model": str(out / PHASES[0]),
                    "temperature": self.temperature,
                    "max_len": self.max_len,
                    "pooling": self.pooling,
                    "mlp": False,
                    "prepared_dir": str(out / "prepared" / "sentences"),
                    "matryoshka_dims": self.matryoshka_dims,
                    "matryoshka_weights": self.matryoshka_weights,
                },
            ),
        }
        made = []
        for phase, (cls, settings) in per_phase.items():
            try:
                made.append((phase, cls(**common, **named(phase), **settings, out=str(out / phase))))
            except ConfigError as e:  # in this recipe's keys (simcse_lr, not lr), naming the phase
                raise ConfigError(f"llm2vec phase {phase}: {own_words(str(e), phase)}") from None
        return made


def own_words(message: str, phase: str) -> str:
    """A phase's message in this recipe's keys: `lr` of phase 2 is `simcse_lr`."""
    for key, own in PHASE_KEYS[phase].items():
        message = re.sub(rf"\b{key}\b", own, message)
    return message


# ----------------------------------------------------------------------------- phase 2
@dataclass
class DecoderSimCSEConfig(SimCSEConfig):
    """SimCSE of a decoder: mean pooling, no MLP, `dropout` in every layer (LLM2Vec's simcse_dropout)."""

    pooling: str = "mean"
    mlp: bool = False
    dropout: float | None = 0.3


class DecoderSimCSE(SimCSE):
    """`SimCSE` (which takes a decoder base: its causal LM, saved with its head) with LLM2Vec's defaults."""

    config_cls = DecoderSimCSEConfig


# ----------------------------------------------------------------------------- the run
def own_fixes(fixes: Any, phase: str) -> list[Fix]:
    """A phase's suggested fixes in this recipe's keys (batch_size of phase 1 is mntp_batch_size); a fix naming a
    key the recipe does not take is dropped."""
    keys = {f.name for f in fields(LLM2VecConfig)}
    out = []
    for fix in fixes:
        settings = {PHASE_KEYS[phase].get(k, k): v for k, v in fix.settings.items()}
        if set(settings) <= keys:
            out.append(Fix(settings, fix.note))
    return out


def _done(folder: Path) -> bool:
    from sentkit.core.methods import read_marker

    return folder.is_dir() and read_marker(folder) is not None  # a method writes its sentkit.json last


def train_llm2vec(cfg: LLM2VecConfig) -> Path:
    """Run the phases that are not done yet (see the module docstring); returns `cfg.out`."""
    from sentkit.core.io import atomic_write_text
    from sentkit.core.methods import write_marker
    from sentkit.models.decoder import check_decoder
    from sentkit.models.hub import resolve
    from sentkit.models.transformer import point_st_at
    from sentkit.training.checkpoint import has_checkpoint
    from sentkit.training.loop import train
    from sentkit.training.recipes.mntp import MNTP
    from sentkit.training.rundir import write_run

    check_decoder(resolve(cfg.model), cfg.model)  # before anything is written: a masked LM is one line
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    record_file = out / RECIPE_FILE
    record: dict[str, Any] = json.loads(record_file.read_text()) if record_file.is_file() else {}
    record.update({"recipe": "llm2vec", "config": asdict(cfg)})
    costs = record.setdefault("phases", {})
    write_run(out, "llm2vec", cfg, status="training")
    for (folder, phase_cfg), recipe in zip(cfg.phases(out), (MNTP, DecoderSimCSE)):
        target = out / folder
        if _done(target):
            log.info("llm2vec: phase %s already done", folder)
            continue
        phase_cfg.resume = has_checkpoint(target) or target.is_dir()  # continue it (from step 0 if no checkpoint)
        log.info("llm2vec: phase %s%s", folder, " (resumed)" if phase_cfg.resume else "")
        t, c = time.perf_counter(), time.process_time()
        try:
            train(phase_cfg, recipe_cls=recipe)
        except Exception as e:  # run.json says which phase failed and why; the error is in this recipe's keys
            said = e
            if isinstance(e, CorpusError):  # its fix as this recipe's settings, rerun over the failed run
                fixes = [Fix({**f.settings, "resume": True, "allow_config_change": True}, f.note) for f in
                         own_fixes(e.fixes, folder)]  # fmt: skip
                said = CorpusError(f"llm2vec phase {folder}: {own_words(e.message, folder)}", fixes=fixes)
            elif isinstance(e, ConfigError):
                said = ConfigError(f"llm2vec phase {folder}: {own_words(str(e), folder)}")
            first = (str(said).splitlines() or [type(e).__name__])[0]
            write_run(out, "llm2vec", cfg, status="failed", phase=folder, error=f"{type(e).__name__}: {first}")
            if said is e:
                raise
            raise said from None
        prev = costs.get(folder, {})
        costs[folder] = {
            "settings": asdict(phase_cfg),
            "seconds": round(prev.get("seconds", 0.0) + time.perf_counter() - t, 1),
            "cpu_seconds": round(prev.get("cpu_seconds", 0.0) + time.process_time() - c, 1),
        }
        atomic_write_text(record_file, json.dumps(record, indent=2, default=str) + "\n")
    record["final"] = PHASES[-1]
    atomic_write_text(record_file, json.dumps(record, indent=2, default=str) + "\n")
    point_st_at(out, PHASES[-1])  # SentenceTransformer(out) loads phase 2, as sentkit.load(out) does
    write_marker(out, "llm2vec", final=PHASES[-1], base_model=cfg.model, **cfg.matryoshka_marker())
    write_run(out, "llm2vec", cfg, status="done")
    return out


def load_llm2vec(path: Path) -> Any:
    """The encoder of the last phase."""
    from sentkit.core.methods import read_marker
    from sentkit.models.loading import load

    final = (read_marker(Path(path)) or {}).get("final")
    if not final or not (Path(path) / final).is_dir():
        raise ConfigError(f"{path}: the llm2vec run there has not finished; rerun the command that started it")
    return load(str(Path(path) / final))


LLM2VEC = Method("llm2vec", LLM2VecConfig, train_llm2vec, load_llm2vec)  # listed in sentkit.core.methods.METHODS
