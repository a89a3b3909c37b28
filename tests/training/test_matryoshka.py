"""Matryoshka training (`--set matryoshka_dims=[...]`) on DeCLUTR, SimCSE and llm2vec's SimCSE phase: the loss against
sentence-transformers' MatryoshkaLoss on the same embeddings, off is the loss of today bit for bit, the keys' checks,
GradCache's gradients equal the full batch's, two gloo processes end where one does, and the saved folder names the
trained dimensions."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch

from sentkit.core.config import ConfigError, from_dict
from sentkit.core.methods import get_method
from sentkit.objectives.contrastive import info_nce
from sentkit.objectives.matryoshka import matryoshka
from sentkit.training.checkpoint import CHECKPOINT
from sentkit.training.distributed import DistInfo
from support.training import build, small_config, step_gradients, torchrun

WORKER = Path(__file__).parents[2] / "scripts" / "train_worker.py"
DIMS, WEIGHTS = [48, 32, 16, 8], [1.0, 0.5, 0.25, 2.0]
T = 0.05


class Stub(torch.nn.Module):
    """A sentence-transformers model whose embeddings are the features given (``{"emb": tensor}``)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width

    def forward(self, features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"sentence_embedding": features["emb"]}

    def _get_untruncated_embedding_dimension(self) -> int:
        return self.width

    def get_embedding_dimension(self) -> int:
        return self.width


def st_matryoshka(a: torch.Tensor, p: torch.Tensor, directions: tuple[str, ...]) -> torch.Tensor:
    from sentence_transformers.sentence_transformer.losses import MatryoshkaLoss, MultipleNegativesRankingLoss

    stub = Stub(a.shape[1])
    base = MultipleNegativesRankingLoss(stub, scale=1 / T, directions=directions)  # type: ignore[arg-type]
    loss = MatryoshkaLoss(stub, base, DIMS, WEIGHTS)  # type: ignore[arg-type]
    return loss([{"emb": a}, {"emb": p}], torch.zeros(a.shape[0]))  # type: ignore[no-any-return]


@pytest.mark.parametrize("symmetric", [False, True], ids=["simcse", "declutr-nt-xent"])
def test_matches_sentence_transformers(symmetric: bool) -> None:
    """SimCSE's loss is MultipleNegativesRankingLoss; DeCLUTR's NT-Xent is the mean of its anchors' rows (ST's loss
    with query_to_query negatives) and its positives' rows (the same with the columns swapped). Values and the
    gradients with respect to the embeddings agree to 1e-6."""
    gen = torch.Generator().manual_seed(0)
    a0, p0 = (torch.randn(6, 48, generator=gen, dtype=torch.float64) for _ in range(2))  # float64: no rounding noise
    a0 = (a0 + p0) / 2  # pairs that resemble each other: a loss far from log(n)
    ours_in = [x.clone().requires_grad_(True) for x in (a0, p0)]
    theirs_in = [x.clone().requires_grad_(True) for x in (a0, p0)]
    ours = matryoshka(partial(info_nce, temperature=T, symmetric=symmetric), *ours_in, DIMS, WEIGHTS)
    if symmetric:
        both = ("query_to_doc", "query_to_query")
        theirs = (st_matryoshka(*theirs_in, both) + st_matryoshka(theirs_in[1], theirs_in[0], both)) / 2
    else:
        theirs = st_matryoshka(*theirs_in, ("query_to_doc",))
    assert ours.dtype == theirs.dtype == torch.float64
    assert abs(float(ours.detach()) - float(theirs.detach())) < 1e-6 and float(ours.detach()) > 0.1
    ours.backward()
    theirs.backward()
    for x, y in zip(ours_in, theirs_in):
        assert x.grad is not None and y.grad is not None
        torch.testing.assert_close(x.grad, y.grad, atol=1e-6, rtol=0)
    one = matryoshka(partial(info_nce, temperature=T, symmetric=symmetric), a0, p0, [48])  # the full width alone
    assert torch.equal(one, info_nce(torch.nn.functional.normalize(a0), torch.nn.functional.normalize(p0), T,
                                     symmetric=symmetric))  # fmt: skip


