// specdec/detail/io/llama2c.hpp — Karpathy's llama2.c files: model .bin (versions 0, 1, 2) and tokenizer.bin.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../core/compiled.hpp"
#include "../core/error.hpp"
#include "../model/config.hpp"
#include "../model/weights.hpp"
#include "checkpoint.hpp"
#include "file_bytes.hpp"
#if SPECDEC_BODIES  // only the bodies read and write files
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <queue>
#endif

// The model file (llama2.c's run.c, runq.c and export.py), all little-endian:
//   version 0 ("legacy", run.c): 7 int32 — dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
//     seq_len; vocab_size < 0 means the classifier is not shared with the embedding. Then float32:
//     token_embedding (V, D), rms_att (L, D), wq (L, H*hd, D), wk (L, Hkv*hd, D), wv (L, Hkv*hd, D),
//     wo (L, D, H*hd), rms_ffn (L, D), w1 (L, F, D), w2 (L, D, F), w3 (L, F, D), rms_final (D),
//     freq_cis_real and freq_cis_imag (seq_len, hd/2) each (run.c skips them: it computes RoPE), wcls (V, D)
//     when not shared.
//   versions 1 and 2 (export.py): a 256-byte header — uint32 magic 0x616b3432 ("ak42"), int32 version, the
//     7 int32 above (vocab_size positive), uint8 shared_classifier, and for version 2 an int32 group size;
//     zero padding. Then rms_att (L, D), rms_ffn (L, D), rms_final (D), token_embedding, wq, wk, wv, wo, w1,
//     w2, w3 (per layer, as above), wcls when not shared. Version 1 stores them as float32. Version 2
//     (runq.c) keeps the norms float32 and stores each matrix as Q8_0: its int8 values, then one float32
//     scale per group of `group size` consecutive values (value = int8 x scale); loading dequantizes.
// llama2.c's Transformer is HF's Llama with rms eps 1e-5 and RoPE theta 10000 (both fixed in run.c),
// max_position_embeddings = seq_len, and one difference of layout: run.c's RoPE rotates adjacent pairs
// (x[2i], x[2i+1]) of each head, HF's (and CpuModel's, row_ops.hpp `rope`) rotates halves (x[i],
// x[i + hd/2]), both by theta^(-2i/hd). Loading moves row 2i + j of each head of wq and wk to row
// j·hd/2 + i (export.py's permute_original, the inverse of the permute_reverse it applies to HF weights),
// so CpuModel computes run.c's function; saving moves them back.

namespace specdec {

// ---- declarations (the bodies follow) ----------------------------------------------------------------

/// The llama2.c model files save_llama2c writes (load_llama2c also reads version 2, int8).
enum class Llama2cVersion { kLegacy = 0, kFloat32 = 1 };

/// Reads a llama2.c model .bin of version 0, 1 or 2 as a Config and HF-named Weights. The header's
/// sizes are checked against the file's size before anything is allocated; the file must be exactly
/// as long as they imply, and hold no NaN or Inf.
SPECDEC_INLINE Checkpoint load_llama2c(const std::filesystem::path& path);
/// Writes `w` as a llama2.c model .bin: version 0, the one run.c reads, or export.py's version 1 layout.
/// The config must be one llama2.c can express: rope_theta 10000, rms_norm_eps 1e-5, no rope_scaling.
SPECDEC_INLINE void save_llama2c(const std::filesystem::path& path, const Config& c, const Weights& w,
                                 Llama2cVersion version = Llama2cVersion::kLegacy);

/// llama2.c's tokenizer.bin and the SentencePiece-style BPE run.c's `encode` runs on it. Its own type
/// rather than a mode of Tokenizer: Tokenizer is GPT-2's byte-level BPE (a pre-tokenizer, then merges
/// by rank from a merge list), this one has no pre-tokenizer and no merge list — it starts from UTF-8
/// code points with byte fallback and merges whichever adjacent pair forms the vocab token of highest
/// score. Sharing a class would put two algorithms behind one flag.
///
/// encode(text, bos, eos), as run.c: BOS (id 1) if asked; a dummy prefix " " when the text is not empty;
/// each code point (a byte and the continuation bytes after it, at most 4 bytes) as its token, or as
/// its bytes, byte b being token b + 3 (<0xNN> after <unk>, <s>, </s>); then, while an adjacent pair
/// concatenates to a vocab token of score > -1e10, merge the pair of highest score, leftmost among
/// equals; EOS (id 2) if asked. The merges run on a heap (O(n log n)) with the same outcome as run.c's
/// rescans. Where run.c is undefined this throws instead: no " " token, or a byte whose fallback id is
/// past the vocab. Two differences on inputs run.c cannot see: text is bytes, not a C string (a NUL
/// byte is byte-fallback token 3 rather than the end), and a vocab holding the same string twice
/// resolves to the lower id (run.c's bsearch picks either).
/// decode(ids), as run.c prints them: each token's string, without its leading space after BOS, and a
/// token spelled exactly <0xNN> as the raw byte; the control tokens BOS and EOS print nothing (as in
/// SentencePiece). Bytes of one character split across tokens concatenate back to it.
class Llama2cTokenizer {
public:
    static constexpr int kBos = 1, kEos = 2;
    static constexpr int kFirstByteToken = 3;  // byte b falls back to token b + 3

