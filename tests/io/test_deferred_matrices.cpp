// LoadOptions::defer_matrices: the matrices stay in the mapped file and CpuModel packs them from there.
// The model must be the same model, bit for bit, as one built from fully loaded weights — in every
// weight format, packed or not, from safetensors (one file or shards) and GGUF (q/k rows in llama.cpp's
// order, quantized rows dequantized one at a time) — and a corrupted value must still be refused by name.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_deferred_matrices {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / "specdec_test_deferred";
    fs::create_directories(d);
    return d / name;
}

/// Untied head, GQA, head_dim 16 (not hidden / heads): every matrix a loader defers has its own shape.
Config deferred_config(bool tied) {
    Config c = test::tiny_config(/*gqa=*/true);
    c.attention_head_dim = 16;
    c.tie_word_embeddings = tied;
    return c;
}

/// Logits of a 7-token chain and then a 3-node tree on top of it.
std::vector<float> logits(const Config& c, const Weights& w, ModelOptions options) {
    CpuModel m(c, w, options);
    const Rows chain = m.forward(Tree::chain(std::vector<int>{5, 9, 33, 2, 61, 17, 40}));
    std::vector<float> out(chain.data.begin(), chain.data.end());
    const std::vector<int> all{0, 1, 2, 3, 4, 5, 6};
    m.commit(all);
    Tree tree;
    tree.add_root(7);
    tree.add(8, 0);
    tree.add(9, 0);
    const Rows t = m.forward(tree);
    out.insert(out.end(), t.data.begin(), t.data.end());
    return out;
}

/// The option sets a model can be built with: both formats, packed panels or W as stored.
std::vector<ModelOptions> model_options() {
    std::vector<ModelOptions> all;
    for (const WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16})
        for (const bool panels : {true, false}) all.push_back(ModelOptions{.weight_format = f, .panels = panels});
    return all;
}

}  // namespace

TEST_CASE("deferred safetensors matrices build the same model as loaded ones", "[checkpoint][deferred]") {
    const bool tied = GENERATE(false, true);
    const SaveFormat format = GENERATE(SaveFormat::kBF16, SaveFormat::kF32);
    const bool sharded = GENERATE(false, true);
    CAPTURE(tied, format == SaveFormat::kBF16, sharded);
    const Config cfg = deferred_config(tied);
    const Weights w = random_weights(cfg, 31, 0.3f);
    const fs::path dir = scratch(std::string("hf_") + (tied ? "tied_" : "") + (format == SaveFormat::kBF16 ? "bf16" : "f32") +
                                 (sharded ? "_sharded" : ""));
    fs::remove_all(dir);
    if (sharded) save_sharded_checkpoint(dir, cfg, w, format, 6000);
    else save_checkpoint(dir, cfg, w, format);

    const Checkpoint full = load_checkpoint(dir);
    const Checkpoint deferred = load_checkpoint(dir, {.defer_matrices = true});
    REQUIRE(deferred.weights.deferred != nullptr);
    // Read: the embedding and the norms; left in the file: every other matrix.
    CHECK(deferred.weights.embed == full.weights.embed);
    CHECK(deferred.weights.norm == full.weights.norm);
    CHECK(deferred.weights.layers[1].mlp_norm == full.weights.layers[1].mlp_norm);
    CHECK(deferred.weights.layers[1].wq.empty());
    CHECK(deferred.weights.lm_head.empty());
    CHECK(deferred.weights.deferred->matrices.size() == 7 * 2 + (tied ? 0u : 1u));
    for (const ModelOptions& o : model_options()) {
        CAPTURE(o.weight_format == WeightFormat::kBF16, o.panels);
        CHECK(logits(deferred.config, deferred.weights, o) == logits(full.config, full.weights, o));
    }
}

