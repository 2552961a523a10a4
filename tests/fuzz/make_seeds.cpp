// tests/fuzz/make_seeds.cpp — writes the seed corpora under tests/fuzz/seeds/<harness>/: the repository's
// own small files (configs, methods files, prompts, tokenizer.json) and tiny files made with the
// library's writers (safetensors, model folders packed as fuzz_common.hpp's split expects, token files,
// a trained 300-token tokenizer). The seeds are committed; rerun this only to regenerate them:
//
//     g++ -std=c++20 -O1 -I. tests/fuzz/make_seeds.cpp -o build/make_seeds -pthread && build/make_seeds
//
// from the repository root (it rewrites its own seeds and leaves the others in tests/fuzz/seeds/).
// SPDX-License-Identifier: MIT
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "specdec.hpp"

namespace fs = std::filesystem;
using namespace specdec;

namespace {

const fs::path kSeeds = "tests/fuzz/seeds";
const fs::path kScratch = fs::temp_directory_path() / "specdec_make_seeds";

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void put(const std::string& harness, const std::string& name, std::string_view bytes) {
    fs::create_directories(kSeeds / harness);
    std::ofstream out(kSeeds / harness / name, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void copy(const std::string& harness, const std::string& name, const fs::path& from) { put(harness, name, read(from)); }

/// A model folder as one input: 4-byte little-endian length of config.json, config.json, model.safetensors.
std::string packed(const fs::path& dir) {
    const std::string config = read(dir / "config.json"), weights = read(dir / "model.safetensors");
    const auto n = static_cast<std::uint32_t>(config.size());
    std::string out(4, '\0');
    std::memcpy(out.data(), &n, 4);
    return out + config + weights;
}

// D 4, H 2 (head_dim 2), Hkv 1, F 4, V 8: a few hundred floats.
Config tiny(int layers, bool tied) {
    return Config{.hidden_size = 4, .intermediate_size = 4, .num_hidden_layers = layers, .num_attention_heads = 2,
                  .num_key_value_heads = 1, .vocab_size = 8, .max_position_embeddings = 16, .tie_word_embeddings = tied};
}

void safetensors_seeds() {
    const std::vector<float> f = {1.0f, -2.5f, 0.0f, 3.0e-39f, 65504.0f, -0.0f};
    const std::vector<bf16> b = {to_bf16(1.0f), to_bf16(-2.0f), to_bf16(0.5f), to_bf16(7.0f)};
    const std::vector<std::uint16_t> h = {0x3C00, 0x0001, 0x7C00, 0xFC00};  // 1, smallest subnormal, +-inf
    const std::vector<double> d = {1.0, -1e-300, 3.5};
    const std::vector<std::int32_t> i = {1, -2, 3};
    const std::vector<std::uint8_t> u = {7, 8, 9, 10, 11};
    std::vector<TensorToWrite> all = {
        {"f32", DType::kF32, {2, 3}, std::as_bytes(std::span(f))},
        {"bf16", DType::kBF16, {4}, std::as_bytes(std::span(b))},
        {"f16", DType::kF16, {2, 2}, std::as_bytes(std::span(h))},
        {"f64", DType::kF64, {3}, std::as_bytes(std::span(d))},
        {"i32", DType::kI32, {3, 1}, std::as_bytes(std::span(i))},
        {"u8", DType::kU8, {5}, std::as_bytes(std::span(u))},
        {"scalar", DType::kF32, {}, std::as_bytes(std::span(f).first(1))},
        {"empty", DType::kF32, {0, 4}, {}},
    };
    const fs::path p = kScratch / "t.safetensors";
    write_safetensors(p, all, {{"format", "pt"}});
    put("safetensors", "mixed_dtypes", read(p));
    write_safetensors(p, std::span(all).first(1));
    put("safetensors", "one_f32", read(p));
    write_safetensors(p, std::span<const TensorToWrite>{}, {});
    put("safetensors", "empty", read(p));
    // A small real model's weights, as the loaders see them.
    save_weights(random_weights(tiny(1, false), 1), tiny(1, false), p, SaveFormat::kBF16);
    put("safetensors", "tiny_model_bf16", read(p));
}

void checkpoint_seeds() {
    const fs::path dir = kScratch / "ck";
    for (const auto& [name, cfg, format] : {std::tuple{"tiny_f32", tiny(1, true), SaveFormat::kF32},
                                            std::tuple{"tiny_bf16_untied", tiny(2, false), SaveFormat::kBF16}}) {
        save_checkpoint(dir, cfg, random_weights(cfg, 2), format);
        put("checkpoint", name, packed(dir));
    }
    for (const char* model : {"target", "small", "mid", "vanilla", "vdm", "glide", "edd"}) {
        const std::string config = read(fs::path("models") / model / "config.json");
        std::string in(4, '\0');
        const auto n = static_cast<std::uint32_t>(config.size());
        std::memcpy(in.data(), &n, 4);
        put("checkpoint", std::string("config_") + model, in + config);  // config only, no weights
    }
}

/// A sharded folder as fuzz_checkpoint_index.cpp reads it: the index's length, the index, its one shard.
void checkpoint_index_seeds() {
    const fs::path dir = kScratch / "ck_index";
    const Config cfg = tiny(1, false);
    save_sharded_checkpoint(dir, cfg, random_weights(cfg, 2), SaveFormat::kBF16, 1 << 20);
    const std::string index = read(dir / "model.safetensors.index.json");
    const std::string shard = read(dir / "model-00001-of-00001.safetensors");
    const auto n = static_cast<std::uint32_t>(index.size());
    std::string out(4, '\0');
    std::memcpy(out.data(), &n, 4);
    put("checkpoint_index", "tiny_bf16_untied", out + index + shard);
}

void glide_seeds() {
    const fs::path dir = kScratch / "glide";
    const Config target = tiny(2, true);
    for (const auto& [name, cross] : {std::pair{"tiny_cross", true}, std::pair{"tiny_vanilla", false}}) {
        const GlideConfig gc = glide_config_for(tiny(1, true), target, cross);
        save_glide_checkpoint(dir, gc, random_glide_weights(gc, 3), SaveFormat::kBF16);
        put("glide_checkpoint", name, packed(dir));
    }
    // Beside a target with RoPE scaling: glide_target_rope_scaling, as rope_scaling and as a factor table.
    Config llama3 = target, table = target;
    llama3.rope_scaling = {.type = RopeScalingType::kLlama3, .factor = 8.0f, .original_max_position_embeddings = 16};
    table.rope_scaling = {.type = RopeScalingType::kFactors, .factors = std::vector<float>(target.head_dim() / 2, 2.0f)};
    for (const auto& [name, scaled] : {std::pair{"tiny_cross_llama3", &llama3}, std::pair{"tiny_cross_factors", &table}}) {
        const GlideConfig gc = glide_config_for(tiny(1, true), *scaled, true);
        save_glide_checkpoint(dir, gc, random_glide_weights(gc, 3), SaveFormat::kBF16);
        put("glide_checkpoint", name, packed(dir));
    }
    const std::string config = read("models/glide/config.json");
    std::string in(4, '\0');
    const auto n = static_cast<std::uint32_t>(config.size());
    std::memcpy(in.data(), &n, 4);
    put("glide_checkpoint", "config_models_glide", in + config);
}

void edd_seeds() {
    const fs::path dir = kScratch / "edd";
    const Config c = edd_drafter_config(tiny(4, true));
    save_edd_checkpoint(dir, EddCheckpoint{c, random_weights(c, 4), 1}, SaveFormat::kBF16);
    put("edd_checkpoint", "tiny", packed(dir));
    const std::string config = read("models/edd/config.json");
    std::string in(4, '\0');
    const auto n = static_cast<std::uint32_t>(config.size());
    std::memcpy(in.data(), &n, 4);
    put("edd_checkpoint", "config_models_edd", in + config);
}

void token_file_seeds() {
    const fs::path p = kScratch / "tokens.bin";
    train::write_token_file(p.string(), std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    put("token_file", "u16", read(p));
    train::write_token_file(p.string(), std::vector<int>{70000, 0, 1, 65535, 65536, 3});
    put("token_file", "u32", read(p));
    train::write_token_file(p.string(), std::vector<int>{});
    put("token_file", "empty", read(p));
}

void tokenizer_seeds() {
    copy("tokenizer", "models_tokenizer.json", "models/tokenizer.json");
    const std::string corpus = read("data/corpus/test.txt").substr(0, 20000);
    const Tokenizer small = Tokenizer::train(corpus, 300, {"<|endoftext|>", "<|pad|>"});
    put("tokenizer", "trained_300.json", small.to_json());
    // By hand: bytes a, b, space (Ġ) only, two merges in both spellings, an added token, ignore_merges.
    put("tokenizer", "hand_partial.json",
        R"({"added_tokens":[{"id":0,"content":"<|endoftext|>","special":true}],"normalizer":null,)"
        R"("pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},)"
        R"("post_processor":null,"decoder":{"type":"ByteLevel"},"model":{"type":"BPE","ignore_merges":true,)"
        R"("vocab":{"<|endoftext|>":0,"a":1,"b":2,"Ġ":3,"ab":4,"Ġab":5},"merges":["a b",["Ġ","ab"]]}})");
    // The other kinds: SentencePiece-style with byte fallback, a Llama-3-style byte-level file (both
    // from tests/data/tokenizers/), and by hand a Metaspace one without byte fallback (unk, fuse_unk).
    copy("tokenizer", "sp_tiny.json", "tests/data/tokenizers/sp_tiny.tokenizer.json");
    copy("tokenizer", "llama3_tiny.json", "tests/data/tokenizers/llama3_tiny.tokenizer.json");
    copy("tokenizer", "qwen_tiny.json", "tests/data/tokenizers/qwen_tiny.tokenizer.json");  // NFC, Qwen2's Split
    put("tokenizer", "hand_metaspace.json",
        R"({"added_tokens":[{"id":0,"content":"<unk>","special":true},{"id":1,"content":"<s>","special":true}],)"
        R"("normalizer":null,"pre_tokenizer":{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true},)"
        R"("post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},)"
        R"({"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"<s>":{"id":"<s>","ids":[1],"tokens":["<s>"]}}},)"
        R"("decoder":{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true},)"
        R"("model":{"type":"BPE","unk_token":"<unk>","fuse_unk":true,"byte_fallback":false,)"
        R"("vocab":{"<unk>":0,"<s>":1,"▁":2,"a":3,"b":4,"▁a":5,"ab":6,"▁ab":7},"merges":["▁ a",["a","b"],["▁a","b"]]}})");
}

