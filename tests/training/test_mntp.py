"""`--method mntp` (sentkit.training.recipes.mntp) on tiny random-initialised decoders: its loss equals transformers'
own shifted causal-LM loss and a hand-written reference on a fixed batch, its batches follow the masking rules, a
run resumed after a stop equals an uninterrupted one, and `sentkit train --method mntp` runs end to end on a tiny
Llama into a folder that sentkit and sentence-transformers load with equal (bidirectional) vectors; so does
`--method llm2vec` (MNTP then SimCSE), which, killed with SIGKILL in its second phase and rerun with `--resume`,
ends with the vectors of a run that was never stopped."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from sentkit.training.loop import train
from sentkit.training.recipe import Seeds
from sentkit.training.recipes.mntp import MNTP, MNTPBatch, MNTPConfig
from support.decoders import decoder_recipe, decoder_recipe_config, tiny_decoder

TEXTS = ["The river runs past the old stone bridge.", "winter bread", "stone"]


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_decoder("llama", tmp_path_factory.mktemp("llama") / "model")


def config(corpus: Path, out: Path, model: Path, **kw: object) -> MNTPConfig:
    return decoder_recipe_config(MNTPConfig, corpus, out, model, **kw)


def recipe_of(cfg: MNTPConfig) -> MNTP:
    return decoder_recipe(MNTP, cfg)


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2"])
def test_loss_equals_the_shifted_causal_lm_loss_and_a_hand_written_reference(family: str, tmp_path: Path) -> None:
    from sentkit.models.decoder import attention_of

    model = tiny_decoder(family, tmp_path / family)
    recipe = recipe_of(config(tmp_path, tmp_path / "out", model))
    module = recipe.module().eval()
    module.autocast = lambda: torch.autocast("cpu", enabled=False)  # type: ignore[method-assign]
    assert attention_of(recipe.mlm_model.config) == "bidirectional"  # LLM2Vec's MNTP attends both ways
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(5, len(recipe.tokenizer), (3, 12), generator=gen)
    labels = torch.full_like(ids, -100)
    for r, c in [(0, 0), (0, 3), (0, 11), (1, 1), (1, 6), (2, 2), (2, 9), (2, 10)]:  # (0, 0): nothing predicts it
        labels[r, c] = int(ids[r, c])
    ids[labels != -100] = recipe.tokenizer.mask_token_id
    batch = MNTPBatch(3, {"mntp": 7.0}, int(ids.numel()), ids, labels)
    with torch.no_grad():
        got = module(batch, [0, 1, 2], Seeds(0, 0, 0, 0)).sums["mntp"] / 7
        lm = recipe.mlm_model
        want_hf = lm(input_ids=ids, labels=labels).loss  # transformers' causal-LM loss: logits[:, :-1] vs labels[:, 1:]
        logits = lm(input_ids=ids).logits.log_softmax(-1)
    masked = [(r, c) for r in range(3) for c in range(1, 12) if labels[r, c] != -100]
    by_hand = [-float(logits[r, c - 1, int(labels[r, c])]) for r, c in masked]
    assert len(by_hand) == 7
    assert float(got) == pytest.approx(float(want_hf), abs=1e-5)
    assert float(got) == pytest.approx(sum(by_hand) / 7, abs=1e-5)
    # the next-token shift matters: the loss of each token read at its own position is another number
    own = [-float(logits[r, c, int(labels[r, c])]) for r, c in masked]
    assert abs(sum(own) / 7 - float(got)) > 1e-3


def test_batches_mask_a_fifth_of_the_tokens_with_the_blank_token(
    llama_dir: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    from sentkit.data.store import TokenStore

    cfg = config(tiny_corpus, tmp_path / "out", llama_dir, max_steps=1)
    train(cfg, MNTP)  # one short run prepares the store
    recipe = recipe_of(cfg)
    tok = recipe.tokenizer
    assert tok.mask_token == "_" and tok.mask_token_id == tok.convert_tokens_to_ids("_")  # LLM2Vec's "blank"
    store = TokenStore(tmp_path / "out" / "prepared")
    n = recipe.units(store)
    batch = recipe.batch(store, list(range(n)), 0)
    assert batch.ids is not None and batch.labels is not None and batch.mask is None
    chosen = batch.labels != -100
    assert not chosen[:, 0].any()  # position 0: nothing before it predicts it
    assert all(int(batch.ids[r, 0]) == tok.bos_token_id for r in range(n))  # Llama's BOS opens each sequence
    assert not torch.isin(batch.labels[chosen], torch.tensor(tok.all_special_ids)).any()
    rate = float(chosen.sum()) / float(batch.ids[:, 1:].numel())
    assert 0.15 < rate < 0.25
    as_mask = float(((batch.ids == tok.mask_token_id) & chosen).sum()) / float(chosen.sum())
    assert 0.7 < as_mask < 0.9
    assert batch.counts["mntp"] == float(chosen.sum())


def test_a_resumed_run_equals_an_uninterrupted_one(llama_dir: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    kw = {"max_steps": 4, "checkpoint_every": 2}
    train(config(tiny_corpus, tmp_path / "straight", llama_dir, **kw), MNTP)
    train(config(tiny_corpus, tmp_path / "cut", llama_dir, **kw), MNTP, stop_at=2)
    train(config(tiny_corpus, tmp_path / "cut", llama_dir, resume=True, **kw), MNTP)
    a = torch.load(tmp_path / "straight" / "checkpoint" / "state.pt", weights_only=False)["model"]
    b = torch.load(tmp_path / "cut" / "checkpoint" / "state.pt", weights_only=False)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_sentkit_train_method_mntp_end_to_end(llama_dir: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    import sentkit
    from sentkit.cli.main import main
    from sentkit.models.decoder import attention_of
    from sentkit.training.metrics import read_metrics

    out = tmp_path / "run"
    rc = main(
        [
            "train",
            "--method",
            "mntp",
            "--model",
            str(llama_dir),
            "--corpus",
            str(tiny_corpus),
            "--out",
            str(out),
            "--max-steps",
            "3",
            "--set",
            "progress=false",
            "--set",
            "batch_size=4",
            "--set",
            "seq_len=32",
            "--set",
            "lr=1e-3",
            "--set",
            "log_every=1",
        ]
    )
    assert rc == 0
    assert json.loads((out / "sentkit.json").read_text())["method"] == "mntp"
    assert json.loads((out / "config.json").read_text())["is_causal"] is False  # bidirectional, saved
    rows = read_metrics(out / "metrics.csv")
    assert [r["step"] for r in rows] == [1, 2, 3] and all(np.isfinite(r["mntp"]) for r in rows)
    enc = sentkit.load(str(out))
    assert enc.pooling == "mean" and attention_of(enc.model.config) == "bidirectional"
    got = enc.encode(TEXTS)
    st = SentenceTransformer(str(out), device="cpu")
    np.testing.assert_allclose(st.encode(TEXTS), got, atol=1e-5)
    base = sentkit.load(str(llama_dir)).encode(TEXTS)
    assert np.abs(got - base).max() > 1e-4  # trained (and bidirectional): not the base's vectors


def test_a_masked_lm_is_refused_in_one_line(
    tiny_model_dir: Path, tiny_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sentkit.cli.main import main

    capsys.readouterr()
    rc = main(
        [
            "train",
            "--method",
            "mntp",
            "--model",
            str(tiny_model_dir),
            "--corpus",
            str(tiny_corpus),
            "--out",
            str(tmp_path / "run"),
            "--max-steps",
            "1",
            "--set",
            "progress=false",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "is a 'bert' model, not a decoder language model" in err[0] and "--method mlm" in err[0]


# ----------------------------------------------------------------------------- --method llm2vec
LLM2VEC_SETTINGS = [
    "mntp_steps=2",
    "simcse_steps=3",
    "mntp_batch_size=4",
    "simcse_batch_size=4",
    "seq_len=32",
    "max_len=32",
    "progress=false",
    "checkpoint_every=1",
]


def llm2vec_args(model: Path, corpus: Path, out: Path, *extra: str) -> list[str]:
    sets = [a for s in LLM2VEC_SETTINGS for a in ("--set", s)]
    return [
        "train",
        "--method",
        "llm2vec",
        "--model",
        str(model),
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        *sets,
        *extra,
    ]


def test_llm2vec_runs_mntp_then_simcse_and_loads_in_sentence_transformers(
    llama_dir: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    from sentence_transformers import SentenceTransformer

    import sentkit
    from sentkit.cli.main import main
    from sentkit.models.decoder import attention_of

    out = tmp_path / "run"
    assert main(llm2vec_args(llama_dir, tiny_corpus, out)) == 0
    assert json.loads((out / "sentkit.json").read_text())["method"] == "llm2vec"
    assert json.loads((out / "1-mntp" / "sentkit.json").read_text())["method"] == "mntp"
    assert json.loads((out / "2-simcse" / "sentkit.json").read_text())["base_model"] == str(out / "1-mntp")
    record = json.loads((out / "recipe.json").read_text())
    assert set(record["phases"]) == {"1-mntp", "2-simcse"} and record["final"] == "2-simcse"
    assert record["phases"]["2-simcse"]["settings"]["dropout"] == 0.3
    enc = sentkit.load(str(out))
    assert attention_of(enc.model.config) == "bidirectional" and enc.pooling == "mean"
    got = enc.encode(TEXTS)
    np.testing.assert_allclose(SentenceTransformer(str(out / "2-simcse"), device="cpu").encode(TEXTS), got, atol=1e-5)
    np.testing.assert_allclose(SentenceTransformer(str(out), device="cpu").encode(TEXTS), got, atol=1e-5)  # the run
    assert sentkit.load(str(out), pooling="weighted-mean").pooling == "weighted-mean"  # settings reach phase 2
    mntp_only = sentkit.load(str(out / "1-mntp")).encode(TEXTS)
    assert np.abs(got - mntp_only).max() > 1e-5  # SimCSE trained on top of MNTP


# `sentkit train` in a process of its own that kill -9s itself right after phase 2 (SimCSE) saved its step-2 checkpoint
# (scripts/train_worker.py's hook): no finally block, atexit hook or flush runs, as when a user or the OOM killer
# ends a run
KILLED_IN_SIMCSE = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parents[2] / "scripts")!r})
from train_worker import kill_after_checkpoint
from sentkit.cli.main import main
kill_after_checkpoint(2, folder="2-simcse")
sys.exit(main(sys.argv[1:]))
"""


