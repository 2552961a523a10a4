#!/usr/bin/env bash
# llama.cpp interop, outside CI: builds llama.cpp from the source the npm package node-llama-cpp ships
# (llama/gitRelease.bundle, a git bundle) in build/llama_cpp/ (gitignored), then checks, on models/target:
#   1. specdec writes, llama.cpp reads: models/target exported by specdec (F32, F16, BF16, Q8_0);
#   2. llama.cpp writes, specdec reads: llama.cpp's own convert_hf_to_gguf.py (q/k rows permuted for its
#      RoPE) run by scripts/llama_cpp_convert.py; specdec's logits on it against the HF folder's, bit for bit;
#   3. llama.cpp quantizes, specdec reads: llama-quantize turns the converted F32 file into Q8_0, Q4_0, Q4_1,
#      Q5_0, Q5_1, Q6_K, Q2_K (mixed and --pure), Q3_K_M, Q4_K_M, Q5_K_M, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, Q1_0, Q2_0,
#      and with an importance
#      matrix (llama-imatrix on data/corpus/test.txt) IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_M, IQ3_XXS, IQ3_S (the K
#      and IQ types but IQ4_NL need rows of a multiple of 256 values; for other rows llama-quantize falls back to
#      another type: the line "llama-quantize ... wrote" counts what it wrote); each file is also compared, bit for bit, with ggml's own dequantization
#      of it to F32 (llama-quantize --allow-requantize). llama.cpp's ids on a quantized file are reported (its
#      dot products quantize the activations too, which may flip a near-tie); where they differ, llama.cpp's
#      ids on ggml's F32 dequantization decide.
# Each file is decoded greedily by both sides twice: as token ids with each step's logits
# (scripts/llama_cpp_logits.cpp on llama.h: F32 cache, no flash attention; decides the exit status) and as
# text (llama.cpp's llama-simple with its defaults: reported), compared with specdec's (scripts/gguf_interop.cpp).
# Lines to read: SAME / DIFFERENT.
#
#     bash scripts/llama_cpp_interop.sh [--vocab | --golden | --golden-llama3 | --golden-qwen2 | --golden-qwen3 | --golden-yarn] [PROMPT] [N]
#
# --golden only (re)writes tests/data/gguf/llama_cpp/, the files tests/io/test_gguf_llama_cpp.cpp checks in CI:
# a tiny HF folder (gguf_interop tiny), llama.cpp's F32 conversion of it, and llama.cpp's ids and logits on it.
# --golden-llama3 does the same for tests/data/gguf/llama_cpp_llama3/ (the last two cases of tests/io/test_gguf_llama_cpp.cpp):
# a tiny folder with rope_scaling llama3 (gguf_interop tiny-llama3), which the converter turns into the tensor
# rope_freqs.weight; it also has llama.cpp decode specdec's own export of that folder (reported, not stored).
# --golden-qwen2 / --golden-qwen3 do the same for tests/data/gguf/llama_cpp_qwen2/ and _qwen3/ (tests/io/test_gguf_llama_cpp.cpp):
# tiny Qwen folders (gguf_interop tiny-qwen2: q/k/v biases; tiny-qwen3: q/k norms, heads of 32), which llama.cpp's
# converter writes as its qwen2 / qwen3 architectures; llama.cpp also decodes specdec's own export of each (reported).
# --golden-yarn does the same for tests/data/gguf/llama_cpp_yarn/: tiny-qwen3 with rope_scaling yarn (gguf_interop
# tiny-yarn), which the converter writes as rope.scaling.type yarn, its factor and original context length.
# --vocab only copies llama.cpp's Meta-licensed test vocabularies (ggml-vocab-llama-spm.gguf,
# ggml-vocab-llama-bpe.gguf) into tests/data/gguf/cache/, where tests/io/test_gguf_golden.cpp looks.
# Needs npm (once, to fetch the package), git, cmake, g++; for 2 and 3 a python3 with numpy, torch,
# sentencepiece and tqdm (Debian bookworm: apt-get install python3-numpy python3-torch python3-sentencepiece
# python3-tqdm; `transformers` is not needed, see scripts/llama_cpp_convert.py). The llama.cpp build takes
# ~15 minutes on 2 cores (nice -n 19, -j2).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=build/llama_cpp
mkdir -p "$cache"

if [[ ! -d "$cache/src/.git" ]]; then
    if [[ ! -f "$cache/package/llama/gitRelease.bundle" ]]; then
        echo "== fetching node-llama-cpp with npm pack"
        (cd "$cache" && npm pack node-llama-cpp >/dev/null && tar xzf node-llama-cpp-*.tgz package/llama/gitRelease.bundle package/llama/llama.cpp.info.json)
    fi
    git clone -q "$cache/package/llama/gitRelease.bundle" "$cache/src"