    /// Reads tokenizer.bin: int32 max_token_length, then per token float32 score, int32 length and the
    /// bytes, to the end of the file (the file has no count: run.c takes it from the model).
    static Llama2cTokenizer load(const std::filesystem::path& path);
    /// A vocabulary from strings and scores (ids are positions); max_token_length defaults to the longest.
    static Llama2cTokenizer from_vocab(std::vector<std::string> tokens, std::vector<float> scores,
                                       int max_token_length = -1);
    /// Writes tokenizer.bin; load(save(t)) holds the same tokens, scores and max_token_length.
    void save(const std::filesystem::path& path) const;

    std::vector<int> encode(std::string_view text, bool bos = true, bool eos = false) const;
    std::string decode(std::span<const int> ids) const;
    /// run.c's decode(prev, token): what `token` prints after `prev` (-1: no previous token).
    std::string piece(int prev, int token) const;

    /// SentencePiece and llama.cpp escape the text's spaces as "▁" (U+2581) before they encode, so a "▁"
    /// in the text is a space there; run.c looks it up as a character (its bytes, in Llama's vocabulary).
    /// On: SentencePiece's way (a tokenizer.model, a GGUF's "llama" vocabulary). Off (tokenizer.bin): run.c's.
    void set_sentencepiece_spaces(bool on) { sentencepiece_spaces_ = on; }
    bool sentencepiece_spaces() const { return sentencepiece_spaces_; }

    int vocab_size() const { return static_cast<int>(tokens_.size()); }
    int max_token_length() const { return max_token_length_; }
    const std::string& token(int id) const;
    float score(int id) const;

private:
    Llama2cTokenizer() = default;
    void index(std::string_view origin);

