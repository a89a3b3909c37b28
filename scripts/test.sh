#!/usr/bin/env bash
# Run the offline test suite (sets up .venv first if it is missing): lint (ruff check), format
# (ruff format --check), types (mypy), then pytest. Arguments go to pytest; SENTKIT_SKIP_LINT=1
# runs pytest alone.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/pytest ] || bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
if [ -z "${SENTKIT_SKIP_LINT:-}" ]; then
  .venv/bin/ruff check src tests benchmarks scripts
  .venv/bin/ruff format --check src tests benchmarks scripts
  .venv/bin/mypy
fi
exec .venv/bin/python -m pytest -q "$@"