void json_seeds() {
    for (const char* model : {"target", "glide", "edd"})
        copy("json", std::string("config_") + model + ".json", fs::path("models") / model / "config.json");
    copy("json", "methods.json", "examples/bench/methods.json");
    copy("json", "tokenizer_train.json", "models/tokenizer.train.json");
    put("json", "scalars.json", R"([0,-0,-0.0,1e308,1e-400,-9223372036854775808,9223372036854775808,1.5e3,true,false,null])");
    put("json", "strings.json", R"({"a":"\u00e9\ud83d\ude42\n\t\"\\\/","":"","k":{"x":[[],{}]}})");
    std::string big = "{";
    for (int i = 0; i < 20; ++i) big += (i ? "," : "") + std::string("\"k") + std::to_string(i) + "\":" + std::to_string(i);
    put("json", "object_20_members.json", big + "}");
}

void bench_seeds() {
    for (const char* f : {"methods.json", "methods_edd.json", "methods_glide.json"})
        copy("bench_config", f, fs::path("examples/bench") / f);
    put("bench_config", "cascade.json",
        R"([{"name":"ar","method":"autoregressive"},{"name":"cs","method":"cascade","drafters":["mid","small","maxgram"],)"
        R"("k_matrix":[[0,2,1],[0,0,3],[0,0,0]],"lenience":2.0,"children":3,"max_drafts":40},)"
        R"({"name":"x","method":"expanded","drafter":"small","gamma":4,"expansion":"cape","max_drafts":20}])");
}

