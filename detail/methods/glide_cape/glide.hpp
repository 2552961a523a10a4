// specdec/detail/methods/glide_cape/glide.hpp — GLIDE's drafter: a small Llama whose layers also glimpse the target's KV cache.
// SPDX-License-Identifier: MIT
#pragma once

// GLIDE (glide-cape.txt §4.1). Drafter layer m (of N_D) is three pre-norm residual sub-layers:
//   x += SelfAttention(RMSNorm(x))    causal over the tree, the drafter's own KV cache, RoPE
//   x += CrossAttention(RMSNorm(x))   one query head per TARGET head (the target's head_dim), RoPE at the
//                                     query's position; keys/values: the target's committed KV of layer
//                                     l = N_T - N_D + m (the top N_D layers, in order), read in place
//   x += SwiGLU(RMSNorm(x))
// then the final norm and the LM head. The KV delay (§4.1): a query at position j sees target rows
// [0, min(j, T_target)). While drafting, the root x_t sits at t = T_target and the target holds the KV
// of x_0..x_{t-1} only, so every drafted position sees exactly those rows. A query that sees no row
// gets a zero cross-attention output. A grouped-query target's query heads share their group's KV head.
//
// Without cross-attention (glide_cross_attention = false) the drafter is a plain Llama: the paper's
// "vanilla drafter" ablation (§5.2). Its checkpoint is a Llama checkpoint that CpuModel loads.
//
// Checkpoint: an HF-style folder. config.json holds the drafter's LlamaConfig fields plus the glide_*
// fields of GlideConfig; model.safetensors holds the Llama tensors under HF names plus, per layer m,
//   model.layers.{m}.cross_attn_layernorm.weight   (D)
//   model.layers.{m}.cross_attn.q_proj.weight      (h*d_k, D)   W_1..W_h of §4.1, stacked by head
//   model.layers.{m}.cross_attn.o_proj.weight      (D, h*d_k)   W^O

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../../io/checkpoint.hpp"
#include "../../core/concepts.hpp"
#include "../../model/config.hpp"
#include "../../model/cpu_model.hpp"
#include "../../model/kv_cache.hpp"
#include "../../core/error.hpp"
#include "../../io/json.hpp"
#include "../../policies/proposers.hpp"
#include "../../io/safetensors.hpp"
#include "../../core/tree.hpp"
#include "../../model/weights.hpp"

namespace specdec {

// ---------------------------------------------------------------------------------------------------
// Configuration

/// The drafter's own Llama shape plus what pairs it with a target. The target's side is stated here
/// (not read from the target) so that a checkpoint says what it was trained against; GlideModel checks
/// it against the target it is given. Field names are the config.json keys.
struct GlideConfig {
    Config draft;                              // the drafter's Llama fields; N_D = draft.num_hidden_layers
    bool glide_cross_attention = true;         // false: the vanilla drafter (no cross-attention sub-layers)
    int glide_target_layers = 1;               // N_T: drafter layer m reads target layer N_T - N_D + m
    int glide_cross_heads = 1;                 // h: the target's query heads, one cross query head each
    int glide_cross_head_dim = 2;              // d_k: the target's head_dim
    int glide_target_kv_heads = 1;             // the target's kv heads (query heads of a group share one)
    float glide_target_rope_theta = 10000.0f;  // the target's RoPE base: its cached keys carry it
    RopeScaling glide_target_rope_scaling{};   // and its RoPE scaling (Llama 3's llama3, YaRN, a GGUF table)

    int cross_dim() const { return glide_cross_heads * glide_cross_head_dim; }  // fits an int once validate() passed
    int target_layer(int m) const { return glide_target_layers - draft.num_hidden_layers + m; }

    /// The rotation the target's cached keys carry, as a one-head Config of head_dim d_k. The cross
    /// queries take rope_inverse_frequencies and rope_attention_factor of it, so query and key turn by
    /// the same angles and q.k depends on their distance alone, as in the target's own attention.
    Config cross_rope() const {
        Config r;
        r.hidden_size = r.attention_head_dim = glide_cross_head_dim;
        r.num_attention_heads = r.num_key_value_heads = 1;
        r.rope_theta = glide_target_rope_theta;
        r.rope_scaling = glide_target_rope_scaling;
        return r;
    }