    std::vector<std::string> tokens_;            // (V) bytes, as in the file (" " where SentencePiece has "▁")
    std::vector<float> scores_;                  // (V) merge priority: the higher, the earlier
    std::unordered_map<std::string, int> ids_;   // token -> lowest id spelling it
    int max_token_length_ = 0;
    bool sentencepiece_spaces_ = false;
};

namespace detail {

/// `s` with each "▁" (U+2581, SentencePiece's space) spelled " ". A new string rather than replace() in
/// place, on which GCC 12 reports a false -Wrestrict at -O3.
inline std::string spm_spaces_as_blanks(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        if (s.compare(i, 3, "\xE2\x96\x81") == 0) {
            out += ' ';
            i += 3;
        } else {
            out += s[i++];
        }
    }
    return out;
}

constexpr std::uint32_t kLlama2cMagic = 0x616b3432;  // "ak42" as export.py writes it (uint32, little-endian)
constexpr std::int64_t kLlama2cHeaderBytes = 256;    // versions 1 and 2
constexpr std::int64_t kLlama2cLegacyHeaderBytes = 28;

/// One tensor of a llama2.c file, in file order: its name there ("wq[1]"), its shape (rows, cols; a norm
/// is one row), whether it is a matrix (quantized in version 2), and for wq and wk the heads whose rows
/// hold adjacent RoPE pairs.
struct Llama2cTensor {
    std::string name;
    std::int64_t rows = 0, cols = 0;
    bool matrix = false;
    int rope_heads = 0;
};

/// Each head of llama2.c's wq and wk holds its RoPE pairs in rows (2i, 2i+1), HF's in rows (i, i + hd/2).
/// to_hf moves row 2i + j of every head to row j·hd/2 + i; !to_hf moves it back.
inline void permute_rope_rows(std::vector<float>& t, int heads, std::int64_t cols, bool to_hf) {
    const std::int64_t hd = static_cast<std::int64_t>(t.size()) / cols / heads, half = hd / 2;
    std::vector<float> head(static_cast<std::size_t>(hd * cols));
    for (std::int64_t h = 0; h < heads; ++h) {
        float* base = t.data() + h * hd * cols;
        std::copy(base, base + hd * cols, head.begin());
        for (std::int64_t i = 0; i < half; ++i)
            for (std::int64_t j = 0; j < 2; ++j) {
                const std::int64_t adjacent = 2 * i + j, halves = j * half + i;
                const float* from = head.data() + (to_hf ? adjacent : halves) * cols;
                std::copy(from, from + cols, base + (to_hf ? halves : adjacent) * cols);
            }
    }
}

/// Calls f(tensor, t) for every tensor of a llama2.c file of `version` (0, 1, 2) in file order; t points
/// to the member of `w` (a Weights whose layers are sized, const or not) it fills, nullptr for freq_cis.
template <class W, class F>
    requires std::same_as<std::remove_const_t<W>, Weights>
void for_each_llama2c_tensor(W& w, const Config& c, int version, F&& f) {
    using T = std::conditional_t<std::is_const_v<W>, const std::vector<float>, std::vector<float>>;
    const std::int64_t D = c.hidden_size, Fw = c.intermediate_size, V = c.vocab_size, hd = c.head_dim();
    const std::int64_t q = std::int64_t{c.num_attention_heads} * hd, kv = c.kv_dim();
    const auto one = [&](std::string name, T* t, std::int64_t rows, std::int64_t cols, bool matrix, int heads = 0) {
        f(Llama2cTensor{std::move(name), rows, cols, matrix, heads}, t);
    };
    const auto layers = [&](const char* name, auto member, std::int64_t rows, std::int64_t cols, bool matrix, int heads = 0) {
        for (std::size_t l = 0; l < w.layers.size(); ++l)
            one(std::string(name) + "[" + std::to_string(l) + "]", &(w.layers[l].*member), rows, cols, matrix, heads);
    };
    using LW = LayerWeights;
    const auto attention = [&] {
        layers("wq", &LW::wq, q, D, true, c.num_attention_heads);
        layers("wk", &LW::wk, kv, D, true, c.num_key_value_heads);
        layers("wv", &LW::wv, kv, D, true);
        layers("wo", &LW::wo, D, q, true);
    };
    const auto mlp = [&] {
        layers("w1", &LW::w_gate, Fw, D, true);
        layers("w2", &LW::w_down, D, Fw, true);
        layers("w3", &LW::w_up, Fw, D, true);
    };
    if (version == 0) {
        one("token_embedding", &w.embed, V, D, true);
        layers("rms_att", &LW::attn_norm, 1, D, false);
        attention();
        layers("rms_ffn", &LW::mlp_norm, 1, D, false);
        mlp();
        one("rms_final", &w.norm, 1, D, false);
        one("freq_cis_real", nullptr, c.max_position_embeddings, hd / 2, false);
        one("freq_cis_imag", nullptr, c.max_position_embeddings, hd / 2, false);
    } else {
        layers("rms_att", &LW::attn_norm, 1, D, false);
        layers("rms_ffn", &LW::mlp_norm, 1, D, false);
        one("rms_final", &w.norm, 1, D, false);
        one("token_embedding", &w.embed, V, D, true);
        attention();
        mlp();
    }
    if (!c.tie_word_embeddings) one("wcls", &w.lm_head, V, D, true);
}

}  // namespace detail

#if SPECDEC_BODIES  // compiled once where a program links specdec::compiled

static_assert(std::endian::native == std::endian::little,
              "llama2.c files are little-endian; this reader copies them without swapping");

namespace detail {

[[noreturn]] inline void llama2c_fail(const std::string& file, const std::string& what) {
    fail("llama2c", file + ": " + what);
}

/// The bytes a llama2.c model file of `version` holds for the validated config `c` (`group` values per
/// Q8_0 scale in version 2), in closed form: checking a file's size must not loop over 2^31 layers. The
/// config is validated (under 2^38 parameters); freq_cis (seq_len x head size) is not bounded by it, so
/// that term saturates.
inline std::int64_t llama2c_file_bytes(const Config& c, int version, std::int64_t group) {
    const std::int64_t D = c.hidden_size, hd = c.head_dim();
    const std::int64_t norms = 2 * D * c.num_hidden_layers + D;
    const std::int64_t matrices = c.parameter_count() - norms;
    if (version == 2) return kLlama2cHeaderBytes + 4 * norms + matrices + 4 * (matrices / group);
    if (version == 1) return kLlama2cHeaderBytes + 4 * c.parameter_count();
    const std::int64_t freq_cis = mul_sat(4, mul_sat(c.max_position_embeddings, hd));
    return add_sat(kLlama2cLegacyHeaderBytes + 4 * c.parameter_count(), freq_cis);
}

}  // namespace detail

