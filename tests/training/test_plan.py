"""The memory plan (`sentkit.training.plan`, `sentkit train --plan`): parameter counts against the models
transformers builds from the same configs, LoRA's count against peft's injection, AdamW's state and the gradients
against a real optimizer step, one block's activations against a hand count, sizes, budgets and the cheapest fix,
the command line, and the whole plan against the peak RSS of real `sentkit train` processes (within 25 %)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from sentkit.cli.main import main
from sentkit.core.errors import InputError
from sentkit.training import plan as P

TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64}


def hf_config(kind: str) -> Any:
    """Tiny configs of each family the plan knows (GQA for Mistral, biases for Qwen2, an untied head for Llama)."""
    import transformers as tf

    common = dict(vocab_size=101, **TINY)
    if kind == "bert":
        return tf.BertConfig(max_position_embeddings=64, **common)
    if kind == "roberta":
        return tf.RobertaConfig(max_position_embeddings=66, **common)
    if kind == "gpt2":
        return tf.GPT2Config(vocab_size=101, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    if kind == "llama":
        return tf.LlamaConfig(num_key_value_heads=4, tie_word_embeddings=False, **common)
    if kind == "mistral":
        return tf.MistralConfig(num_key_value_heads=2, **common)
    return tf.Qwen2Config(num_key_value_heads=2, tie_word_embeddings=True, **common)


def hf_model(kind: str) -> Any:
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    auto: Any = AutoModelForMaskedLM if kind in ("bert", "roberta") else AutoModelForCausalLM
    torch.manual_seed(0)
    return auto.from_config(hf_config(kind))


def unique_params(model: Any) -> int:
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


# ----------------------------------------------------------------------------- parameters, LoRA, AdamW
@pytest.mark.parametrize("kind", ["bert", "roberta", "gpt2", "llama", "mistral", "qwen2"])
def test_parameters_and_lora_match_the_models_transformers_and_peft_build(kind: str) -> None:
    from sentkit.models.lora import add_lora

    model = hf_model(kind)
    shape = P.ModelShape.from_config(model.config)  # the config object
    assert shape == P.ModelShape.from_config(model.config.to_dict())  # and config.json's dict
    assert shape.parameters() == unique_params(model)
    assert shape.lora_parameters(4) == add_lora(model, 4)  # peft's all-linear injection, counted by sentkit
    assert shape.lora_parameters(4) == sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)


def test_the_public_configs_give_their_published_sizes() -> None:
    """Mistral-7B: 7,241,732,096 parameters; LoRA r=16 on every linear layer: 41,943,040 (LLM2Vec's count)."""
    from plan_table import CONFIGS

    mistral = P.ModelShape.from_config(CONFIGS["mistral-7b"])
    assert mistral.parameters() == 7_241_732_096
    assert mistral.lora_parameters(16) == 41_943_040
    assert P.ModelShape.from_config(CONFIGS["roberta-base"]).parameters() == 124_697_433  # RobertaForMaskedLM
    assert P.ModelShape.from_config(CONFIGS["llama-3.2-1b"]).parameters() == 1_235_814_400


def test_gradients_and_adamw_state_are_what_a_real_step_holds() -> None:
    """AdamW's state is 8 bytes per trainable parameter exactly (sentkit's optimizer, fused where it can), the
    gradients 4; the trainable count with LoRA is the adapters'."""
    from sentkit.models.lora import add_lora
    from sentkit.training.step import make_optimizer

    for lora in (0, 4):
        model = hf_model("bert")
        if lora:
            add_lora(model, lora)
        shape = P.ModelShape.from_config(model.config)
        plan = P.plan(shape, P.RunSettings("mlm", batch_size=2, seq_len=8, lora_r=lora))
        opt = make_optimizer(model, 1e-3, 0.0)
        ids = torch.randint(0, 101, (2, 8))
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        trainable = [p for p in model.parameters() if p.requires_grad]
        assert plan.trainable == sum(p.numel() for p in trainable)
        assert plan.gradients == sum(p.grad.numel() * p.grad.element_size() for p in trainable if p.grad is not None)
        state = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values() if t.dim() > 0)
        assert plan.optimizer == state == 8 * plan.trainable