    /// Throws naming the field and value when the shape cannot work.
    void validate() const {
        draft.validate();
        detail::require_llama_block(draft, "glide", "a GLIDE drafter's layers");
        if (!glide_cross_attention) return;
        const auto positive = [](int v, const char* field) {
            detail::require(v > 0, "glide", [&] { return std::string(field) + " must be > 0, got " + std::to_string(v); });
        };
        positive(glide_cross_heads, "glide_cross_heads");
        positive(glide_cross_head_dim, "glide_cross_head_dim");
        positive(glide_target_kv_heads, "glide_target_kv_heads");
        detail::require(glide_target_layers >= draft.num_hidden_layers, "glide", [&] {
            return "glide_target_layers (N_T) " + std::to_string(glide_target_layers) +
                   " is smaller than the drafter's num_hidden_layers (N_D) " + std::to_string(draft.num_hidden_layers) +
                   ": drafter layer m reads target layer N_T - N_D + m";
        });
        detail::require(glide_cross_head_dim % 2 == 0, "glide", [&] {
            return "glide_cross_head_dim " + std::to_string(glide_cross_head_dim) + " must be even for RoPE";
        });
        detail::require(glide_cross_heads % glide_target_kv_heads == 0, "glide", [&] {
            return "glide_cross_heads " + std::to_string(glide_cross_heads) +
                   " is not a multiple of glide_target_kv_heads " + std::to_string(glide_target_kv_heads);
        });
        detail::require(std::isfinite(glide_target_rope_theta) && glide_target_rope_theta > 0.0f, "glide", [&] {
            return "glide_target_rope_theta must be > 0, got " + std::to_string(glide_target_rope_theta);
        });
        const RopeScaling& rs = glide_target_rope_scaling;
        try {
            detail::validate_rope_scaling(rs);
        } catch (const error& e) {
            detail::fail("glide", std::string("glide_target_rope_scaling: ") + e.what());
        }
        detail::require(rs.type != RopeScalingType::kFactors || 2 * rs.factors.size() == static_cast<std::size_t>(glide_cross_head_dim),
                        "glide", [&] {
                            return "glide_target_rope_scaling holds " + std::to_string(rs.factors.size()) +
                                   " factors; glide_cross_head_dim " + std::to_string(glide_cross_head_dim) + " needs " +
                                   std::to_string(glide_cross_head_dim / 2);
                        });
        // h x d_k in 64 bits: as an int product it wraps (16777217 x 256 = 256), and a checkpoint whose
        // tensors match the wrapped width would load under a config claiming 4.3 G dimensions.
        const std::int64_t cq = std::int64_t{glide_cross_heads} * glide_cross_head_dim;
        const std::int64_t cross_bytes =
            detail::mul_sat(detail::mul_sat(2 * std::int64_t{draft.num_hidden_layers}, detail::mul_sat(cq, draft.hidden_size)), 4);
        const std::int64_t bytes = detail::add_sat(detail::mul_sat(draft.parameter_count(), 4), cross_bytes);
        const bool too_wide = cq > std::numeric_limits<int>::max();
        detail::require(!too_wide && bytes <= kMaxParameterBytes, "glide", [&] {
            return "glide_cross_heads " + std::to_string(glide_cross_heads) + " x glide_cross_head_dim " +
                   std::to_string(glide_cross_head_dim) + " = " + std::to_string(cq) + " cross-attention dimensions: " +
                   (too_wide ? "more than an int holds" : "too many") + "; its q_proj and o_proj (2 x " +
                   std::to_string(draft.num_hidden_layers) + " layers x " + std::to_string(cq) + " x hidden_size " +
                   std::to_string(draft.hidden_size) + ") need " + std::to_string(cross_bytes) +
                   " bytes as float32, and the drafter's parameters " + std::to_string(bytes) + " (at most " +
                   std::to_string(kMaxParameterBytes) + ", 1 TiB)";
        });
    }
};

/// The GlideConfig that pairs a drafter of shape `draft` with a target of shape `target`.
inline GlideConfig glide_config_for(const Config& draft, const Config& target, bool cross_attention = true) {
    return GlideConfig{.draft = draft,
                       .glide_cross_attention = cross_attention,
                       .glide_target_layers = target.num_hidden_layers,
                       .glide_cross_heads = target.num_attention_heads,
                       .glide_cross_head_dim = target.head_dim(),
                       .glide_target_kv_heads = target.num_key_value_heads,
                       .glide_target_rope_theta = target.rope_theta,
                       .glide_target_rope_scaling = target.rope_scaling};
}

// ---------------------------------------------------------------------------------------------------
// Parameters (float for inference; training also instantiates double for its gradient checks)

/// One drafter layer. Matrices are (out_features, in_features) row-major, as nn.Linear stores them;
/// the cross-attention tensors are empty in the vanilla drafter.
template <class T>
struct GlideLayer {
    std::vector<T> attn_norm, wq, wk, wv, wo;   // the Llama self-attention sub-layer (LayerWeights' shapes)
    std::vector<T> cross_norm;                  // (D)
    std::vector<T> cross_wq;                    // (h*d_k, D)
    std::vector<T> cross_wo;                    // (D, h*d_k)
    std::vector<T> mlp_norm, w_gate, w_up, w_down;  // the SwiGLU sub-layer
};

template <class T>
struct GlideParams {
    std::vector<T> embed;                // (V, D)
    std::vector<GlideLayer<T>> layers;   // (N_D)
    std::vector<T> norm;                 // (D)
    std::vector<T> lm_head;              // (V, D); empty when tie_word_embeddings