// ---- model files ---------------------------------------------------------------------------------------

SPECDEC_INLINE Checkpoint load_llama2c(const std::filesystem::path& path) {
    const std::string file = path.string();
    const auto require = [&](bool ok, auto&& message) {
        if (!ok) detail::llama2c_fail(file, message());
    };
    std::error_code ec;
    const std::string why = detail::not_a_regular_file(path);
    require(why.empty(), [&] { return why; });
    std::ifstream in(path, std::ios::binary);
    require(static_cast<bool>(in), [] { return std::string("cannot open file"); });
    const std::uintmax_t size_u = std::filesystem::file_size(path, ec);
    require(!ec, [&] { return "cannot read its size: " + ec.message(); });
    const auto size = static_cast<std::int64_t>(std::min<std::uintmax_t>(size_u, INT64_MAX));

    // The header. Versions 1 and 2 start with the magic; a legacy file starts with dim.
    unsigned char head[detail::kLlama2cHeaderBytes] = {};
    in.read(reinterpret_cast<char*>(head), std::min<std::int64_t>(size, detail::kLlama2cHeaderBytes));
    const auto i32 = [&](std::int64_t at) {
        std::int32_t v = 0;
        std::memcpy(&v, head + at, 4);
        return v;
    };
    int version = 0;
    std::int64_t params_at = 0;
    if (size >= 4 && static_cast<std::uint32_t>(i32(0)) == detail::kLlama2cMagic) {
        require(size >= detail::kLlama2cHeaderBytes, [&] {
            return "is " + std::to_string(size) + " bytes, shorter than the 256-byte header of export.py's versions 1 and 2";
        });
        version = i32(4);
        require(version == 1 || version == 2, [&] {
            return "header version " + std::to_string(version) +
                   " is not supported (1: float32, 2: int8 Q8_0; a legacy version 0 file has no magic)";
        });
        params_at = 8;
    } else {
        require(size >= detail::kLlama2cLegacyHeaderBytes, [&] {
            return "is " + std::to_string(size) + " bytes, shorter than the 28-byte header of a legacy (version 0) llama2.c file";
        });
    }
    // Every error about a header without the magic says how it was read.
    const std::string hint = version == 0 ? " (read as a legacy version 0 header: the file does not start with the magic "
                                            "0x616b3432 'ak42' of versions 1 and 2)"
                                          : "";
    static constexpr const char* kFields[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    int p[7];
    for (int i = 0; i < 7; ++i) p[i] = i32(params_at + 4 * i);
    bool shared = true;
    if (version == 0) {
        require(p[5] != INT32_MIN, [&] { return "header field 'vocab_size' = " + std::to_string(p[5]) + " is out of range" + hint; });
        shared = p[5] > 0;  // run.c: a negative vocab_size means wcls follows
        p[5] = p[5] < 0 ? -p[5] : p[5];
    } else {
        const int flag = head[36];
        require(flag == 0 || flag == 1, [&] { return "header byte shared_classifier is " + std::to_string(flag) + " (must be 0 or 1)"; });
        shared = flag == 1;
    }
    for (int i = 0; i < 7; ++i)
        require(p[i] > 0, [&] { return "header field '" + std::string(kFields[i]) + "' = " + std::to_string(p[i]) + " must be > 0" + hint; });
    const int dim = p[0], n_heads = p[3], n_kv_heads = p[4];
    require(dim % n_heads == 0, [&] {
        return "header field 'n_heads' = " + std::to_string(n_heads) + " does not divide dim " + std::to_string(dim) + hint;
    });
    require(n_heads % n_kv_heads == 0, [&] {
        return "header field 'n_kv_heads' = " + std::to_string(n_kv_heads) + " does not divide n_heads " + std::to_string(n_heads) + hint;
    });
    Config c{.hidden_size = dim,
             .intermediate_size = p[1],
             .num_hidden_layers = p[2],
             .num_attention_heads = n_heads,
             .num_key_value_heads = n_kv_heads,
             .vocab_size = p[5],
             .rope_theta = 10000.0f,  // run.c's RoPE base and rms eps, fixed there
             .rms_norm_eps = 1e-5f,
             .max_position_embeddings = p[6],
             .tie_word_embeddings = shared};
    try {
        c.validate();  // head size even, and at most 1 TiB of parameters: checked before the file size
    } catch (const error& e) {
        detail::llama2c_fail(file, std::string("the header describes a model specdec cannot load: ") + e.what() + hint);
    }
    std::int64_t group = 1;
    if (version == 2) {
        group = i32(37);
        require(group > 0, [&] { return "header group_size = " + std::to_string(group) + " must be > 0"; });
        const std::int64_t D = dim;
        for (const auto& [name, n] : {std::pair{"token_embedding", D * c.vocab_size}, std::pair{"wq", D * dim},
                                      std::pair{"wk", D * c.kv_dim()}, std::pair{"w1", D * c.intermediate_size}})
            require(n % group == 0, [&, name = name, n = n] {
                return "header group_size = " + std::to_string(group) + " does not divide the " + std::to_string(n) +
                       " values of tensor '" + name + "'";
            });
    }
    const std::int64_t want = detail::llama2c_file_bytes(c, version, group);
    require(size == want, [&] {
        return "is " + std::to_string(size) + " bytes, but its version " + std::to_string(version) + " header (dim " +
               std::to_string(dim) + ", hidden_dim " + std::to_string(p[1]) + ", n_layers " + std::to_string(p[2]) +
               ", n_heads " + std::to_string(n_heads) + ", n_kv_heads " + std::to_string(n_kv_heads) + ", vocab_size " +
               std::to_string(p[5]) + (shared ? "" : " unshared") + ", seq_len " + std::to_string(p[6]) + ") implies " +
               std::to_string(want) + (size < want ? " (tensor data runs past the end of the file)" : " (trailing bytes)") + hint;
    });

    // The tensors: sizes are now backed by the file, so allocating them is safe.
    Checkpoint ck{c, Weights{}};
    ck.weights.layers.resize(static_cast<std::size_t>(c.num_hidden_layers));
    in.seekg(version == 0 ? detail::kLlama2cLegacyHeaderBytes : detail::kLlama2cHeaderBytes);
    std::vector<std::int8_t> quantized;
    std::vector<float> scales;
    detail::for_each_llama2c_tensor(ck.weights, c, version, [&](const detail::Llama2cTensor& t, std::vector<float>* dst) {
        const std::int64_t n = t.rows * t.cols;
        if (dst == nullptr) {  // freq_cis: run.c computes RoPE itself
            in.seekg(4 * n, std::ios::cur);
            return;
        }
        dst->resize(static_cast<std::size_t>(n));
        if (version == 2 && t.matrix) {
            quantized.resize(static_cast<std::size_t>(n));
            scales.resize(static_cast<std::size_t>(n / group));
            in.read(reinterpret_cast<char*>(quantized.data()), n);
            in.read(reinterpret_cast<char*>(scales.data()), 4 * (n / group));
            for (std::int64_t i = 0; i < n; ++i)
                (*dst)[static_cast<std::size_t>(i)] = static_cast<float>(quantized[static_cast<std::size_t>(i)]) * scales[static_cast<std::size_t>(i / group)];
        } else {
            in.read(reinterpret_cast<char*>(dst->data()), 4 * n);
        }
        require(static_cast<bool>(in), [&] { return "reading tensor '" + t.name + "' failed"; });
        const auto bad = std::find_if(dst->begin(), dst->end(), [](float x) { return !std::isfinite(x); });
        require(bad == dst->end(), [&] {
            return "tensor '" + t.name + "' holds " + (std::isnan(*bad) ? "NaN" : "Inf") + " at element " +
                   std::to_string(bad - dst->begin()) + (version == 2 && t.matrix ? " (after dequantizing)" : "") +
                   " (a corrupted file)";
        });
        if (t.rope_heads > 0) detail::permute_rope_rows(*dst, t.rope_heads, t.cols, /*to_hf=*/true);
    });
    return ck;
}

SPECDEC_INLINE void save_llama2c(const std::filesystem::path& path, const Config& c, const Weights& w,
                                 Llama2cVersion version) {
    const std::string file = path.string();
    c.validate();
    detail::require_llama_block(c, "llama2c", "save_llama2c (llama2.c's run.c)");
    validate(w, c);
    detail::require(c.rope_theta == 10000.0f && c.rms_norm_eps == 1e-5f, "llama2c", [&] {
        return file + ": cannot save a model of rope_theta " + std::to_string(c.rope_theta) + " and rms_norm_eps " +
               std::to_string(c.rms_norm_eps) + " as llama2.c: run.c fixes them at 10000 and 1e-5";
    });
    detail::require(c.rope_scaling.type == RopeScalingType::kNone, "llama2c", [&] {
        return file + ": cannot save a model of rope_scaling " + detail::rope_scaling_string(c.rope_scaling) +
               " as llama2.c: run.c's RoPE is unscaled";
    });
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    detail::require(static_cast<bool>(out), "llama2c", [&] { return file + ": cannot write"; });
    const auto put = [&](const void* p, std::size_t n) { out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n)); };
    const auto put_i32 = [&](std::int32_t v) { put(&v, 4); };
    const int v = static_cast<int>(version);
    if (v != 0) {
        put_i32(static_cast<std::int32_t>(detail::kLlama2cMagic));
        put_i32(v);
    }
    const int vocab = v == 0 && !c.tie_word_embeddings ? -c.vocab_size : c.vocab_size;
    for (int x : {c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, vocab,
                  c.max_position_embeddings})
        put_i32(x);
    if (v != 0) {
        const unsigned char shared = c.tie_word_embeddings ? 1 : 0;
        put(&shared, 1);
        const std::string pad(static_cast<std::size_t>(detail::kLlama2cHeaderBytes - 37), '\0');
        put(pad.data(), pad.size());
    }
    std::vector<float> scratch;
    detail::for_each_llama2c_tensor(w, c, v, [&](const detail::Llama2cTensor& t, const std::vector<float>* src) {
        if (src == nullptr) {  // freq_cis (seq_len, hd/2): cos and sin of pos · theta^(-2i/hd), as export.py
            std::vector<double> inv_freq(static_cast<std::size_t>(t.cols));
            for (std::int64_t i = 0; i < t.cols; ++i)
                inv_freq[static_cast<std::size_t>(i)] = std::pow(10000.0, -static_cast<double>(i) / static_cast<double>(t.cols));
            const bool real = t.name == "freq_cis_real";
            scratch.resize(static_cast<std::size_t>(t.cols));
            for (std::int64_t pos = 0; pos < t.rows; ++pos) {  // a row at a time: seq_len may be large
                for (std::int64_t i = 0; i < t.cols; ++i) {
                    const double angle = static_cast<double>(pos) * inv_freq[static_cast<std::size_t>(i)];
                    scratch[static_cast<std::size_t>(i)] = static_cast<float>(real ? std::cos(angle) : std::sin(angle));
                }
                put(scratch.data(), scratch.size() * sizeof(float));
            }
            return;
        } else if (t.rope_heads > 0) {
            scratch = *src;
            detail::permute_rope_rows(scratch, t.rope_heads, t.cols, /*to_hf=*/false);
            src = &scratch;
        }
        put(src->data(), src->size() * sizeof(float));
    });
    out.flush();
    detail::require(out.good(), "llama2c", [&] { return file + ": writing failed"; });
}

