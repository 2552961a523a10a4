#!/usr/bin/env bash
# llama.cpp interop, outside CI: builds llama.cpp from the source the npm package node-llama-cpp ships
# (llama/gitRelease.bundle, a git bundle) in build/llama_cpp/ (gitignored), then
#   1. exports models/target (HF folder + tokenizer.json) as GGUF with specdec, greedy-decodes it with
#      llama.cpp's llama-simple and with specdec, and compares the generated text;
#   2. if python3 has numpy, safetensors, torch and transformers, converts models/target with llama.cpp's
#      own convert_hf_to_gguf.py (q/k rows permuted for its RoPE) and greedy-decodes that file with specdec.
#
#     bash scripts/llama_cpp_interop.sh [--vocab] [PROMPT] [N]
#
# --vocab only copies llama.cpp's Meta-licensed test vocabularies (ggml-vocab-llama-spm.gguf,
# ggml-vocab-llama-bpe.gguf) into tests/data/gguf/cache/, where tests/io/test_gguf_golden.cpp looks.
# Needs npm (once, to fetch the package), git, cmake, g++. The build takes ~10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=build/llama_cpp
mkdir -p "$cache"

if [[ ! -d "$cache/src/.git" ]]; then
    if [[ ! -f "$cache/package/llama/gitRelease.bundle" ]]; then
        echo "== fetching node-llama-cpp with npm pack"
        (cd "$cache" && npm pack node-llama-cpp >/dev/null && tar xzf node-llama-cpp-*.tgz package/llama/gitRelease.bundle package/llama/llama.cpp.info.json)
    fi
    echo "== llama.cpp $(grep -o '"tag": *"[^"]*"' "$cache/package/llama/llama.cpp.info.json") from the bundle"
    git clone -q "$cache/package/llama/gitRelease.bundle" "$cache/src"
fi

if [[ "${1:-}" == "--vocab" ]]; then
    mkdir -p tests/data/gguf/cache
    cp "$cache/src/models/ggml-vocab-llama-spm.gguf" "$cache/src/models/ggml-vocab-llama-bpe.gguf" tests/data/gguf/cache/
    echo "copied to tests/data/gguf/cache/"
    exit 0
fi
prompt=${1:-Once upon a time}
n=${2:-32}

if [[ ! -x "$cache/build/bin/llama-simple" ]]; then
    echo "== building llama.cpp's llama-simple (nice, -j2)"
    cmake -S "$cache/src" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF >/dev/null
    nice cmake --build "$cache/build" --target llama-simple -j2 >/dev/null
fi
echo "== building scripts/gguf_interop.cpp"
nice g++ -std=c++20 -O2 -I. scripts/gguf_interop.cpp -o "$cache/gguf_interop" -pthread

status=0
compare() {  # compare NAME FILE: llama-simple's continuation of the prompt against specdec's
    local name=$1 file=$2
    local ours theirs
    ours=$("$cache/gguf_interop" greedy "$file" "$prompt" "$n" 2>"$cache/$name.specdec.err")
    theirs=$("$cache/build/bin/llama-simple" -m "$file" -n "$n" "$prompt" 2>"$cache/$name.llama.err")
    theirs=${theirs#"$prompt"}
    echo "-- $name"
    echo "specdec:   $ours"
    echo "llama.cpp: $theirs"
    if [[ "$ours" == "$theirs" ]]; then echo "SAME greedy text ($n tokens)"; else echo "DIFFERENT"; status=1; fi
}

echo "== 1. specdec exports models/target; llama.cpp and specdec decode it greedily"
for t in f32 q8_0; do
    "$cache/gguf_interop" export models/target "$cache/target.$t.gguf" "$t"
    compare "export-$t" "$cache/target.$t.gguf"
done

echo "== 2. llama.cpp's converter writes models/target; specdec and llama.cpp decode it greedily"
if python3 -c "import numpy, safetensors, torch, transformers" 2>/dev/null; then
    python3 "$cache/src/convert_hf_to_gguf.py" models/target --outtype f32 --outfile "$cache/target.converted.gguf"
    compare "converted" "$cache/target.converted.gguf"
else
    echo "skipped: python3 lacks numpy / safetensors / torch / transformers, which convert_hf_to_gguf.py needs"
fi
exit $status