TEST_CASE("deferred GGUF matrices build the same model as loaded ones", "[gguf][deferred]") {
    const bool tied = GENERATE(false, true);
    const GgufSaveType type = GENERATE(GgufSaveType::kF32, GgufSaveType::kBF16, GgufSaveType::kF16, GgufSaveType::kQ8_0);
    CAPTURE(tied, static_cast<int>(type));
    Config cfg = test::tiny_config(/*gqa=*/true);  // GGUF export keeps head_dim = hidden / heads
    cfg.tie_word_embeddings = tied;
    const Weights w = random_weights(cfg, 32, 0.3f);
    const fs::path file = scratch("model_" + std::to_string(static_cast<int>(type)) + (tied ? "_tied" : "") + ".gguf");
    save_gguf(file, cfg, w, nullptr, type);

    const GgufModel full = load_gguf(file);
    const GgufModel deferred = load_gguf(file, {.defer_matrices = true});
    REQUIRE(deferred.weights.deferred != nullptr);
    CHECK(deferred.weights.layers[0].wk.empty());
    CHECK(deferred.weights.embed == full.weights.embed);
    // q and k rows come back in HF's order through the row map, F16 and Q8_0 rows dequantized as read.
    for (const ModelOptions& o : model_options()) {
        CAPTURE(o.weight_format == WeightFormat::kBF16, o.panels);
        CHECK(logits(deferred.config, deferred.weights, o) == logits(full.config, full.weights, o));
    }
}

TEST_CASE("weights left in their file are refused where values are needed", "[checkpoint][deferred][errors]") {
    const Config cfg = deferred_config(false);
    const fs::path dir = scratch("hf_refused");
    fs::remove_all(dir);
    save_checkpoint(dir, cfg, random_weights(cfg, 33, 0.3f), SaveFormat::kBF16);
    const Checkpoint ck = load_checkpoint(dir, {.defer_matrices = true});
    // Lvalues: Catch2 v2's && keeps references to its operands.
    const auto left = Catch::Contains("[specdec.weights] tensor 'model.layers.0.self_attn.q_proj.weight' was left in its file");
    const auto advice = Catch::Contains("load the model without defer_matrices");
    const auto message = left && advice;
    CHECK_THROWS_WITH(validate(ck.weights, ck.config), message);
    CHECK_THROWS_WITH(save_checkpoint(scratch("hf_refused_copy"), ck.config, ck.weights), message);
    CHECK_THROWS_WITH(save_gguf(scratch("refused.gguf"), ck.config, ck.weights, nullptr), message);
    CHECK_NOTHROW(validate(ck.weights, ck.config, /*allow_deferred=*/true));

    // Once packed, the model holds no reference to the file: its weights have only what was read.
    const CpuModel model(ck.config, ck.weights, {});
    CHECK(model.weights().deferred == nullptr);
    CHECK(model.weights().layers[0].wq.empty());
}

TEST_CASE("a NaN or Inf in a deferred matrix is refused naming file, tensor and element", "[checkpoint][deferred][errors]") {
    const Config cfg = deferred_config(false);
    Weights w = random_weights(cfg, 34, 0.3f);
    w.layers[1].w_up[37] = NAN;
    const fs::path dir = scratch("hf_nan");
    fs::remove_all(dir);
    save_checkpoint(dir, cfg, w, SaveFormat::kBF16);
    const Checkpoint ck = load_checkpoint(dir, {.defer_matrices = true});  // the matrices are not read yet
    for (const ModelOptions& o : model_options()) {
        CAPTURE(o.weight_format == WeightFormat::kBF16, o.panels);
        CHECK_THROWS_WITH(CpuModel(ck.config, ck.weights, o),
                          Catch::StartsWith("[specdec.checkpoint] " + (dir / "model.safetensors").string() +
                                            ": tensor 'model.layers.1.mlp.up_proj.weight' holds NaN at element 37"));
    }

    const fs::path file = scratch("inf.gguf");
    Weights g = random_weights(test::tiny_config(true), 35, 0.3f);
    g.layers[0].wo[5] = INFINITY;
    save_gguf(file, test::tiny_config(true), g, nullptr, GgufSaveType::kF32);
    const GgufModel m = load_gguf(file, {.defer_matrices = true});
    CHECK_THROWS_WITH(CpuModel(m.config, m.weights, {}),
                      Catch::StartsWith("[specdec.gguf] " + file.string() + ": tensor 'blk.0.attn_output.weight' holds Inf at element 5"));
}

}  // namespace test_deferred_matrices
