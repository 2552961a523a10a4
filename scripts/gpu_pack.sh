#!/usr/bin/env bash
# Readies this checkout for one device call of scripts/gpu_train_eagle.sh, and puts it back afterwards.
# A device call sends the working tree (tracked files and untracked ones git does not ignore) plus the
# carried paths, 64 MiB at most; the tracked files alone are about 86 MiB (models/ and test data). The call
# needs the demo target, the small, EAGLE and FSPAD drafters, the train.json of the drafters it trains, and
# the code; the rest stays here for the length of the call.
#
#   bash scripts/gpu_pack.sh slim [train|bench]   # packs the binaries, takes the files the call does not
#                                                 # read out of the index and the disk, prints the size that
#                                                 # will travel and the device call to make
#   bash scripts/gpu_pack.sh restore              # right after the call: the files and the index as in HEAD
#
# train (default) readies scripts/gpu_train_eagle.sh; bench readies scripts/gpu_spec_bench.sh (every method,
# so EDD's and GLIDE's weights travel and the corpus does not).
#
# Between the two the index holds staged deletions: never commit then. BIN (default build/release) holds
# train_demo, bench_cuda_spec and specdec_cuda_tests built for sm_90 (docs/gpu_training.md).
set -euo pipefail
cd "$(dirname "$0")/.."

# Read by neither script nor the CUDA tests: drafters no method of theirs runs, the raw corpus (build/data
# carries it tokenised), the readers' test data; train also drops the weights of the drafters it retrains
# from their train.json.
drop=(models/vdm models/mid models/vanilla data/corpus tests/data/gguf tests/data/tokenizers tests/data/malformed
      models/eagle_layout/model.safetensors)
retrained=(models/edd/model.safetensors models/glide/model.safetensors)

case "${1:-}" in
slim)
    mode="${2:-train}"
    case "$mode" in
    train) drop+=("${retrained[@]}"); carry=(build/gpu_carry build/data)
           script='BIN=build/gpu_bin bash scripts/gpu_train_eagle.sh "$OUT"' ;;
    bench) carry=(build/gpu_carry)
           script='BIN=build/gpu_bin bash scripts/gpu_spec_bench.sh "$OUT"' ;;
    *) echo "gpu_pack: slim takes train or bench, not '$mode'" >&2; exit 2 ;;
    esac
    bin="${BIN:-build/release}"
    for b in train_demo bench_cuda_spec specdec_cuda_tests; do
        [ -x "$bin/$b" ] || { echo "gpu_pack: $bin/$b is missing; build it with CUDA for sm_90 first" >&2; exit 1; }
    done
    [ -f build/data/train.bin ] || { echo "gpu_pack: build/data/train.bin is missing; run $bin/train_demo tokenizer" >&2; exit 1; }
    [ -z "$(git status --porcelain -- "${drop[@]}")" ] || { echo "gpu_pack: changes under ${drop[*]}: commit or restore them first" >&2; exit 1; }
    mkdir -p build/gpu_carry
    # xz: the three binaries are 20 MiB as they are, under 3 MiB packed.
    tar cJf build/gpu_carry/bins.tar.xz -C "$bin" train_demo bench_cuda_spec specdec_cuda_tests
    git rm -r -q -- "${drop[@]}"
    bash scripts/gpu_travel_size.sh "${carry[@]}" || { echo "gpu_pack: too big to travel; restoring" >&2; "$0" restore; exit 1; }
    echo "device run, carry [$(printf '"%s", ' "${carry[@]}" | sed 's/, $//')], timeout_s 600:"
    echo "  mkdir -p build/gpu_bin && tar xJf build/gpu_carry/bins.tar.xz -C build/gpu_bin && $script"
    echo "then: bash scripts/gpu_pack.sh restore"
    ;;
restore)
    drop+=("${retrained[@]}")
    git reset -q HEAD -- "${drop[@]}"
    git checkout -- "${drop[@]}"
    git status --short -- "${drop[@]}"
    echo "gpu_pack: restored ${#drop[@]} paths"
    ;;
*)
    echo "usage: bash scripts/gpu_pack.sh slim|restore" >&2
    exit 2
    ;;
esac
