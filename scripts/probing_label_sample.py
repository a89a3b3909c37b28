"""Draw the hand-check sample of the probing builder's labels (docs/evaluation.md, "How good the
labels are"): build the ten tasks from the Gutenberg books listed in
``tests/data/probing/data/label_check/books.txt`` with ``sentkit data build-probing``'s code (seed 1111,
``--fit``, 100 WC target words), then draw 50 rows per task (seed 0, every split) into a JSONL file,
each row with what a checker needs beside the label: the Penn-Treebank-style tree for TreeDepth and
TopConst, the target word for Tense / SubjNum / ObjNum, the original sentence for a changed SOMO,
BShift or CoordInv row, and the spaCy parse the label was read from (so a test can check that the
current code still gives the committed labels). Each row has ``verdict`` (empty here): the checker
writes ``ok``, ``wrong`` (the label is false for the sentence as given, with a note saying why) or,
for a changed row of BShift, SOMO and CoordInv, ``undetectable`` (the change is real but reads as
naturally as an original).

    python scripts/probing_label_sample.py --books ../shared/data/corpus/gutenberg \\
        --work /tmp/probing-label-check --out sample.jsonl

``tests/data/probing/test_label_check.py`` recomputes the published error rates from the committed
verdicts.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from sentkit.data.probing import analysis as A
from sentkit.data.probing import parse as P
from sentkit.data.probing.build import BuildSettings, build_probing
from sentkit.data.probing.tasks import TASK_ORDER
from sentkit.evaluation.tasks import PROBING_FILES

HERE = Path(__file__).resolve().parent.parent / "tests" / "data" / "probing" / "data" / "label_check"
PER_TASK = 50
SIZES = (20_000, 2_000, 2_000)  # --fit brings each task down to what the books give


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--books", required=True, help="the Gutenberg folder (../shared/data/corpus/gutenberg)")
    ap.add_argument("--work", required=True, help="a scratch folder (corpus links, parse cache, built tasks)")
    ap.add_argument("--out", required=True, help="the sample JSONL to write")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    work = Path(args.work)
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for name in (HERE / "books.txt").read_text().split():
        link = corpus / name
        if not link.exists():
            link.symlink_to(Path(args.books).resolve() / name)
    # 22 books cannot give 1,000 target words 3 sentences each: WC gets 100 (its labels do not depend on it)
    settings = BuildSettings(*SIZES, wc_words=100)
    res = build_probing(corpus, work / "built", settings, cache_dir=work / "parsed", fit=True)
    if res.failed:
        print("failed:", {k: str(v) for k, v in res.failed.items()}, file=sys.stderr)
    parsed = {" ".join(p.words): p for p in P.iter_parsed(work / "parsed")}
    rng = random.Random(args.seed)
    rows = []
    for task in TASK_ORDER:
        if task not in res.manifest["tasks"]:
            continue
        lines = (work / "built" / "PROBING" / PROBING_FILES[task]).read_text(encoding="utf-8").splitlines()
        for k, line in enumerate(sorted(rng.sample(range(len(lines)), PER_TASK))):
            split, label, text = lines[line].split("\t")
            row = {"id": f"{task}-{k:02d}", "task": task, "split": split, "label": label, "sentence": text}
            row.update(aid(task, label, text, parsed))
            row.update(verdict="", note="")
            rows.append(row)
    Path(args.out).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(rows)} rows to {args.out}")
    return 0


def aid(task: str, label: str, text: str, parsed: dict[str, P.Parsed]) -> dict[str, str]:
    """What the checker reads beside the label."""
    p = parsed.get(text)
    if task in ("TreeDepth", "TopConst") and p is not None:
        return {"tree": A.bracketed(p, A.phrase_tree(p)), "parse": p.line()}
    if task in ("Tense", "SubjNum", "ObjNum") and p is not None:
        got = {"Tense": A.tense, "SubjNum": A.subject_number, "ObjNum": A.object_number}[task](p)
        return {"target": got[1] if got else "", "parse": p.line()}
    if task in ("BShift", "SOMO", "CoordInv") and label in ("I", "C"):
        words = text.split(" ")
        best = min(parsed, key=lambda s: _distance(s, words)) if task != "CoordInv" else _coord_original(text, parsed)
        return {"original": best, **({"parse": parsed[best].line()} if task == "CoordInv" else {})}
    return {}


def _distance(candidate: str, words: list[str]) -> int:
    other = candidate.split(" ")
    if len(other) != len(words):
        return 10**6
    return sum(a != b for a, b in zip(other, words))


def _coord_original(text: str, parsed: dict[str, P.Parsed]) -> str:
    key = sorted(text.lower().split(" "))
    return next((s for s in parsed if len(s) == len(text) and sorted(s.lower().split(" ")) == key), "")


if __name__ == "__main__":
    raise SystemExit(main())
