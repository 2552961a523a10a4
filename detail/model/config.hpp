// specdec/detail/model/config.hpp — the model's shape, field for field a HuggingFace LlamaConfig.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <string>
#include <string_view>
#include <vector>

#include "../core/compiled.hpp"
#include "../core/error.hpp"

namespace specdec {

/// The most bytes of float32 parameters a config may imply (1 TiB, ~275 G parameters): far above any
/// model this library runs, and low enough to catch a corrupt config.json before anything is allocated.
constexpr std::int64_t kMaxParameterBytes = std::int64_t{1} << 40;

namespace detail {

/// a * b and a + b for the non-negative sizes of a config, saturating at INT64_MAX (they are only
/// compared against bounds, and the fields are < 2^31 each, so a product of three may overflow).
constexpr std::int64_t mul_sat(std::int64_t a, std::int64_t b) {
    return (a != 0 && b > std::numeric_limits<std::int64_t>::max() / a) ? std::numeric_limits<std::int64_t>::max() : a * b;
}
constexpr std::int64_t add_sat(std::int64_t a, std::int64_t b) {
    return b > std::numeric_limits<std::int64_t>::max() - a ? std::numeric_limits<std::int64_t>::max() : a + b;
}

}  // namespace detail

/// How RoPE's frequencies are stretched for contexts longer than the model was pretrained on, as
/// HF's config.json `rope_scaling` says (transformers, modeling_rope_utils.py).
enum class RopeScalingType {
    kNone,    // rope_scaling null (or rope_type "default"): theta^(-2j/hd)
    kLinear,  // {"rope_type": "linear", "factor"}: every frequency / factor (position interpolation)
    kLlama3,  // {"rope_type": "llama3", ...}: low frequencies / factor, high kept, a smooth ramp between
    kFactors, // a table, one factor per frequency: theta^(-2j/hd) / factors[j] (GGUF's rope_freqs.weight)
    kYarn,    // {"rope_type": "yarn", "factor", "original_max_position_embeddings", ...}: YaRN (Peng et al.,
              // "YaRN: Efficient Context Window Extension of Large Language Models", 2023): high frequencies
              // kept, low ones / factor, a linear ramp between; cos and sin scaled by attention_factor
};

struct RopeScaling {
    RopeScalingType type = RopeScalingType::kNone;
    float factor = 1.0f;                        // linear and llama3
    float low_freq_factor = 1.0f;               // llama3
    float high_freq_factor = 4.0f;              // llama3
    int original_max_position_embeddings = 8192;  // llama3 and yarn: the pretraining context
    float beta_fast = 32.0f;        // yarn: rotations in the pretraining context above which a frequency is kept
    float beta_slow = 1.0f;         // yarn: below which it is divided by factor (a ramp between)
    float attention_factor = 1.0f;  // yarn: cos and sin multiplied by it (transformers' attention_scaling)
    bool truncate = true;           // yarn: the ramp's ends rounded out to whole dimensions
    /// (hd/2) kFactors only: llama.cpp's per-dimension factors, as its converter writes Llama 3.x's scaling
    /// (ggml_rope_ext's freq_factors: rotary pair j turns at theta^(-2j/hd) / factors[j]). config.json
    /// has no field for a table, so save_config refuses it; save_gguf writes it back as rope_freqs.weight.
    std::vector<float> factors{};
};

namespace detail {
/// Throws naming the rope_scaling field whose value cannot work (factor <= 0, high <= low, a table factor
/// <= 0, ...). The table's length is checked by Config::validate, which knows head_dim.
SPECDEC_INLINE void validate_rope_scaling(const RopeScaling& s);
}  // namespace detail

/// Shape letters used on every buffer: L layers, D = hidden_size, F = intermediate_size, H heads,
/// Hkv kv-heads, hd = head_dim() (D / H unless config.json says otherwise), V vocab, N tree nodes,
/// T committed tokens, C cache capacity.
/// Field names are HF's, so config.json maps 1:1 (use designated initialisers); HF's `head_dim` is
/// `attention_head_dim` here, since head_dim() is the value every model reads.
struct Config {
    int hidden_size = 288;                // D
    int intermediate_size = 768;          // F (SwiGLU width)
    int num_hidden_layers = 6;            // L
    int num_attention_heads = 6;          // H
    int num_key_value_heads = 6;          // Hkv; < H is grouped-query attention
    int vocab_size = 32000;               // V
    float rope_theta = 10000.0f;          // RoPE base
    float rms_norm_eps = 1e-5f;           // RMSNorm epsilon
    int max_position_embeddings = 2048;   // longest committed sequence
    bool tie_word_embeddings = false;     // lm_head shares embed_tokens
    int attention_head_dim = 0;           // hd (HF's head_dim); 0 = hidden_size / num_attention_heads
    RopeScaling rope_scaling{};           // RoPE frequency scaling (none by default)
    /// FSPAD's Partial Alignment Distillation (fspad.txt, "Partial Alignment Distillation"): the last
    /// layer's down_proj is (2D, F), its two halves sharing the residual stream. The first half, through
    /// the final norm, feeds the LM head (f~, the token); the second, through the same norm, is the
    /// captured final state (f, the feature the drafter feeds forward). false: one (D, F) down_proj.
    bool partial_alignment = false;
    /// EAGLE-1/2's drafter layer (EAGLE's cnets.py; SGLang's and vLLM's llama_eagle.py): layer 0 reads its
    /// input without input_layernorm, and no final norm follows the last layer: its residual stream is
    /// both the LM head's input and the captured final state. The norms' weights stay in Weights, unread.
    bool identity_end_norms = false;
    /// Qwen2's attention (transformers, modeling_qwen2.py): q_proj, k_proj and v_proj add a bias (o_proj
    /// has none). Not Llama's `attention_bias`, which also gives o_proj one.
    bool qkv_bias = false;
    /// Qwen3's attention (transformers, modeling_qwen3.py): an RMSNorm over each q head and each k head
    /// (gains of size hd, eps rms_norm_eps) after the projections, before RoPE.
    bool qk_norm = false;
    /// Mistral v0.1's sliding window (config.json `sliding_window`; transformers' sliding_window_overlay:
    /// position q attends to positions k > q - sliding_window). 0: none. Within sliding_window positions
    /// that is every earlier position, full attention exactly, so the models run it only there: load_config
    /// caps max_position_embeddings at the window and validate() requires the cap.
    int sliding_window = 0;

