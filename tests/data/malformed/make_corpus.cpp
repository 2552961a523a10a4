// make_corpus.cpp — writes the malformed-file corpus of tests/data/malformed/ (README.md lists each file,
// what is wrong with it and the error it must give; tests/io/test_malformed_corpus.cpp checks them).
// The files are committed; rerun this only to change the corpus, from the repository root:
//
//     g++ -std=c++20 -O1 -I. tests/data/malformed/make_corpus.cpp -o /tmp/make_corpus && /tmp/make_corpus
//
// Each case is a few lines here and one file (or folder) there: broken on purpose in exactly one way.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "specdec.hpp"

using namespace specdec;
namespace fs = std::filesystem;

namespace {

const fs::path kRoot = "tests/data/malformed";

void write(const fs::path& rel, const std::string& bytes) {
    const fs::path p = kRoot / rel;
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(std::uint64_t v) {
    std::string s(8, '\0');
    std::memcpy(s.data(), &v, 8);
    return s;
}
std::string le32(std::uint32_t v) {
    std::string s(4, '\0');
    std::memcpy(s.data(), &v, 4);
    return s;
}

/// A safetensors file: the 8-byte length, the header as given, then `data_bytes` zero bytes.
std::string safetensors(const std::string& header, std::size_t data_bytes) {
    return le64(header.size()) + header + std::string(data_bytes, '\0');
}

/// A token file: magic, version, width, count as given, then the ids at that width.
std::string token_file(std::uint32_t width, std::uint64_t count, const std::vector<std::uint32_t>& ids,
                       std::string magic = "SDTOKENS", std::uint32_t version = 1) {
    std::string s = magic + le32(version) + le32(width) + le64(count) + std::string(8, '\0');
    for (std::uint32_t id : ids) s += width == 2 ? le32(id).substr(0, 2) : le32(id);
    return s;
}

/// A valid LlamaConfig's fields with one replaced (`field` -> `raw JSON value`), or removed (value "").
std::string config_json(const std::string& field = "", const std::string& value = "") {
    const std::vector<std::pair<std::string, std::string>> fields = {
        {"hidden_size", "32"},          {"intermediate_size", "48"}, {"num_hidden_layers", "2"},
        {"num_attention_heads", "4"},   {"num_key_value_heads", "2"}, {"vocab_size", "64"},
        {"max_position_embeddings", "128"}, {"rope_theta", "10000.0"}, {"rms_norm_eps", "1e-05"},
        {"tie_word_embeddings", "false"}, {"hidden_act", "\"silu\""}};
    std::string s = "{\n";
    bool first = true;
    for (const auto& [k, v] : fields) {
        std::string val = k == field ? value : v;
        if (k == field && value.empty()) continue;
        s += std::string(first ? "" : ",\n") + "  \"" + k + "\": " + val;
        first = false;
    }
    return s + "\n}\n";
}

/// A tokenizer.json over the bytes h, e, l, o (ids 1..4) and one special token (id 0); `vocab`,
/// `merges` and `added` replace the defaults when given.
std::string tokenizer_json(const std::string& vocab = R"({"<|endoftext|>": 0, "h": 1, "e": 2, "l": 3, "o": 4, "he": 5})",
                           const std::string& merges = R"(["h e"])",
                           const std::string& added = R"([{"id": 0, "content": "<|endoftext|>", "special": true}])") {
    return "{\"version\": \"1.0\", \"added_tokens\": " + added +
           ",\n \"normalizer\": null, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false},\n"
           " \"post_processor\": null, \"decoder\": {\"type\": \"ByteLevel\"},\n"
           " \"model\": {\"type\": \"BPE\", \"vocab\": " + vocab + ",\n  \"merges\": " + merges + "}}\n";
}

/// A SentencePiece-style tokenizer.json in Llama-2's form over <unk> <s> </s>, the byte tokens <0x00> up
/// to (not including) `end_byte`, and "▁" h e l o he; `normalizer` and `decoder` replace the defaults.
std::string sentencepiece_json(int end_byte = 256,
                               const std::string& normalizer = R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})",
                               const std::string& decoder = R"({"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})") {
    std::string vocab = R"({"<unk>": 0, "<s>": 1, "</s>": 2)";
    int id = 3;
    for (int b = 0; b < end_byte; ++b) {
        char name[16];  // "<0x%02X>" of any int
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        vocab += ", \"" + std::string(name) + "\": " + std::to_string(id++);
    }
    for (const char* t : {"\\u2581", "h", "e", "l", "o", "he"}) vocab += ", \"" + std::string(t) + "\": " + std::to_string(id++);
    return "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true}, "
           "{\"id\": 1, \"content\": \"<s>\", \"special\": true}, {\"id\": 2, \"content\": \"</s>\", \"special\": true}],\n"
           " \"normalizer\": " + normalizer + ",\n \"pre_tokenizer\": null, \"post_processor\": null,\n \"decoder\": " + decoder +
           ",\n \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"byte_fallback\": true, \"vocab\": " + vocab +
           "},\n  \"merges\": [\"h e\"]}}\n";
}

/// tokenizer_json() with its pre_tokenizer replaced.
std::string with_pre_tokenizer(const std::string& pre) {
    std::string s = tokenizer_json();
    const std::string old = R"({"type": "ByteLevel", "add_prefix_space": false})";
    s.replace(s.find(old), old.size(), pre);
    return s;
}