void prompts_seeds() {
    copy("prompts", "prompts.jsonl", "data/prompts.jsonl");
    put("prompts", "two.jsonl", "{\"id\":\"a\",\"kind\":\"k\",\"text\":\"hello\"}\n\n{\"id\":\"b\",\"kind\":\"q\",\"text\":\"x\"}\n");
}

/// A llama2.c model and tokenizer as one input: 4-byte little-endian length of the model, the model, the tokenizer.
std::string packed_llama2c(const std::string& model, const std::string& tokenizer) {
    std::string out(4, '\0');
    const auto n = static_cast<std::uint32_t>(model.size());
    std::memcpy(out.data(), &n, 4);
    return out + model + tokenizer;
}

/// A version 2 (Q8_0) file for `c`: the version 1 header with version 2 and `group`, unit norms, and each
/// matrix as int8 values i % 255 - 127 with one scale 0.01 per group.
std::string llama2c_q8(const Config& c, std::int32_t group) {
    const fs::path p = kScratch / "v1.bin";
    save_llama2c(p, c, random_weights(c, 7), Llama2cVersion::kFloat32);
    std::string out = read(p).substr(0, 256);
    const std::int32_t version = 2;
    std::memcpy(out.data() + 4, &version, 4);
    std::memcpy(out.data() + 37, &group, 4);
    Weights w;
    w.layers.resize(static_cast<std::size_t>(c.num_hidden_layers));
    detail::for_each_llama2c_tensor(w, c, 2, [&](const detail::Llama2cTensor& t, std::vector<float>*) {
        const std::int64_t n = t.rows * t.cols;
        if (!t.matrix) {
            const float one = 1.0f;
            for (std::int64_t i = 0; i < n; ++i) out.append(reinterpret_cast<const char*>(&one), 4);
            return;
        }
        for (std::int64_t i = 0; i < n; ++i) out += static_cast<char>(i % 255 - 127);
        const float scale = 0.01f;
        for (std::int64_t g = 0; g < n / group; ++g) out.append(reinterpret_cast<const char*>(&scale), 4);
    });
    return out;
}

