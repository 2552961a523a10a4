#!/usr/bin/env bash
# Improved MCSD in miniature (docs/methods/mcsd.md): the demo target with the small (0.6M) and mid
# (1.5M) drafters through the benchmark harness on 5 held-out prompts — Table 2 (acceptance =
# longest accepted draft / maximum draft length: SD vs MCSD (4,2,2,1) vs target-initialised
# (2,4,3,1,1)) at T = 0.7, Table 3 (the dynamic shape: forks of 16 chains, depth 4), Table 4 (the
# target-initialised acceptance at T = 0 and 1 with both drafters) and walltime speedups; then
# examples/11_mcsd: the quality loss of target-initialisation (TV and KL of the first token, the target's
# log-likelihood of continuations), the decision models, and the sliced mask's cost.
# Writes build/mcsd/ (table.csv, table.json, report.html, *.txt). About 20 minutes on 2 busy cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target specdec_bench 11_mcsd
out=build/mcsd
mkdir -p "$out"
./build/release/specdec_bench --methods examples/bench/methods_mcsd.json --split test \
  --n-prompts 5 --repeats 1 --temperatures 0,0.7,1 --threads 1 --out "$out" "$@" | tee "$out/bench.txt"
./build/release/11_mcsd quality small 600 | tee "$out/quality_small.txt"
./build/release/11_mcsd decision small | tee "$out/decision_small.txt"
./build/release/11_mcsd mask | tee "$out/mask.txt"
