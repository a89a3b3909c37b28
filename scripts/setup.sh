#!/usr/bin/env bash
# Create .venv and install sentkit with everything its tests need. Works offline here: it only
# reaches PyPI (and Debian's archive for WordNet). Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# torch first, pinned: a bare `torch` requirement can pull a multi-GB CUDA build.
.venv/bin/pip install -q --disable-pip-version-check "torch==${SENTKIT_TORCH_VERSION:-2.13.0}"
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
