// scripts/ggml_quant_golden.cpp — golden data for specdec's GGUF dequantization (outside CI), written
// against ggml's public ggml.h; no specdec code. For each quantized type a GGUF Llama holds, quantizes one
// deterministic buffer with ggml's own quantizer (ggml_quantize_chunk; an importance matrix of ones for
// the IQ1, IQ2 and IQ3 types, which ggml requires or uses, none for the others) and
// dequantizes it with ggml's reference (ggml_get_type_traits(type)->to_float), then writes
//
//     OUT/<TYPE>.blocks  the raw blocks, as a GGUF tensor holds them
//     OUT/<TYPE>.f32     ggml's float32 values, little-endian, kRows x kPerRow
//
// tests/io/test_gguf_quants.cpp requires specdec's gguf_dequantize to give the same float32 bits.
// Built against build/llama_cpp's static ggml-base (tests/data/gguf/quants/README.md has the command):
//
//     ggml_quant_golden OUT
//
// SPDX-License-Identifier: MIT
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ggml.h"

namespace {

constexpr int kRows = 2, kPerRow = 512;  // 4 super-blocks of 256 (the k-quants), 32 blocks of 32

/// splitmix64: the same numbers on every platform and compiler (std's distributions are not).
std::uint64_t next(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/// Uniform in [-1, 1), 24 bits.
float uniform(std::uint64_t& state) { return static_cast<float>(next(state) >> 40) / 8388608.0f - 1.0f; }

/// (kRows, kPerRow): each 32 values get a scale of their own, a power of two, within 8x of the others of
/// their super-block of 256 (wider, and Q2_K's 4-bit sub-block scales round the small ones to 0), the
/// super-blocks 2^-2, 2 and 2^-1 (the d of the blocks spans 2^-4 .. 2^2). Super-block 1 (row 0,
/// values 256..511) starts with 32 zeros and holds one outlier, 40x its block's scale; super-block 2
/// (row 1, values 0..255) is all zeros (d = 0 in every type); super-block 3 is all positive (the mins of
/// Q4_1, Q5_1 and the K types matter) with one block of tiny values (below 2^-20: the f16 d of the 32-value
/// types is subnormal or 0 there).
std::vector<float> input() {
    std::vector<float> x(static_cast<std::size_t>(kRows) * kPerRow);
    std::uint64_t state = 20261128;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const std::size_t block = i / 32, super = i / 256;
        const int super_exponent[] = {-2, 1, 0, -1};
        const float scale = std::ldexp(1.0f, super_exponent[super] + static_cast<int>((block * 3) % 4) - 2);
        float v = uniform(state) * scale;
        if (super == 1 && i % 256 < 32) v = 0.0f;
        if (super == 2) v = 0.0f;
        if (super == 3) v = std::fabs(v) + 0.25f * scale;
        if (super == 3 && block % 8 == 5) v = std::ldexp(std::fabs(uniform(state)), -20);
        x[i] = v;
    }
    x[300] = 40.0f * std::ldexp(1.0f, 1 + static_cast<int>((300 / 32 * 3) % 4) - 2);
    return x;
}

/// The ternary types' input (TQ1_0, TQ2_0 hold -d, 0, d per super-block of 256, d its largest |x|; Q2_0
/// -d, 0, d, 2d per 64 with d the largest |x|, so its quantizer never writes 2d):
/// x = scale · t + noise, t drawn from {-1, 0, 1}, the noise within scale / 4, the scales of the super-blocks
/// 2^-2, 2, 2^-1 and 2^-20 (f16 d subnormal); super-block 2 all zeros (d = 0), as in input().
std::vector<float> ternary_input() {
    std::vector<float> x(static_cast<std::size_t>(kRows) * kPerRow);
    std::uint64_t state = 20261129;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const int super_exponent[] = {-2, 1, 0, -20};
        const float scale = std::ldexp(1.0f, super_exponent[i / 256]);
        const int t = static_cast<int>(next(state) % 3) - 1;
        x[i] = i / 256 == 2 ? 0.0f : scale * (static_cast<float>(t) + 0.25f * uniform(state));
    }
    return x;
}

bool write(const std::string& path, const void* data, std::size_t bytes) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return false;
    const bool ok = std::fwrite(data, 1, bytes, f) == bytes;
    return std::fclose(f) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: ggml_quant_golden OUT_DIR\n");
        return 2;
    }
    const std::string out = argv[1];
    const std::vector<float> plain = input(), ternary = ternary_input();
    const ggml_type types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                               GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
                               GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS, GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M,
                               GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS,
                               GGML_TYPE_IQ3_S, GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0, GGML_TYPE_MXFP4,
                               GGML_TYPE_NVFP4, GGML_TYPE_Q1_0, GGML_TYPE_Q2_0};
    const std::vector<float> ones(kPerRow, 1.0f);
    for (const ggml_type type : types) {
        const bool three_levels = type == GGML_TYPE_TQ1_0 || type == GGML_TYPE_TQ2_0 || type == GGML_TYPE_Q2_0;
        const std::vector<float>& x = three_levels ? ternary : plain;
        const bool lattice = type != GGML_TYPE_IQ4_NL && type != GGML_TYPE_IQ4_XS &&
                             std::string(ggml_type_name(type)).rfind("iq", 0) == 0;
        const ggml_type_traits* traits = ggml_get_type_traits(type);
        const std::size_t bytes = ggml_row_size(type, kPerRow) * kRows;
        std::vector<unsigned char> blocks(bytes);
        const std::size_t written = ggml_quantize_chunk(type, x.data(), blocks.data(), 0, kRows, kPerRow,
                                                        lattice ? ones.data() : nullptr);
        std::vector<float> y(x.size());
        traits->to_float(blocks.data(), y.data(), static_cast<std::int64_t>(y.size()));
        double err = 0.0, norm = 0.0;  // relative RMS error: a sanity figure, not what the test checks
        for (std::size_t i = 0; i < x.size(); ++i) {
            err += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
            norm += static_cast<double>(x[i]) * x[i];
        }
        const std::string name = traits->type_name;
        std::string upper;
        for (const char c : name) upper += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
        if (written != bytes || !write(out + "/" + upper + ".blocks", blocks.data(), bytes) ||
            !write(out + "/" + upper + ".f32", y.data(), y.size() * sizeof(float))) {
            std::fprintf(stderr, "ggml_quant_golden: %s: cannot write %zu bytes to %s\n", upper.c_str(), bytes, out.c_str());
            return 1;
        }
        std::printf("%-6s %4zu bytes of blocks, relative RMS error %.4f\n", upper.c_str(), bytes, std::sqrt(err / norm));
    }
    return 0;
}
