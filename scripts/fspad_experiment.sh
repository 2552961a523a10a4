#!/usr/bin/env bash
# FSPAD in miniature (docs/methods/eagle_fspad.md): the demo target with EAGLE's feature drafter
# (models/eagle) and FSPAD's (models/fspad) in EAGLE-2's dynamic tree, full budget (60 tokens, depth 6,
# top-10: Table 1) and half (30, 6, 5: Table 2), the ablations FS only / PAD only (Table 3; trained here
# into models/ablations/ when missing, with the same data, steps and seed), and, for one footing, vanilla
# speculative decoding with the small LM and GLIDE + CAPE. Through the benchmark harness on the held-out
# prompts (odd lines of data/prompts.jsonl), greedy and T = 1 (SampleAndMatch: exact for top-k trees),
# one thread: tau and walltime speedup per method, and each drafter's time per call next to the target's.
# Writes build/fspad/ (table.csv, table.json, report.html). About 15 minutes on 2 cores, plus ~30 to
# train the two ablations; progress with ETA on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target specdec_bench train_demo
# Training reads the tokenised corpus; `train_demo tokenizer` writes it (and rewrites the committed
# tokenizer identically: its training is deterministic).
[ -f build/data/train.bin ] || ./build/release/train_demo tokenizer
missing=()
for a in fspad_fs_only fspad_pad_only; do
  [ -f "models/ablations/$a/model.safetensors" ] || missing+=("ablations/$a")
done
[ ${#missing[@]} -eq 0 ] || ./build/release/train_demo eagle "${missing[@]}"
# The harness reads drafters by folder name under --models: one folder with every model this needs.
models=build/fspad/models
mkdir -p "$models"
for m in target small glide eagle fspad; do ln -sfn "$PWD/models/$m" "$models/$m"; done
for a in fspad_fs_only fspad_pad_only; do ln -sfn "$PWD/models/ablations/$a" "$models/$a"; done
./build/release/specdec_bench --models "$models" --methods examples/bench/methods_fspad.json --split test \
  --n-prompts 20 --repeats 2 --temperatures 0,1 --threads 1 --out build/fspad "$@"