/// A tiny Llama with random weights, bf16, as HF writes it.
Config tiny_llama(int vocab = 16, int layers = 1) {
    return Config{.hidden_size = 8, .intermediate_size = 16, .num_hidden_layers = layers, .num_attention_heads = 2,
                  .num_key_value_heads = 1, .vocab_size = vocab, .max_position_embeddings = 32,
                  .tie_word_embeddings = true};
}

void json_cases() {
    const std::string ok = config_json();
    write("json/bom.json", "\xEF\xBB\xBF" + ok);
    write("json/nan.json", config_json("rope_theta", "NaN"));
    write("json/infinity.json", config_json("rope_theta", "-Infinity"));
    write("json/number_overflow.json", config_json("rope_theta", "1e400"));
    write("json/invalid_utf8_key.json", "{\"hidden\xFF_size\": 32}\n");
    write("json/invalid_utf8_string.json", config_json("hidden_act", "\"sil\xC0\xAF\""));  // an overlong '/'
    write("json/lone_high_surrogate.json", config_json("hidden_act", "\"\\ud800\""));
    write("json/lone_low_surrogate.json", config_json("hidden_act", "\"\\udc00x\""));
    write("json/truncated.json", ok.substr(0, ok.size() / 2));
    write("json/trailing_comma.json", "{\"hidden_size\": 32,}\n");
    write("json/duplicate_key.json", "{\"hidden_size\": 32, \"hidden_size\": 64}\n");
    write("json/empty.json", "");
    write("json/not_an_object.json", "[32, 48]\n");
}

void checkpoint_cases() {
    write("checkpoint/hidden_1e308/config.json", config_json("hidden_size", "1e308"));
    write("checkpoint/hidden_beyond_int64/config.json", config_json("hidden_size", "99999999999999999999999"));
    write("checkpoint/hidden_as_string/config.json", config_json("hidden_size", "\"32\""));
    write("checkpoint/negative_heads/config.json", config_json("num_attention_heads", "-4"));
    write("checkpoint/heads_not_dividing_hidden/config.json", config_json("hidden_size", "30"));
    write("checkpoint/vocab_zero/config.json", config_json("vocab_size", "0"));
    write("checkpoint/absurd_size/config.json", [] {
        std::string s = config_json("vocab_size", "2000000000");
        s.replace(s.find("\"intermediate_size\": 48"), 23, "\"intermediate_size\": 1000000000");
        return s;
    }());
    write("checkpoint/rms_norm_eps_underflow/config.json", config_json("rms_norm_eps", "1e-400"));
    write("checkpoint/rope_theta_beyond_float/config.json", config_json("rope_theta", "1e39"));
    write("checkpoint/tie_not_bool/config.json", config_json("tie_word_embeddings", "\"yes\""));
    write("checkpoint/missing_vocab_size/config.json", config_json("vocab_size", ""));
    write("checkpoint/config_is_a_directory/config.json/.gitkeep", "");
    // PyTorch's pickled weights instead of safetensors (older HF Llama folders): named, never unpickled.
    write("checkpoint/pytorch_model_bin/config.json", config_json());
    write("checkpoint/pytorch_model_bin/pytorch_model.bin", "PK\x03\x04 a pickle in a zip: never opened");
    // Weights that disagree with their config.json.
    const Config c = tiny_llama();
    save_checkpoint(kRoot / "checkpoint/layers_mismatch", c, random_weights(c, 1, 0.3f));
    Config two = c;
    two.num_hidden_layers = 2;
    save_config(two, kRoot / "checkpoint/layers_mismatch/config.json");
    const Config wide = tiny_llama(20);
    save_checkpoint(kRoot / "checkpoint/shape_mismatch", wide, random_weights(wide, 2, 0.3f));
    save_config(c, kRoot / "checkpoint/shape_mismatch/config.json");
    // Fields a Llama cannot honour: refused by name, not ignored.
    const auto with = [](const std::string& extra) {
        std::string s = config_json();
        return s.replace(s.rfind('}'), 1, ", " + extra + "}");
    };
    write("checkpoint/rope_scaling_yarn/config.json", with("\"rope_scaling\": {\"rope_type\": \"yarn\", \"original_max_position_embeddings\": 64}"));
    write("checkpoint/rope_scaling_no_factor/config.json", with("\"rope_scaling\": {\"type\": \"linear\"}"));
    write("checkpoint/rope_scaling_not_object/config.json", with("\"rope_scaling\": \"llama3\""));
    write("checkpoint/sliding_window_zero/config.json", with("\"model_type\": \"mistral\", \"sliding_window\": 0"));
    write("checkpoint/sliding_window_llama/config.json", with("\"sliding_window\": 4096"));
    write("checkpoint/mixture_of_experts/config.json", with("\"num_local_experts\": 8"));
    write("checkpoint/qwen2_sliding_window/config.json",
          with("\"model_type\": \"qwen2\", \"use_sliding_window\": true, \"sliding_window\": 4096"));
    write("checkpoint/head_dim_odd/config.json", with("\"head_dim\": 7"));
    // A key the reader does not know, and two RoPE spellings (4.x's rope_theta, 5.x's rope_parameters) at odds.
    write("checkpoint/unknown_key/config.json", with("\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4}"));
    write("checkpoint/rope_spellings_disagree/config.json",
          with("\"rope_parameters\": {\"rope_theta\": 500000.0, \"rope_type\": \"default\"}"));
}

