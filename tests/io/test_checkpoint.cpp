// HF checkpoints: config.json + model.safetensors written and read back bit-exactly, and broken
// files rejected with errors that name the file, tensor and value.
#include <filesystem>
#include <cstring>
#include <fstream>

#include <limits>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_checkpoint {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / ("specdec_test_" + name);
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

}  // namespace

TEST_CASE("a checkpoint folder round-trips config and weights bit-exactly", "[checkpoint]") {
    const bool tied = GENERATE(false, true);
    Config cfg = test::tiny_config();
    cfg.tie_word_embeddings = tied;
    cfg.rope_theta = 500000.0f;
    const Weights w = random_weights(cfg, 5, 0.3f);
    const fs::path dir = fresh_dir(tied ? "ck_tied" : "ck");
    SECTION("float32") {
        save_checkpoint(dir, cfg, w, SaveFormat::kF32);
        const Checkpoint back = load_checkpoint(dir);
        CHECK(back.config.hidden_size == cfg.hidden_size);
        CHECK(back.config.num_key_value_heads == cfg.num_key_value_heads);
        CHECK(back.config.rope_theta == cfg.rope_theta);
        CHECK(back.config.tie_word_embeddings == tied);
        CHECK(test::same_bits(back.weights, w, cfg));
    }
    SECTION("bfloat16: rounding once, then stable") {
        save_checkpoint(dir, cfg, w, SaveFormat::kBF16);
        const Checkpoint once = load_checkpoint(dir);
        CHECK_FALSE(test::same_bits(once.weights, w, cfg));
        const fs::path dir2 = fresh_dir("ck_again");
        save_checkpoint(dir2, cfg, once.weights, SaveFormat::kBF16);
        CHECK(test::same_bits(load_checkpoint(dir2).weights, once.weights, cfg));
        // And the model built from it computes what the bf16 weights say.
        CpuModel m(once.config, once.weights);
        const Tree t = Tree::chain(std::vector<int>{1, 2});
        CHECK(m.forward(t, 0).rows() == 2);
    }
}

TEST_CASE("broken checkpoints are rejected naming the file, field or tensor", "[checkpoint][errors]") {
    const Config cfg = test::tiny_config();
    const Weights w = random_weights(cfg, 5, 0.3f);
    const fs::path dir = fresh_dir("ck_broken");
    save_checkpoint(dir, cfg, w, SaveFormat::kF32);
    SECTION("a missing folder") {
        CHECK_THROWS_WITH(load_checkpoint(dir / "nope"), Catch::Contains("not a directory"));
    }
    SECTION("malformed config.json") {
        write_text(dir / "config.json", "{\"hidden_size\": 32,");
        CHECK_THROWS_WITH(load_checkpoint(dir), Catch::Contains("config.json"));
    }
    SECTION("weights holding NaN or Inf (a corrupted file)") {
        Weights bad = w;
        bad.layers[1].wk[7] = std::numeric_limits<float>::quiet_NaN();
        save_checkpoint(dir, cfg, bad, SaveFormat::kF32);
        CHECK_THROWS_WITH(load_checkpoint(dir),
                          Catch::Contains("tensor 'model.layers.1.self_attn.k_proj.weight' holds NaN at element 7"));
        bad = w;
        bad.norm[2] = -std::numeric_limits<float>::infinity();
        save_checkpoint(dir, cfg, bad, SaveFormat::kBF16);
        CHECK_THROWS_WITH(load_checkpoint(dir), Catch::Contains("tensor 'model.norm.weight' holds Inf at element 2"));
    }
    SECTION("a config.json that is a directory") {
        fs::remove(dir / "config.json");
        fs::create_directory(dir / "config.json");
        CHECK_THROWS_WITH(load_checkpoint(dir), Catch::Contains("config.json: is a directory, not a file"));
    }
    SECTION("a missing config field") {
        write_text(dir / "config.json", "{\"hidden_size\": 32}");
        CHECK_THROWS_WITH(load_checkpoint(dir), Catch::Contains("intermediate_size"));
    }
    SECTION("a config the model cannot honour") {
        write_text(dir / "config.json",
                   "{\"hidden_size\":32,\"intermediate_size\":48,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                   "\"vocab_size\":64,\"max_position_embeddings\":128,\"hidden_act\":\"gelu\"}");
        CHECK_THROWS_WITH(load_checkpoint(dir), Catch::Contains("hidden_act 'gelu'"));
    }
    SECTION("weights whose shapes disagree with the config") {
        Config wider = cfg;
        wider.intermediate_size = 64;
        save_config(wider, dir / "config.json");
        CHECK_THROWS_WITH(load_checkpoint(dir), Catch::Contains("model.layers.0.mlp.gate_proj.weight") &&
                                                    Catch::Contains("[48, 32]") && Catch::Contains("[64, 32]"));
    }
    SECTION("a missing tensor") {
        detail::write_tensors(dir / "model.safetensors", SaveFormat::kF32, [&](auto&& put) {
            for_each_tensor(w, cfg, [&](const std::string& name, const std::vector<float>& t, std::size_t) {
                if (name != "model.layers.1.mlp.up_proj.weight") put(name, t, detail::hf_shape(name, cfg));
            });
        });
        CHECK_THROWS_WITH(load_checkpoint(dir), Catch::Contains("model.layers.1.mlp.up_proj.weight"));
    }
    SECTION("more layers declared than the file holds: checked before the layers are allocated") {
        Config deeper = cfg;
        deeper.num_hidden_layers = 1000;
        save_config(deeper, dir / "config.json");
        CHECK_THROWS_WITH(load_checkpoint(dir), Catch::StartsWith("[specdec.checkpoint] ") &&
                                                    Catch::Contains("model.safetensors: config.json declares "
                                                                    "num_hidden_layers = 1000, but the file holds tensors "
                                                                    "for 2 layers (model.layers.0 .. model.layers.1)"));
    }
    SECTION("sizes in config.json beyond what any model needs, named with the bytes") {
        Config huge = cfg;
        huge.num_hidden_layers = 2147483647;  // 463 GB of empty layer records, had the loader trusted it
        save_config(huge, dir / "config.json");
        CHECK_THROWS_WITH(load_checkpoint(dir), Catch::StartsWith("[specdec.checkpoint] ") &&
                                                    Catch::Contains("config.json: [specdec.config] the shape needs ") &&
                                                    Catch::Contains("num_hidden_layers 2147483647 x 30976 bytes per layer"));
    }
    SECTION("a context of two billion positions loads, and its model allocates only what it uses") {
        Config long_context = cfg;
        long_context.max_position_embeddings = 2'000'000'000;
        save_config(long_context, dir / "config.json");
        Checkpoint ck = load_checkpoint(dir);
        CHECK(ck.config.max_position_embeddings == 2'000'000'000);
        CpuModel model(ck.config, std::move(ck.weights));
        CHECK(model.context_size() == 2'000'000'000);
        const std::vector<int> prompt{4, 5};
        CHECK(autoregressive_generate(model, prompt, GenerateOptions{.max_new_tokens = 8}).tokens.size() == 8);
    }
    SECTION("a truncated model.safetensors") {
        const fs::path st = dir / "model.safetensors";
        fs::resize_file(st, fs::file_size(st) / 2);
        CHECK_THROWS_WITH(load_checkpoint(dir), Catch::Contains("model.safetensors"));
    }
}

}  // namespace test_checkpoint
