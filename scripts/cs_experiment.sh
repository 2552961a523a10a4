#!/usr/bin/env bash
# CS Drafting's Table 2/3 comparison in miniature (docs/methods/cs_drafting.md): the demo target with the
# mid and small drafters and Max-Gram.
#   1. search: every configuration of each family below on the validation prompts (even lines of
#      data/prompts.jsonl), greedy, through the benchmark harness;
#   2. pick, per family, the configuration with the highest median walltime speedup;
#   3. report: the picked ones on the held-out prompts (odd lines), greedy and T = 1, side by side.
# Families: SD mid, SD small, CS mid+MaG, CS small+MaG, CS mid+small+MaG, CS tree (mid+MaG, 8
# children per lead node). Writes build/cs/{search,final}.json, build/cs/search/, build/cs/final/
# (table.csv, table.json, report.html). About 20 minutes on 2 cores; progress with ETA on stderr.
# Options: --quick (a few configurations, few prompts: a smoke test of the pipeline).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[[ "${1:-}" == "--quick" ]] && quick=1
bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target specdec_bench
out=build/cs
mkdir -p "$out"

# ---- 1. the search space ----------------------------------------------------------------------------
# K-matrix rows (CS Drafting §3.1): row 0 = budgets when the target reviews (per drafter, largest
# first, Max-Gram last), row r = budgets when drafter r reviews. Max-Gram proposes 10 per call.
entries=('{"name": "autoregressive", "method": "autoregressive"}')
add() { entries+=("$1"); }
if ((quick)); then
  gammas=(3 4); k1s=(2 4); kts=(0 3); krs=(10); k11s=(2); k12s=(2); k22s=(1); kms=(3); ls=(1 3); tk1s=(1 2)
else
  gammas=(2 3 4 5 6 8); k1s=(2 3 4 6); kts=(0 3 6); krs=(3 10); k11s=(2 3); k12s=(2 4); k22s=(1 2); kms=(0 3 10)
  ls=(1 3)
  tk1s=(1 2 3)
fi
for g in "${gammas[@]}"; do
  add "{\"name\": \"SD mid g$g\", \"method\": \"chain\", \"drafter\": \"mid\", \"gamma\": $g}"
  add "{\"name\": \"SD small g$g\", \"method\": \"chain\", \"drafter\": \"small\", \"gamma\": $g}"
done
for d in mid small; do
  for k1 in "${k1s[@]}"; do for kt in "${kts[@]}"; do for kr in "${krs[@]}"; do
    add "{\"name\": \"CS $d+MaG K[[$k1,$kt],[0,$kr]]\", \"method\": \"cascade\", \"drafters\": [\"$d\", \"maxgram\"], \"k_matrix\": [[$k1, $kt], [0, $kr]]}"
  done; done; done
done
for k11 in "${k11s[@]}"; do for k12 in "${k12s[@]}"; do for k22 in "${k22s[@]}"; do for kt in 0 3; do for km in "${kms[@]}"; do
  for l in "${ls[@]}"; do
    add "{\"name\": \"CS mid+small+MaG K[[$k11,$k12,$kt],[0,$k22,$km],[0,0,3]] l$l\", \"method\": \"cascade\", \"drafters\": [\"mid\", \"small\", \"maxgram\"], \"k_matrix\": [[$k11, $k12, $kt], [0, $k22, $km], [0, 0, 3]], \"lenience\": $l}"
  done
done; done; done; done; done
for k1 in "${tk1s[@]}"; do for kt in 0 3; do for kr in 1 10; do
  add "{\"name\": \"CS tree K[[$k1,$kt],[0,$kr]]\", \"method\": \"cascade\", \"drafters\": [\"mid\", \"maxgram\"], \"k_matrix\": [[$k1, $kt], [0, $kr]], \"children\": 8}"
done; done; done
{ echo "["; (IFS=$'\n'; echo "${entries[*]}") | sed '$!s/$/,/'; echo "]"; } > "$out/search.json"
echo "search: $((${#entries[@]} - 1)) configurations on the validation prompts" >&2

n_val=20; n_test=30; reps=2
((quick)) && n_val=4 && n_test=4 && reps=1
./build/release/specdec_bench --methods "$out/search.json" --split val --n-prompts $n_val --repeats $reps \
  --temperatures 0 --threads 1 --out "$out/search" > "$out/search.txt"

# ---- 2. the best of each family (highest median speedup at T = 0) ------------------------------------
best=$(awk -F'"' 'NR > 1 { name = $2; split($3, f, ","); speedup = f[13];  # f[13] = the speedup column
         fam = name; sub(/ (g[0-9]+|K\[.*)$/, "", fam);
         if (fam != "autoregressive" && (!(fam in top) || speedup > top[fam])) { top[fam] = speedup; pick[fam] = name } }
       END { for (k in pick) print pick[k] }' "$out/search/table.csv" | sort)
echo "picked on validation:" >&2
echo "$best" | sed 's/^/  /' >&2
{
  echo "["
  echo '  {"name": "autoregressive", "method": "autoregressive"},'
  grep -F -f <(echo "$best" | sed 's/.*/"name": "&"/') "$out/search.json" | sed '$s/,$//'
  echo "]"
} > "$out/final.json"

# ---- 3. the held-out report ------------------------------------------------------------------------
./build/release/specdec_bench --methods "$out/final.json" --split test --n-prompts $n_test --repeats 3 \
  --temperatures 0,1 --threads 1 --out "$out/final"
