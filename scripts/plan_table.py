"""The memory plan of reference setups (`sentkit.training.plan`): docs/methods.md's "Which settings fit which
sizes" and its numbers, benchmarks/results/train_memory_plan.json, both generated here so they reproduce.

The models' configs are the public config.json values of roberta-base, Mistral-7B-v0.1 and Llama-3.2-1B, typed
in below (nothing is downloaded); the settings are sentkit's defaults of each method but for what each setup names.

    python scripts/plan_table.py            # rewrite the JSON and the section of docs/methods.md
    python scripts/plan_table.py --check    # exit 1 if either differs from what this script makes
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sentkit.training.plan import GB, ModelShape, RunSettings, cheapest_fix, fits, plan

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "methods.md"
RESULT = REPO / "benchmarks" / "results" / "train_memory_plan.json"
BEGIN, END = "<!-- plan-table -->", "<!-- /plan-table -->"

# config.json of each model, the keys the plan reads (huggingface.co/<id>/blob/main/config.json)
CONFIGS: dict[str, dict[str, Any]] = {
    "roberta-base": {  # FacebookAI/roberta-base
        "model_type": "roberta",
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "vocab_size": 50265,
        "max_position_embeddings": 514,
        "type_vocab_size": 1,
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
    },
    "mistral-7b": {  # mistralai/Mistral-7B-v0.1
        "model_type": "mistral",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 32000,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        "attention_dropout": 0.0,
    },
    "llama-3.2-1b": {  # meta-llama/Llama-3.2-1B
        "model_type": "llama",
        "hidden_size": 2048,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "intermediate_size": 8192,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": True,
        "attention_dropout": 0.0,
    },
}

LORA = {"lora_r": 16, "base_precision": "bf16", "gradient_checkpointing": True, "precision": "bf16"}
# (name, model, method, the method's settings, processes, GPU memory in GB)
SETUPS: list[tuple[str, str, str, dict[str, Any], int, int]] = [
    (
        "`roberta-base` DeCLUTR, batch 16 x 512",
        "roberta-base",
        "declutr",
        {"batch_size": 16, "max_span_len": 512},
        1,
        24,
    ),
    (
        "`Mistral-7B` MNTP (llm2vec), batch 32 x 128",
        "mistral-7b",
        "mntp",
        {"batch_size": 32, "seq_len": 128, **LORA},
        1,
        80,
    ),
    (
        "`Mistral-7B` SimCSE (llm2vec), batch 128 x 128",
        "mistral-7b",
        "simcse",
        {"batch_size": 128, "max_len": 128, "pooling": "mean", **LORA},
        1,
        80,
    ),
    (
        "`Llama-3.2-1B` MNTP, full, DDP, batch 64 x 512",
        "llama-3.2-1b",
        "mntp",
        {"batch_size": 64, "seq_len": 512, "lora_r": 0, "precision": "bf16", "gradient_checkpointing": True},
        8,
        24,
    ),
    (
        "`Llama-3.2-1B` MNTP, full, FSDP, batch 64 x 512",
        "llama-3.2-1b",
        "mntp",
        {
            "batch_size": 64,
            "seq_len": 512,
            "lora_r": 0,
            "precision": "bf16",
            "gradient_checkpointing": True,
            "distributed": "fsdp",
        },
        8,
        24,
    ),
]


SHORT = {
    "weights": "weights",
    "gradients": "gradients",
    "optimizer state": "optimizer",
    "activations": "activations",
    "overhead": "overhead",
    "total per process": "total",
}


def gb(n: int) -> float:
    return round(n / GB, 1)


def rows() -> list[dict[str, Any]]:
    """Each setup's plan (bytes and GB with one decimal), its budget, whether it fits and the cheapest fix."""
    out = []
    for name, model, method, sets, world, budget_gb in SETUPS:
        shape = ModelShape.from_config(CONFIGS[model])
        settings = RunSettings.from_config(sets, method, shape, device="cuda", world_size=world)
        p = plan(shape, settings)
        budget = budget_gb * GB
        fix = None if fits(p, budget) else cheapest_fix(shape, settings, budget)
        out.append(
            {
                "setup": name,
                "model": model,
                "method": method,
                "settings": sets,
                "processes": world,
                "gpu_memory_gb": budget_gb,
                "parameters": p.parameters,
                "trainable": p.trainable,
                "bytes": dict(p.rows()),
                "gb": {SHORT[k]: gb(v) for k, v in p.rows()},
                "fits": fits(p, budget),
                "fix": None if fix is None else {"change": fix.text(), "total_gb": gb(fix.plan.total)},
            }
        )
    return out


def section(data: list[dict[str, Any]]) -> str:
    """The markdown between the page's markers; every figure references the JSON it comes from."""
    ref = "benchmarks/results/train_memory_plan.json"
    lines = [
        BEGIN,
        "| setup | GPU | trainable | weights | gradients | AdamW state | activations | CUDA context | total "
        "per process | fits? |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = tuple(SHORT.values())
    for i, r in enumerate(data):
        cells = [f"{r['gb'][k]:.1f} <!-- fig: {ref}#setups/{i}/gb/{k} -->" for k in keys]
        gpus = f"{r['processes']} x {r['gpu_memory_gb']} GB" if r["processes"] > 1 else f"{r['gpu_memory_gb']} GB"
        if r["fits"]:
            verdict = "fits"
        elif r["fix"]:
            fig = f"{r['fix']['total_gb']:.1f} <!-- fig: {ref}#setups/{i}/fix/total_gb -->"
            verdict = f"no; `{r['fix']['change']}` gives {fig}"
        else:
            verdict = "no; no change tried fits"
        lines.append(
            f"| {r['setup']} | {gpus} | {r['trainable']:,} of {r['parameters']:,} | "
            + " | ".join(cells)
            + f" | {verdict} |"
        )
    lines.append(END)
    return "\n".join(lines)


def page_with(text: str, new: str) -> str:
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{PAGE} has no {BEGIN} ... {END} section")
    head, rest = text.split(BEGIN, 1)
    return head + new + rest.split(END, 1)[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the JSON or the page differ from this script's")
    args = ap.parse_args(argv)
    data = rows()
    result = (
        json.dumps({"command": "python scripts/plan_table.py", "configs": CONFIGS, "setups": data}, indent=2) + "\n"
    )
    page = page_with(PAGE.read_text(encoding="utf-8"), section(data))
    if args.check:
        stale = [str(p) for p, text in ((RESULT, result), (PAGE, page)) if not p.is_file() or p.read_text() != text]
        if stale:
            print(f"plan_table: out of date: {', '.join(stale)} (run python scripts/plan_table.py)", file=sys.stderr)
            return 1
        return 0
    RESULT.write_text(result)
    PAGE.write_text(page, encoding="utf-8")
    print(section(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
