#!/usr/bin/env bash
# Every method of the README's table on the demo target and on its cost-scaled copies (docs/widening.md):
# the 14M target, then the same target widened to a 110M and a 1B model's cost (same outputs, bf16,
# generated rows), one run of the benchmark harness per scale with every method side by side, greedy and
# T = 1: tau, nodes per step, walltime speedup against plain decoding of the same target. Then
# scale_report draws build/scale/scale.svg (speedup against the target's cost, one line per method) and
# writes build/scale/scale.md and scale.html. A simulation device: acceptance is the 14M demo pair's at
# every scale; only the cost is the bigger model's (every table says so).
#
#   bash scripts/scale_experiment.sh [--scales "14m 110m 1b"] [--n-prompts 8] [extra specdec_bench flags]
#
# On a 2-vCPU AMD EPYC (Zen 4), 2 threads: 14M about 1 minute, 110M-cost about 4, 1B-cost about 30.
# The 7b preset (13 GB of bf16 matrices) runs too (--scales 7b) where memory allows.
set -euo pipefail
cd "$(dirname "$0")/.."
scales="14m 110m 1b"
n_prompts=8
extra=()
while (($#)); do
  case "$1" in
    --scales) scales="$2"; shift 2 ;;
    --n-prompts) n_prompts="$2"; shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done
bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target specdec_bench scale_report
out=build/scale
runs=()
for s in $scales; do
  flags=()
  [ "$s" = 14m ] || flags=(--target-scale "$s")
  echo "== scale $s ($(date +%H:%M:%S))" >&2
  start=$SECONDS
  ./build/release/specdec_bench --models models --methods examples/bench/methods_scale.json --split test \
    --n-prompts "$n_prompts" --max-new 64 --repeats 1 --temperatures 0,1 --threads "$(nproc)" \
    --out "$out/$s" "${flags[@]}" "${extra[@]}" | tee "$out/$s.txt"
  echo "== scale $s took $((SECONDS - start)) s" | tee -a "$out/$s.txt" >&2
  runs+=("$out/$s")
done
./build/release/scale_report "$out" "${runs[@]}"