/// A sharded checkpoint of tiny_llama (one tensor or so per shard) at sharded/<name>, and its index text.
std::string sharded(const std::string& name) {
    const Config c = tiny_llama();
    save_sharded_checkpoint(kRoot / "sharded" / name, c, random_weights(c, 6, 0.3f), SaveFormat::kBF16, 200);
    std::ifstream in(kRoot / "sharded" / name / "model.safetensors.index.json", std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The first shard's file name in an index's text.
std::string first_shard(const std::string& index_text) { return index_text.substr(index_text.find("model-00001-of-"), 32); }

/// `text` with its first `from` replaced by `to`.
std::string replace_first(std::string text, const std::string& from, const std::string& to) {
    return text.replace(text.find(from), from.size(), to);
}

void sharded_cases() {
    const std::string index = "model.safetensors.index.json";
    const auto rewrite_index = [&](const std::string& name, const std::string& text) {
        write("sharded/" + name + "/" + index, text);
    };
    rewrite_index("missing_shard", replace_first(sharded("missing_shard"), "model-00002-of-", "model-00099-of-"));
    {
        const std::string text = sharded("tensor_twice_in_index");
        rewrite_index("tensor_twice_in_index", replace_first(text, "\"weight_map\": {",
                                                             "\"weight_map\": {\n    \"model.norm.weight\": \"" +
                                                                 first_shard(text) + "\","));
    }
    rewrite_index("path_traversal", replace_first(sharded("path_traversal"), "\"model-00002-of-", "\"../model-00002-of-"));
    rewrite_index("bad_json", sharded("bad_json").substr(0, 40));
    rewrite_index("weight_map_not_object", "{\"weight_map\": [\"" + first_shard(sharded("weight_map_not_object")) + "\"]}");
    (void)sharded("weight_map_value_not_string");
    rewrite_index("weight_map_value_not_string", "{\"weight_map\": {\"lm_head.weight\": 1}}");
    // model.norm.weight sits in the last shard; the index says the first.
    {
        const std::string text = sharded("tensor_in_wrong_shard");
        const std::string key = "\"model.norm.weight\": \"model-000";
        const std::size_t at = text.find(key) + key.size();
        rewrite_index("tensor_in_wrong_shard", text.substr(0, at) + "01" + text.substr(at + 2));
    }
    // Shard files rewritten: a tensor in two shards, one the index lists but its shard lacks, one it does not list.
    const Config c = tiny_llama();
    const Weights w = random_weights(c, 6, 0.3f);
    const auto shard = [&](const std::string& name, std::vector<std::string> tensors) {
        const fs::path dir = kRoot / "sharded" / name;
        std::ifstream in(dir / "model.safetensors.index.json", std::ios::binary);
        const std::string first = first_shard(std::string(std::istreambuf_iterator<char>(in), {}));
        detail::write_tensors(dir / first, SaveFormat::kBF16, [&](auto&& put) {
            for (const std::string& t : tensors)
                put(t, t == "model.norm.weight" || t == "model.extra.weight" ? w.norm : w.embed,
                    detail::hf_shape(t == "model.extra.weight" ? "model.norm.weight" : t, c));
        });
    };
    (void)sharded("tensor_in_two_shards");
    shard("tensor_in_two_shards", {"model.embed_tokens.weight", "model.norm.weight"});
    (void)sharded("tensor_missing_from_shard");
    shard("tensor_missing_from_shard", {});
    (void)sharded("unlisted_tensor");
    shard("unlisted_tensor", {"model.embed_tokens.weight", "model.extra.weight"});
}

void safetensors_cases() {
    const auto t = [](const std::string& name, const std::string& shape, const std::string& offsets,
                      const std::string& dtype = "F32") {
        return "\"" + name + "\": {\"dtype\": \"" + dtype + "\", \"shape\": " + shape + ", \"data_offsets\": " + offsets + "}";
    };
    write("safetensors/shape_overflow.safetensors",
          safetensors("{" + t("w", "[1099511627776, 1099511627776]", "[0, 4]") + "}", 4));
    write("safetensors/offsets_reversed.safetensors", safetensors("{" + t("w", "[1]", "[8, 4]") + "}", 8));
    write("safetensors/offsets_overlap.safetensors",
          safetensors("{" + t("a", "[2]", "[0, 8]") + ", " + t("b", "[2]", "[4, 12]") + "}", 12));
    write("safetensors/offsets_past_end.safetensors", safetensors("{" + t("w", "[4]", "[0, 16]") + "}", 8));
    write("safetensors/offsets_negative.safetensors", safetensors("{" + t("w", "[1]", "[-4, 0]") + "}", 8));
    write("safetensors/size_mismatch.safetensors", safetensors("{" + t("w", "[3]", "[0, 8]") + "}", 8));
    write("safetensors/duplicate_name.safetensors",
          safetensors("{" + t("w", "[1]", "[0, 4]") + ", " + t("w", "[1]", "[4, 8]") + "}", 8));
    write("safetensors/unknown_dtype.safetensors", safetensors("{" + t("w", "[1]", "[0, 4]", "F33") + "}", 4));
    write("safetensors/negative_dim.safetensors", safetensors("{" + t("w", "[-1, 4]", "[0, 4]") + "}", 4));
    write("safetensors/header_past_end.safetensors", le64(1000) + "{}");
    write("safetensors/header_length_huge.safetensors", le64(0xFFFFFFFFFFFFFFF0ull) + "{}");
    write("safetensors/shorter_than_length.safetensors", std::string("\x02\x00\x00", 3));
    write("safetensors/header_not_json.safetensors", safetensors("this is not JSON", 0));
    write("safetensors/header_bom.safetensors", safetensors("\xEF\xBB\xBF{" + t("w", "[1]", "[0, 4]") + "}", 4));
    write("safetensors/header_not_object.safetensors", safetensors("[1, 2]", 0));
    write("safetensors/metadata_not_string.safetensors",
          safetensors("{\"__metadata__\": {\"format\": 1}, " + t("w", "[1]", "[0, 4]") + "}", 4));
}

void tokenizer_cases() {
    write("tokenizer/merge_unknown_token.json", tokenizer_json(R"({"<|endoftext|>": 0, "h": 1, "e": 2, "l": 3, "o": 4, "he": 5})",
                                                             R"(["h e", "l x"])"));
    write("tokenizer/duplicate_vocab_id.json",
          tokenizer_json(R"({"<|endoftext|>": 0, "h": 1, "e": 2, "l": 3, "o": 3, "he": 5})"));
    write("tokenizer/empty_vocab.json", tokenizer_json("{}", "[]", "[]"));
    write("tokenizer/duplicate_added_token.json",
          tokenizer_json(R"({"<|endoftext|>": 0, "h": 1, "e": 2, "l": 3, "o": 4, "he": 5, "<|endoftext|>x": 6})", R"(["h e"])",
                         R"([{"id": 0, "content": "<|endoftext|>"}, {"id": 6, "content": "<|endoftext|>"}])"));
    write("tokenizer/duplicate_added_id.json",
          tokenizer_json(R"({"<|endoftext|>": 0, "h": 1, "e": 2, "l": 3, "o": 4, "he": 5})", R"(["h e"])",
                         R"([{"id": 0, "content": "<|endoftext|>"}, {"id": 0, "content": "<|pad|>"}])"));
    write("tokenizer/merge_makes_added_token.json",
          tokenizer_json(R"({"<|endoftext|>": 0, "h": 1, "e": 2, "l": 3, "o": 4, "he": 5})", R"(["h e"])",
                         R"([{"id": 0, "content": "<|endoftext|>"}, {"id": 5, "content": "he"}])"));
    write("tokenizer/vocab_id_huge.json",
          tokenizer_json(R"({"<|endoftext|>": 0, "h": 1, "e": 2, "l": 3, "o": 4, "he": 4294967296})"));
    write("tokenizer/vocab_id_negative.json",
          tokenizer_json(R"({"<|endoftext|>": 0, "h": 1, "e": 2, "l": -3, "o": 4, "he": 5, "x": 3})"));
    write("tokenizer/vocab_hole.json", tokenizer_json(R"({"<|endoftext|>": 0, "h": 1, "e": 2, "l": 3, "o": 4, "he": 6, "x": 7})"));
    write("tokenizer/not_bpe.json", [] {
        std::string s = tokenizer_json();
        s.replace(s.find("\"BPE\""), 5, "\"WordPiece\"");
        return s;
    }());
    write("tokenizer/is_a_directory/.gitkeep", "");
    write("tokenizer/byte_fallback_missing_bytes.json", sentencepiece_json(0x41));
    write("tokenizer/unknown_normalizer.json", [] {
        std::string s = tokenizer_json();
        s.replace(s.find("\"normalizer\": null"), 18, R"("normalizer": {"type": "NFKC"})");
        return s;
    }());
    write("tokenizer/unknown_pre_tokenizer.json", with_pre_tokenizer(R"({"type": "Whitespace"})"));
    write("tokenizer/unknown_split_pattern.json",
          with_pre_tokenizer(R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\w+|[^\\w\\s]+"}, )"
                             R"("behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})"));
    write("tokenizer/unknown_decoder_step.json",
          sentencepiece_json(256, R"({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"})",
                             R"({"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "CTC"}]})"));
}

