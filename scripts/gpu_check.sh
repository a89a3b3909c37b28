#!/usr/bin/env bash
# Check sentkit on this machine's GPU(s) in one command: bf16/fp16 against fp32, resume bit for bit,
# gradient caching with dropout on CUDA generators, encode and training-step throughput, and with 2+
# GPUs a 2-process NCCL run killed and resumed. About 3-5 minutes on one GPU. What it checks and how
# to read the result: docs/benchmarks.md, "GPU check".
#
#   bash scripts/gpu_check.sh [--out DIR] [--steps N] [--keep]   # exit 0 passed, 1 a check failed, 3 no GPU
#   bash scripts/gpu_check.sh --cpu                              # the same checks on the CPU, tiny (tests the script)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec "$PY" scripts/gpu_check.py "$@"