def test_one_blocks_activations_by_hand() -> None:
    """h 8, I 32, 2 heads, sequences of 4, 8 tokens, dropout, on a CPU: per token attention 4 (8 + 24 + 8) + 8
    = 168 and scores 2 x 4 x (4 + 1 + 4) = 72; MLP 4 (8 + 64) + 8 = 296; norms 2 x 4 x 8 = 64: 600 bytes a token.
    In bf16: attention 2 (3 x 8 + 24 + 8) + 8 = 120, scores 2 x 4 x (2 + 1 + 2) = 40, MLP 2 (8 + 64) + 8 = 152,
    norms 64: 376; with LoRA (dropout) each of the 6 layers' inputs (8 x 5 + 32 = 72) adds 4 + 1 + 2 = 7 bytes."""
    shape = P.ModelShape("bert", hidden=8, layers=1, heads=2, intermediate=32, vocab=10)
    fp32 = P.RunSettings("mlm", batch_size=2, seq_len=4)
    assert P.layer_activations(shape, fp32, 8, 4) == 8 * 600
    bf16 = P.RunSettings("mlm", batch_size=2, seq_len=4, precision="bf16")
    assert P.layer_activations(shape, bf16, 8, 4) == 8 * 376
    lora = P.RunSettings("mlm", batch_size=2, seq_len=4, precision="bf16", lora_r=2, base_precision="bf16")
    assert P.layer_activations(shape, lora, 8, 4) == 8 * (376 + 72 * 7)
    on_gpu = P.RunSettings("mlm", batch_size=2, seq_len=4, device="cuda")  # flash attention: no scores
    assert P.layer_activations(shape, on_gpu, 8, 4) == 8 * (600 - 72)


