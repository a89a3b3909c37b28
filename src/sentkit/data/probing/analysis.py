"""What the probing tasks read from one parsed sentence: pure functions of a
:class:`~sentkit.data.probing.parse.Parsed` (spaCy's Penn Treebank tags and ClearNLP-style
dependency labels).

The paper parsed with a constituency parser; spaCy's English pipeline has none (and none can be
had offline), so TreeDepth and TopConst are read from a Penn-Treebank-style tree projected from the
dependency tree (docs/evaluation.md gives the conventions and the measured label error):

- :func:`phrase_tree`: the projected tree (:class:`Node`; a word is its token index), built by
  :class:`_Builder`: NP over a lone pronoun, flat base NPs, NP over NP for post-modifiers, one VP
  per auxiliary, S / SBAR / SQ / SBARQ clauses, coordinated clauses and VPs, the final punctuation
  under the top node; :func:`bracketed` writes it in PTB brackets.
- :func:`tree_depth`: NLTK's height of that tree without ROOT (a word under its tag node is 2).
- :func:`top_constituents`: the labels right below its top node (``NP_VP_.``), None for the
  sentences the paper leaves out.

The sentence filters of the analysis (:func:`is_heading`, :func:`quotes_balanced`) and CoordInv's
:func:`coordination` / :func:`invert` live here too.
"""

from __future__ import annotations

import itertools
import re
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


HEADING_WORDS = frozenset(
    {"chapter", "book", "part", "volume", "vol", "canto", "section", "act", "scene", "stave", "letter", "contents"}
)
ROMAN = re.compile(r"^[IVXLCDM]+\.?$")
QUOTE_PAIRS = (("“", "”"), ("``", "''"), ("‘", "’"), ("«", "»"))


def is_heading(p: Parsed) -> bool:
    """A Gutenberg heading or table-of-contents line that the splitter glued into a sentence
    ("IN THE WILLOW CHAPTER XVI ."): a capitalised heading word followed by a roman or arabic
    number, or at least two words in capitals that make up half of the words."""
    w = p.words
    for a, b in itertools.pairwise(w):
        if a[:1].isupper() and a.lower().rstrip(".") in HEADING_WORDS and (ROMAN.match(b) or b.rstrip(".").isdigit()):
            return True
    words = [x for x in w if any(c.isalpha() for c in x)]
    caps = [x for x in words if sum(c.isalpha() for c in x) >= 2 and x.isupper()]
    return len(caps) >= 2 and 2 * len(caps) >= len(words)


def quotes_balanced(p: Parsed) -> bool:
    """Every quote the sentence opens it closes, in order (an even number of ``"``; “ ... ”,
    `` ... '', ‘ ... ’, « ... »), so no sentence starts or ends inside a quotation. A lone ’ is an
    apostrophe ("the boys’ dog") and does not count."""
    if p.words.count('"') % 2:
        return False
    for a, b in QUOTE_PAIRS:
        depth = 0
        for x in p.words:
            if x == a:
                depth += 1
            elif x == b and (depth > 0 or a != "‘"):
                depth -= 1
                if depth < 0:
                    return False
        if depth:
            return False
    return True


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


@dataclass(frozen=True)
class Node:
    """A phrase of the Penn-Treebank-style tree: its label over phrases and words (a word is its
    token index, standing for the part-of-speech node over the word)."""

    label: str
    kids: tuple[Node | int, ...]


Tree = Node | int


def height(t: Tree) -> int:
    """Nodes on the longest path from `t` down to a word, both counted (NLTK's ``Tree.height``):
    a word under its tag node is 2."""
    return 2 if isinstance(t, int) else 1 + max(height(k) for k in t.kids)


def bracketed(p: Parsed, t: Tree) -> str:
    """`t` in Penn Treebank brackets: ``(S (NP (PRP He)) (VP (VBD left)) (. .))``."""
    if isinstance(t, int):
        return f"({p.tags[t]} {p.words[t]})"
    return f"({t.label} {' '.join(bracketed(p, k) for k in t.kids)})"


def is_verb(tag: str) -> bool:
    return tag.startswith("VB") or tag == "MD"