fi
echo "== llama.cpp $(grep -o '"tag": *"[^"]*"' "$cache/package/llama/llama.cpp.info.json") (node-llama-cpp $(ls "$cache"/node-llama-cpp-*.tgz 2>/dev/null | sed 's/.*node-llama-cpp-//; s/\.tgz//'), commit $(git -C "$cache/src" rev-parse --short HEAD))"

if [[ "${1:-}" == "--vocab" ]]; then
    mkdir -p tests/data/gguf/cache
    cp "$cache/src/models/ggml-vocab-llama-spm.gguf" "$cache/src/models/ggml-vocab-llama-bpe.gguf" tests/data/gguf/cache/
    echo "copied to tests/data/gguf/cache/"
    exit 0
fi
golden=
case "${1:-}" in
    --golden) golden=tiny; shift ;;
    --golden-llama3) golden=tiny-llama3; shift ;;
    --golden-qwen2) golden=tiny-qwen2; shift ;;
    --golden-qwen3) golden=tiny-qwen3; shift ;;
    --golden-yarn) golden=tiny-yarn; shift ;;
esac
prompt=${1:-Once upon a time}
n=${2:-32}

bin=$cache/build/bin
if [[ ! -x "$bin/llama-simple" || ! -x "$bin/llama-quantize" || ! -x "$bin/llama-imatrix" ]]; then
    echo "== building llama.cpp's llama-simple, llama-quantize and llama-imatrix (nice -n 19, -j2)"
    nice -n 19 cmake -S "$cache/src" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF >/dev/null
    nice -n 19 cmake --build "$cache/build" --target llama-simple llama-quantize llama-imatrix -j2 >/dev/null
fi
echo "== building scripts/llama_cpp_logits.cpp (on llama.h) and scripts/gguf_interop.cpp (on specdec.hpp)"
nice -n 19 g++ -std=c++17 -O2 -I"$cache/src/include" -I"$cache/src/ggml/include" scripts/llama_cpp_logits.cpp -o "$cache/llama_cpp_logits" \
    "$cache/build/src/libllama.a" "$cache/build/ggml/src/libggml.a" "$cache/build/ggml/src/libggml-cpu.a" \
    "$cache/build/ggml/src/libggml-base.a" -fopenmp -pthread -ldl
if [[ ! -x "$cache/gguf_interop" || -n "$(find scripts/gguf_interop.cpp specdec.hpp detail -newer "$cache/gguf_interop" -print -quit)" ]]; then
    nice -n 19 g++ -std=c++20 -O2 -I. scripts/gguf_interop.cpp -o "$cache/gguf_interop" -pthread
fi

py=python3
for p in python3 /usr/bin/python3; do
    if "$p" -c "import numpy, torch, sentencepiece, tqdm" 2>/dev/null; then py=$p; break; fi
done
have_py=0
"$py" -c "import numpy, torch, sentencepiece, tqdm" 2>/dev/null && have_py=1

