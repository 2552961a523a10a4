// HF transformers' own logits for a random LlamaForCausalLM it saved (sharded, bf16, rope_scaling
// llama3, GQA, untied head, head_dim != hidden / heads): specdec loads the folder and must give the
// same logits. The data is written by scripts/make_hf_golden.py on a machine with PyTorch; until
// tests/data/hf_golden/ exists the case is reported as skipped (exit 77 under ctest).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"

using namespace specdec;
namespace fs = std::filesystem;

namespace {

const fs::path kGolden = fs::path(SPECDEC_SOURCE_DIR) / "tests/data/hf_golden";

bool skip_without(const fs::path& file) {
    if (fs::exists(file)) return false;
    const std::string why = "SKIPPED: " + file.string() +
                            " is absent (run scripts/make_hf_golden.py where PyTorch and transformers are installed)";
    if (std::getenv("SPECDEC_CTEST") != nullptr) {
        std::fprintf(stderr, "%s\n", why.c_str());
        std::exit(77);
    }
    WARN(why);
    SUCCEED("skipped");
    return true;
}

}  // namespace

TEST_CASE("a checkpoint saved by HF transformers gives transformers' float32 logits", "[checkpoint][golden][hf]") {
    const fs::path logits_file = kGolden / "logits.json";
    if (skip_without(logits_file)) return;
    std::ifstream in(logits_file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    const json::Value golden = json::parse(text.str(), logits_file.string());
    Checkpoint ck = load_checkpoint(kGolden);
    REQUIRE(fs::exists(kGolden / "model.safetensors.index.json"));  // what the data is for: shards
    CHECK(ck.config.head_dim() * ck.config.num_attention_heads != ck.config.hidden_size);
    CHECK(ck.config.rope_scaling.type == RopeScalingType::kLlama3);
    CHECK(ck.config.num_key_value_heads < ck.config.num_attention_heads);
    CHECK_FALSE(ck.config.tie_word_embeddings);
    const bool reference = GENERATE(true, false);
    CpuModel model(ck.config, ck.weights, ModelOptions{.reference = reference});
    const json::Array& prompts = golden.at("prompts").as_array();
    const json::Array& logits = golden.at("logits").as_array();
    REQUIRE(prompts.size() == logits.size());
    // float32 over the same bf16-exact weights: only the order of the float32 sums differs, so
    // |ours - HF| <= 1e-3 + 1e-3 |HF| (the logits are O(1) to O(10)).
    for (std::size_t p = 0; p < prompts.size(); ++p) {
        std::vector<int> ids;
        for (const json::Value& v : prompts[p].as_array()) ids.push_back(static_cast<int>(v.as_int()));
        model.reset();
        const Rows ours = model.forward(Tree::chain(ids));
        const json::Array& rows = logits[p].as_array();
        REQUIRE(rows.size() == ids.size());
        double worst = 0.0;
        for (std::size_t t = 0; t < rows.size(); ++t) {
            const json::Array& row = rows[t].as_array();
            REQUIRE(static_cast<int>(row.size()) == ck.config.vocab_size);
            for (std::size_t v = 0; v < row.size(); ++v) {
                const double want = row[v].as_double(), got = ours.row(static_cast<int>(t))[v];
                worst = std::max(worst, std::abs(got - want) / (1.0 + std::abs(want)));
            }
        }
        CAPTURE(p, ids.size(), worst);
        CHECK(worst <= 1e-3);
    }
}