def _cat(tag: str) -> str:
    """The phrase a word of this tag heads: V(P), N(P), ADJ(P), ADV(P), P(P), or X."""
    if is_verb(tag):
        return "V"
    if tag.startswith("NN") or tag in ("PRP", "EX", "WP", "CD", "DT", "WDT", "PDT", "$", "FW", "ADD", "NFP"):
        return "N"
    if tag.startswith("JJ") or tag == "AFX":
        return "ADJ"
    if tag.startswith("RB") or tag == "WRB":
        return "ADV"
    if tag in ("IN", "TO", "RP"):
        return "P"
    return "X"


PHRASE_OF = {"V": "VP", "N": "NP", "ADJ": "ADJP", "ADV": "ADVP", "P": "PP"}


def _phrase(tag: str) -> str:
    return PHRASE_OF.get(_cat(tag)) or ("INTJ" if tag == "UH" else "FRAG")


# dependents that stay bare words inside their head's phrase when they have no dependents
MODIFIER_DEPS = frozenset(
    {
        "det",
        "predet",
        "amod",
        "nummod",
        "quantmod",
        "poss",
        "compound",
        "nmod",
        "case",
        "advmod",
        "neg",
        "npadvmod",
        "cc",
        "preconj",
        "punct",
        "aux",
        "auxpass",
        "mark",
        "dep",
    }
)