if [[ -n "$golden" ]]; then
    ((have_py)) || { echo "--golden needs a python3 with numpy, torch, sentencepiece and tqdm"; exit 1; }
    g=tests/data/gguf/llama_cpp
    [[ "$golden" == tiny-llama3 ]] && g=tests/data/gguf/llama_cpp_llama3
    [[ "$golden" == tiny-qwen2 ]] && g=tests/data/gguf/llama_cpp_qwen2
    [[ "$golden" == tiny-qwen3 ]] && g=tests/data/gguf/llama_cpp_qwen3
    [[ "$golden" == tiny-yarn ]] && g=tests/data/gguf/llama_cpp_yarn
    mkdir -p "$g"
    rm -f "$g"/*.json "$g"/*.safetensors "$g"/*.gguf "$g"/llama_cpp.* "$g"/prompt.txt
    "$cache/gguf_interop" "$golden" "$g"
    "$py" scripts/llama_cpp_convert.py "$cache/src" "$g" "$g/converted.f32.gguf" f32 >"$cache/convert-$golden.log" 2>&1 ||
        { tail -20 "$cache/convert-$golden.log"; exit 1; }
    golden_prompt="The llama met a fox on the hill."
    printf '%s' "$golden_prompt" >"$g/prompt.txt"
    "$cache/llama_cpp_logits" "$g/converted.f32.gguf" "$golden_prompt" 16 "$g/llama_cpp.logits.f32" >"$g/llama_cpp.ids"
    if [[ "$golden" != tiny-llama3 ]]; then
        "$cache/gguf_interop" same "$g" "$g/converted.f32.gguf" "$golden_prompt" 16
    else
        # The folder's frequencies come from llama3's formula (in double), the file's from the converter's
        # float32 table: equal to float rounding, not bit for bit, so this line is reported only.
        "$cache/gguf_interop" same "$g" "$g/converted.f32.gguf" "$golden_prompt" 16 || true
    fi
    "$cache/gguf_interop" against "$g/converted.f32.gguf" "$golden_prompt" "$g/llama_cpp.ids" "$g/llama_cpp.logits.f32"
    if [[ "$golden" != tiny ]]; then
        echo "-- specdec's export of the folder (save_gguf: rope_freqs.weight for llama3, qwen2 / qwen3 for Qwen), decoded by llama.cpp"
        e=$cache/$golden.export.f32.gguf
        "$cache/gguf_interop" export "$g" "$e" f32
        "$cache/llama_cpp_logits" "$e" "$golden_prompt" 16 "$e.logits" >"$e.ids"
        "$cache/gguf_interop" against "$e" "$golden_prompt" "$e.ids" "$e.logits"
    fi
    ls -l "$g"
    exit 0
fi

status=0
check() {  # check NAME FILE: llama.cpp against specdec on FILE, as ids and logits, then as llama-simple's text
    local name=$1 file=$2
    local ours theirs
    echo "-- $name: $file"
    # Exact settings (F32 cache, no flash attention): ids and every step's logits. This decides the exit status.
    "$cache/llama_cpp_logits" "$file" "$prompt" "$n" "$cache/$name.logits" >"$cache/$name.ids" 2>"$cache/$name.logits.err" || { cat "$cache/$name.logits.err"; status=1; return; }
    "$cache/gguf_interop" against "$file" "$prompt" "$cache/$name.ids" "$cache/$name.logits" || status=1
    # llama-simple, llama.cpp's defaults (F16 cache, flash attention): the text. Reported, not decisive: its
    # rounding may flip a near-tie, and the line after DIFFERENT says how near it was.
    ours=$("$cache/gguf_interop" greedy "$file" "$prompt" "$n" 2>"$cache/$name.specdec.err") || { cat "$cache/$name.specdec.err"; status=1; return; }
    theirs=$("$bin/llama-simple" -m "$file" -n "$n" "$prompt" 2>"$cache/$name.llama.err") || { tail -5 "$cache/$name.llama.err"; status=1; return; }
    theirs=${theirs#"$prompt"}  # llama-simple prints the prompt's pieces first (no BOS here: add_bos_token is false)
    echo "specdec:   $ours"
    echo "llama.cpp: $theirs"
    if [[ "$ours" == "$theirs" ]]; then
        echo "SAME greedy text (llama-simple, llama.cpp's defaults)"
    else
        echo "DIFFERENT greedy text (llama-simple, llama.cpp's defaults); the same settings through llama.h:"
        "$cache/llama_cpp_logits" "$file" "$prompt" "$n" "$cache/$name.defaults.logits" --defaults >"$cache/$name.defaults.ids" 2>/dev/null &&
            "$cache/gguf_interop" against "$file" "$prompt" "$cache/$name.defaults.ids" "$cache/$name.defaults.logits" | sed 's/^/   /' || true
    fi
}

echo "== 1. specdec writes models/target as GGUF; llama.cpp and specdec decode it"
for t in f32 f16 bf16 q8_0; do
    "$cache/gguf_interop" export models/target "$cache/target.$t.gguf" "$t"
    check "export-$t" "$cache/target.$t.gguf"
done

if ((!have_py)); then
    echo "== 2, 3 skipped: no python3 with numpy, torch, sentencepiece and tqdm, which convert_hf_to_gguf.py needs"
    exit $status
fi
echo "== 2. llama.cpp's convert_hf_to_gguf.py writes models/target (F32, q/k permuted); specdec reads it"
"$py" scripts/llama_cpp_convert.py "$cache/src" models/target "$cache/target.converted.gguf" >"$cache/convert.log" 2>&1 ||
    { tail -20 "$cache/convert.log"; exit 1; }
echo "-- specdec: the HF folder against llama.cpp's conversion of it"
"$cache/gguf_interop" same models/target "$cache/target.converted.gguf" "$prompt" "$n" || status=1
check converted "$cache/target.converted.gguf"

echo "== 3. llama.cpp's llama-quantize requantizes the converted file; specdec reads what it wrote"
types() {  # types LOG: the tensor types a llama-quantize log says it wrote, counted
    sed -n 's/.*type = *\([A-Za-z0-9_]*\), converting to \([A-Za-z0-9_]*\) .*/\2/p; s/.*type = *\([A-Za-z0-9_]*\), size.*/\1/p' "$1" |
        sort | uniq -c | awk '{printf "%s%d %s", (NR > 1 ? ", " : ""), $1, $2}'
}
# The importance matrix llama-quantize requires for IQ1_S, IQ2_XXS and IQ2_XS (and uses for the other IQ types
# below IQ4): the target's activations on the bundled test text, 64 chunks of 128 tokens.
imatrix=$cache/target.imatrix.gguf
"$bin/llama-imatrix" -m "$cache/target.converted.gguf" -f data/corpus/test.txt -c 128 --chunks 64 -o "$imatrix" \
    >"$cache/imatrix.log" 2>&1 || { tail -5 "$cache/imatrix.log"; exit 1; }