// ---- tokenizer.bin -------------------------------------------------------------------------------------

SPECDEC_INLINE void Llama2cTokenizer::index(std::string_view origin) {
    ids_.clear();
    ids_.reserve(tokens_.size());
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
        detail::require(!std::isnan(scores_[i]), "llama2c", [&] {
            return std::string(origin) + ": token " + std::to_string(i) + " has score NaN";
        });
        ids_.emplace(tokens_[i], static_cast<int>(i));  // keeps the first: the lower id
    }
}

SPECDEC_INLINE Llama2cTokenizer Llama2cTokenizer::load(const std::filesystem::path& path) {
    const std::string file = path.string();
    const std::string bytes = detail::read_text_file(path, "llama2c");
    const auto require = [&](bool ok, auto&& message) {
        if (!ok) detail::llama2c_fail(file, message());
    };
    const auto i32 = [&](std::size_t at) {
        std::int32_t v = 0;
        std::memcpy(&v, bytes.data() + at, 4);
        return v;
    };
    require(bytes.size() >= 4, [&] {
        return "is " + std::to_string(bytes.size()) + " bytes, shorter than the 4-byte max_token_length";
    });
    Llama2cTokenizer t;
    t.max_token_length_ = i32(0);
    require(t.max_token_length_ >= 0, [&] { return "max_token_length is " + std::to_string(t.max_token_length_) + " (negative)"; });
    for (std::size_t pos = 4; pos < bytes.size();) {
        const std::size_t id = t.tokens_.size(), left = bytes.size() - pos;
        require(left >= 8, [&] {
            return "token " + std::to_string(id) + ": the file ends " + std::to_string(left) +
                   " bytes after the last token, short of a score and a length (8 bytes)";
        });
        float score = 0;
        std::memcpy(&score, bytes.data() + pos, 4);
        const std::int32_t len = i32(pos + 4);
        require(len >= 0, [&] { return "token " + std::to_string(id) + ": length " + std::to_string(len) + " is negative"; });
        require(len <= t.max_token_length_, [&] {
            return "token " + std::to_string(id) + ": length " + std::to_string(len) + " exceeds max_token_length " +
                   std::to_string(t.max_token_length_);
        });
        require(static_cast<std::size_t>(len) <= left - 8, [&] {
            return "token " + std::to_string(id) + ": length " + std::to_string(len) + " runs past the end of the file (" +
                   std::to_string(left - 8) + " bytes left)";
        });
        t.tokens_.emplace_back(bytes.data() + pos + 8, static_cast<std::size_t>(len));
        t.scores_.push_back(score);
        pos += 8 + static_cast<std::size_t>(len);
    }
    require(!t.tokens_.empty(), [] { return std::string("holds no tokens"); });
    t.index(file);
    return t;
}

