#!/usr/bin/env bash
# What a device call would send from this checkout, against the device tool's 64 MiB limit: the tracked
# files present on disk, the untracked files git does not ignore, and the carried paths given as arguments.
#
#   bash scripts/gpu_travel_size.sh [CARRIED_PATH...]    # e.g. build/gpu_carry
#
# Prints the total, the ten largest top-level folders (models/ and tests/ one level deeper) and exits 1
# when the total is over the limit. A tracked file missing from the worktree is not counted.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
limit=$(( 64 * 1024 * 1024 ))
listing="$(mktemp)"
trap 'rm -f "$listing"' EXIT
git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c '%s %n' 2>/dev/null > "$listing"
for p in "$@"; do
    [ -e "$p" ] || { echo "carried path '$p' does not exist here" >&2; continue; }
    find "$p" -type f -printf "%s carried:$p\n" >> "$listing"
done
awk -v limit="$limit" '
    { n = split($2, part, "/"); key = part[1];
      if ((key == "models" || key == "tests" || key == "data" || key == "build") && n > 2) key = part[1] "/" part[2];
      if (index($2, "carried:") == 1) key = $2;
      size[key] += $1; total += $1 }
    END {
      for (k in size) printf "%9.2f MiB  %s\n", size[k] / 1048576, k | "sort -rn | head -10";
      close("sort -rn | head -10");
      over = total > limit;
      printf "total %.2f MiB of %.0f MiB allowed%s\n", total / 1048576, limit / 1048576, (over ? ": OVER the limit" : "");
      exit over }' "$listing"
