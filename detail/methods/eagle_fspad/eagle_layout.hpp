// specdec/detail/methods/eagle_fspad/eagle_layout.hpp — EAGLE-1/2's drafter folder as SGLang and vLLM load it: export and import.
// SPDX-License-Identifier: MIT
#pragma once

// The layout, read from the engines' model code (docs/formats.md cites files and commits):
//   config.json   a LlamaConfig (model_type "llama") of ONE layer with the target's shape; architectures
//                 ["LlamaForCausalLMEagle"] for SGLang (the class its llama_eagle.py registers) or
//                 ["EagleLlamaForCausalLM"] for vLLM (its registry's name; its EAGLEConfig maps a plain
//                 "LlamaForCausalLM" there too, but would turn SGLang's name into an unknown one); "bias",
//                 which EAGLE's own ea_model.py reads to build fc.
//   model.safetensors, names without "model." (both loaders prepend it):
//     fc.weight (D, 2D)  over concat(embedding, feature), embeddings first;
//     fc.bias (D)        SGLang's fc is nn.Linear with its default bias, so the SGLang folder always
//                        carries one (zeros for a drafter without); vLLM's fc has no bias, so its folder has none;
//     embed_tokens.weight (V, D)  the target's embedding: both engines replace it with the target's own
//                        (SGLang's set_embed_and_head; vLLM shares it when the shapes match), written so
//                        the folder also loads where a copy is read (EAGLE's ea_model, vLLM under pipeline parallelism);
//     layers.0.self_attn.{q,k,v,o}_proj.weight, layers.0.post_attention_layernorm.weight,
//     layers.0.mlp.{gate,up,down}_proj.weight;
//   and nothing else: layer 0 has no input_layernorm, there is no final norm (the layer's output goes
//   straight to the head and is the feature fed forward), and no lm_head (both take the target's).
// specdec runs that layer as a FeatureDrafter whose Config has identity_end_norms; FSPAD's sampler and
// PAD have no counterpart in either engine and are refused by name, as is a layer with its end norms.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "../../core/error.hpp"
#include "../../io/checkpoint.hpp"
#include "../../io/json.hpp"
#include "../../io/safetensors.hpp"
#include "../../model/config.hpp"
#include "../../model/weights.hpp"
#include "feature_drafter.hpp"

