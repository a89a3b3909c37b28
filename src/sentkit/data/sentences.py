"""Ordered sentences for the Hill et al. (2016) models: offline segmentation, tokenisation,
lower-casing and a vocabulary with a minimum count.

The models need consecutive sentences S(i-1), S(i), S(i+1) of the same document, so a
corpus is read into a compact :class:`TokenizedCorpus` (flat int32 token ids, sentence
offsets and the document of each sentence, in corpus order). Segmentation is rule based
(no model download), see :func:`split_sentences`: paragraph breaks always end a sentence;
``.``, ``!`` and ``?`` followed by a space end one unless the word before is a known
abbreviation or a single-letter initial, or the next word starts in lower case; the full
stops and marks of scripts written without spaces (``。！？．``) end one with or without a
space, and so do the terminators of other scripts (``।`` ``॥`` ``۔`` ``؟`` ``።`` ``။`` ``។``).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sentkit.core.errors import InputError, MissingInputError
from sentkit.data.corpus import CorpusError, CorpusStats, Fix

log = logging.getLogger(__name__)

ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "st",
        "jr",
        "sr",
        "prof",
        "rev",
        "gen",
        "col",
        "capt",
        "lt",
        "sgt",
        "hon",
        "messrs",
        "mme",
        "mlle",
        "vs",
        "etc",
        "viz",
        "cf",
        "ie",
        "eg",
        "vol",
        "ch",
        "fig",
        "co",
        "inc",
        "ltd",
        "esq",
        "gov",
        "sen",
        "rep",
        "ave",
        "dept",
        "univ",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
    ]
)

_PARA_RE = re.compile(r"\n[ \t]*\n+")
PARAGRAPH_RE = _PARA_RE  # a paragraph break: no sentence crosses one (a document may be split at them)
_WS_RE = re.compile(r"\s+")
# A candidate end: ASCII terminal punctuation, optional closing quotes/brackets, then whitespace
# (groups 1-2); or a full stop / mark of a script without spaces (CJK 。！？．｡) or another script's
# terminator (Devanagari danda ।॥, Urdu ۔, Arabic ؟, Ethiopic ።፧, Myanmar ။, Khmer ។៕), optional
# closing quotes/brackets (」』）...), then optional whitespace (group 3).
_OWN_MARKS = "。！？．｡।॥۔؟።፧။។៕"
_END_RE = re.compile(
    r"([.!?]+)([\"'”’)\]]*)\s+"
    rf"|([{_OWN_MARKS}]+)[\"'”’)\]」』）】〕〉》〗〙〛｣]*\s*"
)
_WORD_BEFORE_RE = re.compile(r"(?<![\w'’])([A-Za-z]+)\.$")
# What may open the next sentence (quotes, brackets), then its first letter or digit.
_NEXT_WORD_RE = re.compile(r"[\"'“‘(\[_「『（【]*([^\W_])")
_DIGIT_RE = re.compile(r"\d")
_TOKEN_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*|[^\w\s]")
_WORDCHAR_RE = re.compile(r"[^\W_]")
_QUOTE_MAP = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "—": "-", "–": "-"})


def split_sentences(text: str) -> list[str]:
    """Split raw text into sentences (original case, whitespace collapsed), in order.

    The rules, in order:

    - a paragraph break (a blank line) always ends a sentence; other line breaks are spaces;
    - ``.``, ``!`` or ``?`` (a run of them, then closing quotes or brackets) followed by
      whitespace ends a sentence, unless the next word starts with a lower-case letter, or, for
      ``.``, the word before is a single-letter initial (``J. R. Smith``) or a known abbreviation
      (``Mr.``, ``etc.``: :data:`ABBREVIATIONS`). The next word may start with a capital of any
      script (``Привет. Как``), a digit, or a letter of a script without case (``Done. 你好``);
    - a CJK full stop or mark (``。！？．｡``, then closing quotes or brackets such as ``」``) ends
      a sentence with or without a space after it (Chinese and Japanese put none), as do the
      terminators of other scripts: ``।`` ``॥`` (Devanagari), ``۔`` (Urdu), ``؟`` (Arabic),
      ``።`` ``፧`` (Ethiopic), ``။`` (Myanmar), ``។`` ``៕`` (Khmer). A fullwidth ``．`` between
      digits (``３．５``) is a decimal point, not an end.

    Why no sentence starts in lower case after a period: most such periods end an abbreviation the
    list does not hold (``e.g. this``, ``approx. ten``, ``p. 5 of``), and cutting there breaks one
    sentence in two, while the opposite mistake (a real sentence that starts in lower case, rare in
    edited text) only joins two. Thai and other scripts that mark sentences with a space alone
    are not split inside a paragraph (a space there also separates phrases): give them one
    sentence per line and blank lines, or split them beforehand.
    """
    out: list[str] = []
    for para in _PARA_RE.split(text):
        para = _WS_RE.sub(" ", para).strip()
        if not para:
            continue
        start = 0
        for m in _END_RE.finditer(para):
            end = m.end()
            if end >= len(para):
                break
            own = m.group(3)
            if own is not None:
                if own == "．" and _DIGIT_RE.match(para, end) and _DIGIT_RE.match(para, m.start() - 1):
                    continue  # a fullwidth decimal point: ３．５
            else:
                nxt = _NEXT_WORD_RE.match(para, end)
                if nxt is None or nxt.group(1).islower():
                    continue  # next word is lower case (or no word): not a sentence end
                if m.group(1) == ".":
                    before = _WORD_BEFORE_RE.search(para, max(start, m.start() - 20), m.start() + 1)
                    if before is not None:
                        w = before.group(1)
                        if len(w) == 1 or w.lower() in ABBREVIATIONS:
                            continue  # initial ("J. Smith") or abbreviation ("Mr. Knightley")
            sent = para[start:end].strip()
            if sent:
                out.append(sent)
            start = end
        tail = para[start:].strip()
        if tail:
            out.append(tail)
    return out


def is_punctuation(token: str) -> bool:
    """True for a token with no letter or digit."""
    return _WORDCHAR_RE.search(token) is None


def tokenize(sentence: str, *, lowercase: bool = True, punctuation: bool = True) -> list[str]:
    """Words (letters/digits, inner apostrophes kept) and, with ``punctuation``, single
    punctuation marks."""
    s = sentence.translate(_QUOTE_MAP)
    if lowercase:
        s = s.lower()
    toks: list[str] = _TOKEN_RE.findall(s)
    return toks if punctuation else [t for t in toks if not is_punctuation(t)]


@dataclass
class ReadReport:
    """What a corpus read kept and skipped: the counts ``sentkit prepare`` prints, plus sentences.

    ``files`` holds the reader's :class:`~sentkit.data.corpus.CorpusStats` (documents read and
    skipped as empty / binary / not UTF-8 / bad JSON ...); ``without_sentence`` counts the
    documents that were read but gave no sentence with a token."""

    source: str
    files: CorpusStats = field(default_factory=CorpusStats)
    kept: int = 0
    without_sentence: int = 0
    sentences: int = 0
    tokens: int = 0

    def add_document(self, sentences: int, tokens: int = 0) -> None:
        """Count one document read: kept with its `sentences` and `tokens`, or, with no sentence, as
        one without a sentence."""
        if sentences:
            self.kept += 1
            self.sentences += sentences
            self.tokens += tokens
        else:
            self.without_sentence += 1

    def skipped(self) -> str:
        return f"{self.without_sentence} without a sentence, {self.files.skipped_text()}"

    def summary(self) -> str:
        """Two lines, in the words of ``sentkit prepare``."""
        return (
            f"read {self.files.read} documents; kept {self.kept} ({self.sentences:,} sentences, "
            f"{self.tokens:,} tokens)\nskipped: {self.skipped()}"
        )

    def one_line(self) -> str:
        return (
            f"read {self.files.read} documents, kept {self.kept} with {self.sentences:,} sentences; "
            f"skipped {self.skipped()}"
        )

    def error(self, problem: str, advice: str, fixes: Iterable[Fix] = ()) -> CorpusError:
        """A one-line CorpusError naming the corpus, what is missing, the counts and the way out
        (``fixes``: settings the CLI shows as flags of the command that was run)."""
        return CorpusError(f"corpus {self.source}: {problem} ({self.one_line()}); {advice}", fixes=fixes)


def source_name(source: object) -> str:
    """How a corpus is named in messages: its path, or the number of documents given in Python."""
    if isinstance(source, (str, Path)):
        return str(source)
    n = len(source) if isinstance(source, Sequence) else "?"
    return f"<{n} documents given in Python>"


@dataclass
class TokenizedCorpus:
    """Sentences of a corpus in document order, as ids into ``words``.

    ``tokens[offsets[i]:offsets[i+1]]`` are the ids of sentence ``i``; ``doc_ids[i]`` is its
    document. ``words``/``counts`` cover every type seen (no min-count applied here).
    """

    words: list[str]
    counts: np.ndarray  # int64 [n_types]
    tokens: np.ndarray  # int32 [n_tokens]
    offsets: np.ndarray  # int64 [n_sentences + 1]
    doc_ids: np.ndarray  # int32 [n_sentences]
    report: ReadReport | None = None  # set by read_corpus

    def __len__(self) -> int:
        return int(self.offsets.shape[0] - 1)

    @property
    def n_tokens(self) -> int:
        return int(self.offsets[-1])

    def sentence(self, i: int) -> list[str]:
        return [self.words[t] for t in self.tokens[self.offsets[i] : self.offsets[i + 1]]]

    def iter_sentences(self) -> Iterator[list[str]]:
        """Token lists of every sentence, in order (restartable: a new iterator per call)."""
        words = self.words
        toks = self.tokens.tolist()
        offs = self.offsets.tolist()
        for i in range(len(offs) - 1):
            yield [words[t] for t in toks[offs[i] : offs[i + 1]]]

    def texts(self) -> list[str]:
        """Every sentence as one space-joined, tokenised string."""
        return [" ".join(s) for s in self.iter_sentences()]

    def word_counts(self) -> dict[str, int]:
        return dict(zip(self.words, self.counts.tolist()))

    def without_punctuation(self) -> TokenizedCorpus:
        """The same sentences without punctuation tokens (ids renumbered)."""
        keep = [w for w in self.words if not is_punctuation(w)]
        v = Vocabulary()
        v.words_ = keep
        v.index_ = {w: i for i, w in enumerate(keep)}
        v.counts_ = np.zeros(len(keep), dtype=np.int64)
        tokens, offsets = self.encode_with(v)
        counts = self.counts[[i for i, w in enumerate(self.words) if not is_punctuation(w)]]
        return TokenizedCorpus(keep, np.asarray(counts, dtype=np.int64), tokens, offsets, self.doc_ids, self.report)

    def encode_with(self, vocab: Vocabulary, *, unk: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Token ids under ``vocab`` and new offsets; out-of-vocabulary words are dropped,
        or mapped to ``vocab.unk_id`` when ``unk``. Returns (int32 [m], int64 [n + 1])."""
        table = np.array([vocab.index_.get(w, -1) for w in self.words], dtype=np.int64)
        if unk:
            if vocab.unk_id is None:
                raise InputError("vocabulary has no <unk> token")
            table[table < 0] = vocab.unk_id
        mapped = table[self.tokens] if self.tokens.size else np.zeros(0, np.int64)
        keep = mapped >= 0
        lengths = np.diff(self.offsets)
        kept_per_sentence = np.zeros(len(self), dtype=np.int64)
        if keep.size:
            sent_of_tok = np.repeat(np.arange(len(self)), lengths)
            np.add.at(kept_per_sentence, sent_of_tok[keep], 1)
        offsets = np.concatenate([[0], np.cumsum(kept_per_sentence)]).astype(np.int64)
        return mapped[keep].astype(np.int32), offsets