    const std::vector<T>& output_matrix() const { return lm_head.empty() ? embed : lm_head; }
};

using GlideWeights = GlideParams<float>;

namespace detail {
template <class P>
inline constexpr bool kIsGlideParams = false;
template <class T>
inline constexpr bool kIsGlideParams<GlideParams<T>> = true;
}  // namespace detail

/// Calls f(name, tensor, hf_shape) for every parameter of a GlideParams (const or not), HF names.
template <class P, class F>
    requires detail::kIsGlideParams<std::remove_const_t<P>>
void for_each_tensor(P& p, const GlideConfig& c, F&& f) {
    const std::int64_t D = c.draft.hidden_size, Fw = c.draft.intermediate_size, V = c.draft.vocab_size;
    const std::int64_t q = static_cast<std::int64_t>(c.draft.num_attention_heads) * c.draft.head_dim();
    const std::int64_t kv = c.draft.kv_dim(), cq = std::int64_t{c.glide_cross_heads} * c.glide_cross_head_dim;
    using Shape = std::vector<std::int64_t>;
    f(std::string("model.embed_tokens.weight"), p.embed, Shape{V, D});
    for (std::size_t m = 0; m < p.layers.size(); ++m) {
        const std::string pre = "model.layers." + std::to_string(m) + ".";
        auto& l = p.layers[m];
        f(pre + "input_layernorm.weight", l.attn_norm, Shape{D});
        f(pre + "self_attn.q_proj.weight", l.wq, Shape{q, D});
        f(pre + "self_attn.k_proj.weight", l.wk, Shape{kv, D});
        f(pre + "self_attn.v_proj.weight", l.wv, Shape{kv, D});
        f(pre + "self_attn.o_proj.weight", l.wo, Shape{D, q});
        if (c.glide_cross_attention) {
            f(pre + "cross_attn_layernorm.weight", l.cross_norm, Shape{D});
            f(pre + "cross_attn.q_proj.weight", l.cross_wq, Shape{cq, D});
            f(pre + "cross_attn.o_proj.weight", l.cross_wo, Shape{D, cq});
        }
        f(pre + "post_attention_layernorm.weight", l.mlp_norm, Shape{D});
        f(pre + "mlp.gate_proj.weight", l.w_gate, Shape{Fw, D});
        f(pre + "mlp.up_proj.weight", l.w_up, Shape{Fw, D});
        f(pre + "mlp.down_proj.weight", l.w_down, Shape{D, Fw});
    }
    f(std::string("model.norm.weight"), p.norm, Shape{D});
    if (!c.draft.tie_word_embeddings) f(std::string("lm_head.weight"), p.lm_head, Shape{V, D});
}

namespace detail {
inline std::size_t elements(std::span<const std::int64_t> shape) {
    std::size_t n = 1;
    for (std::int64_t s : shape) n *= static_cast<std::size_t>(s);
    return n;
}
}  // namespace detail

/// Checks every tensor has the size the config implies; throws naming the tensor.
template <class T>
void validate(const GlideParams<T>& w, const GlideConfig& c) {
    detail::require(static_cast<int>(w.layers.size()) == c.draft.num_hidden_layers, "glide", [&] {
        return "config has num_hidden_layers " + std::to_string(c.draft.num_hidden_layers) + ", weights have " +
               std::to_string(w.layers.size()) + " layers";
    });
    for_each_tensor(w, c, [](const std::string& name, const std::vector<T>& t, const std::vector<std::int64_t>& shape) {
        detail::require(t.size() == detail::elements(shape), "glide", [&] {
            return "tensor '" + name + "': expected " + std::to_string(detail::elements(shape)) + " values, got " +
                   std::to_string(t.size());
        });
    });
}

inline std::size_t parameter_count(const GlideWeights& w, const GlideConfig& c) {
    std::size_t n = 0;
    for_each_tensor(w, c, [&](const std::string&, const std::vector<float>& t, const auto&) { n += t.size(); });
    return n;
}

/// Random weights: N(0, std) matrices, unit norms (random_weights' recipe), for tests and training.
inline GlideWeights random_glide_weights(const GlideConfig& c, std::uint64_t seed, float std_dev = 0.02f) {
    c.validate();
    GlideWeights w;
    w.layers.resize(c.draft.num_hidden_layers);
    detail::NormalStream normal{seed};
    for_each_tensor(w, c, [&](const std::string& name, std::vector<float>& t, const std::vector<std::int64_t>& shape) {
        t.resize(detail::elements(shape));
        const bool is_norm = name.find("norm") != std::string::npos;
        for (float& v : t) v = is_norm ? 1.0f : std_dev * normal.next();
    });
    return w;
}

// ---------------------------------------------------------------------------------------------------
// Checkpoint: config.json (LlamaConfig + glide_* fields) and model.safetensors

namespace detail {
/// glide_target_rope_scaling: config.json's rope_scaling object, or {"rope_type": "factors", "factors":
/// [...]} for a table of per-dimension factors (a GGUF target's rope_freqs.weight), which rope_scaling
/// cannot spell.
inline RopeScaling read_glide_rope_scaling(const json::Value& v, const std::string& file) {
    const std::string field = "glide_target_rope_scaling";
    const json::Value* type = v.is_object() ? v.find("rope_type") : nullptr;
    if (type == nullptr || !type->is_string() || type->as_string() != "factors") return read_rope_object(v, file, field).scaling;
    RopeScaling r{.type = RopeScalingType::kFactors};
    for (const json::Member& m : v.as_object())
        require(m.key == "rope_type" || m.key == "factors", "glide", [&] {
            return file + ": field '" + field + "." + m.key + "' is not read for rope_type 'factors' (refused, not ignored)";
        });
    const json::Value* factors = v.find("factors");
    require(factors != nullptr && factors->is_array(), "glide",
            [&] { return file + ": field '" + field + ".factors' must be an array of numbers"; });
    for (const json::Value& f : factors->as_array()) {
        require(f.is_number(), "glide", [&] { return file + ": field '" + field + ".factors' holds " + json::dump(f) + ", not a number"; });
        r.factors.push_back(static_cast<float>(f.as_double()));
    }
    return r;
}
}  // namespace detail

/// Reads the drafter's Llama fields with load_config and the glide_* fields beside them.
inline GlideConfig load_glide_config(const std::filesystem::path& path) {
    const std::string file = path.string();
    GlideConfig c;
    c.draft = load_config(path);
    const json::Value root = json::parse(detail::read_text_file(path, "glide"), file);
    const auto integer = [&](const char* field) {
        const std::int64_t v = detail::read_field(root, file, field, "glide", detail::as_int);
        detail::require(v > 0 && v < (std::int64_t{1} << 31), "glide",
                        [&] { return file + ": field '" + field + "' = " + std::to_string(v) + " is out of range"; });
        return static_cast<int>(v);
    };
    c.glide_cross_attention = detail::read_field(root, file, "glide_cross_attention", "glide", detail::as_bool);
    c.glide_target_layers = integer("glide_target_layers");
    c.glide_cross_heads = integer("glide_cross_heads");
    c.glide_cross_head_dim = integer("glide_cross_head_dim");
    c.glide_target_kv_heads = integer("glide_target_kv_heads");
    c.glide_target_rope_theta =
        static_cast<float>(detail::read_field(root, file, "glide_target_rope_theta", "glide", detail::as_double));
    if (const json::Value* v = root.find("glide_target_rope_scaling"); v != nullptr && !v->is_null())
        c.glide_target_rope_scaling = detail::read_glide_rope_scaling(*v, file);
    try {
        c.validate();
    } catch (const error& e) {
        detail::fail("glide", file + ": " + e.what());
    }
    return c;
}

/// save_config's LlamaConfig plus the glide_* fields. With cross-attention the architecture is named
/// "GlideDrafter" so that nothing mistakes the folder for a plain Llama; the vanilla drafter stays one.
inline void save_glide_config(const GlideConfig& c, const std::filesystem::path& path,
                              std::string_view torch_dtype = "float32") {
    save_config(c.draft, path, torch_dtype);
    json::Value root = json::parse(detail::read_text_file(path, "glide"), path.string());
    json::Object& o = root.as_object();
    if (c.glide_cross_attention) {
        o.set("architectures", json::Array{json::Value("GlideDrafter")});
        o.set("model_type", "glide");
    }
    o.set("glide_cross_attention", c.glide_cross_attention);
    o.set("glide_target_layers", c.glide_target_layers);
    o.set("glide_cross_heads", c.glide_cross_heads);
    o.set("glide_cross_head_dim", c.glide_cross_head_dim);
    o.set("glide_target_kv_heads", c.glide_target_kv_heads);
    o.set("glide_target_rope_theta", static_cast<double>(c.glide_target_rope_theta));
    // Written only when scaled, so an unscaled drafter's config.json is what it always was.
    if (const RopeScaling& rs = c.glide_target_rope_scaling; rs.type == RopeScalingType::kFactors) {
        json::Array factors;
        for (const float f : rs.factors) factors.push_back(json::Value(static_cast<double>(f)));
        json::Object r;
        r.set("rope_type", "factors");
        r.set("factors", std::move(factors));
        o.set("glide_target_rope_scaling", std::move(r));
    } else if (rs.type != RopeScalingType::kNone) {
        o.set("glide_target_rope_scaling", detail::rope_scaling_json(rs));
    }
    std::ofstream out(path, std::ios::binary);
    detail::require(static_cast<bool>(out), "glide", [&] { return path.string() + ": cannot write"; });
    out << json::dump(root, 2) << "\n";
}

/// Reads every tensor of `c` by name, checking its shape; float32, bfloat16 and float16 load.
inline GlideWeights load_glide_weights(const std::filesystem::path& path, const GlideConfig& c) {
    c.validate();
    const SafetensorsFile file = SafetensorsFile::open(path);
    detail::require_layers(file, path, c.draft.num_hidden_layers, "glide");
    GlideWeights w;
    w.layers.resize(c.draft.num_hidden_layers);
    for_each_tensor(w, c, [&](const std::string& name, std::vector<float>& t, const std::vector<std::int64_t>& shape) {
        const bool cross = name.find("cross_attn") != std::string::npos;
        detail::read_tensor(file, path, name, shape, t, "glide",
                            cross ? " (a GLIDE drafter with glide_cross_attention = true needs it)" : "");
    });
    return w;
}

/// Writes `w` under its HF names, float32 or bfloat16 (save_weights' rule).
inline void save_glide_weights(const GlideWeights& w, const GlideConfig& c, const std::filesystem::path& path,
                               SaveFormat format = SaveFormat::kF32) {
    validate(w, c);
    detail::write_tensors(path, format, [&](auto&& put) {
        for_each_tensor(w, c, [&](const std::string& name, const std::vector<float>& t, const std::vector<std::int64_t>& shape) {
            put(name, t, shape);
        });
    });
}

struct GlideCheckpoint {
    GlideConfig config;
    GlideWeights weights;
};

inline GlideCheckpoint load_glide_checkpoint(const std::filesystem::path& dir) {
    detail::require(std::filesystem::is_directory(dir), "glide", [&] {
        return dir.string() + ": not a directory (a GLIDE drafter is a folder with config.json and model.safetensors)";
    });
    GlideCheckpoint ck;
    ck.config = load_glide_config(dir / "config.json");
    ck.weights = load_glide_weights(dir / "model.safetensors", ck.config);
    return ck;
}

inline void save_glide_checkpoint(const std::filesystem::path& dir, const GlideConfig& c, const GlideWeights& w,
                                  SaveFormat format = SaveFormat::kBF16) {
    std::filesystem::create_directories(dir);
    save_glide_config(c, dir / "config.json", format == SaveFormat::kBF16 ? "bfloat16" : "float32");
    save_glide_weights(w, c, dir / "model.safetensors", format);
}

// ---------------------------------------------------------------------------------------------------
// The drafter for inference

/// A GLIDE drafter next to its target: a LanguageModel with CpuModel's semantics (tree forward,
/// commit, truncate), so ModelProposer drives it unchanged. It reads the target's committed KV through
/// target.kv(l) at every forward, without copying; the target must outlive it. KV cache: per layer
/// (C, Hkv*hd), C growing as needed up to max_position_embeddings + max_tree_nodes (detail::KvCache);
/// rows [0, T) committed, T + i tree node i.
template <ExposesKV Target>
class GlideModel {
public:
    GlideModel(GlideConfig config, GlideWeights weights, const Target& target, ModelOptions options = {})
        : cfg_(std::move(config)), w_(std::move(weights)), target_(&target), opt_(options) {
        cfg_.validate();
        validate(w_, cfg_);
        check_target();
        if (opt_.pool == nullptr) {
            own_pool_ = std::make_unique<ThreadPool>(1);
            opt_.pool = own_pool_.get();
        }
        detail::require(opt_.max_tree_nodes > 0, "glide", [&] {
            return "max_tree_nodes must be > 0, got " + std::to_string(opt_.max_tree_nodes);
        });
        prepare_matrices();
        kv_ = detail::KvCache(cfg_.draft.num_hidden_layers, cfg_.draft.kv_dim(),
                              detail::kv_rows(cfg_.draft.max_position_embeddings, opt_.max_tree_nodes, "glide"), "glide");
    }

