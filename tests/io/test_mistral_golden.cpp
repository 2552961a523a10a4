// HF transformers' own logits for a random MistralForCausalLM with a sliding window of 12 (what
// scripts/make_mistral_golden.py writes into tests/data/mistral_golden/): within the window specdec's
// logits are transformers', and past it transformers' differ from full attention's, which is why the
// loader caps the context at the window. Without the folder the cases are reported as skipped.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"
#include "skip_without.hpp"
#include "source_dir.hpp"

namespace test_mistral_golden {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

const fs::path kGolden = fs::path(SPECDEC_SOURCE_DIR) / "tests/data/mistral_golden";

using test::read_json;

/// The largest |ours - HF| / (1 + |HF|) over rows [first, last) of one prompt.
double gap(const Rows& ours, const json::Array& rows, std::size_t first, std::size_t last) {
    double worst = 0.0;
    for (std::size_t t = first; t < last; ++t) {
        const json::Array& row = rows[t].as_array();
        for (std::size_t v = 0; v < row.size(); ++v) {
            const double want = row[v].as_double();
            worst = std::max(worst, std::abs(ours.row(static_cast<int>(t))[v] - want) / (1.0 + std::abs(want)));
        }
    }
    return worst;
}

}  // namespace

TEST_CASE("a Mistral with a sliding window gives transformers' logits within it, and is capped there", "[checkpoint][golden][hf]") {
    const fs::path logits_file = kGolden / "logits.json";
    if (test::skip_without(logits_file, "run scripts/make_mistral_golden.py where PyTorch and transformers are installed"))
        return;
    const json::Value golden = read_json(logits_file);
    const int window = static_cast<int>(golden.at("sliding_window").as_int());
    const Checkpoint ck = load_checkpoint(kGolden);
    REQUIRE(ck.config.sliding_window == window);
    CHECK(ck.config.max_position_embeddings == window);  // capped from config.json's larger context
    const json::Array& prompts = golden.at("prompts").as_array();
    const json::Array& logits = golden.at("logits").as_array();
    REQUIRE(prompts.size() == logits.size());

    CpuModel model(ck.config, ck.weights);
    Config unwindowed = ck.config;  // the same weights with full attention over a longer context
    unwindowed.sliding_window = 0;
    unwindowed.max_position_embeddings = 4 * window;
    CpuModel full(unwindowed, ck.weights);
    bool past_window = false;
    for (std::size_t p = 0; p < prompts.size(); ++p) {
        std::vector<int> ids;
        for (const json::Value& v : prompts[p].as_array()) ids.push_back(static_cast<int>(v.as_int()));
        const json::Array& rows = logits[p].as_array();
        REQUIRE(rows.size() == ids.size());
        CAPTURE(p, ids.size());
        if (static_cast<int>(ids.size()) <= window) {
            model.reset();
            CHECK(gap(model.forward(Tree::chain(ids)), rows, 0, rows.size()) <= 1e-3);
            continue;
        }
        // Past the window the capped model refuses, full attention agrees up to the window and not after.
        past_window = true;
        model.reset();
        CHECK_THROWS_WITH(detail::prefill(model, ids), Catch::Contains("overflows the context"));
        full.reset();
        const Rows ours = full.forward(Tree::chain(ids));
        CHECK(gap(ours, rows, 0, static_cast<std::size_t>(window)) <= 1e-3);
        CHECK(gap(ours, rows, static_cast<std::size_t>(window), rows.size()) > 1e-2);
    }
    CHECK(past_window);
}

}  // namespace test_mistral_golden
