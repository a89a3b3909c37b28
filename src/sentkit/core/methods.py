"""The registry of every training method, transformer or not: `sentkit train --method NAME`, the
experiment grids and `sentkit.load` (for a saved folder) look names up here, in one table.

`METHODS` maps each name to where its code lives (``"module:attr"``) and a one-line description.
The attribute is one of three things, each turned into a `Method` when the name is first asked for:

- a transformer recipe: a `sentkit.training.recipe.Recipe` subclass, run by the one loop;
- an estimator: a `sentkit.hill.common.HillModel` subclass (``fit(corpus) -> self``, ``encode``,
  ``save`` / ``load``), whether or not it is a model of Hill et al.;
- a `Method` itself, for anything else (averaged word vectors, whitening, the raw-text recipe made
  of other methods).

Why a table of strings rather than modules that register themselves on import: every name and
description is known without importing any method's code, so `sentkit --help`, `sentkit train
--list-methods`, an unknown method's suggestion and `sentkit.load`'s answer to a name that is not a
model import no torch, gensim or numba; a method's module is imported only when that method trains
or loads. It is also the one place to read which methods exist (a name given twice is ruff's F601),
and a module cannot register a name the table does not list. Code outside sentkit (a plug-in, a
test) adds its own entry with `register_method`; an installed distribution adds one with an entry point
of group ``sentkit.methods`` (``NAME = "module:attr"``), imported only when the methods are listed or a
name the table lacks is asked for (`PLUGINS`), so its method trains from `sentkit train --method NAME`.

A method is a config dataclass plus two functions:
- ``train(cfg) -> Path``: train from ``cfg.corpus`` and save an encoder directory at ``cfg.out``;
- ``load(path) -> Encoder``: load what ``train`` saved.

Every saved encoder directory holds ``sentkit.json`` with at least ``{"method": NAME}`` so that
``sentkit.load(path)`` can dispatch to the right loader: the name, never the module, is saved, so a
method's code can move without breaking the folders it wrote.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentkit.core.registry import Plugins, UnknownNameError, suggest

MARKER_FILE = "sentkit.json"


@dataclass(frozen=True)
class Method:
    name: str
    config_cls: type
    train: Callable[[Any], Path]
    load: Callable[[Path], Any]
    description: str = ""


@dataclass(frozen=True)
class MethodEntry:
    """One line of `METHODS`: where the method's code is (``"module:attr"``, or the object itself
    for an entry added at run time) and what `sentkit train --list-methods` says of it."""

    target: str | object
    description: str


METHODS: dict[str, MethodEntry] = {
    # transformer recipes (sentkit.training.recipes: a Recipe each, run by the one loop)
    "declutr": MethodEntry(
        "sentkit.training.recipes.declutr:Declutr",
        "DeCLUTR continued pretraining of a masked-LM transformer (spans of one document are positives)",
    ),
    "mlm": MethodEntry(
        "sentkit.training.recipes.mlm:MLM",
        "Masked-LM training (continued or from scratch) on packed sequences; a base for declutr",
    ),
    "simcse": MethodEntry(
        "sentkit.training.recipes.simcse:SimCSE",
        "Unsupervised SimCSE: two dropout views of each text, in-batch negatives",
    ),
    "tsdae": MethodEntry(
        "sentkit.training.recipes.tsdae:TSDAE",
        "TSDAE: reconstruct a sentence from the pooled vector of its noisy version (60 % of words deleted)",
    ),
    "mntp": MethodEntry(
        "sentkit.training.recipes.mntp:MNTP",
        "Masked next-token prediction of a decoder LM (LLM2Vec's step 2): bidirectional attention, "
        "token i predicted from output i-1",
    ),
    "clm": MethodEntry(
        "sentkit.training.recipes.clm:CLM",
        "Causal-LM training (next-token prediction; continued or from scratch) of a decoder on packed "
        "sequences; a base for mntp and llm2vec",
    ),
    # recipes made of other methods (a Method each)
    "llm2vec": MethodEntry(
        "sentkit.training.llm2vec:LLM2VEC",
        "Recipe: LLM2Vec's unsupervised steps on a decoder LM (bidirectional attention, MNTP, then "
        "SimCSE on the same corpus), resumable",
    ),
    "raw-text": MethodEntry(
        "sentkit.training.raw_text:RAW_TEXT",
        "Recipe: a sentence encoder from a raw corpus (wordpiece skip-gram -> MLM base -> "
        "DeCLUTR with sentence-length spans); with --model, DeCLUTR with those spans on a given "
        "base",
    ),
    # word vectors for a transformer's input embeddings (an estimator)
    "wordpiece-skipgram": MethodEntry(
        "sentkit.training.wordpiece_skipgram:WordpieceSkipGram",
        "Mean of skip-gram vectors of a transformer's wordpieces (phase 0 of the raw-text recipe)",
    ),
    # the Hill et al. (2016) models (sentkit.hill: an estimator each)
    "fastsent": MethodEntry(
        "sentkit.hill.fastsent:FastSent", "FastSent: sum of word vectors predicting adjacent sentences' words"
    ),
    "fastsent-ae": MethodEntry(
        "sentkit.hill.fastsent:FastSentAE", "FastSent+AE: FastSent that also predicts the sentence's own words"
    ),
    "sdae": MethodEntry("sentkit.hill.sdae:SDAE", "Sequential denoising autoencoder (GRU/LSTM)"),
    "sae": MethodEntry("sentkit.hill.sdae:SAE", "Sequential autoencoder (SDAE without noise)"),
    "skipthought": MethodEntry(
        "sentkit.hill.skipthought:SkipThought", "Uni-skip SkipThought with GloVe vocabulary expansion"
    ),
    "dictrep-bow": MethodEntry(
        "sentkit.hill.regress:DictRepBOW", "DictRep BOW: WordNet definitions -> GloVe vector of the word"
    ),
    "dictrep-rnn": MethodEntry(
        "sentkit.hill.regress:DictRepRNN", "DictRep RNN: WordNet definitions -> GloVe vector of the word"
    ),
    "paragraph-vector-dbow": MethodEntry(
        "sentkit.hill.gensim_models:ParagraphVector", "Paragraph Vector DBOW (gensim Doc2Vec)"
    ),
    "paragraph-vector-dm": MethodEntry(
        "sentkit.hill.gensim_models:ParagraphVectorDM", "Paragraph Vector DM (gensim Doc2Vec)"
    ),
    "cbow": MethodEntry("sentkit.hill.gensim_models:Word2VecSum", "Sum of CBOW word2vec vectors"),
    "skipgram": MethodEntry("sentkit.hill.gensim_models:SkipGramSum", "Sum of skip-gram word2vec vectors"),
    "tfidf": MethodEntry("sentkit.hill.tfidf:TfidfBOW", "Unigram TF-IDF bag of words (200k words)"),
    "captionrep": MethodEntry(
        "sentkit.hill.regress:CaptionRep", "CaptionRep: caption RNN -> image features (bring captions + features)"
    ),
    "nmt": MethodEntry("sentkit.hill.nmt:NMTEncoder", "Encoder of an RNN translation model (bring parallel text)"),
    # averaged word vectors and post-processing of any model (a Method each)
    "glove-average": MethodEntry(
        "sentkit.models.wordvectors:GLOVE_AVERAGE",
        "Mean of GloVe-50d word vectors (nothing trained; also a model name: --model glove-average)",
    ),
    "whiten": MethodEntry(
        "sentkit.training.whiten:WHITEN",
        "Whitening of any model's vectors fitted on the corpus (BERT-whitening; saved as a Dense "
        "module for transformers)",
    ),
    "sif": MethodEntry(
        "sentkit.training.sif:SIF_METHOD",
        "SIF (Arora et al. 2017) of any averaged-word-vector model: word weights a/(a+p(w)) counted "
        "on the corpus, first principal component removed",
    ),
}


def register_method(name: str, target: str | object, description: str = "") -> MethodEntry:
    """Add a method from code outside sentkit (a plug-in, a test): the same line `METHODS` holds.
    `target` is ``"module:attr"`` or the object itself (a Recipe or estimator class, or a Method)."""
    if name in METHODS:
        raise ValueError(f"method {name!r} is already registered (by {_where(METHODS[name])}); choose another name")
    entry = MethodEntry(target, description)
    METHODS[name] = entry
    return entry


def _add_plugin(name: str, obj: Any) -> None:
    """The entry point `name` of group ``sentkit.methods``, loaded: a Method, a Recipe or an estimator
    class, added to `METHODS` like a line of its own (its description: the Method's, else the first
    line of the class's docstring)."""
    if not (isinstance(obj, Method) or callable(getattr(obj, "as_method", None))):
        raise TypeError(f"{obj!r} is neither a Method nor a class with as_method (a Recipe or an estimator)")
    description = obj.description if isinstance(obj, Method) else getattr(obj, "description", None)
    if not isinstance(description, str) or not description:
        description = ((getattr(obj, "__doc__", None) or "").strip().splitlines() or [""])[0]
    register_method(name, obj, description)


# the plug-in methods of installed distributions (entry points of group sentkit.methods)
PLUGINS = Plugins("sentkit.methods", "method", _add_plugin)


def method_names() -> list[str]:
    """Every method's name: the table's (imports nothing) and the plug-ins' (imports those)."""
    PLUGINS.load_all()
    return sorted(METHODS)


def unknown_method(name: str) -> UnknownNameError:
    names = method_names()
    return UnknownNameError(f"unknown method {name!r}.{suggest(name, names)} Known methods: {', '.join(names)}.")


def method_target(name: str) -> Any:
    """The object method `name`'s entry names (imports its module only): a Recipe or estimator
    class, or a Method."""
    if name not in METHODS:
        PLUGINS.load_all()  # a plug-in's name (an installed distribution's entry point)
    if name not in METHODS:
        raise unknown_method(name)
    target = METHODS[name].target
    if not isinstance(target, str):
        return target
    module, sep, attr = target.partition(":")
    if not sep:
        raise ValueError(f"method {name!r}: its entry {target!r} is not 'module:attr'")
    obj = getattr(importlib.import_module(module), attr, None)
    if obj is None:
        raise ValueError(
            f"method {name!r}: module {module} has no {attr!r} (the entry in sentkit.core.methods.METHODS names it)"
        )
    return obj


def get_method(name: str) -> Method:
    """Method `name`, ready to train or load (imports that method's module, and no other)."""
    obj = method_target(name)
    entry = METHODS[name]
    if isinstance(obj, Method):
        method = obj
    elif callable(getattr(obj, "as_method", None)):  # a Recipe or an estimator class
        method = obj.as_method(name)
    else:
        raise ValueError(
            f"method {name!r}: {_where(entry)} is neither a Method nor a class with as_method "
            "(a Recipe or an estimator)"
        )
    if method.name != name:
        raise ValueError(
            f"method {name!r}: {_where(entry)} calls itself {method.name!r}; the folders it saves "
            "would name another method"
        )
    return dataclasses.replace(method, description=entry.description or method.description)


def _where(entry: MethodEntry) -> str:
    t = entry.target
    return (
        t if isinstance(t, str) else f"{getattr(t, '__module__', '?')}:{getattr(t, '__qualname__', type(t).__name__)}"
    )


def write_marker(out: Path, method: str, **extra: Any) -> None:
    from sentkit.core.io import atomic_write_text

    data = {"method": method, **extra}
    atomic_write_text(out / MARKER_FILE, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_marker(path: Path) -> dict[str, Any] | None:
    f = path / MARKER_FILE
    if not f.is_file():
        return None
    return json.loads(f.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def final_phase(folder: Path, marker: dict[str, Any] | None) -> Path | None:
    """The sub-folder of a multi-phase recipe's run (llm2vec, raw-text) that its `marker` names as the model (its
    ``final``: a plain name inside `folder`), or None for any other folder."""
    final = (marker or {}).get("final")
    return folder / final if isinstance(final, str) and final and Path(final).name == final else None
