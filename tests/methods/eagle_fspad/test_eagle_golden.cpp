// PyTorch's logits for the EAGLE layout against specdec's. tests/data/eagle_golden/drafter/ is a tiny
// EAGLE-1/2 drafter exported for SGLang (make_drafter.cpp there), inputs.json a token and feature
// sequence; logits.json is what scripts/make_eagle_golden.py computes from them with PyTorch, following
// SGLang's and vLLM's llama_eagle.py (fc over concat(embedding, feature), one decoder layer without its
// input norm, no final norm, the target's head). Without logits.json the comparison is reported as
// skipped (exit 77 under ctest); the folder itself is checked against the exporter either way.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "catch.hpp"
#include "source_dir.hpp"
#include "skip_without.hpp"
#include "helpers.hpp"

namespace test_eagle_golden {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

const fs::path kGolden = fs::path(SPECDEC_SOURCE_DIR) / "tests/data/eagle_golden";

bool skip_without(const fs::path& file) { return test::skip_without(file, "run scripts/make_eagle_golden.py where PyTorch is installed"); }

using test::read_json;

/// The drafter's target: its shape with two layers, its embedding (the tied head) the folder's copy.
struct Target {
    Config config;
    Weights weights;
};

Target target_of(const fs::path& dir) {
    Target t;
    t.config = load_config(dir / "config.json", detail::kEagleLayoutConfigKeys);
    t.config.num_hidden_layers = 2;
    REQUIRE(t.config.tie_word_embeddings);
    t.weights = random_weights(t.config, 1, 0.3f);
    const SafetensorsFile st = SafetensorsFile::open(dir / "model.safetensors");
    detail::read_tensor(st, dir / "model.safetensors", "embed_tokens.weight",
                        {t.config.vocab_size, t.config.hidden_size}, t.weights.embed, "test");
    return t;
}

}  // namespace

TEST_CASE("the committed golden drafter folder is what the exporter writes for it", "[eagle][layout][golden]") {
    const fs::path dir = kGolden / "drafter";
    REQUIRE(fs::exists(dir / "model.safetensors"));
    const Target t = target_of(dir);
    const FeatureCheckpoint ck = load_eagle_layout(dir, t.config, t.weights);
    const fs::path again = fs::temp_directory_path() / "specdec_eagle_golden_again";
    fs::remove_all(again);
    save_eagle_layout(again, ck, ServingEngine::kSglang, SaveFormat::kF32);
    CHECK(json::dump(read_json(again / "config.json")) == json::dump(read_json(dir / "config.json")));
    const SafetensorsFile a = SafetensorsFile::open(again / "model.safetensors"), b = SafetensorsFile::open(dir / "model.safetensors");
    REQUIRE(a.tensors().size() == b.tensors().size());
    for (const TensorInfo& x : a.tensors()) {
        const TensorInfo* y = b.find(x.name);
        REQUIRE(y != nullptr);
        CHECK(x.shape == y->shape);
        CHECK(std::equal(x.bytes.begin(), x.bytes.end(), y->bytes.begin(), y->bytes.end()));
    }
    CHECK(b.find("fc.bias") != nullptr);  // the golden case covers the bias
    fs::remove_all(again);
}

TEST_CASE("specdec and a PyTorch reference forward give the same EAGLE-layout logits", "[eagle][layout][golden]") {
    if (skip_without(kGolden / "logits.json")) return;
    const fs::path dir = kGolden / "drafter";
    const Target t = target_of(dir);
    const json::Value inputs = read_json(kGolden / "inputs.json");
    const json::Value golden = read_json(kGolden / "logits.json");
    const int D = t.config.hidden_size, V = t.config.vocab_size;
    std::vector<int> tokens;
    for (const json::Value& v : inputs.at("tokens").as_array()) tokens.push_back(static_cast<int>(v.as_int()));
    const int T = static_cast<int>(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) REQUIRE(inputs.at("positions").as_array()[i].as_int() == static_cast<std::int64_t>(i));
    std::vector<float> e, f;
    for (int i = 0; i < T; ++i) {
        const auto row = std::span(t.weights.embed).subspan(static_cast<std::size_t>(tokens[static_cast<std::size_t>(i)]) * D, D);
        e.insert(e.end(), row.begin(), row.end());
        for (const json::Value& v : inputs.at("features").as_array()[static_cast<std::size_t>(i)].as_array())
            f.push_back(static_cast<float>(v.as_double()));
    }
    REQUIRE(f.size() == e.size());
    const bool reference = GENERATE(true, false);
    CAPTURE(reference);
    FeatureDrafter drafter(load_eagle_layout(dir, t.config, t.weights), ModelOptions{.reference = reference});
    std::vector<float> eta(e.size());
    drafter.connector.apply(eta.data(), e.data(), f.data(), T);
    const Rows logits = drafter.model.forward_embeddings(Tree::chain(std::vector<int>(static_cast<std::size_t>(T), 0)), 0, Rows{eta, D});
    const Rows hidden = drafter.model.hidden(0);
    // float32 here, float64 there, over the same float32 weights: |ours - torch| <= 1e-4 + 1e-4 |torch|.
    const auto compare = [&](const Rows& ours, const json::Array& theirs, int width) {
        REQUIRE(static_cast<int>(theirs.size()) == T);
        for (int i = 0; i < T; ++i) {
            const json::Array& row = theirs[static_cast<std::size_t>(i)].as_array();
            REQUIRE(static_cast<int>(row.size()) == width);
            double worst = 0;
            for (int j = 0; j < width; ++j) {
                const double want = row[static_cast<std::size_t>(j)].as_double();
                worst = std::max(worst, std::abs(ours.row(i)[j] - want) / (1.0 + std::abs(want)));
            }
            CAPTURE(i);
            CHECK(worst < 1e-4);
        }
    };
    compare(logits, golden.at("logits").as_array(), V);
    compare(hidden, golden.at("hidden").as_array(), D);
}

}  // namespace test_eagle_golden