void token_file_cases() {
    write("token_file/short_header.tokens", std::string("SDTOKENS\x01\x00", 10));
    write("token_file/count_past_end.tokens", token_file(2, 100, {1, 2, 3}));
    write("token_file/count_huge.tokens", token_file(4, std::uint64_t{1} << 62, {1, 2, 3}));
    write("token_file/id_2pow31.tokens", token_file(4, 3, {1, 0x80000000u, 2}));
    write("token_file/id_past_vocab.tokens", token_file(2, 3, {3, 64, 5}));
    write("token_file/bad_magic.tokens", token_file(2, 1, {1}, "SDTOKENZ"));
    write("token_file/bad_version.tokens", token_file(2, 1, {1}, "SDTOKENS", 2));
    write("token_file/bad_width.tokens", token_file(3, 1, {1}));
}

/// The target every glide/ and edd/ case is checked against: tests/helpers.hpp's tiny_config()
/// (hidden 32, 4 heads of 8, 2 kv heads, 2 layers, vocabulary 64, context 128).
Config test_target(int vocab = 64, int hidden = 32, int layers = 2) {
    return Config{.hidden_size = hidden, .intermediate_size = 48, .num_hidden_layers = layers, .num_attention_heads = 4,
                  .num_key_value_heads = 2, .vocab_size = vocab, .max_position_embeddings = 128};
}