def test_llm2vec_resumed_after_kill_9_equals_an_uninterrupted_run(
    llama_dir: Path, tiny_corpus: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import os
    import signal
    import subprocess
    import sys

    import sentkit
    from sentkit.cli.main import main
    from sentkit.training.checkpoint import CHECKPOINT

    assert main(llm2vec_args(llama_dir, tiny_corpus, tmp_path / "straight")) == 0
    cut = tmp_path / "cut"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    res = subprocess.run(
        [sys.executable, "-c", KILLED_IN_SIMCSE, *llm2vec_args(llama_dir, tiny_corpus, cut)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == -signal.SIGKILL, res.stderr[-3000:]
    assert (cut / "1-mntp" / "sentkit.json").exists() and not (cut / "sentkit.json").exists()
    assert torch.load(cut / "2-simcse" / CHECKPOINT, weights_only=False)["step"] == 2  # killed mid-phase 2
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sentkit"):
        assert main(llm2vec_args(llama_dir, tiny_corpus, cut, "--resume")) == 0
    said = caplog.text
    assert "phase 1-mntp already done" in said and "at step 2 of 3" in said, said  # resumed, not rerun
    a = sentkit.load(str(tmp_path / "straight")).encode(TEXTS)
    b = sentkit.load(str(cut)).encode(TEXTS)
    np.testing.assert_array_equal(a, b)


def test_llm2vec_without_a_model_is_one_clear_error() -> None:
    from sentkit.core.config import ConfigError
    from sentkit.training.llm2vec import LLM2VecConfig

    with pytest.raises(ConfigError, match="needs --model: a decoder"):
        LLM2VecConfig(corpus="c", out="o")
    with pytest.raises(ConfigError, match="simcse_dropout"):
        LLM2VecConfig(corpus="c", out="o", model="m", simcse_dropout=1.0)


def test_llm2vec_trains_lora_in_both_phases_and_lora_r_0_turns_the_large_default_off(
    llama_dir: Path, tiny_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--set lora_r=4` reaches both phases (each checkpoint holds adapters; each export is merged, and only the
    adapted projections moved from the model the phase started from); with every decoder counted as large (the
    default would add rank 16), `lora_r=0` trains every weight."""
    pytest.importorskip("peft")
    from safetensors.torch import load_file

    from sentkit.cli.main import main
    from sentkit.models import lora
    from sentkit.training.checkpoint import CHECKPOINT

    out = tmp_path / "lora"
    assert main(llm2vec_args(llama_dir, tiny_corpus, out, "--set", "lora_r=4", "--set", "lora_alpha=8")) == 0
    start = {"1-mntp": llama_dir, "2-simcse": out / "1-mntp"}
    for phase, before_dir in start.items():
        state = torch.load(out / phase / CHECKPOINT, weights_only=False)["model"]
        assert any("lora_B" in k for k in state), phase
        saved = load_file(str(out / phase / "model.safetensors"))
        before = load_file(str(before_dir / "model.safetensors"))
        assert not any("lora" in k for k in saved), phase
        moved = [k for k in before if k in saved and not torch.equal(before[k], saved[k])]
        assert moved and all(k.endswith("proj.weight") for k in moved), (phase, moved)
    settings = json.loads((out / "recipe.json").read_text())["phases"]
    assert all(settings[p]["settings"]["lora_r"] == 4 and settings[p]["settings"]["lora_alpha"] == 8 for p in start)

    monkeypatch.setattr(lora, "LARGE_DECODER", 1000)  # as if the decoder were large: LoRA rank 16 unless told
    assert main(llm2vec_args(llama_dir, tiny_corpus, tmp_path / "default", "--set", "mntp_steps=1")) == 0
    state = torch.load(tmp_path / "default" / "1-mntp" / CHECKPOINT, weights_only=False)["model"]
    assert any("lora_B" in k for k in state)
    full = tmp_path / "full"
    assert main(llm2vec_args(llama_dir, tiny_corpus, full, "--set", "mntp_steps=1", "--set", "lora_r=0")) == 0
    state = torch.load(full / "1-mntp" / CHECKPOINT, weights_only=False)["model"]
    assert not any("lora" in k for k in state)
    saved = load_file(str(full / "1-mntp" / "model.safetensors"))
    before = load_file(str(llama_dir / "model.safetensors"))
    assert any(not torch.equal(before[k], saved[k]) for k in before if "norm" in k)  # every weight trained


def test_llm2vec_settings_are_checked_before_anything_runs(
    llama_dir: Path,
    tiny_model_dir: Path,
    tiny_corpus: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A phase's setting given wrong (a misspelled pooling or precision, a negative rank) is one line before any
    phase starts, in the recipe's keys, with the closest name; a phase that fails while it runs leaves run.json saying
    which and why, and the fix it prints, rerun as printed, finishes the run."""
    import logging
    import shlex

    from sentkit.cli.main import main

    for bad, said in (
        ("pooling=lasttoken", "Did you mean 'last-token'?"),
        ("lora_r=-1", "lora_r must be 0"),
        ("lora_alpha=0", "lora_alpha must be positive"),
        ("precision=bf17", "Did you mean 'bf16'?"),
        ("simcse_lr=-1", "llm2vec phase 2-simcse: simcse_lr must be positive"),  # the recipe's key, not the phase's
    ):
        capsys.readouterr()
        assert main(llm2vec_args(llama_dir, tiny_corpus, tmp_path / "bad", "--set", bad)) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], (bad, err)
        assert not (tmp_path / "bad").exists()
    out = tmp_path / "few"
    capsys.readouterr()
    assert main(llm2vec_args(llama_dir, tiny_corpus, out, "--set", "simcse_batch_size=100000")) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "failed" and run["phase"] == "2-simcse", run
    assert "fewer than simcse_batch_size=100000" in run["error"], run  # the recipe's key, as on stderr
    # the printed fix, rerun as printed, finishes the run: phase 1 is kept, phase 2 starts with the fixed setting
    fix = shlex.split(err.split("rerun with `")[1].split("`")[0])
    assert fix[:2] == ["--set", fix[1]] and fix[1].startswith("simcse_batch_size=") and "--resume" in fix, err
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sentkit"):
        assert main([*llm2vec_args(llama_dir, tiny_corpus, out, "--set", "simcse_batch_size=100000"), *fix]) == 0
    assert "phase 1-mntp already done" in caplog.text
    assert json.loads((out / "run.json").read_text())["status"] == "done"
    assert json.loads((out / "2-simcse" / "train_config.json").read_text())["batch_size"] == int(fix[1].split("=")[1])
    capsys.readouterr()
    assert main(llm2vec_args(tiny_model_dir, tiny_corpus, tmp_path / "bert")) == 2  # a masked LM: nothing written
    assert "not a decoder language model" in capsys.readouterr().err
    assert [f.name for f in (tmp_path / "bert").iterdir()] == [".lock"]  # only the run lock (the folder is free)
    out = tmp_path / "ok"
    assert main(llm2vec_args(llama_dir, tiny_corpus, out)) == 0
    assert json.loads((out / "run.json").read_text())["status"] == "done"


@pytest.mark.slow
def test_two_gloo_processes_end_where_one_does(llama_dir: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    """`--method mntp` in 2 gloo processes (torchrun, the worker test_multiprocess.py runs) ends with the weights of
    the one-process run: each rank masks its sequences with the seeds of (seed, step, sequence), so the split of a
    step's sequences between ranks changes no mask."""
    from sentkit.training.checkpoint import CHECKPOINT
    from sentkit.training.metrics import read_metrics
    from support.training import torchrun

    worker = Path(__file__).parents[2] / "scripts" / "train_worker.py"  # test_multiprocess.py's worker

    kw: dict[str, object] = {"max_steps": 3, "lr": 1e-3, "dist_timeout": 120}
    train(config(tiny_corpus, tmp_path / "one", llama_dir, **kw), MNTP)
    two = config(tiny_corpus, tmp_path / "two", llama_dir, **kw)
    res = torchrun(
        worker,
        json.dumps(
            {
                "jobs": [
                    {
                        "method": "mntp",
                        "config": {
                            k: getattr(two, k)
                            for k in (
                                "corpus",
                                "out",
                                "model",
                                "progress",
                                "log_every",
                                "batch_size",
                                "checkpoint_every",
                                "seq_len",
                                "max_steps",
                                "lr",
                                "dist_timeout",
                            )
                        },
                    }
                ]
            }
        ),
    )
    assert res.returncode == 0, res.stderr[-4000:]
    a = torch.load(tmp_path / "one" / CHECKPOINT, weights_only=False)["model"]
    b = torch.load(tmp_path / "two" / CHECKPOINT, weights_only=False)["model"]
    assert a.keys() == b.keys()
    worst = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert worst < 1e-5, f"2 processes differ from one by {worst:.2e}"
    assert [int(r["step"]) for r in read_metrics(tmp_path / "two" / "metrics.csv")] == [1, 2, 3]


# ----------------------------------------------------------------------------- conventions (issue 56, item 7)
def test_llm2vec_max_steps_is_one_line_naming_the_phase_keys(
    llama_dir: Path, tiny_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sentkit.cli.main import main

    capsys.readouterr()
    assert main(llm2vec_args(llama_dir, tiny_corpus, tmp_path / "run", "--max-steps", "7")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--set mntp_steps=7" in err[0] and "--set simcse_steps=7" in err[0], err
    assert not (tmp_path / "run").exists()


def without_eos(llama_dir: Path, out: Path, *, config_eos: bool) -> Path:
    """A copy of the tiny Llama whose tokenizer has no end-of-sequence token (a padding token instead), and whose
    config names its eos_token_id or not."""
    import shutil

    shutil.copytree(llama_dir, out)
    tok_cfg = json.loads((out / "tokenizer_config.json").read_text())
    tok_cfg.pop("eos_token", None)
    tok_cfg["pad_token"] = "<unk>"
    (out / "tokenizer_config.json").write_text(json.dumps(tok_cfg))
    if not config_eos:
        cfg = json.loads((out / "config.json").read_text())
        cfg["eos_token_id"] = None
        (out / "config.json").write_text(json.dumps(cfg))
        gen = out / "generation_config.json"
        if gen.is_file():
            gen.unlink()
    return out


def test_llm2vec_on_a_tokenizer_without_eos_uses_the_configs_eos(
    llama_dir: Path, tiny_corpus: Path, tmp_path: Path
) -> None:
    from transformers import AutoConfig, AutoTokenizer

    from sentkit.cli.main import main

    model = without_eos(llama_dir, tmp_path / "model", config_eos=True)
    assert AutoTokenizer.from_pretrained(model).eos_token is None
    out = tmp_path / "run"
    assert main(llm2vec_args(model, tiny_corpus, out, "--set", "mntp_steps=1", "--set", "simcse_steps=1")) == 0
    eos_id = AutoConfig.from_pretrained(llama_dir).eos_token_id
    assert AutoTokenizer.from_pretrained(out / "1-mntp").eos_token_id == eos_id  # saved with the config's


def test_a_decoder_without_any_eos_is_refused_in_one_line(
    llama_dir: Path, tiny_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sentkit.cli.main import main

    model = without_eos(llama_dir, tmp_path / "model", config_eos=False)
    capsys.readouterr()
    assert main(llm2vec_args(model, tiny_corpus, tmp_path / "run")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no end-of-sequence token" in err[0] and "eos_token" in err[0], err
