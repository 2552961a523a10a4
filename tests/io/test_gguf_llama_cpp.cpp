// Golden tests of GGUF files written by llama.cpp itself: tests/data/gguf/llama_cpp/ holds a tiny HF folder
// (untied, grouped-query, bf16), the file llama.cpp's convert_hf_to_gguf.py made of it (q/k rows permuted
// by LlamaModel.permute), and llama.cpp's greedy ids and per-step logits on that file, all written by
// `bash scripts/llama_cpp_interop.sh --golden` (README.md there); tests/data/gguf/llama_cpp_llama3/ the same
// for a folder with Llama 3.x's rope_scaling, which the converter writes as the tensor rope_freqs.weight
// (`--golden-llama3`); tests/data/gguf/llama_cpp_qwen2/ and _qwen3/ the same for a Qwen2 and a Qwen3 folder,
// which the converter writes as llama.cpp's qwen2 and qwen3 architectures (`--golden-qwen2`, `--golden-qwen3`);
// tests/data/gguf/llama_cpp_yarn/ the Qwen3 one with rope_scaling yarn (`--golden-yarn`).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "source_dir.hpp"
#include "helpers.hpp"
#include "skip_without.hpp"

namespace test_gguf_llama_cpp {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = fs::path(SPECDEC_SOURCE_DIR) / "tests/data/gguf/llama_cpp";
const fs::path kLlama3Dir = fs::path(SPECDEC_SOURCE_DIR) / "tests/data/gguf/llama_cpp_llama3";

/// "label: 1 2 3" from llama_cpp_logits' output in `dir`.
std::vector<int> ids_after(const std::string& label, const fs::path& dir = kDir) {
    std::ifstream in(dir / "llama_cpp.ids");
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

namespace {

/// (steps, V) llama.cpp's logits rows in `dir`.
std::vector<float> llama_cpp_logits(const fs::path& dir, std::size_t steps, int V) {
    std::ifstream lf(dir / "llama_cpp.logits.f32", std::ios::binary);
    std::vector<float> llama(steps * static_cast<std::size_t>(V));
    lf.read(reinterpret_cast<char*>(llama.data()), static_cast<std::streamsize>(llama.size() * sizeof(float)));
    REQUIRE(lf.gcount() == static_cast<std::streamsize>(llama.size() * sizeof(float)));
    return llama;
}

/// (steps, V) the next-token logits of `c` + `w` on the prompt and the greedy tokens but the last.
std::vector<float> step_logits(const Config& c, const Weights& w, const std::vector<int>& prompt, const std::vector<int>& greedy) {
    CpuModel model(c, w);
    std::vector<int> tokens = prompt;
    tokens.insert(tokens.end(), greedy.begin(), greedy.end() - 1);
    const Rows rows = model.forward(Tree::chain(tokens), 0);
    return {rows.data.begin() + static_cast<std::ptrdiff_t>((prompt.size() - 1) * static_cast<std::size_t>(rows.cols)), rows.data.end()};
}

/// The prompt llama.cpp was given in `dir`.
std::string read_prompt(const fs::path& dir) {
    std::ifstream in(dir / "prompt.txt", std::ios::binary);
    REQUIRE(in);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// specdec's n greedy tokens after `prompt`.
std::vector<int> greedy_ids(const Config& c, const Weights& w, const std::vector<int>& prompt, std::size_t n) {
    CpuModel model(c, w);
    return autoregressive_generate(model, prompt, GenerateOptions{.max_new_tokens = static_cast<int>(n)}).tokens;
}

float largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    float worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    return worst;
}

/// llama.cpp's run stored in `dir` against specdec's on `m`: the prompt and greedy ids are checked here;
/// llama.cpp's logits rows, specdec's on the same tokens, the largest |logit| and the largest difference.
struct AgainstLlamaCpp {
    std::vector<int> prompt, greedy;
    std::vector<float> llama, ours;
    float largest = 0, worst = 0;
};
AgainstLlamaCpp against_llama_cpp(const GgufModel& m, const fs::path& dir) {
    AgainstLlamaCpp r;
    REQUIRE(m.tokenizer);
    r.prompt = ids_after("prompt", dir);
    r.greedy = ids_after("greedy", dir);
    REQUIRE(r.greedy.size() >= 8);
    CHECK(m.tokenizer->encode(read_prompt(dir)) == r.prompt);
    CHECK(greedy_ids(m.config, m.weights, r.prompt, r.greedy.size()) == r.greedy);
    r.llama = llama_cpp_logits(dir, r.greedy.size(), m.config.vocab_size);
    r.ours = step_logits(m.config, m.weights, r.prompt, r.greedy);
    for (float x : r.llama) r.largest = std::max(r.largest, std::abs(x));
    r.worst = largest_difference(r.ours, r.llama);
    return r;
}

}  // namespace

TEST_CASE("llama.cpp's conversion of a Llama 3.x folder loads as that folder, rope_freqs.weight as its table",
          "[gguf][llama_cpp][rope]") {
    const Checkpoint hf = load_checkpoint(kLlama3Dir);
    REQUIRE(hf.config.rope_scaling.type == RopeScalingType::kLlama3);
    const GgufModel m = load_gguf(kLlama3Dir / "converted.f32.gguf");
    CHECK(m.config.rope_theta == hf.config.rope_theta);
    CHECK(m.config.num_key_value_heads == hf.config.num_key_value_heads);
    CHECK(test::same_bits(m.weights, hf.weights, hf.config));  // bf16 -> bf16, q/k rows back in HF's order
    REQUIRE(m.config.rope_scaling.type == RopeScalingType::kFactors);
    const std::vector<float>& table = m.config.rope_scaling.factors;
    REQUIRE(table.size() == static_cast<std::size_t>(hf.config.head_dim() / 2));
    // Every branch of the llama3 rule is in the file: kept (1), on the ramp, stretched (factor).
    CHECK(std::count(table.begin(), table.end(), 1.0f) >= 1);
    CHECK(std::count(table.begin(), table.end(), hf.config.rope_scaling.factor) >= 1);
    CHECK(std::count_if(table.begin(), table.end(), [&](float f) { return f > 1.0f && f < hf.config.rope_scaling.factor; }) >= 2);
    // save_gguf's table is the converter's, computed from the folder's parameters.
    CHECK(detail::gguf_llama3_rope_factors(hf.config) == table);
    // And HF's llama3 frequencies to float rounding: the file's frequencies are theta^(-2j/hd) / table[j].
    const std::vector<double> ours = rope_inverse_frequencies(m.config), theirs = rope_inverse_frequencies(hf.config);
    for (std::size_t j = 0; j < table.size(); ++j) CHECK_THAT(ours[j], Catch::Matchers::WithinRel(theirs[j], 1e-6));
}

TEST_CASE("llama.cpp's tokens and logits on its Llama 3.x file are specdec's, and need the table", "[gguf][llama_cpp][rope]") {
    GgufModel m = load_gguf(kLlama3Dir / "converted.f32.gguf");
    const AgainstLlamaCpp run = against_llama_cpp(m, kLlama3Dir);
    const std::vector<int>& their_prompt = run.prompt, &theirs = run.greedy;
    const std::vector<float>& llama = run.llama, &ours = run.ours;
    const float largest = run.largest, worst = run.worst;

    // The HF folder it came from (llama3's parameters, frequencies in double) gives the same logits to
    // float rounding.
    const Checkpoint hf = load_checkpoint(kLlama3Dir);
    const float from_hf = largest_difference(step_logits(hf.config, hf.weights, their_prompt, theirs), ours);

    // Control: the same file with its table ignored is another model at these positions.
    Config ignored = m.config;
    ignored.rope_scaling = {};
    const float without_table = largest_difference(step_logits(ignored, m.weights, their_prompt, theirs), llama);

    INFO("largest |logit| " << largest << ", difference to llama.cpp " << worst << ", HF folder vs GGUF " << from_hf
                             << ", table ignored vs llama.cpp " << without_table);
    CHECK(largest > 1.0f);
    CHECK(worst < 1e-4f * largest);    // the tolerance of the test above
    CHECK(from_hf < 1e-5f * largest);  // float rounding of the factors
    CHECK(without_table > 1e-2f * largest);
}

TEST_CASE("llama.cpp's qwen2 and qwen3 files load as their HF folders, and decode as llama.cpp does", "[gguf][llama_cpp][qwen]") {
    const std::string name = GENERATE("qwen2", "qwen3");
    CAPTURE(name);
    const fs::path dir = fs::path(SPECDEC_SOURCE_DIR) / ("tests/data/gguf/llama_cpp_" + name);
    if (test::skip_without(dir / "converted.f32.gguf", "run bash scripts/llama_cpp_interop.sh --golden-" + name)) return;
    const Checkpoint hf = load_checkpoint(dir);
    GgufModel m = load_gguf(dir / "converted.f32.gguf");
    CHECK(read_gguf_header(dir / "converted.f32.gguf").find("general.architecture")->string == name);
    CHECK(m.config.qkv_bias == (name == "qwen2"));
    CHECK(m.config.qk_norm == (name == "qwen3"));
    CHECK(m.config.head_dim() == hf.config.head_dim());
    CHECK(m.config.rope_theta == hf.config.rope_theta);
    CHECK(test::same_bits(m.weights, hf.weights, hf.config));  // bf16 -> f32 exactly, q/k rows in HF's order

    const AgainstLlamaCpp run = against_llama_cpp(m, dir);
    const std::vector<int>& their_prompt = run.prompt, &theirs = run.greedy;
    const std::vector<float>& llama = run.llama;
    const float largest = run.largest, worst = run.worst;

    // Controls: q and k rows as a "llama" file holds them (permuted for adjacent-pair RoPE), and the
    // block without its Qwen part: both far from llama.cpp.
    Weights permuted = m.weights;
    for (LayerWeights& l : permuted.layers) {
        detail::permute_rope_rows(l.wq, m.config.num_attention_heads, m.config.hidden_size, /*to_hf=*/false);
        detail::permute_rope_rows(l.wk, m.config.num_key_value_heads, m.config.hidden_size, /*to_hf=*/false);
    }
    const float llama_rows = largest_difference(step_logits(m.config, permuted, their_prompt, theirs), llama);
    Config plain = m.config;
    Weights stripped = m.weights;
    plain.qkv_bias = plain.qk_norm = false;
    for (LayerWeights& l : stripped.layers) l.bq = l.bk = l.bv = l.q_norm = l.k_norm = {};
    const float llama_block = largest_difference(step_logits(plain, stripped, their_prompt, theirs), llama);

    INFO("largest |logit| " << largest << ", difference to llama.cpp " << worst << ", with llama's q/k rows " << llama_rows
                             << ", without the Qwen block " << llama_block);
    CHECK(largest > 1.0f);
    CHECK(worst < 1e-4f * largest);  // the tolerance of the tests above
    CHECK(llama_rows > 1e-2f * largest);
    CHECK(llama_block > 1e-2f * largest);
}

TEST_CASE("llama.cpp's YaRN file loads as its HF folder and decodes as llama.cpp does, which needs both parts of YaRN",
          "[gguf][llama_cpp][rope][yarn]") {
    const fs::path dir = fs::path(SPECDEC_SOURCE_DIR) / "tests/data/gguf/llama_cpp_yarn";
    if (test::skip_without(dir / "converted.f32.gguf", "run bash scripts/llama_cpp_interop.sh --golden-yarn")) return;
    const Checkpoint hf = load_checkpoint(dir);
    GgufModel m = load_gguf(dir / "converted.f32.gguf");
    const GgufFile f = read_gguf_header(dir / "converted.f32.gguf");
    CHECK(f.find("qwen3.rope.scaling.type")->string == "yarn");
    REQUIRE(m.config.rope_scaling.type == RopeScalingType::kYarn);
    CHECK(m.config.rope_scaling.factor == 4.0f);
    CHECK(m.config.rope_scaling.original_max_position_embeddings == 4096);
    CHECK(detail::same_rope_scaling(m.config.rope_scaling, hf.config.rope_scaling));
    CHECK(test::same_bits(m.weights, hf.weights, hf.config));

    const AgainstLlamaCpp run = against_llama_cpp(m, dir);
    const std::vector<int>& their_prompt = run.prompt, &theirs = run.greedy;
    const std::vector<float>& llama = run.llama;
    const float largest = run.largest, worst = run.worst;
    // Controls: the frequencies unscaled, and the scaled frequencies without the attention factor.
    Config unscaled = m.config;
    unscaled.rope_scaling = {};
    const float without_yarn = largest_difference(step_logits(unscaled, m.weights, their_prompt, theirs), llama);
    Config unit = m.config;
    unit.rope_scaling.attention_factor = 1.0f;
    const float without_factor = largest_difference(step_logits(unit, m.weights, their_prompt, theirs), llama);

    INFO("largest |logit| " << largest << ", difference to llama.cpp " << worst << ", without YaRN " << without_yarn
                             << ", without its attention factor " << without_factor);
    CHECK(largest > 1.0f);
    CHECK(worst < 1e-4f * largest);  // the tolerance of the tests above
    CHECK(without_yarn > 1e-2f * largest);
    CHECK(without_factor > 1e-2f * largest);
}

}  // namespace test_gguf_llama_cpp
