#!/usr/bin/env bash
# Rebuilds the demo models in models/ from the corpus: the tokenizer, then the target, then the
# drafters (distilled from the target). Hyperparameters: models/tokenizer.train.json, models/*/train.json.
# Prints progress with ETA and each model's held-out perplexity. About 30 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target train_demo
./build/release/train_demo tokenizer
for m in "${@:-target small mid}"; do
  for name in $m; do ./build/release/train_demo model "$name"; done
done
