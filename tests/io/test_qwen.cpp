// Qwen2 and Qwen3 HF folders: PyTorch's logits (tests/data/qwen_golden, written from transformers'
// modeling_qwen2.py / modeling_qwen3.py by scripts/make_qwen_golden.py), with controls that drop the
// biases or the q/k norms; exact round trips; their config keys read or refused by name; and every part
// of the library that implements Llama's block only refusing them before it touches a weight.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"
#include "skip_without.hpp"
#include "source_dir.hpp"

namespace test_qwen {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

const fs::path kGolden = fs::path(SPECDEC_SOURCE_DIR) / "tests/data/qwen_golden";

using test::read_json;

fs::path fresh_dir(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / ("specdec_test_qwen_" + name);
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

std::vector<int> golden_tokens() {
    std::vector<int> tokens;
    const json::Value inputs = read_json(kGolden / "inputs.json");
    for (const json::Value& v : inputs.at("tokens").as_array())
        tokens.push_back(static_cast<int>(v.as_int()));
    return tokens;
}

/// Logits (T, V) of `tokens` at positions 0.. through one chain forward.
std::vector<float> chain_logits(const Config& c, Weights w, const std::vector<int>& tokens, ModelOptions o = {}) {
    CpuModel m(c, std::move(w), o);
    const Rows r = m.forward(Tree::chain(tokens), 0);
    return {r.data.begin(), r.data.end()};
}

/// The largest |ours - torch| / (1 + |torch|) over every logit of `golden` (rows of V).
double worst_difference(const std::vector<float>& ours, const json::Array& golden, int V) {
    double worst = 0;
    REQUIRE(ours.size() == golden.size() * static_cast<std::size_t>(V));
    for (std::size_t i = 0; i < golden.size(); ++i) {
        const json::Array& row = golden[i].as_array();
        REQUIRE(static_cast<int>(row.size()) == V);
        for (int j = 0; j < V; ++j) {
            const double want = row[static_cast<std::size_t>(j)].as_double();
            worst = std::max(worst, std::abs(ours[i * static_cast<std::size_t>(V) + static_cast<std::size_t>(j)] - want) /
                                        (1.0 + std::abs(want)));
        }
    }
    return worst;
}

/// A Qwen config.json of the tiny shape: model_type `type`, then `extra` members (",\"k\": v" each).
std::string qwen_json(const std::string& type, const std::string& extra = "") {
    return "{\"model_type\":\"" + type +
           "\",\"hidden_size\":32,\"intermediate_size\":48,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
           "\"num_key_value_heads\":2,\"vocab_size\":64,\"max_position_embeddings\":128" +
           extra + "}";
}

Config load_text(const std::string& name, const std::string& text) {
    const fs::path dir = fresh_dir(name);
    std::ofstream(dir / "config.json") << text;
    return load_config(dir / "config.json");
}

}  // namespace

TEST_CASE("Qwen2 and Qwen3 folders give PyTorch's logits, and differ without biases or q/k norms",
          "[checkpoint][qwen][golden]") {
    if (test::skip_without(kGolden / "logits.json", "run scripts/make_qwen_golden.py where PyTorch is installed")) return;
    const json::Value golden = read_json(kGolden / "logits.json");
    const std::vector<int> tokens = golden_tokens();
    const std::string name = GENERATE("qwen2", "qwen3");
    CAPTURE(name);
    const Checkpoint ck = load_checkpoint(kGolden / name);
    const Config& c = ck.config;
    REQUIRE(c.qkv_bias == (name == "qwen2"));
    REQUIRE(c.qk_norm == (name == "qwen3"));
    if (name == "qwen3") REQUIRE(c.head_dim() == 16);  // config.json's, not hidden / heads = 8
    const json::Array& want = golden.at(name).as_array();
    const int V = c.vocab_size;

    // float32 here, float64 there, over the same float32 weights: 4.1e-6 (Qwen2) and 3.7e-6 (Qwen3)
    // measured on a Zen 4; the bound leaves room for another CPU's summation order.
    const double reference = worst_difference(chain_logits(c, ck.weights, tokens, {.reference = true}), want, V);
    const double fast = worst_difference(chain_logits(c, ck.weights, tokens), want, V);
    CHECK(reference < 2e-5);
    CHECK(fast < 2e-5);
    // bfloat16 matrices (the biases and norms stay float32): 6.3% and 4.9% of 1 + |logit| measured, the
    // rounding of 8-bit mantissas through two layers of weights with std 0.3 (as for a Llama, test_model.cpp).
    const double bf16 = worst_difference(chain_logits(c, ck.weights, tokens, {.weight_format = WeightFormat::kBF16}), want, V);
    CHECK(bf16 < 1e-1);

    // The deferred loader reads the biases and norms (vectors) and leaves only the matrices in the file.
    const Checkpoint deferred = load_checkpoint(kGolden / name, {.defer_matrices = true});
    REQUIRE(deferred.weights.deferred != nullptr);
    CHECK(deferred.weights.layers[0].wq.empty());
    CHECK(chain_logits(deferred.config, deferred.weights, tokens) == chain_logits(c, ck.weights, tokens));

    // Controls: the same weights without Qwen2's biases, or without Qwen3's q/k norms, are far off.
    Config plain = c;
    Weights stripped = ck.weights;
    plain.qkv_bias = plain.qk_norm = false;
    for (LayerWeights& l : stripped.layers) l.bq = l.bk = l.bv = l.q_norm = l.k_norm = {};
    const double control = worst_difference(chain_logits(plain, stripped, tokens), want, V);
    CHECK(control > 1e-2);
    CHECK(control > 10 * bf16);  // measured 3.0 (Qwen2) and 2.2 (Qwen3): far beyond bf16's rounding
}

TEST_CASE("a Qwen checkpoint saves and loads back exactly, as its own model_type", "[checkpoint][qwen]") {
    const test::Block block = GENERATE(test::Block::kQwen2, test::Block::kQwen3);
    const bool tied = GENERATE(false, true);
    Config c = test::tiny_block_config(block);
    c.tie_word_embeddings = tied;
    const Weights w = test::random_block_weights(c, 5, 0.3f);
    const fs::path dir = fresh_dir("round_trip");
    save_checkpoint(dir, c, w, SaveFormat::kF32);
    const json::Value cfg = read_json(dir / "config.json");
    CHECK(cfg.at("model_type").as_string() == (block == test::Block::kQwen2 ? "qwen2" : "qwen3"));
    CHECK(cfg.at("use_sliding_window").as_bool() == false);
    if (block == test::Block::kQwen3) CHECK(cfg.at("head_dim").as_int() == 16);
    CHECK((cfg.find("attention_bias") == nullptr || !cfg.at("attention_bias").as_bool()));

    const Checkpoint back = load_checkpoint(dir);
    CHECK(back.config.qkv_bias == c.qkv_bias);
    CHECK(back.config.qk_norm == c.qk_norm);
    CHECK(back.config.head_dim() == c.head_dim());
    CHECK(back.config.tie_word_embeddings == tied);
    CHECK(test::same_bits(back.weights, w, c));
    const SafetensorsFile st = SafetensorsFile::open(dir / "model.safetensors");
    CHECK((st.find("model.layers.1.self_attn.v_proj.bias") != nullptr) == (block == test::Block::kQwen2));
    CHECK((st.find("model.layers.1.self_attn.k_norm.weight") != nullptr) == (block == test::Block::kQwen3));
    CHECK(st.find("model.layers.1.self_attn.o_proj.bias") == nullptr);

    // Sharded, the biases and norms are in the index like every tensor.
    const fs::path sharded = fresh_dir("round_trip_sharded");
    save_sharded_checkpoint(sharded, c, w, SaveFormat::kF32, 4096);
    CHECK(test::same_bits(load_checkpoint(sharded).weights, w, c));
    fs::remove_all(dir);
    fs::remove_all(sharded);
}

TEST_CASE("a Qwen model exports to GGUF as qwen2 or qwen3 with HF's row order and loads back exactly", "[gguf][qwen]") {
    const std::string name = GENERATE("qwen2", "qwen3");
    CAPTURE(name);
    const Checkpoint ck = load_checkpoint(kGolden / name);
    const Config& c = ck.config;
    const fs::path dir = fresh_dir("gguf");
    const fs::path p = dir / "model.gguf";
    save_gguf(p, c, ck.weights, nullptr, GgufSaveType::kF32);
    {
        const GgufFile f = read_gguf_header(p);
        CHECK(f.find("general.architecture")->string == name);
        CHECK(f.find(name + ".block_count")->integer == 2);
        CHECK(f.find("llama.block_count") == nullptr);
        CHECK((f.find_tensor("blk.1.attn_v.bias") != nullptr) == (name == "qwen2"));
        CHECK((f.find_tensor("blk.1.attn_k_norm.weight") != nullptr) == (name == "qwen3"));
        if (name == "qwen3") CHECK(f.find("qwen3.attention.key_length")->integer == 16);
        // llama.cpp runs Qwen with NeoX RoPE: q and k rows stay in HF's order (a "llama" file permutes them).
        const GgufTensorInfo* q = f.find_tensor("blk.0.attn_q.weight");
        REQUIRE(q != nullptr);
        const std::vector<float>& wq = ck.weights.layers[0].wq;
        CHECK(std::memcmp(f.data(*q).data(), wq.data(), wq.size() * sizeof(float)) == 0);
    }
    const GgufModel m = load_gguf(p);
    CHECK(m.config.qkv_bias == c.qkv_bias);
    CHECK(m.config.qk_norm == c.qk_norm);
    CHECK(m.config.head_dim() == c.head_dim());
    CHECK(m.config.tie_word_embeddings == c.tie_word_embeddings);
    CHECK(test::same_bits(m.weights, ck.weights, c));
    const std::vector<int> tokens = golden_tokens();
    const GgufModel deferred = load_gguf(p, {.defer_matrices = true});
    CHECK(chain_logits(deferred.config, deferred.weights, tokens) == chain_logits(c, ck.weights, tokens));
    // Q8_0 matrices (the biases and norms stay F32), read back within Q8_0's rounding.
    save_gguf(p, c, ck.weights, nullptr, GgufSaveType::kQ8_0);
    const GgufModel q8 = load_gguf(p);
    CHECK(q8.weights.layers[1].bv == ck.weights.layers[1].bv);
    CHECK(q8.weights.layers[1].k_norm == ck.weights.layers[1].k_norm);
    // llama.cpp's Qwen architectures read no RoPE factor table.
    Config llama3 = c;
    llama3.rope_scaling = RopeScaling{.type = RopeScalingType::kLlama3, .factor = 8.0f};
    CHECK_THROWS_WITH(save_gguf(dir / "llama3.gguf", llama3, ck.weights, nullptr),
                      Catch::Contains("llama.cpp's " + name + " reads no RoPE factor table"));
    fs::remove_all(dir);
}

TEST_CASE("a Qwen folder missing a bias or holding a wrong-sized q/k norm is refused naming the tensor",
          "[checkpoint][qwen][errors]") {
    SECTION("a Qwen2 folder without a bias") {
        const Config c = test::tiny_block_config(test::Block::kQwen2);
        Config llama = c;
        llama.qkv_bias = false;
        const fs::path dir = fresh_dir("missing_bias");
        save_checkpoint(dir, llama, test::random_block_weights(llama, 3, 0.3f), SaveFormat::kF32);
        std::ofstream(dir / "config.json") << qwen_json("qwen2");
        CHECK_THROWS_WITH(load_checkpoint(dir), Catch::StartsWith("[specdec.") &&
                                                    Catch::Contains("model.layers.0.self_attn.q_proj.bias"));
    }
    SECTION("a Qwen3 folder whose q_norm is hidden_size long") {
        const Config c = test::tiny_block_config(test::Block::kQwen3);
        const Weights w = test::random_block_weights(c, 3, 0.3f);
        const std::vector<float> wide(static_cast<std::size_t>(c.hidden_size), 1.0f);
        const fs::path dir = fresh_dir("wide_q_norm");
        save_config(c, dir / "config.json");
        detail::write_tensors(dir / "model.safetensors", SaveFormat::kF32, [&](auto&& put) {
            for_each_tensor(w, c, [&](const std::string& name, const std::vector<float>& t, std::size_t) {
                if (name == "model.layers.1.self_attn.q_norm.weight") put(name, wide, {c.hidden_size});
                else put(name, t, detail::hf_shape(name, c));
            });
        });
        CHECK_THROWS_WITH(load_checkpoint(dir), Catch::StartsWith("[specdec.checkpoint]") &&
                                                    Catch::Contains("tensor 'model.layers.1.self_attn.q_norm.weight' has "
                                                                    "shape [32], the config implies [16]"));
    }
}

TEST_CASE("Qwen config keys are read where inert and refused by name where they would change the model",
          "[checkpoint][qwen][errors]") {
    // Qwen2.5's own files: sliding_window set, use_sliding_window false, max_window_layers: all inert.
    const Config q2 = load_text("q2", qwen_json("qwen2", ",\"sliding_window\":32768,\"use_sliding_window\":false,"
                                                         "\"max_window_layers\":21,\"tie_word_embeddings\":true"));
    CHECK(q2.qkv_bias);
    CHECK(!q2.qk_norm);
    CHECK(q2.head_dim() == 8);
    // Qwen3Config's head_dim defaults to 128 when config.json has none.
    const Config q3 = load_text("q3", qwen_json("qwen3", ",\"attention_bias\":false,\"sliding_window\":null"));
    CHECK(q3.qk_norm);
    CHECK(q3.head_dim() == 128);
    CHECK(load_text("q3_layers", qwen_json("qwen3", ",\"layer_types\":[\"full_attention\",\"full_attention\"]")).qk_norm);

    const auto refused = [](const std::string& name, const std::string& text) {
        return [=] { (void)load_text(name, text); };
    };
    CHECK_THROWS_WITH(refused("sw", qwen_json("qwen2", ",\"use_sliding_window\":true,\"sliding_window\":4096"))(),
                      Catch::StartsWith("[specdec.checkpoint] ") && Catch::Contains("config.json") &&
                          Catch::Contains("use_sliding_window = true is not supported"));
    // Without use_sliding_window the window is None: a "sliding_attention" layer attends to everything too.
    CHECK(load_text("q3_sliding_named", qwen_json("qwen3", ",\"layer_types\":[\"full_attention\",\"sliding_attention\"]")).qk_norm);
    CHECK_THROWS_WITH(refused("lt", qwen_json("qwen3", ",\"layer_types\":[\"full_attention\",\"chunked_attention\"]"))(),
                      Catch::Contains("field 'layer_types[1]' is string \"chunked_attention\", expected \"full_attention\" or "
                                      "\"sliding_attention\""));
    CHECK_THROWS_WITH(refused("lt_len", qwen_json("qwen2", ",\"layer_types\":[\"full_attention\"]"))(),
                      Catch::Contains("field 'layer_types' is array of 1, expected an array of 2 strings"));
    CHECK_THROWS_WITH(refused("bias3", qwen_json("qwen3", ",\"attention_bias\":true"))(),
                      Catch::Contains("attention_bias = true is not supported (biases on q_proj, k_proj, v_proj and o_proj"));
    CHECK_THROWS_WITH(refused("mwl", qwen_json("qwen2", ",\"max_window_layers\":\"all\""))(),
                      Catch::Contains("field 'max_window_layers'"));
    // The Qwen keys are Qwen's: a Llama's config.json with one is refused as an unknown key.
    std::string llama = qwen_json("llama", ",\"use_sliding_window\":false");
    CHECK_THROWS_WITH(refused("llama_sw", llama)(), Catch::Contains("field 'use_sliding_window' (bool false) is not read"));
    // And a Llama keeps refusing a sliding window (Mistral's is read: test_hf_config.cpp).
    CHECK_THROWS_WITH(refused("llama_window", qwen_json("llama", ",\"sliding_window\":4096"))(),
                      Catch::Contains("sliding_window = 4096 is not supported for model_type 'llama'"));
}

TEST_CASE("code that implements Llama's block only refuses a Qwen config by name before touching weights",
          "[checkpoint][qwen][errors]") {
    const test::Block block = GENERATE(test::Block::kQwen2, test::Block::kQwen3);
    const Config c = test::tiny_block_config(block);
    const Weights w = test::random_block_weights(c, 9, 0.3f);
    const std::string feature = block == test::Block::kQwen2 ? "qkv_bias: a Qwen2 block" : "qk_norm: a Qwen3 block";
    // The message of what `f` throws; the prefix, the caller and the block it cannot run must be in it.
    const auto refused = [&](const std::string& prefix, const std::string& what, auto&& f) {
        std::string m = "(nothing thrown)";
        try {
            f();
        } catch (const error& e) {
            m = e.what();
        }
        UNSCOPED_INFO(m);
        return m.starts_with("[specdec." + prefix + "] " + what + ": the model has ") && m.find(feature) != std::string::npos &&
               m.find("CpuModel runs it") != std::string::npos;
    };
    ThreadPool pool(1);
    CHECK(refused("train", "TrainableLlama", [&] { train::TrainableLlama m(c, w, pool); }));
    CHECK(refused("edd", "an EDD drafter's layer (built in the target's shape)", [&] { (void)edd_drafter_config(c); }));
    CHECK(refused("eagle", "a feature drafter's layer (built in the target's shape)", [&] { (void)feature_drafter_config(c, false); }));
    CHECK(refused("eagle", "a feature drafter's layer (built in the target's shape)", [&] { (void)initial_feature_drafter(c, w, Connector::kFc, false, 1); }));
    CHECK(refused("glide", "a GLIDE drafter's layers", [&] { GlideConfig{.draft = c}.validate(); }));
    // A drafter checkpoint built by hand in a Qwen shape: its model_type would read back as a Llama.
    FeatureCheckpoint fc;
    fc.config = c;
    fc.weights = w;
    const fs::path drafters = fresh_dir("drafters");
    CHECK(refused("edd", "save_edd_checkpoint", [&] { save_edd_checkpoint(drafters / "edd", EddCheckpoint{.config = c, .weights = w}); }));
    CHECK(refused("eagle", "save_feature_checkpoint", [&] { save_feature_checkpoint(drafters / "f", fc, SaveFormat::kF32); }));
    CHECK(refused("convert", "save_eagle_layout (the engines' llama_eagle.py)",
                  [&] { save_eagle_layout(drafters / "e", fc, ServingEngine::kSglang, SaveFormat::kF32); }));
    CHECK(fs::is_empty(drafters));
    fs::remove_all(drafters);
    CHECK(refused("widen", "widening", [&] { (void)widened_config(c, widen_preset("110m")); }));
    const fs::path dir = fresh_dir("exports");
    CHECK(refused("llama2c", "save_llama2c (llama2.c's run.c)", [&] { save_llama2c(dir / "model.bin", c, w); }));
    CHECK(fs::is_empty(dir));  // refused before a file was opened
    // A config with both blocks' features is no HF model.
    Config both = c;
    both.qkv_bias = both.qk_norm = true;
    CHECK_THROWS_WITH(both.validate(), Catch::Contains("qkv_bias (Qwen2's block) and qk_norm (Qwen3's) cannot be combined"));
    // A feature drafter trained against a Llama target does not fit a Qwen target of the same shape.
    Config llama = c;
    llama.qkv_bias = llama.qk_norm = false;
    CHECK(target_config_hash(llama) != target_config_hash(c));
    fs::remove_all(dir);
}

}  // namespace test_qwen