CorpusSource = str | Path | Sequence[str]


def iter_document_sentences(
    source: CorpusSource,
    *,
    field: str = "text",
    txt_mode: str = "file",
    stats: CorpusStats | None = None,
) -> Iterator[list[str]]:
    """Raw sentences of each usable document: a path goes through ``iter_documents``; a list
    of strings is taken as documents (blank ones skipped). ``stats`` counts what was read and
    skipped."""
    st = stats if stats is not None else CorpusStats()
    if isinstance(source, (str, Path)):
        from sentkit.data.corpus import iter_documents

        for doc in iter_documents(source, field=field, txt_mode=txt_mode, stats=st):
            yield split_sentences(doc.text)
        return
    if isinstance(source, (bytes, bytearray)) or not isinstance(source, Iterable):
        raise TypeError(f"corpus must be a path or a list of document strings, got {type(source).__name__}")
    for i, text in enumerate(source):
        if not isinstance(text, str):
            raise TypeError(f"corpus document {i} is {type(text).__name__}, not str")
        if not text.strip():
            st.skip("empty", f"document {i}")
            continue
        st.read += 1
        yield split_sentences(text)


def iter_text_lines(path: str | Path, stats: CorpusStats) -> Iterator[tuple[int, str]]:
    """(line number, text) of the usable lines of a text file, decoded as the corpus reader
    decodes a document (UTF-8, or UTF-16/32 with a byte-order mark); blank lines are passed over,
    binary and not-UTF-8 lines are counted in ``stats`` and skipped."""
    from sentkit.data.corpus import _decode, bom_encoding

    p = Path(path)
    with p.open("rb") as f:
        wide = bom_encoding(f.read(4))
    if wide is not None:
        with p.open(encoding=wide, errors="replace", newline="") as t:
            raw_lines: Iterable[bytes] = [ln.encode("utf-8") for ln in t]
    else:
        raw_lines = p.open("rb")
    try:
        for i, raw in enumerate(raw_lines, 1):
            raw = raw.rstrip(b"\r\n")
            if not raw.strip():
                continue
            text = _decode(raw, f"{p}:{i}", stats)
            if text is not None:
                stats.read += 1
                yield i, text
    finally:
        if hasattr(raw_lines, "close"):
            raw_lines.close()


