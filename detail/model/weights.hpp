// specdec/detail/model/weights.hpp — a Llama model's float32 parameters, named and laid out as in HF checkpoints.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <type_traits>
#include <cstdint>
#include <string>
#include <vector>

#include "config.hpp"
#include "deferred_matrices.hpp"
#include "../core/compiled.hpp"
#include "../core/error.hpp"
#include "../core/rng.hpp"

namespace specdec {

/// One decoder layer. Matrices are (out_features, in_features) row-major, as nn.Linear stores them.
struct LayerWeights {
    std::vector<float> attn_norm;  // (D)         model.layers.{i}.input_layernorm.weight
    std::vector<float> wq;         // (H*hd, D)   model.layers.{i}.self_attn.q_proj.weight
    std::vector<float> wk;         // (Hkv*hd, D) model.layers.{i}.self_attn.k_proj.weight
    std::vector<float> wv;         // (Hkv*hd, D) model.layers.{i}.self_attn.v_proj.weight
    std::vector<float> wo;         // (D, H*hd)   model.layers.{i}.self_attn.o_proj.weight
    std::vector<float> mlp_norm;   // (D)         model.layers.{i}.post_attention_layernorm.weight
    std::vector<float> w_gate;     // (F, D)      model.layers.{i}.mlp.gate_proj.weight
    std::vector<float> w_up;       // (F, D)      model.layers.{i}.mlp.up_proj.weight
    std::vector<float> w_down;     // (D, F)      model.layers.{i}.mlp.down_proj.weight; (2D, F) last, partial_alignment
    // Config::qkv_bias only (Qwen2), else empty:
    std::vector<float> bq;         // (H*hd)      model.layers.{i}.self_attn.q_proj.bias
    std::vector<float> bk;         // (Hkv*hd)    model.layers.{i}.self_attn.k_proj.bias
    std::vector<float> bv;         // (Hkv*hd)    model.layers.{i}.self_attn.v_proj.bias
    // Config::qk_norm only (Qwen3), else empty:
    std::vector<float> q_norm;     // (hd)        model.layers.{i}.self_attn.q_norm.weight
    std::vector<float> k_norm;     // (hd)        model.layers.{i}.self_attn.k_norm.weight
};

struct Weights {
    std::vector<float> embed;  // (V, D) model.embed_tokens.weight
    std::vector<LayerWeights> layers;
    std::vector<float> norm;     // (D)    model.norm.weight
    std::vector<float> lm_head;  // (V, D) lm_head.weight; empty when tie_word_embeddings
    /// Set by a loader asked to defer (LoadOptions::defer_matrices): the matrices it names are empty
    /// above and read from the file when a CpuModel packs them.
    std::shared_ptr<const DeferredMatrices> deferred;