    /// The drafter keeps a pointer to the target: a temporary would dangle.
    GlideModel(GlideConfig, GlideWeights, const Target&&, ModelOptions = {}) = delete;

    // Matrices point into this object's buffers: moving keeps them valid, copying would not.
    GlideModel(const GlideModel&) = delete;
    GlideModel& operator=(const GlideModel&) = delete;
    GlideModel(GlideModel&&) = default;
    GlideModel& operator=(GlideModel&&) = default;

    const GlideConfig& config() const { return cfg_; }
    const GlideWeights& weights() const { return w_; }
    int vocab_size() const { return cfg_.draft.vocab_size; }
    int cache_len() const { return cache_len_; }
    int context_size() const { return cfg_.draft.max_position_embeddings; }

    /// Logits (N - first, V) for tree nodes first..N-1, exactly as CpuModel::forward; the
    /// cross-attention of a node at position j reads target rows [0, min(j, target.cache_len())).
    Rows forward(const Tree& tree, int first = 0) {
        const int N = tree.size(), n = N - first;
        detail::require(first >= 0 && first <= n_computed_ && first <= N, "glide", [&] {
            return "forward from node " + std::to_string(first) + ", but only " + std::to_string(n_computed_) +
                   " nodes of this tree were computed before (pass 0 for a new tree)";
        });
        tree.validate(cfg_.draft.vocab_size);
        detail::require(cache_len_ + std::int64_t{N} <= kv_.max_rows(), "glide", [&] {
            return "tree of " + std::to_string(N) + " nodes does not fit: cache holds " + std::to_string(cache_len_) +
                   " tokens, capacity is " + std::to_string(kv_.max_rows()) + " (max_position_embeddings " +
                   std::to_string(cfg_.draft.max_position_embeddings) + " + max_tree_nodes " +
                   std::to_string(opt_.max_tree_nodes) + ")";
        });
        kv_.reserve(cache_len_ + N, cache_len_ + first);  // the rows this forward writes; committed and reused ones kept
        n_computed_ = N;
        const Config& c = cfg_.draft;
        const int D = c.hidden_size, hd = c.head_dim(), H = c.num_attention_heads, kvd = c.kv_dim();
        const int Fw = c.intermediate_size, V = c.vocab_size, cq = cfg_.cross_dim();
        const std::size_t nn = static_cast<std::size_t>(std::max(n, 0));
        x_.resize(nn * D);
        xb_.resize(nn * D);
        qkv_.resize(nn * (H * hd + 2 * kvd));
        q_.resize(nn * H * hd);
        att_.resize(nn * H * hd);
        cross_q_.resize(nn * cq);
        cross_att_.resize(nn * cq);
        gate_up_.resize(nn * 2 * Fw);
        hidden_mlp_.resize(nn * Fw);
        logits_.resize(nn * V);
        if (n == 0) return Rows{{}, V};

        // Each node sees the committed cache plus its ancestors and itself, at position T + depth.
        std::vector<std::vector<int>> visible(n);
        positions_.resize(n);
        for (int i = 0; i < n; ++i) {
            visible[i] = tree.path_to(first + i);
            positions_[i] = cache_len_ + tree[first + i].depth;
        }
        detail::rope_table(rope_cs_, positions_, inv_freq_, rope_attention_factor(c));
        detail::rope_table(cross_cs_, positions_, cross_inv_freq_, cross_attention_factor_);

        for (int i = 0; i < n; ++i)
            std::copy_n(&w_.embed[static_cast<std::size_t>(tree[first + i].token) * D], D, &x_[i * D]);
        for (int m = 0; m < c.num_hidden_layers; ++m) {
            self_attention(m, first, visible);
            if (cfg_.glide_cross_attention) cross_attention(m);  // GLIDE §4.1: between self-attention and FFN
            feed_forward(m);
        }
        rows([&](int i) {
            detail::rmsnorm(&xb_[i * D], &x_[i * D], w_.norm.data(), D, c.rms_norm_eps, !opt_.reference);
        });
        linear(logits_.data(), xb_.data(), head_, n);
        return Rows{logits_, V};
    }

