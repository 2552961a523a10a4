# scripts/gpu_step.sh — sourced by the GPU scripts (gpu_check.sh, gpu_train_eagle.sh): one bounded step.
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
