"""``build_probing(corpus, out, settings)``: SentEval's ten probing tasks from any corpus.

Phases: parse (cached, resumable: :mod:`~sentkit.data.probing.parse`), analyse every parsed
sentence once, then build each task with its own seeded Generator (``seed`` and the task's name,
so a subset of tasks gives the same files as the full build) and write it atomically as
``<out>/PROBING/<SentEval file name>``, lines ``tr|va|te<TAB>label<TAB>sentence`` grouped by split,
shuffled within. The manifest ``<out>/PROBING/manifest.json`` is rewritten after every task: a
task whose entry matches the settings, the corpus fingerprint and its file's sha256 is not built
again on a rerun.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.config import ConfigError
from sentkit.core.identity import config_id
from sentkit.core.io import atomic_open, atomic_write_text, check_output_dir, sha256_file
from sentkit.data.probing import parse as P
from sentkit.data.probing.files import PROBING_FILES, probing_task
from sentkit.data.probing.tasks import (
    BUILDERS,
    SPLITS,
    TASK_ORDER,
    Pool,
    Row,
    TooFewSentences,
    analyse,
)

log = logging.getLogger(__name__)

PROBING_DIR = "PROBING"
MANIFEST = "manifest.json"
FORMAT = 1


@dataclass(frozen=True)
class BuildSettings:
    """Sizes and the paper's rules (defaults: Conneau et al. 2018 / SentEval's probing README)."""

    train_size: int = 100_000
    dev_size: int = 10_000
    test_size: int = 10_000
    seed: int = 1111
    min_tokens: int = 5
    max_tokens: int = 28
    wc_words: int = 1000
    wc_rank_start: int = 2000
    wc_min_chars: int = 4
    number_freq_min: int = 100  # Tense, SubjNum, ObjNum: corpus frequency of the target form
    number_freq_max: int = 5000
    somo_freq_min: int = 40
    somo_freq_max: int = 400
    somo_log_tolerance: float = 1.0  # |log(1 + bigram count) difference| allowed, each side
    somo_min_bigram: int = 1  # each bigram a replacement forms occurs at least this often in the corpus
    top_classes: int = 20
    depth_classes: int = 8

    def __post_init__(self) -> None:
        for name in ("train_size", "dev_size", "test_size", "min_tokens", "wc_words", "top_classes", "depth_classes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_tokens < self.min_tokens:
            raise ConfigError(f"max_tokens ({self.max_tokens}) is below min_tokens ({self.min_tokens})")
        for lo, hi in (("number_freq_min", "number_freq_max"), ("somo_freq_min", "somo_freq_max")):
            if getattr(self, hi) < getattr(self, lo):
                raise ConfigError(f"{hi} ({getattr(self, hi)}) is below {lo} ({getattr(self, lo)})")
        if self.somo_min_bigram < 0:
            raise ConfigError(f"somo_min_bigram must be >= 0, got {self.somo_min_bigram}")
        if self.somo_log_tolerance < 0:
            raise ConfigError(f"somo_log_tolerance must be >= 0, got {self.somo_log_tolerance}")

    @property
    def sizes(self) -> tuple[int, int, int]:
        return self.train_size, self.dev_size, self.test_size


@dataclass
class BuildResult:
    manifest: dict[str, Any]
    built: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    failed: dict[str, TooFewSentences] = field(default_factory=dict)
    resized: dict[str, tuple[int, int, int]] = field(default_factory=dict)


def task_rng(seed: int, task: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(task.encode())])


def fitted_sizes(sizes: tuple[int, int, int], err: TooFewSentences) -> tuple[int, int, int]:
    """`sizes` scaled down (same ratio) to what `err` says the corpus gives."""
    f = err.found / max(1, err.needed)
    return tuple(max(1, int(x * f)) for x in sizes)  # type: ignore[return-value]


def _settings_key(settings: BuildSettings) -> str:
    return config_id(dataclasses.asdict(settings))


def write_task(path: Path, rows: list[Row], rng: np.random.Generator) -> None:
    """SentEval's probing format: grouped by split (tr, va, te), shuffled within each."""
    with atomic_open(path, "w", encoding="utf-8", newline="\n") as f:
        for split in SPLITS:
            part = [r for r in rows if r[0] == split]
            for j in rng.permutation(len(part)):
                s, label, text = part[int(j)]
                f.write(f"{s}\t{label}\t{text}\n")


def class_counts(rows: list[Row]) -> dict[str, dict[str, int]]:
    out: dict[str, Counter[str]] = {s: Counter() for s in SPLITS}
    for s, label, _ in rows:
        out[s][label] += 1
    return {s: dict(sorted(c.items())) for s, c in out.items()}


