// HF transformers' own logits for a random LlamaForCausalLM it saved (sharded, bf16, llama3 RoPE
// scaling, GQA, untied head, head_dim != hidden / heads): specdec loads the folder and must give the
// same logits. tests/data/hf_golden/ is what scripts/make_hf_golden.py wrote with transformers 5.17.0,
// whose config.json spells RoPE as rope_parameters; the second case rewrites that config into the
// other spelling (transformers 4.x's rope_theta + rope_scaling, or back) so that both stay covered by
// the same weights and logits. Without the folder the cases are reported as skipped (exit 77 under ctest).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "source_dir.hpp"
#include "skip_without.hpp"
#include "helpers.hpp"

namespace test_hf_golden {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

const fs::path kGolden = fs::path(SPECDEC_SOURCE_DIR) / "tests/data/hf_golden";

bool skip_without(const fs::path& file) { return test::skip_without(file, "run scripts/make_hf_golden.py where PyTorch and transformers are installed"); }

/// The logits of the folder `dir` against logits.json, for the reference and the fast model.
void check_logits(const fs::path& dir, const json::Value& golden) {
    Checkpoint ck = load_checkpoint(dir);
    REQUIRE(fs::exists(dir / "model.safetensors.index.json"));  // what the data is for: shards
    CHECK(ck.config.head_dim() * ck.config.num_attention_heads != ck.config.hidden_size);
    CHECK(ck.config.rope_scaling.type == RopeScalingType::kLlama3);
    CHECK(ck.config.rope_theta == 500000.0f);  // not the default 10000: the rope spelling was read
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
        CAPTURE(reference, p, ids.size(), worst);
        CHECK(worst <= 1e-3);
    }
}

using test::read_json;

}  // namespace

TEST_CASE("a checkpoint saved by HF transformers gives transformers' float32 logits", "[checkpoint][golden][hf]") {
    const fs::path logits_file = kGolden / "logits.json";
    if (skip_without(logits_file)) return;
    check_logits(kGolden, read_json(logits_file));
}

TEST_CASE("the golden checkpoint in the other RoPE spelling gives the same logits", "[checkpoint][golden][hf][rope]") {
    const fs::path logits_file = kGolden / "logits.json";
    if (skip_without(logits_file)) return;
    const fs::path dir = fs::temp_directory_path() / "specdec_test_hf_golden_respelled";
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const fs::directory_entry& e : fs::directory_iterator(kGolden)) fs::copy_file(e.path(), dir / e.path().filename());
    // transformers 5: rope_parameters {rope_theta, rope_type, factor, ...}; 4.x: rope_theta + rope_scaling
    // {rope_type, factor, ...}. The same numbers moved from one spelling to the other.
    json::Value root = read_json(kGolden / "config.json");
    json::Object& o = root.as_object();
    json::Object respelled;
    const json::Value* parameters = o.find("rope_parameters");
    const bool was_5x = parameters != nullptr && !parameters->is_null();
    REQUIRE((was_5x || o.find("rope_scaling") != nullptr));
    json::Object rope = was_5x ? parameters->as_object() : o.find("rope_scaling")->as_object();
    if (was_5x) {
        json::Object scaling;
        for (const json::Member& m : rope)
            if (m.key == "rope_theta") respelled.set("rope_theta", m.value);
            else scaling.set(m.key, m.value);
        respelled.set("rope_scaling", std::move(scaling));
    } else {
        REQUIRE(o.find("rope_theta") != nullptr);
        rope.set("rope_theta", *o.find("rope_theta"));
        respelled.set("rope_parameters", std::move(rope));
    }
    for (const json::Member& m : o)
        if (m.key != "rope_parameters" && m.key != "rope_scaling" && m.key != "rope_theta") respelled.set(m.key, m.value);
    std::ofstream(dir / "config.json", std::ios::binary | std::ios::trunc) << json::dump(json::Value(std::move(respelled)), 2);
    const Config c = load_config(dir / "config.json");
    REQUIRE(c.rope_scaling.type == RopeScalingType::kLlama3);
    CAPTURE(was_5x);
    check_logits(dir, read_json(logits_file));
    fs::remove_all(dir);
}

}  // namespace test_hf_golden
