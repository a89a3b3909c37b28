"""`distributed=fsdp` (sentkit.training.fsdp) with real processes (torchrun, 2 gloo processes on the CPU): for
DeCLUTR (gradient caching over 2 micro-batches, global negatives), SimCSE and MNTP (a tiny Llama), a 2-process FSDP
run ends with the weights of a 2-process DDP run and of a 1-process run (float32, dropout off) to 1e-5; its final
folder is a plain sentence-transformers folder that `sentkit.load` reads, with the 1-process run's vectors; a
2-process FSDP run killed with kill -9 after a sharded checkpoint, then resumed with --resume, ends where the
uninterrupted one does; a 1-process FSDP run stopped after its sharded checkpoint resumes in 2 processes (the
checkpoint resharded), with gradient checkpointing on. Two torchrun launches in all. Plus the config's refusals
(fast)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from sentkit.core.config import ConfigError, from_dict
from sentkit.core.methods import get_method
from sentkit.training.checkpoint import CHECKPOINT, META, SHARDED, SHARDED_PREV, has_checkpoint, last_checkpoint
from sentkit.training.recipes.simcse import SimCSEConfig
from support.training import torchrun

WORKER = Path(__file__).parents[2] / "scripts" / "train_worker.py"
METHODS = ("declutr", "simcse", "mntp")
STEPS, CUT = 4, 2  # steps of every run; the killed run dies right after its checkpoint at CUT
TEXTS = ["The river runs past the old stone bridge.", "winter bread", "a stone"]


# ----------------------------------------------------------------------------- config (fast)
def test_distributed_is_ddp_or_fsdp_and_a_typo_is_one_line_with_the_closest() -> None:
    assert SimCSEConfig(corpus="c", out="o").distributed == "ddp"
    assert SimCSEConfig(corpus="c", out="o", distributed="fsdp").distributed == "fsdp"
    with pytest.raises(ConfigError) as e:
        SimCSEConfig(corpus="c", out="o", distributed="fdsp")  # type: ignore[arg-type]
    assert str(e.value) == "distributed must be one of ddp, fsdp, got 'fdsp'. Did you mean 'fsdp'?"


@pytest.mark.parametrize(
    ("kw", "names"),
    [({"lora_r": 8}, ("lora_r=8", "lora_r=0")), ({"precision": "fp16"}, ("precision=fp16", "precision=bf16"))],
)
def test_fsdp_refuses_lora_and_fp16_in_one_line_naming_the_keys(kw: dict[str, Any], names: tuple[str, str]) -> None:
    with pytest.raises(ConfigError) as e:
        SimCSEConfig(corpus="c", out="o", distributed="fsdp", **kw)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("distributed=fsdp does not support")
    assert all(n in msg for n in names) and "distributed=ddp" in msg
    SimCSEConfig(corpus="c", out="o", **kw)  # the same settings under DDP are fine


def test_transformer_blocks_are_the_layers_of_encoders_and_decoders(tiny_model_dir: Path, tmp_path: Path) -> None:
    from sentkit.models.hub import load_mlm
    from sentkit.training.fsdp import transformer_blocks
    from support.decoders import tiny_decoder

    bert, _ = load_mlm(str(tiny_model_dir))
    assert transformer_blocks(bert) == list(bert.bert.encoder.layer)
    llama, _ = load_mlm(str(tiny_decoder("llama", tmp_path / "llama")), causal=True)
    assert transformer_blocks(llama) == list(llama.model.layers)


def test_blocks_that_share_weights_are_one_unit(tiny_model_dir: Path, tmp_path: Path) -> None:
    """TSDAE's decoder layers are tied to the encoder's: FSDP cannot put one parameter in two units, so each
    encoder layer and the decoder layer tied to it are sharded together."""
    from sentkit.training.fsdp import shard_units
    from sentkit.training.recipes.tsdae import TSDAEConfig
    from support.training import build

    _, module = build(str(tiny_model_dir), TSDAEConfig(corpus="c", out=str(tmp_path)))
    encoder, decoder = module.mlm_model.bert.encoder.layer, module.decoder.bert.encoder.layer
    assert encoder[0].attention.self.query.weight is decoder[0].attention.self.query.weight  # tied, as TSDAE ties
    assert shard_units(module) == [[encoder[i], decoder[i]] for i in range(len(encoder))]
    _, simcse = build(str(tiny_model_dir), SimCSEConfig(corpus="c", out=str(tmp_path)))
    assert shard_units(simcse) == [[layer] for layer in simcse.mlm_model.bert.encoder.layer]


# ----------------------------------------------------------------------------- real processes
def _settings(method: str, root: Path, model: Path, out: Path, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "corpus": str(root / ("sentences" if method == "simcse" else "docs")),
        "out": str(out),
        "model": str(model),
        "max_steps": STEPS,
        "checkpoint_every": CUT,
        "batch_size": 4,
        "lr": 1e-4,
        "precision": "fp32",
        "progress": False,
        "log_every": 1,
        "dist_timeout": 120,
    }
    if method == "declutr":
        base.update(num_anchors=2, num_positives=2, min_span_len=8, max_span_len=32, grad_accum=2, grad_cache=True)
    if method == "mntp":
        base.update(seq_len=32)
    return {**base, **kw}


def _corpora(root: Path) -> None:
    from support import WORDS, make_docs

    (root / "docs").mkdir()
    (root / "sentences").mkdir()
    for i, text in enumerate(make_docs(8, 300)):
        (root / "docs" / f"doc{i}.txt").write_text(text, encoding="utf-8")
    rng = np.random.default_rng(0)
    for d in range(4):
        sents = [" ".join(rng.choice(WORDS, size=int(rng.integers(5, 12)))).capitalize() + "." for _ in range(12)]
        (root / "sentences" / f"doc{d}.txt").write_text(" ".join(sents), encoding="utf-8")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> dict[str, Any]:
    """Every run: 1-process references in this process, the rest in 2 torchrun launches (the first ends with the
    kill -9 of its last job)."""
    from support.decoders import tiny_decoder

    root = tmp_path_factory.mktemp("fsdp")
    _corpora(root)
    models = {"declutr": tiny_model_dir, "simcse": tiny_model_dir, "mntp": tiny_decoder("llama", root / "llama")}

    def cfg(method: str, name: str, **kw: Any) -> dict[str, Any]:
        return _settings(method, root, models[method], root / method / name, **kw)

    def one_process(method: str, name: str, stop_at: int | None = None, **kw: Any) -> None:
        m = get_method(method)
        m.train(from_dict(m.config_cls, cfg(method, name, **kw)), stop_at=stop_at)

    for method in METHODS:
        one_process(method, "one")
    one_process("simcse", "begun", stop_at=CUT, distributed="fsdp")  # unsharded, its checkpoint sharded (DCP)
    snap = {"snapshots": [CUT]}  # SimCSE's also save the encoder at step CUT (under FSDP: gathered mid-run)
    jobs = [
        {"method": m, "config": cfg(m, "fsdp", distributed="fsdp", **(snap if m == "simcse" else {}))} for m in METHODS
    ]
    jobs += [{"method": m, "config": cfg(m, "ddp", **(snap if m == "simcse" else {}))} for m in METHODS]
    jobs.append({"method": "declutr", "config": cfg("declutr", "killed", distributed="fsdp"), "kill_at": CUT})
    first = torchrun(WORKER, json.dumps({"jobs": jobs}))
    killed = root / "declutr" / "killed"
    left = {
        "model": (killed / "sentkit.json").exists(),
        "checkpoint": last_checkpoint(killed),
        "files": sorted(p.name for p in (killed / SHARDED).iterdir()) if (killed / SHARDED).is_dir() else [],
    }
    jobs = [
        {"method": "declutr", "config": cfg("declutr", "killed", distributed="fsdp", resume=True)},
        # goes on with gradient checkpointing (resume-safe: the same gradients), under FSDP too
        {
            "method": "simcse",
            "config": cfg("simcse", "begun", distributed="fsdp", resume=True, gradient_checkpointing=True),
        },
    ]
    second = torchrun(WORKER, json.dumps({"jobs": jobs}))
    return {"root": root, "first": first, "second": second, "left": left, "models": models}


def _weights(out: Path) -> dict[str, torch.Tensor]:
    """The saved encoder's weights (a plain transformers folder: model.safetensors)."""
    from safetensors.torch import load_file

    assert (out / "model.safetensors").is_file(), f"no encoder saved in {out}"
    return load_file(out / "model.safetensors")