SPECDEC_INLINE Llama2cTokenizer Llama2cTokenizer::from_vocab(std::vector<std::string> tokens, std::vector<float> scores,
                                                             int max_token_length) {
    detail::require(!tokens.empty() && tokens.size() == scores.size(), "llama2c", [&] {
        return "from_vocab: " + std::to_string(tokens.size()) + " tokens and " + std::to_string(scores.size()) +
               " scores (need as many, at least one)";
    });
    std::size_t longest = 0;
    for (const std::string& s : tokens) longest = std::max(longest, s.size());
    detail::require(longest <= INT32_MAX && (max_token_length < 0 || longest <= static_cast<std::size_t>(max_token_length)),
                    "llama2c", [&] {
                        return "from_vocab: a token of " + std::to_string(longest) + " bytes, longer than max_token_length " +
                               std::to_string(max_token_length);
                    });
    Llama2cTokenizer t;
    t.tokens_ = std::move(tokens);
    t.scores_ = std::move(scores);
    t.max_token_length_ = max_token_length < 0 ? static_cast<int>(longest) : max_token_length;
    t.index("from_vocab");
    return t;
}

SPECDEC_INLINE void Llama2cTokenizer::save(const std::filesystem::path& path) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    detail::require(static_cast<bool>(out), "llama2c", [&] { return path.string() + ": cannot write"; });
    const auto put = [&](const void* p, std::size_t n) { out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n)); };
    put(&max_token_length_, 4);
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
        const auto len = static_cast<std::int32_t>(tokens_[i].size());
        put(&scores_[i], 4);
        put(&len, 4);
        put(tokens_[i].data(), tokens_[i].size());
    }
    out.flush();
    detail::require(out.good(), "llama2c", [&] { return path.string() + ": writing failed"; });
}

