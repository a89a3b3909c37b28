"""Fixtures for `sentkit explore`: a readable corpus, a TF-IDF model, results files and a
running explorer (tiny BERT + TF-IDF side by side)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="sentkit explore needs the explore extra: pip install 'sentkit[explore]'")

from sentkit.explore import Explorer

DOCS = {
    "sea.txt": [
        "The ship sailed out of the harbour at dawn.",
        "The captain watched the grey waves from the deck.",
        "A storm was coming in from the west.",
        "The sailors tied the sails down before the rain.",
        "The old boat rocked in the dark water all night.",
        "By morning the sea was calm again.",
        "Gulls followed the ship back towards the coast.",
        "The crew dropped the anchor near the island.",
    ],
    "farm.txt": [
        "The farmer walked to the barn before sunrise.",
        "His cows were waiting by the wooden gate.",
        "The wheat in the field was tall and golden.",
        "A horse pulled the plough along the hill.",
        "The children carried hay to the stable.",
        "In the evening the farm was quiet again.",
        "The pigs slept in the mud behind the barn.",
        "Rain would be good for the young corn.",
    ],
    "city.txt": [
        "The taxi stopped in the busy street.",
        "Crowds of people hurried to the office towers.",
        "A bus full of tourists passed the market.",
        "The subway trains were late again this morning.",
        "The shops opened their doors at nine.",
        "Traffic lights blinked over the empty square at night.",
        "A street musician played near the station.",
        "The city never seemed to sleep at all.",
    ],
    "war.txt": [
        "The soldiers marched towards the old fort.",
        "The general studied the map by candle light.",
        "Cannons fired across the river at dawn.",
        "The enemy retreated behind the hills.",
        "A young rifleman wrote a letter to his mother.",
        "The army camped in the frozen valley.",
        "Swords and shields lay on the battlefield.",
        "Peace was signed in the spring.",
    ],
}
SENTENCE_OF_SEA = DOCS["sea.txt"][0]


def _results(name: str, mr: float, cr: float, sts: float) -> dict[str, Any]:
    """A results file shaped as `sentkit evaluate` writes it (three tasks)."""
    from sentkit.evaluation.report import declutr_average

    res = {
        "MR": {"acc": mr, "devacc": mr, "kind": "cv"},
        "CR": {"acc": cr, "devacc": cr, "kind": "cv"},
        "STS12": {
            "all": {
                "spearman": {"mean": sts, "wmean": sts},
                "pearson": {"mean": sts, "wmean": sts},
                "concatenated": {"spearman": sts},
            },
            "kind": "sts",
        },
    }
    return {
        "model": {"name": name, "fingerprint": name, "dim": 8},
        "config": {"preset": "prototyping"},
        "seed": 0,
        "results": res,
        "errors": {},
        "declutr_average": declutr_average(res),
    }


@pytest.fixture(scope="session")
def explore_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("explore_corpus")
    for name, sents in DOCS.items():
        (d / name).write_text(" ".join(sents) + "\n", encoding="utf-8")
    return d


@pytest.fixture(scope="session")
def tfidf_model(tmp_path_factory: pytest.TempPathFactory, explore_corpus: Path) -> Path:
    from sentkit.core.config import from_dict
    from sentkit.core.methods import get_method

    m = get_method("tfidf")
    out = tmp_path_factory.mktemp("models") / "tfidf"
    return Path(m.train(from_dict(m.config_cls, {"corpus": str(explore_corpus), "out": str(out), "progress": False})))


@pytest.fixture(scope="session")
def eval_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    f = tmp_path_factory.mktemp("eval") / "mini-model.json"
    f.write_text(json.dumps(_results("mini-model", 71.0, 75.0, 0.52)), encoding="utf-8")
    return f


@pytest.fixture(scope="session")
def experiment_toml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An experiment with three cells (one with two seeds) and two claims, already run."""
    root = tmp_path_factory.mktemp("experiment")
    out = root / "out"
    scores = {
        "strong": [(80.0, 82.0, 0.60), (80.4, 82.4, 0.61)],
        "base": [(70.0, 72.0, 0.50)],
        "weak": [(60.0, 61.0, 0.30)],
    }
    for cell, seeds in scores.items():
        for s, (mr, cr, sts) in enumerate(seeds):
            run = _results(cell, mr, cr, sts)
            run["experiment"] = {
                "name": "mini",
                "cell": cell,
                "method": "pretrained",
                "group": "g",
                "seed": s,
                "settings": {},
                "train_seconds": 1.0,
            }
            d = out / cell / f"seed-{s}"
            d.mkdir(parents=True)
            (d / "results.json").write_text(json.dumps(run), encoding="utf-8")
    cells = "".join(f'[[cell]]\nname = "{c}"\nmethod = "pretrained"\n' for c in scores)
    claims = ""
    for cell, note in (("strong", "kept in the file"), ("weak", "")):
        claims += (
            f'[[claim]]\npaper = "Test"\nclaim = "{cell} beats base"\ncells = ["{cell}"]\n'
            f'baseline = ["base"]\nmetric = "avg:downstream"\nnote = "{note}"\n'
        )
    f = root / "mini.toml"
    f.write_text(f'name = "mini"\noutput = "{out}"\n{cells}{claims}', encoding="utf-8")
    return f


@pytest.fixture(scope="session")
def index_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("index_cache")


@pytest.fixture(scope="session")
def models(tiny_model_dir: Path, tfidf_model: Path) -> list[str]:
    """A tiny BERT (random weights) and a TF-IDF model trained on the corpus."""
    return [str(tiny_model_dir), str(tfidf_model)]


@pytest.fixture(scope="session")
def explorer(models: list[str], explore_corpus: Path, experiment_toml: Path, index_cache: Path) -> Iterator[Explorer]:
    """Both models' indexes built (cached under a temporary folder), the experiment opened.
    Shared: tests that change an explorer make their own."""
    ex = Explorer(models, explore_corpus, [experiment_toml], cache_dir=index_cache)
    assert ex.wait(120), ex.status()
    yield ex
    ex.close()


class _Touch:
    """Unpickled, it creates an empty file: the harmless stand-in for code an attacker would run."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (Path(self.path),))


def pickled_model_folder(folder: Path, marker: Path) -> Path:
    """A folder shaped as `sentkit train --method paragraph-vector-dbow` saves it (sentkit.json,
    config.json, state.json, doc2vec.model), whose gensim model is a pickle that creates ``marker``
    when it is unpickled, as gensim's load does."""
    import dataclasses
    import pickle

    from sentkit.hill.configs import ParagraphVectorConfig

    folder.mkdir(parents=True)
    (folder / "sentkit.json").write_text(json.dumps({"method": "paragraph-vector-dbow", "dim": 8}))
    (folder / "config.json").write_text(json.dumps(dataclasses.asdict(ParagraphVectorConfig())))
    (folder / "state.json").write_text(json.dumps({"dim": 8}))
    (folder / "doc2vec.model").write_bytes(pickle.dumps(_Touch(marker), protocol=4))
    return folder
