#!/usr/bin/env bash
# The main job: builds, then decodes held-out prompts with the shipped demo target, plainly and with
# vanilla speculative decoding (the shipped small drafter), side by side in one run: the text with
# accepted draft tokens marked, tau, acceptance, and the measured walltime speedup.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target 05_demo
./build/release/05_demo "$@"