def test_off_is_the_loss_of_today(tiny_model_dir: Path, tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(1)
    a, p = torch.randn(4, 32, generator=gen), torch.randn(4, 32, generator=gen)
    recipe, _ = build(str(tiny_model_dir), small_config("c", str(tmp_path)))
    assert torch.equal(recipe.contrastive(a, p), info_nce(a, p, 0.05))
    assert recipe.encoder_settings() == {"pooling": "mean"}
    on, _ = build(str(tiny_model_dir), small_config("c", str(tmp_path), matryoshka_dims=[32, 8]))
    torch.testing.assert_close(on.contrastive(a, p), info_nce(a, p, 0.05) + info_nce(a[:, :8], p[:, :8], 0.05))
    assert on.encoder_settings() == {"pooling": "mean", "matryoshka_dims": [32, 8]}
    simcse = get_method("simcse").config_cls
    off, _ = build(str(tiny_model_dir), from_dict(simcse, {"corpus": "c", "out": str(tmp_path)}))
    assert torch.equal(off.contrastive(a, p), info_nce(a, p, 0.05, symmetric=False))
    on, _ = build(
        str(tiny_model_dir), from_dict(simcse, {"corpus": "c", "out": str(tmp_path), "matryoshka_dims": "16"})
    )
    torch.testing.assert_close(on.contrastive(a, p), info_nce(a[:, :16], p[:, :16], 0.05, symmetric=False))


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"matryoshka_dims": "[64,64]"}, "matryoshka_dims has a dimension twice: [64, 64]"),
        ({"matryoshka_dims": "[0,8]"}, "matryoshka_dims must each be at least 1, got [0, 8]"),
        ({"matryoshka_dims": "[8.5]"}, "matryoshka_dims must be whole numbers, got [8.5]"),
        ({"matryoshka_dims": "[8,4]", "matryoshka_weights": "[1]"}, "matryoshka_weights has 1 values for 2"),
        ({"matryoshka_weights": "[1]"}, "matryoshka_weights without matryoshka_dims"),
        ({"matryoshka_dims": "[8,4]", "matryoshka_weights": "[1,-1]"}, "must be non-negative numbers"),
    ],
)
@pytest.mark.parametrize("method", ["declutr", "simcse", "llm2vec"])
def test_wrong_keys_are_one_line(method: str, settings: dict[str, str], said: str) -> None:
    base = {"corpus": "c", "out": "o", **({"model": "m"} if method == "llm2vec" else {})}
    with pytest.raises(ConfigError, match="^[^\n]*$") as e:
        from_dict(get_method(method).config_cls, {**base, **settings})
    assert said in str(e.value)


@pytest.mark.parametrize("method", ["declutr", "simcse", "llm2vec"])
def test_keys_as_written_after_set(method: str) -> None:
    """`--set matryoshka_dims=[384,256,128,64,32]` (a string), `384,256` or a TOML list; llm2vec passes them to its
    SimCSE phase."""
    cls = get_method(method).config_cls
    base = {"corpus": "c", "out": "o", **({"model": "m"} if method == "llm2vec" else {})}
    for written in ("[384,256,128,64,32]", "384,256,128,64,32", [384, 256, 128, 64, 32]):
        cfg = from_dict(cls, {**base, "matryoshka_dims": written, "matryoshka_weights": "[1,1,1,1,2]"})
        assert (cfg.matryoshka_dims, cfg.matryoshka_weights) == ([384, 256, 128, 64, 32], [1.0, 1.0, 1.0, 1.0, 2.0])
    assert from_dict(cls, base).matryoshka_dims is None
    if method == "llm2vec":
        cfg = from_dict(cls, {**base, "matryoshka_dims": "[64,32]"})
        phase2 = cfg.phases(Path("o"))[1][1]
        assert (phase2.matryoshka_dims, type(phase2).__name__) == ([64, 32], "DecoderSimCSEConfig")


