"""sentkit.core.identity, and every id sentkit writes to disk pinned to its bytes.

Each site's id (cache keys, folder names, MTEB revisions, shard-join ids, fingerprints) is computed
here a second time with hashlib by hand, as an oracle: the refactor onto `sentkit.core.identity` must
not change one byte of what caches and committed results hold. The last test keeps hashlib out of
the package outside `identity.py` and a short allowlist."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import re
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "sentkit"
MTIME_NS = 1_700_000_000_123_456_789  # a fixed mtime, so that stat-based ids are fixed too


def sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def touch(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    os.utime(path, ns=(MTIME_NS, MTIME_NS))
    return path


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    """A model folder: two model files, one in a sub-folder, and what is not the model (a neighbour
    index cache, a checkpoint, a log, a hidden lock)."""
    d = tmp_path / "model"
    touch(d / "config.json", '{"a": 1}')
    touch(d / "sub" / "weights.bin", b"\x00\x01\x02weights")
    touch(d / "neighbours" / "abc" / "emb.npy", b"cached")
    touch(d / "checkpoint" / "state.pt", b"ckpt")
    touch(d / "train.log", "log")
    touch(d / ".lock", "")
    return d


def oracle_signature(d: Path) -> str:
    """Names, sizes and whole-second mtimes of every file but the neighbour cache, 16 hex digits."""
    items = [
        f"{f.relative_to(d)}:{f.stat().st_size}:{int(f.stat().st_mtime)}"
        for f in sorted(d.rglob("*"))
        if f.is_file() and f.relative_to(d).parts[0] != "neighbours"
    ]
    return sha("\n".join(items))[:16]


def oracle_content(d: Path) -> str:
    """The model's files (config.json, sub/weights.bin): name, size and bytes, full sha256."""
    h = hashlib.sha256()
    for rel in ("config.json", "sub/weights.bin"):
        data = (d / rel).read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode() + data)
    return h.hexdigest()


# ----------------------------------------------------------------------------- the primitives
def test_digest_and_config_id() -> None:
    from sentkit.core.identity import config_id, digest

    assert digest("abc") == sha("abc") == digest(b"abc")
    assert digest("abc", 12) == sha("abc")[:12]
    assert digest("abc", 6, algorithm="sha1") == hashlib.sha1(b"abc").hexdigest()[:6]
    obj = {"b": [1, 2], "a": Path("/x"), "c": None}
    assert config_id(obj) == sha(json.dumps(obj, sort_keys=True, default=str))[:16]
    assert config_id(obj, 20) == sha(json.dumps(obj, sort_keys=True, default=str))[:20]
    assert config_id(obj, None) == sha(json.dumps(obj, sort_keys=True, default=str))
    plain = {"z": 1, "a": {"y": [1.5, "é"]}}  # JSON's own values: the same as without default=str
    assert config_id(plain) == sha(json.dumps(plain, sort_keys=True))[:16]


def test_file_digest_and_hasher(tmp_path: Path) -> None:
    from sentkit.core.identity import file_digest, hasher, update_file

    f = touch(tmp_path / "f.bin", b"x" * (3 << 20))  # three blocks of 1 MiB
    assert file_digest(f) == sha(f.read_bytes())
    h = hasher()
    h.update(b"head")
    assert update_file(h, f) is h and h.hexdigest() == sha(b"head" + f.read_bytes())


def test_files_id(tmp_path: Path) -> None:
    from sentkit.core.identity import files_id

    a, b = touch(tmp_path / "a.txt", "aa"), touch(tmp_path / "d" / "b.txt", "b")
    lines = [f"{p}:{p.stat().st_size}:{int(p.stat().st_mtime)}" for p in (a, b)]
    assert files_id([a, b]) == sha("\n".join(lines))
    assert files_id([a, b], length=20) == sha("\n".join(lines))[:20]
    rel = [f"{p.relative_to(tmp_path)}:{p.stat().st_size}:{int(p.stat().st_mtime)}" for p in (a, b)]
    assert files_id([a, b], root=tmp_path, length=16) == sha("\n".join(rel))[:16]


