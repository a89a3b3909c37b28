"""Published figures the report sets beside this package's runs.

Hill, Cho and Korhonen (2016), "Learning Distributed Representations of Sentences from Unlabelled
Data" (arXiv:1602.03483): models trained on the Toronto Books Corpus (~70M sentences, 0.9B words),
evaluated with logistic regression (10-fold CV where no split exists).

PROVENANCE: this workplace has no internet access, so the figures below were transcribed from the
published tables without a copy of the PDF at hand. Six of them (the best of the paper's own models
per task: MSRP 76.4, MR 74.6, CR 78.4, SUBJ 90.8, MPQA 86.9, TREC 80.4) match an independent listing
of the paper's results; the rest were not cross-checked. Verify against the paper before citing.
Figures that could not be transcribed with confidence are left out (None) rather than guessed.
"""

from __future__ import annotations

# Table 3 (supervised): MSRP accuracy, MSRP F1, MR, CR, SUBJ, MPQA, TREC (accuracy, %).
HILL_TABLE3_COLUMNS = ("MSRP acc", "MSRP F1", "MR", "CR", "SUBJ", "MPQA", "TREC")
HILL_TABLE3: dict[str, tuple[float, ...]] = {
    "sae": (74.3, 81.7, 62.6, 68.0, 86.1, 76.8, 80.2),
    "sdae": (76.4, 83.4, 67.6, 74.0, 89.3, 81.3, 77.6),
    "paragraph-vector-dbow": (72.9, 81.1, 60.2, 66.9, 76.3, 70.7, 59.4),
    "paragraph-vector-dm": (73.6, 81.9, 61.5, 68.6, 76.4, 78.1, 55.8),
    "skipgram": (69.3, 77.2, 73.6, 77.3, 89.2, 85.0, 82.2),
    "cbow": (67.6, 76.1, 73.6, 77.3, 89.1, 85.0, 82.2),
    "tfidf": (73.6, 81.7, 73.7, 79.2, 90.3, 82.4, 85.0),
    "skipthought": (73.0, 82.0, 76.5, 80.1, 93.6, 87.1, 92.2),
    "fastsent": (72.2, 80.3, 70.8, 78.4, 88.7, 80.6, 76.8),
    "fastsent-ae": (71.2, 79.1, 71.8, 76.7, 88.8, 81.5, 80.4),
}

# Table 4 (unsupervised, cosine similarity, Spearman): STS 2014 "All" and SICK (train + test).
HILL_TABLE4_COLUMNS = ("STS14 all", "SICK")
HILL_TABLE4: dict[str, tuple[float | None, float | None]] = {
    "skipgram": (0.62, 0.60),
    "cbow": (0.64, 0.60),
    "tfidf": (0.58, 0.52),
    "skipthought": (0.27, 0.57),
    "fastsent": (0.63, 0.61),
    "fastsent-ae": (0.62, 0.60),
}
