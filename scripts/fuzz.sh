#!/usr/bin/env bash
# Fuzzes every reader of bytes in specdec (JSON, safetensors, model folders, tokenizer.json and its NFC,
# GLIDE and EDD drafter folders, the benchmark's methods.json, token files, prompts.jsonl, llama2.c model
# and tokenizer files, GGUF files, SentencePiece's tokenizer.model) with libFuzzer under ASan and UBSan:
# the harnesses are tests/fuzz/fuzz_<name>.cpp, the seeds tests/fuzz/seeds/<name>/.
#
#     bash scripts/fuzz.sh [seconds per harness, default 20] [harness ...]
#
# Run it longer by giving more seconds (`bash scripts/fuzz.sh 3600 tokenizer` fuzzes the tokenizer for an
# hour); the working corpus in build/fuzz/corpus/<name> grows across runs, so each run starts where the
# last one stopped. Each harness runs in libFuzzer's fork mode and keeps going after a finding; the inputs
# that crashed, leaked, hung or ran out of memory are saved in build/fuzz/crashes/<name>/ and the script
# exits non-zero. Reproduce one with `build/fuzz/fuzz_<name> <file>`. Harnesses build and run as many at a
# time as there are cores. Needs only clang++ (14 or later).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-20}
shift $(( $# > 0 ? 1 : 0 ))
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || { echo "usage: $0 [seconds per harness] [harness ...]" >&2; exit 2; }

# name and -max_len: the largest input worth mutating (the real tokenizer.json seed is 105 KiB).
declare -A max_len=(
    [json]=16384 [safetensors]=8192 [checkpoint]=16384 [checkpoint_index]=16384 [glide_checkpoint]=16384 [edd_checkpoint]=16384
    [tokenizer]=131072 [bench_config]=8192 [token_file]=4096 [prompts]=32768 [llama2c]=16384 [gguf]=65536 [nfc]=4096
    [sentencepiece]=16384
)
all=(json safetensors checkpoint checkpoint_index glide_checkpoint edd_checkpoint tokenizer bench_config token_file prompts llama2c gguf nfc
     sentencepiece)
harnesses=("$@")
(( ${#harnesses[@]} > 0 )) || harnesses=("${all[@]}")
for h in "${harnesses[@]}"; do
    [[ -n "${max_len[$h]:-}" ]] || { echo "unknown harness '$h' (known: ${all[*]})" >&2; exit 2; }
done

cxx=${CXX:-clang++}
command -v "$cxx" >/dev/null || { echo "$cxx not found: the fuzzers need clang++ with libFuzzer" >&2; exit 2; }
launcher=()
command -v ccache >/dev/null && launcher=(ccache)
# Line tables only (file and line in a crash's stack): the bodies compiled in 115 s so, 161 s with -g.
flags=(-std=c++20 -O1 -gline-tables-only -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I.)

out=build/fuzz
mkdir -p "$out"
n=${#harnesses[@]}

jobs=$(nproc)
# specdec's bodies compiled once, instrumented as the harnesses are (detail/core/compiled.hpp), and each
# harness against their declarations: fuzz_gguf compiled in 100 s header-only and in 6 s this way. The
# bodies and the harnesses compile side by side, $jobs at a time; the links follow.
echo "== building specdec's bodies and $n harnesses with $cxx, $jobs at a time"
printf '#define SPECDEC_IMPLEMENTATION\n#include "specdec.hpp"\n' > "$out/specdec_bodies.cpp"
pids=()
wait_for_slot() {
    if (( ${#pids[@]} >= jobs )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
}
wait_all() {
    for pid in "${pids[@]}"; do wait "$pid"; done
    pids=()
}
"${launcher[@]}" "$cxx" "${flags[@]}" -c "$out/specdec_bodies.cpp" -o "$out/specdec_bodies.o" &
pids+=($!)
i=0
for h in "${harnesses[@]}"; do
    i=$((i + 1))
    wait_for_slot
    echo "[$i/$n] compile fuzz_$h"
    # Compile and link apart: ccache caches a compile, never a link.
    "${launcher[@]}" "$cxx" "${flags[@]}" -DSPECDEC_COMPILED -c "tests/fuzz/fuzz_$h.cpp" -o "$out/fuzz_$h.o" &
    pids+=($!)
done
wait_all
for h in "${harnesses[@]}"; do
    wait_for_slot
    "$cxx" "${flags[@]}" "$out/fuzz_$h.o" "$out/specdec_bodies.o" -o "$out/fuzz_$h" &
    pids+=($!)
done
wait_all

# The harnesses write each input to a file: on tmpfs when there is one, in a folder removed at exit.
scratch_base=/tmp
[[ -d /dev/shm && -w /dev/shm ]] && scratch_base=/dev/shm
scratch=$(mktemp -d "$scratch_base/specdec_fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# One harness: its summary line in $scratch/$h.result. Harnesses run $jobs at a time (a fork-mode parent
# mostly waits on its one child, so each takes about one core).
fuzz_one() {
    local h=$1 i=$2
    local corpus="$out/corpus/$h" crashes="$out/crashes/$h" log="$out/fuzz_$h.log"
    mkdir -p "$corpus" "$crashes" "$scratch/$h"
    cp tests/fuzz/seeds/"$h"/* "$corpus"/
    local before; before=$(find "$crashes" -type f | wc -l)
    echo "[$i/$n] fuzz_$h: ${seconds} s, corpus of $(find "$corpus" -type f | wc -l) inputs (log: $log)"
    # Fork mode: a crash, leak, timeout or OOM ends only the child; its input lands in $crashes and the
    # parent goes on. The parent's own status says little then, so the results come from its log.
    local status=0
    TMPDIR="$scratch/$h" "$out/fuzz_$h" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -max_len="${max_len[$h]}" -artifact_prefix="$crashes/" -print_final_stats=1 \
        "$corpus" >"$log" 2>&1 || status=$?
    local progress execs counts ooms timeouts crashed new files kib result
    progress=$(grep -E '^#[0-9]+: cov:' "$log" | tail -n 1 || true)
    execs=$(sed -nE 's/^#([0-9]+): cov:.*/\1/p' <<<"$progress")
    counts=$(sed -nE 's#.*oom/timeout/crash: ([0-9]+/[0-9]+/[0-9]+).*#\1#p' <<<"$progress")
    IFS=/ read -r ooms timeouts crashed <<<"${counts:-0/0/0}"
    new=$(( $(find "$crashes" -type f | wc -l) - before ))
    files=$(find "$corpus" -type f | wc -l)
    kib=$(find "$corpus" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%d", (s + 1023) / 1024 }')
    if (( ooms + timeouts + crashed + new > 0 )) || (( status != 0 )); then
        result="FAILED: $crashed crashes/leaks, $timeouts timeouts, $ooms OOMs, $new new inputs in $crashes (exit $status)"
    else
        result="ok"
    fi
    printf '%-17s %10s execs  corpus %5d inputs %6d KiB  %s\n' "$h" "${execs:-?}" "$files" "$kib" "$result" \
        | tee "$scratch/$h.result" | sed 's/^/      /'
}

echo "== fuzzing each harness for $seconds s, $jobs at a time"
i=0
for h in "${harnesses[@]}"; do
    i=$((i + 1))
    wait_for_slot
    fuzz_one "$h" "$i" &
    pids+=($!)
done
wait_all

echo "== summary ($seconds s per harness)"
failed=0
for h in "${harnesses[@]}"; do
    if [[ -f "$scratch/$h.result" ]]; then
        cat "$scratch/$h.result"
        grep -q ' ok$' "$scratch/$h.result" || failed=1
    else
        echo "$h: no result"; failed=1
    fi
done
exit "$failed"
