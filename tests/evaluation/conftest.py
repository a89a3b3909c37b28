"""Small SentEval-format fixtures (every file format), written by the tests themselves."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import numpy as np
import pytest

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
]


def _sent(rng: np.random.Generator, tag: str, i: int) -> str:
    n = int(rng.integers(2, 7))
    return " ".join([tag, *rng.choice(WORDS, n).tolist(), str(i), "."])


def _w(path: Path, lines: list[str], encoding: str = "utf-8", newline: str = "\n", bom: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = newline.join(lines) + newline
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode(encoding))


def make_senteval_dir(root: Path, seed: int = 0) -> Path:
    """Write every task of SentEval in its file format, tiny."""
    rng = np.random.default_rng(seed)
    for folder, files in (
        ("MR", ("rt-polarity.pos", "rt-polarity.neg")),
        ("CR", ("custrev.pos", "custrev.neg")),
        ("SUBJ", ("subj.objective", "subj.subjective")),
        ("MPQA", ("mpqa.pos", "mpqa.neg")),
    ):
        for k, f in enumerate(files):
            _w(root / folder / f, [_sent(rng, f"{folder.lower()}{k}", i) for i in range(20)], "latin-1")
    classes = ["ABBR:abb", "DESC:def", "ENTY:animal", "HUM:ind", "LOC:city", "NUM:date"]
    for f, n in (("train_5500.label", 6), ("TREC_10.label", 2)):
        _w(root / "TREC" / f, [f"{c} {_sent(rng, 'trec', i)} caf\xe9" for c in classes for i in range(n)], "latin-1")
    for split, n in (("train", 30), ("dev", 10), ("test", 10)):
        _w(root / "SST2" / f"sentiment-{split}", [f"{_sent(rng, 'sst2', i)}\t{i % 2}" for i in range(n)])
        _w(root / "SST5" / f"sentiment-{split}", [f"{i % 5} {_sent(rng, 'sst5', i)}" for i in range(n)])
    labels = ["NEUTRAL", "ENTAILMENT", "CONTRADICTION"]
    for f, n, nl in (
        ("SICK_train.txt", 30, "\n"),
        ("SICK_trial.txt", 12, "\n"),
        ("SICK_test_annotated.txt", 12, "\r\n"),
    ):
        rows = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
        rows += [
            f"{i}\t{_sent(rng, 'sicka', i)}\t{_sent(rng, 'sickb', i)}\t{1 + 4 * rng.random():.1f}\t{labels[i % 3]}"
            for i in range(n)
        ]
        _w(root / "SICK" / f, rows, newline=nl)
        (root / "SICK" / "raw").mkdir(parents=True, exist_ok=True)
        raw = [rows[0]] + [r.replace(" .", ".").replace("sick", "Sick") for r in rows[1:]]
        _w(root / "SICK" / "raw" / f, raw, newline=nl)
    for f, n in (("sts-train.csv", 30), ("sts-dev.csv", 12), ("sts-test.csv", 12)):
        rows = [
            f"main-captions\tMSRvid\t2012test\t{i:04d}\t{5 * rng.random():.3f}\t{_sent(rng, 'stsba', i)}\t"
            f"{_sent(rng, 'stsbb', i)}"
            for i in range(n)
        ]
        _w(root / "STSB" / f, rows)
    from sentkit.evaluation.tasks import STS_SUBSETS

    for task, subsets in STS_SUBSETS.items():
        for sub in subsets:
            n = 8
            pairs = [f"{_sent(rng, task.lower() + 'a', i)}\t{_sent(rng, task.lower() + 'b', i)}" for i in range(n)]
            gs = [("" if i == 3 else f"{5 * rng.random():.2f}") for i in range(n)]
            _w(root / task / f"STS.input.{sub}.txt", pairs)
            _w(root / task / f"STS.gs.{sub}.txt", gs)
    for f, n in (("msr_paraphrase_train.txt", 30), ("msr_paraphrase_test.txt", 12)):
        rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        rows += [f"{i % 2}\t{i}\t{i + 1000}\t{_sent(rng, 'mrpca', i)}\t{_sent(rng, 'mrpcb', i)}" for i in range(n)]
        _w(root / "MRPC" / f, rows, bom=True)
    snli = ["entailment", "neutral", "contradiction"]
    for split, n in (("train", 30), ("dev", 12), ("test", 12)):
        _w(root / "SNLI" / f"s1.{split}", [_sent(rng, "snlia", i) for i in range(n)], "latin-1")
        _w(root / "SNLI" / f"s2.{split}", [_sent(rng, "snlib", i) for i in range(n)], "latin-1")
        _w(root / "SNLI" / f"labels.{split}", [snli[i % 3] for i in range(n)])
    from sentkit.evaluation.tasks import PROBING_FILES

    for task, f in PROBING_FILES.items():
        rows = [
            f"{sp}\t{['PAST', 'PRES', 'FUT'][i % 3]}\t{_sent(rng, task.lower(), i)}"
            for sp, n in (("tr", 30), ("va", 9), ("te", 9))
            for i in range(n)
        ]
        _w(root / "PROBING" / f, rows)
    for split, nimg in (("train", 12), ("valid", 5), ("test", 5)):
        caps = {}
        ids = []
        for im in range(nimg):
            ids.append(list(range(100 * im, 100 * im + 6)))  # 6 captions, SentEval keeps 5
            for c in ids[-1]:
                caps[c] = {"cleaned_caption": f"coco {split} image {im} caption {c}"}
        feats = rng.normal(size=(nimg, 7)).astype(np.float32)
        (root / "COCO").mkdir(parents=True, exist_ok=True)
        with open(root / "COCO" / f"{split}.pkl", "wb") as fh:
            pickle.dump({"features": feats, "image_to_caption_ids": ids, "captions": caps}, fh)
    return root


@pytest.fixture(scope="session")
def senteval_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_senteval_dir(tmp_path_factory.mktemp("senteval"))


class HashEncoder:
    """An oracle whose right answer is known: a deterministic pseudo-random vector per sentence
    (seeded by its md5). Records every sentence it encodes."""

    def __init__(self, dim: int = 8) -> None:
        self.dim = dim
        self.seen: list[str] = []

    def vector(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.md5(text.encode()).digest()[:4], "little")
        return np.random.default_rng(seed).normal(size=self.dim).astype(np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        self.seen.extend(texts)
        return np.stack([self.vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def fingerprint(self) -> str:
        return f"hash-{self.dim}"


ENCODER_SOURCE = """
import hashlib
import numpy as np

class Enc:
    fingerprint = "cli-test-enc"
    def encode(self, texts):
        out = np.empty((len(texts), 6), np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.md5(t.encode()).digest()[:4], "little")
            out[i] = np.random.default_rng(seed).normal(size=6)
            if NAN_ON and t.startswith(NAN_ON):
                out[i, 0] = np.nan
        return out
"""


def write_encoder(folder: Path, nan_on: str = "") -> str:
    """A `--model file.py:Enc` encoder (hash vectors, like HashEncoder); sentences starting with
    `nan_on` get a NaN."""
    p = folder / "my_encoder.py"
    p.write_text(f"NAN_ON = {nan_on!r}\n" + ENCODER_SOURCE)
    return f"{p}:Enc"
