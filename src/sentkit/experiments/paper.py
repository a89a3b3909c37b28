"""Published figures the report sets beside this package's runs.

Hill, Cho and Korhonen (2016), "Learning Distributed Representations of Sentences from Unlabelled
Data" (arXiv:1602.03483): models trained on the Toronto Books Corpus (70m sentences, 0.9B words),
evaluated with logistic regression (10-fold CV where no split exists) and by cosine similarity.

PROVENANCE: every figure below was checked against the paper's text in ``../shared/papers/
hill-cho-korhonen-2016.txt`` (``tests/experiments/test_paper.py`` parses that file and compares
every cell). Extraction damage repaired here: Table 3's CBOW CR cell reads "7730" (77.3); in Table 4
a few cells lost their leading dot (SAE News "17", Unigram TFIDF Images "72") or gained a space
(SAE+embs. Images ". 64").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# ---------------------------------------------------------------- Table 1: model properties
# SD: sentence dimension, WD: word dimension (Table 1). SkipGram has no row of its own.
HILL_TABLE1_DIMS: dict[str, tuple[int, int]] = {
    "S(D)AE": (2400, 100),
    "ParagraphVec": (100, 100),
    "CBOW": (500, 500),
    "SkipThought": (4800, 620),
    "FastSent": (100, 100),
    "DictRep": (500, 256),
    "CaptionRep": (500, 256),
    "NMT": (2400, 512),
}

# ---------------------------------------------------------------- Table 3: supervised evaluations
# MSRP accuracy, MSRP F1, MR, CR, SUBJ, MPQA, TREC (accuracy, %), every row of the table.
HILL_TABLE3_COLUMNS = ("MSRP acc", "MSRP F1", "MR", "CR", "SUBJ", "MPQA", "TREC")
HILL_TABLE3_KEYS = ("MRPC:acc", "MRPC:f1", "MR", "CR", "SUBJ", "MPQA", "TREC")  # this package's score names
HILL_TABLE3: dict[str, tuple[float, ...]] = {
    "SAE": (74.3, 81.7, 62.6, 68.0, 86.1, 76.8, 80.2),
    "SAE+embs.": (70.6, 77.9, 73.2, 75.3, 89.8, 86.2, 80.4),
    "SDAE": (76.4, 83.4, 67.6, 74.0, 89.3, 81.3, 77.6),
    "SDAE+embs.": (73.7, 80.7, 74.6, 78.0, 90.8, 86.9, 78.4),
    "ParagraphVec DBOW": (72.9, 81.1, 60.2, 66.9, 76.3, 70.7, 59.4),
    "ParagraphVec DM": (73.6, 81.9, 61.5, 68.6, 76.4, 78.1, 55.8),
    "Skipgram": (69.3, 77.2, 73.6, 77.3, 89.2, 85.0, 82.2),
    "CBOW": (67.6, 76.1, 73.6, 77.3, 89.1, 85.0, 82.2),
    "Unigram TFIDF": (73.6, 81.7, 73.7, 79.2, 90.3, 82.4, 85.0),
    "SkipThought": (73.0, 82.0, 76.5, 80.1, 93.6, 87.1, 92.2),
    "FastSent": (72.2, 80.3, 70.8, 78.4, 88.7, 80.6, 76.8),
    "FastSent+AE": (71.2, 79.1, 71.8, 76.7, 88.8, 81.5, 80.4),
    "NMT En to Fr": (69.1, 77.1, 64.7, 70.1, 84.9, 81.5, 82.8),
    "NMT En to De": (65.2, 73.3, 61.0, 67.6, 78.2, 72.9, 81.6),
    "CaptionRep BOW": (73.6, 81.9, 61.9, 69.3, 77.4, 70.8, 72.2),
    "CaptionRep RNN": (72.6, 81.1, 55.0, 64.9, 64.9, 71.0, 62.4),
    "DictRep BOW": (73.7, 81.6, 71.3, 75.6, 86.6, 82.5, 73.8),
    "DictRep BOW+embs.": (68.4, 76.8, 76.7, 78.7, 90.7, 87.2, 81.0),
    "DictRep RNN": (73.2, 81.6, 67.8, 72.7, 81.4, 82.5, 75.8),
    "DictRep RNN+embs.": (66.8, 76.0, 72.5, 73.5, 85.6, 85.7, 72.0),
    "CPHRASE": (72.2, 79.6, 75.7, 78.8, 91.1, 86.2, 78.8),
}

# ---------------------------------------------------------------- Table 4: unsupervised evaluations
# Spearman correlation of cosine similarity (the paper prints Spearman/Pearson; Spearman kept):
# STS 2014's six subsets, its "All" and SICK (train + test). "All" is not the mean of the six
# subsets: it is one correlation over the 3,750 pairs pooled, this package's `STS14:pooled`.
HILL_TABLE4_COLUMNS = ("News", "Forum", "WordNet", "Twitter", "Images", "Headlines", "STS14 All", "SICK")
STS14_SUBSETS = ("deft-news", "deft-forum", "OnWN", "tweet-news", "images", "headlines")  # the same order
HILL_TABLE4_KEYS = (*(f"STS14:{s}" for s in STS14_SUBSETS), "STS14:pooled", "SICKR-cos")
HILL_TABLE4: dict[str, tuple[float, ...]] = {
    "SAE": (0.17, 0.12, 0.30, 0.28, 0.49, 0.13, 0.12, 0.32),
    "SAE+embs.": (0.52, 0.22, 0.60, 0.60, 0.64, 0.41, 0.42, 0.47),
    "SDAE": (0.07, 0.11, 0.33, 0.44, 0.44, 0.36, 0.17, 0.46),
    "SDAE+embs.": (0.51, 0.29, 0.56, 0.57, 0.59, 0.43, 0.37, 0.46),
    "ParagraphVec DBOW": (0.31, 0.32, 0.53, 0.43, 0.46, 0.39, 0.42, 0.42),
    "ParagraphVec DM": (0.42, 0.33, 0.51, 0.54, 0.32, 0.46, 0.44, 0.44),
    "Skipgram": (0.56, 0.42, 0.73, 0.71, 0.65, 0.55, 0.62, 0.60),
    "CBOW": (0.57, 0.43, 0.72, 0.71, 0.71, 0.55, 0.64, 0.60),
    "Unigram TFIDF": (0.48, 0.40, 0.60, 0.63, 0.72, 0.49, 0.58, 0.52),
    "SkipThought": (0.44, 0.14, 0.39, 0.42, 0.55, 0.43, 0.27, 0.57),
    "FastSent": (0.58, 0.41, 0.74, 0.63, 0.74, 0.57, 0.63, 0.61),
    "FastSent+AE": (0.56, 0.41, 0.69, 0.70, 0.63, 0.58, 0.62, 0.60),
    "NMT En to Fr": (0.35, 0.18, 0.47, 0.55, 0.44, 0.43, 0.43, 0.47),
    "NMT En to De": (0.47, 0.26, 0.34, 0.49, 0.44, 0.38, 0.40, 0.46),
    "CaptionRep BOW": (0.26, 0.29, 0.50, 0.37, 0.78, 0.39, 0.46, 0.56),
    "CaptionRep RNN": (0.05, 0.13, 0.40, 0.36, 0.76, 0.30, 0.39, 0.53),
    "DictRep BOW": (0.62, 0.42, 0.81, 0.62, 0.66, 0.53, 0.62, 0.57),
    "DictRep BOW+embs.": (0.65, 0.49, 0.85, 0.67, 0.71, 0.57, 0.67, 0.61),
    "DictRep RNN": (0.40, 0.26, 0.78, 0.42, 0.56, 0.38, 0.49, 0.49),
    "DictRep RNN+embs.": (0.51, 0.29, 0.80, 0.44, 0.65, 0.42, 0.54, 0.49),
    "CPHRASE": (0.69, 0.43, 0.76, 0.60, 0.75, 0.60, 0.65, 0.60),
}

# ---------------------------------------------------------------- Table 6: internal consistency
# The paper's cohorts in this package's score names: MSRP is the mean of accuracy and F1 (SentEval's
# MRPC score), SICK is SICK-R by cosine.
HILL_SUPERVISED = ("MRPC", "MR", "CR", "SUBJ", "MPQA", "TREC")
HILL_UNSUPERVISED = HILL_TABLE4_KEYS
HILL_LABELS = dict(
    zip(
        (*HILL_SUPERVISED, *HILL_UNSUPERVISED),
        ("MSRP", "MR", "CR", "SUBJ", "MPQA", "TREC", *HILL_TABLE4_COLUMNS),
        strict=True,
    )
)
HILL_ALPHA = {"supervised": 0.90, "unsupervised": 0.93, "all": 0.81}  # Table 6 heading; section 5 text
# Table 6: alpha of the cohort with the task left out (consistency rank within the cohort in brackets)
HILL_ALPHA_WITHOUT: dict[str, tuple[float, int]] = {
    "MRPC": (0.94, 6),
    "MR": (0.85, 1),
    "CR": (0.86, 4),
    "SUBJ": (0.85, 1),
    "MPQA": (0.86, 3),
    "TREC": (0.89, 5),
    "STS14:deft-news": (0.92, 4),
    "STS14:deft-forum": (0.92, 3),
    "STS14:OnWN": (0.92, 4),
    "STS14:tweet-news": (0.93, 6),
    "STS14:images": (0.95, 8),
    "STS14:headlines": (0.92, 2),
    "STS14:pooled": (0.91, 1),
    "SICKR-cos": (0.93, 7),
}

# ---------------------------------------------------------------- which paper row a cell runs
_ROWS = {
    "sae": "SAE",
    "sdae": "SDAE",
    "paragraph-vector-dbow": "ParagraphVec DBOW",
    "paragraph-vector-dm": "ParagraphVec DM",
    "skipgram": "Skipgram",
    "cbow": "CBOW",
    "tfidf": "Unigram TFIDF",
    "skipthought": "SkipThought",
    "fastsent": "FastSent",
    "fastsent-ae": "FastSent+AE",
    "dictrep-bow": "DictRep BOW",
    "dictrep-rnn": "DictRep RNN",
    "captionrep": "CaptionRep RNN",
}
_EMBS_FLAG = {
    "sae": "pretrained_embeddings",
    "sdae": "pretrained_embeddings",
    "dictrep-bow": "pretrained_inputs",
    "dictrep-rnn": "pretrained_inputs",
}


def hill_row(method: str, settings: Mapping[str, Any] | None = None) -> str | None:
    """The Table 3/4 row a cell of `method` with `settings` corresponds to ("+embs." when its input
    embeddings are fixed pre-trained vectors); None for methods the paper did not run."""
    row = _ROWS.get(method)
    if row is not None and (settings or {}).get(_EMBS_FLAG.get(method, ""), False):
        row += "+embs."
    return row


def hill_scores(row: str) -> dict[str, float]:
    """The paper's figures of one row in this package's score names and scale (points)."""
    out: dict[str, float] = {}
    if row in HILL_TABLE3:
        out.update(zip(HILL_TABLE3_KEYS, HILL_TABLE3[row], strict=True))
        out["MRPC"] = (out["MRPC:acc"] + out["MRPC:f1"]) / 2
    if row in HILL_TABLE4:
        out.update(zip(HILL_TABLE4_KEYS, (100 * v for v in HILL_TABLE4[row]), strict=True))
    out.update(cohort_averages(out))
    return out


def cohort_averages(scores: Mapping[str, float]) -> dict[str, float]:
    """`avg:hill_table3` / `avg:hill_table4`: the mean over Hill et al.'s supervised / unsupervised
    cohort, where every task of the cohort has a score."""
    out = {}
    for name, cohort in (("avg:hill_table3", HILL_SUPERVISED), ("avg:hill_table4", HILL_UNSUPERVISED)):
        if all(t in scores for t in cohort):
            out[name] = sum(scores[t] for t in cohort) / len(cohort)
    return out