void glide_case(const std::string& name, const Config& drafted_for) {
    const Config draft{.hidden_size = 16, .intermediate_size = 24, .num_hidden_layers = 1, .num_attention_heads = 2,
                       .num_key_value_heads = 1, .vocab_size = drafted_for.vocab_size, .max_position_embeddings = 128,
                       .tie_word_embeddings = true};
    const GlideConfig g = glide_config_for(draft, drafted_for);
    save_glide_checkpoint(kRoot / "glide" / name, g, random_glide_weights(g, 3, 0.3f));
}

void edd_case(const std::string& name, const Config& drafted_for, int layer) {
    Config d = edd_drafter_config(drafted_for);
    d.intermediate_size = 16;
    d.tie_word_embeddings = true;
    save_edd_checkpoint(kRoot / "edd" / name, EddCheckpoint{d, random_weights(d, 4, 0.3f), layer});
}

void drafter_cases() {
    glide_case("vocab_mismatch", test_target(72));
    glide_case("head_dim_mismatch", test_target(64, 16));      // trained beside 4 heads of 4
    glide_case("target_layers_mismatch", test_target(64, 32, 3));
    write("glide/cross_heads_zero/config.json", [] {
        glide_case("cross_heads_zero", test_target());
        std::string s = detail::read_text_file(kRoot / "glide/cross_heads_zero/config.json", "glide");
        s.replace(s.find("\"glide_cross_heads\": 4"), 22, "\"glide_cross_heads\": 0");
        return s;
    }());
    fs::remove(kRoot / "glide/cross_heads_zero/model.safetensors");
    write("glide/cross_attention_not_bool/config.json", [] {
        std::string s = detail::read_text_file(kRoot / "glide/cross_heads_zero/config.json", "glide");
        s.replace(s.find("\"glide_cross_heads\": 0"), 22, "\"glide_cross_heads\": 4");
        s.replace(s.find("\"glide_cross_attention\": true"), 29, "\"glide_cross_attention\": 1");
        return s;
    }());
    edd_case("vocab_mismatch", test_target(72), 0);
    edd_case("hidden_mismatch", test_target(64, 16), 0);
    edd_case("layer_past_target", test_target(), 5);
    write("edd/not_edd/config.json", config_json());
    write("edd/layer_as_string/config.json", [] {
        std::string s = config_json();
        s.replace(s.rfind('}'), 1, ", \"model_type\": \"edd\", \"edd_target_layer\": \"0\"}");
        return s;
    }());
}

/// An EAGLE-1/2 drafter folder for SGLang (save_eagle_layout) drafted for a target of `drafted_for`'s shape.
void eagle_case(const std::string& name, const Config& drafted_for) {
    const Weights tw = random_weights(drafted_for, 6, 0.3f);
    FeatureCheckpoint ck = initial_feature_drafter(drafted_for, tw, Connector::kFc, false, 7, 0.3f);
    ck.config.identity_end_norms = true;
    save_eagle_layout(kRoot / "eagle" / name, ck, ServingEngine::kSglang, SaveFormat::kF32);
}

void eagle_cases() {
    // The shape is checked before any tensor is read: config.json alone is the case.
    eagle_case("hidden_mismatch", test_target(64, 16));
    fs::remove(kRoot / "eagle/hidden_mismatch/model.safetensors");
    eagle_case("pytorch_model_bin", test_target());
    fs::remove(kRoot / "eagle/pytorch_model_bin/model.safetensors");
    write("eagle/pytorch_model_bin/pytorch_model.bin", "PK\x03\x04 a pickle in a zip: never opened");
    // Layer 0's input norm, which EAGLE's layer has not: the exported tensors plus that one.
    eagle_case("input_layernorm", test_target());
    const Config t = test_target();
    FeatureCheckpoint ck = initial_feature_drafter(t, random_weights(t, 6, 0.3f), Connector::kFc, false, 7, 0.3f);
    std::vector<float> bias(32, 0.0f), ones(32, 1.0f);
    detail::write_tensors(kRoot / "eagle/input_layernorm/model.safetensors", SaveFormat::kF32, [&](auto&& put) {
        for_each_eagle_tensor(ck.weights, ck.connector_weights.fc, &bias, ck.config,
                              [&](const std::string& n, const std::vector<float>& v, const std::vector<std::int64_t>& shape) {
                                  put(n, v, shape);
                              });
        put("layers.0.input_layernorm.weight", ones, std::vector<std::int64_t>{32});
    });
}

/// A llama2.c model header: version 0 (7 int32) or export.py's 256 bytes (magic, version, 7 int32, the
/// shared flag, the group size), with `data_bytes` zero bytes after it.
std::string llama2c(const std::vector<std::int32_t>& p, int version = 0, std::size_t data_bytes = 0, int shared = 1,
                    std::int32_t group = 0, std::uint32_t magic = 0x616b3432) {
    std::string s;
    if (version != 0) s = le32(magic) + le32(static_cast<std::uint32_t>(version));
    for (std::int32_t v : p) s += le32(static_cast<std::uint32_t>(v));
    if (version != 0) {
        s += static_cast<char>(shared);
        s += le32(static_cast<std::uint32_t>(group));
        s.resize(256, '\0');
    }
    return s + std::string(data_bytes, '\0');
}

/// A tokenizer.bin: max_token_length, then (score, length, bytes) per token.
std::string llama2c_tokenizer(std::int32_t max_len, const std::vector<std::tuple<float, std::int32_t, std::string>>& tokens) {
    std::string s = le32(static_cast<std::uint32_t>(max_len));
    for (const auto& [score, len, bytes] : tokens) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, &score, 4);
        s += le32(bits) + le32(static_cast<std::uint32_t>(len)) + bytes;
    }
    return s;
}

