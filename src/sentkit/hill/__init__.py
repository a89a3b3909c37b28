"""Hill et al. (2016) room: the unsupervised sentence models of "Learning Distributed Representations
of Sentences from Unlabelled Data" as sentkit methods (``sentkit train --method``): FastSent and
FastSent+AE, SDAE / SAE, SkipThought, DictRep (BOW, RNN), CaptionRep, NMT encoders, paragraph
vectors (DBOW, DM), CBOW / SkipGram sums and unigram TF-IDF. Each is an estimator
(``fit(corpus) -> self``, ``encode``, ``save`` / ``load``; base class in ``common.py``), listed by
name in `sentkit.core.methods.METHODS` (the one registry of methods).

Importing this package imports nothing heavy; models and their dependencies (torch, gensim, numba)
are imported only when a method trains or loads.
"""

from __future__ import annotations

from typing import Any

from sentkit.core.errors import InputError


def model_class(name: str) -> Any:
    """The estimator class of method ``name`` (imports its module only); an unknown name raises
    with a suggestion, a method that is not an estimator (a transformer recipe) is a ValueError."""
    from sentkit.core.methods import method_target
    from sentkit.hill.common import HillModel

    cls = method_target(name)
    if not (isinstance(cls, type) and issubclass(cls, HillModel)):
        raise InputError(f"method {name!r} is not an estimator (fit / encode / save / load)")
    return cls


__all__ = ["model_class"]