    /// Keeps the KV rows of `path` (root-first node indices of the last forward's tree) as the next
    /// committed tokens and drops every other tree row, as CpuModel::commit.
    void commit(std::span<const int> path) {
        validate_commit(path, n_computed_, cache_len_, cfg_.draft.max_position_embeddings, "glide");
        kv_.gather(cache_len_, path);
        cache_len_ += static_cast<int>(path.size());
        n_computed_ = 0;
    }

    /// Forgets committed tokens beyond the first n.
    void truncate(int n) {
        detail::require(n >= 0 && n <= cache_len_, "glide", [&] {
            return "truncate to " + std::to_string(n) + " tokens, but the cache holds " + std::to_string(cache_len_);
        });
        cache_len_ = n;
        n_computed_ = 0;
    }
    void reset() { truncate(0); }

private:
    /// The target must be the one the drafter was trained against: same vocabulary, layer count, and
    /// cross-attention shape. Query heads and RoPE base are checked when the target exposes config().
    void check_target() const {
        const auto mismatch = [](const char* field, long ours, const char* target_field, long theirs) {
            detail::require(ours == theirs, "glide", [&] {
                return std::string(field) + " is " + std::to_string(ours) + ", but the target has " + target_field +
                       " " + std::to_string(theirs);
            });
        };
        mismatch("vocab_size", cfg_.draft.vocab_size, "vocab_size", target_->vocab_size());
        if (!cfg_.glide_cross_attention) return;
        mismatch("glide_target_layers", cfg_.glide_target_layers, "num_hidden_layers", target_->num_layers());
        const KvView kv = target_->kv(cfg_.target_layer(0));
        mismatch("glide_target_kv_heads", cfg_.glide_target_kv_heads, "num_key_value_heads", kv.n_kv_heads);
        mismatch("glide_cross_head_dim", cfg_.glide_cross_head_dim, "head_dim", kv.head_dim);
        if constexpr (requires { target_->config().num_attention_heads; }) {
            const Config& tc = target_->config();
            mismatch("glide_cross_heads", cfg_.glide_cross_heads, "num_attention_heads", tc.num_attention_heads);
            detail::require(tc.rope_theta == cfg_.glide_target_rope_theta, "glide", [&] {
                return "glide_target_rope_theta is " + std::to_string(cfg_.glide_target_rope_theta) +
                       ", but the target has rope_theta " + std::to_string(tc.rope_theta);
            });
            // The cross queries turn by the scaling the drafter was trained with; under another the
            // target's keys would be read at other angles.
            detail::require(detail::same_rope_scaling(tc.rope_scaling, cfg_.glide_target_rope_scaling), "glide", [&] {
                return "glide_target_rope_scaling is " + detail::rope_scaling_string(cfg_.glide_target_rope_scaling) +
                       ", but the target has rope_scaling " + detail::rope_scaling_string(tc.rope_scaling);
            });
        }
    }