void llama2c_cases() {
    // A valid small model: dim 8, hidden_dim 16, 1 layer, 2 heads, 1 kv head, vocabulary 16, seq_len 8.
    const Config c{.hidden_size = 8, .intermediate_size = 16, .num_hidden_layers = 1, .num_attention_heads = 2,
                   .num_key_value_heads = 1, .vocab_size = 16, .max_position_embeddings = 8, .tie_word_embeddings = true};
    const fs::path tmp = kRoot / "llama2c" / "tmp.bin";
    fs::create_directories(tmp.parent_path());
    save_llama2c(tmp, c, random_weights(c, 1, 0.3f), Llama2cVersion::kLegacy);
    const std::string v0 = detail::read_text_file(tmp, "llama2c");
    save_llama2c(tmp, c, random_weights(c, 1, 0.3f), Llama2cVersion::kFloat32);
    const std::string v1 = detail::read_text_file(tmp, "llama2c");
    fs::remove(tmp);
    const std::vector<std::int32_t> ok = {8, 16, 1, 2, 1, 16, 8};
    const auto with = [&](int field, std::int32_t value) {
        std::vector<std::int32_t> p = ok;
        p[static_cast<std::size_t>(field)] = value;
        return p;
    };
    write("llama2c/truncated_header.bin", v0.substr(0, 20));
    write("llama2c/truncated_v1_header.bin", v1.substr(0, 100));
    write("llama2c/data_past_end.bin", v0.substr(0, v0.size() / 2));
    write("llama2c/trailing_bytes.bin", v1 + "junk");
    write("llama2c/negative_dim.bin", llama2c(with(0, -8)));
    write("llama2c/zero_layers.bin", llama2c(with(2, 0), 1));
    write("llama2c/heads_not_dividing_dim.bin", llama2c(with(3, 3)));
    write("llama2c/kv_heads_not_dividing_heads.bin", llama2c(with(4, 3), 1));
    write("llama2c/vocab_int_min.bin", llama2c(with(5, INT32_MIN)));
    // dim 2^20, hidden_dim 2^29 and 2^31 - 1 layers: the parameter count overflows 64 bits.
    write("llama2c/absurd_size.bin", llama2c({1 << 20, 1 << 29, INT32_MAX, 1 << 10, 1 << 10, INT32_MAX, INT32_MAX}));
    write("llama2c/bad_version.bin", llama2c(ok, 3));
    write("llama2c/bad_magic.bin", llama2c(ok, 1, v1.size() - 256, 1, 0, 0x616b3433));
    write("llama2c/shared_flag_not_bool.bin", llama2c(ok, 1, v1.size() - 256, 7));
    write("llama2c/q8_group_zero.bin", llama2c(ok, 2, 1000, 1, 0));
    write("llama2c/q8_group_not_dividing.bin", llama2c(ok, 2, 1000, 1, 3));
    write("llama2c/nan_weight.bin", [&] {
        std::string s = v1;
        const float nan = std::numeric_limits<float>::quiet_NaN();
        std::memcpy(s.data() + 256 + 4 * (2 * 8 + 8 + 16 * 8 + 5), &nan, 4);  // the norms, the embedding, wq[0][5]
        return s;
    }());

    write("llama2c/tokenizer_empty.bin", "");
    write("llama2c/tokenizer_no_tokens.bin", llama2c_tokenizer(4, {}));
    write("llama2c/tokenizer_negative_max_length.bin", llama2c_tokenizer(-1, {{0.0f, 1, "a"}}));
    write("llama2c/tokenizer_negative_length.bin", llama2c_tokenizer(4, {{0.0f, 1, "a"}, {0.0f, -5, "bcdef"}}));
    write("llama2c/tokenizer_length_past_end.bin", llama2c_tokenizer(100, {{0.0f, 1, "a"}, {0.0f, 50, "bc"}}));
    write("llama2c/tokenizer_length_2e31.bin", llama2c_tokenizer(INT32_MAX, {{0.0f, INT32_MAX, "b"}}));
    write("llama2c/tokenizer_longer_than_max.bin", llama2c_tokenizer(2, {{0.0f, 1, "a"}, {0.0f, 3, "abc"}}));
    write("llama2c/tokenizer_truncated_record.bin", llama2c_tokenizer(4, {{0.0f, 1, "a"}}) + "\x01\x02\x03");
    write("llama2c/tokenizer_nan_score.bin",
          llama2c_tokenizer(4, {{0.0f, 1, "a"}, {0.0f, 1, "b"}, {std::numeric_limits<float>::quiet_NaN(), 2, "ab"}}));
}

}  // namespace

// ---- gguf/: a valid small model saved by save_gguf (F32, dim 32, hidden 48, 1 layer, 2 heads, 1 kv head,
// vocabulary 16, context 8, tied), then one field patched; or a header written from scratch.

/// The offset of the field `after` bytes past the end of tensor `name`'s name in the tensor infos.
std::size_t after_tensor_name(const std::string& file, const std::string& name, std::size_t after) {
    const std::string key = le64(name.size()) + name;
    const std::size_t at = file.find(key, 24);
    if (at == std::string::npos) throw std::runtime_error("make_corpus: no tensor " + name);
    return at + key.size() + after;
}