def read_corpus(
    source: CorpusSource,
    *,
    lowercase: bool = True,
    punctuation: bool = True,
    max_sentences: int | None = None,
    min_tokens: int = 1,
    field: str = "text",
    txt_mode: str = "file",
    progress: bool = True,
) -> TokenizedCorpus:
    """Segment, tokenise and index a corpus in one pass, keeping document order. The result's
    ``report`` says how many documents were read, kept and skipped."""
    from tqdm.auto import tqdm

    report = ReadReport(source_name(source))

    index: dict[str, int] = {}
    words: list[str] = []
    counts: list[int] = []
    tokens: list[int] = []
    offsets: list[int] = [0]
    doc_ids: list[int] = []
    n = 0
    bar = tqdm(desc="reading sentences", unit=" sent", disable=not progress, mininterval=1.0)
    done = False
    docs = iter_document_sentences(source, field=field, txt_mode=txt_mode, stats=report.files)
    for d, sentences in enumerate(docs):
        before = n
        for s in sentences:
            toks = tokenize(s, lowercase=lowercase, punctuation=punctuation)
            if len(toks) < min_tokens:
                continue
            for w in toks:
                i = index.get(w)
                if i is None:
                    i = index[w] = len(words)
                    words.append(w)
                    counts.append(0)
                counts[i] += 1
                tokens.append(i)
            offsets.append(len(tokens))
            doc_ids.append(d)
            n += 1
            if max_sentences is not None and n >= max_sentences:
                done = True
                break
        if n > before:
            report.kept += 1
        else:
            report.without_sentence += 1
        bar.update(len(sentences))
        if done:
            break
    bar.close()
    corpus = TokenizedCorpus(
        words=words,
        counts=np.asarray(counts, dtype=np.int64),
        tokens=np.asarray(tokens, dtype=np.int32),
        offsets=np.asarray(offsets, dtype=np.int64),
        doc_ids=np.asarray(doc_ids, dtype=np.int32),
        report=report,
    )
    report.sentences, report.tokens = len(corpus), corpus.n_tokens
    log.info("read %d sentences, %d tokens, %d types", len(corpus), corpus.n_tokens, len(words))
    return corpus