    // ---- the three sub-layers of drafter layer m, each x_ += f(RMSNorm(x_)) over the n nodes ------

    /// Causal self-attention over the tree: q, k, v in one product; k and v go straight into the
    /// cache rows T + first + i, so later forwards of this tree (and commit) find them there.
    void self_attention(int m, int first, const std::vector<std::vector<int>>& visible) {
        const Config& c = cfg_.draft;
        const int n = static_cast<int>(visible.size()), D = c.hidden_size, hd = c.head_dim();
        const int H = c.num_attention_heads, kvd = c.kv_dim(), qkv_dim = H * hd + 2 * kvd;
        rows([&](int i) {
            detail::rmsnorm(&xb_[i * D], &x_[i * D], w_.layers[m].attn_norm.data(), D, c.rms_norm_eps, !opt_.reference);
        });
        linear(qkv_.data(), xb_.data(), mats_[m].qkv, n);
        float* kc = kv_.k(m);
        float* vc = kv_.v(m);
        rows([&](int i) {
            const std::size_t at = static_cast<std::size_t>(cache_len_ + first + i) * kvd;
            detail::split_qkv(&qkv_[static_cast<std::size_t>(i) * qkv_dim], &q_[static_cast<std::size_t>(i) * H * hd], kc + at,
                              vc + at, H, c.num_key_value_heads, hd, &rope_cs_[static_cast<std::size_t>(i) * hd], !opt_.reference);
        });
        self_attend(kc, vc, visible);
        linear(xb_.data(), att_.data(), mats_[m].wo, n);
        add_into_x();
    }

