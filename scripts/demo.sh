#!/usr/bin/env bash
# The main job: build, then run vanilla speculative decoding (greedy and sampled) against plain
# decoding on the built-in model pair. Until trained demo models ship, that pair is a random-weight
# target and a noisy copy of it (see README: it shows tau and losslessness, not a speedup).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target 02_vanilla_speculative
./build/release/02_vanilla_speculative