std::string patched(std::string file, std::size_t at, const std::string& bytes) {
    file.replace(at, bytes.size(), bytes);
    return file;
}

/// `file` with metadata entries `kv` (count `n`) inserted first, plus a filler string entry that keeps the
/// header a multiple of 32 bytes longer, so the data section keeps its offsets.
std::string with_kv(std::string file, const std::string& kv, std::uint64_t n) {
    std::string more = kv;
    const std::size_t filler_key = 8, base = more.size() + 8 + filler_key + 4 + 8;
    const std::size_t value = (32 - base % 32) % 32;
    more += le64(filler_key) + "zz.pad.x" + le32(8) + le64(value) + std::string(value, 'x');
    std::uint64_t count = 0;
    std::memcpy(&count, file.data() + 16, 8);
    file = patched(file, 16, le64(count + n + 1));
    return file.insert(24, more);
}

std::string gguf_string_kv(const std::string& key, const std::string& value) {
    return le64(key.size()) + key + le32(8) + le64(value.size()) + value;
}

std::string gguf_u32_kv(const std::string& key, std::uint32_t value) { return le64(key.size()) + key + le32(4) + le32(value); }

std::string gguf_f32_kv(const std::string& key, float value) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, 4);
    return le64(key.size()) + key + le32(6) + le32(bits);
}

void gguf_cases() {
    const Config c{.hidden_size = 32, .intermediate_size = 48, .num_hidden_layers = 1, .num_attention_heads = 2,
                   .num_key_value_heads = 1, .vocab_size = 16, .max_position_embeddings = 8, .tie_word_embeddings = true};
    const fs::path tmp = kRoot / "gguf" / "tmp.gguf";
    fs::create_directories(tmp.parent_path());
    save_gguf(tmp, c, random_weights(c, 1, 0.3f), nullptr, GgufSaveType::kF32);
    const std::string ok = detail::read_text_file(tmp, "gguf");
    fs::remove(tmp);
    const std::string header = "GGUF" + le32(3);
    write("gguf/truncated.gguf", ok.substr(0, 600));
    write("gguf/bad_magic.gguf", patched(ok, 0, "GGML"));
    write("gguf/bad_version.gguf", patched(ok, 4, le32(1)));
    write("gguf/data_past_end.gguf", ok.substr(0, ok.size() - 64));
    write("gguf/unknown_type.gguf", patched(ok, after_tensor_name(ok, "blk.0.ffn_up.weight", 4 + 16), le32(99)));
    write("gguf/unsupported_quant.gguf", patched(ok, after_tensor_name(ok, "token_embd.weight", 4 + 16), le32(9)));  // Q8_1 (ggml keeps it for activations; files never hold it)
    write("gguf/n_dims_5.gguf", patched(ok, after_tensor_name(ok, "blk.0.attn_v.weight", 0), le32(5)));
    write("gguf/misaligned_offset.gguf", [&] {
        const std::size_t at = after_tensor_name(ok, "blk.0.attn_v.weight", 4 + 16 + 4);
        std::uint64_t offset = 0;
        std::memcpy(&offset, ok.data() + at, 8);
        return patched(ok, at, le64(offset + 4));
    }());
    write("gguf/duplicate_tensor.gguf", patched(ok, after_tensor_name(ok, "blk.0.attn_k.weight", 0) - 13, "attn_q"));
    write("gguf/dims_overflow.gguf",
          patched(ok, after_tensor_name(ok, "blk.0.attn_q.weight", 4), le64(std::uint64_t{1} << 40) + le64(std::uint64_t{1} << 40)));
    write("gguf/string_length_2e64.gguf", header + le64(0) + le64(1) + le64(0xFFFFFFFFFFFFFFF0ull) + "general.name");
    write("gguf/array_count_huge.gguf", header + le64(0) + le64(1) + le64(12) + "general.huge" + le32(9) + le32(4) +
                                          le64(std::uint64_t{1} << 62) + le32(7));
    write("gguf/nested_array.gguf", header + le64(0) + le64(1) + le64(14) + "general.nested" + le32(9) + le32(9) + le64(1));
    write("gguf/tensor_count_huge.gguf", header + le64(std::uint64_t{1} << 60) + le64(0));
    write("gguf/architecture_bloom.gguf", patched(ok, ok.find("llama", 24), "bloom"));  // same length
    write("gguf/rope_scaling.gguf", with_kv(ok, gguf_string_kv("llama.rope.scaling.type", "longrope"), 1));
    write("gguf/rope_yarn_ext_factor.gguf", with_kv(ok, gguf_string_kv("llama.rope.scaling.type", "yarn") +
                                                            gguf_f32_kv("llama.rope.scaling.factor", 4.0f) +
                                                            gguf_f32_kv("llama.rope.scaling.yarn_ext_factor", 0.5f), 3));
    write("gguf/rope_yarn_keys_linear.gguf", with_kv(ok, gguf_f32_kv("llama.rope.scaling.factor", 2.0f) +
                                                             gguf_f32_kv("llama.rope.scaling.yarn_beta_fast", 16.0f), 2));
    write("gguf/value_length.gguf", with_kv(ok, gguf_u32_kv("llama.attention.key_length", 16) +
                                                    gguf_u32_kv("llama.attention.value_length", 8), 2));
    write("gguf/rope_factor_negative.gguf", with_kv(ok, gguf_f32_kv("llama.rope.scaling.factor", -2.0f), 1));
    write("gguf/rope_none_with_factor.gguf", with_kv(ok, gguf_string_kv("llama.rope.scaling.type", "none") +
                                                             gguf_f32_kv("llama.rope.scaling.factor", 2.0f), 2));
    write("gguf/partial_rotary.gguf", [&] {
        const std::string key = le64(26) + "llama.rope.dimension_count" + le32(4);
        return patched(ok, ok.find(key) + key.size(), le32(8));
    }());
    write("gguf/embedding_length_40.gguf", [&] {
        const std::string key = le64(22) + "llama.embedding_length" + le32(4);
        return patched(ok, ok.find(key) + key.size(), le32(40));
    }());
    write("gguf/block_count_3.gguf", [&] {
        const std::string key = le64(17) + "llama.block_count" + le32(4);
        return patched(ok, ok.find(key) + key.size(), le32(3));
    }());
    write("gguf/nan_weight.gguf", [&] {
        const std::size_t data = ok.size() - 16 * 4 - 32 * 4;  // output_norm (32 floats) and before it the
        std::string f = ok;                                      // last matrix; patch a float well inside
        const std::uint32_t nan = 0x7FC00000u;
        return patched(f, data - 400, le32(nan));
    }());
}