    /// GLIDE's cross-attention (§4.1): one query head per target head, rotated like the target's keys
    /// (its head_dim and RoPE base, at the query's position), over target layer N_T - N_D + m.
    void cross_attention(int m) {
        const Config& c = cfg_.draft;
        const int n = static_cast<int>(positions_.size()), D = c.hidden_size;
        const int hdc = cfg_.glide_cross_head_dim, cq = cfg_.cross_dim();
        rows([&](int i) {
            detail::rmsnorm(&xb_[i * D], &x_[i * D], w_.layers[m].cross_norm.data(), D, c.rms_norm_eps, !opt_.reference);
        });
        linear(cross_q_.data(), xb_.data(), mats_[m].cross_q, n);
        rows([&](int i) {
            for (int h = 0; h < cfg_.glide_cross_heads; ++h)
                detail::rope(&cross_q_[static_cast<std::size_t>(i) * cq + h * hdc], hdc,
                             &cross_cs_[static_cast<std::size_t>(i) * hdc], !opt_.reference);
        });
        cross_attend(target_->kv(cfg_.target_layer(m)));
        linear(xb_.data(), cross_att_.data(), mats_[m].cross_o, n);
        add_into_x();
    }

    /// SwiGLU over the fused (2F, D) gate|up matrix.
    void feed_forward(int m) {
        const Config& c = cfg_.draft;
        const int n = static_cast<int>(positions_.size()), D = c.hidden_size, Fw = c.intermediate_size;
        rows([&](int i) {
            detail::rmsnorm(&xb_[i * D], &x_[i * D], w_.layers[m].mlp_norm.data(), D, c.rms_norm_eps, !opt_.reference);
        });
        linear(gate_up_.data(), xb_.data(), mats_[m].gate_up, n);
        rows([&](int i) {
            const float* g = &gate_up_[static_cast<std::size_t>(i) * 2 * Fw];
            detail::swiglu(&hidden_mlp_[static_cast<std::size_t>(i) * Fw], g, g + Fw, Fw, !opt_.reference);
        });
        linear(xb_.data(), hidden_mlp_.data(), mats_[m].down, n);
        add_into_x();
    }

    /// The residual connection: x_ += xb_ (a sub-layer's output).
    void add_into_x() {
        for (std::size_t j = 0; j < x_.size(); ++j) x_[j] += xb_[j];
    }

    void linear(float* y, const float* x, const detail::Matrix& w, int n) { detail::linear(opt_, y, x, w, n); }

    /// f(i) for every node i of this forward: the steps between products, per row (row_ops.hpp).
    template <class F>
    void rows(F&& f) {
        detail::for_rows(*opt_.pool, static_cast<int>(positions_.size()), !opt_.reference, f);
    }

    /// out (hd) = softmax(q·k_r / √hd) · v_r over rows r = row(0..len-1) of k and v, whose rows are
    /// `stride` floats apart; zero when len = 0 (a query that sees nothing). s: len scores of scratch.
    template <class RowOf>
    static void attend_rows(float* out, const float* q, const float* k, const float* v, std::size_t stride, int hd,
                            int len, RowOf row, float* s) {
        std::fill(out, out + hd, 0.0f);
        if (len == 0) return;
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        float mx = -INFINITY;
        for (int r = 0; r < len; ++r) mx = std::max(mx, s[r] = dot(q, k + row(r) * stride, hd) * scale);
        float sum = 0.0f;
        for (int r = 0; r < len; ++r) sum += (s[r] = std::exp(s[r] - mx));
        for (int r = 0; r < len; ++r) axpy(out, s[r] / sum, v + row(r) * stride, hd);
    }

    /// att_ (n, H*hd): each node over the committed rows and its visible tree rows (CpuModel::attend).
    void self_attend(const float* kc, const float* vc, const std::vector<std::vector<int>>& visible) {
        const Config& c = cfg_.draft;
        const int n = static_cast<int>(visible.size()), H = c.num_attention_heads, hd = c.head_dim();
        const int group = H / c.num_key_value_heads, T = cache_len_;
        std::size_t width = 0;  // the longest row list: T + the deepest node's depth + 1
        for (const auto& v : visible) width = std::max(width, static_cast<std::size_t>(T) + v.size());
        scores_.resize(static_cast<std::size_t>(n) * H * width);
        const auto task = [&](int t) {
            const int i = t / H, h = t % H, kvh = h / group;
            const auto row = [&](int r) { return static_cast<std::size_t>(r < T ? r : T + visible[i][r - T]); };
            attend_rows(&att_[static_cast<std::size_t>(t) * hd], &q_[static_cast<std::size_t>(t) * hd], kc + kvh * hd,
                        vc + kvh * hd, c.kv_dim(), hd, T + static_cast<int>(visible[i].size()), row,
                        &scores_[static_cast<std::size_t>(t) * width]);
        };
        run(n * H, task);
    }

