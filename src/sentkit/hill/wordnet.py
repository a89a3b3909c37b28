"""A small reader of Princeton WordNet's ``data.*`` files (Debian package ``wordnet-base``).

Each synset line is ``offset lex_filenum ss_type w_cnt(hex) word lex_id ... p_cnt ptrs ...
| gloss``; the gloss is a definition optionally followed by ``; "examples"``. Lines that
start with spaces are the licence header.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sentkit.core.errors import InputError, MissingInputError

DEFAULT_WORDNET_DIR = "/usr/share/wordnet"
POS_FILES = {"n": "data.noun", "v": "data.verb", "a": "data.adj", "r": "data.adv"}
INSTALL_HINT = "apt-get install wordnet-base"
_ADJ_MARKER = re.compile(r"\((?:a|p|ip)\)$")


@dataclass(frozen=True)
class Synset:
    offset: int
    pos: str  # n, v, a, s, r
    lemmas: tuple[str, ...]  # lower-case, "_" joins multi-word lemmas
    definition: str
    examples: tuple[str, ...]


def parse_data_line(line: str) -> Synset | None:
    """One synset from a ``data.*`` line; None for header or blank lines."""
    if not line.strip() or line.startswith(" "):
        return None
    head, sep, gloss = line.partition(" | ")
    if not sep:
        head, gloss = line.rstrip("\n"), ""
    parts = head.split()
    if len(parts) < 4:
        raise InputError(f"malformed WordNet data line: {line[:80]!r}")
    offset, pos, w_cnt = int(parts[0]), parts[2], int(parts[3], 16)
    lemmas = tuple(_ADJ_MARKER.sub("", parts[4 + 2 * i]).lower() for i in range(w_cnt))
    gloss = gloss.strip()
    definition, *rest = gloss.split('; "', 1)
    examples: tuple[str, ...] = ()
    if rest:
        examples = tuple(e.strip().strip('"').strip() for e in ('"' + rest[0]).split('"; "'))
    return Synset(offset, pos, lemmas, definition.strip().rstrip(";").strip(), examples)


def wordnet_files(wordnet_dir: str | Path = DEFAULT_WORDNET_DIR) -> list[Path]:
    """The ``data.*`` files of a WordNet folder; a clear error when WordNet is missing."""
    d = Path(wordnet_dir)
    files = [d / f for f in POS_FILES.values() if (d / f).is_file()]
    if not files:
        raise MissingInputError(
            f"WordNet data files (data.noun, data.verb, ...) not found in {d}: "
            f"install them with `{INSTALL_HINT}` (Debian/Ubuntu) or pass wordnet_dir"
        )
    return files


def iter_synsets(wordnet_dir: str | Path = DEFAULT_WORDNET_DIR) -> Iterator[Synset]:
    """Every synset of the folder's ``data.*`` files; a line that is not a WordNet data line is a
    CorpusError naming the file and the line."""
    from sentkit.data.corpus import CorpusError

    for f in wordnet_files(wordnet_dir):
        with f.open(encoding="utf-8", errors="replace") as fh:
            for i, line in enumerate(fh, 1):
                try:
                    s = parse_data_line(line)
                except (ValueError, IndexError) as e:
                    raise CorpusError(
                        f"{f}, line {i}: not a WordNet data line ({e}); point wordnet_dir at "
                        f"Princeton WordNet's data files (`{INSTALL_HINT}`)"
                    ) from None
                if s is not None:
                    yield s


def definition_pairs(
    wordnet_dir: str | Path = DEFAULT_WORDNET_DIR, *, single_words: bool = True
) -> list[tuple[str, str]]:
    """(word, definition) for every lemma of every synset, in file order; with
    ``single_words`` multi-word lemmas (``ice_cream``) are left out."""
    out = []
    for s in iter_synsets(wordnet_dir):
        if not s.definition:
            continue
        for lemma in s.lemmas:
            if single_words and "_" in lemma:
                continue
            out.append((lemma, s.definition))
    return out
