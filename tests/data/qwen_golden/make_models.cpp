// make_models.cpp — writes the input of the Qwen golden test (tests/data/qwen_golden/README.md): qwen2/ and
// qwen3/, two tiny random models in HF's layout (config.json as transformers writes a Qwen2Config /
// Qwen3Config, model.safetensors in float32), and inputs.json, the tokens to run them on.
// The files are committed; rerun this only to change them, from the repository root:
//
//     g++ -std=c++20 -O1 -I. tests/data/qwen_golden/make_models.cpp -o /tmp/make_qwen_models && /tmp/make_qwen_models
//
// then scripts/make_qwen_golden.py (PyTorch) writes logits.json from them.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "specdec.hpp"

using namespace specdec;
namespace fs = std::filesystem;

namespace {

/// Random weights whose every tensor matters: N(0, 0.3) matrices, norm gains 1 + N(0, 0.2) (q_norm and
/// k_norm included), biases N(0, 0.5).
Weights weights_for(const Config& c, std::uint64_t seed) {
    Weights w = random_weights(c, seed, 0.3f);
    detail::NormalStream normal{seed + 1};
    for_each_tensor(w, c, [&](const std::string& name, std::vector<float>& t, std::size_t) {
        if (name.find("norm") != std::string::npos)
            for (float& v : t) v = 1.0f + 0.2f * normal.next();
        else if (name.ends_with(".bias"))
            for (float& v : t) v = 0.5f * normal.next();
    });
    return w;
}

/// config.json with the keys transformers 4.51 writes for these classes (Qwen2.5-0.5B's and Qwen3-0.6B's
/// files, sizes changed): the sliding-window keys present and inert (use_sliding_window false).
std::string config_json(const Config& c, bool qwen3) {
    std::string s = "{\n";
    const auto add = [&](const std::string& key, const std::string& value) { s += "  \"" + key + "\": " + value + ",\n"; };
    add("architectures", qwen3 ? "[\"Qwen3ForCausalLM\"]" : "[\"Qwen2ForCausalLM\"]");
    if (qwen3) add("attention_bias", "false");
    add("attention_dropout", "0.0");
    add("bos_token_id", "1");
    add("eos_token_id", "2");
    if (qwen3) add("head_dim", std::to_string(c.head_dim()));
    add("hidden_act", "\"silu\"");
    add("hidden_size", std::to_string(c.hidden_size));
    add("initializer_range", "0.02");
    add("intermediate_size", std::to_string(c.intermediate_size));
    add("max_position_embeddings", std::to_string(c.max_position_embeddings));
    add("max_window_layers", std::to_string(c.num_hidden_layers));
    add("model_type", qwen3 ? "\"qwen3\"" : "\"qwen2\"");
    add("num_attention_heads", std::to_string(c.num_attention_heads));
    add("num_hidden_layers", std::to_string(c.num_hidden_layers));
    add("num_key_value_heads", std::to_string(c.num_key_value_heads));
    add("rms_norm_eps", "1e-06");
    if (qwen3) add("rope_scaling", "null");
    add("rope_theta", "1000000.0");
    add("sliding_window", qwen3 ? "null" : std::to_string(c.max_position_embeddings));  // as in each family's files
    add("tie_word_embeddings", c.tie_word_embeddings ? "true" : "false");
    add("torch_dtype", "\"float32\"");
    add("transformers_version", "\"4.51.0\"");
    add("use_cache", "true");
    add("use_sliding_window", "false");
    s += "  \"vocab_size\": " + std::to_string(c.vocab_size) + "\n}\n";
    return s;
}

void write(const fs::path& dir, const Config& c, std::uint64_t seed, bool qwen3) {
    fs::remove_all(dir);
    save_checkpoint(dir, c, weights_for(c, seed), SaveFormat::kF32);
    std::ofstream(dir / "config.json", std::ios::binary) << config_json(c, qwen3);
}

}  // namespace

int main() {
    const fs::path root = "tests/data/qwen_golden";
    // Qwen2: hidden 32, 4 heads of 8, 2 kv heads, FFN 48, vocabulary 64, 2 layers, head untied.
    const Config qwen2{.hidden_size = 32, .intermediate_size = 48, .num_hidden_layers = 2, .num_attention_heads = 4,
                       .num_key_value_heads = 2, .vocab_size = 64, .rope_theta = 1e6f, .rms_norm_eps = 1e-6f,
                       .max_position_embeddings = 128, .qkv_bias = true};
    // Qwen3: as Qwen2 but head_dim 16 (not hidden / heads = 8: the q width is 64), head tied to the embedding.
    const Config qwen3{.hidden_size = 32, .intermediate_size = 48, .num_hidden_layers = 2, .num_attention_heads = 4,
                       .num_key_value_heads = 2, .vocab_size = 64, .rope_theta = 1e6f, .rms_norm_eps = 1e-6f,
                       .max_position_embeddings = 128, .tie_word_embeddings = true, .attention_head_dim = 16,
                       .qk_norm = true};
    write(root / "qwen2", qwen2, 21, false);
    write(root / "qwen3", qwen3, 31, true);
    std::ofstream(root / "inputs.json", std::ios::binary)
        << "{\n  \"about\": \"inputs of the Qwen golden test: the tokens of one sequence at positions 0, 1, ...\",\n"
           "  \"tokens\": [3, 17, 42, 8, 61, 0, 29, 29, 50]\n}\n";
    std::printf("wrote %s/qwen2, %s/qwen3 and %s/inputs.json\n", root.string().c_str(), root.string().c_str(),
                root.string().c_str());
    return 0;
}
