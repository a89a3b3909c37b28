"""What the probing tasks read from a parse, on hand-built dependency trees (no spaCy needed)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from sentkit.data.probing import analysis as A
from sentkit.data.probing.parse import Parsed
from sentkit.data.probing.tasks import TooFewSentences, take_grouped


def parsed(spec: str) -> Parsed:
    """`word/TAG/dep/head ...` (head as a token index) -> Parsed."""
    parts = [t.rsplit("/", 3) for t in spec.split()]
    return Parsed(tuple(p[0] for p in parts), tuple(p[1] for p in parts), tuple(p[2] for p in parts),
                  tuple(int(p[3]) for p in parts))


# "He might be a prince but there was something to consider ."
PRINCE = parsed("He/PRP/nsubj/2 might/MD/aux/2 be/VB/ROOT/2 a/DT/det/4 prince/NN/attr/2 but/CC/cc/2 "
                "there/EX/expl/7 was/VBD/conj/2 something/NN/attr/7 to/TO/aux/10 consider/VB/relcl/8 ././punct/2")
# "The old farmers have painted the window ."
FARMERS = parsed("The/DT/det/2 old/JJ/amod/2 farmers/NNS/nsubj/4 have/VBP/aux/4 painted/VBN/ROOT/4 "
                 "the/DT/det/6 window/NN/dobj/4 ././punct/4")
# "Did the dog watch the cat ?"
QUESTION = parsed("Did/VBD/aux/3 the/DT/det/2 dog/NN/nsubj/3 watch/VB/ROOT/3 the/DT/det/5 cat/NN/dobj/3 ?/./punct/3")
# "Then the dog watched the cats ."
THEN = parsed("Then/RB/advmod/3 the/DT/det/2 dog/NN/nsubj/3 watched/VBD/ROOT/3 the/DT/det/5 cats/NNS/dobj/3 ././punct/3")


def test_tense_reads_the_finite_verb_of_the_main_clause():
    assert A.tense(FARMERS) == ("PRES", "have")  # the auxiliary carries the tense of "have painted"
    assert A.tense(THEN) == ("PAST", "watched")
    assert A.tense(PRINCE) is None  # a modal: neither class


def test_subject_and_object_number():
    assert A.subject_number(FARMERS) == ("NNS", "farmers")
    assert A.object_number(FARMERS) == ("NN", "window")
    assert A.object_number(THEN) == ("NNS", "cats")
    assert A.subject_number(PRINCE) is None  # a pronoun


def test_tree_depth_is_the_height_of_the_projected_phrase_tree():
    # painted -> farmers -> {The, old} : word 1, tag 2, NP(farmers) 3, VP(painted) 4, ROOT 5
    assert A.tree_depth(FARMERS) == 5
    flat = parsed("Go/VB/ROOT/0 ././punct/0")
    assert A.tree_depth(flat) == 4  # ROOT, the verb's phrase, the tag node, the word


def test_top_constituents_from_the_dependency_parse():
    assert A.top_constituents(FARMERS) == "NP_VP_."  # the auxiliary belongs to the verb group
    assert A.top_constituents(THEN) == "ADVP_NP_VP_."
    assert A.top_constituents(QUESTION) == "VBD_NP_VP_."  # a yes/no question's SQ, as in the paper's classes
    assert A.top_constituents(PRINCE) == "S_CC_S_."
    comma = parsed("Then/RB/advmod/3 ,/,/punct/3 he/PRP/nsubj/3 left/VBD/ROOT/3 ././punct/3")
    assert A.top_constituents(comma) is None  # sentence-internal punctuation at the top: left out


def test_coordination_inversion_matches_the_readme_example():
    co = A.coordination(PRINCE)
    assert co is not None and co.lengths() == (5, 5) and not co.comma
    assert " ".join(A.invert(PRINCE, co)) == "There was something to consider but he might be a prince ."
    two_cc = parsed("He/PRP/nsubj/1 came/VBD/ROOT/1 and/CC/cc/1 she/PRP/nsubj/4 left/VBD/conj/1 "
                    "and/CC/cc/4 slept/VBD/conj/4 ././punct/1")
    assert A.coordination(two_cc) is None  # only sentences with a single CC
    no_subject = parsed("He/PRP/nsubj/1 came/VBD/ROOT/1 and/CC/cc/1 left/VBD/conj/1 ././punct/1")
    assert A.coordination(no_subject) is None  # two verb phrases, not two clauses


def test_grouped_sampling_never_puts_a_form_in_two_splits():
    items = [type("I", (), {"text": f"s{i}"})() for i in range(400)]
    pools = {lab: {f"{lab}{g}": list(range(k * 200 + g * 10, k * 200 + g * 10 + 10)) for g in range(20)}
             for k, lab in enumerate(("PAST", "PRES"))}
    rows = take_grouped("Tense", pools, (200, 40, 40), np.random.default_rng(0), items, "verb form")  # type: ignore[arg-type]
    form = {f"s{i}": g for groups in pools.values() for g, idx in groups.items() for i in idx}
    where: dict[str, set[str]] = {}
    for split, _, text in rows:
        where.setdefault(form[text], set()).add(split)
    assert all(len(s) == 1 for s in where.values())
    assert Counter((s, lab) for s, lab, _ in rows) == {("tr", "PAST"): 100, ("tr", "PRES"): 100, ("va", "PAST"): 20,
                                                      ("va", "PRES"): 20, ("te", "PAST"): 20, ("te", "PRES"): 20}
    with pytest.raises(TooFewSentences, match="no verb form in two splits"):
        take_grouped("Tense", pools, (400, 40, 40), np.random.default_rng(0), items, "verb form")  # type: ignore[arg-type]