def test_content_id_and_signature_of_a_folder(folder: Path, tmp_path: Path) -> None:
    from sentkit.core.identity import content_id, folder_signature, is_model_file

    assert content_id(folder) == oracle_content(folder)
    assert folder_signature(folder) == oracle_signature(folder)
    assert not is_model_file(Path("neighbours/x")) and not is_model_file(Path("a/.tmp")) and is_model_file(Path("a"))
    import shutil

    copy = shutil.copytree(folder, tmp_path / "elsewhere")
    assert content_id(copy) == content_id(folder)  # where it is and how it is named do not count


# ----------------------------------------------------------------------------- the sites, pinned
def test_loading_content_id(folder: Path, tmp_path: Path) -> None:
    from sentkit import __version__
    from sentkit.models.loading import content_id

    assert content_id(str(folder)) == f"folder sha256:{oracle_content(folder)}"
    code = touch(tmp_path / "m.py", "def embed(texts):\n    return texts\n")
    assert content_id(f"{code}:embed") == f"code sha256:{sha(code.read_bytes())}:embed"
    assert content_id("glove") == f"word vectors glove-average (sentkit {__version__})"


def _transformer_like(path: Path) -> Any:
    return SimpleNamespace(
        model=SimpleNamespace(config=SimpleNamespace(_name_or_path=str(path))),
        pooling="mean",
        max_length=128,
        normalize=False,
    )


def test_encoder_fingerprints(folder: Path) -> None:
    from sentkit.core.identity import fingerprint

    own = SimpleNamespace(fingerprint=lambda: "own-fp")
    assert fingerprint(own, "any") == "own-fp" and fingerprint(own) == "own-fp"
    assert fingerprint(SimpleNamespace(fingerprint=7)) == "7"  # the evaluation runner's: any value, as text
    assert fingerprint(SimpleNamespace(), "not-a-folder") is None and fingerprint(SimpleNamespace()) is None
    enc = _transformer_like(folder)
    settings = {"pooling": "mean", "max_length": 128, "normalize": False, "class": "SimpleNamespace"}
    expected = sha(f"m|{oracle_signature(folder)}|{json.dumps(settings, sort_keys=True, default=str)}")[:20]
    assert fingerprint(enc, "m") == expected
    enc.attention = "bidirectional"
    settings["attention"] = "bidirectional"
    expected = sha(f"m|{oracle_signature(folder)}|{json.dumps(settings, sort_keys=True, default=str)}")[:20]
    assert fingerprint(enc, "m") == expected
    hub = _transformer_like(Path("org/name"))  # not a folder: its name stands for it
    settings = {"pooling": "mean", "max_length": 128, "normalize": False, "class": "SimpleNamespace"}
    assert fingerprint(hub, "m") == sha(f"m|org/name|{json.dumps(settings, sort_keys=True, default=str)}")[:20]
    bag = SimpleNamespace(pooling="max")  # another model folder, pooled another way
    assert fingerprint(bag, str(folder)) == sha(f"SimpleNamespace|{oracle_signature(folder)}|pooling=max")[:20]
    assert fingerprint(SimpleNamespace(), str(folder)) == sha(f"SimpleNamespace|{oracle_signature(folder)}")[:20]


