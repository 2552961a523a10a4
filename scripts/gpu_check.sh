#!/usr/bin/env bash
# Everything the CUDA backend needs checked on a GPU, in one call that fits in under ten minutes.
#
#   bash scripts/gpu_check.sh [OUT_DIR]     # default: $OUT if set, else build/gpu_check
#   bash scripts/gpu_check.sh --stage-deps  # on a machine with Catch2 (the CPU one): copies its header
#                                           # to build/gpu_deps, for a GPU machine that lacks it
#
# Steps, in order of value, each bounded so that the whole run ends before GPU_CHECK_SECONDS (540):
#   1. build the CUDA tests and benchmark for this GPU's architecture: with CMake when cmake and
#      Catch2's package are here (adding include(cmake/cuda.cmake) to a scratch copy of CMakeLists.txt
#      if the repository's does not include it yet), else — or if that fails — with nvcc directly
#   2. the CUDA tests (the GPU trainer's among them)     -> tests.log
#   3. examples/bench/bench_cuda.cu                      -> bench_cuda.txt, bench_cuda.csv
#   4. scripts/bench_torch.py (HF LlamaForCausalLM bf16) -> bench_torch.txt, bench_torch.csv
#   5. compute-sanitizer memcheck over the tests (all but [generate]) -> memcheck.log
#   6. compute-sanitizer racecheck over the kernel tests (but [gemm]) -> racecheck.log
#   7. Nsight Systems over bench_cuda (7B and 110M, N = 1 and 16), where nsys is found -> nsys.txt
# summary.txt has one line per step with its exit code; env.txt the GPU, driver and tool versions.
# The device tool brings back at most 8 files, so the logs other than summary.txt, tests.log and the
# benchmark tables end up packed in logs.tgz.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

if [ "${1:-}" = "--stage-deps" ]; then
    for d in /usr/include/catch2 /usr/local/include/catch2; do
        if [ -f "$d/catch.hpp" ]; then
            mkdir -p build/gpu_deps/include && cp -r "$d" build/gpu_deps/include/
            echo "staged $d -> build/gpu_deps/include (carry build/gpu_deps to the GPU machine)"
            exit 0
        fi
    done
    echo "no Catch2 v2 header found to stage" >&2
    exit 1
fi

out="${1:-${OUT:-build/gpu_check}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
build="$root/build/gpu_check_build"
mkdir -p "$build"
: > "$out/summary.txt"
deadline=$(( $(date +%s) + ${GPU_CHECK_SECONDS:-540} ))

source "$root/scripts/gpu_step.sh"

# ---- tools ------------------------------------------------------------------------------------------
nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
cuda_home="$(dirname "$(dirname "$nvcc")")"
sanitizer="$(command -v compute-sanitizer || true)"
for c in "$cuda_home/bin/compute-sanitizer" "$cuda_home/compute-sanitizer/compute-sanitizer"; do
    [ -z "$sanitizer" ] && [ -x "$c" ] && sanitizer="$c"
done
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')"
arch="${arch:-90}"
catch2_include=""
for d in /usr/include /usr/local/include "$root/build/gpu_deps/include"; do
    [ -f "$d/catch2/catch.hpp" ] && { catch2_include="$d"; break; }
done
{
    nvidia-smi 2>&1
    "$nvcc" --version 2>&1
    g++ --version 2>&1 | head -1
    command -v cmake >/dev/null && cmake --version | head -1
    echo "profilers: $(find / -xdev \( -name nsys -o -name ncu \) -type f 2>/dev/null | head -4 | tr '\n' ' ')"
    echo "sm_$arch; compute-sanitizer: ${sanitizer:-none}; Catch2: ${catch2_include:-none}"
    python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" 2>&1
} > "$out/env.txt"

