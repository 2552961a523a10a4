// HF's sharded checkpoints (model.safetensors.index.json + model-0000i-of-0000n.safetensors): written
// by save_sharded_checkpoint, read back to the same logits as one file, and every disagreement
// between the index and its shards refused naming the index, the shard and the tensor.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_sharded_checkpoint {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / ("specdec_test_" + name);
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

/// `text` with the first `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
    const std::size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
}

/// The shape every test shards: untied head, GQA, head_dim 16 (not 32 / 4), llama3 rope scaling.
Config sharded_config() {
    Config c = test::tiny_config();
    c.attention_head_dim = 16;
    c.rope_scaling = RopeScaling{.type = RopeScalingType::kLlama3, .factor = 8.0f, .low_freq_factor = 1.0f,
                                 .high_freq_factor = 4.0f, .original_max_position_embeddings = 32};
    return c;
}

}  // namespace

TEST_CASE("a sharded bf16 checkpoint loads to the same weights and logits as the single file", "[checkpoint][sharded]") {
    const Config cfg = sharded_config();
    const Weights w = random_weights(cfg, 21, 0.3f);
    const fs::path one = fresh_dir("ck_single"), many = fresh_dir("ck_sharded");
    save_checkpoint(one, cfg, w, SaveFormat::kBF16);
    save_sharded_checkpoint(many, cfg, w, SaveFormat::kBF16, 6000);  // ~ a layer's matrices per shard
    REQUIRE(fs::exists(many / "model.safetensors.index.json"));
    REQUIRE_FALSE(fs::exists(many / "model.safetensors"));
    const CheckpointTensors shards = CheckpointTensors::open_folder(many);
    CHECK(shards.shard_count() >= 3);
    CHECK(shards.path().filename() == "model.safetensors.index.json");
    char last[64];
    std::snprintf(last, sizeof last, "model-%05zu-of-%05zu.safetensors", shards.shard_count(), shards.shard_count());
    CHECK(fs::exists(many / last));

    Checkpoint a = load_checkpoint(one), b = load_checkpoint(many);
    CHECK(b.config.head_dim() == 16);
    CHECK(b.config.rope_scaling.type == RopeScalingType::kLlama3);
    for_each_tensor(a.weights, a.config, [&](const std::string& name, const std::vector<float>& t, std::size_t) {
        const TensorInfo* info = shards.find(name);
        REQUIRE(info != nullptr);
        CHECK(info->dtype == DType::kBF16);
        std::vector<float> back(t.size());
        shards.read_floats(*info, back);
        CHECK(back == t);
    });
    for (const WeightFormat format : {WeightFormat::kF32, WeightFormat::kBF16}) {
        CpuModel ma(a.config, a.weights, ModelOptions{.weight_format = format});
        CpuModel mb(b.config, b.weights, ModelOptions{.weight_format = format});
        const Tree text = Tree::chain(std::vector<int>{5, 9, 33, 2, 61, 17, 40});
        const Rows la = ma.forward(text), lb = mb.forward(text);
        CHECK(std::vector<float>(la.data.begin(), la.data.end()) == std::vector<float>(lb.data.begin(), lb.data.end()));
    }
    SECTION("with both a model.safetensors and an index, the single file is read (as transformers does)") {
        save_weights(w, cfg, many / "model.safetensors", SaveFormat::kF32);
        CHECK(CheckpointTensors::open_folder(many).shard_count() == 1);
        CHECK(CheckpointTensors::open_folder(many).find("lm_head.weight")->dtype == DType::kF32);
    }
}