    /// cross_att_ (n, h*d_k): GLIDE's cross-attention of each node over the target rows it may see,
    /// [0, min(position, kv.len)) — never its own position's row or later, never an uncommitted row.
    void cross_attend(const KvView& kv) {
        const int n = static_cast<int>(positions_.size()), Hc = cfg_.glide_cross_heads, hdc = cfg_.glide_cross_head_dim;
        const int group = Hc / cfg_.glide_target_kv_heads;
        const std::size_t stride = static_cast<std::size_t>(kv.n_kv_heads) * kv.head_dim;
        scores_.resize(static_cast<std::size_t>(n) * Hc * std::max(kv.len, 1));
        const auto task = [&](int t) {
            const int i = t / Hc, h = t % Hc, kvh = h / group, len = std::min(positions_[i], kv.len);
            attend_rows(&cross_att_[static_cast<std::size_t>(t) * hdc], &cross_q_[static_cast<std::size_t>(t) * hdc],
                        kv.k.data() + kvh * hdc, kv.v.data() + kvh * hdc, stride, hdc, len,
                        [](int r) { return static_cast<std::size_t>(r); },
                        &scores_[static_cast<std::size_t>(t) * std::max(kv.len, 1)]);
        };
        run(n * Hc, task);
    }

    template <class F>
    void run(int n_tasks, F&& task) {
        if (opt_.reference) {
            for (int t = 0; t < n_tasks; ++t) task(t);
        } else {
            opt_.pool->parallel_for(n_tasks, task);
        }
    }

    /// Fuses q|k|v and gate|up (fewer, larger products, as CpuModel), in the format the options ask for.
    void prepare_matrices() {
        const Config& c = cfg_.draft;
        const int D = c.hidden_size, Fw = c.intermediate_size, qd = c.num_attention_heads * c.head_dim();
        const int kvd = c.kv_dim(), cq = cfg_.cross_dim();
        const auto make = detail::matrix_maker(opt_);
        fused_.resize(2 * static_cast<std::size_t>(c.num_hidden_layers));
        mats_.resize(c.num_hidden_layers);
        for (int m = 0; m < c.num_hidden_layers; ++m) {
            const GlideLayer<float>& lw = w_.layers[m];
            mats_[m].qkv = make(&fused_[2 * m], {&lw.wq, &lw.wk, &lw.wv}, qd + 2 * kvd, D);
            mats_[m].wo = make(nullptr, {&lw.wo}, D, qd);
            if (cfg_.glide_cross_attention) {
                mats_[m].cross_q = make(nullptr, {&lw.cross_wq}, cq, D);
                mats_[m].cross_o = make(nullptr, {&lw.cross_wo}, D, cq);
            }
            mats_[m].gate_up = make(&fused_[2 * m + 1], {&lw.w_gate, &lw.w_up}, 2 * Fw, D);
            mats_[m].down = make(nullptr, {&lw.w_down}, D, Fw);
        }
        head_ = make(nullptr, {&w_.output_matrix()}, c.vocab_size, D);
        inv_freq_ = rope_inverse_frequencies(c);  // rope_scaling applied, as CpuModel
        // The cross queries rotate like the target's keys: its head_dim, RoPE base and scaling.
        if (cfg_.glide_cross_attention) {
            cross_inv_freq_ = rope_inverse_frequencies(cfg_.cross_rope());
            cross_attention_factor_ = rope_attention_factor(cfg_.cross_rope());  // YaRN's cos/sin factor, else 1
        }
    }

    struct LayerMatrices {
        detail::Matrix qkv, wo, cross_q, cross_o, gate_up, down;
    };

    GlideConfig cfg_;
    GlideWeights w_;
    const Target* target_;
    ModelOptions opt_;
    std::unique_ptr<ThreadPool> own_pool_;    // when the caller gave none
    std::vector<LayerMatrices> mats_;         // per layer, views into w_ or fused_ (or bf16 copies)
    std::vector<std::vector<float>> fused_;   // per layer: (H*hd + 2*Hkv*hd, D) and (2F, D) in float32
    detail::Matrix head_;                     // (V, D)
    std::vector<double> inv_freq_;            // (hd/2) the drafter's RoPE frequencies
    std::vector<double> cross_inv_freq_;      // (d_k/2) the target's
    double cross_attention_factor_ = 1.0;     // the target's cos/sin factor (YaRN), as its keys carry it
    int cache_len_ = 0;      // T
    int n_computed_ = 0;     // nodes of the current tree whose KV rows sit after the committed ones
    detail::KvCache kv_;                    // (N_D, C, Hkv*hd) keys and values
    std::vector<int> positions_;            // (n) absolute position of each node of this forward
    std::vector<float> rope_cs_;            // (n, hd/2, 2)
    std::vector<float> cross_cs_;           // (n, d_k/2, 2)
    std::vector<float> x_, xb_;             // (n, D)
    std::vector<float> qkv_;                // (n, H*hd + 2*Hkv*hd)
    std::vector<float> q_, att_;            // (n, H*hd)
    std::vector<float> cross_q_, cross_att_;  // (n, h*d_k)
    std::vector<float> scores_;             // (n*heads, rows) per (node, head) attention scores
    std::vector<float> gate_up_;            // (n, 2F)
    std::vector<float> hidden_mlp_;         // (n, F)
    std::vector<float> logits_;             // (n, V)
};

static_assert(LanguageModel<GlideModel<CpuModel>>);
static_assert(Proposer<ModelProposer<GlideModel<CpuModel>>>);  // the plain drafter wrapper drives it

}  // namespace specdec