namespace specdec {

/// Which engine's loader an exported folder is written for (they differ in architectures and fc.bias only).
enum class ServingEngine {
    kSglang,  // architectures ["LlamaForCausalLMEagle"], fc.bias always present
    kVllm,    // architectures ["EagleLlamaForCausalLM"], no fc.bias
};

inline const char* engine_name(ServingEngine e) { return e == ServingEngine::kSglang ? "sglang" : "vllm"; }
inline const char* eagle_architecture(ServingEngine e) {
    return e == ServingEngine::kSglang ? "LlamaForCausalLMEagle" : "EagleLlamaForCausalLM";
}

/// Calls f(name, tensor, shape) for every tensor of the EAGLE layout, in file order: the connector
/// (`fc_bias` may be null: no fc.bias), the embedding, then each layer without layer 0's input norm.
template <class W, class V, class F>
void for_each_eagle_tensor(W& weights, V& fc, V* fc_bias, const Config& c, F&& f) {
    const std::int64_t D = c.hidden_size, Fw = c.intermediate_size, Vs = c.vocab_size, q = c.q_dim(), kv = c.kv_dim();
    f(std::string("fc.weight"), fc, std::vector<std::int64_t>{D, 2 * D});
    if (fc_bias != nullptr) f(std::string("fc.bias"), *fc_bias, std::vector<std::int64_t>{D});
    f(std::string("embed_tokens.weight"), weights.embed, std::vector<std::int64_t>{Vs, D});
    for (std::size_t i = 0; i < weights.layers.size(); ++i) {
        const std::string p = "layers." + std::to_string(i) + ".";
        auto& l = weights.layers[i];
        if (i > 0) f(p + "input_layernorm.weight", l.attn_norm, std::vector<std::int64_t>{D});
        f(p + "self_attn.q_proj.weight", l.wq, std::vector<std::int64_t>{q, D});
        f(p + "self_attn.k_proj.weight", l.wk, std::vector<std::int64_t>{kv, D});
        f(p + "self_attn.v_proj.weight", l.wv, std::vector<std::int64_t>{kv, D});
        f(p + "self_attn.o_proj.weight", l.wo, std::vector<std::int64_t>{D, q});
        f(p + "post_attention_layernorm.weight", l.mlp_norm, std::vector<std::int64_t>{D});
        f(p + "mlp.gate_proj.weight", l.w_gate, std::vector<std::int64_t>{Fw, D});
        f(p + "mlp.up_proj.weight", l.w_up, std::vector<std::int64_t>{Fw, D});
        f(p + "mlp.down_proj.weight", l.w_down, std::vector<std::int64_t>{D, Fw});
    }
}

/// Refuses, with [specdec.convert] and the field, a drafter the layout cannot hold exactly: FSPAD's
/// Feature Sampler or PAD (no engine has them), a layer with its end norms (the engines would drop
/// them), or, for vLLM, an FC bias that is not zero. `source` names the drafter in the message.
SPECDEC_INLINE void check_eagle_exportable(const FeatureCheckpoint& ck, ServingEngine engine, std::string_view source);

/// Writes `ck` as an EAGLE-layout folder for `engine` (config.json + model.safetensors) into `dir`.
SPECDEC_INLINE void save_eagle_layout(const std::filesystem::path& dir, const FeatureCheckpoint& ck, ServingEngine engine,
                                      SaveFormat format = SaveFormat::kBF16);

/// Whether `dir`'s config.json describes an EAGLE-layout drafter (an EAGLE architecture, not this
/// library's model_type "eagle"/"fspad").
SPECDEC_INLINE bool is_eagle_layout(const std::filesystem::path& dir);

/// Reads an EAGLE-layout folder (safetensors only) as the drafter of `target`: its config is checked
/// against the target's by name (hidden_size, vocab_size, heads, kv heads, head_dim; one layer), the
/// embedding and head are the target's (as both engines do), and the fc bias is read where present.
SPECDEC_INLINE FeatureCheckpoint load_eagle_layout(const std::filesystem::path& dir, const Config& target_config,
                                                   const Weights& target);

/// A feature drafter folder of either kind for `target`: this library's (load_feature_checkpoint, then
/// check_feature_pair) or EAGLE's layout (load_eagle_layout).
SPECDEC_INLINE FeatureCheckpoint load_feature_drafter(const std::filesystem::path& dir, const Config& target_config,
                                                      const Weights& target);

#if SPECDEC_BODIES

SPECDEC_INLINE void check_eagle_exportable(const FeatureCheckpoint& ck, ServingEngine engine, std::string_view source) {
    const std::string src(source);
    detail::require(ck.connector == Connector::kFc, "convert", [&] {
        return src + ": connector '" + connector_name(ck.connector) +
               "' (FSPAD's Feature Sampler): no engine has its sampler; SGLang's and vLLM's EAGLE drafters read "
               "fc(concat(embedding, feature)) only";
    });
    detail::require(!ck.config.partial_alignment, "convert", [&] {
        return src + ": partial_alignment true (FSPAD's PAD, a (2D, F) down_proj): no engine has its sampler or its "
                     "doubled layer; SGLang's and vLLM's EAGLE drafters are one plain decoder layer";
    });
    detail::require(ck.config.identity_end_norms, "convert", [&] {
        return src + ": layout is not \"eagle\": the layer has an input_layernorm and a final norm, which EAGLE's "
                     "layer has not (SGLang and vLLM would run it without them and draft something else); hint: train "
                     "with \"layout\": \"eagle\" in train.json's \"feature\"";
    });
    detail::require(ck.config.num_hidden_layers == 1, "convert", [&] {
        return src + ": num_hidden_layers " + std::to_string(ck.config.num_hidden_layers) +
               " (EAGLE-1/2's drafter is one decoder layer)";
    });
    if (engine == ServingEngine::kVllm)
        for (std::size_t d = 0; d < ck.connector_weights.fc_bias.size(); ++d)
            detail::require(ck.connector_weights.fc_bias[d] == 0.0f, "convert", [&] {
                return src + ": fc.bias[" + std::to_string(d) + "] = " + std::to_string(ck.connector_weights.fc_bias[d]) +
                       ": vLLM's EAGLE fc has no bias; export with --engine sglang";
            });
}

SPECDEC_INLINE void save_eagle_layout(const std::filesystem::path& dir, const FeatureCheckpoint& ck, ServingEngine engine,
                                      SaveFormat format) {
    detail::require_llama_block(ck.config, "convert", "save_eagle_layout (the engines' llama_eagle.py)");
    check_eagle_exportable(ck, engine, "the drafter to write into " + dir.string());
    validate(ck.weights, ck.config);
    const int D = ck.config.hidden_size;
    detail::require(ck.connector_weights.fc.size() == static_cast<std::size_t>(D) * 2 * D, "convert", [&] {
        return dir.string() + ": fc.weight holds " + std::to_string(ck.connector_weights.fc.size()) +
               " floats, expected D x 2D = " + std::to_string(static_cast<std::size_t>(D) * 2 * D);
    });
    std::filesystem::create_directories(dir);
    const std::filesystem::path path = dir / "config.json";
    save_config(ck.config, path, format == SaveFormat::kBF16 ? "bfloat16" : "float32");
    json::Value root = json::parse(detail::read_text_file(path, "convert"), path.string());
    json::Object& o = root.as_object();
    o.set("architectures", json::Array{json::Value(eagle_architecture(engine))});
    o.set("model_type", "llama");
    o.set("bias", engine == ServingEngine::kSglang);
    {
        std::ofstream out(path, std::ios::binary);
        detail::require(static_cast<bool>(out), "convert", [&] { return path.string() + ": cannot write"; });
        out << json::dump(root, 2) << "\n";
    }
    // SGLang's fc always has a bias: zeros where the drafter has none, so its Linear's random
    // initial bias is overwritten (absent from the file, it would stay).
    std::vector<float> zeros;
    const std::vector<float>* bias = nullptr;
    if (engine == ServingEngine::kSglang) {
        if (ck.connector_weights.fc_bias.empty()) zeros.assign(static_cast<std::size_t>(D), 0.0f);
        bias = ck.connector_weights.fc_bias.empty() ? &zeros : &ck.connector_weights.fc_bias;
    }
    detail::write_tensors(dir / "model.safetensors", format, [&](auto&& put) {
        for_each_eagle_tensor(ck.weights, ck.connector_weights.fc, bias, ck.config,
                              [&](const std::string& name, const std::vector<float>& t,
                                  const std::vector<std::int64_t>& shape) { put(name, t, shape); });
    });
}

SPECDEC_INLINE bool is_eagle_layout(const std::filesystem::path& dir) {
    const std::filesystem::path path = dir / "config.json";
    if (!std::filesystem::is_regular_file(path)) return false;
    const json::Value root = json::parse(detail::read_text_file(path, "eagle"), path.string());
    if (!root.is_object()) return false;
    const json::Value* type = root.find("model_type");
    if (type != nullptr && type->is_string() && type->as_string() != "llama") return false;
    if (const json::Value* arch = root.find("architectures"); arch != nullptr && arch->is_array())
        for (const json::Value& a : arch->as_array())
            if (a.is_string() && (a.as_string() == eagle_architecture(ServingEngine::kSglang) ||
                                  a.as_string() == eagle_architecture(ServingEngine::kVllm)))
                return true;
    // EAGLE's own releases name the target's class (LlamaForCausalLM): the connector tells them apart.
    const std::filesystem::path tensors = dir / "model.safetensors";
    return std::filesystem::is_regular_file(tensors) && SafetensorsFile::open(tensors).find("fc.weight") != nullptr;
}

SPECDEC_INLINE FeatureCheckpoint load_eagle_layout(const std::filesystem::path& dir, const Config& target_config,
                                                   const Weights& target) {
    detail::require(std::filesystem::is_directory(dir), "eagle", [&] {
        return dir.string() + ": not a directory (an EAGLE drafter is a folder with config.json and model.safetensors)";
    });
    const std::filesystem::path tensors = dir / "model.safetensors";
    if (!std::filesystem::exists(tensors) && std::filesystem::exists(dir / "pytorch_model.bin"))
        detail::fail("eagle", (dir / "pytorch_model.bin").string() +
                                  ": a PyTorch pickle, which specdec does not read (it can run code when unpickled); hint: "
                                  "convert it to safetensors where PyTorch is installed: "
                                  "safetensors.torch.save_file(torch.load(\"pytorch_model.bin\"), \"model.safetensors\")");
    const std::filesystem::path path = dir / "config.json";
    const std::string file = path.string();
    const json::Value root = json::parse(detail::read_text_file(path, "eagle"), file);
    detail::require(root.is_object(), "eagle", [&] { return file + ": expected a JSON object"; });
    if (const json::Value* type = root.find("model_type"); type != nullptr && !type->is_null()) {
        const std::string t = detail::read_field(root, file, "model_type", "eagle", detail::as_string);
        detail::require(t == "llama", "eagle", [&] {
            return file + ": model_type '" + t + "' (an EAGLE-layout drafter's config is a LlamaConfig, model_type \"llama\"" +
                   (t == "eagle" || t == "fspad" ? "; this is this library's own drafter: load_feature_checkpoint reads it" : "") +
                   ")";
        });
    }
    FeatureCheckpoint ck;
    ck.config = load_config(path, detail::kEagleLayoutConfigKeys);
    // EAGLE builds its drafter from the target's config: each field that shapes the layer's input,
    // attention or output must be the target's (there is no target_config_hash in this layout).
    const auto same = [&](const char* field, int drafter, int tgt) {
        detail::require(drafter == tgt, "eagle", [&] {
            return file + ": " + field + " " + std::to_string(drafter) + " differs from the target's " + std::to_string(tgt) +
                   " (an EAGLE drafter reads its target's features and shares its embedding and head)";
        });
    };
    same("hidden_size", ck.config.hidden_size, target_config.hidden_size);
    same("vocab_size", ck.config.vocab_size, target_config.vocab_size);
    same("num_attention_heads", ck.config.num_attention_heads, target_config.num_attention_heads);
    same("num_key_value_heads", ck.config.num_key_value_heads, target_config.num_key_value_heads);
    same("head_dim", ck.config.head_dim(), target_config.head_dim());
    same("num_hidden_layers", ck.config.num_hidden_layers, 1);
    ck.config.identity_end_norms = true;
    ck.config.partial_alignment = false;
    ck.config.tie_word_embeddings = target_config.tie_word_embeddings;  // the head is the target's, tied or not
    bool declared_bias = true;  // EAGLE's ea_model.py: a config without "bias" means fc has one
    if (root.find("bias") != nullptr) declared_bias = detail::read_field(root, file, "bias", "eagle", detail::as_bool);

    const SafetensorsFile st = SafetensorsFile::open(tensors);
    const bool has_bias = st.find("fc.bias") != nullptr;
    detail::require(has_bias == declared_bias, "eagle", [&] {
        return file + ": bias " + (declared_bias ? "true" : "false") + (root.find("bias") ? "" : " (absent: EAGLE's default)") +
               ", but " + tensors.string() + (has_bias ? " holds" : " has no") + " tensor 'fc.bias'";
    });
    const std::size_t D = static_cast<std::size_t>(ck.config.hidden_size);
    ck.weights.layers.resize(1);
    ck.weights.lm_head = target.lm_head;
    ck.weights.norm.assign(D, 1.0f);                // unread: no final norm in this layout
    ck.weights.layers[0].attn_norm.assign(D, 1.0f);  // unread: no input norm on layer 0
    ck.connector = Connector::kFc;
    ck.sampler_size = target_config.intermediate_size;
    if (has_bias) ck.connector_weights.fc_bias.resize(D);
    std::vector<std::string> read;
    for_each_eagle_tensor(ck.weights, ck.connector_weights.fc, has_bias ? &ck.connector_weights.fc_bias : nullptr, ck.config,
                          [&](const std::string& name, std::vector<float>& t, const std::vector<std::int64_t>& shape) {
                              if (name == "embed_tokens.weight" && st.find(name) == nullptr) return;  // optional
                              detail::read_tensor(st, tensors, name, shape, t, "eagle",
                                                  "(an EAGLE-layout drafter names its tensors without \"model.\")");
                              read.push_back(name);
                          });
    // The file's embedding (where it has one) was shape-checked; both engines draft with the target's.
    ck.weights.embed = target.embed;
    for (const TensorInfo& t : st.tensors()) {
        if (std::find(read.begin(), read.end(), t.name) != read.end()) continue;
        if (t.name == "lm_head.weight") {
            // A folder converted for vLLM's older loader carries a copy of the target's head: accepted
            // when it is that head exactly (the engines take the target's).
            std::vector<float> head;
            detail::read_tensor(st, tensors, t.name, {static_cast<std::int64_t>(ck.config.vocab_size),
                                                      static_cast<std::int64_t>(D)}, head, "eagle");
            detail::require(head == target.output_matrix(), "eagle", [&] {
                return tensors.string() + ": tensor 'lm_head.weight' is not the target's head; SGLang and vLLM draft "
                                          "with the target's, so a drafter trained with its own cannot run as it was trained";
            });
            continue;
        }
        detail::fail("eagle", tensors.string() + ": tensor '" + t.name + "' is not part of EAGLE-1/2's drafter" +
                                  (t.name == "layers.0.input_layernorm.weight" || t.name == "norm.weight"
                                       ? " (EAGLE's layer has no input norm on layer 0 and no final norm; SGLang and vLLM "
                                         "would drop it)"
                                       : "") +
                                  "; refused rather than ignored");
    }
    validate(ck.weights, ck.config);
    ck.target_hash = target_config_hash(target_config);
    return ck;
}

SPECDEC_INLINE FeatureCheckpoint load_feature_drafter(const std::filesystem::path& dir, const Config& target_config,
                                                      const Weights& target) {
    if (is_eagle_layout(dir) || std::filesystem::exists(dir / "pytorch_model.bin"))
        return load_eagle_layout(dir, target_config, target);
    FeatureCheckpoint ck = load_feature_checkpoint(dir);
    check_feature_pair(ck, target_config);
    return ck;
}

#endif  // SPECDEC_BODIES

}  // namespace specdec