class Vocabulary:
    """Words kept by count (``min_count``, at most ``max_size``), most frequent first.

    Special tokens (e.g. ``<pad>``, ``<unk>``) come first with count 0. Learned state:
    ``words_``, ``counts_``, ``index_``.
    """

    def __init__(self, min_count: int = 1, max_size: int | None = None, specials: Sequence[str] = ()) -> None:
        if min_count < 1:
            raise InputError(f"min_count must be >= 1, got {min_count}")
        if max_size is not None and max_size < 1:
            raise InputError(f"max_size must be >= 1 or None, got {max_size}")
        self.min_count = min_count
        self.max_size = max_size
        self.specials = tuple(specials)

    def fit(self, counts: Mapping[str, int] | TokenizedCorpus | Iterable[list[str]]) -> Vocabulary:
        """Count words (a mapping, a TokenizedCorpus or token lists) and keep the frequent ones."""
        if isinstance(counts, TokenizedCorpus):
            c: Mapping[str, int] = counts.word_counts()
        elif isinstance(counts, Mapping):
            c = counts
        else:
            cc: Counter[str] = Counter()
            for toks in counts:
                cc.update(toks)
            c = cc
        kept = sorted(
            ((w, n) for w, n in c.items() if n >= self.min_count and w not in self.specials),
            key=lambda wn: (-wn[1], wn[0]),
        )
        if self.max_size is not None:
            kept = kept[: max(0, self.max_size - len(self.specials))]
        self.words_: list[str] = [*self.specials, *(w for w, _ in kept)]
        self.counts_: np.ndarray = np.array([0] * len(self.specials) + [n for _, n in kept], dtype=np.int64)
        self.index_: dict[str, int] = {w: i for i, w in enumerate(self.words_)}
        return self

    def __len__(self) -> int:
        return len(self.words_)

    def __contains__(self, word: object) -> bool:
        return word in self.index_

    @property
    def unk_id(self) -> int | None:
        return self.index_.get("<unk>")

    def encode(self, tokens: Sequence[str], *, unk: bool = False) -> list[int]:
        """Ids of ``tokens``; unknown words are dropped, or mapped to ``<unk>`` when ``unk``."""
        idx = self.index_
        if unk:
            u = self.unk_id
            if u is None:
                raise InputError("vocabulary has no <unk> token")
            return [idx.get(w, u) for w in tokens]
        return [idx[w] for w in tokens if w in idx]

    def save(self, path: str | Path) -> None:
        """One ``word<TAB>count`` per line, in id order."""
        from sentkit.core.io import atomic_write_text

        lines = [f"{w}\t{n}" for w, n in zip(self.words_, self.counts_.tolist())]
        atomic_write_text(Path(path), "\n".join(lines) + "\n")

    @classmethod
    def load(cls, path: str | Path, specials: Sequence[str] = ()) -> Vocabulary:
        p = Path(path)
        if not p.is_file():
            raise MissingInputError(f"vocabulary file {p} not found")
        words, counts = [], []
        for line in p.read_text(encoding="utf-8").split("\n"):
            if not line:
                continue
            w, n = line.rsplit("\t", 1)
            words.append(w)
            counts.append(int(n))
        v = cls(specials=specials)
        v.words_ = words
        v.counts_ = np.asarray(counts, dtype=np.int64)
        v.index_ = {w: i for i, w in enumerate(words)}
        return v
