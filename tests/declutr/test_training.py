from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from _helpers import small_config, step_gradients

from sentkit.data.store import TokenStore, prepare_store
from sentkit.models.hub import load_tokenizer
from sentkit.training.declutr import train
from sentkit.training.distributed import DistInfo

HERE = Path(__file__).parent


@pytest.fixture()
def store(tiny_corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> Path:
    tok = load_tokenizer(str(tiny_model_dir))
    prepare_store(tiny_corpus, tok, tmp_path / "store", min_doc_tokens=2 * 32 * 2, show_progress=False)
    return tmp_path / "store"


def _assert_grads_close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], atol: float = 1e-6) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=atol, rtol=1e-4), (k, float((a[k] - b[k]).abs().max()), float(a[k].abs().max()))


def test_grad_cache_equals_full_batch(store: Path, tiny_model_dir: Path) -> None:
    docs = [0, 1, 2, 3]
    full = step_gradients(str(tiny_model_dir), str(store), small_config(str(store), "x"), docs, DistInfo())
    cached = step_gradients(str(tiny_model_dir), str(store), small_config(str(store), "x", grad_accum=2, grad_cache=True), docs, DistInfo())
    plain = step_gradients(str(tiny_model_dir), str(store), small_config(str(store), "x", grad_accum=2), docs, DistInfo())
    _assert_grads_close(full, cached)
    # without caching each micro-batch only sees its own negatives: gradients differ
    k = "mlm_model.bert.encoder.layer.0.attention.self.query.weight"
    assert not torch.allclose(full[k], plain[k], atol=1e-6)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_ddp_two_processes_match_one(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    docs = [0, 1, 2, 3]
    single = step_gradients(str(tiny_model_dir), str(store), small_config(str(store), "x"), docs, DistInfo())
    out = tmp_path / "ddp_grads.pt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={_free_port()}", str(HERE / "ddp_worker.py"), str(tiny_model_dir), str(store), str(out), json.dumps(docs)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    ddp = torch.load(out)
    _assert_grads_close(single, ddp, atol=1e-6)


def _state(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path / "checkpoint" / "state.pt", weights_only=False)["model"]


def test_exact_resume(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    k = 3
    straight = small_config(str(store), str(tmp_path / "straight"), model=str(tiny_model_dir), max_steps=2 * k, checkpoint_every=k)
    train(straight)
    cut = small_config(str(store), str(tmp_path / "cut"), model=str(tiny_model_dir), max_steps=2 * k, checkpoint_every=k)
    train(cut, stop_at=k)  # "killed" right after the checkpoint at step k
    assert not (tmp_path / "cut" / "model.safetensors").exists()
    resumed = small_config(str(store), str(tmp_path / "cut"), model=str(tiny_model_dir), max_steps=2 * k, checkpoint_every=k, resume=True)
    train(resumed)
    a, b = _state(tmp_path / "straight"), _state(tmp_path / "cut")
    for name in a:
        assert torch.equal(a[name], b[name]), name
    rows = (tmp_path / "cut" / "metrics.csv").read_text().strip().splitlines()
    assert [int(r.split(",")[0]) for r in rows[1:]] == list(range(1, 2 * k + 1))


def test_refuses_to_overwrite_without_resume(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    from sentkit.config import ConfigError

    cfg = small_config(str(store), str(tmp_path / "o"), model=str(tiny_model_dir), max_steps=1)
    train(cfg)
    with pytest.raises(ConfigError, match="--resume"):
        train(cfg)


def test_training_lowers_contrastive_loss(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    cfg = small_config(str(store), str(tmp_path / "run"), model=str(tiny_model_dir), max_steps=30, lr=1e-3, mlm=False, batch_size=8)
    out = train(cfg)
    rows = [line.split(",") for line in (out / "metrics.csv").read_text().strip().splitlines()[1:]]
    losses = np.array([float(r[2]) for r in rows])
    assert losses[-5:].mean() < losses[:5].mean() - 0.3


def test_saved_model_loads_in_sentence_transformers(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    import sentkit

    out = train(small_config(str(store), str(tmp_path / "m"), model=str(tiny_model_dir), max_steps=2))
    texts = ["a river in winter", "the captain's letter arrived in the morning", ""]
    ours = sentkit.load(str(out)).encode(texts)
    st = SentenceTransformer(str(out), device="cpu").encode(texts)
    assert ours.dtype == np.float32 and ours.shape == (3, 32)
    assert np.abs(ours - st).max() < 1e-5
    from transformers import AutoModel

    assert AutoModel.from_pretrained(str(out)).config.hidden_size == 32
    cfg = json.loads((out / "train_config.json").read_text())
    assert cfg["max_steps"] == 2 and cfg["model"] == str(tiny_model_dir)
    assert "DeCLUTR" in (out / "README.md").read_text()


def test_store_is_read_without_retokenizing(store: Path, tiny_model_dir: Path, tiny_corpus: Path) -> None:
    s = TokenStore(store)
    tok = load_tokenizer(str(tiny_model_dir))
    first = sorted(tiny_corpus.glob("*.txt"))[0].read_text()
    assert s.doc(0).tolist() == tok(first, add_special_tokens=False)["input_ids"]


def test_tensorboard_logger_and_cpu_bf16(store: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    out = train(small_config(str(store), str(tmp_path / "tb"), model=str(tiny_model_dir), max_steps=2,
                             logger="tensorboard", precision="bf16"))
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    rows = (out / "metrics.csv").read_text().strip().splitlines()
    assert len(rows) == 3 and all(np.isfinite(float(r.split(",")[1])) for r in rows[1:])


def test_corpus_fraction_subsets_are_nested() -> None:
    from sentkit.training.declutr import corpus_subset

    small, mid, full = corpus_subset(1000, 0.1), corpus_subset(1000, 0.3), corpus_subset(1000, 1.0)
    assert len(small) == 100 and len(mid) == 300 and len(full) == 1000
    assert set(small) <= set(mid) <= set(full)


def test_runs_share_a_prepared_dir(tiny_corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """The first run prepares the raw corpus into prepared_dir; a second run reuses it unchanged; a run
    with other document-length settings prepares it again."""
    shared = tmp_path / "shared-store"
    kw = dict(model=str(tiny_model_dir), max_steps=1, prepared_dir=str(shared))
    train(small_config(str(tiny_corpus), str(tmp_path / "a"), **kw))
    stamp = (shared / "meta.json").stat().st_mtime_ns
    assert not (tmp_path / "a" / "prepared").exists()
    train(small_config(str(tiny_corpus), str(tmp_path / "b"), **kw))
    assert (shared / "meta.json").stat().st_mtime_ns == stamp  # reused, not rewritten
    train(small_config(str(tiny_corpus), str(tmp_path / "c"), max_doc_tokens=300, **kw))
    assert json.loads((shared / "meta.json").read_text())["max_doc_tokens"] == 300
