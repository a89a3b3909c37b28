#!/usr/bin/env bash
# Check sentkit on this machine's GPU(s) in one command: bf16/fp16 against fp32, resume bit for bit,
# gradient caching with dropout on CUDA generators, the throughput of encode (fp32, and bf16 / fp16 with their
# dtypes and vectors checked against fp32) and of DeCLUTR, SimCSE and
# MLM training steps (BERT-base, model FLOPs as a share of the GPU's measured matmul rate, against
# floors a CPU fallback, a silent fp32 or a stall per step fails), with 2+ GPUs a 2-process NCCL
# run killed and resumed, and the memory plan (sentkit train --plan) against torch.cuda.max_memory_allocated for
# LoRA steps on a bf16 base with checkpointing (and, with 2+ GPUs, FSDP steps; skipped on a CPU). What it checks, how long it takes and how to read the result:
# docs/benchmarks.md, "GPU check".
#
#   bash scripts/gpu_check.sh [--out DIR] [--steps N] [--keep] [--only CHECK,...]   # DIR: default $OUT when set, else /tmp/sentkit-gpu-check
#   bash scripts/gpu_check.sh --cpu --out DIR                     # every check that runs on a CPU, tiny (tests the script)
#   SENTKIT_GPU_CHECK_SLOW=declutr:10 bash scripts/gpu_check.sh ...   # stretch that check's steps 10x: its floor must fail
#
# Results: a table on stdout and DIR/gpu_check.json. Exit status (a failure before the checks is one
# line on stderr):
#   0 every check passed (or was skipped)   1 a check failed          2 a bad command line
#   3 no GPU                                4 no Python environment   5 a package it needs is missing
#   6 torch is a CPU-only build on a machine with an NVIDIA GPU
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA_SETUP="SENTKIT_TORCH_INDEX=https://download.pytorch.org/whl/cu128 bash scripts/setup.sh"
if [ -n "${PYTHON:-}" ]; then
  PY=$PYTHON
elif [ -x .venv/bin/python ]; then
  PY=.venv/bin/python
else
  echo "gpu_check: error: no Python environment: $(pwd)/.venv is missing; make it with \`$CUDA_SETUP\` (a CUDA build of torch; plain \`bash scripts/setup.sh\` for the CPU one), or set PYTHON to an interpreter that has sentkit's dependencies" >&2
  exit 4
fi
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "gpu_check: error: no Python environment: PYTHON=$PY is not an executable; set PYTHON to an interpreter, or unset it to use .venv" >&2
  exit 4
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's sentkit, whatever the environment holds
exec "$PY" scripts/gpu_check.py "$@"
