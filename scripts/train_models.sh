#!/usr/bin/env bash
# Rebuilds the demo models in models/ from the corpus: the tokenizer, then the target, then the
# drafters (distilled from the target; GLIDE's reads its KV cache). Hyperparameters:
# models/tokenizer.train.json, models/*/train.json.
# Prints progress with ETA and each model's held-out perplexity. About an hour on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target train_demo
./build/release/train_demo tokenizer
./build/release/train_demo bigram   # Max-Gram's table (CS Drafting), from the tokenised corpus
# A train.json with "glide_cross_attention" is a GLIDE drafter (or its vanilla ablation): `train_demo glide`.
for m in "${@:-target small mid glide vanilla}"; do
  for name in $m; do
    kind=model
    if grep -q '"glide_cross_attention"' "models/$name/train.json"; then kind=glide; fi
    ./build/release/train_demo "$kind" "$name"
  done
done