    /// Whether the block is Llama's alone: no Qwen2 biases, no Qwen3 q/k norms. Code that implements
    /// only Llama's block (CUDA, the trainers, the drafters' own layers, llama2.c and GGUF export,
    /// widening) refuses any other with detail::require_llama_block.
    bool llama_block() const { return !qkv_bias && !qk_norm; }

    /// Rows of layer l's down_proj: D, or 2D for the last layer under partial_alignment.
    int down_rows(int layer) const {
        return partial_alignment && layer + 1 == num_hidden_layers ? 2 * hidden_size : hidden_size;
    }

    int head_dim() const { return attention_head_dim > 0 ? attention_head_dim : hidden_size / num_attention_heads; }
    int q_dim() const { return num_attention_heads * head_dim(); }  // H*hd, the rows of q_proj
    int kv_dim() const { return num_key_value_heads * head_dim(); }

    /// Parameters of the embedding, of one layer, and in all (lm_head included unless tied), in 64 bits,
    /// saturating: what loading or initialising allocates, as float32 (x 4 bytes).
    std::int64_t embedding_parameters() const { return detail::mul_sat(vocab_size, hidden_size); }
    std::int64_t layer_parameters() const {
        using detail::add_sat, detail::mul_sat;
        const std::int64_t hd = attention_head_dim > 0 ? attention_head_dim : hidden_size / num_attention_heads;
        const std::int64_t D = hidden_size, q = mul_sat(num_attention_heads, hd), kv = mul_sat(num_key_value_heads, hd);
        const std::int64_t attention = mul_sat(D, add_sat(2 * q, 2 * kv));  // q (q x D), o (D x q), k, v (kv x D)
        const std::int64_t mlp = mul_sat(3, mul_sat(intermediate_size, D));   // gate, up, down (F x D)
        const std::int64_t extra = add_sat(qkv_bias ? add_sat(q, 2 * kv) : 0, qk_norm ? 2 * hd : 0);  // Qwen2, Qwen3
        return add_sat(add_sat(add_sat(attention, mlp), 2 * D), extra);      // + the two norms
    }
    std::int64_t parameter_count() const {
        using detail::add_sat, detail::mul_sat;
        const std::int64_t head = tie_word_embeddings ? 0 : embedding_parameters();
        const std::int64_t pad = partial_alignment ? mul_sat(intermediate_size, hidden_size) : 0;  // the second half
        return add_sat(add_sat(add_sat(embedding_parameters(), head), pad),
                       add_sat(mul_sat(num_hidden_layers, layer_parameters()), hidden_size));
    }

