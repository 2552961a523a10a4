#!/usr/bin/env bash
# Times greedy speculative generation on the GPU (examples/bench/bench_cuda_spec.cu) for the demo target
# and its 7B-cost widening (a simulation: the demo target's outputs at Llama-2-7B's cost), in one call that
# ends within GPU_SPEC_SECONDS (default 420).
#
#   bash scripts/gpu_spec_bench.sh [OUT_DIR [bench_cuda_spec flags...]]   # OUT_DIR default: $OUT, else build/gpu_spec
#
# Binary: BIN (default build) holding bench_cuda_spec built with CUDA for this GPU (carried from a machine
# with nvcc: `cmake -S . -B build -DCMAKE_CUDA_ARCHITECTURES=90 -DBUILD_TESTING=OFF && cmake --build build
# --target bench_cuda_spec`); where it is missing or does not start (another CUDA version), it is built here.
# Writes to OUT_DIR: spec.csv and spec.md (the table), bench.log (table and progress), summary.txt (one line
# per step with its exit code), env.txt (nvidia-smi). Exits with the benchmark's code: 2 = not lossless.
# Every method at both targets with 2 timed passes (--repeats 2; a later --repeats in the flags wins): about
# 2-3 minutes on an H200 by estimate, most of it the 7B-cost target's widening and its methods.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="${1:-${OUT:-build/gpu_spec}}"
(( $# > 0 )) && shift
mkdir -p "$out"
out="$(cd "$out" && pwd)"
bin="${BIN:-build}"
deadline=$(( $(date +%s) + ${GPU_SPEC_SECONDS:-420} ))
: > "$out/summary.txt"

source "$root/scripts/gpu_step.sh"  # step NAME CAP LOG COMMAND...

nvidia-smi > "$out/env.txt" 2>&1
nproc >> "$out/env.txt"
find_libs "$bin/bench_cuda_spec"
if ! "$bin/bench_cuda_spec" --help > /dev/null 2>&1; then
    arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')"
    bin=build/gpu_spec_build
    step configure 120 configure.log cmake -S . -B "$bin" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${arch:-90}" \
        -DBUILD_TESTING=OFF &&
        step build 300 build.log cmake --build "$bin" -j "$(nproc)" --target bench_cuda_spec
    [ -x "$bin/bench_cuda_spec" ] || { echo "$bin/bench_cuda_spec could not be built (build.log)" | tee -a "$out/summary.txt"; exit 1; }
fi
step bench 240 bench.log "$bin/bench_cuda_spec" --repeats 2 --out "$out" "$@"
rc=$?
cat "$out/bench.log"
cat "$out/summary.txt"
exit $rc
