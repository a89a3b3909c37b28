"""What the probing tasks read from one parsed sentence: pure functions of a
:class:`~sentkit.data.probing.parse.Parsed` (spaCy's Penn Treebank tags and ClearNLP-style
dependency labels).

The paper parsed with a constituency parser; spaCy's English pipeline has none, so TreeDepth and
TopConst are read from the dependency tree (docs/evaluation.md says exactly how this differs):

- :func:`tree_depth`: the height of the phrase tree that the dependency tree projects, one phrase
  per word that has dependents (its children: the word's own part-of-speech node and its
  dependents' phrases, in order), a word without dependents being a part-of-speech node over the
  word, plus a ROOT node.
- :func:`top_constituents`: the labels of the constituents right below the clause node: each
  dependent of the main verb left of its verb group becomes one constituent labelled from its
  relation and tag (``nsubj`` -> NP, ``prep`` -> PP, ``advmod`` -> ADVP, ``advcl`` -> SBAR / S,
  ``cc`` -> CC, an auxiliary before the subject -> its tag, as in a question's SQ), the verb group
  with everything right of it is the VP, and the final punctuation is ``.``; a wh-phrase first in
  a question gives ``WHNP_SQ_.`` / ``WHADVP_SQ_.``, two coordinated clauses ``S_CC_S_.``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sentkit.data.probing.parse import Parsed

PRESENT = ("VBP", "VBZ")
PAST = ("VBD",)
NUMBER_TAGS = ("NN", "NNS")
NOUN_VERB_TAGS = ("NN", "NNS", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ")
SUBJECT_DEPS = ("nsubj", "nsubjpass")
QUOTE_TAGS = ("``", "''")
DOUBLE_QUOTES = frozenset({'"', "“", "”", "``", "''", "„"})
PUNCT_TAGS = frozenset({".", ",", ":", "``", "''", "-LRB-", "-RRB-", "HYPH", "NFP", "$", "#"})
VERB_GROUP_DEPS = ("aux", "auxpass", "neg")
WH_TAGS = {"WRB": "WHADVP", "WP": "WHNP", "WDT": "WHNP", "WP$": "WHNP"}


def children(p: Parsed) -> list[list[int]]:
    """Dependents of each token, in sentence order."""
    out: list[list[int]] = [[] for _ in p.words]
    for i, h in enumerate(p.heads):
        if h != i:
            out[h].append(i)
    return out


def root(p: Parsed) -> int:
    return next(i for i, h in enumerate(p.heads) if h == i)


def subtree(kids: list[list[int]], i: int) -> list[int]:
    """Token `i` and everything below it, sorted."""
    out, stack = [], [i]
    while stack:
        j = stack.pop()
        out.append(j)
        stack.extend(kids[j])
    return sorted(out)


def is_punct(p: Parsed, i: int) -> bool:
    return p.tags[i] in PUNCT_TAGS or not any(c.isalnum() for c in p.words[i])


def ends_sentence(p: Parsed) -> bool:
    """The sentence ends with sentence-final punctuation (tag `.`)."""
    return p.tags[-1] == "."


def finite_verb(p: Parsed) -> int | None:
    """The finite verb of the main clause: the root when it is finite (VBD/VBP/VBZ), else the
    first auxiliary of the root that is (``has`` in "he has left"); None for modals and verbless
    roots."""
    r = root(p)
    if p.tags[r] in PRESENT + PAST:
        return r
    if not p.tags[r].startswith("VB"):
        return None
    kids = children(p)
    for c in kids[r]:
        if c < r and p.deps[c] in ("aux", "auxpass"):
            return c if p.tags[c] in PRESENT + PAST else None
    return None


def tense(p: Parsed) -> tuple[str, str] | None:
    """(``PRES`` | ``PAST``, the verb form lower-cased) of the main clause, or None."""
    v = finite_verb(p)
    if v is None:
        return None
    return ("PAST" if p.tags[v] in PAST else "PRES"), p.words[v].lower()


def _argument(p: Parsed, deps: tuple[str, ...]) -> tuple[str, str] | None:
    r = root(p)
    kids = children(p)
    for c in kids[r]:
        if p.deps[c] in deps:
            if p.tags[c] not in NUMBER_TAGS or any(p.deps[k] == "conj" for k in kids[c]):
                return None  # proper nouns, pronouns, coordinated nouns ("the man and the dog")
            return p.tags[c], p.words[c].lower()
    return None


def subject_number(p: Parsed) -> tuple[str, str] | None:
    """(``NN`` | ``NNS``, the noun lower-cased) of the main clause's subject, a common noun."""
    return _argument(p, SUBJECT_DEPS)


