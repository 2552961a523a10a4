#!/usr/bin/env bash
# The whole test suite: a Release build with warnings as errors, the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer, and a consumer project that finds the installed
# package with find_package(specdec). ctest runs one entry per Catch2 test case (labelled by the
# folder of tests/ it lives in: `ctest --test-dir build/release -L methods`), two at a time; then every
# libFuzzer harness for 10 s from its seeds (`bash scripts/fuzz.sh 600` runs them 10 minutes each).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc)
start=$SECONDS
stage() { echo "== $1 ($((SECONDS - start)) s in)"; }

# ccache where installed: paths are hashed relative to this checkout, so a fresh clone in another folder
# rebuilds only what changed since a build of the same sources (llama.cpp's build uses ccache the same way).
launcher=()
if command -v ccache >/dev/null; then
    export CCACHE_BASEDIR="$PWD"
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

stage "a plain configure, as scripts/demo.sh does (no architectures given)"
cmake -S . -B build/plain -DCMAKE_BUILD_TYPE=Release >/dev/null

stage "Release build + tests"
# Where nvcc is found the CUDA tests and benchmark are compiled too; for sm_90 only here (a compile
# check: each architecture doubles nvcc's time), while scripts/gpu_check.sh builds for the GPU at hand.
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 "${launcher[@]}"
cmake --build build/release -j "$jobs"

stage "find_package(specdec) from an installed copy"
rm -rf build/install build/consumer
cmake --install build/release --prefix build/install >/dev/null
cmake -S tests/consumer -B build/consumer -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/consumer -j "$jobs" >/dev/null
./build/consumer/consumer
./build/consumer/consumer_compiled
./build/consumer/check_acceptor

stage "ASan + UBSan build + tests"
# -Og -g1 (line tables: stack traces keep file and line). Instrumented code is slow to optimise: tests/train
# compiled as one unit in 111 s at -O1 and 46 s at -Og (its tests ran 5.2 s and 7.9 s); the whole sanitizer
# build took 709 s at -O1 and 510 s at -Og, its suite about as long (224 s).
# Test files in batches of 8 (a unity build; 4 by default): 433 s instead of 510 s here, while in Release
# the test files' compile shrank by only 8%.
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-Og -g1 -DNDEBUG" \
    -DSPECDEC_SANITIZE=ON -DSPECDEC_BUILD_EXAMPLES=OFF -DSPECDEC_TEST_BATCH=8 "${launcher[@]}"
cmake --build build/asan -j "$jobs"
ctest --test-dir build/asan --output-on-failure -j "$jobs"

stage "Release tests"
ctest --test-dir build/release --output-on-failure -j "$jobs"

stage "Fuzzers (10 s each, $jobs at a time)"
bash scripts/fuzz.sh 10
stage "all passed"