class _Builder:
    """Projects a dependency parse onto a Penn-Treebank-style phrase tree (PTB's conventions: an
    NP over a lone pronoun, one VP per auxiliary, flat base NPs, NP over NP for post-modifiers,
    S / SBAR / SQ / SBARQ clauses, the final punctuation under the top node)."""

    def __init__(self, p: Parsed) -> None:
        self.p, self.kids = p, children(p)
        last = len(p.words) - 1
        self.final = last if is_punct(p, last) and p.heads[last] != last else -1  # under the top node

    def deps_of(self, i: int) -> list[int]:
        return [c for c in self.kids[i] if c != self.final]

    def first(self, i: int) -> int:
        return subtree(self.kids, i)[0]

    # -------------------------------------------------------------- any dependent in a phrase
    def dependent(self, c: int, head_cat: str) -> list[Tree]:
        """What dependent `c` contributes to its head's phrase: bare words or one phrase."""
        d, tag = self.p.deps[c], self.p.tags[c]
        if d == "compound" and head_cat == "N":
            return list(subtree(self.kids, c))  # PTB base NPs are flat: "the New York Times"
        if not self.deps_of(c):
            if d == "prt":
                return [Node("PRT", (c,))]
            if d in MODIFIER_DEPS and (
                head_cat not in ("V", "S")
                or d in ("aux", "auxpass", "neg", "cc", "punct", "mark", "case", "det", "dep")
            ):
                return [c]
            if d == "conj" and head_cat in ("ADJ", "ADV"):
                return [c]  # PTB keeps "black and white" flat: (ADJP (JJ black) (CC and) (JJ white))
            if d == "prep" or tag in ("CC", "UH", "POS") or is_punct(self.p, c):
                return [c]  # a preposition without object ("IN_NP_VP_.")
        return [self.phrase(c)]

    def phrase(self, i: int) -> Tree:
        cat = _cat(self.p.tags[i])
        if cat == "V":
            return self.clause(i, self.deps_of(i))
        if cat == "N":
            return self.noun_phrase(i)
        if self.p.tags[i] == "UH":
            return Node("INTJ", tuple(self.flat(i, "X")))
        label = PHRASE_OF.get(cat) or ("QP" if self.p.deps[i] == "nummod" else _phrase(self.p.tags[i]))
        return Node(label, tuple(self.flat(i, cat)))

    def flat(self, i: int, cat: str) -> list[Tree]:
        out: list[Tree] = []
        ks = self.deps_of(i)
        for c in [c for c in ks if c < i]:
            out += self.dependent(c, cat)
        out.append(i)
        for c in [c for c in ks if c > i]:
            out += self.dependent(c, cat)
        return out

    def noun_phrase(self, n: int) -> Node:
        ks = self.deps_of(n)
        core: list[Tree] = []
        for c in [c for c in ks if c < n]:
            core += self.dependent(c, "N")
        core.append(n)
        post: list[Tree] = []
        for c in [c for c in ks if c > n]:
            d = self.p.deps[c]
            if not post and not self.deps_of(c) and d in ("nummod", "compound", "case", "nmod"):
                core.append(c)  # "chapter 5", "Henry VIII"
            else:
                post += self.dependent(c, "N")
        base = Node("NP", tuple(core))
        return Node("NP", (base, *post)) if post else base

    # -------------------------------------------------------------- clauses
    def clause(self, v: int, deps: list[int]) -> Node:
        """The clause headed by verb `v` with dependents `deps`: S, SQ (an auxiliary before the
        subject), SBAR (a subordinator or a relative wh-phrase), SBARQ (a wh-question), or a bare VP
        (a participle modifying a noun)."""
        p = self.p
        head: Node | None = None
        conj = [c for c in deps if c > v and p.deps[c] == "conj" and _cat(p.tags[c]) == "V"]
        if conj:
            begin = min(self.first(c) for c in conj)
            cut = begin
            for c in sorted((c for c in deps if v < c < begin), reverse=True):
                if p.deps[c] not in ("cc", "punct"):
                    break
                cut = c
            own, rest = [c for c in deps if c < cut], [c for c in deps if c >= cut]
            if any(any(p.deps[k] in (*SUBJECT_DEPS, "expl") for k in self.kids[c]) for c in conj):
                parts: list[Tree] = [self.clause(v, own)]  # two clauses: (S (S ...) (CC and) (S ...))
                for c in rest:
                    parts += [self.clause(c, self.deps_of(c))] if c in conj else self.dependent(c, "S")
                return Node("S", tuple(parts))
            parts = [self.verb_phrase([], v, [c for c in own if c > v])]  # two VPs sharing the subject
            for c in rest:
                if c in conj:
                    k = self.clause(c, self.deps_of(c))
                    parts.append(k.kids[0] if k.label == "S" and len(k.kids) == 1 else k)
                else:
                    parts += self.dependent(c, "V")
            head, deps = Node("VP", tuple(parts)), [c for c in own if c < v]
        subj = [c for c in deps if p.deps[c] in (*SUBJECT_DEPS, "expl", "csubj", "csubjpass")]
        left = [c for c in deps if c < v]
        right = [c for c in deps if c > v]
        start = len(left)  # the verb group: auxiliaries, negation and the adverbs between them
        for j in range(len(left) - 1, -1, -1):
            d = p.deps[left[j]]
            if d in VERB_GROUP_DEPS and not self.deps_of(left[j]):
                start = j
            elif d != "advmod" or p.tags[left[j]] in WH_TAGS:
                break
        if not any(p.deps[c] in ("aux", "auxpass") for c in left[start:]):
            start = len(left)  # adverbs between the subject and a lone verb stand beside the VP
        group, pre = left[start:], left[:start]
        vp = self.verb_phrase(group, v, right, head)
        if not subj and not pre and p.deps[v] in ("acl", "conj") and not any(p.tags[c] == "TO" for c in group):
            return vp  # "the man sitting there": a VP inside the NP
        wh = next((c for c in pre if self.wh_word(c) is not None), None)
        marks = [c for c in pre if p.deps[c] == "mark"] if wh is None else []
        lead = [c for c in pre if marks and c < marks[0]]  # "even if ...": outside the S
        inverted = bool(subj) and any(p.deps[c] in ("aux", "auxpass") and c < subj[0] for c in pre)
        question = p.deps[v] == "ROOT" and p.words[-1] == "?"
        body: list[Tree] = [
            t for c in pre if c != wh and c not in marks and c not in lead for t in self.dependent(c, "S")
        ]
        inner = Node("SQ" if inverted or (question and wh is not None) else "S", (*body, vp))
        if wh is not None:
            w = self.phrase(wh)
            word = self.wh_word(wh)
            assert word is not None
            label = "WHPP" if p.deps[wh] == "prep" else WH_TAGS[p.tags[word]]
            kids = w.kids if isinstance(w, Node) else (w,)
            w = Node(
                label,
                tuple(Node("WHNP", k.kids) if isinstance(k, Node) and k.label == "NP" else k for k in kids)
                if label == "WHPP"
                else kids,
            )
            return Node("SBARQ" if question else "SBAR", (w, inner))
        if marks:
            return Node("SBAR", (*[t for c in [*lead, *marks] for t in self.dependent(c, "S")], inner))
        finite = any(p.tags[c] in (*PRESENT, *PAST, "MD") for c in [*group, v])
        if subj and finite and p.deps[v] in ("ccomp", "relcl") and p.heads[v] < v:
            return Node("SBAR", (inner,))  # "said (SBAR (S he was))": PTB's empty complementizer
        return inner

    def wh_word(self, c: int) -> int | None:
        """The wh-word opening dependent `c` ("which", "in which", "whose house"), if any."""
        if _cat(self.p.tags[c]) == "V" or self.p.deps[c] in (
            "cc",
            "mark",
            "advcl",
            "ccomp",
            "csubj",
            "xcomp",
            "parataxis",
        ):
            return None
        span = subtree(self.kids, c)
        lead = span[1] if self.p.deps[c] == "prep" and len(span) > 1 else span[0]
        return lead if self.p.tags[lead] in WH_TAGS else None

    def verb_phrase(self, group: list[int], v: int, right: list[int], head: Node | None = None) -> Node:
        """One VP per auxiliary: ``(VP (VBZ has) (VP (VBN been) (VP (VBN seen) ...)))``; `head`, when
        given, is the VP below the auxiliaries (two coordinated VPs)."""
        p = self.p
        auxes = [k for k, c in enumerate(group) if p.deps[c] in ("aux", "auxpass")]
        advs = [] if auxes else [t for c in group for t in self.dependent(c, "V")]
        if head is not None:
            node = head if not advs else Node("VP", (*advs, head))
        else:
            node = Node("VP", (*advs, v, *[t for c in right for t in self.dependent(c, "V")]))
        for k in reversed(auxes):
            nxt = next((a for a in auxes if a > k), len(group))
            between = [t for c in group[k + 1 : nxt] for t in self.dependent(c, "V")]
            node = Node("VP", (group[k], *between, node))
        if auxes and auxes[0] > 0:  # "never did see", "not to be shaken": in the outer VP
            node = Node("VP", (*[t for c in group[: auxes[0]] for t in self.dependent(c, "V")], *node.kids))
        return node

    def top(self) -> Node:
        r = root(self.p)
        t = self.phrase(r)
        node = t if isinstance(t, Node) else Node(PHRASE_OF.get(_cat(self.p.tags[r]), "FRAG"), (t,))
        if self.final >= 0:
            node = Node(node.label, (*node.kids, self.final))
        return node