void llama2c_seeds() {
    const fs::path p = kScratch / "l2c.bin";
    // The tokenizer: <unk>, <s>, </s>, the 256 byte tokens, then " ", letters and merges with scores.
    std::vector<std::string> tokens = {"<unk>", "\n<s>\n", "\n</s>\n"};
    std::vector<float> scores(3, 0.0f);
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        tokens.emplace_back(name);
        scores.push_back(0.0f);
    }
    const std::vector<std::pair<std::string, float>> extra = {
        {" ", -100.0f}, {"a", -100.0f}, {"e", -100.0f}, {"n", -100.0f}, {"an", 2.0f}, {" a", 3.0f}, {" an", 4.0f},
        {"\xC3\xA9", -100.0f}, {"aa", 1.0f}, {"never", -1e11f}};
    for (const auto& [t, s] : extra) {
        tokens.push_back(t);
        scores.push_back(s);
    }
    Llama2cTokenizer::from_vocab(tokens, scores).save(p);
    const std::string bytes_tokenizer = read(p);
    Llama2cTokenizer::from_vocab({"<unk>", "<s>", "</s>", " ", "a", "b", "ab"}, {0, 0, 0, -1, -1, -1, 5}).save(p);
    const std::string small_tokenizer = read(p);
    save_llama2c(p, tiny(1, true), random_weights(tiny(1, true), 5), Llama2cVersion::kLegacy);
    put("llama2c", "v0_tied", packed_llama2c(read(p), bytes_tokenizer));
    save_llama2c(p, tiny(2, false), random_weights(tiny(2, false), 6), Llama2cVersion::kLegacy);
    put("llama2c", "v0_untied", packed_llama2c(read(p), small_tokenizer));
    save_llama2c(p, tiny(1, false), random_weights(tiny(1, false), 7), Llama2cVersion::kFloat32);
    put("llama2c", "v1_untied", packed_llama2c(read(p), small_tokenizer));
    std::string long_context = read(p);  // seq_len 2^31 - 2: loads, but no CpuModel has that many KV rows
    const std::int32_t seq_len = INT32_MAX - 1;
    std::memcpy(long_context.data() + 32, &seq_len, 4);
    put("llama2c", "v1_seq_len_near_2e31", packed_llama2c(long_context, small_tokenizer));
    put("llama2c", "v2_tied", packed_llama2c(llama2c_q8(tiny(1, true), 4), bytes_tokenizer));
}

void gguf_seeds() {
    const fs::path p = kScratch / "model.gguf";
    const Config c{.hidden_size = 32, .intermediate_size = 32, .num_hidden_layers = 1, .num_attention_heads = 2,
                   .num_key_value_heads = 1, .vocab_size = 300, .max_position_embeddings = 16, .tie_word_embeddings = true};
    const Tokenizer bpe = Tokenizer::train("Once upon a time, there was a little girl named Lily. She liked tea.", 300);
    const GgufTokenizer byte_level(bpe);
    save_gguf(p, c, random_weights(c, 21), &byte_level, GgufSaveType::kQ8_0);
    put("gguf", "q8_0_gpt2_tokenizer", read(p));
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<float> scores(3, 0.0f);
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        tokens.emplace_back(name);
        scores.push_back(0.0f);
    }
    for (const char* t : {" ", "a", "n", " a", "an", " an"}) tokens.emplace_back(t), scores.push_back(-static_cast<float>(tokens.size()));
    const GgufTokenizer spm(Llama2cTokenizer::from_vocab(tokens, scores));
    Config s = c;
    s.vocab_size = static_cast<int>(tokens.size());
    s.tie_word_embeddings = false;
    save_gguf(p, s, random_weights(s, 22), &spm, GgufSaveType::kF16);
    put("gguf", "f16_untied_llama_tokenizer", read(p));
    Config small = c;
    small.vocab_size = 8;
    save_gguf(p, small, random_weights(small, 23), nullptr, GgufSaveType::kBF16);
    put("gguf", "bf16_no_tokenizer", read(p));
}

}  // namespace

int main() try {
    // Its own seeds are overwritten; the others stay (inputs fuzzing found, kept as regressions, and seeds
    // other tools wrote), so a rerun loses none of them.
    fs::create_directories(kScratch);
    json_seeds();
    safetensors_seeds();
    checkpoint_seeds();
    checkpoint_index_seeds();
    glide_seeds();
    edd_seeds();
    tokenizer_seeds();
    bench_seeds();
    token_file_seeds();
    prompts_seeds();
    llama2c_seeds();
    gguf_seeds();
    fs::remove_all(kScratch);
    std::printf("seeds written under %s\n", kSeeds.c_str());
    return 0;
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
