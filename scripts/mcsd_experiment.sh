#!/usr/bin/env bash
# Improved MCSD in miniature (docs/methods/mcsd.md): the demo target with the small (0.6M) and mid
# (1.5M) drafters through the benchmark harness on 5 held-out prompts — Table 2 (acceptance
# alpha_longest = longest accepted draft / maximum draft length, summed over steps: SD vs MCSD (4,2,2,1)
# vs target-initialised (2,4,3,1,1)) at T = 0.7, the dynamic shape (forks of 16 chains, depth 4,
# draft-initialised, and 2 seeds x 8 chains), the static target-initialised acceptance at T = 0 and 1,
# and walltime speedups; at T = 0 on 20 prompts the paper's two top seeds against one (methods_mcsd_t0.json)
# and what they cost (mcsd_study greedy); then examples/bench/mcsd_study: what target-initialisation's loss is (the first
# two tokens' joint law against the exact law, the target's log-likelihood of continuations), the
# decision models with the draft-initialised fork and with the paper's framework (target-drawn seeds, a
# chain below each, early stop), and the sliced mask's cost.
# Writes build/mcsd/ (table.csv, table.json, report.html, *.txt). About an hour on 2 busy cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target specdec_bench mcsd_study
out=build/mcsd
mkdir -p "$out"
./build/release/specdec_bench --methods examples/bench/methods_mcsd.json --split test \
  --n-prompts 5 --repeats 1 --temperatures 0,0.7,1 --threads 1 --out "$out" "$@" | tee "$out/bench.txt"
# T = 0 (the paper's greedy runs): the target's two most likely tokens as seeds, drafts by top-k or sampled.
./build/release/specdec_bench --methods examples/bench/methods_mcsd_t0.json --split test \
  --n-prompts 20 --repeats 1 --temperatures 0 --threads 1 --out "$out/t0" | tee "$out/bench_t0.txt"
./build/release/mcsd_study greedy 40 small | tee "$out/greedy_small.txt"
./build/release/mcsd_study greedy 40 mid | tee "$out/greedy_mid.txt"
./build/release/mcsd_study law 1 3000 | tee "$out/law_t1.txt"
./build/release/mcsd_study law 0.7 3000 | tee "$out/law_t07.txt"
./build/release/mcsd_study law 0.7 8000 "The United States of" | tee "$out/law_t07_us.txt"
./build/release/mcsd_study likelihood 100 | tee "$out/likelihood.txt"
./build/release/mcsd_study decision small | tee "$out/decision_small.txt"
./build/release/mcsd_study mask | tee "$out/mask.txt"