    /// Throws naming the field and value when the shape cannot work.
    void validate() const;
};

namespace detail {
/// Throws `[specdec.<who>] <what>: ...` naming the config's non-Llama block feature (Qwen2's q/k/v biases,
/// Qwen3's q/k norms) when `c` is not llama_block(): for code that implements Llama's block only.
SPECDEC_INLINE void require_llama_block(const Config& c, std::string_view who, std::string_view what);
}  // namespace detail

/// RoPE's inverse frequencies (hd/2) for `c`: theta^(-2j/hd), then scaled as c.rope_scaling says.
/// Every model (CPU, CUDA, trainable) takes its rotation angles position * inv_freq[j] from here.
SPECDEC_INLINE std::vector<double> rope_inverse_frequencies(const Config& c);
/// The factor RoPE's cos and sin are multiplied by: YaRN's attention_factor, 1 for every other scaling
/// (transformers' attention_scaling, which scales q·k by its square).
SPECDEC_INLINE double rope_attention_factor(const Config& c);

namespace detail {
/// YaRN's default attention factor for `factor` (transformers' get_mscale; the paper's recommended
/// sqrt(1/t) = 0.1 ln(s) + 1): 1 for factor <= 1.
SPECDEC_INLINE double yarn_mscale(double factor, double mscale = 1.0);
}  // namespace detail

#if SPECDEC_BODIES
SPECDEC_INLINE void Config::validate() const {
    const auto positive = [](int v, const char* field) {
        detail::require(v > 0, "config", [&] { return std::string(field) + " must be > 0, got " + std::to_string(v); });
    };
    positive(hidden_size, "hidden_size");
    positive(intermediate_size, "intermediate_size");
    positive(num_hidden_layers, "num_hidden_layers");
    positive(num_attention_heads, "num_attention_heads");
    positive(num_key_value_heads, "num_key_value_heads");
    positive(vocab_size, "vocab_size");
    positive(max_position_embeddings, "max_position_embeddings");
    detail::require(attention_head_dim >= 0, "config", [&] {
        return "head_dim must be > 0 (or 0: hidden_size / num_attention_heads), got " + std::to_string(attention_head_dim);
    });
    detail::require(attention_head_dim > 0 || hidden_size % num_attention_heads == 0, "config", [&] {
        return "hidden_size " + std::to_string(hidden_size) + " is not a multiple of num_attention_heads " +
               std::to_string(num_attention_heads) + " (and no head_dim is given)";
    });
    detail::require(head_dim() % 2 == 0, "config",
                    [&] { return "head_dim " + std::to_string(head_dim()) + " must be even for RoPE"; });
    detail::require(num_attention_heads % num_key_value_heads == 0, "config", [&] {
        return "num_attention_heads " + std::to_string(num_attention_heads) +
               " is not a multiple of num_key_value_heads " + std::to_string(num_key_value_heads);
    });
    detail::require(std::isfinite(rope_theta) && rope_theta > 0.0f, "config",
                    [&] { return "rope_theta must be > 0, got " + std::to_string(rope_theta); });
    detail::require(std::isfinite(rms_norm_eps) && rms_norm_eps > 0.0f, "config",
                    [&] { return "rms_norm_eps must be > 0, got " + std::to_string(rms_norm_eps); });
    // Sizes that decide allocations, in 64 bits: the fused products' widths fit an int, and the
    // parameters fit kMaxParameterBytes, so a config.json claiming absurd sizes is named here rather
    // than ending in bad_alloc or a wrapped int.
    constexpr std::int64_t kInt = std::numeric_limits<int>::max();
    const std::int64_t qd = detail::mul_sat(num_attention_heads, head_dim()),
                       kvd = detail::mul_sat(num_key_value_heads, head_dim());
    detail::require(detail::add_sat(qd, 2 * kvd) <= kInt, "config", [&] {
        return "the q width " + std::to_string(qd) + " + 2 x the kv width " + std::to_string(kvd) +
               " (the fused q|k|v rows: heads x head_dim) exceeds " + std::to_string(kInt);
    });
    detail::validate_rope_scaling(rope_scaling);
    detail::require(rope_scaling.type != RopeScalingType::kFactors ||
                        rope_scaling.factors.size() == static_cast<std::size_t>(head_dim() / 2),
                    "config", [&] {
                        return "rope_scaling.factors holds " + std::to_string(rope_scaling.factors.size()) +
                               " values; head_dim " + std::to_string(head_dim()) + " needs one per rotary pair, " +
                               std::to_string(head_dim() / 2);
                    });
    detail::require(sliding_window >= 0, "config",
                    [&] { return "sliding_window must be >= 0 (0: none), got " + std::to_string(sliding_window); });
    detail::require(sliding_window == 0 || max_position_embeddings <= sliding_window, "config", [&] {
        return "max_position_embeddings " + std::to_string(max_position_embeddings) + " exceeds sliding_window " +
               std::to_string(sliding_window) + ": past the window attention is windowed, which is not implemented "
               "(load_config caps the context at the window, where full attention is exact)";
    });
    detail::require(sliding_window == 0 || (!qkv_bias && !qk_norm), "config", [] {
        return std::string("sliding_window is Mistral's (a Llama block); Qwen's use_sliding_window is refused by load_config");
    });
    detail::require(!(identity_end_norms && partial_alignment), "config", [] {
        return std::string("identity_end_norms (EAGLE's layer) and partial_alignment (FSPAD's PAD, whose feature branch "
                           "goes through the final norm) cannot be combined");
    });
    // Qwen2 (biases) or Qwen3 (q/k norms), not both: no HF model type has exactly that block (Qwen3's
    // attention_bias also adds o_proj's bias), so such a config could not be saved or checked.
    detail::require(!(qkv_bias && qk_norm), "config", [] {
        return std::string("qkv_bias (Qwen2's block) and qk_norm (Qwen3's) cannot be combined: no HF model has both");
    });
    detail::require(2 * std::int64_t{intermediate_size} <= kInt, "config", [&] {
        return "intermediate_size " + std::to_string(intermediate_size) + " x 2 (the fused gate|up rows) exceeds " +
               std::to_string(kInt);
    });
    const std::int64_t bytes = detail::mul_sat(parameter_count(), 4);
    detail::require(bytes <= kMaxParameterBytes, "config", [&] {
        return "the shape needs " + std::to_string(bytes) + " bytes of float32 parameters, more than the " +
               std::to_string(kMaxParameterBytes) + " (1 TiB) a model may take: vocab_size " + std::to_string(vocab_size) +
               " x hidden_size " + std::to_string(hidden_size) + " = " +
               std::to_string(detail::mul_sat(embedding_parameters(), 4)) + " bytes per embedding matrix" +
               (tie_word_embeddings ? "" : " (two: lm_head is not tied)") + ", num_hidden_layers " +
               std::to_string(num_hidden_layers) + " x " + std::to_string(detail::mul_sat(layer_parameters(), 4)) +
               " bytes per layer (intermediate_size " + std::to_string(intermediate_size) + ")";
    });
}

SPECDEC_INLINE void detail::require_llama_block(const Config& c, std::string_view who, std::string_view what) {
    if (c.llama_block()) return;
    const std::string feature = c.qkv_bias ? "q/k/v projection biases (qkv_bias: a Qwen2 block)"
                                           : "per-head q/k RMSNorms (qk_norm: a Qwen3 block)";
    fail(who, std::string(what) + ": the model has " + feature + ", which " + std::string(what) +
                  " does not implement (it has Llama's block only); CpuModel runs it, save_checkpoint and save_gguf write it");
}

SPECDEC_INLINE void detail::validate_rope_scaling(const RopeScaling& s) {
    if (s.type == RopeScalingType::kNone) return;
    if (s.type == RopeScalingType::kFactors) {
        for (std::size_t j = 0; j < s.factors.size(); ++j)
            detail::require(std::isfinite(s.factors[j]) && s.factors[j] > 0.0f, "config", [&] {
                return "rope_scaling.factors[" + std::to_string(j) + "] must be > 0, got " + std::to_string(s.factors[j]);
            });
        return;
    }
    const auto finite_positive = [](float v, const char* field) {
        detail::require(std::isfinite(v) && v > 0.0f, "config",
                        [&] { return std::string("rope_scaling.") + field + " must be > 0, got " + std::to_string(v); });
    };
    finite_positive(s.factor, "factor");
    if (s.type == RopeScalingType::kYarn) {
        // factor < 1 would shrink the context; transformers warns, llama.cpp's mscale would fall below 1.
        detail::require(s.factor >= 1.0f, "config",
                        [&] { return "rope_scaling.factor must be >= 1 for yarn, got " + std::to_string(s.factor); });
        finite_positive(s.beta_fast, "beta_fast");
        finite_positive(s.beta_slow, "beta_slow");
        finite_positive(s.attention_factor, "attention_factor");
        // The ramp runs from the dimension of beta_fast rotations up to that of beta_slow: reversed, it
        // would divide by a negative width.
        detail::require(s.beta_fast > s.beta_slow, "config", [&] {
            return "rope_scaling.beta_fast " + std::to_string(s.beta_fast) + " must exceed beta_slow " + std::to_string(s.beta_slow);
        });
    }
    if (s.type == RopeScalingType::kLlama3) {
        finite_positive(s.low_freq_factor, "low_freq_factor");
        finite_positive(s.high_freq_factor, "high_freq_factor");
        // HF divides by (high - low) in the smoothing ramp: equal factors would make it 0/0.
        detail::require(s.high_freq_factor > s.low_freq_factor, "config", [&] {
            return "rope_scaling.high_freq_factor " + std::to_string(s.high_freq_factor) +
                   " must exceed low_freq_factor " + std::to_string(s.low_freq_factor);
        });
    }
    if (s.type != RopeScalingType::kLlama3 && s.type != RopeScalingType::kYarn) return;
    detail::require(s.original_max_position_embeddings > 0, "config", [&] {
        return "rope_scaling.original_max_position_embeddings must be > 0, got " +
               std::to_string(s.original_max_position_embeddings);
    });
}

SPECDEC_INLINE std::vector<double> rope_inverse_frequencies(const Config& c) {
    const int hd = c.head_dim();
    std::vector<double> inv_freq(static_cast<std::size_t>(hd / 2));
    for (int j = 0; j < hd / 2; ++j) inv_freq[j] = std::pow(static_cast<double>(c.rope_theta), -2.0 * j / hd);
    const RopeScaling& s = c.rope_scaling;
    switch (s.type) {
        case RopeScalingType::kNone: break;
        case RopeScalingType::kLinear:  // transformers' _compute_linear_scaling_rope_parameters
            for (double& f : inv_freq) f /= s.factor;
            break;
        case RopeScalingType::kLlama3: {
            // transformers' _compute_llama3_parameters (Llama 3.1): wavelengths longer than the
            // pretraining context / low_freq_factor are stretched by `factor`, those shorter than
            // context / high_freq_factor kept, and the band between interpolated linearly in
            // context / wavelength.
            const double old_context = s.original_max_position_embeddings;
            const double low_wavelen = old_context / s.low_freq_factor, high_wavelen = old_context / s.high_freq_factor;
            for (double& f : inv_freq) {
                const double wavelen = 2.0 * std::numbers::pi / f;
                if (wavelen > low_wavelen) {
                    f /= s.factor;
                } else if (wavelen >= high_wavelen) {
                    const double smooth = (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
                    f = (1.0 - smooth) * f / s.factor + smooth * f;
                }
            }
            break;
        }
        case RopeScalingType::kFactors:  // llama.cpp's ggml_rope_ext: pair j's angle divided by freq_factors[j]
            detail::require(s.factors.size() == inv_freq.size(), "config", [&] {
                return "rope_scaling.factors holds " + std::to_string(s.factors.size()) + " values; head_dim " +
                       std::to_string(hd) + " needs " + std::to_string(inv_freq.size());
            });
            for (std::size_t j = 0; j < inv_freq.size(); ++j) inv_freq[j] /= s.factors[j];
            break;
        case RopeScalingType::kYarn: {
            // transformers' _compute_yarn_parameters (modeling_rope_utils.py), the YaRN paper's
            // "NTK-by-parts" interpolation: pair j's wavelength is 2 pi theta^(2j/hd), so it turns r times in the
            // pretraining context L at j = hd ln(L / (2 pi r)) / (2 ln theta). Pairs below the j of
            // beta_fast turns keep their frequency, those above the j of beta_slow turns are divided by
            // factor, and a linear ramp in j mixes the two between (llama.cpp's rope_yarn: the same).
            const double base = c.rope_theta, context = s.original_max_position_embeddings;
            const auto turns_dimension = [&](double turns) {
                return hd * std::log(context / (turns * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
            };
            double low = turns_dimension(s.beta_fast), high = turns_dimension(s.beta_slow);
            if (s.truncate) {
                low = std::floor(low);
                high = std::ceil(high);
            }
            low = std::max(low, 0.0);
            high = std::min(high, hd - 1.0);
            if (low == high) high += 0.001;  // as transformers: a step, not 0/0
            for (std::size_t j = 0; j < inv_freq.size(); ++j) {
                const double ramp = std::clamp((static_cast<double>(j) - low) / (high - low), 0.0, 1.0);
                const double keep = 1.0 - ramp;  // transformers' inv_freq_extrapolation_factor
                inv_freq[j] = inv_freq[j] / s.factor * (1.0 - keep) + inv_freq[j] * keep;
            }
            break;
        }
    }
    return inv_freq;
}

SPECDEC_INLINE double rope_attention_factor(const Config& c) {
    return c.rope_scaling.type == RopeScalingType::kYarn ? c.rope_scaling.attention_factor : 1.0;
}

SPECDEC_INLINE double detail::yarn_mscale(double factor, double mscale) {
    return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}


#endif  // SPECDEC_BODIES

}  // namespace specdec