def _read_manifest(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        log.warning("%s is not readable; every task is built again", path)
        return {}
    return data if isinstance(data, dict) else {}


def build_probing(
    corpus: str | Path,
    out: str | Path,
    settings: BuildSettings | None = None,
    *,
    tasks: list[str] | None = None,
    cache_dir: str | Path | None = None,
    text_field: str = "text",
    txt_mode: str = "file",
    fit: bool = False,
    workers: int = 1,
    batch_size: int = 512,
    shard_sentences: int = 5000,
    progress: bool = True,
    nlp: Any = None,
) -> BuildResult:
    """Build the probing tasks of `tasks` (default: all ten) from `corpus` into `out`/PROBING.

    A task the corpus is too small for is recorded in ``failed`` (the others are still written);
    with `fit` it is built at the largest sizes the corpus gives (same train:dev:test ratio)."""
    from sentkit import __version__

    s = settings or BuildSettings()
    names = [probing_task(t) for t in (tasks or TASK_ORDER)]
    out_dir = Path(out)
    check_output_dir(out_dir, what="--out")
    folder = out_dir / PROBING_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:  # before the parse: every split needs a sentence per class
        k = n_classes(name, s)
        if min(s.sizes) < k:
            raise ConfigError(
                f"task {name} has {k} classes and each split needs one sentence per class at least: "
                f"give --train-size, --dev-size and --test-size of {k} or more"
                + (" (or fewer target words, --set wc_words=...)" if name == "WC" else "")
            )
    t0 = time.perf_counter()
    # ---- parse (cached)
    cache = Path(cache_dir) if cache_dir is not None else out_dir / "parsed"
    report = P.parse_corpus(
        corpus,
        cache,
        min_tokens=s.min_tokens,
        max_tokens=s.max_tokens,
        text_field=text_field,
        txt_mode=txt_mode,
        batch_size=batch_size,
        workers=workers,
        shard_sentences=shard_sentences,
        progress=progress,
        nlp=nlp,
    )
    t_parse = time.perf_counter() - t0
    # ---- analyse every parsed sentence once
    pool: Pool = analyse(P.iter_parsed(cache), P.word_counts(cache))
    t_analyse = time.perf_counter() - t0 - t_parse
    log.info(
        "%d usable sentences (of %d parsed) analysed in %.1fs", len(pool.items), report.sentences_parsed, t_analyse
    )
    index = P.read_index(cache)
    mpath = folder / MANIFEST
    old = _read_manifest(mpath)
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "sentkit": __version__,
        "corpus": str(corpus),
        "corpus_fingerprint": report.fingerprint,
        "parse": report.as_dict(),
        "parse_key": index["key"],
        "usable_sentences": len(pool.items),
        "settings": dataclasses.asdict(s),
        "tasks": dict(old.get("tasks", {})) if old.get("corpus_fingerprint") == report.fingerprint else {},
    }
    result = BuildResult(manifest)
    key = _settings_key(s)
    from tqdm.auto import tqdm

    for name in tqdm(names, desc="building tasks", unit=" task", disable=not progress):
        path = folder / PROBING_FILES[name]
        prev = manifest["tasks"].get(name)
        if (
            prev
            and prev.get("settings_key") == key
            and path.is_file()
            and sha256_file(path) == prev.get("sha256")
            and (fit or prev.get("sizes") == dict(zip(SPLITS, s.sizes)))
        ):
            result.reused.append(name)
            continue
        t1 = time.perf_counter()
        sizes = s.sizes
        rows: list[Row] | None = None
        for attempt in range(4):
            try:
                rows = BUILDERS.get(name)(pool, s, sizes, task_rng(s.seed, name))
                break
            except TooFewSentences as e:
                if not fit or attempt == 3 or e.found <= 0:
                    result.failed[name] = e
                    break
                sizes = fitted_sizes(sizes, e) if attempt == 0 else tuple(int(x * 0.9) for x in sizes)  # type: ignore[assignment]
        if rows is not None and min(sizes) < n_classes(name, s):  # --fit shrank it below one per class
            result.failed[name] = TooFewSentences(
                name, 0, sum(s.sizes), "fitted below one sentence per class and split"
            )
            rows = None
        if rows is None:
            # a file this build wrote before (its manifest says so) must not be run as if current
            if prev and path.is_file() and sha256_file(path) == prev.get("sha256"):
                path.unlink()
            manifest["tasks"].pop(name, None)
            atomic_write_text(mpath, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
            continue
        if sizes != s.sizes:
            result.resized[name] = sizes
        write_task(path, rows, task_rng(s.seed + 1, name))
        manifest["tasks"][name] = {
            "file": PROBING_FILES[name],
            "sha256": sha256_file(path),
            "settings_key": key,
            "sizes": dict(zip(SPLITS, sizes)),
            "requested": dict(zip(SPLITS, s.sizes)),
            "rows": {sp: n for sp, n in ((sp, sum(c.values())) for sp, c in class_counts(rows).items())},
            "class_counts": class_counts(rows),
            "rules": " ".join((BUILDERS.get(name).__doc__ or "").split()),
            "build_seconds": round(time.perf_counter() - t1, 2),
        }
        result.built.append(name)
        manifest["build_seconds"] = {
            "parse": round(t_parse, 1),
            "analyse": round(t_analyse, 1),
            "total": round(time.perf_counter() - t0, 1),
        }
        atomic_write_text(mpath, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    manifest["build_seconds"] = {
        "parse": round(t_parse, 1),
        "analyse": round(t_analyse, 1),
        "total": round(time.perf_counter() - t0, 1),
    }
    atomic_write_text(mpath, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return result


def n_classes(task: str, s: BuildSettings) -> int:
    """The number of classes of a probing task under the settings."""
    return {"SentLen": 6, "WC": s.wc_words, "TreeDepth": s.depth_classes, "TopConst": s.top_classes}.get(task, 2)
