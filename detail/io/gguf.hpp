// specdec/detail/io/gguf.hpp — llama.cpp's GGUF files: header, metadata, tensors (dequantized at load), the
// tokenizer they carry, and export of a specdec model.
// SPDX-License-Identifier: MIT
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/compiled.hpp"
#include "../core/error.hpp"
#include "../model/config.hpp"
#include "../model/weights.hpp"
#include "checkpoint.hpp"
#include "file_bytes.hpp"
#include "mapped_matrix.hpp"
#include "llama2c.hpp"
#include "tokenizer.hpp"
#if SPECDEC_BODIES  // only the bodies read and write files
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <numbers>
#include <set>
#include <thread>

#include "gguf_iq_grids.hpp"
#endif

// The file (ggml's docs/gguf.md), all little-endian:
//   uint32 magic "GGUF", uint32 version (2 or 3; 1 used 32-bit counts and is refused), uint64 tensor count,
//   uint64 metadata count; metadata: key (string), uint32 value type, value; tensor infos: name (string),
//   uint32 n_dims (<= 4), uint64 ne[n_dims] (ne[0] the fastest: a (out, in) matrix has ne = [in, out]),
//   uint32 ggml type, uint64 offset into the data section; zero padding to `general.alignment` (32 when
//   absent); the data section, each tensor at its offset (a multiple of the alignment).
//   A string is a uint64 length and its bytes; an array is a uint32 element type, a uint64 count, the values.
// llama.cpp's "llama" architecture names tensors token_embd, blk.N.attn_norm / attn_q / attn_k / attn_v /
// attn_output / ffn_norm / ffn_gate / ffn_up / ffn_down, output_norm, output (absent when tied), and its
// converter (convert_hf_to_gguf.py, LlamaModel.permute) reorders the rows of each head of q and k so that
// RoPE rotates adjacent pairs (llama.cpp's LLAMA_ROPE_TYPE_NORM): HF's row j·hd/2 + i becomes row 2i + j
// — llama2.c's layout, so loading applies llama2.c's permute_rope_rows(to_hf = true), saving its inverse.

namespace specdec {

// ---- declarations (the bodies follow) ----------------------------------------------------------------

/// ggml tensor types by id (ggml.h). Those named here are the ones specdec knows the layout of; loading
/// dequantizes every type here but Q8_1 and Q8_K (ggml's intermediates, never in a model file) and the
/// integer types (gguf_readable); saving writes F32, F16, BF16 and Q8_0.
enum class GgufType : std::uint32_t {
    kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
    kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15, kIQ2_XXS = 16, kIQ2_XS = 17,
    kIQ3_XXS = 18, kIQ1_S = 19, kIQ4_NL = 20, kIQ3_S = 21, kIQ2_S = 22, kIQ4_XS = 23, kIQ1_M = 29, kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kBF16 = 30,
    kTQ1_0 = 34, kTQ2_0 = 35, kMXFP4 = 39, kNVFP4 = 40, kQ1_0 = 41, kQ2_0 = 42,
};

/// Metadata value types (gguf.md).
enum class GgufValueType : std::uint32_t {
    kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
    kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

/// One metadata value. Scalars: integers and bools in `integer` (a uint64 above INT64_MAX saturates),
/// floats in `real`, a string in `string`. Arrays (of scalars or strings; arrays of arrays are refused):
/// `element` is their type, strings in `strings`, numbers and bools in `numbers`.
struct GgufValue {
    GgufValueType type = GgufValueType::kU8;
    GgufValueType element = GgufValueType::kU8;  // arrays only
    std::int64_t integer = 0;
    double real = 0.0;
    std::string string;
    std::vector<std::string> strings;  // (n) string arrays
    std::vector<double> numbers;       // (n) numeric and bool arrays

    bool is_array() const { return type == GgufValueType::kArray; }
    bool is_integer() const;  // any integer type (not bool)
    bool is_float() const { return type == GgufValueType::kF32 || type == GgufValueType::kF64; }
    std::size_t size() const { return element == GgufValueType::kString ? strings.size() : numbers.size(); }
};

/// One tensor of the file: dims as ggml orders them (dims[0] the fastest, the columns of a matrix),
/// its ggml type id, its offset in the data section and its size in bytes.
struct GgufTensorInfo {
    std::string name;
    std::vector<std::int64_t> dims;  // ne[0..n_dims)
    std::uint32_t type = 0;          // a GgufType value
    std::uint64_t offset = 0;        // from the start of the data section
    std::uint64_t bytes = 0;
    std::int64_t elements() const;
};

/// A GGUF file, memory-mapped read-only (read into memory when mmap fails) with its header validated
/// in open(): every value read, every tensor of a known type, in bounds, aligned, uniquely named.
class GgufFile {
public:
    static GgufFile open(const std::filesystem::path& path);

    GgufFile(GgufFile&&) noexcept = default;  // the bytes stay put: spans into them stay valid
    GgufFile& operator=(GgufFile&&) noexcept = default;

    const std::filesystem::path& path() const { return path_; }
    std::uint32_t version() const { return version_; }
    std::uint64_t alignment() const { return alignment_; }
    /// Metadata in file order.
    const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
    /// Tensor infos in file order.
    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
    const GgufValue* find(std::string_view key) const;
    const GgufTensorInfo* find_tensor(std::string_view name) const;
    /// The bytes of a tensor of this file.
    std::span<const std::byte> data(const GgufTensorInfo& tensor) const;

private:
    GgufFile() = default;
    void parse();
    [[noreturn]] void fail(const std::string& what) const;

    std::filesystem::path path_;
    detail::FileBytes bytes_;
    std::span<const std::byte> file_;  // bytes_.bytes(): the whole file
    std::uint32_t version_ = 0;
    std::uint64_t alignment_ = 32;
    std::uint64_t data_begin_ = 0;     // where the data section starts
    std::vector<std::pair<std::string, GgufValue>> metadata_;
    std::vector<GgufTensorInfo> tensors_;
};

/// The header of a GGUF file (metadata and tensor table), for inspection; the data stays mapped.
SPECDEC_INLINE GgufFile read_gguf_header(const std::filesystem::path& path);

/// The tokenizer a GGUF file carries, of either kind llama.cpp names in tokenizer.ggml.model:
///  - "gpt2": byte-level BPE (tokens in GPT-2's byte alphabet, merges by rank) with the pre-tokenizer
///    tokenizer.ggml.pre names: "gpt-2" (GPT-2's regex), "llama-bpe" / "llama3" / "llama-v3" (Llama-3's,
///    whole pre-tokens found in the vocab not merged) or "qwen2" (Qwen2's regex; no NFC, as in llama.cpp).
///    Run by `Tokenizer`, built through its tokenizer.json reader so both file formats share one
///    implementation; control and user-defined tokens are its added tokens (cut out of the text first).
///  - "llama": SentencePiece with scores and no merges: llama.cpp's llm_tokenizer_spm, which is run.c's
///    algorithm (a " " prefix, characters, merge the adjacent pair whose concatenation is the token of
///    highest score, bytes <0xNN> for what is left unknown), run by `Llama2cTokenizer` ("▁" spelled " ").
/// encode(text, add_special) puts BOS (and EOS) around the ids as tokenizer.ggml.add_bos_token /
/// add_eos_token say (llama.cpp's defaults when absent: BOS for "llama" and Llama-3's pre-tokenizer).
/// decode(ids) skips control tokens. Differences from llama.cpp (parse_special false) are documented in
/// docs/formats.md: special tokens' text in the input is cut out as the token by the "gpt2" kind, and
/// user-defined tokens are not cut out by the "llama" kind.
class GgufTokenizer {
public:
    enum class Kind { kGpt2, kLlama };

    /// The tokenizer of the file's tokenizer.ggml.* metadata; nullopt when it has none.
    static std::optional<GgufTokenizer> from_gguf(const GgufFile& file);
    /// specdec's byte-level tokenizer (exported as "gpt2") or a llama2.c tokenizer (exported as "llama").
    explicit GgufTokenizer(Tokenizer t);
    explicit GgufTokenizer(Llama2cTokenizer t);

    Kind kind() const { return kind_; }
    std::vector<int> encode(std::string_view text, bool add_special = true) const;
    std::string decode(std::span<const int> ids) const;
    int vocab_size() const;
    int bos_id() const { return bos_; }
    int eos_id() const { return eos_; }
    bool add_bos() const { return add_bos_; }
    /// The byte-level tokenizer ("gpt2" kind) or the SentencePiece one ("llama" kind); nullptr otherwise.
    const Tokenizer* bpe() const { return bpe_ ? &*bpe_ : nullptr; }
    const Llama2cTokenizer* spm() const { return spm_ ? &*spm_ : nullptr; }
    /// llama.cpp's token types (1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte), per id.
    const std::vector<int>& token_types() const { return types_; }
    /// The pre-tokenizer name written as tokenizer.ggml.pre ("gpt-2", "llama-bpe", "default").
    const std::string& pre() const { return pre_; }

private:
    GgufTokenizer() = default;