def test_neighbour_index_keys(folder: Path, tmp_path: Path) -> None:
    from sentkit.core.identity import corpus_files_id, model_name_id
    from sentkit.retrieval.neighbours import get_index

    corpus = tmp_path / "corpus"
    files = [
        touch(corpus / "a.txt", "One two three four.\n\nFive six seven eight."),
        touch(corpus / "b.txt", "x y z w"),
    ]
    lines = "".join(f"{f.resolve()}|{f.stat().st_size}|{f.stat().st_mtime_ns}\n" for f in files)
    cfp = {"path": str(corpus.resolve()), "files": 2, "digest": sha(lines)[:16]}
    assert corpus_files_id(corpus) == cfp
    mfp = sha(f"{folder.resolve()}|{oracle_signature(folder)}")[:16]
    assert model_name_id(folder) == mfp
    assert model_name_id("some-name") == sha("some-name")[:16]

    class Enc:
        def encode(self, texts: list[str], **kw: Any) -> np.ndarray:
            return np.ones((len(texts), 3), dtype=np.float32)

    _, built, d = get_index(folder, corpus, encoder=Enc(), cache_dir=tmp_path / "cache", progress=False)
    key = {"model": mfp, "corpus": cfp, "max_sentences": None}
    assert built and d.name == sha(json.dumps(key, sort_keys=True))[:20]


def test_evaluation_cache_folder_name() -> None:
    from sentkit.evaluation.cache import folder_name  # sentkit.core.identity.cache_folder_name

    assert folder_name("plain-name_1.0") == "plain-name_1.0"
    assert folder_name("exp/cell/seed-0/fp") == f"exp_cell_seed-0_fp-{sha('exp/cell/seed-0/fp')[:16]}"
    assert folder_name("..") == f"-{sha('..')[:16]}"


def test_mteb_revisions(folder: Path, tmp_path: Path) -> None:
    from sentkit import __version__
    from sentkit.core.identity import mteb_revision
    from sentkit.evaluation import mteb_adapter as M

    assert mteb_revision(None) == "no_revision_available"
    assert mteb_revision("abc-1.2") == "abc-1.2"
    assert mteb_revision("a/b c") == sha("a/b c")[:20]
    assert mteb_revision("x" * 65) == sha("x" * 65)[:20]
    assert M.model_identity(str(folder), variant="pooling=max")[1] == sha(f"{oracle_content(folder)}|pooling=max")[:40]
    assert M.model_identity(str(folder))[1] == oracle_content(folder)[:40]
    wv = f"word vectors glove-average (sentkit {__version__})"
    assert M.model_identity("glove") == ("sentkit/glove", sha(f"{wv}|")[:40])
    a, b = touch(tmp_path / "t" / "a.tsv", "1\t2"), touch(tmp_path / "t" / "s" / "b.tsv", "3")
    one = touch(tmp_path / "one.jsonl", "{}")
    items = [f"{f}:{f.stat().st_size}:{int(f.stat().st_mtime)}" for f in (a, b, one)]
    assert M._files_revision([tmp_path / "t", one]) == sha("\n".join(items))[:20]


def test_experiment_cache_key() -> None:
    from sentkit.experiments.runner import cache_key

    settings = {"lr": 1e-4, "path": Path("/x"), "steps": 10}
    run = SimpleNamespace(cell=SimpleNamespace(name="no-such-cell-folder", settings=settings), seed=3)
    key = cache_key(SimpleNamespace(name="grid"), run, SimpleNamespace())  # type: ignore[arg-type]
    fp = sha(json.dumps(settings, sort_keys=True, default=str))[:16]
    assert key == f"grid/no-such-cell-folder/seed-3/{fp}"
    own = SimpleNamespace(fingerprint=lambda: "own")
    assert cache_key(SimpleNamespace(name="g"), run, own) == "g/no-such-cell-folder/seed-3/own"  # type: ignore[arg-type]


