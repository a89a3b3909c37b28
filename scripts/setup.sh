#!/usr/bin/env bash
# Create .venv and install sentkit with everything its tests need. Works offline here: it only
# reaches PyPI (and Debian's archive for WordNet). Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# torch first, pinned: a bare `torch` requirement can pull a multi-GB CUDA build. From pip's own
# index by default (the CPU build where CI runs). On a GPU machine, a CUDA build from PyTorch's index:
#   SENTKIT_TORCH_INDEX=https://download.pytorch.org/whl/cu128 bash scripts/setup.sh
# (passed to pip as --index-url; a torch of another build already in .venv is replaced).
TORCH="torch==${SENTKIT_TORCH_VERSION:-2.13.0}"
if [ -n "${SENTKIT_TORCH_INDEX:-}" ]; then
  want=$(basename "${SENTKIT_TORCH_INDEX%/}")   # e.g. cu128: the local version label of that index's builds
  have=$(.venv/bin/python -c "import torch; print(torch.__version__.partition('+')[2])" 2>/dev/null || true)
  if [ "$have" != "$want" ]; then
    .venv/bin/pip uninstall -q -y torch >/dev/null 2>&1 || true
  fi
  .venv/bin/pip install -q --disable-pip-version-check --index-url "$SENTKIT_TORCH_INDEX" "$TORCH"
else
  .venv/bin/pip install -q --disable-pip-version-check "$TORCH"
fi
.venv/bin/pip install -q --disable-pip-version-check -e ".[dev]"
# WordNet for the DictRep method (Debian's wordnet-base); tests that need it skip without it.
if [ ! -f /usr/share/wordnet/data.noun ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq wordnet-base >/dev/null) || echo "note: could not install wordnet-base; DictRep tests will skip"
fi
# Chromium for the browser tests of `sentkit explore` (Debian's package: Playwright drives the system
# browser and never downloads one); those tests skip without it.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "note: could not install chromium; the explore browser tests will skip"
fi
echo "sentkit installed in $(pwd)/.venv"