# ---- 1. build -----------------------------------------------------------------------------------------
tests="$build/specdec_cuda_tests"
bench="$build/bench_cuda"
rm -f "$tests" "$bench"  # never run binaries left by an earlier call
catch2_config="$(find /usr/lib /usr/local/lib /usr/share /usr/local/share -maxdepth 4 -name 'Catch2Config.cmake' 2>/dev/null | head -1)"
if command -v cmake >/dev/null && [ -n "$catch2_config" ]; then
    src="$root"
    if ! grep -q 'cmake/cuda.cmake' CMakeLists.txt; then
        # The repository does not include the CUDA build yet: build a scratch copy that does.
        src="$build/src"
        rm -rf "$src" && mkdir -p "$src"
        for f in "$root"/*; do
            case "$(basename "$f")" in CMakeLists.txt|build) ;; *) ln -s "$f" "$src/" ;; esac
        done
        cp CMakeLists.txt "$src/"
        printf '\noption(SPECDEC_CUDA "Build the CUDA backend" ON)\ninclude(cmake/cuda.cmake)\n' >> "$src/CMakeLists.txt"
    fi
    generator=()  # Ninja builds the two targets in parallel; make builds them one after the other
    command -v ninja >/dev/null && [ ! -f "$build/Makefile" ] && generator=(-G Ninja)
    step configure 120 configure.log cmake "${generator[@]}" -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" -DSPECDEC_BUILD_EXAMPLES=ON &&
        step build 360 build.log cmake --build "$build" -j "$(nproc)" --target specdec_cuda_tests bench_cuda
fi
if [ ! -x "$tests" ] || [ ! -x "$bench" ]; then
    # No cmake, no Catch2 package, or the CMake build failed: the same flags, straight to nvcc.
    flags="-std=c++20 -O2 -arch=sm_$arch -I$root -I$root/tests --Werror=all-warnings -diag-suppress=1675"
    flags+=" -Xcompiler=-Wall,-Wextra,-Werror${catch2_include:+ -I$catch2_include}"
    step build_nvcc 360 build_nvcc.log bash -c "
        '$nvcc' $flags tests/cuda/main.cpp tests/cuda/*.cu -lcublasLt -o '$tests' & t=\$!
        '$nvcc' $flags examples/bench/bench_cuda.cu -lcublasLt -o '$bench' & b=\$!
        wait \$t; rt=\$?; wait \$b; exit \$(( rt | \$? ))"
fi

# ---- 2..6 ---------------------------------------------------------------------------------------------
if [ -x "$tests" ]; then
    step tests 150 tests.log "$tests" --order rand --warn NoAssertions --durations yes
else
    echo "tests: not built" | tee -a "$out/summary.txt"
fi
if [ -x "$bench" ]; then
    step bench_cuda 150 bench_cuda.txt "$bench" --csv "$out/bench_cuda.csv"
else
    echo "bench_cuda: not built" | tee -a "$out/summary.txt"
fi
if python3 -c "import torch, transformers" 2>/dev/null; then
    step bench_torch 150 bench_torch.txt python3 scripts/bench_torch.py --csv "$out/bench_torch.csv"
else
    echo "bench_torch: skipped, torch or transformers does not import" | tee -a "$out/summary.txt"
fi
if [ -n "$sanitizer" ] && [ -x "$tests" ]; then
    step memcheck 150 memcheck.log "$sanitizer" --tool memcheck --error-exitcode 1 "$tests" "[cuda]~[generate]"
    step racecheck 120 racecheck.log "$sanitizer" --tool racecheck --error-exitcode 1 "$tests" "[kernel]~[gemm]"
else
    echo "sanitizers: skipped (compute-sanitizer: ${sanitizer:-not found})" | tee -a "$out/summary.txt"
fi

nsys="$(command -v nsys || true)"
for c in "$cuda_home"/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys "$cuda_home"/nsight-systems-*/bin/nsys; do [ -z "$nsys" ] && [ -x "$c" ] && nsys="$c"; done
if [ -n "$nsys" ] && [ -x "$bench" ]; then
    step nsys 120 nsys.txt "$nsys" profile --stats=true --force-overwrite true -o "$build/bench_profile" \
        "$bench" --models 7b,110m --nodes 1,16 --reps 10
else
    echo "nsys: skipped (${nsys:-not found})" | tee -a "$out/summary.txt"
fi

echo
echo "==== summary ($out)"
cat "$out/summary.txt"
for f in bench_cuda.txt bench_torch.txt; do
    [ -f "$out/$f" ] && { echo "---- $f"; cat "$out/$f"; }
done
for f in build.log build_nvcc.log tests.log memcheck.log racecheck.log; do
    [ -f "$out/$f" ] && { echo "---- tail of $f"; tail -n 25 "$out/$f"; }
done
(cd "$out" && tar czf "$build/logs.tgz" --exclude=summary.txt --exclude=tests.log --exclude='bench_*' . &&
    find . -maxdepth 1 -type f ! -name summary.txt ! -name tests.log ! -name 'bench_*' -delete && mv "$build/logs.tgz" .)
! grep -v 'rc=0' "$out/summary.txt" | grep -q 'rc='
