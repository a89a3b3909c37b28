"""`sentkit data build-probing` end to end on a small generated corpus (spaCy's small English
pipeline): SentEval's format read back by the existing loaders, balanced classes, the paper's rules,
seeded and resumable builds, the parse cache checked against the corpus, clear errors."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("spacy")

from sentkit.cli.main import main
from sentkit.data.probing import parse as P
from sentkit.data.probing.build import BuildSettings, build_probing
from sentkit.evaluation.tasks import PROBING, PROBING_FILES, load_task

NOUNS = [
    ("dog", "dogs"),
    ("cat", "cats"),
    ("farmer", "farmers"),
    ("teacher", "teachers"),
    ("horse", "horses"),
    ("bird", "birds"),
    ("sailor", "sailors"),
    ("baker", "bakers"),
    ("king", "kings"),
    ("letter", "letters"),
    ("apple", "apples"),
    ("window", "windows"),
    ("garden", "gardens"),
    ("candle", "candles"),
    ("painter", "painters"),
    ("doctor", "doctors"),
]
VERBS = [
    ("watched", "watches", "watch"),
    ("followed", "follows", "follow"),
    ("painted", "paints", "paint"),
    ("visited", "visits", "visit"),
    ("helped", "helps", "help"),
    ("carried", "carries", "carry"),
    ("cleaned", "cleans", "clean"),
    ("called", "calls", "call"),
]
ADJ = ["old", "small", "quiet", "bright", "tired", "happy", "young", "careful"]
PLACES = ["river", "market", "church", "bridge", "forest", "harbour"]

SETTINGS = dict(
    train_size=60,
    dev_size=12,
    test_size=12,
    wc_words=4,
    wc_rank_start=10,
    number_freq_min=1,
    number_freq_max=10**6,
    somo_freq_min=1,
    somo_freq_max=10**6,
    somo_log_tolerance=5.0,
    top_classes=3,
    depth_classes=3,
)


def _np(rng: np.random.Generator, plural: bool) -> str:
    noun = NOUNS[int(rng.integers(len(NOUNS)))][int(plural)]
    adj = f"{ADJ[int(rng.integers(len(ADJ)))]} " if rng.random() < 0.5 else ""
    return f"the {adj}{noun}"


def _clause(rng: np.random.Generator) -> str:
    plural = rng.random() < 0.5
    past, pres_s, pres_p = VERBS[int(rng.integers(len(VERBS)))]
    verb = past if rng.random() < 0.5 else (pres_p if plural else pres_s)
    pps = " ".join(f"near the {PLACES[int(rng.integers(len(PLACES)))]}" for _ in range(int(rng.integers(0, 5))))
    return " ".join(x for x in (_np(rng, plural), verb, _np(rng, rng.random() < 0.5), pps) if x)


def sentence(rng: np.random.Generator) -> str:
    r = rng.random()
    if r < 0.25:
        s = f"{_clause(rng)} {'and' if rng.random() < 0.5 else 'but'} {_clause(rng)}"
    elif r < 0.4:
        s = f"then {_clause(rng)}"
    else:
        s = _clause(rng)
    return s[0].upper() + s[1:] + "."


def write_corpus(folder: Path, n_docs: int = 3, per_doc: int = 700, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for d in range(n_docs):
        paras = [" ".join(sentence(rng) for _ in range(5)) for _ in range(per_doc // 5)]
        (folder / f"doc{d}.txt").write_text("\n\n".join(paras) + "\n")
    return folder


@pytest.fixture(scope="module")
def nlp():
    return P.load_spacy()


@pytest.fixture(scope="module")
def built(tmp_path_factory, nlp):
    root = tmp_path_factory.mktemp("probing")
    corpus = write_corpus(root / "corpus")
    res = build_probing(corpus, root / "out", BuildSettings(**SETTINGS), progress=False, nlp=nlp, shard_sentences=150)
    return root, res


def test_all_ten_tasks_are_built_in_senteval_format_and_load_unchanged(built):
    root, res = built
    assert not res.failed, {k: str(v) for k, v in res.failed.items()}
    assert sorted(res.built) == sorted(PROBING)
    for name in PROBING:
        lines = (root / "out" / "PROBING" / PROBING_FILES[name]).read_text().splitlines()
        splits = [ln.split("\t")[0] for ln in lines]
        assert splits == sorted(splits, key=["tr", "va", "te"].index)  # grouped by partition
        assert all(len(ln.split("\t")) == 3 for ln in lines)
        data = load_task(name, root / "out")  # the existing loader, unchanged
        labels = data.extra["labels"]
        for split in ("train", "dev", "test"):
            counts = Counter(data.splits[split].y.tolist())
            assert len(set(counts.values())) == 1 and len(counts) == len(labels), (name, split, counts)
        n = [len(data.splits[s]) for s in ("train", "dev", "test")]
        assert n == [60 // len(labels) * len(labels), 12 // len(labels) * len(labels), 12 // len(labels) * len(labels)]


def test_sentences_follow_the_rules(built):
    root, _ = built
    folder = root / "out" / "PROBING"

    def rows(name: str) -> list[list[str]]:
        return [ln.split("\t") for ln in (folder / PROBING_FILES[name]).read_text().splitlines()]

    bins = {"0": (5, 8), "1": (9, 12), "2": (13, 16), "3": (17, 20), "4": (21, 25), "5": (26, 28)}
    for _, label, text in rows("SentLen"):
        lo, hi = bins[label]
        assert lo <= len(text.split()) <= hi
    for name in PROBING:
        assert all(5 <= len(r[2].split()) <= 28 for r in rows(name))
        texts = [r[2] for r in rows(name)]
        assert len(set(texts)) == len(texts)  # no sentence twice (SOMO / CoordInv: never in both classes)
    targets = {r[1] for r in rows("WC")}
    for _, label, text in rows("WC"):
        words = text.lower().split()
        assert words.count(label) == 1 and not (targets - {label}) & set(words)
    for _, label, text in rows("BShift"):
        words = text.split()
        assert label in ("O", "I") and words[0][0].isupper() and '"' not in words
    for _, label, text in rows("CoordInv"):
        assert label in ("O", "I") and sum(w in ("and", "but") for w in text.split()) == 1
    # TreeDepth: every depth class has the same length distribution (length says nothing of depth)
    by_depth: dict[str, Counter[int]] = {}
    for _, label, text in rows("TreeDepth"):
        by_depth.setdefault(label, Counter())[len(text.split())] += 1
    assert len({tuple(sorted(c.items())) for c in by_depth.values()}) == 1


def test_manifest_records_the_build(built):
    root, _ = built
    m = json.loads((root / "out" / "PROBING" / "manifest.json").read_text())
    assert len(m["corpus_fingerprint"]) == 64
    assert m["parse_key"]["model"] == "core_web_sm" or m["parse_key"]["model"]
    assert m["parse_key"]["spacy"].startswith("3.8")
    assert m["settings"]["train_size"] == 60
    assert set(m["tasks"]) == set(PROBING)
    t = m["tasks"]["Tense"]
    assert set(t["class_counts"]["tr"]) == {"PAST", "PRES"} and t["rules"].startswith("Tense of the main clause")
    assert m["parse"]["sentences_parsed"] > 1000


def test_rebuild_is_seeded_and_resumes_the_parse(built, nlp, tmp_path):
    root, _ = built
    out = root / "out"
    before = {n: (out / "PROBING" / PROBING_FILES[n]).read_bytes() for n in PROBING}
    # a kill during the parse: the last shard never reached the index
    cache = out / "parsed"
    index = json.loads((cache / "index.json").read_text())
    assert len(index["shards"]) >= 3
    last = index["shards"].pop()
    (cache / "index.json").write_text(json.dumps(index))
    (out / "PROBING" / PROBING_FILES["WC"]).unlink()
    res = build_probing(root / "corpus", out, BuildSettings(**SETTINGS), progress=False, nlp=nlp, shard_sentences=150)
    m = res.manifest
    assert 0 < m["parse"]["parsed_now"] <= last["in_window"] + 5  # only the lost shard was parsed again
    assert res.built == ["WC"] and sorted(res.reused) == sorted(set(PROBING) - {"WC"})
    after = {n: (out / "PROBING" / PROBING_FILES[n]).read_bytes() for n in PROBING}
    assert after == before  # the same seed gives the same files
    # another seed gives other files
    other = build_probing(
        root / "corpus",
        tmp_path / "o2",
        BuildSettings(**{**SETTINGS, "seed": 7}),
        tasks=["BShift"],
        cache_dir=cache,
        progress=False,
        nlp=nlp,
    )
    assert other.built == ["BShift"]
    assert (tmp_path / "o2" / "PROBING" / "bigram_shift.txt").read_bytes() != before["BShift"]


def test_a_changed_corpus_is_not_mixed_with_the_cache(built, nlp, tmp_path):
    root, _ = built
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for f in (root / "corpus").iterdir():
        (corpus / f.name).write_text(f.read_text())
    (corpus / "doc0.txt").write_text("The dog watched the cat near the river.\n")
    with pytest.raises(P.ParseCacheError, match="changed since they were parsed"):
        P.parse_corpus(corpus, root / "out" / "parsed", progress=False, nlp=nlp, shard_sentences=150)


def test_too_small_a_corpus_names_the_count_and_the_fix(built, tmp_path, capsys):
    root, _ = built
    rc = main(
        [
            "data",
            "build-probing",
            "--corpus",
            str(root / "corpus"),
            "--out",
            str(tmp_path / "big"),
            "--cache-dir",
            str(root / "out" / "parsed"),
            "--tasks",
            "CoordInv,SentLen",
            "--train-size",
            "100000",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 1
    err = captured.err.strip().splitlines()[-1]  # after the progress bars: one error line
    assert err.startswith("sentkit data build-probing: error: 2 of 2 tasks have too few")
    assert "task CoordInv:" in err and "the corpus gives about" in err and "rerun with --train-size" in err
    rc = main(
        [
            "data",
            "build-probing",
            "--corpus",
            str(root / "corpus"),
            "--out",
            str(tmp_path / "big"),
            "--cache-dir",
            str(root / "out" / "parsed"),
            "--tasks",
            "SentLen",
            "--train-size",
            "100000",
            "--fit",
        ]
    )
    assert rc == 0
    m = json.loads((tmp_path / "big" / "PROBING" / "manifest.json").read_text())
    assert 0 < m["tasks"]["SentLen"]["sizes"]["tr"] < 100000
    # the line printed gives the rows the file holds (multiples of the 6 classes), not the fitted sizes
    written = Counter(ln.split("\t")[0] for ln in (tmp_path / "big" / "PROBING" / "sentence_length.txt").open())
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("SentLen"))
    printed = [int(x.replace(",", "")) for x in line.split()[1:6:2]]
    assert printed == [written["tr"], written["va"], written["te"]] and all(n % 6 == 0 for n in printed)
    assert "fitted; asked 100,000 / 10,000 / 10,000" in line


def test_a_task_that_fails_under_fit_is_not_told_to_use_fit(built, tmp_path, capsys):
    root, _ = built
    rc = main(
        [
            "data",
            "build-probing",
            "--corpus",
            str(root / "corpus"),
            "--out",
            str(tmp_path / "o"),
            "--cache-dir",
            str(root / "out" / "parsed"),
            "--tasks",
            "TopConst",
            "--set",
            "top_classes=500",
            "--train-size",
            "1000",
            "--dev-size",
            "500",
            "--test-size",
            "500",
            "--fit",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 1 and "task TopConst:" in err
    assert "--fit" not in err and "fail at any size the corpus gives: use a larger corpus" in err


def test_evaluate_runs_the_built_tasks(built, tmp_path, capsys):
    root, _ = built
    enc = tmp_path / "enc.py"
    enc.write_text(
        "import zlib\nimport numpy as np\n\nclass Enc:\n    fingerprint = 'crc'\n"
        "    def encode(self, texts):\n        return np.stack([np.random.default_rng(zlib.crc32(t.encode()))"
        ".normal(size=8) for t in texts]).astype(np.float32)\n"
    )
    rc = main(
        [
            "evaluate",
            "--model",
            f"{enc}:Enc",
            "--tasks",
            "probing",
            "--data-dir",
            str(root / "out"),
            "--no-cache",
            "--output",
            str(tmp_path / "r.json"),
        ]
    )
    assert rc == 0
    res = json.loads((tmp_path / "r.json").read_text())
    assert sorted(res["results"]) == sorted(PROBING)
    assert res["declutr_average"]["n_probing"] == 10


def test_parse_cache_files_are_complete_gzip(built):
    root, _ = built
    for shard in P.read_index(root / "out" / "parsed")["shards"]:
        with gzip.open(root / "out" / "parsed" / shard["file"], "rt") as f:
            assert sum(1 for _ in f) == shard["sentences"]


def test_a_task_that_cannot_be_rebuilt_does_not_leave_its_old_file(built, tmp_path, capsys):
    root, _ = built
    args = [
        "data",
        "build-probing",
        "--corpus",
        str(root / "corpus"),
        "--out",
        str(tmp_path / "o"),
        "--cache-dir",
        str(root / "out" / "parsed"),
        "--tasks",
        "SentLen",
    ]
    assert main([*args, "--train-size", "60", "--dev-size", "12", "--test-size", "12"]) == 0
    assert (tmp_path / "o" / "PROBING" / "sentence_length.txt").is_file()
    assert main([*args, "--train-size", "100000"]) == 1
    assert not (tmp_path / "o" / "PROBING" / "sentence_length.txt").exists()  # not run as if it were current
    assert "SentLen" not in json.loads((tmp_path / "o" / "PROBING" / "manifest.json").read_text())["tasks"]
    capsys.readouterr()


def test_a_missing_spacy_model_is_one_line_with_the_install_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(P, "SPACY_MODEL", "en_no_such_model_xyz")
    monkeypatch.setattr(P.load_spacy, "__defaults__", ("en_no_such_model_xyz",))
    write_corpus(tmp_path / "c", n_docs=1, per_doc=5)
    rc = main(["data", "build-probing", "--corpus", str(tmp_path / "c"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2 and "en_no_such_model_xyz" in err and "pip install 'sentkit[probing]'" in err


def test_sizes_below_the_number_of_classes_are_refused_before_parsing(tmp_path, capsys):
    rc = main(
        [
            "data",
            "build-probing",
            "--corpus",
            str(tmp_path / "nowhere"),
            "--out",
            str(tmp_path / "o"),
            "--tasks",
            "WC",
            "--train-size",
            "5000",
            "--dev-size",
            "500",
            "--test-size",
            "500",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "task WC has 1000 classes" in err and "--set wc_words" in err
