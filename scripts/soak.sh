#!/usr/bin/env bash
# Soaks the decoding loop: builds tests_loop (Release) and runs only its soak case for many generations,
# printing progress; the case also checks that the resident set after warm-up does not grow by the end.
#
#   bash scripts/soak.sh [generations]      # default 5000 (about 10 s of CPU in Release)
#
# Environment: BUILD_DIR (default build/release), JOBS (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${1:-5000}"
build="${BUILD_DIR:-build/release}"
[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$build" --target tests_loop -j "${JOBS:-1}"
echo "soak: $steps generations"
start=$(date +%s)
SPECDEC_SOAK_STEPS="$steps" "$build/tests_loop" "soak:*" --durations yes
echo "soak: done in $(( $(date +%s) - start )) s"