# NAME[:pure]; :pure passes --pure (one type for every matrix, no mix): a Q2_K mix of this model holds no Q2_K
# tensor (its ffn_down is Q3_K, the rest falls back), a pure one holds 8. llama.cpp's IQ2_S file type writes
# IQ2_XS matrices and its IQ2_M the IQ2_S ones. The IQ1, IQ2 and IQ3 types get the importance matrix.
# QUANTS="Q1_0 TQ1_0" picks some. Q1_0 and Q2_0 take rows of 128 / 64 values, so every matrix of the target;
# TQ1_0 and TQ2_0 need 256 and fall back (the line "wrote" says to what). (llama-quantize has no NVFP4 file type.)
quants=${QUANTS:-Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q6_K Q2_K Q2_K:pure Q3_K_M Q4_K_M Q5_K_M IQ4_NL IQ4_XS \
    IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_M IQ3_XXS IQ3_S TQ1_0 TQ2_0 Q1_0 Q2_0}
for spec in $quants; do
    t=${spec%:pure} name=llama-${spec/:/-} flags=()
    [[ "$spec" == *:pure ]] && flags=(--pure)
    [[ "$t" =~ ^IQ[123]_ ]] && flags+=(--imatrix "$imatrix")
    file=$cache/target.$name.gguf
    "$bin/llama-quantize" ${flags[@]+"${flags[@]}"} "$cache/target.converted.gguf" "$file" "$t" 2 >"$cache/quantize-$name.log" 2>&1 ||
        { tail -5 "$cache/quantize-$name.log"; status=1; continue; }
    echo "   llama-quantize ${flags[*]:+${flags[*]} }$t wrote: $(types "$cache/quantize-$name.log") tensors"
    # llama.cpp's own arithmetic on a quantized file quantizes the activations too (Q8_0 / Q8_K dot products),
    # so a near-tie may flip: reported here; what decides is the comparison with ggml's dequantization below.
    saved=$status status=0
    check "$name" "$file"
    differs=$status status=$saved
    # ggml's own dequantization of the same file (llama-quantize --allow-requantize to F32: ggml's to_float of
    # each tensor): specdec's logits on the quantized file must equal its logits on that, bit for bit.
    "$bin/llama-quantize" --allow-requantize "$file" "$cache/target.$name.ggml-f32.gguf" F32 2 >"$cache/quantize-$name-f32.log" 2>&1 ||
        { tail -5 "$cache/quantize-$name-f32.log"; status=1; continue; }
    echo "-- specdec: $name against ggml's dequantization of it to F32"
    "$cache/gguf_interop" same "$file" "$cache/target.$name.ggml-f32.gguf" "$prompt" "$n" || status=1
    if ((differs)); then  # llama.cpp on those F32 weights, its quantized arithmetic taken out: this decides
        echo "   llama.cpp (llama.h) on ggml's F32 dequantization of $name, against specdec:"
        if "$cache/llama_cpp_logits" "$cache/target.$name.ggml-f32.gguf" "$prompt" "$n" "$cache/$name.ggml-f32.logits" >"$cache/$name.ggml-f32.ids" 2>/dev/null; then
            "$cache/gguf_interop" against "$cache/target.$name.ggml-f32.gguf" "$prompt" "$cache/$name.ggml-f32.ids" "$cache/$name.ggml-f32.logits" >"$cache/$name.ggml-f32.txt" || status=1
            sed 's/^/   /' "$cache/$name.ggml-f32.txt"
        else
            status=1
        fi
    fi
done
exit $status