def test_a_dimension_wider_than_the_model_is_refused_when_it_is_built(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^matryoshka_dims \[33\] exceed the model's embedding width 32"):
        build(str(tiny_model_dir), small_config("c", str(tmp_path), matryoshka_dims=[33, 16]))
    build(str(tiny_model_dir), small_config("c", str(tmp_path), matryoshka_dims=[32, 16]))  # the width itself: fine


def test_grad_cache_equals_the_full_batch(tiny_corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """GradCache computes the step's views without a graph, takes the Matryoshka loss's gradient with respect to them
    and replays it per micro-batch: the gradients equal one graph over the whole batch."""
    from support.training import prepare

    store = prepare(tiny_corpus, tiny_model_dir, tmp_path / "store", min_doc_tokens=2 * 32 * 2)
    docs, mat = [0, 1, 2, 3], {"matryoshka_dims": [32, 16, 4], "matryoshka_weights": [1, 1, 2]}
    full = step_gradients(str(tiny_model_dir), str(store), small_config(str(store), "x", **mat), docs, DistInfo())
    cfg = small_config(str(store), "x", grad_accum=2, grad_cache=True, **mat)
    cached = step_gradients(str(tiny_model_dir), str(store), cfg, docs, DistInfo())
    plain = step_gradients(str(tiny_model_dir), str(store), small_config(str(store), "x"), docs, DistInfo())
    assert full.keys() == cached.keys()
    for k in full:
        torch.testing.assert_close(cached[k], full[k], atol=1e-6, rtol=1e-4, msg=k)
    q = next(k for k in full if k.endswith("layer.0.attention.self.query.weight"))
    assert not torch.allclose(full[q], plain[q], atol=1e-5), "Matryoshka changed nothing"


def _sentences(root: Path) -> Path:
    import numpy as np

    from support import WORDS

    rng = np.random.default_rng(0)
    folder = root / "sentences"
    folder.mkdir()
    for d in range(4):
        sents = [" ".join(rng.choice(WORDS, size=int(rng.integers(5, 12)))).capitalize() + "." for _ in range(12)]
        (folder / f"doc{d}.txt").write_text(" ".join(sents), encoding="utf-8")
    return folder


@pytest.mark.slow
def test_two_processes_end_where_one_does(tiny_corpus: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    """DeCLUTR (with GradCache) and SimCSE, Matryoshka on, 3 steps: one torchrun launch of 2 gloo processes ends with
    the weights of the one-process run (dropout off) to 1e-5; the saved folder's sentkit.json names the dimensions."""
    corpora = {"declutr": tiny_corpus, "simcse": _sentences(tmp_path)}
    extra: dict[str, dict[str, Any]] = {
        "declutr": {
            "num_anchors": 2,
            "num_positives": 2,
            "min_span_len": 8,
            "max_span_len": 32,
            "grad_accum": 2,
            "grad_cache": True,
        },
        "simcse": {},
    }

    def cfg(method: str, name: str) -> dict[str, Any]:
        return {
            "corpus": str(corpora[method]),
            "out": str(tmp_path / method / name),
            "model": str(tiny_model_dir),
            "max_steps": 3,
            "checkpoint_every": 3,
            "batch_size": 4,
            "lr": 1e-3,
            "progress": False,
            "dist_timeout": 120,
            "matryoshka_dims": "[8,32,16]",
            "matryoshka_weights": "[2,1,1]",
            **extra[method],
        }

    for method in extra:
        m = get_method(method)
        m.train(from_dict(m.config_cls, cfg(method, "one")))
    res = torchrun(WORKER, json.dumps({"jobs": [{"method": m, "config": cfg(m, "two")} for m in extra]}))
    assert res.returncode == 0, res.stderr[-4000:]
    for method in extra:
        one, two = (torch.load(tmp_path / method / n / CHECKPOINT, weights_only=False)["model"] for n in ("one", "two"))
        assert one.keys() == two.keys()
        worst = max(float((one[k] - two[k]).abs().max()) for k in one)
        assert worst < 1e-5, f"{method}: two processes differ from one by {worst:.2e}"
        marker = json.loads((tmp_path / method / "two" / "sentkit.json").read_text())
        assert marker["matryoshka_dims"] == [32, 16, 8]