def object_number(p: Parsed) -> tuple[str, str] | None:
    """(``NN`` | ``NNS``, the noun lower-cased) of the main clause's direct object."""
    return _argument(p, ("dobj",))


def tree_depth(p: Parsed) -> int:
    """Height of the phrase tree projected from the dependency tree (see the module docstring):
    a word without dependents counts 2 (its tag node and the word), a word with dependents one
    phrase node more than the highest of its tag node and its dependents, and ROOT one more."""
    kids = children(p)
    height = [0] * len(p.words)
    order = _postorder(kids, root(p))
    for i in order:
        height[i] = 2 if not kids[i] else 1 + max(2, *(height[c] for c in kids[i]))
    return height[root(p)] + 1


def _postorder(kids: list[list[int]], r: int) -> list[int]:
    out, stack = [], [(r, False)]
    while stack:
        i, seen = stack.pop()
        if seen:
            out.append(i)
            continue
        stack.append((i, True))
        stack.extend((c, False) for c in kids[i])
    return out


def _label(p: Parsed, kids: list[list[int]], c: int) -> str:
    """Constituent label of dependent `c`'s subtree, from its relation and tag."""
    dep, tag = p.deps[c], p.tags[c]
    first = subtree(kids, c)[0]
    if p.tags[first] in WH_TAGS and dep not in ("cc", "aux", "auxpass"):
        return WH_TAGS[p.tags[first]] if p.deps[first] != "prep" else "WHPP"
    if dep in ("aux", "auxpass"):
        return tag  # an auxiliary before the subject: the SQ of a question (VBD_NP_VP_.)
    if dep in ("nsubj", "nsubjpass", "expl", "npadvmod", "dobj", "attr", "dative", "nmod"):
        return "NP"
    if dep == "advmod":
        return "ADVP"
    if dep in ("prep", "agent"):
        return "PP" if kids[c] else "IN"
    if dep in ("cc", "preconj"):
        return "CC"
    if dep == "mark":
        return "IN"
    if dep == "advcl":
        return "SBAR" if any(p.deps[k] == "mark" or p.tags[k] in WH_TAGS for k in kids[c]) else "S"
    if dep in ("csubj", "csubjpass", "ccomp", "xcomp"):
        return "S"
    if dep == "intj":
        return "INTJ"
    phrase = _phrase(tag)
    return tag if phrase == "FRAG" else phrase


def _phrase(tag: str) -> str:
    if tag.startswith("VB") or tag == "MD":
        return "VP"
    if tag.startswith("NN") or tag in ("PRP", "DT", "CD", "EX"):
        return "NP"
    if tag.startswith("JJ"):
        return "ADJP"
    if tag.startswith("RB"):
        return "ADVP"
    if tag in ("IN", "TO"):
        return "PP"
    if tag == "UH":
        return "INTJ"
    return "FRAG"