    Kind kind_ = Kind::kGpt2;
    std::optional<Tokenizer> bpe_;
    std::optional<Llama2cTokenizer> spm_;
    std::vector<int> types_;  // (V)
    std::string pre_ = "default";
    int bos_ = -1, eos_ = -1;
    bool add_bos_ = false, add_eos_ = false;
};

/// A model read from GGUF: the config, HF-named float32 weights, and the tokenizer when the file has one.
struct GgufModel {
    Config config;
    Weights weights;
    std::optional<GgufTokenizer> tokenizer;
};

/// Reads a GGUF file of architecture "llama", "qwen2" or "qwen3": its <arch>.* keys as a Config (a head
/// size from attention.key_length, linear RoPE scaling, Llama 3.x's tensor rope_freqs.weight as a kFactors
/// table; other scalings, a partial rotary and experts refused naming the key or tensor; Qwen2's q/k/v
/// biases and Qwen3's q/k norms as Config::qkv_bias / qk_norm), its tensors dequantized to float32 with
/// q and k rows put back in HF's order (llama.cpp permutes them for "llama" only). With options.defer_matrices the matrices stay in the mapped file
/// (Weights::deferred): F32 and BF16 rows are packed by a CpuModel in place, the other types dequantized
/// a row at a time as it packs — inference only.
SPECDEC_INLINE GgufModel load_gguf(const std::filesystem::path& path, LoadOptions options = {});

/// The tensor types save_gguf writes. Norms are always F32 (as llama.cpp's quantizer keeps them); Q8_0
/// needs rows of a multiple of 32 values, and a matrix whose rows are not is written F16.
enum class GgufSaveType { kF32, kF16, kBF16, kQ8_0 };

/// Writes a GGUF v3 file llama.cpp reads: architecture "llama" (q and k rows in llama.cpp's RoPE order),
/// or "qwen2" / "qwen3" for a Qwen block (rows as in HF), alignment 32, and the tokenizer's metadata when
/// one is given. RoPE scaling llama3 or kFactors is written
/// as llama.cpp's tensor rope_freqs.weight (F32, hd/2), llama3's as convert_hf_to_gguf.py computes it.
SPECDEC_INLINE void save_gguf(const std::filesystem::path& path, const Config& c, const Weights& w,
                              const GgufTokenizer* tokenizer, GgufSaveType type = GgufSaveType::kBF16);

namespace detail {
/// (hd/2) The per-dimension factors convert_hf_to_gguf.py writes as rope_freqs.weight for c's llama3
/// rope_scaling (LlamaModel.generate_extra_tensors), in its float32 arithmetic: 1 for wavelengths under
/// original_max_position_embeddings / high_freq_factor, `factor` above / low_freq_factor, and
/// 1 / ((1 - smooth) / factor + smooth) between. save_gguf writes it for a llama3 model.
SPECDEC_INLINE std::vector<float> gguf_llama3_rope_factors(const Config& c);
}  // namespace detail

namespace detail {

/// Elements per block and bytes per block of the ggml types whose layout specdec knows (0, 0: unknown).
struct GgufTypeTraits {
    std::int64_t block = 0, bytes = 0;
    const char* name = "unknown";
};
SPECDEC_INLINE GgufTypeTraits gguf_type_traits(std::uint32_t type);

/// The types gguf_dequantize reads, as its messages list them.
inline constexpr const char* kGgufReadable =
    "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, "
    "IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0";
constexpr bool gguf_readable(GgufType type) {
    switch (type) {
        case GgufType::kF32: case GgufType::kF16: case GgufType::kBF16: case GgufType::kQ8_0: case GgufType::kQ4_0:
        case GgufType::kQ4_1: case GgufType::kQ5_0: case GgufType::kQ5_1: case GgufType::kQ2_K: case GgufType::kQ3_K:
        case GgufType::kQ4_K: case GgufType::kQ5_K: case GgufType::kQ6_K: case GgufType::kIQ1_S: case GgufType::kIQ1_M:
        case GgufType::kIQ2_XXS: case GgufType::kIQ2_XS: case GgufType::kIQ2_S: case GgufType::kIQ3_XXS:
        case GgufType::kIQ3_S: case GgufType::kIQ4_NL: case GgufType::kIQ4_XS: case GgufType::kTQ1_0:
        case GgufType::kTQ2_0: case GgufType::kMXFP4: case GgufType::kNVFP4: case GgufType::kQ1_0: case GgufType::kQ2_0:
            return true;
        default: return false;
    }
}

/// IEEE binary16 from float, round to nearest even (Inf beyond 65504, NaN kept).
SPECDEC_INLINE std::uint16_t float_to_half(float f);

/// Dequantizes `n` consecutive values (a multiple of the type's block) of `type` from `src` into `dst`.
/// Throws for a type it cannot read.
SPECDEC_INLINE void gguf_dequantize(std::uint32_t type, std::span<const std::byte> src, float* dst, std::int64_t n);
/// ggml's reference Q8_0: blocks of 32 values as an f16 scale d = max|x| / 127 and 32 int8 round(x / d).
SPECDEC_INLINE void quantize_q8_0(std::span<const float> x, std::vector<std::byte>& out);

}  // namespace detail

#if SPECDEC_BODIES  // compiled once where a program links specdec::compiled

static_assert(std::endian::native == std::endian::little,
              "GGUF files are little-endian; this reader copies them without swapping");

namespace detail {

constexpr std::uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr int kGgufMaxDims = 4;                    // GGML_MAX_DIMS
constexpr std::int64_t kQK = 32, kQK_K = 256;      // values per block: Q8_0 / Q4_0, and the k-quants

SPECDEC_INLINE GgufTypeTraits gguf_type_traits(std::uint32_t type) {
    switch (static_cast<GgufType>(type)) {
        case GgufType::kF32: return {1, 4, "F32"};
        case GgufType::kF16: return {1, 2, "F16"};
        case GgufType::kQ4_0: return {kQK, 2 + 16, "Q4_0"};
        case GgufType::kQ4_1: return {kQK, 4 + 16, "Q4_1"};
        case GgufType::kQ5_0: return {kQK, 2 + 4 + 16, "Q5_0"};
        case GgufType::kQ5_1: return {kQK, 4 + 4 + 16, "Q5_1"};
        case GgufType::kQ8_0: return {kQK, 2 + 32, "Q8_0"};
        case GgufType::kQ8_1: return {kQK, 4 + 32, "Q8_1"};
        case GgufType::kQ2_K: return {kQK_K, 16 + 64 + 4, "Q2_K"};
        case GgufType::kQ3_K: return {kQK_K, 32 + 64 + 12 + 2, "Q3_K"};
        case GgufType::kQ4_K: return {kQK_K, 4 + 12 + 128, "Q4_K"};
        case GgufType::kQ5_K: return {kQK_K, 4 + 12 + 32 + 128, "Q5_K"};
        case GgufType::kQ6_K: return {kQK_K, 128 + 64 + 16 + 2, "Q6_K"};
        case GgufType::kQ8_K: return {kQK_K, 4 + 256 + 32, "Q8_K"};
        case GgufType::kIQ2_XXS: return {kQK_K, 2 + 64, "IQ2_XXS"};
        case GgufType::kIQ2_XS: return {kQK_K, 2 + 64 + 8, "IQ2_XS"};
        case GgufType::kIQ2_S: return {kQK_K, 2 + 64 + 8 + 8, "IQ2_S"};
        case GgufType::kIQ3_XXS: return {kQK_K, 2 + 96, "IQ3_XXS"};
        case GgufType::kIQ3_S: return {kQK_K, 2 + 64 + 8 + 32 + 4, "IQ3_S"};
        case GgufType::kIQ1_S: return {kQK_K, 2 + 32 + 16, "IQ1_S"};
        case GgufType::kIQ1_M: return {kQK_K, 32 + 16 + 8, "IQ1_M"};
        case GgufType::kIQ4_NL: return {kQK, 2 + 16, "IQ4_NL"};
        case GgufType::kIQ4_XS: return {kQK_K, 2 + 2 + 4 + 128, "IQ4_XS"};
        case GgufType::kI8: return {1, 1, "I8"};
        case GgufType::kI16: return {1, 2, "I16"};
        case GgufType::kI32: return {1, 4, "I32"};
        case GgufType::kI64: return {1, 8, "I64"};
        case GgufType::kF64: return {1, 8, "F64"};
        case GgufType::kBF16: return {1, 2, "BF16"};
        case GgufType::kTQ1_0: return {kQK_K, 48 + 4 + 2, "TQ1_0"};
        case GgufType::kTQ2_0: return {kQK_K, 64 + 2, "TQ2_0"};
        case GgufType::kMXFP4: return {kQK, 1 + 16, "MXFP4"};
        case GgufType::kNVFP4: return {64, 4 + 32, "NVFP4"};
        case GgufType::kQ1_0: return {128, 2 + 16, "Q1_0"};
        case GgufType::kQ2_0: return {64, 2 + 16, "Q2_0"};
    }
    return {};
}

SPECDEC_INLINE std::uint16_t float_to_half(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const std::uint32_t a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));  // NaN
    if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to Inf
    if (a < 0x38800000u) {  // below 2^-14: a subnormal half, m · 2^-24
        if (a <= 0x33000000u) return sign;  // <= 2^-25 rounds to 0 (2^-25 is a tie, to the even 0)
        const std::uint32_t mantissa = (a & 0x7FFFFFu) | 0x800000u;
        const std::uint32_t shift = 126u - (a >> 23);  // 14..24
        std::uint32_t h = mantissa >> shift;
        const std::uint32_t rest = mantissa & ((1u << shift) - 1u), tie = 1u << (shift - 1u);
        if (rest > tie || (rest == tie && (h & 1u))) ++h;
        return static_cast<std::uint16_t>(sign | h);
    }
    std::uint32_t h = (a >> 13) - ((127u - 15u) << 10);
    const std::uint32_t rest = a & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is still right
    return static_cast<std::uint16_t>(sign | h);
}

inline float read_half(const std::byte* p) {
    std::uint16_t h;
    std::memcpy(&h, p, 2);
    return half_to_float(h);
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K block, packed in its 12 scale bytes (ggml's
// get_scale_min_k4): sub-blocks 0-3 in the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); 4-7 in the
// nibbles of bytes 8-11, their top 2 bits in the top bits of bytes 0-3 (scales) and 4-7 (mins).
inline void q4_k_scale_min(int j, const std::uint8_t* s, int& scale, int& min) {
    if (j < 4) {
        scale = s[j] & 63;
        min = s[j + 4] & 63;
    } else {
        scale = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// The 6-bit scale of sub-block j (0..15) of a Q3_K block, packed in its 12 scale bytes (ggml's
// dequantize_row_q3_K): the low 4 bits are the low (j < 8) or high (j >= 8) nibble of byte j mod 8, the
// top 2 bits are bits 2(j div 4), 2(j div 4) + 1 of byte 8 + j mod 4.
inline int q3_k_scale(int j, const std::uint8_t* s) {
    const int low = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    return low | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

// The IQ1, IQ2 and IQ3 types (ggml's "i-quants") quantize groups of 8 or 4 values together, as the index of
// a point of a lattice (gguf_iq_grids.hpp): the point's coordinate j is byte j of its row.
inline int iq_coordinate(std::uint64_t point, int j) { return static_cast<int>((point >> (8 * j)) & 0xFF); }
// Their 8 signs of a group are stored as 7 bits, the 8th making the number of minus signs even
// (ggml-common.h's ksigns_iq2xs): bit j set makes coordinate j negative.
inline int iq_signs(std::uint32_t seven) { return static_cast<int>(seven | ((std::popcount(seven) & 1u) << 7)); }
// Value = scale · coordinate, negated where the sign bit is set: ggml multiplies by -1.f or 1.f last.
inline float iq_signed(float scale, int coordinate, int signs, int j) {
    return scale * static_cast<float>(coordinate) * ((signs >> j) & 1 ? -1.0f : 1.0f);
}
// IQ1's shift of a group's lattice point off centre (ggml-common.h's IQ1S_DELTA and IQ1M_DELTA).
inline constexpr float kIq1Delta = 0.125f;

// The 16 levels of the IQ4 types (ggml-common.h's kvalues_iq4nl): a non-uniform 4-bit grid, denser near 0.
inline constexpr std::int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
/// E2M1 (FP4) values doubled, so that they are integers, by nibble: ggml's `kvalues_mxfp4`; the scales
/// below are halved to match.
inline constexpr std::int8_t kFp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
/// Half of an E8M0 scale, 2^(e - 128), exact (ggml_e8m0_to_fp32_half; e = 255 is not read as NaN).
inline float e8m0_half(std::uint8_t e) { return std::ldexp(1.0f, static_cast<int>(e) - 128); }
/// Half of an unsigned E4M3 scale (ggml_ue4m3_to_fp32: bit 7 ignored, 0x7F — E4M3's NaN — and 0 read as
/// 0), exact: (8 + m) · 2^(e - 11) for a biased exponent e > 0, m · 2^-10 for e = 0.
inline float ue4m3_half(std::uint8_t s) {
    if (s == 0 || s == 0x7F) return 0.0f;
    const int e = (s >> 3) & 0xF, m = s & 7;
    return e == 0 ? std::ldexp(static_cast<float>(m), -10) : std::ldexp(static_cast<float>(8 + m), e - 11);
}

SPECDEC_INLINE void gguf_dequantize(std::uint32_t type, std::span<const std::byte> src, float* dst, std::int64_t n) {
    const GgufTypeTraits t = gguf_type_traits(type);
    require(t.block > 0 && n % t.block == 0 && src.size() >= static_cast<std::size_t>(n / t.block * t.bytes), "gguf", [&] {
        return "dequantize: " + std::to_string(n) + " values of type " + t.name + " (" + std::to_string(type) +
               ") need whole blocks, " + std::to_string(src.size()) + " bytes given";
    });
    const auto* p = reinterpret_cast<const std::uint8_t*>(src.data());
    const std::int64_t blocks = n / t.block;
    switch (static_cast<GgufType>(type)) {
        case GgufType::kF32: std::memcpy(dst, p, static_cast<std::size_t>(n) * 4); return;
        case GgufType::kF16:
            for (std::int64_t i = 0; i < n; ++i) dst[i] = read_half(src.data() + 2 * i);
            return;
        case GgufType::kBF16:
            for (std::int64_t i = 0; i < n; ++i) {
                std::uint16_t b;
                std::memcpy(&b, p + 2 * i, 2);
                dst[i] = std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
            }
            return;
        case GgufType::kQ8_0:  // block: f16 d, int8 q[32]; x = d · q
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes, dst += kQK) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                for (int j = 0; j < kQK; ++j) dst[j] = d * static_cast<float>(static_cast<std::int8_t>(p[2 + j]));
            }
            return;
        case GgufType::kQ4_0:  // block: f16 d, 16 bytes of nibbles; value j is the low nibble of byte j,
                               // value j + 16 its high nibble; x = d · (nibble - 8)
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes, dst += kQK) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                const std::uint8_t* q = p + 2;
                for (int j = 0; j < 16; ++j) {
                    dst[j] = d * static_cast<float>((q[j] & 0xF) - 8);
                    dst[j + 16] = d * static_cast<float>((q[j] >> 4) - 8);
                }
            }
            return;
        case GgufType::kQ4_1:  // block: f16 d, f16 m, 16 bytes of nibbles laid out as Q4_0's; x = d · nibble + m
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes, dst += kQK) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                const float m = read_half(reinterpret_cast<const std::byte*>(p + 2));
                const std::uint8_t* q = p + 4;
                for (int j = 0; j < 16; ++j) {
                    dst[j] = static_cast<float>(q[j] & 0xF) * d + m;
                    dst[j + 16] = static_cast<float>(q[j] >> 4) * d + m;
                }
            }
            return;
        case GgufType::kQ5_0:  // block: f16 d, uint32 qh (the 5th bits: bit j for value j), 16 bytes of nibbles
                               // laid out as Q4_0's; x = d · (5-bit q - 16)
        case GgufType::kQ5_1:  // block: f16 d, f16 m, then Q5_0's qh and nibbles; x = d · 5-bit q + m
        {
            const bool with_min = static_cast<GgufType>(type) == GgufType::kQ5_1;
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes, dst += kQK) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                const float m = with_min ? read_half(reinterpret_cast<const std::byte*>(p + 2)) : 0.0f;
                const std::uint8_t* h = p + (with_min ? 4 : 2);
                const std::uint8_t* q = h + 4;
                std::uint32_t qh;
                std::memcpy(&qh, h, 4);
                for (int j = 0; j < 16; ++j) {
                    const int x0 = (q[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4);
                    const int x1 = (q[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
                    // (q - 16) · d as ggml computes it: q · d - 16 · d would round differently
                    dst[j] = with_min ? static_cast<float>(x0) * d + m : static_cast<float>(x0 - 16) * d;
                    dst[j + 16] = with_min ? static_cast<float>(x1) * d + m : static_cast<float>(x1 - 16) * d;
                }
            }
            return;
        }
        case GgufType::kQ2_K:  // block: scales[16] (low nibble a scale, high nibble a min), qs[64], f16 d,
                               // f16 dmin; 16 sub-blocks of 16 values, x = d · scale_j · q - dmin · min_j with
                               // q 2 bits. Each 32 bytes of qs hold 128 values: sub-block 2s of that half is
                               // bits 2s, 2s+1 of bytes 0-15, sub-block 2s + 1 the same bits of bytes 16-31
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes) {
                const std::uint8_t* scales = p;
                const std::uint8_t* q = p + 16;
                const float d = read_half(reinterpret_cast<const std::byte*>(p + 80));
                const float dmin = read_half(reinterpret_cast<const std::byte*>(p + 82));
                for (int half = 0; half < 2; ++half, q += 32)
                    for (int shift = 0; shift < 8; shift += 2)
                        for (int part = 0; part < 2; ++part) {
                            const std::uint8_t sc = *scales++;
                            const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
                            for (int l = 0; l < 16; ++l)
                                *dst++ = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
                        }
            }
            return;
        case GgufType::kQ3_K:  // block: hmask[32] (3rd bits), qs[64] (low 2 bits), scales[12], f16 d; 16
                               // sub-blocks of 16 values, x = d · (scale_j - 32) · (q - 4 · (3rd bit clear))
                               // with q 2 bits and scale_j 6 bits (q3_k_scale). qs is laid out as Q2_K's; the
                               // 3rd bit of value l + 32i (i = 0..7, l < 32) is bit i of hmask[l]
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes) {
                const std::uint8_t* hmask = p;
                const std::uint8_t* q = p + 32;
                const std::uint8_t* scales = p + 96;
                const float d = read_half(reinterpret_cast<const std::byte*>(p + 108));
                int j = 0, bit = 0;
                for (int half = 0; half < 2; ++half, q += 32)
                    for (int shift = 0; shift < 8; shift += 2, ++bit)
                        for (int part = 0; part < 2; ++part, ++j) {
                            const float dl = d * static_cast<float>(q3_k_scale(j, scales) - 32);
                            for (int l = 0; l < 16; ++l) {
                                const int i = l + 16 * part;
                                const int low = (q[i] >> shift) & 3, sub = (hmask[i] >> bit) & 1 ? 0 : 4;
                                *dst++ = dl * static_cast<float>(low - sub);
                            }
                        }
            }
            return;
        case GgufType::kQ4_K:  // block: f16 d, f16 dmin, scales[12], qs[128]; 8 sub-blocks of 32 values,
                               // x = d · scale_j · nibble - dmin · min_j; each 32 bytes of qs hold two
                               // sub-blocks, the first in the low nibbles, the next in the high ones
        case GgufType::kQ5_K:  // block: f16 d, f16 dmin, scales[12] (as Q4_K's), qh[32], qs[128]; Q4_K's
                               // layout and formula with a 5th bit added to each nibble: bit j of qh[l] for
                               // value l of sub-block j (l < 32)
        {
            const bool five = static_cast<GgufType>(type) == GgufType::kQ5_K;
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                const float dmin = read_half(reinterpret_cast<const std::byte*>(p + 2));
                const std::uint8_t* scales = p + 4;
                const std::uint8_t* qh = p + 16;  // Q5_K only
                const std::uint8_t* q = p + (five ? 48 : 16);
                const auto high = [&](int l, int j) { return five ? ((qh[l] >> j) & 1) << 4 : 0; };
                for (int pair = 0; pair < 4; ++pair, q += 32) {
                    int s0, m0, s1, m1;
                    q4_k_scale_min(2 * pair, scales, s0, m0);
                    q4_k_scale_min(2 * pair + 1, scales, s1, m1);
                    const float d0 = d * static_cast<float>(s0), o0 = dmin * static_cast<float>(m0);
                    const float d1 = d * static_cast<float>(s1), o1 = dmin * static_cast<float>(m1);
                    for (int l = 0; l < 32; ++l) *dst++ = d0 * static_cast<float>((q[l] & 0xF) | high(l, 2 * pair)) - o0;
                    for (int l = 0; l < 32; ++l) *dst++ = d1 * static_cast<float>((q[l] >> 4) | high(l, 2 * pair + 1)) - o1;
                }
            }
            return;
        }
        case GgufType::kQ6_K:  // block: ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16], f16 d;
                               // x = d · scale · (6-bit q - 32), one scale per 16 values. Each half (128
                               // values) uses 64 bytes of ql and 32 of qh: value l + 32k (k = 0..3, l < 32)
                               // takes the low (k < 2) or high (k >= 2) nibble of ql[l + 32 (k & 1)] and
                               // bits 2k, 2k+1 of qh[l]
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes) {
                const std::uint8_t* ql = p;
                const std::uint8_t* qh = p + 128;
                const auto* sc = reinterpret_cast<const std::int8_t*>(p + 192);
                const float d = read_half(reinterpret_cast<const std::byte*>(p + 208));
                for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, dst += 128)
                    for (int l = 0; l < 32; ++l)
                        for (int k = 0; k < 4; ++k) {
                            const int low = k < 2 ? (ql[l + 32 * (k & 1)] & 0xF) : (ql[l + 32 * (k & 1)] >> 4);
                            const int q = (low | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
                            dst[l + 32 * k] = d * static_cast<float>(sc[l / 16 + 2 * k]) * static_cast<float>(q);
                        }
            }
            return;
        case GgufType::kIQ2_XXS:  // block: f16 d, then per group of 32 values two uint32: the first four
                                  // bytes index kIq2xxs (8 values each), the second holds four 7-bit signs
                                  // and, in its top 4 bits, the scale s; x = d · (0.5 + s) / 4 · ±grid
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                for (int group = 0; group < 8; ++group) {
                    const std::uint8_t* index = p + 2 + 8 * group;
                    std::uint32_t meta;
                    std::memcpy(&meta, index + 4, 4);
                    const float dl = d * (0.5f + static_cast<float>(meta >> 28)) * 0.25f;
                    for (int l = 0; l < 4; ++l, dst += 8) {
                        const std::uint64_t point = iq_grids::kIq2xxs[index[l]];
                        const int signs = iq_signs((meta >> (7 * l)) & 127);
                        for (int j = 0; j < 8; ++j) dst[j] = iq_signed(dl, iq_coordinate(point, j), signs, j);
                    }
                }
            }
            return;
        case GgufType::kIQ2_XS:  // block: f16 d, 32 uint16 (9 bits an index into kIq2xs, 7 bits of signs
                                 // per 8 values), 8 scale bytes (a nibble per 16 values, the low one
                                 // first); x = d · (0.5 + s) / 4 · ±grid
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                const std::uint8_t* scales = p + 66;
                for (int group = 0; group < 8; ++group)
                    for (int l = 0; l < 4; ++l, dst += 8) {
                        const int s = l < 2 ? scales[group] & 0xF : scales[group] >> 4;
                        const float dl = d * (0.5f + static_cast<float>(s)) * 0.25f;
                        const int q = p[2 + 8 * group + 2 * l] | (p[3 + 8 * group + 2 * l] << 8);
                        const std::uint64_t point = iq_grids::kIq2xs[q & 511];
                        const int signs = iq_signs(static_cast<std::uint32_t>(q >> 9));
                        for (int j = 0; j < 8; ++j) dst[j] = iq_signed(dl, iq_coordinate(point, j), signs, j);
                    }
            }
            return;
        case GgufType::kIQ2_S:  // block: f16 d, 32 low index bytes, 32 sign bytes (8 stored signs each),
                                // 8 bytes of high index bits (2 per 8 values), 8 scale bytes as IQ2_XS's;
                                // a 10-bit index into kIq2s; x = d · (0.5 + s) / 4 · ±grid
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                const std::uint8_t* low = p + 2;
                const std::uint8_t* signs = p + 34;
                const std::uint8_t* high = p + 66;
                const std::uint8_t* scales = p + 74;
                for (int group = 0; group < 8; ++group)
                    for (int l = 0; l < 4; ++l, dst += 8) {
                        const int s = l < 2 ? scales[group] & 0xF : scales[group] >> 4;
                        const float dl = d * (0.5f + static_cast<float>(s)) * 0.25f;
                        const int index = low[4 * group + l] | (((high[group] >> (2 * l)) & 3) << 8);
                        const std::uint64_t point = iq_grids::kIq2s[index];
                        for (int j = 0; j < 8; ++j) dst[j] = iq_signed(dl, iq_coordinate(point, j), signs[4 * group + l], j);
                    }
            }
            return;
        case GgufType::kIQ3_XXS:  // block: f16 d, 64 index bytes into kIq3xxs (4 values each), then per
                                  // group of 32 values a uint32 of four 7-bit signs (one per 8 values) and
                                  // the scale s in its top 4 bits; x = d · (0.5 + s) / 2 · ±grid
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                const std::uint8_t* index = p + 2;
                for (int group = 0; group < 8; ++group) {
                    std::uint32_t meta;
                    std::memcpy(&meta, p + 66 + 4 * group, 4);
                    const float dl = d * (0.5f + static_cast<float>(meta >> 28)) * 0.5f;
                    for (int l = 0; l < 4; ++l, dst += 8) {
                        const int signs = iq_signs((meta >> (7 * l)) & 127);
                        for (int half = 0; half < 2; ++half) {
                            const std::uint64_t point = iq_grids::kIq3xxs[index[8 * group + 2 * l + half]];
                            for (int j = 0; j < 4; ++j)
                                dst[4 * half + j] = iq_signed(dl, iq_coordinate(point, j), signs, 4 * half + j);
                        }
                    }
                }
            }
            return;
        case GgufType::kIQ3_S:  // block: f16 d, 64 low index bytes, 8 bytes of 9th index bits (one per 4
                                // values), 32 sign bytes (one per 8 values), 4 scale bytes (a nibble per 32
                                // values); a 9-bit index into kIq3s; x = d · (1 + 2s) · ±grid
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                const std::uint8_t* low = p + 2;
                const std::uint8_t* high = p + 66;
                const std::uint8_t* signs = p + 74;
                const std::uint8_t* scales = p + 106;
                for (int group = 0; group < 8; ++group) {
                    const int s = group % 2 == 0 ? scales[group / 2] & 0xF : scales[group / 2] >> 4;
                    const float dl = d * static_cast<float>(1 + 2 * s);
                    for (int l = 0; l < 4; ++l, dst += 8)
                        for (int half = 0; half < 2; ++half) {
                            const int k = 2 * l + half;  // the group's k-th 4 values
                            const int index = low[8 * group + k] | (((high[group] >> k) & 1) << 8);
                            const std::uint64_t point = iq_grids::kIq3s[index];
                            for (int j = 0; j < 4; ++j)
                                dst[4 * half + j] = iq_signed(dl, iq_coordinate(point, j), signs[4 * group + l], 4 * half + j);
                        }
                }
            }
            return;
        case GgufType::kIQ1_S:  // block: f16 d, 32 low index bytes, then per group of 32 values a uint16:
                                // 3 high index bits per 8 values (bits 0-11), the scale s (bits 12-14) and
                                // the sign of the shift (bit 15); an 11-bit index into kIq1s;
                                // x = d · (2s + 1) · (grid ± 1/8)
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                for (int group = 0; group < 8; ++group) {
                    const int h = p[34 + 2 * group] | (p[35 + 2 * group] << 8);
                    const float dl = d * static_cast<float>(2 * ((h >> 12) & 7) + 1);
                    const float delta = h & 0x8000 ? -kIq1Delta : kIq1Delta;
                    for (int l = 0; l < 4; ++l, dst += 8) {
                        const std::uint64_t point = iq_grids::kIq1s[p[2 + 4 * group + l] | (((h >> (3 * l)) & 7) << 8)];
                        for (int j = 0; j < 8; ++j)
                            dst[j] = dl * (static_cast<float>(static_cast<std::int8_t>(iq_coordinate(point, j))) + delta);
                    }
                }
            }
            return;
        case GgufType::kIQ1_M:  // block: 32 low index bytes, 16 bytes (per 8 values a nibble: 3 high index
                                // bits and the sign of the shift), 8 scale bytes read as four uint16: a 3-bit
                                // scale per 16 values in bits 0-11, the f16 d in their top nibbles (d's bits
                                // 4k..4k+3 in the k-th); x = d · (2s + 1) · (grid ± 1/8), as IQ1_S
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes) {
                std::uint16_t sc[4];
                std::memcpy(sc, p + 48, 8);
                const auto d_bits = static_cast<std::uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                                               ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
                const float d = read_half(reinterpret_cast<const std::byte*>(&d_bits));
                for (int group = 0; group < 8; ++group)
                    for (int l = 0; l < 4; ++l, dst += 8) {
                        const int s = (sc[group / 2] >> (6 * (group % 2) + 3 * (l / 2))) & 7;
                        const float dl = d * static_cast<float>(2 * s + 1);
                        const int nibble = (p[32 + 2 * group + l / 2] >> (4 * (l % 2))) & 0xF;
                        const float delta = nibble & 8 ? -kIq1Delta : kIq1Delta;
                        const std::uint64_t point = iq_grids::kIq1s[p[4 * group + l] | ((nibble & 7) << 8)];
                        for (int j = 0; j < 8; ++j)
                            dst[j] = dl * (static_cast<float>(static_cast<std::int8_t>(iq_coordinate(point, j))) + delta);
                    }
            }
            return;
        case GgufType::kIQ4_NL:  // block: f16 d, 16 bytes of nibbles (value j low nibble of byte j, value
                                 // j + 16 the high one); x = d · grid[q]
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes, dst += kQK) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                for (int j = 0; j < 16; ++j) {
                    dst[j] = d * static_cast<float>(kIq4nlValues[p[2 + j] & 0xF]);
                    dst[j + 16] = d * static_cast<float>(kIq4nlValues[p[2 + j] >> 4]);
                }
            }
            return;
        case GgufType::kIQ4_XS:  // block: f16 d, u16 scales_h, 4 bytes scales_l, 128 bytes of nibbles: 8
                                 // sub-blocks of 32 as IQ4_NL's, each with a 6-bit scale (low 4 bits a nibble
                                 // of scales_l, high 2 bits of scales_h); x = d · (scale - 32) · grid[q]
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                const int scales_h = p[2] | (p[3] << 8);
                const std::uint8_t* q = p + 8;
                for (int sub = 0; sub < 8; ++sub, q += 16, dst += 32) {
                    const int ls = ((p[4 + sub / 2] >> (4 * (sub % 2))) & 0xF) | (((scales_h >> (2 * sub)) & 3) << 4);
                    const float dl = d * static_cast<float>(ls - 32);
                    for (int j = 0; j < 16; ++j) {
                        dst[j] = dl * static_cast<float>(kIq4nlValues[q[j] & 0xF]);
                        dst[j + 16] = dl * static_cast<float>(kIq4nlValues[q[j] >> 4]);
                    }
                }
            }
            return;
        case GgufType::kTQ1_0:  // TriLM / BitNet b1.58 ternary, 1.69 bits: 48 bytes of 5 trits, 4 bytes of 4
                                // trits, f16 d at the end. A byte b holds trits as the base-3 digits of
                                // ceil(b · 243 / 256): trit n is the top trit of (b · 3^n mod 256) · 3 / 256.
                                // Bytes 0..31 give values 32n + m, bytes 32..47 then 16n + m, the 4 last
                                // bytes 4n + j; x = d · (trit - 1)
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p + 52));
                const auto trit = [](std::uint8_t byte, int n) {
                    constexpr std::uint8_t kPow3[5] = {1, 3, 9, 27, 81};
                    const auto shifted = static_cast<std::uint8_t>(byte * kPow3[n]);  // mod 256, as ggml's uint8
                    return ((shifted * 3) >> 8) - 1;
                };
                for (int n = 0; n < 5; ++n)
                    for (int m = 0; m < 32; ++m) *dst++ = static_cast<float>(trit(p[m], n)) * d;
                for (int n = 0; n < 5; ++n)
                    for (int m = 0; m < 16; ++m) *dst++ = static_cast<float>(trit(p[32 + m], n)) * d;
                for (int n = 0; n < 4; ++n)
                    for (int j = 0; j < 4; ++j) *dst++ = static_cast<float>(trit(p[48 + j], n)) * d;
            }
            return;
        case GgufType::kTQ2_0:  // ternary, 2 bits: 64 bytes of 2-bit q, f16 d at the end; byte 32g + m holds
                                // values 128g + 32l + m in bits 2l, 2l + 1; x = d · (q - 1)
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p + 64));
                for (int g = 0; g < 2; ++g)
                    for (int l = 0; l < 4; ++l)
                        for (int m = 0; m < 32; ++m) *dst++ = static_cast<float>(((p[32 * g + m] >> (2 * l)) & 3) - 1) * d;
            }
            return;
        case GgufType::kMXFP4:  // OCP microscaling FP4: an E8M0 exponent e, 16 bytes of E2M1 nibbles laid out
                                // as Q4_0's; ggml stores the E2M1 values doubled (kFp4Doubled) and halves
                                // the scale: x = 2^(e - 128) · 2·fp4(q), exact
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes, dst += kQK) {
                const float d = e8m0_half(p[0]);
                for (int j = 0; j < 16; ++j) {
                    dst[j] = static_cast<float>(kFp4Doubled[p[1 + j] & 0xF]) * d;
                    dst[j + 16] = static_cast<float>(kFp4Doubled[p[1 + j] >> 4]) * d;
                }
            }
            return;
        case GgufType::kNVFP4:  // NVIDIA's FP4: 64 values as 4 sub-blocks of 16, each with a UE4M3 scale
                                // byte, then 32 bytes of E2M1 nibbles (per sub-block 8 bytes laid out as
                                // Q4_0's); x = ue4m3(s) / 2 · 2·fp4(q)
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes)
                for (int sub = 0; sub < 4; ++sub, dst += 16) {
                    const float d = ue4m3_half(p[sub]);
                    const std::uint8_t* q = p + 4 + 8 * sub;
                    for (int j = 0; j < 8; ++j) {
                        dst[j] = static_cast<float>(kFp4Doubled[q[j] & 0xF]) * d;
                        dst[j + 8] = static_cast<float>(kFp4Doubled[q[j] >> 4]) * d;
                    }
                }
            return;
        case GgufType::kQ1_0:  // 1 bit: f16 d, 16 bytes of signs (bit j % 8 of byte j / 8); x = ±d
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes, dst += 128) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                for (int j = 0; j < 128; ++j) dst[j] = ((p[2 + j / 8] >> (j % 8)) & 1) != 0 ? d : -d;
            }
            return;
        case GgufType::kQ2_0:  // 2 bits: f16 d, 16 bytes of q (bits 2(j % 4), +1 of byte j / 4); x = d · (q - 1),
                               // q - 1 in {-1, 0, 1, 2}
            for (std::int64_t b = 0; b < blocks; ++b, p += t.bytes, dst += 64) {
                const float d = read_half(reinterpret_cast<const std::byte*>(p));
                for (int j = 0; j < 64; ++j) dst[j] = static_cast<float>(((p[2 + j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
            }
            return;
        default: break;
    }
    fail("gguf", std::string("dequantize: type ") + t.name + " (" + std::to_string(type) +
                     ") is not supported (" + kGgufReadable + " are)");
}

SPECDEC_INLINE void quantize_q8_0(std::span<const float> x, std::vector<std::byte>& out) {
    const std::size_t blocks = x.size() / kQK;
    out.resize(blocks * 34);
    auto* p = reinterpret_cast<std::uint8_t*>(out.data());
    for (std::size_t b = 0; b < blocks; ++b, p += 34) {
        const float* v = x.data() + b * kQK;
        float amax = 0.0f;
        for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(v[j]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const std::uint16_t h = float_to_half(d);
        std::memcpy(p, &h, 2);
        for (int j = 0; j < kQK; ++j) p[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(std::lround(v[j] * id)));
    }
}

}  // namespace detail

// ---- reading ---------------------------------------------------------------------------------------------

SPECDEC_INLINE bool GgufValue::is_integer() const {
    switch (type) {
        case GgufValueType::kU8: case GgufValueType::kI8: case GgufValueType::kU16: case GgufValueType::kI16:
        case GgufValueType::kU32: case GgufValueType::kI32: case GgufValueType::kU64: case GgufValueType::kI64:
            return true;
        default: return false;
    }
}

SPECDEC_INLINE std::int64_t GgufTensorInfo::elements() const {
    std::int64_t n = 1;
    for (std::int64_t d : dims) n *= d;
    return n;
}

SPECDEC_INLINE void GgufFile::fail(const std::string& what) const { detail::fail("gguf", path_.string() + ": " + what); }

SPECDEC_INLINE const GgufValue* GgufFile::find(std::string_view key) const {
    for (const auto& [k, v] : metadata_)
        if (k == key) return &v;
    return nullptr;
}

SPECDEC_INLINE const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
    for (const GgufTensorInfo& t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

SPECDEC_INLINE std::span<const std::byte> GgufFile::data(const GgufTensorInfo& tensor) const {
    return file_.subspan(static_cast<std::size_t>(data_begin_ + tensor.offset), static_cast<std::size_t>(tensor.bytes));
}

SPECDEC_INLINE GgufFile GgufFile::open(const std::filesystem::path& path) {
    GgufFile f;
    f.path_ = path;
    f.bytes_ = detail::FileBytes::open(path, "gguf");
    f.file_ = f.bytes_.bytes();
    f.parse();
    return f;
}

namespace detail {

/// Reads the header bytes in order, every read bounds-checked against the file.
struct GgufCursor {
    std::span<const std::byte> bytes;
    std::size_t pos = 0;
    const GgufFile* file = nullptr;
    std::string file_name;

    std::size_t left() const { return bytes.size() - pos; }
    [[noreturn]] void fail(const std::string& what) const { detail::fail("gguf", file_name + ": " + what); }
    void need(std::uint64_t n, const std::string& what) const {
        if (n > left())
            fail(what + " needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos) + ", the file has " +
                 std::to_string(left()) + " left (truncated?)");
    }
    template <class T>
    T get(const std::string& what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, bytes.data() + pos, sizeof(T));
        pos += sizeof(T);
        return v;
    }
    std::string string(const std::string& what) {
        const auto n = get<std::uint64_t>(what + " (string length)");
        need(n, what + " (a string of " + std::to_string(n) + " bytes)");
        std::string s(reinterpret_cast<const char*>(bytes.data() + pos), static_cast<std::size_t>(n));
        pos += static_cast<std::size_t>(n);
        return s;
    }
};

inline std::size_t gguf_scalar_bytes(GgufValueType t) {
    switch (t) {
        case GgufValueType::kU8: case GgufValueType::kI8: case GgufValueType::kBool: return 1;
        case GgufValueType::kU16: case GgufValueType::kI16: return 2;
        case GgufValueType::kU32: case GgufValueType::kI32: case GgufValueType::kF32: return 4;
        case GgufValueType::kU64: case GgufValueType::kI64: case GgufValueType::kF64: return 8;
        default: return 0;
    }
}

/// One scalar of type t as (integer, real); bools are integers 0 and 1.
inline void gguf_scalar(GgufCursor& in, GgufValueType t, const std::string& what, std::int64_t& integer, double& real) {
    switch (t) {
        case GgufValueType::kU8: integer = in.get<std::uint8_t>(what); break;
        case GgufValueType::kI8: integer = in.get<std::int8_t>(what); break;
        case GgufValueType::kU16: integer = in.get<std::uint16_t>(what); break;
        case GgufValueType::kI16: integer = in.get<std::int16_t>(what); break;
        case GgufValueType::kU32: integer = in.get<std::uint32_t>(what); break;
        case GgufValueType::kI32: integer = in.get<std::int32_t>(what); break;
        case GgufValueType::kU64: {
            const auto u = in.get<std::uint64_t>(what);
            integer = u > static_cast<std::uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(u);
            break;
        }
        case GgufValueType::kI64: integer = in.get<std::int64_t>(what); break;
        case GgufValueType::kBool: {
            const auto b = in.get<std::uint8_t>(what);
            if (b > 1) in.fail(what + ": bool value " + std::to_string(b) + " is neither 0 nor 1");
            integer = b;
            break;
        }
        case GgufValueType::kF32: real = in.get<float>(what); break;
        case GgufValueType::kF64: real = in.get<double>(what); break;
        default: in.fail(what + ": value type " + std::to_string(static_cast<std::uint32_t>(t)) + " is not a scalar");
    }
    if (t != GgufValueType::kF32 && t != GgufValueType::kF64) real = static_cast<double>(integer);
}

}  // namespace detail

SPECDEC_INLINE void GgufFile::parse() {
    detail::GgufCursor in{file_, 0, this, path_.string()};
    const auto magic = in.get<std::uint32_t>("the magic");
    if (magic != detail::kGgufMagic) {
        char shown[5] = {};
        std::memcpy(shown, &magic, 4);
        for (char& ch : shown)
            if (ch != '\0' && (ch < 32 || ch > 126)) ch = '?';
        fail("magic is '" + std::string(shown, 4) + "', not 'GGUF' (not a GGUF file)");
    }
    version_ = in.get<std::uint32_t>("the version");
    if (version_ != 2 && version_ != 3)
        fail("version " + std::to_string(version_) + " is not supported (2 and 3 are; version 1 used 32-bit counts)");
    const auto n_tensors = in.get<std::uint64_t>("the tensor count");
    const auto n_kv = in.get<std::uint64_t>("the metadata count");
    // Each metadata entry takes at least 12 bytes (empty key, type, 1-byte value), each tensor info 24.
    if (n_kv > in.left() / 13) fail("metadata count " + std::to_string(n_kv) + " cannot fit the " + std::to_string(in.left()) + " bytes left");
    if (n_tensors > in.left() / 24) fail("tensor count " + std::to_string(n_tensors) + " cannot fit the " + std::to_string(in.left()) + " bytes left");

    std::set<std::string, std::less<>> keys;
    metadata_.reserve(static_cast<std::size_t>(n_kv));
    for (std::uint64_t i = 0; i < n_kv; ++i) {
        std::string key = in.string("metadata entry " + std::to_string(i) + " key");
        const std::string what = "metadata key '" + key + "'";
        if (!keys.insert(key).second) fail(what + " appears twice");
        GgufValue v;
        const auto type = in.get<std::uint32_t>(what + " type");
        if (type > static_cast<std::uint32_t>(GgufValueType::kF64)) fail(what + ": value type " + std::to_string(type) + " is unknown (0..12 are)");
        v.type = static_cast<GgufValueType>(type);
        if (v.type == GgufValueType::kString) {
            v.string = in.string(what);
        } else if (v.type == GgufValueType::kArray) {
            const auto element = in.get<std::uint32_t>(what + " array element type");
            if (element > static_cast<std::uint32_t>(GgufValueType::kF64))
                fail(what + ": array element type " + std::to_string(element) + " is unknown (0..12 are)");
            v.element = static_cast<GgufValueType>(element);
            if (v.element == GgufValueType::kArray) fail(what + ": an array of arrays (not supported)");
            const auto count = in.get<std::uint64_t>(what + " array count");
            const std::size_t each = v.element == GgufValueType::kString ? 8 : detail::gguf_scalar_bytes(v.element);
            if (count > in.left() / each)
                fail(what + ": array of " + std::to_string(count) + " elements needs at least " +
                     (count > UINT64_MAX / each ? std::string("2^64") : std::to_string(count * each)) + " bytes, the file has " +
                     std::to_string(in.left()) + " left");
            if (v.element == GgufValueType::kString) {
                v.strings.reserve(static_cast<std::size_t>(count));
                for (std::uint64_t j = 0; j < count; ++j) v.strings.push_back(in.string(what + "[" + std::to_string(j) + "]"));
            } else {
                v.numbers.resize(static_cast<std::size_t>(count));
                std::int64_t integer = 0;
                for (std::uint64_t j = 0; j < count; ++j)
                    detail::gguf_scalar(in, v.element, what, integer, v.numbers[static_cast<std::size_t>(j)]);
            }
        } else {
            detail::gguf_scalar(in, v.type, what, v.integer, v.real);
        }
        metadata_.emplace_back(std::move(key), std::move(v));
    }
    if (const GgufValue* a = find("general.alignment")) {
        if (!a->is_integer() || a->integer <= 0 || (a->integer & (a->integer - 1)) != 0 || a->integer > (1 << 30))
            fail("metadata key 'general.alignment' is " + (a->is_integer() ? std::to_string(a->integer) : std::string("not an integer")) +
                 "; it must be a power of two");
        alignment_ = static_cast<std::uint64_t>(a->integer);
    }

    std::set<std::string, std::less<>> names;
    tensors_.reserve(static_cast<std::size_t>(n_tensors));
    for (std::uint64_t i = 0; i < n_tensors; ++i) {
        GgufTensorInfo t;
        t.name = in.string("tensor info " + std::to_string(i) + " name");
        const std::string what = "tensor '" + t.name + "'";
        if (!names.insert(t.name).second) fail(what + " appears twice");
        const auto n_dims = in.get<std::uint32_t>(what + " n_dims");
        if (n_dims < 1 || n_dims > detail::kGgufMaxDims)
            fail(what + ": n_dims " + std::to_string(n_dims) + " is outside 1.." + std::to_string(detail::kGgufMaxDims));
        std::int64_t n = 1;
        for (std::uint32_t d = 0; d < n_dims; ++d) {
            const auto ne = in.get<std::uint64_t>(what + " ne[" + std::to_string(d) + "]");
            if (ne > static_cast<std::uint64_t>(INT64_MAX) || (ne != 0 && n > INT64_MAX / static_cast<std::int64_t>(ne)))
                fail(what + ": ne[" + std::to_string(d) + "] = " + std::to_string(ne) + " makes the element count overflow 64 bits");
            n *= static_cast<std::int64_t>(ne);
            t.dims.push_back(static_cast<std::int64_t>(ne));
        }
        t.type = in.get<std::uint32_t>(what + " type");
        const detail::GgufTypeTraits traits = detail::gguf_type_traits(t.type);
        if (traits.block == 0) fail(what + ": ggml type " + std::to_string(t.type) + " is unknown to specdec");
        if (t.dims[0] % traits.block != 0)
            fail(what + ": ne[0] = " + std::to_string(t.dims[0]) + " is not a multiple of the " + traits.name + " block of " +
                 std::to_string(traits.block));
        t.bytes = static_cast<std::uint64_t>(n / traits.block) * static_cast<std::uint64_t>(traits.bytes);  // n < 2^63, bytes/block <= 292
        if (n / traits.block > INT64_MAX / traits.bytes) fail(what + ": its size in bytes overflows 64 bits");
        t.offset = in.get<std::uint64_t>(what + " offset");
        if (t.offset % alignment_ != 0)
            fail(what + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment " + std::to_string(alignment_));
        tensors_.push_back(std::move(t));
    }
    data_begin_ = (in.pos + alignment_ - 1) / alignment_ * alignment_;
    const std::uint64_t data_size = data_begin_ <= file_.size() ? file_.size() - data_begin_ : 0;
    for (const GgufTensorInfo& t : tensors_)
        if (t.offset > data_size || t.bytes > data_size - t.offset)
            fail("tensor '" + t.name + "': data [" + std::to_string(t.offset) + ", +" + std::to_string(t.bytes) +
                 ") runs past the end of the data section (" + std::to_string(data_size) + " bytes, from offset " +
                 std::to_string(data_begin_) + ")");
}

SPECDEC_INLINE GgufFile read_gguf_header(const std::filesystem::path& path) { return GgufFile::open(path); }

// ---- the tokenizer -----------------------------------------------------------------------------------------

namespace detail {

inline std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        if (s.compare(i, from.size(), from) == 0) {
            out.append(to.data(), to.size());
            i += from.size();
        } else {
            out.push_back(s[i++]);
        }
    }
    return out;
}

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // "▁", SentencePiece's space

/// tokenizer.json's pre_tokenizer for GPT-2's regex (ByteLevel) or Llama-3's (Split, then ByteLevel).
inline json::Value byte_level_pre_tokenizer_json(SplitPattern split_pattern) {
    json::Object level;
    level.insert("type", "ByteLevel");
    level.insert("add_prefix_space", false);
    level.insert("trim_offsets", true);
    level.insert("use_regex", split_pattern == SplitPattern::kGpt2);
    if (split_pattern == SplitPattern::kGpt2) return level;
    json::Object pattern, split, seq;
    pattern.insert("Regex", std::string(split_pattern == SplitPattern::kLlama3 ? kLlama3Pattern : kQwen2Pattern));
    split.insert("type", "Split");
    split.insert("pattern", std::move(pattern));
    split.insert("behavior", "Isolated");
    split.insert("invert", false);
    seq.insert("type", "Sequence");
    seq.insert("pretokenizers", json::Array{json::Value(std::move(split)), json::Value(std::move(level))});
    return seq;
}

}  // namespace detail

SPECDEC_INLINE std::optional<GgufTokenizer> GgufTokenizer::from_gguf(const GgufFile& file) {
    const GgufValue* model = file.find("tokenizer.ggml.model");
    if (model == nullptr) return std::nullopt;
    const std::string name = file.path().string();
    const auto bad = [&](const std::string& key, const std::string& what) { detail::fail("gguf", name + ": metadata key '" + key + "' " + what); };
    if (model->type != GgufValueType::kString) bad("tokenizer.ggml.model", "is not a string");
    const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
    if (tokens == nullptr || !tokens->is_array() || tokens->element != GgufValueType::kString || tokens->strings.empty())
        bad("tokenizer.ggml.tokens", "must be a non-empty array of strings");
    const std::size_t n = tokens->strings.size();
    if (n > static_cast<std::size_t>(INT32_MAX)) bad("tokenizer.ggml.tokens", "has more than 2^31 tokens");
    const auto numbers = [&](const char* key, bool required) -> const std::vector<double>* {
        const GgufValue* v = file.find(key);
        if (v == nullptr) {
            if (required) bad(key, "is missing");
            return nullptr;
        }
        if (!v->is_array() || v->element == GgufValueType::kString || v->numbers.size() != n)
            bad(key, "must be a numeric array of " + std::to_string(n) + " values (one per token)");
        return &v->numbers;
    };
    const auto id = [&](const char* key, int fallback) {
        const GgufValue* v = file.find(key);
        if (v == nullptr) return fallback;
        if (!v->is_integer() || v->integer < 0 || v->integer >= static_cast<std::int64_t>(n))
            bad(key, "is " + (v->is_integer() ? std::to_string(v->integer) : std::string("not an integer")) +
                         ", not a token id below " + std::to_string(n));
        return static_cast<int>(v->integer);
    };
    const auto flag = [&](const char* key, bool fallback) {
        const GgufValue* v = file.find(key);
        if (v == nullptr) return fallback;
        if (v->type != GgufValueType::kBool) bad(key, "is not a bool");
        return v->integer != 0;
    };

    GgufTokenizer t;
    t.types_.assign(n, 1);
    if (const std::vector<double>* types = numbers("tokenizer.ggml.token_type", false))
        for (std::size_t i = 0; i < n; ++i) {
            // llama.cpp's llama_token_type: 0 undefined .. 6 byte. Checked before the cast (a float array's
            // 1e30 or NaN would make it undefined), and so that a corrupt type is not read as "normal".
            const double v = (*types)[i];
            if (!(v >= 0.0 && v <= 6.0) || v != std::floor(v)) {
                char shown[32];
                std::snprintf(shown, sizeof shown, "%g", v);
                bad("tokenizer.ggml.token_type", "holds " + std::string(shown) + " for token " + std::to_string(i) +
                                                     "; llama.cpp's token types are 0..6 (1 normal, 3 control, 6 byte)");
            }
            t.types_[i] = static_cast<int>(v);
        }
    const GgufValue* pre = file.find("tokenizer.ggml.pre");
    if (pre != nullptr && pre->type != GgufValueType::kString) bad("tokenizer.ggml.pre", "is not a string");
    t.pre_ = pre ? pre->string : "default";
    if (flag("tokenizer.ggml.remove_extra_whitespaces", false))
        bad("tokenizer.ggml.remove_extra_whitespaces", "is true (not supported)");

    if (model->string == "llama") {
        t.kind_ = Kind::kLlama;
        if (!flag("tokenizer.ggml.add_space_prefix", true))
            bad("tokenizer.ggml.add_space_prefix", "is false (specdec's SentencePiece encoder always adds the \" \" prefix)");
        const std::vector<double>* scores = numbers("tokenizer.ggml.scores", true);
        std::vector<std::string> spelled(n);
        std::vector<float> s(n);
        for (std::size_t i = 0; i < n; ++i) {
            spelled[i] = detail::replace_all(tokens->strings[i], detail::kSpmSpace, " ");
            s[i] = static_cast<float>((*scores)[i]);
        }
        // Byte fallback is by id in Llama2cTokenizer (byte b is token b + 3, as in every Llama vocab).
        for (int b = 0; b < 256 && n >= 259; ++b)
            if (spelled[static_cast<std::size_t>(b + 3)] != "<0x" + detail::hex_byte(static_cast<unsigned char>(b)).substr(2) + ">")
                bad("tokenizer.ggml.tokens", "holds '" + tokens->strings[static_cast<std::size_t>(b + 3)] + "' at id " + std::to_string(b + 3) +
                                                 ": specdec needs the byte tokens <0x00>..<0xFF> at ids 3..258");
        t.spm_ = Llama2cTokenizer::from_vocab(std::move(spelled), std::move(s));
        t.spm_->set_sentencepiece_spaces(true);  // llama.cpp escapes spaces as "▁" first, as SentencePiece
        t.bos_ = id("tokenizer.ggml.bos_token_id", 1);
        t.eos_ = id("tokenizer.ggml.eos_token_id", 2);
        t.add_bos_ = flag("tokenizer.ggml.add_bos_token", true);
    } else if (model->string == "gpt2") {
        t.kind_ = Kind::kGpt2;
        bool llama3 = false;
        detail::SplitPattern split = detail::SplitPattern::kGpt2;
        if (t.pre_ == "llama-bpe" || t.pre_ == "llama3" || t.pre_ == "llama-v3") llama3 = true, split = detail::SplitPattern::kLlama3;
        else if (t.pre_ == "qwen2" || t.pre_ == "deepseek-r1-qwen") split = detail::SplitPattern::kQwen2;  // llama.cpp applies no NFC: nor does this
        else if (t.pre_ != "gpt-2")
            bad("tokenizer.ggml.pre", "is '" + t.pre_ + "'; specdec runs \"gpt-2\", \"llama-bpe\" (\"llama3\", \"llama-v3\") and \"qwen2\" (\"deepseek-r1-qwen\") only");
        const GgufValue* merges = file.find("tokenizer.ggml.merges");
        if (merges == nullptr || !merges->is_array() || merges->element != GgufValueType::kString)
            bad("tokenizer.ggml.merges", "must be an array of strings");
        // Through the tokenizer.json reader: one implementation of byte-level BPE for both formats.
        json::Object vocab;
        json::Array added;
        for (std::size_t i = 0; i < n; ++i) {
            const int type = t.types_[i];
            if (type == 3 || type == 4) {  // control, user-defined: added tokens
                json::Object a;
                a.insert("id", static_cast<std::int64_t>(i));
                a.insert("content", tokens->strings[i]);
                a.insert("special", type == 3);
                added.push_back(std::move(a));
            }
            if (!vocab.insert(tokens->strings[i], static_cast<std::int64_t>(i)))
                bad("tokenizer.ggml.tokens", "spells token " + std::to_string(i) + " '" + tokens->strings[i] + "' like an earlier one");
        }
        json::Array merge_list;  // "a b" strings, checked by the tokenizer.json reader
        for (const std::string& m : merges->strings) merge_list.push_back(m);
        json::Object bpe;
        bpe.insert("type", "BPE");
        bpe.insert("ignore_merges", llama3);  // llama.cpp: ignore_merges for Llama-3's pre-tokenizer
        bpe.insert("vocab", std::move(vocab));
        bpe.insert("merges", std::move(merge_list));
        json::Object root;
        root.insert("added_tokens", std::move(added));
        root.insert("pre_tokenizer", detail::byte_level_pre_tokenizer_json(split));
        root.insert("model", std::move(bpe));
        t.bpe_ = Tokenizer::from_json(json::dump(json::Value(std::move(root))), name);
        t.bos_ = id("tokenizer.ggml.bos_token_id", -1);
        t.eos_ = id("tokenizer.ggml.eos_token_id", -1);
        t.add_bos_ = flag("tokenizer.ggml.add_bos_token", llama3);
    } else {
        bad("tokenizer.ggml.model", "is '" + model->string + "'; specdec reads \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece)");
    }
    t.add_eos_ = flag("tokenizer.ggml.add_eos_token", false);
    if (t.add_bos_ && t.bos_ < 0) bad("tokenizer.ggml.bos_token_id", "is missing while add_bos_token is true");
    if (t.add_eos_ && t.eos_ < 0) bad("tokenizer.ggml.eos_token_id", "is missing while add_eos_token is true");
    return t;
}

SPECDEC_INLINE GgufTokenizer::GgufTokenizer(Tokenizer t) : kind_(Kind::kGpt2) {
    detail::require(t.kind() == TokenizerKind::kByteLevel, "gguf", [] {
        return std::string("a SentencePiece-style tokenizer.json cannot be written as GGUF (its \"llama\" tokenizer "
                           "holds scores, not merges); byte-level tokenizers and llama2.c's can");
    });
    const json::Value root = json::parse(t.to_json(), "tokenizer");
    // Llama-3's and Qwen2's regexes are a Split in a Sequence; GPT-2's is ByteLevel's own or such a Split
    // (later files). llama.cpp has no normalizer: Qwen's NFC is not written, as its converter does.
    const json::Value* pre = root.find("pre_tokenizer");
    const json::Value* list = pre != nullptr && pre->is_object() ? pre->find("pretokenizers") : nullptr;
    const json::Value* pattern = list != nullptr && list->is_array() && !list->as_array().empty()
                                     ? list->as_array()[0].find("pattern") : nullptr;
    const json::Value* regex = pattern != nullptr && pattern->is_object() ? pattern->find("Regex") : nullptr;
    const bool llama3 = regex != nullptr && regex->is_string() && regex->as_string() == detail::kLlama3Pattern;
    const bool qwen2 = regex != nullptr && regex->is_string() && regex->as_string() == detail::kQwen2Pattern;
    pre_ = llama3 ? "llama-bpe" : qwen2 ? "qwen2" : "gpt-2";
    const json::Value* ignore = root.at("model").find("ignore_merges");
    detail::require((ignore != nullptr && ignore->is_bool() && ignore->as_bool()) == llama3, "gguf", [&] {
        return std::string("tokenizer: ignore_merges is ") + (llama3 ? "false" : "true") + " with the " +
               (llama3 ? "Llama-3" : qwen2 ? "Qwen2" : "GPT-2") + " pre-tokenizer, which llama.cpp's \"" + pre_ + "\" cannot express";
    });
    types_.assign(static_cast<std::size_t>(t.vocab_size()), 1);
    for (const json::Value& a : root.at("added_tokens").as_array()) {
        const json::Value* special = a.find("special");
        types_[static_cast<std::size_t>(a.at("id").as_int())] = special == nullptr || special->as_bool() ? 3 : 4;
    }
    if (const std::optional<int> b = t.bos_id()) {
        bos_ = *b;
        add_bos_ = true;
    }
    for (int id = 0; id < t.vocab_size(); ++id)
        if (t.is_special(id)) {
            eos_ = t.eos_id();
            break;
        }
    bpe_ = std::move(t);
}

SPECDEC_INLINE GgufTokenizer::GgufTokenizer(Llama2cTokenizer t) : kind_(Kind::kLlama) {
    types_.assign(static_cast<std::size_t>(t.vocab_size()), 1);
    for (int id = 0; id < t.vocab_size(); ++id) {
        const std::string& s = t.token(id);
        if (id == 0 && s == "<unk>") types_[0] = 2;
        else if (id == Llama2cTokenizer::kBos || id == Llama2cTokenizer::kEos) types_[static_cast<std::size_t>(id)] = 3;
        else if (s.size() == 6 && s.starts_with("<0x") && s.back() == '>') types_[static_cast<std::size_t>(id)] = 6;
    }
    bos_ = t.vocab_size() > Llama2cTokenizer::kBos ? Llama2cTokenizer::kBos : -1;
    eos_ = t.vocab_size() > Llama2cTokenizer::kEos ? Llama2cTokenizer::kEos : -1;
    add_bos_ = bos_ >= 0;
    spm_ = std::move(t);
}

SPECDEC_INLINE int GgufTokenizer::vocab_size() const { return bpe_ ? bpe_->vocab_size() : spm_->vocab_size(); }

SPECDEC_INLINE std::vector<int> GgufTokenizer::encode(std::string_view text, bool add_special) const {
    std::vector<int> ids;
    if (add_special && add_bos_) ids.push_back(bos_);
    // llama.cpp's SentencePiece session sees spaces as "▁", so a "▁" in the text is a space too.
    const std::vector<int> body = bpe_ ? bpe_->encode(text)
                                       : spm_->encode(detail::replace_all(text, detail::kSpmSpace, " "), false, false);
    ids.insert(ids.end(), body.begin(), body.end());
    if (add_special && add_eos_) ids.push_back(eos_);
    return ids;
}

SPECDEC_INLINE std::string GgufTokenizer::decode(std::span<const int> ids) const {
    std::vector<int> kept;
    kept.reserve(ids.size());
    for (int id : ids) {
        detail::require(id >= 0 && id < vocab_size(), "gguf", [&] {
            return "decode: token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")";
        });
        if (types_[static_cast<std::size_t>(id)] != 3) kept.push_back(id);
    }
    if (bpe_) return bpe_->decode(kept);
    std::string out;
    for (int id : kept) out += spm_->piece(-1, id);
    if (!out.empty() && out[0] == ' ') out.erase(0, 1);  // SentencePiece drops the " " prefix it added
    return out;
}

