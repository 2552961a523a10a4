#!/usr/bin/env bash
# GLIDE with a CAPE in miniature (docs/methods/glide_cape.md): the demo target with the GLIDE drafter
# (models/glide) and its ablation without cross-attention (models/vanilla), both trained by
# `train_demo glide <name>` with the same data and budget. One run of the benchmark harness on the
# held-out prompts (odd lines of data/prompts.jsonl), greedy and T = 1: acceptance under speculative
# sampling with gamma = 5, the measured cost ratio and E(Spd) (the paper's Table 1), and walltime
# speedups of the chain, CAPE and the fixed-size ablation. Writes build/glide/ (table.csv,
# table.json, report.html). About 5 minutes on 2 cores; progress with ETA on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target specdec_bench
./build/release/specdec_bench --methods examples/bench/methods_glide.json --split test --n-prompts 30 --repeats 3 \
  --temperatures 0,1 --threads 1 --out build/glide "$@"
