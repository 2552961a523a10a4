// Golden test of a GGUF file written by llama.cpp itself: tests/data/gguf/llama_cpp/ holds a tiny HF folder
// (untied, grouped-query, bf16), the file llama.cpp's convert_hf_to_gguf.py made of it (q/k rows permuted
// by LlamaModel.permute), and llama.cpp's greedy ids and per-step logits on that file, all written by
// `bash scripts/llama_cpp_interop.sh --golden` (README.md there).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "source_dir.hpp"
#include "helpers.hpp"

using namespace specdec;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = fs::path(SPECDEC_SOURCE_DIR) / "tests/data/gguf/llama_cpp";

/// "label: 1 2 3" from llama_cpp_logits' output.
std::vector<int> ids_after(const std::string& label) {
    std::ifstream in(kDir / "llama_cpp.ids");
    REQUIRE(in);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(label + ":", 0) == 0) {
            std::istringstream s(line.substr(label.size() + 1));
            std::vector<int> v;
            for (int id; s >> id;) v.push_back(id);
            return v;
        }
    FAIL("no '" << label << ":' line");
    return {};
}

}  // namespace

TEST_CASE("llama.cpp's converter output loads as the HF folder it came from, bit for bit", "[gguf][llama_cpp]") {
    const Checkpoint hf = load_checkpoint(kDir);
    const GgufModel m = load_gguf(kDir / "converted.f32.gguf");
    CHECK(m.config.hidden_size == hf.config.hidden_size);
    CHECK(m.config.num_attention_heads == hf.config.num_attention_heads);
    CHECK(m.config.num_key_value_heads == hf.config.num_key_value_heads);
    CHECK(m.config.num_key_value_heads < m.config.num_attention_heads);  // the converter's n_head_kv branch
    CHECK(m.config.tie_word_embeddings == hf.config.tie_word_embeddings);
    CHECK_FALSE(m.config.tie_word_embeddings);
    int tensors = 0;
    for_each_tensor(hf.weights, hf.config, [&](const std::string& name, const std::vector<float>& t, std::size_t) {
        ++tensors;
        bool found = false;
        for_each_tensor(m.weights, m.config, [&](const std::string& other, const std::vector<float>& u, std::size_t) {
            if (other != name) return;
            found = true;
            INFO(name);
            CHECK(u == t);  // bf16 -> bf16, and the q/k rows back in HF's order
        });
        CHECK(found);
    });
    CHECK(tensors == 2 + 9 * hf.config.num_hidden_layers + 1);  // embed, final norm, lm_head, 9 per layer
}

TEST_CASE("llama.cpp's tokens and logits on its converted file are specdec's", "[gguf][llama_cpp]") {
    GgufModel m = load_gguf(kDir / "converted.f32.gguf");
    REQUIRE(m.tokenizer);
    std::ifstream prompt_file(kDir / "prompt.txt", std::ios::binary);
    const std::string prompt((std::istreambuf_iterator<char>(prompt_file)), std::istreambuf_iterator<char>());
    const std::vector<int> their_prompt = ids_after("prompt"), theirs = ids_after("greedy");
    REQUIRE(theirs.size() >= 8);
    CHECK(m.tokenizer->encode(prompt) == their_prompt);

    const int V = m.config.vocab_size;
    std::ifstream lf(kDir / "llama_cpp.logits.f32", std::ios::binary);
    std::vector<float> llama(theirs.size() * static_cast<std::size_t>(V));
    lf.read(reinterpret_cast<char*>(llama.data()), static_cast<std::streamsize>(llama.size() * sizeof(float)));
    REQUIRE(lf.gcount() == static_cast<std::streamsize>(llama.size() * sizeof(float)));

    CpuModel model(m.config, std::move(m.weights));
    const Generation g = autoregressive_generate(model, their_prompt, GenerateOptions{.max_new_tokens = static_cast<int>(theirs.size())});
    CHECK(g.tokens == theirs);

    model.reset();
    std::vector<int> tokens = their_prompt;
    tokens.insert(tokens.end(), theirs.begin(), theirs.end() - 1);
    const Rows rows = model.forward(Tree::chain(tokens), 0);
    float worst = 0, largest = 0;
    for (std::size_t s = 0; s < theirs.size(); ++s) {
        const std::span<const float> ours = rows.row(static_cast<int>(their_prompt.size() - 1 + s));
        for (int v = 0; v < V; ++v) {
            const float x = llama[s * static_cast<std::size_t>(V) + static_cast<std::size_t>(v)];
            worst = std::max(worst, std::abs(ours[static_cast<std::size_t>(v)] - x));
            largest = std::max(largest, std::abs(x));
        }
    }
    INFO("largest |logit| " << largest << ", largest difference " << worst);
    CHECK(largest > 1.0f);         // a law that is not flat, so a wrong q/k order would show
    CHECK(worst < 1e-4f * largest);  // f32 arithmetic in another order: 1.47e-5 of 7.56 when written
}