def test_checkpointing_lora_and_fsdp_lower_what_they_should() -> None:
    shape = P.ModelShape.from_config(hf_config("bert"))
    base = P.RunSettings("mlm", batch_size=8, seq_len=64)
    plain = P.plan(shape, base)
    ckpt = P.plan(shape, P.apply(base, {"gradient_checkpointing": True}, 1))
    assert ckpt.activations < plain.activations and ckpt.weights == plain.weights
    fsdp = P.plan(shape, P.apply(base, {"distributed": "fsdp"}, 4))
    assert fsdp.optimizer == -(-8 * plain.trainable // 4)  # sharded 4 ways
    ddp = P.plan(shape, P.apply(base, {}, 4))
    assert ddp.gradients == 2 * 4 * plain.trainable  # the gradients and DDP's buckets


# ----------------------------------------------------------------------------- sizes, budgets, fixes
@pytest.mark.parametrize(
    ("text", "size"),
    [("24GB", 24 * 10**9), ("24GiB", 24 * 2**30), ("80G", 80 * 2**30), ("512MB", 512 * 10**6), ("1000", 1000)],
)
def test_sizes(text: str, size: int) -> None:
    assert P.parse_size(text) == size


@pytest.mark.parametrize("text", ["24XB", "GB", "-3GB", "0", "24 G B", ""])
def test_a_bad_size_is_an_input_error(text: str) -> None:
    with pytest.raises(InputError, match="--gpu-memory"):
        P.parse_size(text)


def test_the_cheapest_fix_comes_in_order_of_cost() -> None:
    """Checkpointing when it is enough; LoRA when only it is; a smaller micro-batch (GradCache for a contrastive
    method) when neither is; FSDP over more processes last; each returned with its plan, which fits."""
    shape = P.ModelShape.from_config(hf_config("bert"))
    s = P.RunSettings("simcse", batch_size=64, seq_len=128, seqs_per_unit=2, contrastive=True, device="cuda")
    plain = P.plan(shape, s)
    ckpt = P.plan(shape, P.apply(s, {"gradient_checkpointing": True}, 1))
    fix = P.cheapest_fix(shape, s, ckpt.total)
    assert fix is not None and fix.changes == {"gradient_checkpointing": True} and fix.plan == ckpt
    assert P.fits(fix.plan, ckpt.total) and not P.fits(plain, ckpt.total)
    assert "--set gradient_checkpointing=true" in P.verdict(shape, plain, ckpt.total)
    fix = P.cheapest_fix(shape, s, ckpt.total - 1)  # past checkpointing: LoRA, then smaller micro-batches
    assert fix is not None and "gradient_checkpointing" not in fix.changes
    assert P.fits(fix.plan, ckpt.total - 1)
    order = [c for c, _ in P.candidates(s)]
    assert order[:3] == [
        {"gradient_checkpointing": True},
        {"lora_r": 16, "base_precision": "bf16"},
        {"grad_accum": 2, "grad_cache": True},
    ]
    assert ({"distributed": "fsdp"}, 2) in P.candidates(s)
    assert P.cheapest_fix(shape, s, 1) is None
    assert "no change tried fits" in P.verdict(shape, plain, 1)


# ----------------------------------------------------------------------------- the command line
def tiny_bert(folder: Path) -> Path:
    from check_support import bert_mlm

    return bert_mlm(folder, hidden=64, layers=2, heads=4, intermediate=256, max_positions=512, dropout=0.1)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from check_support import write_corpus

    root = tmp_path_factory.mktemp("plan")
    return {"model": tiny_bert(root / "bert"), "corpus": write_corpus(root / "corpus", 20, 500), "root": root}


def test_plan_prints_the_table_and_trains_nothing(
    workspace: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = ["train", "--method", "mlm", "--model", str(workspace["model"]), "--set", "seq_len=256"]
    assert main([*args, "--corpus", str(workspace["corpus"]), "--out", str(out), "--plan"]) == 0
    printed = capsys.readouterr().out
    shape = P.ModelShape.from_config(json.loads((workspace["model"] / "config.json").read_text()))
    expected = P.plan(shape, P.RunSettings("mlm", batch_size=32, seq_len=256, head_share=0.15, device="cpu"))
    assert P.table(expected) in printed  # the plan of the run as the loop would make it, on this CPU
    for row in ("weights", "gradients", "optimizer state", "activations", "overhead", "total per process"):
        assert row in printed
    assert not out.exists()  # nothing prepared or trained
    assert main([*args, "--plan", "--gpu-memory", "1TB"]) == 0  # no corpus or out needed to plan
    assert "fits in 1000.0 GB" in capsys.readouterr().out
    on_gpu = P.RunSettings("mlm", batch_size=32, seq_len=256, head_share=0.15, device="cuda", precision="bf16")
    budget = P.plan(shape, P.apply(on_gpu, {"gradient_checkpointing": True}, 1)).total
    assert main([*args, "--gpu-memory", str(budget)]) == 0  # --gpu-memory plans on its own, for a GPU
    line = capsys.readouterr().out.splitlines()[-1]
    assert line == P.verdict(shape, P.plan(shape, on_gpu), budget)
    assert line.startswith("does not fit in ") and "cheapest change: --set gradient_checkpointing=true (est. " in line


def test_plan_for_several_processes(workspace: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["train", "--method", "mlm", "--model", str(workspace["model"]), "--plan", "--processes", "2"]
    assert main(args) == 0
    shape = P.ModelShape.from_config(json.loads((workspace["model"] / "config.json").read_text()))
    expected = P.plan(shape, P.RunSettings("mlm", batch_size=32, seq_len=128, head_share=0.15, world_size=2))
    assert P.table(expected) in capsys.readouterr().out and "16 units a micro-batch on each of 2 processes" in P.table(
        expected
    )
    assert main(["train", "--method", "mlm", "--processes", "2"]) == 2
    assert "--processes only applies to --plan" in capsys.readouterr().err


def test_a_bad_gpu_memory_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--method", "mlm", "--plan", "--gpu-memory", "lots"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "sentkit train: error: --gpu-memory: cannot read 'lots' as a size; write it like 24GB, 24GiB, "
        "80G or a number of bytes"
    ]


def test_plan_of_a_method_outside_the_loop_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--method", "fastsent", "--plan"]) == 2
    assert "memory plan covers the transformer loop's methods" in capsys.readouterr().err


def test_every_run_starts_with_its_plan_line() -> None:
    shape = P.ModelShape.from_config(hf_config("bert"))
    from sentkit.training.recipes.mlm import MLMConfig

    cfg = MLMConfig(corpus="-", out="-", seq_len=64, batch_size=4)
    line = P.run_line(cfg, "mlm", hf_config("bert"), "cpu", 1)
    p = P.plan(shape, P.RunSettings.from_config(cfg, "mlm", shape))
    assert line == P.summary_line(p) and line.startswith("memory plan: ~")
    assert "weights" in line and "grads" in line and "optimizer" in line and "activations" in line
    assert P.run_line(cfg, "whiten", hf_config("bert"), "cpu", 1).startswith("memory plan: not available")


# ----------------------------------------------------------------------------- against a measured peak
# The child's peak is VmHWM, its own address space's high-water mark. Not ru_maxrss: Linux carries the parent's
# resident size across fork and exec into it, so under a large pytest process (2.6 GB in the whole suite) every
# child read the parent's size.
CHILD = """
import re, sys
from pathlib import Path
from sentkit.cli.main import main
rc = main(sys.argv[1:])
hwm = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1))
print("PEAK", hwm * 1024, rc)
"""
MEASURED = {  # activations well above the process's baseline, each in its own process, two steps
    "mlm": ("mlm", {"seq_len": 512, "batch_size": 8}),
    "mlm+ckpt": ("mlm", {"seq_len": 512, "batch_size": 8, "gradient_checkpointing": True}),
    "simcse": ("simcse", {"text_unit": "span", "min_tokens": 256, "max_len": 256, "batch_size": 16, "pooling": "mean"}),
}


@pytest.fixture(scope="module")
def measured(workspace: dict[str, Path]) -> dict[str, tuple[int, P.Plan]]:
    """`sentkit train` of each setting in its own process (all at once), its peak RSS (VmHWM, in the child)
    and the plan of the same run."""
    from sentkit.core.methods import get_method

    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    shape = P.ModelShape.from_config(json.loads((workspace["model"] / "config.json").read_text()))
    procs = {}
    for name, (method, sets) in MEASURED.items():
        argv = ["train", "--method", method, "--model", str(workspace["model"]), "--corpus", str(workspace["corpus"])]
        argv += ["--out", str(workspace["root"] / name), "--max-steps", "2", "--set", "progress=false"]
        argv += ["--set", "device=cpu"] + [
            a for k, v in sets.items() for a in ("--set", f"{k}={v if isinstance(v, str) else json.dumps(v)}")
        ]
        procs[name] = subprocess.Popen(
            [sys.executable, "-c", CHILD, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
    results = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        peak = [line.split() for line in out.splitlines() if line.startswith("PEAK")]
        assert proc.returncode == 0 and peak and peak[0][2] == "0", err[-3000:]
        method, sets = MEASURED[name]
        cfg = get_method(method).config_cls(corpus="-", out="-", **sets)
        results[name] = (int(peak[0][1]), P.plan(shape, P.RunSettings.from_config(cfg, method, shape)))
    return results


@pytest.mark.parametrize("name", list(MEASURED))
def test_the_plan_is_within_a_quarter_of_the_measured_peak(name: str, measured: dict[str, tuple[int, P.Plan]]) -> None:
    peak, plan = measured[name]
    assert plan.activations > plan.overhead / 4  # the activations weigh in the total, so a wrong formula shows
    assert abs(plan.total - peak) <= 0.25 * peak, (name, plan.total / 2**20, peak / 2**20, plan.rows())


def test_checkpointing_lowers_the_measured_peak_as_planned(measured: dict[str, tuple[int, P.Plan]]) -> None:
    (plain, p0), (ckpt, p1) = measured["mlm"], measured["mlm+ckpt"]
    assert ckpt < plain and p1.total < p0.total


def test_the_methods_page_and_its_json_are_the_scripts_output() -> None:
    """docs/methods.md's "Which settings fit which sizes" and benchmarks/results/train_memory_plan.json are what
    scripts/plan_table.py makes from the plan now."""
    import plan_table

    assert plan_table.main(["--check"]) == 0


def test_the_training_memory_table_of_the_benchmarks_page_is_its_json() -> None:
    """docs/benchmarks.md's table of measured peaks beside the plan is what `benchmarks/train_memory.py --docs` writes
    from benchmarks/results/train_memory.json, and each row's plan is the plan of that run now."""
    repo = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(repo / "benchmarks"))
    try:
        import train_memory
    finally:
        sys.path.remove(str(repo / "benchmarks"))
    result = json.loads((repo / "benchmarks" / "results" / "train_memory.json").read_text())
    page = (repo / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert train_memory.docs_with(page, result) == page
    config = {"model_type": "bert", "vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2}
    config |= {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072}
    config |= {"hidden_dropout_prob": 0.1}
    for row in result["rows"]:
        assert row["plan_mb"] == pytest.approx(train_memory.plan_of(row, config)), row["setting"]
        assert row["plan_mb"]["trainable"] == row.get("trainable", row["plan_mb"]["trainable"])


def test_the_loop_logs_the_plan_line_at_the_start(workspace: dict[str, Path], tmp_path: Path) -> None:
    """The run's train.log holds `run_line` of its config."""
    from sentkit.training.recipes.mlm import MLMConfig

    sets = {"seq_len": 32, "batch_size": 2}
    args = ["train", "--method", "mlm", "--model", str(workspace["model"]), "--corpus", str(workspace["corpus"])]
    args += ["--out", str(tmp_path / "run"), "--max-steps", "1", "--set", "progress=false", "--set", "device=cpu"]
    assert main([*args, *(a for k, v in sets.items() for a in ("--set", f"{k}={v}"))]) == 0
    config = json.loads((workspace["model"] / "config.json").read_text())
    cfg = MLMConfig(corpus="-", out="-", device="cpu", **sets)  # type: ignore[arg-type]
    log = (tmp_path / "run" / "train.log").read_text()
    line = P.run_line(cfg, "mlm", config, "cpu", 1)
    assert line.startswith("memory plan: ~") and line in log


def test_plan_of_llm2vec_gives_each_phase(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """llm2vec plans its MNTP phase (mntp_batch_size x seq_len) and its SimCSE phase (simcse_batch_size x 2 x
    max_len) with the recipe's shared LoRA, base precision and checkpointing settings."""
    from support.decoders import tiny_decoder

    model = tiny_decoder("gpt2", tmp_path / "gpt2")
    sets = ["--set", "mntp_batch_size=8", "--set", "simcse_batch_size=4", "--set", "gradient_checkpointing=true"]
    assert main(["train", "--method", "llm2vec", "--model", str(model), "--plan", *sets]) == 0
    printed = capsys.readouterr().out
    shape = P.ModelShape.from_config(json.loads((model / "config.json").read_text()))
    seq = min(128, shape.positions)  # the recipe's 128 tokens, within the model's positions
    for method, kw in (("mntp", {"seq_len": seq, "head_share": 0.2}), ("simcse", {"seq_len": seq, "seqs_per_unit": 2})):
        batch = 8 if method == "mntp" else 4
        s = P.RunSettings(method, batch_size=batch, gradient_checkpointing=True, contrastive=method == "simcse", **kw)
        assert f"memory plan ({method}, per process" in printed and P.table(P.plan(shape, s)) in printed