TEST_CASE("an index that disagrees with its shards is refused naming the index, shard and tensor",
          "[checkpoint][sharded][errors]") {
    const Config cfg = sharded_config();
    const Weights w = random_weights(cfg, 22, 0.3f);
    const fs::path dir = fresh_dir("ck_sharded_bad");
    save_sharded_checkpoint(dir, cfg, w, SaveFormat::kBF16, 6000);
    const fs::path index = dir / "model.safetensors.index.json";
    const std::string good = read_text(index);
    const std::string shard1 = "model-00001-of-", norm = "\"model.norm.weight\": \"";
    const auto refused = [&](const std::string& text) {
        write_text(index, text);
        return [&] { (void)load_checkpoint(dir); };
    };
    // Lvalues: Catch2 v2's && keeps references to its operands.
    const auto prefix = Catch::StartsWith("[specdec.checkpoint] ");
    const auto in_index = Catch::Contains("model.safetensors.index.json: ");

    SECTION("a shard the index names is missing") {
        CHECK_THROWS_WITH(refused(replaced(good, shard1, "model-00099-of-"))(),
                          prefix && in_index && Catch::Contains("weight_map names shard 'model-00099-of-") &&
                              Catch::Contains("does not exist"));
    }
    SECTION("a tensor listed twice") {
        CHECK_THROWS_WITH(refused(replaced(good, "\"weight_map\": {", "\"weight_map\": {\"lm_head.weight\": \"x\", "))(),
                          Catch::Contains("model.safetensors.index.json") && Catch::Contains("duplicate key 'lm_head.weight'"));
    }
    SECTION("a shard name that climbs out of the folder") {
        for (const std::string bad : {"../model-00001-of-", "/tmp/model-00001-of-", "sub/model-00001-of-"})
            CHECK_THROWS_WITH(refused(replaced(good, shard1, bad))(),
                              prefix && in_index && Catch::Contains("is not a file name in the model's folder"));
    }
    SECTION("malformed JSON, weight_map absent, not an object, or naming a non-string") {
        CHECK_THROWS_WITH(refused(good.substr(0, good.size() / 2))(), Catch::Contains("model.safetensors.index.json"));
        CHECK_THROWS_WITH(refused("{\"metadata\": {}}")(), prefix && in_index && Catch::Contains("field 'weight_map' is missing"));
        CHECK_THROWS_WITH(refused("{\"weight_map\": [1]}")(),
                          prefix && in_index && Catch::Contains("field 'weight_map' is array of 1, expected an object"));
        CHECK_THROWS_WITH(refused("{\"weight_map\": {\"lm_head.weight\": 3}}")(),
                          prefix && in_index && Catch::Contains("weight_map['lm_head.weight'] is integer 3, expected a shard file name"));
        CHECK_THROWS_WITH(refused("{\"weight_map\": {}}")(), prefix && in_index && Catch::Contains("empty"));
    }
    SECTION("a tensor the index names that its shard lacks, or that another shard holds") {
        // model.norm.weight moved to shard 1 in the index, while it sits in the last shard.
        const std::size_t at = good.find(norm);
        REQUIRE(at != std::string::npos);
        const std::size_t end = good.find('"', at + norm.size());
        const std::string moved = good.substr(0, at + norm.size()) + "model-00001-of-" +
                                  good.substr(at + norm.size() + 15, end - at - norm.size() - 15) + good.substr(end);
        CHECK_THROWS_WITH(refused(moved)(), prefix && in_index && Catch::Contains("tensor 'model.norm.weight' is in shard") &&
                                                Catch::Contains("but weight_map puts it in 'model-00001-of-"));
    }
    SECTION("a shard holding a tensor the index does not list, and a tensor in two shards") {
        write_text(index, good);
        const CheckpointTensors ck = CheckpointTensors::open_folder(dir);
        const std::string first = ck.shard(0).path().filename().string();
        const std::string last = ck.file_of(*ck.find("model.norm.weight")).path().filename().string();
        // Shard 1 rewritten with model.norm.weight added: it is now in two shards.
        const std::vector<float> ones(static_cast<std::size_t>(cfg.hidden_size), 1.0f);
        std::vector<std::pair<std::string, std::vector<float>>> kept;
        for (const TensorInfo& t : ck.shard(0).tensors()) kept.emplace_back(t.name, ck.shard(0).read_floats(t));
        const auto rewrite = [&](const std::string& extra) {
            detail::write_tensors(dir / first, SaveFormat::kBF16, [&](auto&& put) {
                for (const auto& [name, values] : kept) put(name, values, detail::hf_shape(name, cfg));
                put(extra, ones, std::vector<std::int64_t>{cfg.hidden_size});
            });
        };
        rewrite("model.norm.weight");
        CHECK_THROWS_WITH(load_checkpoint(dir), prefix && in_index && Catch::Contains("tensor 'model.norm.weight' is in two shards, '" +
                                                                               last + "' and '" + first + "'"));
        rewrite("model.extra.weight");
        CHECK_THROWS_WITH(load_checkpoint(dir), prefix && in_index && Catch::Contains("shard '" + first +
                                                                               "' holds tensor 'model.extra.weight', "
                                                                               "which weight_map does not list"));
        // The index lists a tensor its shard lacks.
        detail::write_tensors(dir / first, SaveFormat::kBF16, [&](auto&& put) {
            for (std::size_t i = 1; i < kept.size(); ++i) put(kept[i].first, kept[i].second, detail::hf_shape(kept[i].first, cfg));
        });
        CHECK_THROWS_WITH(load_checkpoint(dir), prefix && in_index && Catch::Contains("weight_map puts tensor '" + kept[0].first +
                                                                               "' in shard '" + first +
                                                                               "', which has no such tensor"));
    }
    SECTION("a shard truncated: the shard's own file is named") {
        write_text(index, good);
        const fs::path shard = CheckpointTensors::open_folder(dir).shard(1).path();
        fs::resize_file(shard, fs::file_size(shard) / 2);
        CHECK_THROWS_WITH(load_checkpoint(dir), Catch::StartsWith("[specdec.safetensors] ") &&
                                                    Catch::Contains(shard.filename().string()));
    }
}

}  // namespace test_sharded_checkpoint