def top_constituents(p: Parsed) -> str | None:
    """The top-constituent sequence (``NP_VP_.``) derived from the dependency parse, or None for
    the sentences the paper leaves out: a sequence with sentence-internal punctuation or quotes,
    or one that does not end with the ``.`` label."""
    if not ends_sentence(p) or len(p.words) < 2 or p.tags[-2] == ".":
        return None
    if any(t in QUOTE_TAGS for t in p.tags) or any(w in DOUBLE_QUOTES for w in p.words):
        return None
    kids = children(p)
    r = root(p)
    final = len(p.words) - 1
    deps = [c for c in kids[r] if c != final]
    if any(is_punct(p, c) for c in deps):
        return None  # punctuation hanging from the main verb: at the top, left out as in the paper
    co = coordination(p)
    if co is not None:
        return None if co.comma else "S_CC_S_."
    left = [c for c in deps if c < r]
    # the verb group: the root and its auxiliaries / negation right before it (after the subject)
    start = len(left)
    for j in range(len(left) - 1, -1, -1):
        d = p.deps[left[j]]
        if d in VERB_GROUP_DEPS:
            start = j
        elif d != "advmod":
            break
    labels = [_label(p, kids, c) for c in left[:start]]
    head = "VP" if p.tags[r].startswith("VB") or p.tags[r] == "MD" else _phrase(p.tags[r])
    if labels and labels[0].startswith("WH") and p.words[-1] == "?":
        return f"{labels[0]}_SQ_."
    return "_".join([*labels, head, "."])


@dataclass(frozen=True)
class Coordination:
    """Two clauses coordinated by the sentence's only conjunction: ``first`` and ``second`` are
    token ranges, ``comma`` whether a comma precedes the conjunction at index ``cc``."""

    first: tuple[int, int]
    cc: int
    second: tuple[int, int]
    comma: bool

    def lengths(self) -> tuple[int, int]:
        return self.first[1] - self.first[0], self.second[1] - self.second[0]


def coordination(p: Parsed) -> Coordination | None:
    """The two top clauses coordinated by the sentence's only CC, or None: the CC must attach to
    the main verb, whose ``conj`` (a verb with its own subject) spans everything between the CC
    and the final punctuation; sentences with ``;``, ``:``, ``--`` or double quotes are left out."""
    if not ends_sentence(p):
        return None
    ccs = [i for i, t in enumerate(p.tags) if t == "CC"]
    if len(ccs) != 1 or any(w in (";", ":", "--") or w in DOUBLE_QUOTES for w in p.words):
        return None
    cc = ccs[0]
    kids = children(p)
    r = root(p)
    if p.heads[cc] != r or p.deps[cc] != "cc" or cc == 0:
        return None
    conj = [c for c in kids[r] if p.deps[c] == "conj" and c > cc]
    if len(conj) != 1 or not p.tags[conj[0]].startswith("VB"):
        return None
    c = conj[0]
    if not any(p.deps[k] in (*SUBJECT_DEPS, "expl") for k in kids[c]):
        return None
    span = subtree(kids, c)
    final = len(p.words) - 1
    span = [i for i in span if i != final]  # the final punctuation may hang from either verb
    if span != list(range(cc + 1, final)) or cc + 1 >= final:
        return None
    comma = p.words[cc - 1] == ","
    end1 = cc - 1 if comma else cc
    if end1 < 1:
        return None
    return Coordination((0, end1), cc, (cc + 1, final), comma)


def invert(p: Parsed, co: Coordination) -> list[str]:
    """The sentence with its two coordinated clauses swapped ("There was something to consider
    but he might be a prince"); the new first word is capitalised, the old one lower-cased unless
    it is a proper noun or "I"."""
    first = list(p.words[co.first[0] : co.first[1]])
    second = list(p.words[co.second[0] : co.second[1]])
    if p.tags[co.first[0]] not in ("NNP", "NNPS") and first[0] != "I":
        first[0] = first[0][:1].lower() + first[0][1:]
    second[0] = second[0][:1].upper() + second[0][1:]
    middle = [",", p.words[co.cc]] if co.comma else [p.words[co.cc]]
    return [*second, *middle, *first, p.words[-1]]
