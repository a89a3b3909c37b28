"""Hill et al. (2016) room: the unsupervised sentence models of "Learning Distributed Representations
of Sentences from Unlabelled Data" as sentkit methods (``sentkit train --method``): FastSent and
FastSent+AE, SDAE / SAE, SkipThought, DictRep (BOW, RNN), CaptionRep, NMT encoders, paragraph
vectors (DBOW, DM), CBOW / SkipGram sums and unigram TF-IDF. Each is an estimator
(``fit(corpus) -> self``, ``encode``, ``save`` / ``load``; base class in ``common.py``).

Importing this package registers every method; models and heavy dependencies (torch,
gensim, numba) are imported only when a method trains or loads.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

from sentkit.hill import configs as _c
from sentkit.methods import Method, register_method

log = logging.getLogger(__name__)

# method name -> (module, class, config class, description)
MODELS: dict[str, tuple[str, str, type, str]] = {
    "fastsent": ("fastsent", "FastSent", _c.FastSentConfig,
                 "FastSent: sum of word vectors predicting adjacent sentences' words"),
    "fastsent-ae": ("fastsent", "FastSentAE", _c.FastSentAEConfig,
                    "FastSent+AE: FastSent that also predicts the sentence's own words"),
    "sdae": ("sdae", "SDAE", _c.SDAEConfig, "Sequential denoising autoencoder (GRU/LSTM)"),
    "sae": ("sdae", "SAE", _c.SAEConfig, "Sequential autoencoder (SDAE without noise)"),
    "skipthought": ("skipthought", "SkipThought", _c.SkipThoughtConfig,
                    "Uni-skip SkipThought with GloVe vocabulary expansion"),
    "dictrep-bow": ("regress", "DictRepBOW", _c.DictRepConfig,
                    "DictRep BOW: WordNet definitions -> GloVe vector of the word"),
    "dictrep-rnn": ("regress", "DictRepRNN", _c.DictRepConfig,
                    "DictRep RNN: WordNet definitions -> GloVe vector of the word"),
    "paragraph-vector-dbow": ("gensim_models", "ParagraphVector", _c.ParagraphVectorConfig,
                              "Paragraph Vector DBOW (gensim Doc2Vec)"),
    "paragraph-vector-dm": ("gensim_models", "ParagraphVectorDM", _c.ParagraphVectorConfig,
                            "Paragraph Vector DM (gensim Doc2Vec)"),
    "cbow": ("gensim_models", "Word2VecSum", _c.Word2VecConfig, "Sum of CBOW word2vec vectors"),
    "skipgram": ("gensim_models", "SkipGramSum", _c.Word2VecConfig,
                 "Sum of skip-gram word2vec vectors"),
    "tfidf": ("tfidf", "TfidfBOW", _c.TfidfConfig, "Unigram TF-IDF bag of words (200k words)"),
    "wordpiece-skipgram": ("gensim_models", "WordpieceSkipGram", _c.WordpieceSkipGramConfig,
                           "Mean of skip-gram vectors of a transformer's wordpieces (phase 0 of the raw-text recipe)"),
    "captionrep": ("regress", "CaptionRep", _c.CaptionRepConfig,
                   "CaptionRep: caption RNN -> image features (bring captions + features)"),
    "nmt": ("nmt", "NMTEncoder", _c.NMTConfig,
            "Encoder of an RNN translation model (bring parallel text)"),
}


def model_class(name: str) -> Any:
    """The estimator class of method ``name`` (imports its module)."""
    from sentkit.methods import get_method

    get_method(name)  # unknown names raise with a suggestion
    module, cls, _, _ = MODELS[name]
    return getattr(importlib.import_module(f"sentkit.hill.{module}"), cls)


def _make_train(name: str) -> Any:
    def train(cfg: Any) -> Path:
        from sentkit.config import ConfigError

        if not cfg.out:
            raise ConfigError(f"{name}: no output directory given (--out DIR)")
        model = model_class(name)(cfg)
        model.fit(cfg.corpus or None) if name in ("dictrep-bow", "dictrep-rnn", "captionrep") else model.fit(cfg.corpus)
        out = model.save(cfg.out)
        log.info("%s model saved to %s", name, out)
        return Path(out)

    train.__name__ = f"train_{name.replace('-', '_')}"
    return train


def _make_load(name: str) -> Any:
    def load(path: Path) -> Any:
        return model_class(name).load(path)

    load.__name__ = f"load_{name.replace('-', '_')}"
    return load


for _name, (_mod, _cls, _cfg, _desc) in MODELS.items():
    register_method(Method(_name, _cfg, _make_train(_name), _make_load(_name), _desc))

__all__ = ["MODELS", "model_class"]
