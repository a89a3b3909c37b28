"""The `whiten` method (`sentkit whiten`, `sentkit train --method whiten` or a cell of an experiment
grid): fit a whitening (`sentkit.models.whitening`) of any model's vectors on sentences of the user's
own corpus and save the result:

- a transformer gets the whitening as a sentence-transformers `Dense` module after its pooling, so
  the folder loads unchanged in sentence-transformers (`SentenceTransformer(folder)`) and in sentkit;
- any other encoder (averaged GloVe, a Hill et al. model, code), or a transformer pooled in a way
  sentence-transformers has no module for (`pooling = "first-last-avg"`), is saved as a folder holding the
  whitening (`whitening.npz`) and its base (a copy of a base folder, or the base's name, and its pooling),
  which `sentkit.load` reads back as the base's vectors whitened.

It takes a model by name, so it lives above the resolver (`sentkit.models.loading`), not in models/.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.config import ConfigError, check_precision
from sentkit.core.methods import Method
from sentkit.models.whitening import PromptedWhitened, Whitened, as_dense, fit_whitening

log = logging.getLogger(__name__)

WHITENING_FILE = "whitening.npz"
BASE_DIR = "base"


@dataclass
class WhitenConfig:
    """`sentkit whiten`: fit a whitening of `model` on up to `max_sentences` sentences of `corpus`
    (a seeded random sample of its sentences of at least `min_words` words) and save it at `out`."""

    model: str = ""  # any model name (sentkit.load)
    corpus: str = ""
    out: str = ""
    max_sentences: int = 100_000
    min_words: int = 3
    dim: int | None = None  # keep the first `dim` whitened directions (default: all)
    pooling: str | None = None  # pool the model another way first (sentkit.load(model, pooling=...))
    precision: str | None = None  # the arithmetic a transformer encodes the sample in (None: fp32)
    seed: int = 0
    batch_size: int = 128
    text_field: str = "text"
    progress: bool = True

    def __post_init__(self) -> None:
        if self.max_sentences < 2:
            raise ConfigError(f"max_sentences must be at least 2, got {self.max_sentences}")
        if self.dim is not None and self.dim < 1:
            raise ConfigError(f"dim must be at least 1, got {self.dim}")
        if self.min_words < 1 or self.batch_size < 1:
            raise ConfigError("min_words and batch_size must be at least 1")
        if self.precision is not None:
            check_precision(self.precision)


def sample_sentences(
    corpus: str, n: int, *, min_words: int, seed: int, field: str = "text", purpose: str = "to fit a whitening on"
) -> tuple[list[str], int]:
    """A uniform sample (reservoir, seeded) of up to n sentences of at least `min_words` words, in
    corpus order; and how many such sentences the corpus has. Fewer than 2 is a CorpusError that
    says what they were for (`purpose`)."""
    from sentkit.data.corpus import CorpusStats
    from sentkit.data.sentences import ReadReport, iter_document_sentences

    rng = np.random.default_rng(seed)
    report = ReadReport(str(corpus), CorpusStats())
    keep: list[tuple[int, str]] = []
    seen = 0
    for sents in iter_document_sentences(corpus, field=field, stats=report.files):
        long_enough = [s for s in sents if len(s.split()) >= min_words]
        report.add_document(len(long_enough))
        for s in long_enough:
            if len(keep) < n:
                keep.append((seen, s))
            else:
                j = int(rng.integers(seen + 1))
                if j < n:
                    keep[j] = (seen, s)
            seen += 1
    if len(keep) < 2:
        raise report.error(
            f"fewer than 2 sentences of at least {min_words} words {purpose}", "bring documents of plain text"
        )
    keep.sort()
    return [s for _, s in keep], seen


def train_whiten(cfg: WhitenConfig) -> Path:
    """Fit and save (see the module docstring). A refusal (a `SentkitError`: a model that does not
    load, a corpus too small, ...) leaves no trace of this run: when `out` held nothing but the lock
    of the run that claimed it (so the claim made it), the lock and the then empty folder are removed."""
    from sentkit.core.errors import SentkitError

    out = Path(cfg.out) if cfg.out else None
    fresh = out is not None and _holds_only_lock(out)
    try:
        return _fit_and_save(cfg)
    except SentkitError:
        if fresh and out is not None:
            _remove_claim(out)
        raise


def _holds_only_lock(out: Path) -> bool:
    """`out` does not exist yet, or holds nothing but the run lock (`training.rundir.LOCK_FILE`)."""
    from sentkit.training.rundir import LOCK_FILE

    try:
        return {p.name for p in out.iterdir()} <= {LOCK_FILE}
    except FileNotFoundError:
        return True
    except OSError:  # not a folder, unreadable: not this run's to clean
        return False


def _remove_claim(out: Path) -> None:
    """Remove what claiming `out` made, the lock and the folder, if nothing else is in it. The lock is
    unlinked while still held: a second process started meanwhile has already been refused (the lock
    is taken without waiting), and one started afterwards finds a fresh folder."""
    import contextlib

    from sentkit.training.rundir import LOCK_FILE

    if not _holds_only_lock(out):
        return
    with contextlib.suppress(OSError):
        (out / LOCK_FILE).unlink(missing_ok=True)
        out.rmdir()


def _fit_and_save(cfg: WhitenConfig) -> Path:
    from sentkit.core.methods import write_marker
    from sentkit.models.loading import load, precision_of
    from sentkit.models.transformer import TransformerEncoder

    require_inputs("whiten", cfg.model, cfg.corpus, cfg.out, "the encoder to whiten")
    pooled: dict[str, Any] = {"pooling": cfg.pooling} if cfg.pooling else {}
    arithmetic: dict[str, Any] = {"precision": cfg.precision} if cfg.precision else {}
    encoder: Any = load(cfg.model, **pooled, **arithmetic)
    sentences, total = sample_sentences(
        cfg.corpus, cfg.max_sentences, min_words=cfg.min_words, seed=cfg.seed, field=cfg.text_field
    )
    log.info("whiten: fitting on %d of the %d sentences of %s", len(sentences), total, cfg.corpus)
    x = np.asarray(encoder.encode(sentences, batch_size=cfg.batch_size, show_progress=cfg.progress), dtype=np.float32)
    check_enough_sentences(len(sentences), x.shape[1], cfg.dim)
    mu, w = fit_whitening(x, cfg.dim)
    info = {
        "base_model": cfg.model,
        "fitted_on": cfg.corpus,
        "sentences": len(sentences),
        "corpus_sentences": total,
        "dim": int(w.shape[1]),
        "seed": cfg.seed,
        **({"precision": precision_of(encoder)} if precision_of(encoder) else {}),
    }
    out = Path(cfg.out)
    from sentkit.models.pooling import saveable_poolings

    if isinstance(encoder, TransformerEncoder) and not encoder.normalize and encoder.pooling in saveable_poolings():
        if encoder.precision != "fp32":  # fitted in half precision; the folder keeps the base's float32 weights
            dense = encoder.dense
            encoder = load(cfg.model, **pooled, precision="fp32")
            encoder.dense = list(dense)
        encoder.dense = [*encoder.dense, as_dense(mu, w)]
        encoder.save(
            out,
            method="whiten",
            extra={"whitening": info},
            model_card=f"# {cfg.model}, whitened\n\nBERT-whitening fitted on {len(sentences):,} sentences of "
            f"`{cfg.corpus}` (a sentence-transformers Dense module after the pooling).\n",
        )
        return out
    from sentkit.core.io import atomic_open

    base = keep_base(cfg.model, out)
    with atomic_open(out / WHITENING_FILE, "wb") as f:
        np.savez(f, mu=mu, w=w)
    write_marker(out, "whiten", base=base, whitening=info, **({"base_pooling": cfg.pooling} if cfg.pooling else {}))
    return out


def check_enough_sentences(n: int, d: int, dim: int | None) -> None:
    """Refuse to keep `dim` (default all `d`) whitened directions from `n` sentences when that is `n` or more: the
    centred sentences span at most n - 1 directions, and the rest, of no variance, would be scaled by up to
    1/sqrt(eps) (entries of some 30,000: a whitening of noise)."""
    k = d if dim is None else dim
    if n <= k <= d:  # (a --dim above d is fit_whitening's error)
        raise ConfigError(
            f"{n} sentences cannot whiten {k} dimensions ({'all of the model' if dim is None else '--dim'}): "
            f"they span at most {n - 1} directions, the other {k - n + 1} have no variance and would be scaled up "
            f"about 30,000-fold; fit on more sentences (at least {k + 1}, many more is better: a larger corpus, "
            f"--max-sentences) or keep fewer directions with --dim N, N < {n}"
        )


def require_inputs(method: str, model: str, corpus: str, out: str, role: str) -> None:
    """The one error line of a post-processing method (whiten, sif) given no model, corpus or output."""
    if not model:
        raise ConfigError(f"{method}: no model given (--model NAME: {role})")
    if not corpus or not out:
        raise ConfigError(f"{method}: --corpus and --out are required")


def read_kept(path: Path, file: str, command: str) -> dict[str, Any]:
    """The marker of a folder written with `keep_base` and holding `file`; ConfigError naming `command`
    (what wrote it, so what to run again) when either is missing."""
    from sentkit.core.methods import read_marker

    marker = read_marker(path) or {}
    if not (path / file).is_file() or "base" not in marker:
        raise ConfigError(
            f"{path}: not a folder written by `{command}` (no {file} or base); the folder is "
            f"damaged, run `{command}` again"
        )
    return marker


def keep_base(model: str, out: Path) -> str:
    """Make `out` (checked writable, created) and make the base model reachable from it: the model files
    of a model folder are copied into ``out/base`` (the result is self-contained; its run's bookkeeping,
    logs, neighbour-index cache and hidden files such as its ``.lock`` are not the model and stay behind),
    any other name is kept as the name. Returns what the marker records as ``base``. Shared by the
    post-processing methods (whiten, sif)."""
    from sentkit.core.identity import is_model_file
    from sentkit.core.io import check_output_dir
    from sentkit.models.loading import describe

    check_output_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    if describe(model) != "folder":
        return model
    if (out / BASE_DIR).exists():
        shutil.rmtree(out / BASE_DIR)
    root = Path(model).resolve()

    def left_out(folder: str, names: list[str]) -> set[str]:
        rel = Path(folder).resolve().relative_to(root)
        return {n for n in names if not is_model_file(rel / n)}

    shutil.copytree(root, out / BASE_DIR, ignore=left_out)
    return BASE_DIR


def load_base(path: Path, marker: dict[str, Any], *, precision: str | None = None) -> Any:
    """The base model a post-processing folder written with `keep_base` names (a transformer base in
    `precision`, sentkit.models.precision)."""
    from sentkit.models.loading import load, takes_precision

    base = str(marker["base"])
    where = str(path / base) if base == BASE_DIR else base
    settings: dict[str, Any] = {"pooling": marker["base_pooling"]} if marker.get("base_pooling") else {}
    if precision is not None and takes_precision(where):  # a base of word vectors computes in float32: no note
        settings["precision"] = precision
    return load(where, **settings)


def load_whitened(path: Path, *, precision: str | None = None) -> Any:
    """What `train_whiten` saved: a transformer folder with its Dense module, or a base whitened (a
    transformer base computes in `precision`; the whitening is float32)."""
    path = Path(path)
    if (path / "modules.json").is_file():
        from sentkit.models.transformer import TransformerEncoder

        return TransformerEncoder.from_pretrained(str(path), precision=precision)
    marker = read_kept(path, WHITENING_FILE, "sentkit whiten")
    from sentkit.core.interface import prompts_of

    base = load_base(path, marker, precision=precision)
    kind = PromptedWhitened if prompts_of(base) != ({}, None) else Whitened  # the base's prompts apply
    with np.load(path / WHITENING_FILE) as z:
        return kind(base, z["mu"], z["w"], name=f"{marker['base']} whitened")


WHITEN = Method("whiten", WhitenConfig, train_whiten, load_whitened)  # listed in sentkit.core.methods.METHODS