def phrase_tree(p: Parsed) -> Node:
    """The Penn-Treebank-style phrase tree projected from the dependency parse (its top node is
    the clause, ROOT left out); see :class:`_Builder`."""
    return _Builder(p).top()


def tree_features(p: Parsed) -> tuple[int, str | None]:
    """:func:`tree_depth` and :func:`top_constituents` from one projection of the tree."""
    t = phrase_tree(p)
    return height(t), _top(p, t)


def tree_depth(p: Parsed) -> int:
    """Nodes on the longest path from the top clause node down to a word, both counted (NLTK's
    ``Tree.height`` of the tree without ROOT): "He left the room ." is (S (VP (NP (DT the)))) -> 5."""
    return height(phrase_tree(p))


def top_constituents(p: Parsed) -> str | None:
    """The labels right below the top node (``NP_VP_.``), or None for the sentences the paper
    leaves out: sentence-internal punctuation at the top, quotes, or not ending with ``.``."""
    return _top(p, phrase_tree(p))


def _top(p: Parsed, t: Node) -> str | None:
    if not ends_sentence(p) or len(p.words) < 2 or p.tags[-2] == ".":
        return None
    if any(tag in QUOTE_TAGS for tag in p.tags) or any(w in DOUBLE_QUOTES for w in p.words):
        return None
    if any(isinstance(k, int) and is_punct(p, k) for k in t.kids[:-1]):
        return None
    return "_".join(p.tags[k] if isinstance(k, int) else k.label for k in t.kids)


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
    the main verb (a verb with its own subject before the CC), whose ``conj`` (a verb with its own
    subject) spans everything between the CC and the final punctuation; sentences with ``;``,
    ``:``, ``--`` or double quotes are left out."""
    if not ends_sentence(p):
        return None
    ccs = [i for i, t in enumerate(p.tags) if t == "CC"]
    if len(ccs) != 1 or any(w in (";", ":", "--") or w in DOUBLE_QUOTES for w in p.words):
        return None
    cc = ccs[0]
    kids = children(p)
    r = root(p)
    if p.heads[cc] != r or p.deps[cc] != "cc" or cc == 0 or not is_verb(p.tags[r]):
        return None
    if not any(p.deps[k] in (*SUBJECT_DEPS, "expl") and k < cc for k in kids[r]):
        return None  # the first conjunct is a clause too: a verbal root with its own subject
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
