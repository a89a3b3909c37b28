"""sentkit's MNTP loss against llm2vec's own (the oracle of issue 36.4), on a fixed batch of a tiny random Llama.

llm2vec (0.2.3) needs transformers < 4.45, sentkit transformers 5, so the two run in separate environments:

    python3 -m venv /tmp/llm2vec-venv && /tmp/llm2vec-venv/bin/pip install llm2vec==0.2.3 'transformers<4.45' torch
    skpy benchmarks/llm2vec_oracle.py --llm2vec-python /tmp/llm2vec-venv/bin/python [--out DIR]

The script re-runs itself under `--llm2vec-python` with `--oracle`: there it builds the tiny Llama (seeded), saves it,
and computes llm2vec's MNTP loss on a fixed masked batch: `LlamaBiForMNTP` (llm2vec.models.bidirectional_llama, the
model its experiments/run_mntp.py trains) called with the labels, i.e. transformers' shifted causal-LM loss over
llm2vec's bidirectional Llama. Back here it loads the saved weights with transformers 5, switches them to
bidirectional attention as `--method mntp` does (config ``is_causal = False``) and computes sentkit's loss with
`MNTPModule.chunk_loss` (sentkit.models.decoder.mntp_sum). It prints both and exits 1 when they differ by more than
1e-5. Nothing of llm2vec is imported into sentkit."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

VOCAB, BATCH, LENGTH = 128, 3, 16
MASKED = [(0, 0), (0, 3), (0, 15), (1, 1), (1, 6), (1, 7), (2, 2), (2, 9), (2, 14)]  # (0, 0): nothing predicts it
MASK_ID = 5


def fixed_batch() -> tuple[list[list[int]], list[list[int]]]:
    """(masked ids, labels) [BATCH, LENGTH]: -100 where not masked; masked tokens replaced by MASK_ID."""
    import torch

    ids = torch.randint(6, VOCAB, (BATCH, LENGTH), generator=torch.Generator().manual_seed(1))
    labels = torch.full_like(ids, -100)
    for r, c in MASKED:
        labels[r, c] = ids[r, c]
        ids[r, c] = MASK_ID
    return ids.tolist(), labels.tolist()


def oracle(out: Path) -> None:
    """In llm2vec's environment: the model saved at `out/model`, llm2vec's loss written to `out/oracle.json`."""
    from importlib.metadata import version

    import torch
    import transformers
    from llm2vec.models.bidirectional_llama import LlamaBiForMNTP
    from transformers import LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attention_dropout=0.0,
        tie_word_embeddings=False,
    )
    model = LlamaBiForMNTP(config).eval()
    ids, labels = fixed_batch()
    with torch.no_grad():
        loss = model(
            input_ids=torch.tensor(ids),
            attention_mask=torch.ones(BATCH, LENGTH, dtype=torch.long),
            labels=torch.tensor(labels),
        ).loss
        causal = transformers.LlamaForCausalLM(config).eval()
        causal.load_state_dict(model.state_dict())
        causal_loss = causal(input_ids=torch.tensor(ids), labels=torch.tensor(labels)).loss
    causal.save_pretrained(out / "model")  # the same weights, as a plain Llama checkpoint
    (out / "oracle.json").write_text(
        json.dumps(
            {
                "llm2vec": version("llm2vec"),
                "transformers": transformers.__version__,
                "torch": torch.__version__,
                "loss": float(loss),
                "causal_loss": float(causal_loss),
            },
            indent=2,
        )
    )


def sentkit_loss(model_dir: Path, attention: str) -> float:
    import torch
    from transformers import AutoModelForCausalLM

    from sentkit.models.decoder import set_attention
    from sentkit.training.recipes.mntp import MNTPModule

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    set_attention(model, attention)
    module = MNTPModule(model).eval()
    ids, labels = fixed_batch()
    with torch.no_grad():
        total = module.chunk_loss(torch.tensor(ids), torch.tensor(labels), None, torch.arange(BATCH))
    counted = sum(1 for r, c in MASKED if c > 0)
    return float(total) / counted


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--llm2vec-python", help="the interpreter of an environment with llm2vec installed")
    ap.add_argument("--oracle", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help="folder for the model and oracle.json (default: a temporary one)")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="llm2vec-oracle-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.oracle:
        oracle(out)
        return 0
    if not args.llm2vec_python:
        ap.error("--llm2vec-python is required")
    subprocess.run([args.llm2vec_python, __file__, "--oracle", "--out", str(out)], check=True)
    ref = json.loads((out / "oracle.json").read_text())
    bi, causal = sentkit_loss(out / "model", "bidirectional"), sentkit_loss(out / "model", "causal")
    result = {
        **ref,
        "sentkit_bidirectional": bi,
        "sentkit_causal": causal,
        "diff_bidirectional": abs(bi - ref["loss"]),
        "diff_causal": abs(causal - ref["causal_loss"]),
    }
    print(json.dumps(result, indent=2))
    # both must agree, and attention must matter (else the comparison would not test the bidirectional switch)
    ok = result["diff_bidirectional"] < 1e-5 and result["diff_causal"] < 1e-5 and abs(bi - causal) > 1e-4
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