def test_shard_ids(tmp_path: Path) -> None:
    from sentkit.core.identity import prepare_input_id
    from sentkit.core.io import temp_name
    from sentkit.sharding.embed import record_path

    corpus = tmp_path / "c"
    files = [touch(corpus / "a.txt", "aaa"), touch(corpus / "b" / "c.txt", "cc")]
    lines = b"".join(
        json.dumps([str(f.relative_to(corpus)), f.stat().st_size, f.stat().st_mtime_ns]).encode() + b"\n" for f in files
    )
    assert prepare_input_id(corpus, files) == sha(lines)
    one = touch(tmp_path / "one.jsonl", "{}")
    assert prepare_input_id(one, []) == sha(json.dumps(["one.jsonl", 2, MTIME_NS]).encode() + b"\n")
    gone = tmp_path / "gone.jsonl"
    assert prepare_input_id(gone, []) == sha(json.dumps([str(gone), None, None]).encode() + b"\n")

    short = tmp_path / "v.npy"
    assert record_path(short) == tmp_path / "v.npy.manifest.json"
    long = tmp_path / ("é" * 120 + ".npy")
    raw = long.name.encode("utf-8", "surrogateescape")
    assert record_path(long).name == f"{temp_name(long.name)}-{sha(raw)[:12]}.manifest.json"


def test_prepare_run_id_is_the_config_id() -> None:
    """`prepare_shard`'s run id, written into a sharded store's manifest, is this expression."""
    from sentkit.core.identity import config_id

    run = {"format": "f", "corpus": "c", "files": 2, "window": None, "path": Path("/p")}
    assert config_id(run) == sha(json.dumps(run, sort_keys=True, default=str))[:16]
    text = (SRC / "sharding" / "prepare.py").read_text(encoding="utf-8")
    assert "run_id = config_id(run)" in text or "hashlib.sha256(json.dumps(run, sort_keys=True, default=str)" in text


def test_probing_ids() -> None:
    from sentkit.core.identity import hasher, parsed_corpus_id
    from sentkit.data.probing.build import BuildSettings, _settings_key
    from sentkit.data.probing.parse import _doc_hash

    s = BuildSettings()
    assert _settings_key(s) == sha(json.dumps(dataclasses.asdict(s), sort_keys=True))[:16]
    shards = [{"docs_sha256": sha("a")}, {"docs_sha256": sha("b")}]
    assert parsed_corpus_id(shards) == sha(sha("a") + sha("b"))
    h = hasher()
    _doc_hash(h, "one")
    _doc_hash(h, "two \udcff")
    assert h.hexdigest() == sha(b"one" + b"\0" + "two \udcff".encode("utf-8", "surrogatepass") + b"\0")


def test_tokenizer_fingerprint() -> None:
    from sentkit.core.identity import tokenizer_fingerprint

    vocab = {"b": 1, "a": 0, "[CLS]": 2}
    tok = SimpleNamespace(get_vocab=lambda: vocab)
    assert tokenizer_fingerprint(tok) == hashlib.sha1(json.dumps(sorted(vocab.items())).encode()).hexdigest()[:16]


def test_model_fingerprints() -> None:
    from sentkit.core.identity import derived_fingerprint, prompted_fingerprint
    from sentkit.models.wordvectors import GloveAverage

    g = GloveAverage.__new__(GloveAverage)
    g.lowercase, g.dim_ = True, 3
    g.vocab_ = {f"w{i}": i for i in range(2000)}
    g.vectors_ = np.arange(6000, dtype=np.float32).reshape(2000, 3)
    head = b"glove-average|lower=True|dim=3|n=2000"
    assert g.fingerprint() == sha(head + np.ascontiguousarray(g.vectors_[::2]).tobytes())[:16]

    base = SimpleNamespace(fingerprint=lambda: "base")
    a, b = np.arange(4, dtype=np.float32), np.ones((2, 2), dtype=np.float64)
    assert derived_fingerprint("sif", base, a, b) == sha(b"sif|base" + a.tobytes() + b.tobytes())[:20]
    assert derived_fingerprint("sif", SimpleNamespace(), a) is None
    assert prompted_fingerprint("fp", None) == "fp" and prompted_fingerprint(None, "q: ") is None
    key = "fp|prompt=query: |include_prompt=False"
    assert prompted_fingerprint("fp", "query: ", include_prompt=False) == f"fp-p{sha(key)[:12]}"


