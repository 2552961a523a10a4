#!/usr/bin/env bash
# EDD + PCT in miniature (docs/methods/edd_pct.md): the demo target with EDD's one-layer drafter
# (models/edd), its baseline without the soft prompt (models/vdm) and two training ablations (trained
# here into models/ablations/ when missing: cross-entropy instead of KL, a fixed block length), through
# the benchmark harness on the held-out prompts (odd lines of data/prompts.jsonl), greedy as the paper
# (a third drafter, trained here too, keeps its embedding and head trainable instead of frozen):
# Table 1 (VDM vs EDD, chains of 5), Table 2 (VCT, CAPE, EAGLE-2 and PCT trees on EDD) and Table 3
# (PCT's ablations), with tau, alpha = tau / realised depth, draft nodes per step and walltime speedup.
# Writes build/edd/ (table.csv, table.json, report.html). About 15 minutes on 2 cores (5 more per
# ablation drafter to train); progress with ETA on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target specdec_bench train_demo
# Training reads the tokenised corpus; `train_demo tokenizer` writes it (and rewrites the committed
# tokenizer identically: its training is deterministic).
[ -f build/data/train.bin ] || ./build/release/train_demo tokenizer
for a in edd_ce edd_l5 edd_unfrozen; do
  [ -f "models/ablations/$a/model.safetensors" ] || ./build/release/train_demo edd "ablations/$a"
done
# The harness reads drafters by folder name under --models: one folder with every model this needs.
models=build/edd/models
mkdir -p "$models"
for m in target edd vdm; do ln -sfn "$PWD/models/$m" "$models/$m"; done
for a in edd_ce edd_l5 edd_unfrozen; do ln -sfn "$PWD/models/ablations/$a" "$models/$a"; done
./build/release/specdec_bench --models "$models" --methods examples/bench/methods_edd.json --split test \
  --n-prompts 20 --repeats 2 --temperatures 0 --threads 1 --out build/edd "$@"
