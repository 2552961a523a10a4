#!/usr/bin/env bash
# Rebuilds the demo models in models/ from the corpus: the tokenizer, then the target, then the
# drafters (distilled from the target; GLIDE's reads its KV cache). Hyperparameters:
# models/tokenizer.train.json, models/*/train.json.
# Prints progress with ETA and each model's held-out perplexity. About 90 minutes on 2 cores (the target 55-66).
#
#   bash scripts/train_models.sh [--resume] [--checkpoint-every N] [name ...]
# Each run writes its state to build/checkpoints/<name>/ every 100 steps (--checkpoint-every N);
# after an interruption (Ctrl-C, a reboot) the same command with --resume continues every model from
# its last state, bit for bit, and starts the ones that have none.
set -euo pipefail
cd "$(dirname "$0")/.."
flags=()
names=()
while [ $# -gt 0 ]; do
  case "$1" in
    --resume) flags+=(--resume); shift ;;
    --checkpoint-every) flags+=(--checkpoint-every "$2"); shift 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
[ ${#names[@]} -eq 0 ] && names=(target small mid glide vanilla edd vdm eagle fspad eagle_layout)
bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target train_demo
./build/release/train_demo tokenizer
./build/release/train_demo bigram   # Max-Gram's table (CS Drafting), from the tokenised corpus
# A train.json with "glide_cross_attention" is a GLIDE drafter (or its vanilla ablation): `train_demo glide`;
# one with "edd" an EDD drafter (or its VDM baseline): `train_demo edd`. EAGLE's and FSPAD's feature
# drafters (train.json with "feature") train together, on one target forward per step: `train_demo eagle eagle fspad
# eagle_layout` (eagle_layout: EAGLE-1/2's layer, the one `specdec convert --to eagle` exports).
features=()
for name in "${names[@]}"; do
  if grep -q '"feature"' "models/$name/train.json"; then features+=("$name"); continue; fi
  kind=model
  if grep -q '"glide_cross_attention"' "models/$name/train.json"; then kind=glide; fi
  if grep -q '"edd"' "models/$name/train.json"; then kind=edd; fi
  ./build/release/train_demo "$kind" "$name" "${flags[@]}"
done
[ ${#features[@]} -eq 0 ] || ./build/release/train_demo eagle "${features[@]}"
