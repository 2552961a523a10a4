# scripts/gpu_step.sh — sourced by the GPU scripts (gpu_check.sh, gpu_train_eagle.sh, gpu_spec_bench.sh): one bounded step, and the carried binaries' libraries.
# Needs $out (the folder that comes back) and $deadline (epoch seconds) set by the caller.

# step NAME CAP_SECONDS LOG COMMAND...: runs COMMAND with its output in $out/LOG, for at most CAP
# seconds and never past the deadline; records the exit code (124 = timed out).
step() {
    local name=$1 cap=$2 log=$3
    shift 3
    local left=$(( deadline - $(date +%s) ))
    if (( left < 15 )); then
        echo "$name: skipped, the time budget is spent" | tee -a "$out/summary.txt"
        return 1
    fi
    (( cap > left )) && cap=$left
    echo "== $name (at most ${cap}s)"
    local t0
    t0=$(date +%s)
    timeout --kill-after=10 "$cap" "$@" > "$out/$log" 2>&1
    local rc=$?
    echo "$name: rc=$rc in $(( $(date +%s) - t0 ))s -> $log" | tee -a "$out/summary.txt"
    return $rc
}

# find_libs BINARY...: carried binaries find libcudart/libcublasLt through their RUNPATH (the building
# machine's CUDA folder); where that folder differs here, the loader fails every step at once (rc=127). Any
# library a binary lacks is looked up under the usual CUDA and pip folders and its folder put on
# LD_LIBRARY_PATH; what was missing and where it was found goes to summary.txt.
find_libs() {
    local b lib dir
    for b in "$@"; do
        [ -x "$b" ] || continue
        for lib in $(ldd "$b" 2>/dev/null | awk '/not found/ {print $1}'); do
            dir="$(find /usr/local /opt /usr/lib -name "$lib" -print -quit 2>/dev/null)"
            dir="${dir%/*}"
            echo "$(basename "$b") lacks $lib: ${dir:-not found here}" | tee -a "$out/summary.txt"
            [ -n "$dir" ] && [[ ":${LD_LIBRARY_PATH:-}:" != *":$dir:"* ]] &&
                export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        done
    done
}
