"""Words a corpus sentence shares with the query, as text segments the page can mark."""

from __future__ import annotations

import re

from sentkit.data.sentences import tokenize

# A word with its position in the original text; what counts as "the same word" is decided by
# ``tokenize`` (lower-cased, quotes normalised), so the highlight agrees with the Hill models.
_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")

PLAIN, SHARED_FUNCTION, SHARED_CONTENT = 0, 1, 2


def _function_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


FUNCTION_WORDS = _function_words()


def query_words(query: str) -> set[str]:
    """The query's words, normalised as ``sentkit.data.sentences.tokenize`` does."""
    return set(tokenize(query, punctuation=False))


def shared_segments(sentence: str, words: set[str]) -> tuple[list[tuple[str, int]], int]:
    """Split ``sentence`` into (text, mark) segments: mark 2 for a shared content word, 1 for a
    shared function word ("the", "of"), 0 otherwise. Returns (segments, distinct shared content
    words)."""
    segments: list[tuple[str, int]] = []
    shared: set[str] = set()
    pos = 0
    for m in _WORD_RE.finditer(sentence):
        norm = tokenize(m.group(0), punctuation=False)
        w = norm[0] if len(norm) == 1 else m.group(0).lower()
        if w not in words:
            continue
        mark = SHARED_FUNCTION if w in FUNCTION_WORDS else SHARED_CONTENT
        if mark == SHARED_CONTENT:
            shared.add(w)
        if m.start() > pos:
            segments.append((sentence[pos : m.start()], PLAIN))
        segments.append((m.group(0), mark))
        pos = m.end()
    if pos < len(sentence):
        segments.append((sentence[pos:], PLAIN))
    return segments, len(shared)
