"""The published label error rates of the probing builder (docs/evaluation.md, "How good the labels
are") recomputed from the committed hand-check verdicts, so the docs cannot drift from them; and the
committed labels re-derived from the committed parses with the current code, so a change to the
derivation shows here (and the sample has to be drawn and checked again:
scripts/probing_label_sample.py)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from sentkit.data.probing import analysis as A
from sentkit.data.probing.parse import Parsed
from sentkit.data.probing.tasks import SENTLEN_BINS, TASK_ORDER

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = Path(__file__).parent / "data" / "label_check" / "sample.jsonl"
DOCS = ROOT / "docs" / "evaluation.md"
CHANGING = ("BShift", "SOMO", "CoordInv")  # tasks with changed rows (I / C)
FIT_BELOW = 0.05


def rows() -> list[dict[str, str]]:
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]


def published() -> dict[str, list[str]]:
    """The hand-check table of docs/evaluation.md: task -> its cells."""
    text = DOCS.read_text(encoding="utf-8")
    table = text[text.index("### How good the labels are") :].split("\n\n")[2]
    out = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        out[cells[0]] = cells
    return out


def test_every_task_has_50_judged_rows():
    got = rows()
    counts = Counter(r["task"] for r in got)
    assert set(counts) == set(TASK_ORDER) and min(counts.values()) >= 50
    for r in got:
        assert r["verdict"] in ("ok", "wrong", "undetectable"), r["id"]
        if r["verdict"] == "wrong":
            assert r["note"], f"{r['id']}: a wrong label says why"
        if r["verdict"] == "undetectable":
            assert r["task"] in CHANGING and r["label"] in ("I", "C"), r["id"]


def test_the_published_error_rates_are_the_verdicts():
    got = rows()
    table = published()
    assert set(table) == set(TASK_ORDER)
    for task in TASK_ORDER:
        mine = [r for r in got if r["task"] == task]
        wrong = sum(r["verdict"] == "wrong" for r in mine)
        cells = table[task]
        assert cells[1] == f"{wrong} / {len(mine)}", task
        assert cells[2] == f"{round(100 * wrong / len(mine))} %", task
        assert cells[3].startswith("yes" if wrong / len(mine) < FIT_BELOW else "no"), task
        if task in CHANGING:
            changed = [r for r in mine if r["label"] in ("I", "C")]
            hidden = sum(r["verdict"] == "undetectable" for r in changed)
            assert cells[4] == f"{hidden} / {len(changed)}", task
        else:
            assert cells[4] == "", task


def test_the_fit_verdicts_in_the_prose_match_the_table():
    text = DOCS.read_text(encoding="utf-8")
    fit = [t for t, cells in published().items() if cells[3] == "yes"]
    sentence = re.search(r"([A-Za-z,\s]+) built by sentkit can be compared across models", text)
    assert sentence is not None
    named = re.findall(r"[A-Z][A-Za-z]+", sentence.group(1))
    assert sorted(named) == sorted(fit)


def parsed(line: str) -> Parsed:
    return Parsed.from_line(line)


@pytest.mark.parametrize("task", ["SentLen", "WC", "TreeDepth", "TopConst", "Tense", "SubjNum", "ObjNum", "CoordInv"])
def test_the_committed_labels_still_follow_from_the_code(task):
    for r in (r for r in rows() if r["task"] == task):
        label, text = r["label"], r["sentence"]
        if task == "SentLen":
            lo, hi = SENTLEN_BINS[int(label)]
            assert lo <= len(text.split(" ")) <= hi, r["id"]
        elif task == "WC":
            assert text.lower().split(" ").count(label) == 1, r["id"]
        elif task in ("TreeDepth", "TopConst"):
            p = parsed(r["parse"])
            assert A.bracketed(p, A.phrase_tree(p)) == r["tree"], r["id"]  # the tree the checker read
            if task == "TreeDepth":
                assert str(A.tree_depth(p)) == label, r["id"]
            else:
                top = A.top_constituents(p)
                assert top is not None and (label == "OTHER" or top == label), r["id"]
        elif task in ("Tense", "SubjNum", "ObjNum"):
            read = {"Tense": A.tense, "SubjNum": A.subject_number, "ObjNum": A.object_number}[task]
            assert read(parsed(r["parse"])) == (label, r["target"]), r["id"]
        elif label == "I":
            p = parsed(r["parse"])  # the original sentence's parse
            co = A.coordination(p)
            assert co is not None and " ".join(A.invert(p, co)) == text, r["id"]