// ---- the model ---------------------------------------------------------------------------------------------

namespace detail {

/// llama.cpp's name of the HF tensor `hf` (for_each_tensor's names).
inline std::string gguf_tensor_name(const std::string& hf) {
    if (hf == "model.embed_tokens.weight") return "token_embd.weight";
    if (hf == "model.norm.weight") return "output_norm.weight";
    if (hf == "lm_head.weight") return "output.weight";
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 14> kLayer = {{
        {"input_layernorm.weight", "attn_norm.weight"},  {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},    {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},     {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
        {"self_attn.q_proj.bias", "attn_q.bias"},        {"self_attn.k_proj.bias", "attn_k.bias"},  // Qwen2
        {"self_attn.v_proj.bias", "attn_v.bias"},
        {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},  // Qwen3
    }};
    const std::size_t dot = hf.find('.', 13);  // "model.layers.N."
    const std::string layer = hf.substr(13, dot - 13), rest = hf.substr(dot + 1);
    for (const auto& [from, to] : kLayer)
        if (rest == from) return "blk." + layer + "." + std::string(to);
    fail("gguf", "no GGUF name for tensor '" + hf + "'");
}

/// Whether `name` is a tensor of llama.cpp's "llama" architecture with c's blocks, or of "qwen2" / "qwen3"
/// (their extra tensors where c has Qwen2's biases or Qwen3's q/k norms).
inline bool gguf_model_tensor(std::string_view name, const Config& c) {
    const int layers = c.num_hidden_layers;
    if (name == "token_embd.weight" || name == "output_norm.weight" || name == "output.weight") return true;
    if (!name.starts_with("blk.")) return false;
    name.remove_prefix(4);
    std::int64_t layer = 0;
    std::size_t digits = 0;
    while (digits < name.size() && digits < 10 && name[digits] >= '0' && name[digits] <= '9') layer = layer * 10 + (name[digits++] - '0');
    if (digits == 0 || layer >= layers || (digits > 1 && name[0] == '0')) return false;
    name.remove_prefix(digits);
    for (std::string_view s : {".attn_norm.weight", ".attn_q.weight", ".attn_k.weight", ".attn_v.weight", ".attn_output.weight",
                               ".ffn_norm.weight", ".ffn_gate.weight", ".ffn_up.weight", ".ffn_down.weight"})
        if (name == s) return true;
    if (c.qkv_bias && (name == ".attn_q.bias" || name == ".attn_k.bias" || name == ".attn_v.bias")) return true;
    return c.qk_norm && (name == ".attn_q_norm.weight" || name == ".attn_k_norm.weight");
}

/// The heads whose q or k rows llama.cpp permutes for RoPE (0 for other tensors).
inline int gguf_rope_heads(const std::string& hf, const Config& c) {
    if (hf.ends_with("q_proj.weight")) return c.num_attention_heads;
    if (hf.ends_with("k_proj.weight")) return c.num_key_value_heads;
    return 0;
}

}  // namespace detail

SPECDEC_INLINE GgufModel load_gguf(const std::filesystem::path& path, LoadOptions options) {
    const auto held = std::make_shared<const GgufFile>(GgufFile::open(path));  // kept by deferred matrices
    const GgufFile& f = *held;
    const std::string file = path.string();
    const auto bad = [&](const std::string& key, const std::string& what) { detail::fail("gguf", file + ": metadata key '" + key + "' " + what); };
    const GgufValue* arch = f.find("general.architecture");
    if (arch == nullptr || arch->type != GgufValueType::kString) bad("general.architecture", "is missing or not a string");
    const std::string& arch_name = arch->string;
    if (arch_name != "llama" && arch_name != "qwen2" && arch_name != "qwen3")
        bad("general.architecture", "is '" + arch_name + "'; specdec loads \"llama\" (Llama, Mistral, TinyLlama, SmolLM, ...), " +
                                        "\"qwen2\" (Qwen2, Qwen2.5) and \"qwen3\" (dense Qwen3)");
    // The keys are the architecture's: llama.block_count, qwen2.block_count, ...
    const auto key = [&](std::string_view suffix) { return arch_name + "." + std::string(suffix); };
    // llama.cpp runs "llama" with RoPE on adjacent pairs (its converter permutes q/k rows: undone below)
    // and Qwen's with NeoX RoPE on HF's half-split pairs (rows as in the HF folder).
    const bool llama_rope = arch_name == "llama";
    const auto integer = [&](const std::string& key, std::optional<std::int64_t> fallback) -> int {
        const GgufValue* v = f.find(key);
        if (v == nullptr) {
            if (!fallback) bad(key, "is missing");
            return static_cast<int>(*fallback);
        }
        if (!v->is_integer()) bad(key, v->is_array() ? "is an array (per-layer values are not supported)" : "is not an integer");
        if (v->integer <= 0 || v->integer > INT32_MAX) bad(key, "is " + std::to_string(v->integer) + ", outside 1..2^31-1");
        return static_cast<int>(v->integer);
    };
    const auto real = [&](const std::string& key, std::optional<double> fallback) -> float {
        const GgufValue* v = f.find(key);
        if (v == nullptr) {
            if (!fallback) bad(key, "is missing");
            return static_cast<float>(*fallback);
        }
        if (!v->is_float()) bad(key, "is not a float");
        return static_cast<float>(v->real);
    };
    Config c;
    c.hidden_size = integer(key("embedding_length"), std::nullopt);
    c.intermediate_size = integer(key("feed_forward_length"), std::nullopt);
    c.num_hidden_layers = integer(key("block_count"), std::nullopt);
    c.num_attention_heads = integer(key("attention.head_count"), std::nullopt);
    c.num_key_value_heads = integer(key("attention.head_count_kv"), c.num_attention_heads);
    c.max_position_embeddings = integer(key("context_length"), std::nullopt);
    c.rms_norm_eps = real(key("attention.layer_norm_rms_epsilon"), std::nullopt);
    c.rope_theta = real(key("rope.freq_base"), 10000.0);
    const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
    const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
    const std::int64_t fallback_vocab = tokens && tokens->is_array() ? static_cast<std::int64_t>(tokens->size())
                                        : embd && embd->dims.size() >= 2 ? embd->dims[1] : 0;
    c.vocab_size = integer(key("vocab_size"), fallback_vocab > 0 ? std::optional<std::int64_t>(fallback_vocab) : std::nullopt);
    // The head size and the RoPE check below derive from embedding_length: a wrong one is named here, by
    // the tensor that contradicts it, rather than as a RoPE or head mismatch further on.
    if (embd != nullptr && !embd->dims.empty() && embd->dims[0] != c.hidden_size)
        bad(key("embedding_length"), "is " + std::to_string(c.hidden_size) + "; tensor 'token_embd.weight' has rows of " +
                                          std::to_string(embd->dims[0]) + " values");
    // The head size: llama.cpp's n_embd_head_k / _v (attention.key_length / value_length, defaulting to
    // embedding_length / head_count); specdec's attention has one hd for q, k and v, and RoPE turns all of
    // it (llama.cpp's llama requires rope.dimension_count == key_length too).
    if (f.find(key("attention.key_length")) != nullptr || f.find(key("attention.value_length")) != nullptr) {
        const int key_length = integer(key("attention.key_length"), std::nullopt);
        const int value_length = integer(key("attention.value_length"), key_length);
        if (value_length != key_length)
            bad(key("attention.value_length"), "is " + std::to_string(value_length) + ", " + key("attention.key_length") + " " +
                                                    std::to_string(key_length) + "; specdec needs one head size for keys and values");
        c.attention_head_dim = key_length;
    }
    if (f.find(key("rope.dimension_count")) != nullptr) {
        const int rot = integer(key("rope.dimension_count"), std::nullopt);
        const bool splits = c.attention_head_dim == 0 && c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads == 0;
        const int hd = c.attention_head_dim > 0 ? c.attention_head_dim : splits ? c.hidden_size / c.num_attention_heads : rot;
        if (rot != hd)
            bad(key("rope.dimension_count"), "is " + std::to_string(rot) + "; specdec rotates the whole head of " + std::to_string(hd) +
                                                  " (a partial rotary is not supported)");
    }
    // RoPE scaling as llama.cpp reads it (llama_model::load_hparams): rope.scaling.type "none" or "linear"
    // (absent: linear, so a factor alone scales), rope.scaling.factor (or the older rope.scale_linear),
    // every frequency divided by it. Llama 3.x's scaling has no keys: convert_hf_to_gguf.py stores its
    // per-dimension factors as the tensor rope_freqs.weight, read below as a table.
    std::string scaling = "linear";
    if (const GgufValue* v = f.find(key("rope.scaling.type"))) {
        if (v->type != GgufValueType::kString) bad(key("rope.scaling.type"), "is not a string");
        if (v->string != "none" && v->string != "linear" && v->string != "yarn")
            bad(key("rope.scaling.type"), "is '" + v->string + "'; specdec reads 'none', 'linear' and 'yarn' (Llama-3.1's scaling comes as " +
                                               "the tensor rope_freqs.weight; LongRoPE is not supported)");
        scaling = v->string;
    }
    const std::string factor_key = f.find(key("rope.scaling.factor")) != nullptr ? key("rope.scaling.factor") : key("rope.scale_linear");
    if (const GgufValue* v = f.find(factor_key)) {
        if (!v->is_float() || !std::isfinite(v->real) || v->real < 0.0)
            bad(factor_key, v->is_float() ? "is " + std::to_string(v->real) + ", not a finite factor >= 0" : std::string("is not a float"));
        if (v->real != 0.0 && v->real != 1.0) {  // llama.cpp: 0 means unset, 1 scales nothing
            if (scaling == "none") bad(factor_key, "is " + std::to_string(v->real) + " while " + key("rope.scaling.type") + " is 'none'");
            c.rope_scaling = RopeScaling{.type = RopeScalingType::kLinear, .factor = static_cast<float>(v->real)};
        }
    }
    if (f.find(key("rope.scaling.original_context_length")) != nullptr)
        c.rope_scaling.original_max_position_embeddings = integer(key("rope.scaling.original_context_length"), std::nullopt);
    // YaRN as llama.cpp applies it (llama_context: ext_factor 1, mscale 0.1 ln(factor) + 1 times
    // rope.scaling.attn_factor; the ramp of ggml's rope_yarn, the original context defaulting to
    // context_length) and as convert_hf_to_gguf.py writes HF's parameters: its yarn_beta_fast,
    // yarn_beta_slow and yarn_attn_factor (HF's attention_factor, replacing the default mscale) are read too,
    // though this llama.cpp reads none of them for llama or qwen; an extrapolation mix other than 1 and
    // DeepSeek's log multiplier have no HF counterpart and are refused.
    const std::vector<std::string> yarn_keys = {"rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow", "rope.scaling.yarn_attn_factor",
                                                "rope.scaling.yarn_ext_factor", "rope.scaling.yarn_log_multiplier"};
    if (scaling != "yarn") {
        for (const std::string& k : yarn_keys)
            if (f.find(key(k)) != nullptr) bad(key(k), "is set while " + key("rope.scaling.type") + " is '" + scaling + "', not 'yarn'");
    } else {
        const float factor = c.rope_scaling.type == RopeScalingType::kLinear ? c.rope_scaling.factor : 1.0f;
        RopeScaling y{.type = RopeScalingType::kYarn, .factor = factor};
        y.original_max_position_embeddings = f.find(key("rope.scaling.original_context_length")) != nullptr
                                                 ? c.rope_scaling.original_max_position_embeddings
                                                 : c.max_position_embeddings;
        // Non-finite values are refused by Config::validate (the betas, the attention factor) or here.
        y.beta_fast = real(key("rope.scaling.yarn_beta_fast"), 32.0);
        y.beta_slow = real(key("rope.scaling.yarn_beta_slow"), 1.0);
        y.attention_factor = real(key("rope.scaling.yarn_attn_factor"), detail::yarn_mscale(factor)) *
                             real(key("rope.scaling.attn_factor"), 1.0);
        if (const float ext = real(key("rope.scaling.yarn_ext_factor"), -1.0); !(ext < 0.0f) && ext != 1.0f)
            bad(key("rope.scaling.yarn_ext_factor"), "is " + std::to_string(ext) + "; specdec mixes YaRN's frequencies as transformers does (1)");
        if (const float mul = real(key("rope.scaling.yarn_log_multiplier"), 0.0); mul != 0.0f)
            bad(key("rope.scaling.yarn_log_multiplier"), "is " + std::to_string(mul) + "; DeepSeek's YaRN attention scaling is not supported");
        c.rope_scaling = y;
    }
    if (f.find(key("rope.scaling.attn_factor")) != nullptr && scaling != "yarn")
        bad(key("rope.scaling.attn_factor"), "is set while " + key("rope.scaling.type") + " is '" + scaling + "'; specdec reads it with 'yarn' only");
    if (const GgufValue* v = f.find(key("expert_count")); v != nullptr && !(v->is_integer() && v->integer == 0))
        bad(key("expert_count"), "is set; mixture-of-experts models are not supported");
    c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
    // Qwen2's q/k/v biases (llama.cpp loads them when present; Qwen2's converter always writes them) and
    // Qwen3's per-head q/k RMSNorms (required by llama.cpp's qwen3).
    c.qkv_bias = arch_name == "qwen2" && f.find_tensor("blk.0.attn_q.bias") != nullptr;
    c.qk_norm = arch_name == "qwen3";
    try {
        c.validate();
    } catch (const error& e) {
        detail::fail("gguf", file + ": the " + arch_name + ".* metadata gives an unusable shape: " + std::string(e.what()));
    }
    // Llama 3.x (rope_type llama3): convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors writes one
    // factor per rotary pair, and llama.cpp (ggml_rope_ext's freq_factors) divides pair j's angle by
    // factor j. Kept as that table, so the frequencies are llama.cpp's whatever parameters made it.
    const GgufTensorInfo* rope_freqs = f.find_tensor("rope_freqs.weight");
    if (rope_freqs != nullptr && !llama_rope)
        detail::fail("gguf", file + ": holds tensor 'rope_freqs.weight', which llama.cpp's " + arch_name + " does not read");
    if (rope_freqs != nullptr) {
        const std::string name = "tensor 'rope_freqs.weight'";
        if (c.rope_scaling.type == RopeScalingType::kLinear)
            bad(factor_key, "is " + std::to_string(c.rope_scaling.factor) + " and the file also holds " + name +
                                "; specdec reads one RoPE scaling, not both");
        detail::require(rope_freqs->type == static_cast<std::uint32_t>(GgufType::kF32), "gguf", [&] {
            return file + ": " + name + " has type " + detail::gguf_type_traits(rope_freqs->type).name +
                   "; llama.cpp reads RoPE factors only as F32";
        });
        std::vector<std::int64_t> dims = rope_freqs->dims;
        while (dims.size() > 1 && dims.back() == 1) dims.pop_back();
        const int pairs = c.head_dim() / 2;
        detail::require(dims == std::vector<std::int64_t>{pairs}, "gguf", [&] {
            return file + ": " + name + " has ne " + detail::shape_string(rope_freqs->dims) + "; head_dim " +
                   std::to_string(c.head_dim()) + " needs one factor per rotary pair, [" + std::to_string(pairs) + "]";
        });
        RopeScaling table{.type = RopeScalingType::kFactors};
        table.factors.resize(static_cast<std::size_t>(pairs));
        std::memcpy(table.factors.data(), f.data(*rope_freqs).data(), table.factors.size() * sizeof(float));
        for (std::size_t j = 0; j < table.factors.size(); ++j)
            detail::require(std::isfinite(table.factors[j]) && table.factors[j] > 0.0f, "gguf", [&] {
                return file + ": " + name + " element " + std::to_string(j) + " is " + std::to_string(table.factors[j]) +
                       "; a RoPE factor must be finite and > 0";
            });
        c.rope_scaling = std::move(table);
    }

    // The file must hold exactly the tensors of this shape: count them before anything is allocated per layer.
    const int per_layer = 9 + (c.qkv_bias ? 3 : 0) + (c.qk_norm ? 2 : 0);
    const std::int64_t expected =
        per_layer * std::int64_t{c.num_hidden_layers} + 2 + (c.tie_word_embeddings ? 0 : 1) + (rope_freqs != nullptr ? 1 : 0);
    for (const GgufTensorInfo& t : f.tensors())
        if (t.name != "rope_freqs.weight" && !detail::gguf_model_tensor(t.name, c))
            detail::fail("gguf", file + ": tensor '" + t.name + "' is not one of a " + arch_name + " block that specdec runs (token_embd, blk.N." +
                                     "{attn_norm,attn_q,attn_k,attn_v,attn_output,ffn_norm,ffn_gate,ffn_up,ffn_down" +
                                     (c.qkv_bias ? ",attn_q.bias,attn_k.bias,attn_v.bias" : "") +
                                     (c.qk_norm ? ",attn_q_norm,attn_k_norm" : "") + "} for N < block_count " +
                                     std::to_string(c.num_hidden_layers) + ", output_norm, output" + (llama_rope ? ", rope_freqs)" : ")"));
    detail::require(static_cast<std::int64_t>(f.tensors().size()) == expected, "gguf", [&] {
        return file + ": holds " + std::to_string(f.tensors().size()) + " tensors; " + key("block_count") + " " +
               std::to_string(c.num_hidden_layers) + " needs " + std::to_string(expected) +
               (c.tie_word_embeddings ? " (no output.weight: the head is tied to token_embd)" : "");
    });

    GgufModel m;
    m.config = c;
    m.weights.layers.resize(static_cast<std::size_t>(c.num_hidden_layers));
    auto deferred = std::make_shared<DeferredMatrices>();
    for_each_tensor(m.weights, c, [&](const std::string& hf, std::vector<float>& dst, std::size_t n) {
        const std::string name = detail::gguf_tensor_name(hf);
        const GgufTensorInfo* t = f.find_tensor(name);
        detail::require(t != nullptr, "gguf", [&] { return file + ": tensor '" + name + "' is missing"; });
        std::vector<std::int64_t> want = detail::hf_shape(hf, c);
        std::reverse(want.begin(), want.end());  // ggml's ne: columns first
        std::vector<std::int64_t> dims = t->dims;
        while (dims.size() > want.size() && dims.back() == 1) dims.pop_back();
        detail::require(dims == want, "gguf", [&] {
            return file + ": tensor '" + name + "' has ne " + detail::shape_string(t->dims) + "; the " + arch_name + ".* metadata needs " +
                   detail::shape_string(want);
        });
        const detail::GgufTypeTraits traits = detail::gguf_type_traits(t->type);
        const auto type = static_cast<GgufType>(t->type);
        detail::require(detail::gguf_readable(type), "gguf", [&] {
            return file + ": tensor '" + name + "' has type " + traits.name + " (ggml type " + std::to_string(t->type) +
                   "), which specdec cannot dequantize (" + detail::kGgufReadable + ")";
        });
        const int heads = llama_rope ? detail::gguf_rope_heads(hf, c) : 0;
        if (options.defer_matrices && deferrable_tensor(hf)) {
            const std::int64_t rows = want[1], k = want[0];
            detail::require(k % traits.block == 0, "gguf", [&] {
                return file + ": tensor '" + name + "' has rows of " + std::to_string(k) + " values, not whole " + traits.name + " blocks of " +
                       std::to_string(traits.block);
            });
            using detail::StoredRows;
            const std::size_t row_bytes = static_cast<std::size_t>(k / traits.block * traits.bytes);
            const std::span<const std::byte> bytes = f.data(*t);
            const StoredRows how = type == GgufType::kBF16  ? detail::in_place_or_converted(StoredRows::kBf16, bytes.data(), row_bytes, 2)
                                   : type == GgufType::kF32 ? detail::in_place_or_converted(StoredRows::kF32, bytes.data(), row_bytes, 4)
                                                            : StoredRows::kConverted;
            const std::uint32_t stored_type = t->type;
            const int head_rows = heads > 0 ? static_cast<int>(rows / heads) : 0, half = head_rows / 2;
            deferred->matrices.emplace(
                hf, detail::mapped_matrix_rows(
                        {.data = bytes,
                         .m = static_cast<int>(rows),
                         .k = static_cast<int>(k),
                         .row_bytes = row_bytes,
                         .how = how,
                         .convert = [stored_type, k](std::span<const std::byte> b, float* out) { detail::gguf_dequantize(stored_type, b, out, k); },
                         // HF row r of a head is llama.cpp's row 2(r mod hd/2) + r div hd/2 (permute_rope_rows, to_hf).
                         .stored_row = heads > 0 ? std::function<int(int)>([head_rows, half](int j) {
                             const int r = j % head_rows;
                             return j - r + 2 * (r % half) + r / half;
                         })
                                                 : std::function<int(int)>(),
                         .where = file + ": tensor '" + name + "'",
                         .who = "gguf"}));
            return;
        }
        dst.resize(n);
        // One pass per value, split over threads for large tensors: converting a 1.1B bf16 file is then
        // bound by memory, not by one core. Each part checks its values are finite.
        const std::int64_t total = static_cast<std::int64_t>(n), block = traits.block;
        const unsigned parts = total >= (std::int64_t{1} << 20) ? std::clamp(std::thread::hardware_concurrency(), 1u, 8u) : 1u;
        const std::int64_t step = (total / block + parts - 1) / parts * block;
        std::vector<std::int64_t> first_bad(parts, total);
        const auto convert = [&](unsigned part) {
            const std::int64_t begin = std::min<std::int64_t>(total, part * step), end = std::min<std::int64_t>(total, begin + step);
            if (begin == end) return;
            const std::span<const std::byte> bytes = f.data(*t).subspan(static_cast<std::size_t>(begin / block * traits.bytes));
            detail::gguf_dequantize(t->type, bytes, dst.data() + begin, end - begin);
            for (std::int64_t i = begin; i < end; ++i)
                if (!std::isfinite(dst[static_cast<std::size_t>(i)])) {
                    first_bad[part] = i;
                    break;
                }
        };
        std::vector<std::thread> threads;
        for (unsigned part = 1; part < parts; ++part) threads.emplace_back(convert, part);
        convert(0);  // the type was checked above: the parts cannot throw
        for (std::thread& th : threads) th.join();
        const std::int64_t bad = *std::min_element(first_bad.begin(), first_bad.end());
        detail::require(bad == total, "gguf", [&] {
            return file + ": tensor '" + name + "' holds " + (std::isnan(dst[static_cast<std::size_t>(bad)]) ? "NaN" : "Inf") +
                   " at element " + std::to_string(bad);
        });
        if (heads > 0) detail::permute_rope_rows(dst, heads, c.hidden_size, /*to_hf=*/true);
    });
    if (options.defer_matrices) {
        deferred->owner = held;
        m.weights.deferred = std::move(deferred);
    }
    m.tokenizer = GgufTokenizer::from_gguf(f);
    if (m.tokenizer)
        detail::require(m.tokenizer->vocab_size() <= c.vocab_size, "gguf", [&] {
            return file + ": tokenizer.ggml.tokens holds " + std::to_string(m.tokenizer->vocab_size()) +
                   " tokens, more than the model's vocab_size " + std::to_string(c.vocab_size);
        });
    return m;
}

// ---- writing -----------------------------------------------------------------------------------------------

namespace detail {

/// Appends GGUF's little-endian encodings to a byte buffer (the header is built in memory, then written).
struct GgufWriter {
    std::string bytes;
    template <class T>
    void put(T v) {
        bytes.append(reinterpret_cast<const char*>(&v), sizeof(T));
    }
    void str(std::string_view s) {
        put<std::uint64_t>(s.size());
        bytes.append(s);
    }
    void key(std::string_view k, GgufValueType t) {
        str(k);
        put(static_cast<std::uint32_t>(t));
    }
    void u32(std::string_view k, std::uint32_t v) { key(k, GgufValueType::kU32), put(v); }
    void f32(std::string_view k, float v) { key(k, GgufValueType::kF32), put(v); }
    void boolean(std::string_view k, bool v) { key(k, GgufValueType::kBool), put<std::uint8_t>(v ? 1 : 0); }
    void string(std::string_view k, std::string_view v) { key(k, GgufValueType::kString), str(v); }
    void strings(std::string_view k, const std::vector<std::string>& v) {
        key(k, GgufValueType::kArray);
        put(static_cast<std::uint32_t>(GgufValueType::kString));
        put<std::uint64_t>(v.size());
        for (const std::string& s : v) str(s);
    }
    template <class T>
    void array(std::string_view k, GgufValueType element, const std::vector<T>& v) {
        key(k, GgufValueType::kArray);
        put(static_cast<std::uint32_t>(element));
        put<std::uint64_t>(v.size());
        for (T x : v) put(x);
    }
};

SPECDEC_INLINE std::vector<float> gguf_llama3_rope_factors(const Config& c) {
    // The converter's arithmetic, step for step: torch float32 tensors, Python floats cast to float32 where
    // they meet one, and `a / t` computed as t.reciprocal() * a (torch's Tensor.__rtruediv__).
    const RopeScaling& s = c.rope_scaling;
    const int hd = c.head_dim();
    const double old_context = s.original_max_position_embeddings;
    const auto low_wavelen = static_cast<float>(old_context / s.low_freq_factor);
    const auto high_wavelen = static_cast<float>(old_context / s.high_freq_factor);
    const auto ramp = static_cast<float>(static_cast<double>(s.high_freq_factor) - s.low_freq_factor);
    const auto two_pi = static_cast<float>(2.0 * std::numbers::pi);
    std::vector<float> factors(static_cast<std::size_t>(hd / 2));
    for (int j = 0; j < hd / 2; ++j) {
        const float freq = 1.0f / std::pow(c.rope_theta, static_cast<float>(2 * j) / static_cast<float>(hd));
        const float wavelen = 1.0f / freq * two_pi;
        float& f = factors[static_cast<std::size_t>(j)];
        if (wavelen < high_wavelen) {
            f = 1.0f;
        } else if (wavelen > low_wavelen) {
            f = s.factor;
        } else {
            const float smooth = (1.0f / wavelen * static_cast<float>(old_context) - s.low_freq_factor) / ramp;
            f = 1.0f / ((1.0f - smooth) / s.factor + smooth);
        }
    }
    return factors;
}

}  // namespace detail

SPECDEC_INLINE void save_gguf(const std::filesystem::path& path, const Config& c, const Weights& w,
                              const GgufTokenizer* tokenizer, GgufSaveType type) {
    const std::string file = path.string();
    c.validate();
    // Llama's block as "llama" (q/k rows permuted for its RoPE), Qwen2's and Qwen3's as llama.cpp's own
    // architectures (NeoX RoPE: rows as in HF), which is how convert_hf_to_gguf.py writes each.
    const std::string arch = c.qkv_bias ? "qwen2" : c.qk_norm ? "qwen3" : "llama";
    const bool llama_rope = arch == "llama";
    const auto key = [&](std::string_view suffix) { return arch + "." + std::string(suffix); };
    detail::require(llama_rope || c.rope_scaling.type == RopeScalingType::kNone || c.rope_scaling.type == RopeScalingType::kLinear ||
                        c.rope_scaling.type == RopeScalingType::kYarn,
                    "gguf", [&] { return file + ": llama.cpp's " + arch + " reads no RoPE factor table (rope_freqs.weight): only none, linear or yarn scaling"; });
    detail::require(c.rope_scaling.type != RopeScalingType::kYarn || c.rope_scaling.truncate, "gguf", [&] {
        return file + ": rope_scaling yarn with truncate false has no GGUF key (llama.cpp rounds the ramp's ends out)";
    });
    detail::require(!c.qkv_bias || c.head_dim() * c.num_attention_heads == c.hidden_size, "gguf", [&] {
        return file + ": llama.cpp's qwen2 needs heads x head_dim == hidden_size; this config has " + std::to_string(c.num_attention_heads) +
               " x " + std::to_string(c.head_dim()) + " and " + std::to_string(c.hidden_size);
    });
    validate(w, c);
    constexpr std::uint64_t kAlign = 32;
    // The metadata. Counts are written first: build the entries, then the header around them.
    detail::GgufWriter kv;
    std::uint64_t n_kv = 0;
    const auto count = [&](auto&& write) { write(), ++n_kv; };
    count([&] { kv.string("general.architecture", arch); });
    count([&] { kv.string("general.name", "specdec"); });
    count([&] { kv.u32("general.alignment", kAlign); });
    static constexpr std::uint32_t kFileType[] = {0, 1, 32, 7};  // llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_BF16, MOSTLY_Q8_0
    count([&] { kv.u32("general.file_type", kFileType[static_cast<int>(type)]); });
    if (type == GgufSaveType::kQ8_0) count([&] { kv.u32("general.quantization_version", 2); });
    count([&] { kv.u32(key("context_length"), static_cast<std::uint32_t>(c.max_position_embeddings)); });
    count([&] { kv.u32(key("embedding_length"), static_cast<std::uint32_t>(c.hidden_size)); });
    count([&] { kv.u32(key("block_count"), static_cast<std::uint32_t>(c.num_hidden_layers)); });
    count([&] { kv.u32(key("feed_forward_length"), static_cast<std::uint32_t>(c.intermediate_size)); });
    count([&] { kv.u32(key("attention.head_count"), static_cast<std::uint32_t>(c.num_attention_heads)); });
    count([&] { kv.u32(key("attention.head_count_kv"), static_cast<std::uint32_t>(c.num_key_value_heads)); });
    count([&] { kv.f32(key("attention.layer_norm_rms_epsilon"), c.rms_norm_eps); });
    count([&] { kv.f32(key("rope.freq_base"), c.rope_theta); });
    count([&] { kv.u32(key("rope.dimension_count"), static_cast<std::uint32_t>(c.head_dim())); });
    if (c.attention_head_dim > 0) {  // a head size of its own: llama.cpp's n_embd_head_k and _v
        count([&] { kv.u32(key("attention.key_length"), static_cast<std::uint32_t>(c.head_dim())); });
        count([&] { kv.u32(key("attention.value_length"), static_cast<std::uint32_t>(c.head_dim())); });
    }
    switch (c.rope_scaling.type) {
        case RopeScalingType::kNone: break;
        case RopeScalingType::kLinear:  // as convert_hf_to_gguf.py writes HF's {"rope_type": "linear"}
            count([&] { kv.string(key("rope.scaling.type"), "linear"); });
            count([&] { kv.f32(key("rope.scaling.factor"), c.rope_scaling.factor); });
            break;
        case RopeScalingType::kYarn: {  // as convert_hf_to_gguf.py writes HF's {"rope_type": "yarn"}
            const RopeScaling& y = c.rope_scaling;
            count([&] { kv.string(key("rope.scaling.type"), "yarn"); });
            count([&] { kv.f32(key("rope.scaling.factor"), y.factor); });
            count([&] { kv.u32(key("rope.scaling.original_context_length"), static_cast<std::uint32_t>(y.original_max_position_embeddings)); });
            // Written only where they differ from what a reader assumes without them.
            if (y.beta_fast != 32.0f) count([&] { kv.f32(key("rope.scaling.yarn_beta_fast"), y.beta_fast); });
            if (y.beta_slow != 1.0f) count([&] { kv.f32(key("rope.scaling.yarn_beta_slow"), y.beta_slow); });
            if (y.attention_factor != static_cast<float>(detail::yarn_mscale(y.factor)))
                count([&] { kv.f32(key("rope.scaling.yarn_attn_factor"), y.attention_factor); });
            break;
        }
        case RopeScalingType::kLlama3:   // no keys: the table below, as convert_hf_to_gguf.py writes it
        case RopeScalingType::kFactors: break;
    }
    count([&] { kv.u32(key("vocab_size"), static_cast<std::uint32_t>(c.vocab_size)); });
    if (tokenizer != nullptr) {
        const GgufTokenizer& t = *tokenizer;
        detail::require(t.vocab_size() <= c.vocab_size, "gguf", [&] {
            return file + ": the tokenizer has " + std::to_string(t.vocab_size()) + " tokens, more than the model's vocab_size " +
                   std::to_string(c.vocab_size);
        });
        std::vector<std::string> tokens(static_cast<std::size_t>(t.vocab_size()));
        std::vector<std::int32_t> types(t.token_types().begin(), t.token_types().end());
        if (const Llama2cTokenizer* spm = t.spm()) {
            std::vector<float> scores(tokens.size());
            for (int id = 0; id < spm->vocab_size(); ++id) {
                tokens[static_cast<std::size_t>(id)] = detail::replace_all(spm->token(id), " ", detail::kSpmSpace);
                scores[static_cast<std::size_t>(id)] = spm->score(id);
            }
            count([&] { kv.string("tokenizer.ggml.model", "llama"); });
            count([&] { kv.string("tokenizer.ggml.pre", "default"); });
            count([&] { kv.strings("tokenizer.ggml.tokens", tokens); });
            count([&] { kv.array("tokenizer.ggml.scores", GgufValueType::kF32, scores); });
        } else {
            // The vocab keys and merges as tokenizer.json spells them: GPT-2's byte alphabet, added tokens by content.
            const json::Value root = json::parse(t.bpe()->to_json(), "tokenizer");
            const json::Value& model = root.at("model");
            for (const json::Member& m : model.at("vocab").as_object()) tokens[static_cast<std::size_t>(m.value.as_int())] = m.key;
            std::vector<std::string> merges;
            for (const json::Value& m : model.at("merges").as_array())
                merges.push_back(m.is_string() ? m.as_string() : m.as_array()[0].as_string() + " " + m.as_array()[1].as_string());
            count([&] { kv.string("tokenizer.ggml.model", "gpt2"); });
            count([&] { kv.string("tokenizer.ggml.pre", t.pre()); });
            count([&] { kv.strings("tokenizer.ggml.tokens", tokens); });
            count([&] { kv.strings("tokenizer.ggml.merges", merges); });
        }
        count([&] { kv.array("tokenizer.ggml.token_type", GgufValueType::kI32, types); });
        if (t.bos_id() >= 0) count([&] { kv.u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(t.bos_id())); });
        if (t.eos_id() >= 0) count([&] { kv.u32("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(t.eos_id())); });
        count([&] { kv.boolean("tokenizer.ggml.add_bos_token", t.add_bos()); });
        count([&] { kv.boolean("tokenizer.ggml.add_eos_token", false); });
    }

    // Tensor infos: llama.cpp's names and ne order, offsets aligned.
    struct Planned {
        std::string hf, name;
        const std::vector<float>* src;
        std::vector<std::int64_t> ne;
        GgufType type;
        std::uint64_t offset, bytes;
    };
    std::vector<Planned> plan;
    std::uint64_t offset = 0;
    // (hd/2) llama.cpp's rope_freqs.weight, first as the converter puts it (its extra tensors lead).
    const std::vector<float> rope_factors = c.rope_scaling.type == RopeScalingType::kLlama3  ? detail::gguf_llama3_rope_factors(c)
                                            : c.rope_scaling.type == RopeScalingType::kFactors ? c.rope_scaling.factors
                                                                                               : std::vector<float>{};
    if (!rope_factors.empty()) {
        const std::uint64_t bytes = rope_factors.size() * 4;
        plan.push_back({"", "rope_freqs.weight", &rope_factors, {static_cast<std::int64_t>(rope_factors.size())}, GgufType::kF32, 0, bytes});
        offset = (bytes + kAlign - 1) / kAlign * kAlign;
    }
    for_each_tensor(w, c, [&](const std::string& hf, const std::vector<float>& t, std::size_t) {
        std::vector<std::int64_t> ne = detail::hf_shape(hf, c);
        std::reverse(ne.begin(), ne.end());
        GgufType tt = GgufType::kF32;
        if (ne.size() == 2) {  // matrices; norms stay F32
            static constexpr GgufType kType[] = {GgufType::kF32, GgufType::kF16, GgufType::kBF16, GgufType::kQ8_0};
            tt = kType[static_cast<int>(type)];
            if (tt == GgufType::kQ8_0 && ne[0] % detail::kQK != 0) tt = GgufType::kF16;
        }
        const detail::GgufTypeTraits traits = detail::gguf_type_traits(static_cast<std::uint32_t>(tt));
        const std::uint64_t bytes = t.size() / static_cast<std::uint64_t>(traits.block) * static_cast<std::uint64_t>(traits.bytes);
        plan.push_back({hf, detail::gguf_tensor_name(hf), &t, std::move(ne), tt, offset, bytes});
        offset += (bytes + kAlign - 1) / kAlign * kAlign;
    });
    detail::GgufWriter head;
    head.put(detail::kGgufMagic);
    head.put<std::uint32_t>(3);
    head.put<std::uint64_t>(plan.size());
    head.put<std::uint64_t>(n_kv);
    head.bytes += kv.bytes;
    for (const Planned& p : plan) {
        head.str(p.name);
        head.put(static_cast<std::uint32_t>(p.ne.size()));
        for (std::int64_t d : p.ne) head.put(static_cast<std::uint64_t>(d));
        head.put(static_cast<std::uint32_t>(p.type));
        head.put(p.offset);
    }
    head.bytes.resize((head.bytes.size() + kAlign - 1) / kAlign * kAlign, '\0');

    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    detail::require(static_cast<bool>(out), "gguf", [&] { return file + ": cannot write"; });
    out.write(head.bytes.data(), static_cast<std::streamsize>(head.bytes.size()));
    std::vector<float> permuted;
    std::vector<std::byte> encoded;
    for (const Planned& p : plan) {
        std::span<const float> x(*p.src);
        if (const int heads = llama_rope ? detail::gguf_rope_heads(p.hf, c) : 0; heads > 0) {
            permuted = *p.src;
            detail::permute_rope_rows(permuted, heads, c.hidden_size, /*to_hf=*/false);
            x = permuted;
        }
        encoded.resize(static_cast<std::size_t>((p.bytes + kAlign - 1) / kAlign * kAlign));
        std::fill(encoded.begin() + static_cast<std::ptrdiff_t>(p.bytes), encoded.end(), std::byte{0});
        std::byte* dst = encoded.data();
        switch (p.type) {
            case GgufType::kF32: std::memcpy(dst, x.data(), x.size() * 4); break;
            case GgufType::kF16:
                for (std::size_t i = 0; i < x.size(); ++i) {
                    const std::uint16_t h = detail::float_to_half(x[i]);
                    std::memcpy(dst + 2 * i, &h, 2);
                }
                break;
            case GgufType::kBF16:
                for (std::size_t i = 0; i < x.size(); ++i) {
                    const bf16 b = to_bf16(x[i]);
                    std::memcpy(dst + 2 * i, &b.bits, 2);
                }
                break;
            default: {
                std::vector<std::byte> q;
                detail::quantize_q8_0(x, q);
                std::memcpy(dst, q.data(), q.size());
            }
        }
        out.write(reinterpret_cast<const char*>(encoded.data()), static_cast<std::streamsize>(encoded.size()));
    }
    out.flush();
    detail::require(out.good(), "gguf", [&] { return file + ": writing failed"; });
}

#endif  // SPECDEC_BODIES

}  // namespace specdec