def test_hill_directory_digest(folder: Path) -> None:
    from sentkit.core.identity import directory_digest

    h = hashlib.sha256()
    for f in sorted(p for p in folder.iterdir() if p.is_file()):  # .lock, config.json, train.log
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    assert directory_digest(folder) == h.hexdigest()[:16]


def test_io_ids(tmp_path: Path) -> None:
    from sentkit.core.identity import host_tag
    from sentkit.core.io import sha256_file

    assert host_tag() == hashlib.sha1(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:6]
    f = touch(tmp_path / "f", b"bytes" * 1000)
    assert sha256_file(f) == sha(f.read_bytes())


# ----------------------------------------------------------------------------- one place for hashlib
# Files of src/sentkit that may use hashlib, each with the one use allowed and why: neither is an
# identity of something that loads or is cached under a name (sentkit.core.identity's docstring).
HASHLIB_ALLOWED = {
    "core/identity.py": (r".*", "the identity module itself"),
    "evaluation/classifier.py": (
        r"hashlib\.sha1\(tr\.tobytes\(\)\)\.digest\(\), hashlib\.sha1\(dv\.tobytes\(\)\)\.digest\(\)",
        "in-memory memo keys of train/dev index arrays, never written",
    ),
    "evaluation/cache.py": (
        r"hashlib\.blake2b\(text\.encode\(\"utf-8\"\), digest_size=KEY_BYTES\)",
        "the cache shards' row format: 16-byte keys of sentence texts, not an id of a model or a file",
    ),
}


def test_hashlib_only_in_identity() -> None:
    bad, used = [], set()
    for f in sorted(SRC.rglob("*.py")):
        rel = f.relative_to(SRC).as_posix()
        pattern, _why = HASHLIB_ALLOWED.get(rel, (None, ""))
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if "hashlib" not in line:
                continue
            if pattern is not None and (line.strip() == "import hashlib" or re.search(pattern, line)):
                used.add(rel)
                continue
            bad.append(f"{rel}:{n}: {line.strip()}")
    assert not bad, "hashlib outside sentkit/core/identity.py (use sentkit.core.identity):\n" + "\n".join(bad)
    assert used == set(HASHLIB_ALLOWED), f"allowed but unused (drop them): {sorted(set(HASHLIB_ALLOWED) - used)}"


# ----------------------------------------------------------------------------- ids built in one module
# What hashes raw bytes into an id. Outside identity.py a module calls the id functions it names (config_id,
# fingerprint, corpus_files_id, ...); it builds no id of its own from `digest`. `hasher` (bytes hashed as they
# stream past, read once) is allowed where the stream is: each with why.
RAW_HASHING = {
    "digest": {},
    "hasher": {
        "cli/embed_commands.py": "the input's bytes as embed reads them once (a sharded run's input id)",
        "data/probing/parse.py": "the documents as the parser reads them (a shard's docs_sha256)",
        "retrieval/index.py": "a vector file's bytes as the index reads them (its source sha256)",
    },
}


def test_ids_are_built_in_identity() -> None:
    bad, used = [], set()
    defined = []
    for f in sorted(SRC.rglob("*.py")):
        rel = f.relative_to(SRC).as_posix()
        tree = ast.parse(f.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "sentkit.core.identity"
                and rel != "core/identity.py"
            ):
                for alias in node.names:
                    allowed = RAW_HASHING.get(alias.name)
                    if allowed is None:
                        continue
                    if rel in allowed:
                        used.add((alias.name, rel))
                    else:
                        bad.append(f"{rel}:{node.lineno}: imports {alias.name} from sentkit.core.identity")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "corpus_fingerprint":
                defined.append(f"{rel}:{node.lineno}")
    assert not bad, "an id built outside sentkit/core/identity.py (add a named id function there):\n" + "\n".join(bad)
    allowed_all = {(name, rel) for name, files in RAW_HASHING.items() for rel in files}
    assert used == allowed_all, f"allowed but unused (drop them): {sorted(allowed_all - used)}"
    assert not defined, f"two things were called corpus_fingerprint; identity.py names each: {defined}"