// ---- gguf/rope_freqs_*: the same model with a table of RoPE factors (llama.cpp's rope_freqs.weight, 8 of
// them for heads of 16), then the table or its tensor info broken.

void gguf_rope_freqs_cases() {
    Config c{.hidden_size = 32, .intermediate_size = 48, .num_hidden_layers = 1, .num_attention_heads = 2,
             .num_key_value_heads = 1, .vocab_size = 16, .max_position_embeddings = 8, .tie_word_embeddings = true};
    c.rope_scaling = RopeScaling{.type = RopeScalingType::kFactors, .factors = {1, 1, 2, 3, 4, 5, 6, 8}};
    const fs::path tmp = kRoot / "gguf" / "tmp.gguf";
    save_gguf(tmp, c, random_weights(c, 1, 0.3f), nullptr, GgufSaveType::kF32);
    const std::string ok = detail::read_text_file(tmp, "gguf");
    fs::remove(tmp);
    const std::size_t table = ok.find(std::string(reinterpret_cast<const char*>(c.rope_scaling.factors.data()), 32));
    if (table == std::string::npos) throw std::runtime_error("make_corpus: no factor table");
    const auto factor = [&](std::size_t j, float v) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, &v, 4);
        return patched(ok, table + 4 * j, le32(bits));
    };
    write("gguf/rope_freqs_f16.gguf", patched(ok, after_tensor_name(ok, "rope_freqs.weight", 4 + 8), le32(1)));
    write("gguf/rope_freqs_length.gguf", patched(ok, after_tensor_name(ok, "rope_freqs.weight", 4), le64(4)));
    write("gguf/rope_freqs_zero.gguf", factor(3, 0.0f));
    write("gguf/rope_freqs_nan.gguf", factor(5, std::numeric_limits<float>::quiet_NaN()));
    write("gguf/rope_freqs_with_linear.gguf", with_kv(ok, gguf_f32_kv("llama.rope.scaling.factor", 2.0f), 1));
}

// ---- gguf/qwen*: the architecture name without its keys, and a Qwen2 file with a tensor a Qwen2 block lacks.

void gguf_qwen_cases() {
    Config c{.hidden_size = 32, .intermediate_size = 48, .num_hidden_layers = 1, .num_attention_heads = 2,
             .num_key_value_heads = 1, .vocab_size = 16, .max_position_embeddings = 8, .tie_word_embeddings = true};
    const fs::path tmp = kRoot / "gguf" / "tmp.gguf";
    save_gguf(tmp, c, random_weights(c, 1, 0.3f), nullptr, GgufSaveType::kF32);
    const std::string llama = detail::read_text_file(tmp, "gguf");
    write("gguf/qwen2_with_llama_keys.gguf", patched(llama, llama.find("llama", 24), "qwen2"));  // same length
    c.qkv_bias = true;
    save_gguf(tmp, c, random_weights(c, 1, 0.3f), nullptr, GgufSaveType::kF32);
    const std::string qwen2 = detail::read_text_file(tmp, "gguf");
    fs::remove(tmp);
    write("gguf/qwen2_unknown_tensor.gguf", patched(qwen2, after_tensor_name(qwen2, "blk.0.attn_k.bias", 0) - 4, "bixs"));
}

int main() try {
    // The cases found by fuzzing are the fuzzers' inputs split into files (README.md), not written here: kept.
    const auto found_by_fuzzing = [](const fs::path& p) {
        return p.filename() == "one_tensor_claims_2e31_layers" || p.filename() == "merge_takes_added_token.json";
    };
    for (const char* d : {"json", "checkpoint", "sharded", "safetensors", "tokenizer", "token_file", "glide", "edd", "llama2c", "gguf"})
        if (fs::exists(kRoot / d))
            for (const fs::directory_entry& e : fs::directory_iterator(kRoot / d))
                if (!found_by_fuzzing(e.path())) fs::remove_all(e.path());
    json_cases();
    checkpoint_cases();
    sharded_cases();
    safetensors_cases();
    tokenizer_cases();
    token_file_cases();
    drafter_cases();
    eagle_cases();
    llama2c_cases();
    gguf_cases();
    gguf_rope_freqs_cases();
    gguf_qwen_cases();
    return 0;
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