    const std::vector<float>& output_matrix() const { return lm_head.empty() ? embed : lm_head; }
};

/// Calls f(name, tensor, expected_size) for every parameter of `w` (a Weights, const or not), in HF
/// naming and checkpoint order. The Qwen tensors (biases, q/k norms) are visited only when the config
/// has them, so a Llama's tensors are exactly Llama's for every loader, saver and trainer.
template <class W, class F>
    requires std::same_as<std::remove_const_t<W>, Weights>
void for_each_tensor(W& w, const Config& c, F&& f) {
    const std::size_t D = c.hidden_size, Fw = c.intermediate_size, V = c.vocab_size;
    const std::size_t q = static_cast<std::size_t>(c.num_attention_heads) * c.head_dim(), kv = c.kv_dim();
    f(std::string("model.embed_tokens.weight"), w.embed, V * D);
    for (std::size_t i = 0; i < w.layers.size(); ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        auto& l = w.layers[i];
        f(p + "input_layernorm.weight", l.attn_norm, D);
        f(p + "self_attn.q_proj.weight", l.wq, q * D);
        if (c.qkv_bias) f(p + "self_attn.q_proj.bias", l.bq, q);
        f(p + "self_attn.k_proj.weight", l.wk, kv * D);
        if (c.qkv_bias) f(p + "self_attn.k_proj.bias", l.bk, kv);
        f(p + "self_attn.v_proj.weight", l.wv, kv * D);
        if (c.qkv_bias) f(p + "self_attn.v_proj.bias", l.bv, kv);
        f(p + "self_attn.o_proj.weight", l.wo, D * q);
        if (c.qk_norm) {
            f(p + "self_attn.q_norm.weight", l.q_norm, static_cast<std::size_t>(c.head_dim()));
            f(p + "self_attn.k_norm.weight", l.k_norm, static_cast<std::size_t>(c.head_dim()));
        }
        f(p + "post_attention_layernorm.weight", l.mlp_norm, D);
        f(p + "mlp.gate_proj.weight", l.w_gate, Fw * D);
        f(p + "mlp.up_proj.weight", l.w_up, Fw * D);
        f(p + "mlp.down_proj.weight", l.w_down, static_cast<std::size_t>(c.down_rows(static_cast<int>(i))) * Fw);
    }
    f(std::string("model.norm.weight"), w.norm, D);
    if (!c.tie_word_embeddings) f(std::string("lm_head.weight"), w.lm_head, V * D);
}

/// Checks every tensor has the size the config implies; throws naming the tensor. A matrix left in its
/// file (Weights::deferred) passes only with `allow_deferred` (a CpuModel packs it from there); anything
/// else needs the values in memory and is told to load without LoadOptions::defer_matrices.
SPECDEC_INLINE void validate(const Weights& w, const Config& c, bool allow_deferred = false);
SPECDEC_INLINE std::size_t parameter_count(const Weights& w, const Config& c);
/// Random weights: N(0, std) matrices (std = 0.02 like HF's initializer_range, or larger to get a
/// peaky, deterministic-looking random model), unit norms. For tests and benchmarks.
SPECDEC_INLINE Weights random_weights(const Config& c, std::uint64_t seed, float std_dev = 0.02f);
/// A copy with Gaussian noise of relative size `rel` added to every matrix: a stand-in drafter that
/// agrees with the target often but not always (acceptance strictly between 0 and 1).
SPECDEC_INLINE Weights perturbed(const Config& c, Weights w, float rel, std::uint64_t seed);

namespace detail {

/// Standard normal draws from the counter-based generator (Box-Muller), so initialisation is the
/// same on every platform (std::normal_distribution is not).
struct NormalStream {
    std::uint64_t seed;
    std::uint32_t counter = 0;
    float next() {
        StepRng rng{seed, counter++, RngStream::kUser};
        const float u1 = rng.uniform(0, 0), u2 = rng.uniform(0, 1);
        return std::sqrt(-2.0f * std::log(1.0f - u1)) * std::cos(6.2831853f * u2);
    }
};

}  // namespace detail

#if SPECDEC_BODIES

SPECDEC_INLINE void validate(const Weights& w, const Config& c, bool allow_deferred) {
    detail::require(static_cast<int>(w.layers.size()) == c.num_hidden_layers, "weights", [&] {
        return "config has num_hidden_layers " + std::to_string(c.num_hidden_layers) + ", weights have " +
               std::to_string(w.layers.size()) + " layers";
    });
    for_each_tensor(w, c, [&](const std::string& name, const std::vector<float>& t, std::size_t n) {
        const MatrixRows* in_file = t.empty() && w.deferred ? w.deferred->find(name) : nullptr;
        if (in_file != nullptr) {
            detail::require(allow_deferred, "weights", [&] {
                return "tensor '" + name + "' was left in its file (loaded with LoadOptions::defer_matrices, for a CpuModel "
                       "only); this needs it in memory: load the model without defer_matrices";
            });
            detail::require(static_cast<std::size_t>(in_file->m) * static_cast<std::size_t>(in_file->k) == n, "weights", [&] {
                return "tensor '" + name + "': expected " + std::to_string(n) + " values, the file holds (" +
                       std::to_string(in_file->m) + ", " + std::to_string(in_file->k) + ")";
            });
            return;
        }
        detail::require(t.size() == n, "weights", [&] {
            return "tensor '" + name + "': expected " + std::to_string(n) + " floats, got " + std::to_string(t.size());
        });
    });
}

SPECDEC_INLINE std::size_t parameter_count(const Weights& w, const Config& c) {
    std::size_t n = 0;
    for_each_tensor(w, c, [&](const std::string&, const std::vector<float>&, std::size_t s) { n += s; });
    return n;
}

SPECDEC_INLINE Weights random_weights(const Config& c, std::uint64_t seed, float std_dev) {
    c.validate();
    Weights w;
    w.layers.resize(c.num_hidden_layers);
    detail::NormalStream normal{seed};
    for_each_tensor(w, c, [&](const std::string& name, std::vector<float>& t, std::size_t n) {
        t.resize(n);
        const bool is_norm = name.find("norm") != std::string::npos;
        for (float& v : t) v = is_norm ? 1.0f : std_dev * normal.next();
    });
    return w;
}

SPECDEC_INLINE Weights perturbed(const Config& c, Weights w, float rel, std::uint64_t seed) {
    detail::NormalStream normal{seed};
    for_each_tensor(w, c, [&](const std::string& name, std::vector<float>& t, std::size_t) {
        if (name.find("norm") != std::string::npos) return;
        double ss = 0.0;
        for (float v : t) ss += double(v) * v;
        const float scale = rel * static_cast<float>(std::sqrt(ss / std::max<std::size_t>(t.size(), 1)));
        for (float& v : t) v += scale * normal.next();
    });
    return w;
}

#endif  // SPECDEC_BODIES

}  // namespace specdec