SPECDEC_INLINE const std::string& Llama2cTokenizer::token(int id) const {
    detail::require(id >= 0 && id < vocab_size(), "llama2c", [&] {
        return "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")";
    });
    return tokens_[static_cast<std::size_t>(id)];
}

SPECDEC_INLINE float Llama2cTokenizer::score(int id) const {
    (void)token(id);
    return scores_[static_cast<std::size_t>(id)];
}

SPECDEC_INLINE std::vector<int> Llama2cTokenizer::encode(std::string_view text, bool bos, bool eos) const {
    const auto need = [&](int id, const char* what) {
        detail::require(id < vocab_size(), "llama2c", [&] {
            return std::string("encode: ") + what + " is token " + std::to_string(id) + ", past the vocabulary of " +
                   std::to_string(vocab_size());
        });
    };
    std::string escaped;
    if (sentencepiece_spaces_ && text.find("\xE2\x96\x81") != std::string_view::npos) {
        escaped = detail::spm_spaces_as_blanks(text);
        text = escaped;
    }
    std::vector<int> ids;  // the tokens before merging
    if (!text.empty()) {  // SentencePiece's add_dummy_prefix, as run.c does it
        const auto space = ids_.find(" ");
        detail::require(space != ids_.end(), "llama2c",
                        [] { return std::string("encode: the vocabulary has no \" \" token for the dummy prefix"); });
        ids.push_back(space->second);
    }
    for (std::size_t i = 0; i < text.size();) {
        std::size_t n = 1;  // a byte and the continuation bytes after it, at most 4 (run.c's code point)
        while (i + n < text.size() && n < 4 && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
        if (const auto it = ids_.find(std::string(text.substr(i, n))); it != ids_.end()) {
            ids.push_back(it->second);
        } else {
            for (std::size_t k = 0; k < n; ++k) {
                const int id = static_cast<unsigned char>(text[i + k]) + kFirstByteToken;
                detail::require(id < vocab_size(), "llama2c", [&] {
                    return "encode: byte " + detail::hex_byte(static_cast<unsigned char>(text[i + k])) + " at offset " +
                           std::to_string(i + k) + " is not in the vocabulary, and its fallback token " +
                           std::to_string(id) + " is past the vocabulary of " + std::to_string(vocab_size());
                });
                ids.push_back(id);
            }
        }
        i += n;
    }

    // Merges: the pair of highest score, leftmost among equals (run.c's strict '>' over a left-to-right
    // scan). Symbols form a linked list; a heap holds the candidate pairs, stale ones skipped when popped.
    struct Symbol {
        int id, prev, next;  // id -1: merged into its left neighbour
    };
    struct Candidate {
        float score;
        int left, right, left_id, right_id, merged;
        bool operator<(const Candidate& o) const { return score != o.score ? score < o.score : left > o.left; }
    };
    const int n = static_cast<int>(ids.size());
    std::vector<Symbol> sym(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) sym[static_cast<std::size_t>(i)] = {ids[static_cast<std::size_t>(i)], i - 1, i + 1 < n ? i + 1 : -1};
    std::priority_queue<Candidate> heap;
    std::string pair;
    const auto consider = [&](int left) {
        if (left < 0) return;
        const Symbol& l = sym[static_cast<std::size_t>(left)];
        if (l.next < 0) return;
        const Symbol& r = sym[static_cast<std::size_t>(l.next)];
        pair = tokens_[static_cast<std::size_t>(l.id)];
        pair += tokens_[static_cast<std::size_t>(r.id)];
        const auto it = ids_.find(pair);
        if (it == ids_.end()) return;
        const float s = scores_[static_cast<std::size_t>(it->second)];
        if (s > -1e10f) heap.push({s, left, l.next, l.id, r.id, it->second});
    };
    for (int i = 0; i + 1 < n; ++i) consider(i);
    while (!heap.empty()) {
        const Candidate c = heap.top();
        heap.pop();
        Symbol& l = sym[static_cast<std::size_t>(c.left)];
        if (l.id != c.left_id || l.next != c.right || sym[static_cast<std::size_t>(c.right)].id != c.right_id) continue;
        Symbol& r = sym[static_cast<std::size_t>(c.right)];
        l.id = c.merged;
        l.next = r.next;
        if (r.next >= 0) sym[static_cast<std::size_t>(r.next)].prev = c.left;
        r.id = -1;
        consider(l.prev);
        consider(c.left);
    }

    std::vector<int> out;
    out.reserve(ids.size() + 2);
    if (bos) {
        need(kBos, "BOS");
        out.push_back(kBos);
    }
    for (const Symbol& s : sym)
        if (s.id >= 0) out.push_back(s.id);
    if (eos) {
        need(kEos, "EOS");
        out.push_back(kEos);
    }
    return out;
}

SPECDEC_INLINE std::string Llama2cTokenizer::piece(int prev, int id) const {
    std::string s = token(id);
    if (id == kBos || id == kEos) return {};  // control tokens print nothing
    if (prev == kBos && !s.empty() && s[0] == ' ') s.erase(0, 1);  // SentencePiece strips the dummy prefix
    const auto hex = [](char ch) {
        if (ch >= '0' && ch <= '9') return ch - '0';
        if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
        if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
        return -1;
    };
    if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' && hex(s[3]) >= 0 && hex(s[4]) >= 0)
        return std::string(1, static_cast<char>(hex(s[3]) * 16 + hex(s[4])));
    return s;
}

SPECDEC_INLINE std::string Llama2cTokenizer::decode(std::span<const int> ids) const {
    std::string out;
    int prev = -1;
    for (int id : ids) {
        out += piece(prev, id);
        prev = id;
    }
    return out;
}

#endif  // SPECDEC_BODIES

}  // namespace specdec
