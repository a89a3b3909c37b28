"""What the probing tasks read from a parse, on hand-built dependency trees (no spaCy needed)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from sentkit.data.probing import analysis as A
from sentkit.data.probing.build import BuildSettings
from sentkit.data.probing.parse import Parsed
from sentkit.data.probing.tasks import (
    Bigrams,
    Item,
    Pool,
    TooFewSentences,
    analyse,
    build_coord_inv,
    equal_share,
    somo_match,
    take_grouped,
)


def parsed(spec: str) -> Parsed:
    """`word/TAG/dep/head ...` (head as a token index) -> Parsed."""
    parts = [t.rsplit("/", 3) for t in spec.split()]
    return Parsed(
        tuple(p[0] for p in parts),
        tuple(p[1] for p in parts),
        tuple(p[2] for p in parts),
        tuple(int(p[3]) for p in parts),
    )


# "He might be a prince but there was something to consider ."
PRINCE = parsed(
    "He/PRP/nsubj/2 might/MD/aux/2 be/VB/ROOT/2 a/DT/det/4 prince/NN/attr/2 but/CC/cc/2 "
    "there/EX/expl/7 was/VBD/conj/2 something/NN/attr/7 to/TO/aux/10 consider/VB/relcl/8 ././punct/2"
)
# "The old farmers have painted the window ."
FARMERS = parsed(
    "The/DT/det/2 old/JJ/amod/2 farmers/NNS/nsubj/4 have/VBP/aux/4 painted/VBN/ROOT/4 "
    "the/DT/det/6 window/NN/dobj/4 ././punct/4"
)
# "Did the dog watch the cat ?"
QUESTION = parsed("Did/VBD/aux/3 the/DT/det/2 dog/NN/nsubj/3 watch/VB/ROOT/3 the/DT/det/5 cat/NN/dobj/3 ?/./punct/3")
# "Then the dog watched the cats ."
THEN = parsed(
    "Then/RB/advmod/3 the/DT/det/2 dog/NN/nsubj/3 watched/VBD/ROOT/3 the/DT/det/5 cats/NNS/dobj/3 ././punct/3"
)


def test_tense_reads_the_finite_verb_of_the_main_clause():
    assert A.tense(FARMERS) == ("PRES", "have")  # the auxiliary carries the tense of "have painted"
    assert A.tense(THEN) == ("PAST", "watched")
    assert A.tense(PRINCE) is None  # a modal: neither class


def test_subject_and_object_number():
    assert A.subject_number(FARMERS) == ("NNS", "farmers")
    assert A.object_number(FARMERS) == ("NN", "window")
    assert A.object_number(THEN) == ("NNS", "cats")
    assert A.subject_number(PRINCE) is None  # a pronoun


# "He had never been so happy ."
NEVER = parsed(
    "He/PRP/nsubj/3 had/VBD/aux/3 never/RB/neg/3 been/VBN/ROOT/3 so/RB/advmod/5 happy/JJ/acomp/3 ././punct/3"
)
# "The house in which we lived was small ."
HOUSE = parsed(
    "The/DT/det/1 house/NN/nsubj/6 in/IN/prep/5 which/WDT/pobj/2 we/PRP/nsubj/5 lived/VBD/relcl/1 "
    "was/VBD/ROOT/6 small/JJ/acomp/6 ././punct/6"
)
# "What did you see ?"
WHAT = parsed("What/WP/dobj/3 did/VBD/aux/3 you/PRP/nsubj/3 see/VB/ROOT/3 ?/./punct/3")
# "She ate the apple and drank the tea ."
ATE = parsed(
    "She/PRP/nsubj/1 ate/VBD/ROOT/1 the/DT/det/3 apple/NN/dobj/1 and/CC/cc/1 drank/VBD/conj/1 "
    "the/DT/det/7 tea/NN/dobj/5 ././punct/1"
)
# "If you want it you can have it ."
IF = parsed(
    "If/IN/mark/2 you/PRP/nsubj/2 want/VBP/advcl/6 it/PRP/dobj/2 you/PRP/nsubj/6 can/MD/aux/6 "
    "have/VB/ROOT/6 it/PRP/dobj/6 ././punct/6"
)
# "The boy 's mother gave him a piece of cake ."
CAKE = parsed(
    "The/DT/det/1 boy/NN/poss/3 's/POS/case/1 mother/NN/nsubj/4 gave/VBD/ROOT/4 him/PRP/dative/4 "
    "a/DT/det/7 piece/NN/dobj/4 of/IN/prep/7 cake/NN/pobj/8 ././punct/4"
)


@pytest.mark.parametrize(
    ("p", "tree", "depth", "top"),
    [
        # the trees a Penn Treebank annotator draws for these sentences, written out by hand
        (
            FARMERS,
            "(S (NP (DT The) (JJ old) (NNS farmers)) (VP (VBP have) (VP (VBN painted) (NP (DT the) (NN window))))"
            " (. .))",
            6,
            "NP_VP_.",
        ),
        (
            NEVER,
            "(S (NP (PRP He)) (VP (VBD had) (RB never) (VP (VBN been) (ADJP (RB so) (JJ happy)))) (. .))",
            6,
            "NP_VP_.",
        ),
        (
            HOUSE,
            "(S (NP (NP (DT The) (NN house)) (SBAR (WHPP (IN in) (WHNP (WDT which))) (S (NP (PRP we)) "
            "(VP (VBD lived))))) (VP (VBD was) (ADJP (JJ small))) (. .))",
            7,
            "NP_VP_.",
        ),
        (
            QUESTION,
            "(SQ (VBD Did) (NP (DT the) (NN dog)) (VP (VB watch) (NP (DT the) (NN cat))) (. ?))",
            5,
            "VBD_NP_VP_.",
        ),
        (WHAT, "(SBARQ (WHNP (WP What)) (SQ (VBD did) (NP (PRP you)) (VP (VB see))) (. ?))", 5, "WHNP_SQ_."),
        (
            THEN,
            "(S (ADVP (RB Then)) (NP (DT the) (NN dog)) (VP (VBD watched) (NP (DT the) (NNS cats))) (. .))",
            5,
            "ADVP_NP_VP_.",
        ),
        (
            ATE,
            "(S (NP (PRP She)) (VP (VP (VBD ate) (NP (DT the) (NN apple))) (CC and) (VP (VBD drank) "
            "(NP (DT the) (NN tea)))) (. .))",
            6,
            "NP_VP_.",
        ),
        (
            IF,
            "(S (SBAR (IN If) (S (NP (PRP you)) (VP (VBP want) (NP (PRP it))))) (NP (PRP you)) (VP (MD can) "
            "(VP (VB have) (NP (PRP it)))) (. .))",
            7,
            "SBAR_NP_VP_.",
        ),
        (
            CAKE,
            "(S (NP (NP (DT The) (NN boy) (POS 's)) (NN mother)) (VP (VBD gave) (NP (PRP him)) (NP (NP (DT a) "
            "(NN piece)) (PP (IN of) (NP (NN cake))))) (. .))",
            7,
            "NP_VP_.",
        ),
        (
            PRINCE,
            "(S (S (NP (PRP He)) (VP (MD might) (VP (VB be) (NP (DT a) (NN prince))))) (CC but) (S (NP (EX there)) "
            "(VP (VBD was) (NP (NP (NN something)) (S (VP (TO to) (VP (VB consider))))))) (. .))",
            9,
            "S_CC_S_.",
        ),
    ],
)
def test_the_phrase_tree_follows_penn_treebank_conventions(p, tree, depth, top):
    t = A.phrase_tree(p)
    assert A.bracketed(p, t) == tree
    assert A.tree_depth(p) == depth  # NLTK's height of the tree without ROOT, the word counted
    assert A.top_constituents(p) == top


def test_top_constituents_leave_out_what_the_paper_leaves_out():
    comma = parsed("Then/RB/advmod/3 ,/,/punct/3 he/PRP/nsubj/3 left/VBD/ROOT/3 ././punct/3")
    assert A.top_constituents(comma) is None  # sentence-internal punctuation at the top
    quoted = parsed("He/PRP/nsubj/1 said/VBD/ROOT/1 “/``/punct/3 go/VB/ccomp/1 ”/''/punct/3 ././punct/1")
    assert A.top_constituents(quoted) is None
    flat = parsed("Go/VB/ROOT/0 home/RB/advmod/0 ././punct/0")
    assert A.top_constituents(flat) == "VP_." and A.tree_depth(flat) == 5  # (S (VP (VB Go) (ADVP (RB home))))


def test_coordination_inversion_matches_the_readme_example():
    co = A.coordination(PRINCE)
    assert co is not None and co.lengths() == (5, 5) and not co.comma
    assert " ".join(A.invert(PRINCE, co)) == "There was something to consider but he might be a prince ."
    two_cc = parsed(
        "He/PRP/nsubj/1 came/VBD/ROOT/1 and/CC/cc/1 she/PRP/nsubj/4 left/VBD/conj/1 "
        "and/CC/cc/4 slept/VBD/conj/4 ././punct/1"
    )
    assert A.coordination(two_cc) is None  # only sentences with a single CC
    no_subject = parsed("He/PRP/nsubj/1 came/VBD/ROOT/1 and/CC/cc/1 left/VBD/conj/1 ././punct/1")
    assert A.coordination(no_subject) is None  # two verb phrases, not two clauses


def test_grouped_sampling_never_puts_a_form_in_two_splits():
    items = [type("I", (), {"text": f"s{i}"})() for i in range(400)]
    pools = {
        lab: {f"{lab}{g}": list(range(k * 200 + g * 10, k * 200 + g * 10 + 10)) for g in range(20)}
        for k, lab in enumerate(("PAST", "PRES"))
    }
    rows = take_grouped("Tense", pools, (200, 40, 40), np.random.default_rng(0), items, "verb form")  # type: ignore[arg-type]
    form = {f"s{i}": g for groups in pools.values() for g, idx in groups.items() for i in idx}
    where: dict[str, set[str]] = {}
    for split, _, text in rows:
        where.setdefault(form[text], set()).add(split)
    assert all(len(s) == 1 for s in where.values())
    assert Counter((s, lab) for s, lab, _ in rows) == {
        ("tr", "PAST"): 100,
        ("tr", "PRES"): 100,
        ("va", "PAST"): 20,
        ("va", "PRES"): 20,
        ("te", "PAST"): 20,
        ("te", "PRES"): 20,
    }
    with pytest.raises(TooFewSentences, match="no verb form in two splits"):
        take_grouped("Tense", pools, (400, 40, 40), np.random.default_rng(0), items, "verb form")  # type: ignore[arg-type]


def test_coordination_needs_two_clauses_each_with_a_verb_and_a_subject():
    verbless = parsed(
        "A/DT/det/2 fine/JJ/amod/2 day/NN/ROOT/2 and/CC/cc/2 the/DT/det/5 sun/NN/nsubj/6 shone/VBD/conj/2 ././punct/2"
    )
    assert A.coordination(verbless) is None  # the root is a noun: not two coordinated clauses
    imperative = parsed(
        "Come/VB/ROOT/0 here/RB/advmod/0 and/CC/cc/0 the/DT/det/4 dog/NN/nsubj/6 will/MD/aux/6 "
        "follow/VB/conj/0 ././punct/0"
    )
    assert A.coordination(imperative) is None  # the first clause has no subject


@pytest.mark.parametrize(
    ("spec", "inverted"),
    [
        (
            "Tom/NNP/nsubj/1 laughed/VBD/ROOT/1 and/CC/cc/1 the/DT/det/4 dog/NN/nsubj/5 barked/VBD/conj/1 ././punct/1",
            "The dog barked and Tom laughed .",
        ),  # a proper noun keeps its capital
        (
            "The/DT/det/1 cat/NN/nsubj/2 slept/VBD/ROOT/2 and/CC/cc/2 Tom/NNP/nsubj/5 laughed/VBD/conj/2 ././punct/2",
            "Tom laughed and the cat slept .",
        ),  # a common word loses it
        (
            "I/PRP/nsubj/1 laughed/VBD/ROOT/1 and/CC/cc/1 she/PRP/nsubj/4 cried/VBD/conj/1 ././punct/1",
            "She cried and I laughed .",
        ),
        (
            "Mary/NNP/nsubj/1 sang/VBD/ROOT/1 ,/,/punct/1 but/CC/cc/1 "
            "nobody/NN/nsubj/5 listened/VBD/conj/1 ././punct/1",
            "Nobody listened , but Mary sang .",
        ),  # the comma stays before the conjunction
    ],
)
def test_inversion_capitalises_the_new_first_word_only(spec, inverted):
    p = parsed(spec)
    co = A.coordination(p)
    assert co is not None
    assert " ".join(A.invert(p, co)) == inverted


def words(text: str) -> Parsed:
    w = text.split()
    return Parsed(tuple(w), ("X",) * len(w), ("dep",) * len(w), (0,) * len(w))


@pytest.mark.parametrize(
    ("text", "heading"),
    [
        ("IN THE WILLOW CHAPTER XVI .", True),
        ("The Return Chapter 12 .", True),
        ("BOOK THE FIRST .", True),
        ("WHEN I saw him , I took it upon myself to interfere .", False),  # one capitalised opening word
        ("He read the book I gave him .", False),
        ("The USA and the UK signed the treaty in the spring of that year .", False),
    ],
)
def test_headings_are_recognised(text, heading):
    assert A.is_heading(words(text)) is heading


@pytest.mark.parametrize(
    ("text", "balanced"),
    [
        ("“ Come here , ” he said .", True),
        ("“ By the bye , I have not wished you joy .", False),  # the quote goes on in the next sentence
        ("He said he would come . ”", False),
        ('He said " come " and left .', True),
        ('He said " come and left .', False),
        ("The boys ’ dog barked .", True),  # an apostrophe, not a closing quote
        ("She called it ‘ the end ’ of the road .", True),
        ("She called it ‘ the end of the road .", False),
    ],
)
def test_unbalanced_quotes_are_recognised(text, balanced):
    assert A.quotes_balanced(words(text)) is balanced


@pytest.mark.parametrize("seed", range(8))
def test_a_form_with_two_labels_stays_in_one_split(seed):
    # "put" is a past (VBD) and a present (VBP) form: grouping by label and form let it cross splits
    items = [type("I", (), {"text": f"s{i}"})() for i in range(120)]
    forms = {
        "PAST": {"put": range(0, 20), "went": range(20, 40), "saw": range(40, 60)},
        "PRES": {"put": range(60, 80), "goes": range(80, 100), "sees": range(100, 120)},
    }
    pools = {lab: {f: list(r) for f, r in g.items()} for lab, g in forms.items()}
    rows = take_grouped("Tense", pools, (20, 10, 10), np.random.default_rng(seed), items, "verb form")  # type: ignore[arg-type]
    form = {f"s{i}": f for g in pools.values() for f, idx in g.items() for i in idx}
    where: dict[str, set[str]] = {}
    for split, _, text in rows:
        where.setdefault(form[text], set()).add(split)
    assert all(len(s) == 1 for s in where.values()), where


def test_equal_length_coordinations_are_shared_by_every_split():
    assert equal_share(30, (100, 10, 10)) == (25, 3, 2)  # proportional, largest remainder first
    assert equal_share(1000, (90, 9, 9)) == (30, 3, 3)  # at most a third of each split
    assert equal_share(0, (90, 9, 9)) == (0, 0, 0)
    assert sum(equal_share(7, (50, 5, 5))) == 7


def test_somo_refuses_a_replacement_whose_bigrams_never_occur():
    ids = {w: i for i, w in enumerate(["the", "cat", "sat", "dog", "fox", "hat"])}
    v = len(ids)
    pairs = {("the", "cat"): 1, ("cat", "sat"): 1, ("the", "fox"): 1, ("fox", "sat"): 1, ("the", "hat"): 1}
    keys = np.array(sorted(ids[a] * v + ids[b] for a, b in pairs), np.int64)
    counts = np.array([pairs[next((a, b) for a, b in pairs if ids[a] * v + ids[b] == k)] for k in keys], np.int64)
    bg = Bigrams(ids, keys, counts)
    reps = np.array([ids["dog"], ids["fox"], ids["hat"]], np.int64)
    # "the cat sat": both original bigrams occur only in this sentence (0 once it is left out)
    ok = somo_match(bg, ids["the"], ids["cat"], ids["sat"], reps, 1.0, 1)
    assert ok.tolist() == [False, True, False]  # dog: neither bigram occurs; hat: "hat sat" never does
    ok = somo_match(bg, ids["the"], ids["cat"], ids["sat"], reps, 1.0, 0)
    assert ok.tolist() == [True, True, True]  # the old rule: 0 against 0 passes anything


def _leaves(t: A.Tree) -> list[int]:
    return [t] if isinstance(t, int) else [x for k in t.kids for x in _leaves(k)]


@pytest.mark.parametrize(
    "spec",
    [
        # odd parses seen on Gutenberg: an auxiliary with dependents, a subordinator with dependents,
        # a wh-word beside a subordinator, negation before "to", the final mark as the root
        "Sisters/NNS/nsubj/2 never/RB/neg/2 do/VBP/aux/8 ,/,/punct/2 as/IN/mark/6 we/PRP/nsubj/6 say/VBP/advcl/2 "
        ",/,/punct/2 know/VBP/ROOT/8 too/RB/advmod/10 well/RB/advmod/8 ././punct/8",
        "Not/RB/neg/1 that/IN/mark/6 even/RB/advmod/6 ,/,/punct/6 for/IN/mark/6 she/PRP/nsubj/6 is/VBZ/ROOT/6 "
        "right/JJ/acomp/6 ././punct/6",
        "What/WP/dep/4 if/IN/mark/4 it/PRP/nsubj/4 is/VBZ/ROOT/4 ?/./punct/4",
        "He/PRP/nsubj/1 told/VBD/ROOT/1 me/PRP/dobj/1 not/RB/neg/5 to/TO/aux/5 tell/VB/xcomp/1 ././punct/1",
        "Because/IN/prep/4 of/IN/pcomp/0 women/NNS/pobj/1 first/RB/advmod/2 ././ROOT/4",
    ],
)
def test_every_word_is_in_the_tree_once(spec):
    p = parsed(spec)
    assert sorted(_leaves(A.phrase_tree(p))) == list(range(len(p.words)))


def test_a_finite_complement_clause_without_that_is_an_sbar():
    # "He declared I was right ." -> (SBAR (S ...)) as a PTB parser gives it (the empty complementizer)
    p = parsed("He/PRP/nsubj/1 declared/VBD/ROOT/1 I/PRP/nsubj/3 was/VBD/ccomp/1 right/JJ/acomp/3 ././punct/1")
    assert A.bracketed(p, A.phrase_tree(p)) == (
        "(S (NP (PRP He)) (VP (VBD declared) (SBAR (S (NP (PRP I)) (VP (VBD was) (ADJP (JJ right)))))) (. .))"
    )
    assert A.tree_depth(p) == 8


def test_the_analysis_drops_headings_and_unbalanced_quotes():
    keep = parsed("He/PRP/nsubj/1 left/VBD/ROOT/1 the/DT/det/3 room/NN/dobj/1 ././punct/1")
    heading = parsed("IN/IN/prep/2 THE/DT/det/2 WILLOW/NNP/ROOT/2 CHAPTER/NNP/appos/2 XVI/NNP/appos/2 ././punct/2")
    quote = parsed("“/``/punct/2 He/PRP/nsubj/2 left/VBD/ROOT/2 the/DT/det/4 room/NN/dobj/2 ././punct/2")
    pool = analyse([keep, heading, quote], Counter())
    assert [it.text for it in pool.items] == ["He left the room ."]


def _coord_item(first: int, second: int, tag: str) -> Item:
    """ "Tom w ... and Ann w ... ." with clauses of `first` and `second` words, `tag` marking it."""
    words = ["Tom", *[tag] * (first - 1), "and", "Ann", *[tag] * (second - 1), "."]
    tags = ["NNP", *["VBD"] * (first - 1), "CC", "NNP", *["VBD"] * (second - 1), "."]
    co = A.Coordination((0, first), first, (first + 1, first + 1 + second), False)
    return Item(" ".join(words), " ".join(tags), len(words), None, None, None, 0, None, co, False)


def test_equal_length_coordinations_reach_dev_and_test():
    items = (
        [_coord_item(3, 3, f"eq{i}") for i in range(20)]
        + [_coord_item(4, 2, f"fi{i}") for i in range(200)]
        + [_coord_item(2, 4, f"se{i}") for i in range(200)]
    )
    pool = Pool(items, Counter())
    rows = build_coord_inv(pool, BuildSettings(), (100, 20, 20), np.random.default_rng(0))
    equal = Counter(split for split, _, text in rows if "eq" in text)
    assert equal["va"] > 0 and equal["te"] > 0  # the old plan gave train all 10 pairs per class
    assert equal == {"tr": 14, "va": 4, "te": 2}  # equal_share(10, (50, 10, 10)) = (7, 2, 1), O and I
