// make_drafter.cpp — writes the input of the EAGLE-layout golden test (tests/data/eagle_golden/README.md):
// drafter/, a tiny random EAGLE-1/2 drafter exported for SGLang (config.json + model.safetensors, float32,
// with a non-zero fc bias), and inputs.json, a token and feature sequence to run it on.
// The files are committed; rerun this only to change them, from the repository root:
//
//     g++ -std=c++20 -O1 -I. tests/data/eagle_golden/make_drafter.cpp -o /tmp/make_eagle_drafter && /tmp/make_eagle_drafter
//
// then scripts/make_eagle_golden.py (PyTorch) writes logits.json from them.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "specdec.hpp"

using namespace specdec;
namespace fs = std::filesystem;

int main() {
    const fs::path root = "tests/data/eagle_golden";
    // The target whose features the drafter reads: test::tiny_config() (hidden 32, 4 heads of 8, 2 kv
    // heads, FFN 48, vocabulary 64), its head tied to the embedding, as in tests/helpers.hpp.
    const Config target{.hidden_size = 32, .intermediate_size = 48, .num_hidden_layers = 2, .num_attention_heads = 4,
                        .num_key_value_heads = 2, .vocab_size = 64, .max_position_embeddings = 128,
                        .tie_word_embeddings = true};
    const Weights tw = random_weights(target, 11, 0.3f);
    FeatureCheckpoint ck = initial_feature_drafter(target, tw, Connector::kFc, false, 12, 0.3f);
    ck.config.identity_end_norms = true;
    detail::NormalStream normal{13};
    ck.connector_weights.fc_bias.resize(static_cast<std::size_t>(target.hidden_size));
    for (float& b : ck.connector_weights.fc_bias) b = 0.3f * normal.next();
    for (float& g : ck.weights.layers[0].mlp_norm) g = 1.0f + 0.3f * normal.next();  // a norm gain that is not 1
    fs::remove_all(root / "drafter");
    save_eagle_layout(root / "drafter", ck, ServingEngine::kSglang, SaveFormat::kF32);

    // Seven positions: the tokens x_{t+1} and the target-side features f_t the drafter's rows read.
    const int T = 7, D = target.hidden_size;
    std::string text = "{\n  \"about\": \"inputs of the EAGLE-layout golden test: row t reads the embedding of tokens[t] and "
                       "features[t], at position t\",\n  \"tokens\": [";
    for (int t = 0; t < T; ++t) text += (t ? ", " : "") + std::to_string((t * 11 + 5) % target.vocab_size);
    text += "],\n  \"positions\": [";
    for (int t = 0; t < T; ++t) text += (t ? ", " : "") + std::to_string(t);
    text += "],\n  \"features\": [\n";
    char number[32];
    for (int t = 0; t < T; ++t) {
        text += "    [";
        for (int d = 0; d < D; ++d) {
            std::snprintf(number, sizeof number, "%.9g", static_cast<double>(normal.next()));  // float32, exactly
            text += (d ? ", " : "") + std::string(number);
        }
        text += t + 1 < T ? "],\n" : "]\n";
    }
    text += "  ]\n}\n";
    std::ofstream(root / "inputs.json", std::ios::binary) << text;
    std::printf("wrote %s/drafter and %s/inputs.json\n", root.string().c_str(), root.string().c_str());
    return 0;
}