def _worst(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_two_process_fsdp_equals_two_process_ddp_equals_one_process(runs: dict[str, Any], method: str) -> None:
    res = runs["first"]
    assert "Signal 9 (SIGKILL)" in res.stderr, res.stderr[-4000:]  # the launch ended with the kill, not before
    root = runs["root"] / method
    one, fsdp, ddp = (_weights(root / name) for name in ("one", "fsdp", "ddp"))
    assert _worst(fsdp, one) < 1e-5, f"{method}: FSDP differs from one process by {_worst(fsdp, one):.2e}"
    assert _worst(ddp, one) < 1e-5, f"{method}: DDP differs from one process by {_worst(ddp, one):.2e}"
    start = _weights(runs["models"][method])  # the weights moved: runs that did not train would pass the above too
    common = [k for k in fsdp if k in start]
    assert common and _worst({k: start[k] for k in common}, {k: fsdp[k] for k in common}) > 1e-4
    sharded = root / "fsdp" / SHARDED
    names = sorted(p.name for p in sharded.iterdir())
    assert names == [".metadata", "__0_0.distcp", "__1_0.distcp", META]  # every rank wrote its shard
    assert (root / "fsdp" / SHARDED_PREV / META).is_file() and not (root / "fsdp" / CHECKPOINT).exists()
    assert torch.load(sharded / META, weights_only=False)["step"] == STEPS


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_an_fsdp_runs_folder_loads_with_sentkit_with_the_one_process_vectors(runs: dict[str, Any], method: str) -> None:
    import sentkit

    root = runs["root"] / method
    got = sentkit.load(str(root / "fsdp")).encode(TEXTS)
    want = sentkit.load(str(root / "one")).encode(TEXTS)
    # weights within 1e-5 give vectors (of norm ~10) within float32 noise of that size, not bit-equal ones
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    if method == "declutr":  # and sentence-transformers reads the folder as sentkit does
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(root / "fsdp"), device="cpu").encode(TEXTS)
        np.testing.assert_allclose(st, got, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_an_fsdp_snapshot_mid_run_is_the_ddp_runs(runs: dict[str, Any]) -> None:
    root = runs["root"] / "simcse"
    fsdp, ddp = (_weights(root / name / "snapshots" / f"step-{CUT}") for name in ("fsdp", "ddp"))
    assert _worst(fsdp, ddp) < 1e-5
    assert _worst(fsdp, _weights(root / "fsdp")) > 1e-6  # taken mid-run: the final weights moved on


@pytest.mark.slow
def test_a_killed_fsdp_run_resumed_ends_where_an_uninterrupted_one_does(runs: dict[str, Any]) -> None:
    root = runs["root"] / "declutr"
    left = runs["left"]
    assert left["model"] is False and left["checkpoint"] == (root / "killed" / SHARDED, CUT), left
    assert left["files"] == [".metadata", "__0_0.distcp", "__1_0.distcp", META]
    assert runs["second"].returncode == 0, runs["second"].stderr[-4000:]
    assert "resumed from" in (root / "killed" / "train.log").read_text()
    got, want = _weights(root / "killed"), _weights(root / "fsdp")
    assert _worst(got, want) < 1e-6, f"resumed differs from uninterrupted by {_worst(got, want):.2e}"


@pytest.mark.slow
def test_a_one_process_fsdp_checkpoint_resumes_in_two_processes_with_gradient_checkpointing(
    runs: dict[str, Any],
) -> None:
    root = runs["root"] / "simcse"
    assert runs["second"].returncode == 0, runs["second"].stderr[-4000:]
    assert has_checkpoint(root / "begun") and not (root / "begun" / CHECKPOINT).exists()
    assert _worst(_weights(root / "begun"), _weights(root / "one")) < 1e-5


def test_a_sharded_checkpoint_without_its_meta_falls_back_to_the_one_before(tmp_path: Path) -> None:
    """One process (DCP without a process group): a sharded folder is used only once rank 0 wrote meta.pt into it
    last; a torn latest one is reported, removed and the previous one restored exactly."""
    from sentkit.training.checkpoint import CheckpointError, load_checkpoint, restore, save_sharded
    from sentkit.training.distributed import DistInfo

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    saved = {}
    for step in (1, 2):
        model(torch.randn(5, 4)).sum().backward()
        opt.step()
        opt.zero_grad()
        save_sharded(tmp_path, {"step": step, "scheduler": {}, "config": {}}, model, opt, DistInfo())
        saved[step] = {k: v.clone() for k, v in model.state_dict().items()}
    assert last_checkpoint(tmp_path) == (tmp_path / SHARDED, 2) and has_checkpoint(tmp_path)
    assert sorted(p.name for p in (tmp_path / "checkpoint").iterdir()) == ["sharded", "sharded.prev"]  # no temps
    (tmp_path / SHARDED / META).unlink()  # as if killed before rank 0 wrote it
    assert last_checkpoint(tmp_path) == (tmp_path / SHARDED_PREV, 1)
    state, path = load_checkpoint(tmp_path, sharded=True)
    assert (path, state["step"], state["sharded"]) == (tmp_path / SHARDED_PREV, 1, str(tmp_path / SHARDED_PREV))
    assert not (tmp_path / SHARDED).exists()  # the torn one never becomes `prev` on the next save
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=0.1)
    restore(state, fresh, fresh_opt)
    assert all(torch.equal(fresh.state_dict()[k], saved[1][k]) for k in saved[1])
    assert int(fresh_opt.state_dict()["state"][0]["step"]) == 1  # the optimizer's state too (one step taken)
    with pytest.raises(CheckpointError) as e:  # a resume under DDP of a run whose checkpoints are sharded
        load_checkpoint(tmp_path)
    assert str(e.value) == (
        f"{tmp_path / 'checkpoint'} holds sharded (distributed=fsdp) checkpoints, and this run reads file "
        "(distributed=ddp) ones: resume with --set distributed=fsdp"
    )


def test_a_folder_with_a_sharded_checkpoint_is_a_run_that_a_new_run_refuses(tmp_path: Path) -> None:
    from sentkit.training.checkpoint import save_sharded
    from sentkit.training.distributed import DistInfo
    from sentkit.training.rundir import RunDirError, claim, write_run

    cfg = SimCSEConfig(corpus="c", out=str(tmp_path), distributed="fsdp")
    model = torch.nn.Linear(2, 2)
    save_sharded(
        tmp_path, {"step": 2, "scheduler": {}, "config": {}}, model, torch.optim.AdamW(model.parameters()), DistInfo()
    )
    write_run(tmp_path, "simcse", cfg, status="training", step=2)
    with pytest.raises(RunDirError, match="holds an earlier simcse run; add --resume"):
        claim(tmp_path, "simcse", cfg)
    changed = SimCSEConfig(corpus="c", out=str(tmp_path), distributed="fsdp", resume=True, lr=1.0)
    with pytest.raises(RunDirError, match="settings that differ"):  # and --resume compares the settings
        claim(tmp_path, "simcse", changed)
