// specdec/detail/io/checkpoint.hpp — models on disk in HuggingFace's layout: config.json + model.safetensors.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../model/config.hpp"
#include "../core/compiled.hpp"
#include "../core/error.hpp"
#include "file_bytes.hpp"
#include "json.hpp"
#include "mapped_matrix.hpp"
#include "safetensors.hpp"
#include "checkpoint_tensors.hpp"
#include "../model/weights.hpp"
#if SPECDEC_BODIES  // only the bodies read and write files
#include <fstream>
#include <sstream>
#endif

namespace specdec {

// ---- declarations (the bodies follow) ----------------------------------------------------------------

enum class SaveFormat { kF32, kBF16 };

/// A model folder as HF writes it.
struct Checkpoint {
    Config config;
    Weights weights;
};

/// Reads a HF LlamaConfig (model_type llama, or mistral: a sliding window caps the context at its width,
/// Config::sliding_window), a Qwen2Config (model_type qwen2: Config::qkv_bias) or a Qwen3Config (qwen3:
/// Config::qk_norm, head_dim 128 unless given) without a sliding window: head_dim, and RoPE scaling of
/// rope_type linear, llama3 or yarn in either spelling (4.x's rope_theta + rope_scaling, 5.x's
/// rope_parameters; both present must agree), are honoured. Fields we cannot honour (Llama's biases,
/// Qwen's sliding window, experts, another activation, another rope_type) are errors naming the field, and
/// so is any key on none of the lists below (kConfigKeysRead, kConfigKeysInert, the Qwen and drafters'
/// lists): never silently ignored.
/// `also_known`: keys a caller's own loader reads beside this one (EAGLE's "bias").
SPECDEC_INLINE Config load_config(const std::filesystem::path& path, std::span<const std::string_view> also_known = {});
SPECDEC_INLINE void save_config(const Config& c, const std::filesystem::path& path, std::string_view torch_dtype = "float32");
/// Reads every Llama tensor of `c` by its HF name, checking shape against the config (the layer count
/// first, then each tensor's shape before its memory is allocated).
SPECDEC_INLINE Weights load_weights(const std::filesystem::path& path, const Config& c);
/// As above from a checkpoint's tensors (one file or an index's shards: CheckpointTensors::open_folder).
SPECDEC_INLINE Weights load_weights(const CheckpointTensors& tensors, const Config& c);
/// As above, the matrices left in the mapped files (LoadOptions::defer_matrices): only the embedding and
/// the norms are read; Weights::deferred reads the rest in place when a CpuModel packs it, and keeps
/// `tensors` open until then.
SPECDEC_INLINE Weights load_weights_deferred(std::shared_ptr<const CheckpointTensors> tensors, const Config& c);
/// Writes `w` under HF names, float32 or bfloat16.
SPECDEC_INLINE void save_weights(const Weights& w, const Config& c, const std::filesystem::path& path,
                                 SaveFormat format = SaveFormat::kF32);
/// config.json + the weights of the folder `dir`: model.safetensors, or (without one) the shards
/// model.safetensors.index.json names (checkpoint_tensors.hpp). A GLIDE or EDD drafter's folder is
/// refused (load_glide_checkpoint, load_edd_checkpoint read them). With options.defer_matrices the
/// matrices stay in the mapped files for a CpuModel to pack (load_weights_deferred): inference only.
SPECDEC_INLINE Checkpoint load_checkpoint(const std::filesystem::path& dir, LoadOptions options = {});
SPECDEC_INLINE void save_checkpoint(const std::filesystem::path& dir, const Config& c, const Weights& w,
                                    SaveFormat format = SaveFormat::kBF16);
/// As save_checkpoint, in HF's sharded layout: model-0000i-of-0000n.safetensors, each holding whole
/// tensors in checkpoint order up to `max_shard_bytes` (a larger tensor gets a shard alone), and
/// model.safetensors.index.json mapping every tensor to its shard (as save_pretrained(max_shard_size)).
SPECDEC_INLINE void save_sharded_checkpoint(const std::filesystem::path& dir, const Config& c, const Weights& w,
                                            SaveFormat format, std::int64_t max_shard_bytes);

namespace detail {

/// config.json's rope_scaling object (not null) as a RopeScaling; unknown rope_type refused by name.
SPECDEC_INLINE RopeScaling read_rope_scaling(const json::Value& v, const std::string& file, int context = 0);
/// A rope object of config.json: transformers 4.x's `rope_scaling`, or transformers 5's `rope_parameters`,
/// which also carries rope_theta (`has_theta` says whether it does).
struct RopeRead {
    RopeScaling scaling;
    bool has_theta = false;
    double theta = 0.0;
};
/// `v` read as the config field `field` ("rope_scaling" or "rope_parameters"); an unknown rope_type, or a
/// member the rope_type does not read, is refused by name.
SPECDEC_INLINE RopeRead read_rope_object(const json::Value& v, const std::string& file, const std::string& field,
                                         int context = 0);
SPECDEC_INLINE bool same_rope_scaling(const RopeScaling& a, const RopeScaling& b);
SPECDEC_INLINE std::string rope_scaling_string(const RopeScaling& s);
/// `s` as config.json's rope_scaling object (transformers 4.x spelling), null when unscaled; every
/// parameter written, YaRN's attention factor as resolved. A table of factors has no such spelling:
/// the caller refuses or writes it its own way.
SPECDEC_INLINE json::Value rope_scaling_json(const RopeScaling& s);

// The keys of config.json, each in one list: read by load_config; known to leave the forward unchanged;
// or read by one of this library's drafter loaders beside load_config. Any other key is refused by name
// (require_known_config_keys): a key ignored in silence would load a transformers 5 config
// (rope_parameters) with the wrong rotation. docs/formats.md lists the same keys.
inline constexpr std::string_view kConfigKeysRead[] = {
    "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "vocab_size", "max_position_embeddings", "rope_theta", "rope_scaling", "rope_parameters", "rms_norm_eps",
    "tie_word_embeddings", "model_type", "partial_alignment", "hidden_act", "attention_bias", "mlp_bias",
    "sliding_window", "num_local_experts", "num_experts", "head_dim", "rope_interleaved"};
inline constexpr std::string_view kConfigKeysInert[] = {
    "architectures",         // the class name; model_type and the tensors say what runs
    "_name_or_path",         // provenance
    "transformers_version",  // provenance
    "torch_dtype", "dtype",  // the storage type (4.x, 5.x spelling); each tensor's dtype is read from the file
    "bos_token_id", "eos_token_id", "pad_token_id",  // token ids for generation and padding, not the forward
    "use_cache",              // whether generate keeps a KV cache: the same logits either way
    "initializer_range",      // the std of a fresh initialisation; weights are loaded
    "attention_dropout",      // dropout is off at inference
    "pretraining_tp",         // transformers <= 4.x splits each matmul into this many slices: the same sums
    "_attn_implementation_autoset",  // transformers 4.48-4.49's note of which attention kernel it chose
    "is_llama_config",               // nanotron's export flag (SmolLM2); LlamaConfig has no such field
    "transformers.js_config",        // transformers.js's settings (dtype per file) for running it in a browser
};
/// Qwen2Config's and Qwen3Config's sliding-window keys (transformers, configuration_qwen2.py and
/// configuration_qwen3.py): read for model_type qwen2 and qwen3 only. With use_sliding_window false
/// (required) transformers sets sliding_window to None and derives every layer_types entry as
/// "full_attention", so sliding_window and max_window_layers are inert; a layer_types given explicitly
/// must say "full_attention" for every layer.
/// use_mrope (Qwen2.5's and its distillations' configs say false; Qwen2Config has no such field) must be
/// false: true is Qwen2-VL's multimodal rotation.
inline constexpr std::string_view kQwenConfigKeys[] = {"use_sliding_window", "max_window_layers", "layer_types", "use_mrope"};
inline constexpr std::string_view kGlideConfigKeys[] = {"glide_cross_attention",  "glide_target_layers",
                                                        "glide_cross_heads",      "glide_cross_head_dim",
                                                        "glide_target_kv_heads",  "glide_target_rope_theta",
                                                        "glide_target_rope_scaling"};
inline constexpr std::string_view kEddConfigKeys[] = {"edd_target_layer"};
/// EAGLE's own key in the config.json of an EAGLE-layout drafter (model_type llama): whether fc has a
/// bias (EAGLE's ea_model.py reads it); load_eagle_layout passes it to load_config.
inline constexpr std::string_view kEagleLayoutConfigKeys[] = {"bias"};
inline constexpr std::string_view kFeatureDrafterConfigKeys[] = {"connector", "sampler_intermediate_size",
                                                                 "target_config_hash", "layout"};
/// Refuses, naming file, key and value, a key of config.json's object `root` that is in none of the lists
/// above (the drafter lists count for their model_type only).
SPECDEC_INLINE void require_known_config_keys(const json::Value& root, const std::string& file, std::string_view model_type,
                                              std::span<const std::string_view> also_known = {});
/// The HF shape of a Llama tensor, from its name: matrices are (out_features, in_features).
SPECDEC_INLINE std::vector<std::int64_t> hf_shape(const std::string& name, const Config& c);
/// t = the tensor `name` of `file`, whose shape must be `want`; float32, bfloat16 and float16 files
/// load (converted to float32). `hint` follows the message when the tensor is missing.
SPECDEC_INLINE void read_tensor(const SafetensorsFile& file, const std::filesystem::path& path, const std::string& name,
                                const std::vector<std::int64_t>& want, std::vector<float>& t, std::string_view who,
                                std::string_view hint = {});
SPECDEC_INLINE void read_tensor(const CheckpointTensors& file, const std::filesystem::path& path, const std::string& name,
                                const std::vector<std::int64_t>& want, std::vector<float>& t, std::string_view who,
                                std::string_view hint = {});
/// The decoder layers `file` holds tensors for: `count` distinct i among its names "model.layers.{i}.*",
/// the largest being `end` - 1 (both 0 when it has none).
struct LayersInFile {
    std::int64_t count = 0, end = 0;
};
SPECDEC_INLINE LayersInFile layers_in_file(std::span<const TensorInfo> tensors);
/// Checks the config's num_hidden_layers against the layers `file` holds, before anything is
/// allocated per layer (a config.json claiming 2^31 layers would otherwise ask for 463 GB of empty
/// layer records before the first missing tensor said what is wrong).
SPECDEC_INLINE void require_layers(std::span<const TensorInfo> tensors, const std::filesystem::path& path, int declared,
                                   std::string_view who);
inline void require_layers(const SafetensorsFile& file, const std::filesystem::path& path, int declared, std::string_view who) {
    require_layers(file.tensors(), path, declared, who);
}

/// Writes the tensors `each` visits — each(put) calls put(name, values, shape) in checkpoint order —
/// as one safetensors file; bfloat16 rounds to nearest even (reading back widens exactly).
template <class ForEach>
void write_tensors(const std::filesystem::path& path, SaveFormat format, ForEach&& each) {
    std::vector<TensorToWrite> tensors;
    std::deque<std::vector<bf16>> rounded;  // keeps bf16 copies alive (and in place) until written
    each([&](const std::string& name, const std::vector<float>& t, std::vector<std::int64_t> shape) {
        TensorToWrite out{name, DType::kF32, std::move(shape), std::as_bytes(std::span<const float>(t))};
        if (format == SaveFormat::kBF16) {
            auto& r = rounded.emplace_back(t.size());
            for (std::size_t i = 0; i < t.size(); ++i) r[i] = to_bf16(t[i]);
            out.dtype = DType::kBF16;
            out.bytes = std::as_bytes(std::span<const bf16>(r));
        }
        tensors.push_back(std::move(out));
    });
    write_safetensors(path, tensors, {{"format", "pt"}});
}

/// root[field] read by `read` (as_int, as_double, ...); a value of the wrong type (1e308 or "32" where
/// an integer belongs) fails naming the field, as an out-of-range value does, not only its line:column.
template <class Read>
auto read_field(const json::Value& root, const std::string& file, const char* field, std::string_view who, Read read) {
    const json::Value& v = root.at(field);
    try {
        return read(v);
    } catch (const error& e) {
        const std::string_view m = e.what();
        const std::size_t at = m.rfind(": expected ");
        fail(who, file + ": field '" + field + "'" + std::string(at == std::string_view::npos ? ": " : "") +
                      std::string(at == std::string_view::npos ? m : m.substr(at)) + " (at " +
                      std::to_string(v.location().line) + ":" + std::to_string(v.location().column) + ")");
    }
}
inline std::int64_t as_int(const json::Value& v) { return v.as_int(); }
inline double as_double(const json::Value& v) { return v.as_double(); }
inline bool as_bool(const json::Value& v) { return v.as_bool(); }
inline std::string as_string(const json::Value& v) { return v.as_string(); }

}  // namespace detail

#if SPECDEC_BODIES  // compiled once where a program links specdec::compiled

namespace detail {

SPECDEC_INLINE RopeRead read_rope_object(const json::Value& v, const std::string& file, const std::string& field,
                                         int context) {
    require(v.is_object(), "checkpoint",
            [&] { return file + ": field '" + field + "' is " + json_preview(v) + ", expected an object or null"; });
    const bool parameters = field == "rope_parameters";  // transformers 5's spelling also holds rope_theta
    // transformers >= 4.45 writes rope_type; older configs (and linear scaling) wrote type.
    const json::Value* kind = v.find("rope_type");
    std::string kind_field = field + ".rope_type";
    if (kind == nullptr) {
        kind = v.find("type");
        kind_field = field + ".type";
    }
    require(kind != nullptr && kind->is_string(), "checkpoint",
            [&] { return file + ": field '" + field + "' has no string 'rope_type' (or 'type')"; });
    const std::string type = kind->as_string();
    const auto number = [&](const char* name) {
        const json::Value* f = v.find(name);
        require(f != nullptr, "checkpoint",
                [&] { return file + ": field '" + field + "." + name + "' is missing (rope_type '" + type + "' needs it)"; });
        require(f->is_number() && std::isfinite(f->as_double()), "checkpoint", [&] {
            return file + ": field '" + field + "." + name + "' is " + json_preview(*f) + ", expected a number";
        });
        return f->as_double();
    };
    // llama3's and yarn's pretraining context, a positive integer; absent, the model's context where the caller
    // gives it (transformers 5's standardize_rope_params: setdefault to max_position_embeddings).
    const auto original_context = [&] {
        if (context > 0 && v.find("original_max_position_embeddings") == nullptr) return context;
        const double original = number("original_max_position_embeddings");
        require(original >= 1 && original < 2147483648.0 && original == std::floor(original), "checkpoint", [&] {
            return file + ": field '" + field + ".original_max_position_embeddings' = " +
                   json::dump(*v.find("original_max_position_embeddings")) + " is not a positive integer";
        });
        return static_cast<int>(original);
    };
    RopeRead r;
    if (parameters && v.find("rope_theta") != nullptr) {
        r.has_theta = true;
        r.theta = number("rope_theta");
    }
    if (type == "default") {
        // no scaling
    } else if (type == "linear") {
        r.scaling.type = RopeScalingType::kLinear;
        r.scaling.factor = static_cast<float>(number("factor"));
    } else if (type == "llama3") {
        r.scaling.type = RopeScalingType::kLlama3;
        r.scaling.factor = static_cast<float>(number("factor"));
        r.scaling.low_freq_factor = static_cast<float>(number("low_freq_factor"));
        r.scaling.high_freq_factor = static_cast<float>(number("high_freq_factor"));
        r.scaling.original_max_position_embeddings = original_context();
    } else if (type == "yarn") {
        // transformers' _compute_yarn_parameters: beta_fast / beta_slow null or 0 mean 32 / 1 (it reads
        // `get(...) or 32`); attention_factor null means mscale / mscale_all_dim's ratio where both are
        // given and non-zero, else 0.1 ln(factor) + 1. The factor is resolved here, once.
        r.scaling.type = RopeScalingType::kYarn;
        r.scaling.factor = static_cast<float>(number("factor"));
        r.scaling.original_max_position_embeddings = original_context();
        const auto optional = [&](const char* name, double otherwise) {
            const json::Value* f = v.find(name);
            return f == nullptr || f->is_null() ? otherwise : number(name);
        };
        const auto nonzero_or = [&](const char* name, double otherwise) {
            const double x = optional(name, otherwise);
            return x == 0.0 ? otherwise : x;
        };
        r.scaling.beta_fast = static_cast<float>(nonzero_or("beta_fast", 32.0));
        r.scaling.beta_slow = static_cast<float>(nonzero_or("beta_slow", 1.0));
        const double mscale = optional("mscale", 0.0), mscale_all_dim = optional("mscale_all_dim", 0.0);
        const double inferred = mscale != 0.0 && mscale_all_dim != 0.0
                                    ? yarn_mscale(r.scaling.factor, mscale) / yarn_mscale(r.scaling.factor, mscale_all_dim)
                                    : yarn_mscale(r.scaling.factor);
        r.scaling.attention_factor = static_cast<float>(optional("attention_factor", inferred));
        if (const json::Value* t = v.find("truncate"); t != nullptr && !t->is_null()) {
            require(t->is_bool(), "checkpoint", [&] {
                return file + ": field '" + field + ".truncate' is " + json_preview(*t) + ", expected true or false";
            });
            r.scaling.truncate = t->as_bool();
        }
    } else {
        fail("checkpoint", file + ": field '" + kind_field + "' = '" + type +
                               "' is not supported (default, linear, llama3 or yarn; dynamic, longrope... are not)");
    }
    // A member this rope_type does not read would change the rotation in transformers and not here.
    const auto read = [&](std::string_view key) {
        if (key == "rope_type" || key == "type") return true;
        if (key == "rope_theta") return parameters;
        if (key == "factor") return r.scaling.type != RopeScalingType::kNone;
        if (r.scaling.type == RopeScalingType::kYarn)
            return key == "original_max_position_embeddings" || key == "beta_fast" || key == "beta_slow" ||
                   key == "attention_factor" || key == "mscale" || key == "mscale_all_dim" || key == "truncate";
        return r.scaling.type == RopeScalingType::kLlama3 &&
               (key == "low_freq_factor" || key == "high_freq_factor" || key == "original_max_position_embeddings");
    };
    for (const json::Member& m : v.as_object())
        require(read(m.key), "checkpoint", [&] {
            return file + ": field '" + field + "." + m.key + "' (" + json_preview(m.value) +
                   ") is not read for rope_type '" + type + "' (it would change the rotation: refused, not ignored)";
        });
    try {
        validate_rope_scaling(r.scaling);
    } catch (const error& e) {
        fail("checkpoint", file + ": " + e.what());
    }
    return r;
}

SPECDEC_INLINE RopeScaling read_rope_scaling(const json::Value& v, const std::string& file, int context) {
    return read_rope_object(v, file, "rope_scaling", context).scaling;
}

SPECDEC_INLINE bool same_rope_scaling(const RopeScaling& a, const RopeScaling& b) {
    if (a.type != b.type) return false;
    if (a.type == RopeScalingType::kNone) return true;
    if (a.type == RopeScalingType::kFactors) return a.factors == b.factors;
    if (a.factor != b.factor) return false;
    if (a.type == RopeScalingType::kYarn)
        return a.original_max_position_embeddings == b.original_max_position_embeddings && a.beta_fast == b.beta_fast &&
               a.beta_slow == b.beta_slow && a.attention_factor == b.attention_factor && a.truncate == b.truncate;
    return a.type == RopeScalingType::kLinear ||
           (a.low_freq_factor == b.low_freq_factor && a.high_freq_factor == b.high_freq_factor &&
            a.original_max_position_embeddings == b.original_max_position_embeddings);
}

SPECDEC_INLINE json::Value rope_scaling_json(const RopeScaling& s) {
    if (s.type == RopeScalingType::kNone) return json::Value(nullptr);
    require(s.type != RopeScalingType::kFactors, "checkpoint", [&] {
        return "rope_scaling_json: " + rope_scaling_string(s) + " has no rope_scaling spelling";
    });
    json::Object r;
    r.set("rope_type", s.type == RopeScalingType::kLinear ? "linear" : s.type == RopeScalingType::kYarn ? "yarn" : "llama3");
    r.set("factor", static_cast<double>(s.factor));
    if (s.type == RopeScalingType::kYarn) {
        r.set("original_max_position_embeddings", s.original_max_position_embeddings);
        r.set("beta_fast", static_cast<double>(s.beta_fast));
        r.set("beta_slow", static_cast<double>(s.beta_slow));
        r.set("attention_factor", static_cast<double>(s.attention_factor));
        r.set("truncate", s.truncate);
    }
    if (s.type == RopeScalingType::kLlama3) {
        r.set("low_freq_factor", static_cast<double>(s.low_freq_factor));
        r.set("high_freq_factor", static_cast<double>(s.high_freq_factor));
        r.set("original_max_position_embeddings", s.original_max_position_embeddings);
    }
    return json::Value(std::move(r));
}

SPECDEC_INLINE std::string rope_scaling_string(const RopeScaling& s) {
    if (s.type == RopeScalingType::kNone) return "no scaling";
    if (s.type == RopeScalingType::kFactors) {
        std::string out = "a table of " + std::to_string(s.factors.size()) + " per-dimension factors";
        if (!s.factors.empty()) {
            const auto [lo, hi] = std::minmax_element(s.factors.begin(), s.factors.end());
            out += " from " + std::to_string(*lo) + " to " + std::to_string(*hi);
        }
        return out + " (GGUF's rope_freqs.weight)";
    }
    if (s.type == RopeScalingType::kYarn)
        return "yarn, factor " + std::to_string(s.factor) + ", original_max_position_embeddings " +
               std::to_string(s.original_max_position_embeddings) + ", beta_fast " + std::to_string(s.beta_fast) +
               ", beta_slow " + std::to_string(s.beta_slow) + ", attention_factor " + std::to_string(s.attention_factor) +
               (s.truncate ? "" : ", truncate false");
    std::string out = (s.type == RopeScalingType::kLinear ? "linear, factor " : "llama3, factor ") + std::to_string(s.factor);
    if (s.type == RopeScalingType::kLlama3)
        out += ", low_freq_factor " + std::to_string(s.low_freq_factor) + ", high_freq_factor " +
               std::to_string(s.high_freq_factor) + ", original_max_position_embeddings " +
               std::to_string(s.original_max_position_embeddings);
    return out;
}

SPECDEC_INLINE void require_known_config_keys(const json::Value& root, const std::string& file, std::string_view model_type,
                                              std::span<const std::string_view> also_known) {
    const auto listed = [](std::span<const std::string_view> list, std::string_view key) {
        return std::find(list.begin(), list.end(), key) != list.end();
    };
    const auto mine = [&](std::string_view key) {  // the library's own drafters' keys, read by their loaders
        if (model_type == "edd") return listed(kEddConfigKeys, key);
        if (model_type == "qwen2" || model_type == "qwen3") return listed(kQwenConfigKeys, key);
        if (model_type == "eagle" || model_type == "fspad") return listed(kFeatureDrafterConfigKeys, key);
        // GLIDE's vanilla ablation is a Llama (model_type llama) that carries the glide_* keys, unread.
        if (model_type == "glide" || model_type == "llama") return listed(kGlideConfigKeys, key);
        return false;
    };
    for (const json::Member& m : root.as_object()) {
        if (listed(kConfigKeysRead, m.key) || listed(kConfigKeysInert, m.key) || mine(m.key) || listed(also_known, m.key))
            continue;
        fail("checkpoint", file + ": field '" + m.key + "' (" + json_preview(m.value) +
                               ") is not read by this Llama and not known to leave its forward unchanged: refused rather "
                               "than ignored (see docs/formats.md; if it does not change the model, remove it)");
    }
}

SPECDEC_INLINE std::vector<std::int64_t> hf_shape(const std::string& name, const Config& c) {
    const std::int64_t D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
    const std::int64_t q = c.q_dim(), kv = c.kv_dim();
    const auto ends = [&](std::string_view suffix) {
        return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends("q_norm.weight") || ends("k_norm.weight")) return {c.head_dim()};  // Qwen3: per head
    if (ends("q_proj.bias")) return {q};                                       // Qwen2
    if (ends("k_proj.bias") || ends("v_proj.bias")) return {kv};
    if (ends("norm.weight")) return {D};
    if (ends("embed_tokens.weight") || name == "lm_head.weight") return {V, D};
    if (ends("q_proj.weight")) return {q, D};
    if (ends("k_proj.weight") || ends("v_proj.weight")) return {kv, D};
    if (ends("o_proj.weight")) return {D, q};
    if (ends("gate_proj.weight") || ends("up_proj.weight")) return {F, D};
    if (ends("down_proj.weight")) {
        // The last layer's is (2D, F) under partial_alignment (FSPAD's PAD).
        const std::string last = "model.layers." + std::to_string(c.num_hidden_layers - 1) + ".";
        return {name.compare(0, last.size(), last) == 0 ? c.down_rows(c.num_hidden_layers - 1) : D, F};
    }
    fail("checkpoint", "no HF shape known for tensor '" + name + "'");
}


}  // namespace detail

// ---- config.json -------------------------------------------------------------------------------------

SPECDEC_INLINE Config load_config(const std::filesystem::path& path, std::span<const std::string_view> also_known) {
    const std::string file = path.string();
    const json::Value root = json::parse(detail::read_text_file(path, "checkpoint"), file);
    detail::require(root.is_object(), "checkpoint", [&] { return file + ": expected a JSON object"; });
    const auto integer = [&](const char* field) {
        const std::int64_t v = detail::read_field(root, file, field, "checkpoint", detail::as_int);
        detail::require(v > 0 && v < (std::int64_t{1} << 31), "checkpoint",
                        [&] { return file + ": field '" + field + "' = " + std::to_string(v) + " is out of range"; });
        return static_cast<int>(v);
    };
    Config c;
    c.hidden_size = integer("hidden_size");
    c.intermediate_size = integer("intermediate_size");
    c.num_hidden_layers = integer("num_hidden_layers");
    c.num_attention_heads = integer("num_attention_heads");
    c.vocab_size = integer("vocab_size");
    const auto field = [&](const char* name, auto read) { return detail::read_field(root, file, name, "checkpoint", read); };
    std::string model_type = "llama";  // what HF assumes of a LlamaConfig without one
    if (const auto* v = root.find("model_type"); v && !v->is_null()) model_type = field("model_type", detail::as_string);
    const bool hf_type = model_type == "llama" || model_type == "mistral" || model_type == "qwen2" || model_type == "qwen3";
    // num_key_value_heads null means one KV head per query head in every class; left out, it takes the class's
    // default: None (the same) for Llama, 8 for Mistral, 32 for Qwen2 and Qwen3 (their configuration_*.py).
    const auto* kv_heads = root.find("num_key_value_heads");
    if (kv_heads != nullptr && !kv_heads->is_null()) {
        c.num_key_value_heads = integer("num_key_value_heads");
    } else if (kv_heads == nullptr && (model_type == "mistral" || model_type == "qwen2" || model_type == "qwen3")) {
        c.num_key_value_heads = model_type == "mistral" ? 8 : 32;
        detail::require(c.num_attention_heads % c.num_key_value_heads == 0, "checkpoint", [&] {
            return file + ": field 'num_key_value_heads' is missing, and " + model_type + "'s default, " +
                   std::to_string(c.num_key_value_heads) + ", does not divide num_attention_heads " +
                   std::to_string(c.num_attention_heads) + "; hint: name the model's number of KV heads";
        });
    } else {
        c.num_key_value_heads = c.num_attention_heads;
    }
    // A key the folder leaves out takes its config class's default (transformers' configuration_*.py):
    // the context 2048 (Llama), 131072 (Mistral), 32768 (Qwen2, Qwen3); rms_norm_eps 1e-6 in all four.
    // This library's own drafters always write both.
    if (root.find("max_position_embeddings") != nullptr || !hf_type)
        c.max_position_embeddings = integer("max_position_embeddings");
    else
        c.max_position_embeddings = model_type == "llama" ? 2048 : model_type == "mistral" ? 131072 : 32768;
    const int declared_context = c.max_position_embeddings;  // before a sliding window caps it
    if (root.find("rope_theta")) c.rope_theta = static_cast<float>(field("rope_theta", detail::as_double));
    if (root.find("rms_norm_eps")) c.rms_norm_eps = static_cast<float>(field("rms_norm_eps", detail::as_double));
    else if (hf_type) c.rms_norm_eps = 1e-6f;
    if (root.find("tie_word_embeddings")) c.tie_word_embeddings = field("tie_word_embeddings", detail::as_bool);
    // What this Llama cannot run is refused by the field that says so, before any weight is read:
    // loading it anyway would decode garbage without a word.
    if (const auto* v = root.find("model_type"); v && !v->is_null()) {
        const std::string& type = model_type;
        // edd, glide, eagle and fspad are this library's own Llama-shaped drafters (their loaders read the rest).
        const bool known = type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3" || type == "edd" ||
                           type == "glide" || type == "eagle" || type == "fspad";
        detail::require(known, "checkpoint", [&] {
            return file + ": model_type '" + type +
                   "' is not supported (llama, mistral, qwen2, qwen3 without use_sliding_window)";
        });
    }
    const bool qwen = model_type == "qwen2" || model_type == "qwen3";
    c.qkv_bias = model_type == "qwen2";  // modeling_qwen2.py: q/k/v_proj always have biases, o_proj none
    c.qk_norm = model_type == "qwen3";   // modeling_qwen3.py: q_norm and k_norm on every layer
    if (root.find("partial_alignment")) c.partial_alignment = field("partial_alignment", detail::as_bool);
    if (root.find("hidden_act")) {
        const std::string act = field("hidden_act", detail::as_string);  // transformers' ACT2CLS: swish is SiLU
        detail::require(act == "silu" || act == "swish", "checkpoint",
                        [&] { return file + ": hidden_act '" + act + "' is not supported (only silu, alias swish)"; });
    }
    // SmolLM2's configs say rope_interleaved false: rotate-half, as transformers' Llama always rotates.
    if (root.find("rope_interleaved"))
        detail::require(!field("rope_interleaved", detail::as_bool), "checkpoint", [&] {
            return file + ": rope_interleaved = true is not supported (RoPE over adjacent pairs; the Llama rotates "
                          "the two halves of each head, as transformers does)";
        });
    for (const char* flag : {"attention_bias", "mlp_bias"})
        if (root.find(flag))
            detail::require(!field(flag, detail::as_bool), "checkpoint", [&] {
                const bool mlp = std::string_view(flag) == "mlp_bias";
                return file + ": " + flag + " = true is not supported (" +
                       (mlp                     ? "biases on the MLP's projections"
                        : model_type == "qwen2" ? "an o_proj bias: Qwen2's q/k/v biases are always read, o_proj has none"
                                                : "biases on q_proj, k_proj, v_proj and o_proj") +
                       ")";
            });
    if (qwen) {
        // Qwen2Config / Qwen3Config: sliding_window is dropped unless use_sliding_window (and HF's
        // Qwen2.5 and Qwen3 configs say false); layer_types derived from it are then all full attention.
        if (root.find("use_sliding_window"))
            detail::require(!field("use_sliding_window", detail::as_bool), "checkpoint", [&] {
                return file + ": use_sliding_window = true is not supported (layers from max_window_layers on would "
                              "attend to the last sliding_window tokens only; full attention only)";
            });
        if (root.find("max_window_layers")) (void)field("max_window_layers", detail::as_int);  // inert, but a number
        if (root.find("use_mrope"))
            detail::require(!field("use_mrope", detail::as_bool), "checkpoint", [&] {
                return file + ": use_mrope = true is not supported (Qwen2-VL's multimodal rotary sections)";
            });
        if (const auto* v = root.find("layer_types"); v && !v->is_null()) {
            detail::require(v->is_array() && static_cast<std::int64_t>(v->as_array().size()) == c.num_hidden_layers,
                            "checkpoint", [&] {
                                return file + ": field 'layer_types' is " + detail::json_preview(*v) + ", expected an array of " +
                                       std::to_string(c.num_hidden_layers) + " strings (one per layer)";
                            });
            // Without use_sliding_window the window is None, so a "sliding_attention" layer attends to
            // everything too (modeling_qwen3.py reads config.sliding_window for those layers).
            for (std::size_t i = 0; i < v->as_array().size(); ++i) {
                const json::Value& t = v->as_array()[i];
                detail::require(t.is_string() && (t.as_string() == "full_attention" || t.as_string() == "sliding_attention"),
                                "checkpoint", [&] {
                                    return file + ": field 'layer_types[" + std::to_string(i) + "]' is " +
                                           detail::json_preview(t) + ", expected \"full_attention\" or \"sliding_attention\"";
                                });
            }
        }
    }
    // MistralConfig's sliding_window defaults to 4096: a Mistral folder without the key has the window.
    if (model_type == "mistral" && root.find("sliding_window") == nullptr) {
        c.sliding_window = 4096;
        c.max_position_embeddings = std::min(c.max_position_embeddings, c.sliding_window);
    }
    if (const auto* v = root.find("sliding_window"); !qwen && v && !v->is_null()) {
        // Mistral v0.1 attends to the last sliding_window positions (4096). Within that many positions this
        // is every earlier one: the model runs exactly, its context capped at the window. LlamaConfig has
        // no such field: a llama folder that names one was not written by transformers, and is refused.
        detail::require(model_type == "mistral", "checkpoint", [&] {
            return file + ": sliding_window = " + json::dump(*v) + " is not supported for model_type '" + model_type +
                   "' (only Mistral's is read; full attention otherwise: sliding_window must be null)";
        });
        const std::int64_t w = field("sliding_window", detail::as_int);
        detail::require(w > 0 && w < (std::int64_t{1} << 31), "checkpoint", [&] {
            return file + ": field 'sliding_window' = " + std::to_string(w) + " must be a positive integer (or null)";
        });
        c.sliding_window = static_cast<int>(w);
        c.max_position_embeddings = std::min(c.max_position_embeddings, c.sliding_window);
    }
    for (const char* experts : {"num_local_experts", "num_experts"})
        if (const auto* v = root.find(experts); v && !v->is_null() && !(v->is_integer() && v->as_int() <= 1))
            detail::fail("checkpoint", file + ": " + experts + " = " + json::dump(*v) +
                                           " is not supported (a mixture of experts; only dense Llama MLPs run)");
    // transformers 5 writes rope_parameters {rope_theta, rope_type, factor, ...} where 4.x wrote
    // rope_theta + rope_scaling; both spellings read, and where a file holds both they must agree.
    // A null rope_scaling is "not given", as transformers reads it.
    const auto* scaling = root.find("rope_scaling");
    const auto* parameters = root.find("rope_parameters");
    if (scaling && !scaling->is_null()) c.rope_scaling = detail::read_rope_scaling(*scaling, file, declared_context);
    if (parameters && !parameters->is_null()) {
        const detail::RopeRead r = detail::read_rope_object(*parameters, file, "rope_parameters", declared_context);
        if (scaling && !scaling->is_null())
            detail::require(detail::same_rope_scaling(r.scaling, c.rope_scaling), "checkpoint", [&] {
                return file + ": fields 'rope_scaling' (" + detail::rope_scaling_string(c.rope_scaling) +
                       ") and 'rope_parameters' (" + detail::rope_scaling_string(r.scaling) +
                       ") disagree; keep one spelling";
            });
        c.rope_scaling = r.scaling;
        if (r.has_theta) {
            const float theta = static_cast<float>(r.theta);
            detail::require(!root.find("rope_theta") || c.rope_theta == theta, "checkpoint", [&] {
                return file + ": fields 'rope_theta' = " + json::dump(*root.find("rope_theta")) +
                       " and 'rope_parameters.rope_theta' = " + json::dump(*parameters->find("rope_theta")) +
                       " disagree; keep one spelling";
            });
            c.rope_theta = theta;
        }
    }
    // Qwen3Config's head_dim defaults to 128, not hidden_size / num_attention_heads.
    if (const auto* v = root.find("head_dim"); (v && !v->is_null()) || model_type == "qwen3") {
        const std::int64_t head_dim = v && !v->is_null() ? field("head_dim", detail::as_int) : 128;
        detail::require(head_dim > 0 && head_dim < (std::int64_t{1} << 20), "checkpoint",
                        [&] { return file + ": field 'head_dim' = " + std::to_string(head_dim) + " is out of range"; });
        if (head_dim * c.num_attention_heads != c.hidden_size || c.hidden_size % c.num_attention_heads != 0)
            c.attention_head_dim = static_cast<int>(head_dim);  // else the default already says it
    }
    detail::require_known_config_keys(root, file, model_type, also_known);  // after the refusals that name a reason
    try {
        c.validate();
    } catch (const error& e) {
        detail::fail("checkpoint", file + ": " + e.what());
    }
    return c;
}

SPECDEC_INLINE void save_config(const Config& c, const std::filesystem::path& path, std::string_view torch_dtype) {
    json::Object o;
    // The block decides the HF class: Llama's, Qwen2's (q/k/v biases) or Qwen3's (q/k norms).
    // A Llama block with a sliding window is Mistral's (LlamaConfig has no sliding_window).
    const bool mistral = c.sliding_window > 0;
    const char* type = c.qkv_bias ? "qwen2" : c.qk_norm ? "qwen3" : mistral ? "mistral" : "llama";
    o.set("architectures", json::Array{json::Value(c.qkv_bias  ? "Qwen2ForCausalLM"
                                                   : c.qk_norm ? "Qwen3ForCausalLM"
                                                   : mistral   ? "MistralForCausalLM"
                                                               : "LlamaForCausalLM")});
    o.set("model_type", type);
    o.set("hidden_act", "silu");
    o.set("hidden_size", c.hidden_size);
    o.set("intermediate_size", c.intermediate_size);
    o.set("num_hidden_layers", c.num_hidden_layers);
    o.set("num_attention_heads", c.num_attention_heads);
    o.set("num_key_value_heads", c.num_key_value_heads);
    o.set("vocab_size", c.vocab_size);
    o.set("max_position_embeddings", c.max_position_embeddings);
    o.set("rope_theta", static_cast<double>(c.rope_theta));
    o.set("rms_norm_eps", static_cast<double>(c.rms_norm_eps));
    o.set("tie_word_embeddings", c.tie_word_embeddings);
    if (c.partial_alignment) o.set("partial_alignment", true);  // FSPAD's PAD: the last down_proj is (2D, F)
    if (!c.qkv_bias) o.set("attention_bias", false);  // Qwen2Config has no such field (its biases are fixed)
    if (c.llama_block()) o.set("mlp_bias", false);
    if (mistral) o.set("sliding_window", c.sliding_window);
    if (c.qkv_bias || c.qk_norm) {
        o.set("use_sliding_window", false);
        o.set("sliding_window", nullptr);
    }
    // Qwen3's default head_dim is 128: write it always there.
    if (c.attention_head_dim > 0 || c.qk_norm) o.set("head_dim", c.head_dim());
    const RopeScaling& rs = c.rope_scaling;
    // A table of factors (from a GGUF's rope_freqs.weight) has no config.json field: transformers would
    // load the folder unscaled. Refused before config.json is written.
    detail::require(rs.type != RopeScalingType::kFactors, "checkpoint", [&] {
        return path.string() + ": rope_scaling is " + detail::rope_scaling_string(rs) +
               ", which config.json cannot hold (its rope_scaling names a rope_type and parameters); save the model "
               "with save_gguf, which writes the table as rope_freqs.weight";
    });
    o.set("rope_scaling", detail::rope_scaling_json(rs));
    o.set("torch_dtype", std::string(torch_dtype));
    std::ofstream out(path, std::ios::binary);
    detail::require(static_cast<bool>(out), "checkpoint", [&] { return path.string() + ": cannot write"; });
    out << json::dump(json::Value(std::move(o)), 2) << "\n";
}

// ---- model.safetensors -------------------------------------------------------------------------------


namespace detail {

/// read_tensor from a single file or a checkpoint's shards (both have find, get and read_floats).
/// The tensor `name` of `file`, checked to have the shape `want` the config implies.
template <class Source>
const TensorInfo& find_tensor(const Source& file, const std::filesystem::path& path, const std::string& name,
                              const std::vector<std::int64_t>& want, std::string_view who, std::string_view hint = {}) {
    const TensorInfo* info = file.find(name);
    if (info == nullptr) {
        require(hint.empty(), who, [&] { return path.string() + ": tensor '" + name + "' is missing" + std::string(hint); });
        info = &file.get(name);  // fails naming the closest names the file has
    }
    require(info->shape == want, who, [&] {
        return path.string() + ": tensor '" + name + "' has shape " + shape_string(info->shape) + ", the config implies " +
               shape_string(want);
    });
    return *info;
}

template <class Source>
void read_tensor_from(const Source& file, const std::filesystem::path& path, const std::string& name,
                      const std::vector<std::int64_t>& want, std::vector<float>& t, std::string_view who,
                      std::string_view hint) {
    const TensorInfo* info = &find_tensor(file, path, name, want, who, hint);
    std::size_t n = 1;
    for (std::int64_t d : want) n *= static_cast<std::size_t>(d);
    t.resize(n);
    file.read_floats(*info, t);
    // A corrupted file's NaN or Inf would decode silently (argmax of NaN logits is token 0): refused.
    const auto bad = std::find_if(t.begin(), t.end(), [](float x) { return !std::isfinite(x); });
    require(bad == t.end(), who, [&] {
        return path.string() + ": tensor '" + name + "' holds " + (std::isnan(*bad) ? "NaN" : "Inf") + " at element " +
               std::to_string(bad - t.begin()) + " (a corrupted checkpoint)";
    });
}

SPECDEC_INLINE void read_tensor(const SafetensorsFile& file, const std::filesystem::path& path, const std::string& name,
                                const std::vector<std::int64_t>& want, std::vector<float>& t, std::string_view who,
                                std::string_view hint) {
    read_tensor_from(file, path, name, want, t, who, hint);
}

SPECDEC_INLINE void read_tensor(const CheckpointTensors& file, const std::filesystem::path& path, const std::string& name,
                                const std::vector<std::int64_t>& want, std::vector<float>& t, std::string_view who,
                                std::string_view hint) {
    read_tensor_from(file, path, name, want, t, who, hint);
}


SPECDEC_INLINE LayersInFile layers_in_file(std::span<const TensorInfo> tensors) {
    constexpr std::string_view prefix = "model.layers.";
    std::vector<std::int64_t> seen;  // at most one entry per tensor: bounded by the file's size
    for (const TensorInfo& t : tensors) {
        const std::string_view name = t.name;
        if (name.substr(0, prefix.size()) != prefix) continue;
        std::int64_t i = 0;
        std::size_t at = prefix.size(), digits = 0;
        for (; at < name.size() && name[at] >= '0' && name[at] <= '9' && digits < 12; ++at, ++digits) i = 10 * i + (name[at] - '0');
        if (digits > 0 && at < name.size() && name[at] == '.') seen.push_back(i);
    }
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    return {static_cast<std::int64_t>(seen.size()), seen.empty() ? 0 : seen.back() + 1};
}

SPECDEC_INLINE void require_layers(std::span<const TensorInfo> tensors, const std::filesystem::path& path, int declared,
                                   std::string_view who) {
    // Both the largest index and the number of distinct ones: a single tensor named
    // model.layers.2147483646.x must not vouch for 2^31 layers.
    const LayersInFile held = layers_in_file(tensors);
    require(held.end == declared && held.count == declared, who, [&] {
        return path.string() + ": config.json declares num_hidden_layers = " + std::to_string(declared) +
               ", but the file holds tensors for " + std::to_string(held.count) + " layers" +
               (held.count == held.end ? " (model.layers.0 .. model.layers." + std::to_string(held.end - 1) + ")"
                                       : " with indices up to " + std::to_string(held.end - 1)) +
               "; are config.json and the weights from the same checkpoint?";
    });
}

}  // namespace detail

SPECDEC_INLINE Weights load_weights(const std::filesystem::path& path, const Config& c) {
    return load_weights(CheckpointTensors::open_file(path), c);
}

SPECDEC_INLINE Weights load_weights(const CheckpointTensors& tensors, const Config& c) {
    detail::require_layers(tensors.tensors(), tensors.path(), c.num_hidden_layers, "checkpoint");
    Weights w;
    w.layers.resize(c.num_hidden_layers);
    for_each_tensor(w, c, [&](const std::string& name, std::vector<float>& t, std::size_t) {
        detail::read_tensor(tensors, tensors.path(), name, detail::hf_shape(name, c), t, "checkpoint");
    });
    return w;
}

SPECDEC_INLINE Weights load_weights_deferred(std::shared_ptr<const CheckpointTensors> tensors, const Config& c) {
    detail::require_layers(tensors->tensors(), tensors->path(), c.num_hidden_layers, "checkpoint");
    Weights w;
    w.layers.resize(c.num_hidden_layers);
    auto deferred = std::make_shared<DeferredMatrices>();
    for_each_tensor(w, c, [&](const std::string& name, std::vector<float>& t, std::size_t) {
        const std::vector<std::int64_t> shape = detail::hf_shape(name, c);
        if (!deferrable_tensor(name)) return detail::read_tensor(*tensors, tensors->path(), name, shape, t, "checkpoint");
        const TensorInfo& info = detail::find_tensor(*tensors, tensors->path(), name, shape, "checkpoint");
        const std::size_t element = dtype_size(info.dtype), k = static_cast<std::size_t>(shape[1]);
        const bool convertible = info.dtype == DType::kF32 || info.dtype == DType::kBF16 || info.dtype == DType::kF16 ||
                                 info.dtype == DType::kF64;  // convert_to_float's types
        detail::require(convertible, "checkpoint", [&] {
            return tensors->file_of(info).path().string() + ": tensor '" + name + "' has dtype " +
                   std::string(dtype_name(info.dtype)) + " (supported: F32, BF16, F16, F64)";
        });
        using detail::StoredRows;
        const StoredRows how = info.dtype == DType::kBF16  ? detail::in_place_or_converted(StoredRows::kBf16, info.bytes.data(), k * 2, 2)
                               : info.dtype == DType::kF32 ? detail::in_place_or_converted(StoredRows::kF32, info.bytes.data(), k * 4, 4)
                                                           : StoredRows::kConverted;
        const DType dtype = info.dtype;
        deferred->matrices.emplace(
            name, detail::mapped_matrix_rows({.data = info.bytes,
                                              .m = static_cast<int>(shape[0]),
                                              .k = static_cast<int>(k),
                                              .row_bytes = k * element,
                                              .how = how,
                                              .convert = [dtype, k](std::span<const std::byte> b, float* out) { convert_to_float(dtype, b.data(), out, k); },
                                              .stored_row = {},
                                              .where = tensors->file_of(info).path().string() + ": tensor '" + name + "'",
                                              .who = "checkpoint"}));
    });
    deferred->owner = std::move(tensors);
    w.deferred = std::move(deferred);
    return w;
}

SPECDEC_INLINE void save_weights(const Weights& w, const Config& c, const std::filesystem::path& path,
                                 SaveFormat format) {
    validate(w, c);
    detail::write_tensors(path, format, [&](auto&& put) {
        for_each_tensor(w, c, [&](const std::string& name, const std::vector<float>& t, std::size_t) {
            put(name, t, detail::hf_shape(name, c));
        });
    });
}


SPECDEC_INLINE Checkpoint load_checkpoint(const std::filesystem::path& dir, LoadOptions options) {
    detail::require(std::filesystem::is_directory(dir), "checkpoint",
                    [&] { return dir.string() + ": not a directory (a model is a folder with config.json and model.safetensors)"; });
    // GLIDE's and EDD's drafters carry Llama fields too; read as a Llama they would silently lose their
    // cross-attention or soft prompt, so they are refused here (GLIDE's vanilla ablation and EDD's VDM ARE Llamas).
    const std::filesystem::path cfg_path = dir / "config.json";
    if (std::filesystem::exists(cfg_path)) {
        const json::Value root = json::parse(detail::read_text_file(cfg_path, "checkpoint"), cfg_path.string());
        const json::Value* cross = root.is_object() ? root.find("glide_cross_attention") : nullptr;
        detail::require(cross == nullptr || !cross->is_bool() || !cross->as_bool(), "checkpoint", [&] {
            return cfg_path.string() + ": a GLIDE drafter (glide_cross_attention is true); load it with "
                                       "load_glide_checkpoint, next to its target";
        });
        const json::Value* type = root.is_object() ? root.find("model_type") : nullptr;
        detail::require(type == nullptr || !type->is_string() || type->as_string() != "edd", "checkpoint", [&] {
            return cfg_path.string() + ": an EDD drafter (model_type edd); load it with load_edd_checkpoint, next to "
                                       "the target whose hidden states it reads";
        });
        detail::require(type == nullptr || !type->is_string() || (type->as_string() != "eagle" && type->as_string() != "fspad"),
                        "checkpoint", [&] {
                            return cfg_path.string() + ": a feature drafter (model_type " + type->as_string() +
                                   "); load it with load_feature_checkpoint, next to the target whose features it reads";
                        });
    }
    Checkpoint ck;
    ck.config = load_config(cfg_path);
    if (options.defer_matrices)
        ck.weights = load_weights_deferred(std::make_shared<const CheckpointTensors>(CheckpointTensors::open_folder(dir)), ck.config);
    else
        ck.weights = load_weights(CheckpointTensors::open_folder(dir), ck.config);
    return ck;
}

SPECDEC_INLINE void save_checkpoint(const std::filesystem::path& dir, const Config& c, const Weights& w,
                                    SaveFormat format) {
    std::filesystem::create_directories(dir);
    save_config(c, dir / "config.json", format == SaveFormat::kBF16 ? "bfloat16" : "float32");
    save_weights(w, c, dir / "model.safetensors", format);
}

SPECDEC_INLINE void save_sharded_checkpoint(const std::filesystem::path& dir, const Config& c, const Weights& w,
                                            SaveFormat format, std::int64_t max_shard_bytes) {
    validate(w, c);
    detail::require(max_shard_bytes > 0, "checkpoint",
                    [&] { return "max_shard_bytes must be > 0, got " + std::to_string(max_shard_bytes); });
    std::filesystem::create_directories(dir);
    save_config(c, dir / "config.json", format == SaveFormat::kBF16 ? "bfloat16" : "float32");
    // Shards as transformers cuts them: whole tensors in order, a new shard when the next would overflow.
    const std::int64_t element = format == SaveFormat::kBF16 ? 2 : 4;
    std::vector<std::vector<std::string>> shards(1);
    std::int64_t in_shard = 0, total = 0;
    for_each_tensor(w, c, [&](const std::string& name, const std::vector<float>& t, std::size_t) {
        const std::int64_t bytes = static_cast<std::int64_t>(t.size()) * element;
        if (in_shard > 0 && in_shard + bytes > max_shard_bytes) {
            shards.emplace_back();
            in_shard = 0;
        }
        shards.back().push_back(name);
        in_shard += bytes;
        total += bytes;
    });
    const auto shard_name = [&](std::size_t i) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
        return std::string(buf);
    };
    json::Object weight_map;
    for (std::size_t i = 0; i < shards.size(); ++i) {
        detail::write_tensors(dir / shard_name(i), format, [&](auto&& put) {
            for_each_tensor(w, c, [&](const std::string& name, const std::vector<float>& t, std::size_t) {
                if (std::find(shards[i].begin(), shards[i].end(), name) != shards[i].end())
                    put(name, t, detail::hf_shape(name, c));
            });
        });
        for (const std::string& name : shards[i]) weight_map.set(name, shard_name(i));
    }
    json::Object metadata;
    metadata.set("total_size", total);
    json::Object index;
    index.set("metadata", std::move(metadata));
    index.set("weight_map", std::move(weight_map));
    std::ofstream out(dir / kSafetensorsIndexName, std::ios::binary);
    detail::require(static_cast<bool>(out), "checkpoint",
                    [&] { return (dir / kSafetensorsIndexName).string() + ": cannot write"; });
    out << json::dump(json::Value(std::move(index)), 2) << "\n";
    std::error_code ec;
    std::filesystem::remove(dir / kSafetensorsName, ec);  // a stale single file would be read instead
}

#endif  // SPECDEC_BODIES

}  // namespace specdec
