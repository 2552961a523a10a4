// Tests for detail/io/tokenizer.hpp: byte-level round trips, GPT-2 pre-tokenization, training,
// tokenizer.json save/load and the errors of broken files.
#include "catch.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "detail/io/tokenizer.hpp"

namespace test_tokenizer {  // a unity build compiles several test files as one

using namespace specdec;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

/// splitmix64: a tiny deterministic generator for test data.
struct SplitMix {
    std::uint64_t state;
    std::uint64_t next() {
        std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

/// Pseudo-English: a Zipf-distributed lexicon of `n_words` syllable words plus function words
/// and contractions, in sentences and paragraphs, with some numbers. Stands in for a real corpus.
std::string pseudo_english(std::size_t bytes, std::uint64_t seed, std::size_t n_words = 4000) {
    SplitMix rng{seed};
    const char* onsets[] = {"b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "v", "w",
                            "br", "ch", "st", "th", "tr", "sh", "pl", "gr", ""};
    const char* vowels[] = {"a", "e", "i", "o", "u", "ea", "ou", "ai", "io", "y"};
    const char* codas[] = {"", "", "n", "r", "s", "t", "nd", "ng", "st", "ll", "ck", "th"};
    std::vector<std::string> lexicon = {"the", "of", "and", "to", "a", "in", "is", "it's", "that", "was",
                                        "he", "for", "on", "are", "with", "they", "don't", "we'll", "I'm", "you're"};
    while (lexicon.size() < n_words) {
        std::string w;
        const std::size_t syllables = 1 + rng.below(3);
        for (std::size_t s = 0; s < syllables; ++s)
            w += std::string(onsets[rng.below(std::size(onsets))]) + vowels[rng.below(std::size(vowels))] +
                 codas[rng.below(std::size(codas))];
        lexicon.push_back(w);
    }
    std::vector<double> cumulative;
    double total = 0;
    for (std::size_t r = 0; r < lexicon.size(); ++r) cumulative.push_back(total += 1.0 / static_cast<double>(r + 1));
    auto word = [&] {
        const double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53 * total;
        return lexicon[static_cast<std::size_t>(std::lower_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin())];
    };
    std::string text;
    text.reserve(bytes + 256);
    while (text.size() < bytes) {
        const std::size_t n_words = 4 + rng.below(14);
        for (std::size_t i = 0; i < n_words; ++i) {
            std::string w = rng.below(25) == 0 ? std::to_string(rng.below(3000)) : word();
            if (i == 0 && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 'a' + 'A');
            text += w;
            if (i + 1 < n_words) text += rng.below(10) == 0 ? ", " : " ";
        }
        text += ".?!"[rng.below(8) == 0 ? 1 + rng.below(2) : 0];
        text += rng.below(6) == 0 ? "\n\n" : " ";
    }
    return text;
}

std::string random_bytes(SplitMix& rng, std::size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng.next() & 0xFF);
    return s;
}

struct TempDir {
    fs::path path;
    TempDir() {
        path = fs::temp_directory_path() / ("specdec_test_tokenizer_" + std::to_string(::getpid()));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path, ignored);
    }
};

const Tokenizer& small_trained() {
    static const Tokenizer t = Tokenizer::train(pseudo_english(200'000, 7), 1024);
    return t;
}

std::vector<std::string> pieces(std::string_view text) {
    std::vector<std::string> out;
    for (std::string_view p : detail::pretokenize(text)) out.emplace_back(p);
    return out;
}

/// A tiny tokenizer.json: specials, a handful of characters and merges spelling "hello" and " world".
std::string tiny_json(const std::string& merges) {
    return R"({"version": "1.0", "added_tokens": [{"id": 0, "content": "<|endoftext|>", "single_word": false,
      "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
  "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": null, "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "", "end_of_word_suffix": "",
    "vocab": {"<|endoftext|>": 0, "h": 1, "e": 2, "l": 3, "o": 4, "Ġ": 5, "w": 6, "r": 7, "d": 8, "!": 9,
              "he": 10, "ll": 11, "hell": 12, "hello": 13, "Ġw": 14, "or": 15, "Ġwor": 16, "ld": 17, "Ġworld": 18},
    "merges": )" + merges + "}}";
}

const std::string kTinyMergePairs =
    R"([["h", "e"], ["l", "l"], ["he", "ll"], ["hell", "o"], ["Ġ", "w"], ["o", "r"], ["Ġw", "or"], ["l", "d"], ["Ġwor", "ld"]])";
const std::string kTinyMergeStrings = R"(["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld"])";

/// The oracle for training: plain BPE that recounts every pair of every word before each merge,
/// with the same tie rule (the pair whose byte strings sort first). Returns merges as raw bytes.
std::vector<std::pair<std::string, std::string>> reference_bpe(std::string_view corpus, int n_merges) {
    std::map<std::string, std::int64_t> counts;
    detail::for_each_pretoken(corpus, [&](std::string_view w) { ++counts[std::string(w)]; });
    std::vector<std::pair<std::vector<std::string>, std::int64_t>> words;
    for (const auto& [w, c] : counts) {
        std::vector<std::string> symbols;
        for (char ch : w) symbols.emplace_back(1, ch);
        words.emplace_back(symbols, c);
    }
    std::vector<std::pair<std::string, std::string>> merges;
    for (int m = 0; m < n_merges; ++m) {
        std::map<std::pair<std::string, std::string>, std::int64_t> pairs;  // ordered: ties resolve to the first
        for (const auto& [symbols, c] : words)
            for (std::size_t i = 0; i + 1 < symbols.size(); ++i) pairs[{symbols[i], symbols[i + 1]}] += c;
        if (pairs.empty()) break;
        auto best = pairs.begin();
        for (auto it = pairs.begin(); it != pairs.end(); ++it)
            if (it->second > best->second) best = it;
        merges.push_back(best->first);
        for (auto& [symbols, c] : words) {
            std::vector<std::string> merged;
            for (std::size_t i = 0; i < symbols.size(); ++i) {
                if (i + 1 < symbols.size() && symbols[i] == best->first.first && symbols[i + 1] == best->first.second) {
                    merged.push_back(symbols[i] + symbols[i + 1]);
                    ++i;
                } else {
                    merged.push_back(symbols[i]);
                }
            }
            symbols = std::move(merged);
        }
    }
    return merges;
}

}  // namespace

TEST_CASE("incremental training picks the same merges as plain recounting BPE", "[tokenizer]") {
    const std::string corpus = GENERATE(pseudo_english(20'000, 5, 500), std::string("aaaa abab ab ab aaa ba  \n\n xyz xy"));
    const int n_merges = 300;
    const Tokenizer t = Tokenizer::train(corpus, 257 + n_merges);
    const json::Value root = json::parse(t.to_json(), "trained");
    const json::Array& merges = root.at("model").at("merges").as_array();
    const auto expected = reference_bpe(corpus, n_merges);
    REQUIRE(merges.size() == expected.size());
    for (std::size_t i = 0; i < merges.size(); ++i) {
        INFO("merge " << i);
        CHECK(merges[i].as_array()[0].as_string() == detail::byte_level_encode(expected[i].first));
        CHECK(merges[i].as_array()[1].as_string() == detail::byte_level_encode(expected[i].second));
    }
}

TEST_CASE("the byte-level alphabet maps the 256 bytes to distinct printable characters", "[tokenizer]") {
    CHECK(detail::byte_level_encode(" ") == "Ġ");
    CHECK(detail::byte_level_encode("\n") == "Ċ");
    CHECK(detail::byte_level_encode("A~") == "A~");
    CHECK(detail::byte_level_encode(std::string(1, '\0')) == "Ā");
    std::string all;
    for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
    const std::string spelled = detail::byte_level_encode(all);
    CHECK(spelled.find(' ') == std::string::npos);
    CHECK(detail::byte_level_decode(spelled) == all);
    CHECK_FALSE(detail::byte_level_decode("a b").has_value());
}

TEST_CASE("pre-tokenization splits like the GPT-2 pattern", "[tokenizer]") {
    // Expected pieces are from Python's `regex` module with the GPT-2 pattern.
    using V = std::vector<std::string>;
    CHECK(pieces("Hello, world! It's 2024.") == V{"Hello", ",", " world", "!", " It", "'s", " 2024", "."});
    CHECK(pieces("we'll   see\n\nyou're") == V{"we", "'ll", "  ", " see", "\n", "\n", "you", "'re"});
    CHECK(pieces("  x\t\ty  ") == V{" ", " x", "\t", "\t", "y", "  "});
    CHECK(pieces("naïve café 日本語 ½²") == V{"naïve", " café", " 日本語", " ½²"});
    CHECK(pieces("I'M 'll's''s") == V{"I", "'", "M", " '", "ll", "'s", "''", "s"});
    CHECK(pieces("a\u00a0b \u3000c") == V{"a", "\u00a0", "b", " ", "\u3000", "c"});
    CHECK(pieces("😀 ok!!") == V{"😀", " ok", "!!"});
    CHECK(pieces("") == V{});
    SECTION("invalid UTF-8 bytes count as 'other' and nothing is lost") {
        const std::string s = "ab\xff\xfe cd\xc3";
        CHECK(pieces(s) == V{"ab", "\xff\xfe", " cd", "\xc3"});
    }
}

TEST_CASE("random bytes survive encode then decode exactly", "[tokenizer]") {
    const Tokenizer& t = small_trained();
    SplitMix rng{GENERATE(1u, 2u, 3u, 4u)};
    for (int i = 0; i < 50; ++i) {
        std::string s = random_bytes(rng, rng.below(300));
        if (i % 5 == 0) s += "<|endoftext|>" + random_bytes(rng, 20);
        const std::vector<int> ids = t.encode(s);
        REQUIRE(t.decode(ids) == s);
        for (int id : ids) CHECK((id >= 0 && id < t.vocab_size()));
    }
}

TEST_CASE("a trained tokenizer compresses text and decodes it back", "[tokenizer]") {
    const Tokenizer& t = small_trained();
    REQUIRE(t.vocab_size() == 1024);
    CHECK(t.n_merges() == 1024 - 257);
    CHECK(t.eos_id() == 0);
    CHECK(t.is_special(0));
    CHECK_FALSE(t.is_special(1));
    CHECK(t.id_to_token(0) == "<|endoftext|>");
    CHECK(t.token_to_id("<|endoftext|>") == 0);
    CHECK(t.token_to_id(" the").has_value());
    CHECK_FALSE(t.token_to_id("not a token at all").has_value());
    for (int b = 0; b < 256; ++b) CHECK(t.token_to_id(std::string(1, static_cast<char>(b))).has_value());

    const std::string text = pseudo_english(20'000, 99);
    const std::vector<int> ids = t.encode(text);
    CHECK(t.decode(ids) == text);
    CHECK(static_cast<double>(ids.size()) < 0.5 * static_cast<double>(text.size()));

    SECTION("special tokens in the text become one id each") {
        const std::vector<int> with_eos = t.encode("The end.<|endoftext|>Next<|endoftext|>");
        REQUIRE(with_eos.size() >= 3);
        CHECK(with_eos.back() == t.eos_id());
        CHECK(std::count(with_eos.begin(), with_eos.end(), t.eos_id()) == 2);
        const std::vector<int> partial = t.encode("<|endoftext");
        CHECK(std::count(partial.begin(), partial.end(), t.eos_id()) == 0);
    }
    SECTION("training is deterministic") {
        const Tokenizer again = Tokenizer::train(pseudo_english(200'000, 7), 1024);
        CHECK(again.to_json() == t.to_json());
    }
    SECTION("a hostile single-word input encodes without quadratic blow-up") {
        const std::string run(300'000, 'e');
        const auto start = std::chrono::steady_clock::now();
        const std::vector<int> run_ids = t.encode(run);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        CHECK(t.decode(run_ids) == run);
        CHECK(seconds < 10.0);
    }
}

TEST_CASE("training with several special tokens keeps them whole", "[tokenizer]") {
    const Tokenizer t = Tokenizer::train("ab ab ab <|a|> ab <|a|><|b|> abab", 300, {"<|a|>", "<|a|><|b|>", "<pad>"});
    CHECK(t.token_to_id("<|a|>") == 0);
    CHECK(t.token_to_id("<|a|><|b|>") == 1);
    CHECK(t.eos_id() == 0);  // no <|endoftext|>: the first special token
    const std::vector<int> ids = t.encode("x<|a|><|b|>y<|a|>");
    CHECK(ids == std::vector<int>{*t.token_to_id("x"), 1, *t.token_to_id("y"), 0});
}

TEST_CASE("save then load gives the same tokenizer", "[tokenizer]") {
    TempDir dir;
    const Tokenizer& t = small_trained();
    const fs::path path = dir.path / "tokenizer.json";
    t.save(path);
    const Tokenizer loaded = Tokenizer::load(path);
    CHECK(loaded.vocab_size() == t.vocab_size());
    CHECK(loaded.to_json() == t.to_json());
    SplitMix rng{11};
    for (int i = 0; i < 20; ++i) {
        const std::string s = i % 2 ? pseudo_english(2000, static_cast<std::uint64_t>(i)) : random_bytes(rng, 500);
        CHECK(loaded.encode(s) == t.encode(s));
    }
    SECTION("the file follows the HF schema") {
        const json::Value root = json::parse(t.to_json(), "tokenizer.json");
        CHECK(root.at("model").at("type").as_string() == "BPE");
        CHECK(root.at("pre_tokenizer").at("type").as_string() == "ByteLevel");
        CHECK(root.at("added_tokens").as_array()[0].at("content").as_string() == "<|endoftext|>");
        CHECK(root.at("model").at("vocab").at("Ġ").as_int() == *t.token_to_id(" "));
        CHECK(root.at("model").at("merges").as_array()[0].as_array().size() == 2);
    }
}

TEST_CASE("a hand-made tokenizer.json encodes a known string to known ids", "[tokenizer]") {
    const std::string merges = GENERATE(kTinyMergePairs, kTinyMergeStrings);
    const Tokenizer t = Tokenizer::from_json(tiny_json(merges), "tiny.json");
    CHECK(t.vocab_size() == 19);
    CHECK(t.encode("hello world!<|endoftext|>hello") == std::vector<int>{13, 18, 9, 0, 13});
    CHECK(t.encode("world") == std::vector<int>{6, 15, 17});  // no ("w", "or") merge
    CHECK(t.encode("hell") == std::vector<int>{12});
    CHECK(t.decode(std::vector<int>{13, 18, 9}) == "hello world!");
    CHECK(t.id_to_token(14) == " w");
    CHECK_THROWS_WITH(t.encode("hello z"), Contains("tiny.json: encode: byte 0x7A has no token in the vocab"));
    CHECK_THROWS_WITH(t.decode(std::vector<int>{1, 19}), Contains("tiny.json: decode: id 19 is out of range (vocab size 19)"));
}

TEST_CASE("broken tokenizer.json files give errors naming the file and field", "[tokenizer][error]") {
    auto load = [](const std::string& text) { return Tokenizer::from_json(text, "tok.json"); };
    auto tiny_with = [](std::string from, const std::string& to) {
        std::string s = tiny_json(kTinyMergePairs);
        const std::size_t at = s.find(from);
        REQUIRE(at != std::string::npos);
        return s.replace(at, from.size(), to);
    };
    CHECK_THROWS_WITH(load(tiny_with("\"type\": \"BPE\"", "\"type\": \"WordPiece\"")),
                      Contains("[specdec.tokenizer] tok.json: model.type is \"WordPiece\"; only \"BPE\" is supported"));
    CHECK_THROWS_WITH(load(tiny_with("[\"o\", \"r\"]", "[\"o\", \"q\"]")),
                      Contains("tok.json: model.merges[5]: 'q' is not in model.vocab"));
    CHECK_THROWS_WITH(load(tiny_with("[\"l\", \"d\"]", "[\"d\", \"l\"]")),
                      Contains("tok.json: model.merges[7]: merged token 'dl' is not in model.vocab"));
    CHECK_THROWS_WITH(load(tiny_with("[\"l\", \"d\"]", "[\"l\", \"l\"]")), Contains("model.merges[7]: merge 'l' + 'l' appears twice"));
    CHECK_THROWS_WITH(load(tiny_with("[[\"h\", \"e\"]", "[\"he\"")), Contains("model.merges[0]: \"he\" is not two tokens"));
    CHECK_THROWS_WITH(load(tiny_with("\"r\": 7", "\"r\": 6")), Contains("tok.json: model.vocab: id 6 is used by both 'w' and 'r'"));
    CHECK_THROWS_WITH(load(tiny_with("\"r\": 7", "\"r\": 70")), Contains("model.vocab: id 70 is too large for 19 vocab entries and 1 added tokens"));
    CHECK_THROWS_WITH(load(tiny_with("\"d\": 8,", "")), Contains("model.vocab: no token has id 8"));
    CHECK_THROWS_WITH(load(tiny_with("\"Ġ\": 5", "\" \": 5")),
                      Contains("model.vocab: token ' ' (id 5) has a character outside the byte-level alphabet"));
    CHECK_THROWS_WITH(load(tiny_with("\"<|endoftext|>\": 0", "\"<eos>\": 0")),
                      Contains("model.vocab: id 0 is '<eos>' but added_tokens gives it '<|endoftext|>'"));
    CHECK_THROWS_WITH(load(tiny_with("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFKC\"}")),
                      Contains("normalizer is {\"type\":\"NFKC\"}; only null, NFC (before a byte-level pre-tokenizer), Prepend"));
    // NFC is Qwen's normalizer: accepted before a byte-level pre-tokenizer, where an added token must
    // then be cut out of the raw text ("normalized": false), as all of Qwen's are.
    const std::string nfc = tiny_with("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFC\"}");
    CHECK(load(nfc).encode("hello world<|endoftext|>") == load(tiny_json(kTinyMergePairs)).encode("hello world<|endoftext|>"));
    std::string nfc_normalized = nfc;
    nfc_normalized.replace(nfc_normalized.find("\"normalized\": false"), 19, "\"normalized\": true");
    CHECK_THROWS_WITH(load(nfc_normalized),
                      Contains("added_tokens[0].normalized is true; only false in a file with the NFC normalizer is supported"));
    CHECK_THROWS_WITH(load(tiny_with("\"add_prefix_space\": false", "\"add_prefix_space\": true")),
                      Contains("pre_tokenizer.add_prefix_space is true; only false is supported"));
    CHECK_THROWS_WITH(load(tiny_with("\"lstrip\": false", "\"lstrip\": true")),
                      Contains("added_tokens[0].lstrip is true; only false is supported"));
    CHECK_THROWS_WITH(load(tiny_with("\"continuing_subword_prefix\": \"\"", "\"continuing_subword_prefix\": \"##\"")),
                      Contains("model.continuing_subword_prefix is \"##\""));
    // Two added tokens with one content (the second could never be produced); an empty vocabulary;
    // a merge that spells an added token (decode would print it without the byte-level mapping).
    const std::string second_eos = R"("special": true}, {"id": 19, "content": "<|endoftext|>", "special": true}])";
    CHECK_THROWS_WITH(load(tiny_with("\"special\": true}]", second_eos)),
                      Contains("added_tokens[1]: content '<|endoftext|>' is already added token 0"));
    std::string empty = tiny_with("\"<|endoftext|>\": 0, \"h\": 1", "\"h\": 1");
    empty = empty.substr(0, empty.find("\"vocab\": {") + 10) + "}, \"merges\": []}}";
    empty.replace(empty.find("\"added_tokens\": ["), 17, "\"added_tokens\": null, \"x\": [");
    CHECK_THROWS_WITH(load(empty), Contains("tok.json: model.vocab is empty"));
    const std::string spelled = R"("special": true}, {"id": 10, "content": "he", "special": false}])";
    CHECK_THROWS_WITH(load(tiny_with("\"special\": true}]", spelled)),
                      Contains("model.merges[0]: merged token 'he' is the added token 10"));
    CHECK_THROWS_WITH(load("{\"version\": \"1.0\"}"), Contains("[specdec.json] tok.json: missing field 'model'"));
    CHECK_THROWS_WITH(load(tiny_with("\"h\": 1", "\"h\": \"1\"")), Contains("[specdec.json] tok.json:6:40: expected an integer, found string \"1\""));
    CHECK_THROWS_WITH(load("{"), Contains("[specdec.json] tok.json:1:2:"));
    CHECK_THROWS_WITH(Tokenizer::load("/nonexistent/tokenizer.json"), Contains("/nonexistent/tokenizer.json: cannot open"));
}

TEST_CASE("bad arguments to train and to the accessors are reported", "[tokenizer][error]") {
    CHECK_THROWS_WITH(Tokenizer::train("abc", 200), Contains("[specdec.tokenizer] train: vocab_size 200 is below the 256 byte tokens plus 1 special tokens"));
    CHECK_THROWS_WITH(Tokenizer::train("abc", 300, {"<s>", "<s>"}), Contains("special token '<s>' is listed twice"));
    const Tokenizer none = Tokenizer::train("abc abc", 260, {});
    CHECK(none.vocab_size() == 259);  // stops when no pair is left: "ab", "abc", " abc"
    CHECK_THROWS_WITH(none.eos_id(), Contains("eos_id: the tokenizer has no special tokens"));
    CHECK_THROWS_WITH(none.id_to_token(-1), Contains("id_to_token: id -1 is out of range"));
}

TEST_CASE("training 4096 tokens on 5 MB of text takes well under a minute", "[tokenizer][.slow]") {
    const std::string corpus = pseudo_english(5'000'000, 2024, 100'000);
    const auto start = std::chrono::steady_clock::now();
    const Tokenizer t = Tokenizer::train(corpus, 4096);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto encode_start = std::chrono::steady_clock::now();
    const std::vector<int> ids = t.encode(corpus);
    const double encode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - encode_start).count();
    WARN("train 4096 on " << corpus.size() << " bytes: " << seconds << " s; encode: " << encode_seconds << " s, "
                          << ids.size() << " tokens");
    CHECK(t.vocab_size() == 4096);
    CHECK(t.decode(ids) == corpus);
    CHECK(seconds < 60.0);
}

namespace {

/// A Metaspace tokenizer.json without byte fallback: ▁, a, b and three merges, unk fused, <s> template.
std::string metaspace_json(const std::string& pre_tokenizer, const std::string& unk = "<unk>", int bos = 1) {
    return R"({"added_tokens": [{"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true}],
  "normalizer": null, "pre_tokenizer": )" + pre_tokenizer + R"(,
  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [)" + std::to_string(bos) + R"(], "tokens": ["<s>"]}}},
  "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true},
  "model": {"type": "BPE", "unk_token": ")" + unk + R"(", "fuse_unk": true, "byte_fallback": false,
    "vocab": {"<unk>": 0, "<s>": 1, "▁": 2, "a": 3, "b": 4, "▁a": 5, "ab": 6, "▁ab": 7},
    "merges": ["▁ a", ["a", "b"], ["▁a", "b"]]}})";
}

}  // namespace

TEST_CASE("a Metaspace tokenizer prepends, splits, falls back to unk and strips as the file says", "[tokenizer]") {
    const Tokenizer t = Tokenizer::from_json(
        metaspace_json(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true})"), "meta.json");
    CHECK(t.kind() == TokenizerKind::kSentencePiece);
    CHECK(t.encode("ab ab") == std::vector<int>{7, 7});   // "▁ab▁ab", split before each "▁"
    CHECK(t.encode(" ab") == std::vector<int>{7});        // already starts with "▁": nothing prepended
    CHECK(t.encode("abc") == std::vector<int>{7, 0});     // 'c' is not in the vocab and there is no byte fallback
    CHECK(t.encode("ccc") == std::vector<int>{2, 0});     // fuse_unk: one <unk> for the run
    CHECK(t.encode("<s>ab") == std::vector<int>{1, 6});   // "first": no "▁" after an added token
    CHECK(t.encode_with_special("ab") == std::vector<int>{1, 7});
    CHECK(t.bos_id() == 1);
    CHECK(t.decode(std::vector<int>{7, 7}) == "ab ab");   // the leading space is stripped
    CHECK(t.id_to_token(7) == " ab");
    CHECK(t.token_to_id(" ab") == 7);

    const Tokenizer always = Tokenizer::from_json(
        metaspace_json(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": false})"), "meta.json");
    CHECK(always.encode("<s>ab") == std::vector<int>{1, 7});
    CHECK(always.encode("ab ab") == std::vector<int>{7, 7});
}

TEST_CASE("broken SentencePiece-style and Llama-3-style files give errors naming the field", "[tokenizer][error]") {
    auto load = [](const std::string& text) { return Tokenizer::from_json(text, "sp.json"); };
    const std::string meta = R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true})";
    CHECK_THROWS_WITH(load(metaspace_json(meta, "<oops>")), Contains("sp.json: model.unk_token \"<oops>\" is not in model.vocab"));
    CHECK_THROWS_WITH(load(metaspace_json(meta, "<unk>", 99)),
                      Contains("post_processor.special_tokens['<s>']: id 99 is out of range (vocab size 8)"));
    CHECK_THROWS_WITH(load(metaspace_json(R"({"type": "Metaspace", "replacement": "_"})")),
                      Contains("pre_tokenizer.replacement is \"_\"; only \"▁\" is supported"));
    CHECK_THROWS_WITH(load(metaspace_json(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "sometimes"})")),
                      Contains("pre_tokenizer.prepend_scheme is \"sometimes\""));
    std::string prepend_only = metaspace_json("null");
    prepend_only.replace(prepend_only.find("\"normalizer\": null"), 18, R"("normalizer": {"type": "Prepend", "prepend": "▁"})");
    CHECK_THROWS_WITH(load(prepend_only), Contains("must replace \" \" by \"▁\""));
    std::string no_decoder = metaspace_json(meta);
    no_decoder.replace(no_decoder.find("\"decoder\": {"), 12, "\"decoder\": null, \"x\": {");
    CHECK_THROWS_WITH(load(no_decoder), Contains("decoder is null; a SentencePiece-style file needs its decoder"));
    std::string split = tiny_json(kTinyMergePairs);
    const std::string byte_level = R"({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true})";
    split.replace(split.find(byte_level), byte_level.size(),
                  R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Removed", "invert": false}, {"type": "ByteLevel", "use_regex": false}]})");
    CHECK_THROWS_WITH(load(split), Contains("pre_tokenizer.pretokenizers[0].behavior is \"Removed\"; only \"Isolated\" is supported"));
}

TEST_CASE("a merge across a \"▁\" keeps the stretch whole: words are cut only where no merge reaches", "[tokenizer]") {
    // "a" + "▁b" joins a character to a following "▁": "a b" must become the one token "a▁b".
    const std::string text = R"({"added_tokens": [{"id": 0, "content": "<unk>", "special": true}], "normalizer": null,
      "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": false},
      "post_processor": null, "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never"},
      "model": {"type": "BPE", "unk_token": "<unk>", "vocab": {"<unk>": 0, "▁": 1, "a": 2, "b": 3, "▁b": 4, "a▁b": 5},
        "merges": ["▁ b", "a ▁b"]}})";
    const Tokenizer crossing = Tokenizer::from_json(text, "crossing.json");
    CHECK(crossing.encode("a b") == std::vector<int>{5});
    CHECK(crossing.encode("a b a b") == std::vector<int>{5, 1, 5});
    CHECK(crossing.decode(std::vector<int>{1, 5}) == " a b");  // the "never" decoder strips nothing
    std::string no_cross = text;
    no_cross.replace(no_cross.find(", \"a ▁b\""), std::string(", \"a ▁b\"").size(), "");
    const Tokenizer cut = Tokenizer::from_json(no_cross, "cut.json");
    CHECK(cut.encode("a b a b") == std::vector<int>{2, 4, 1, 2, 4});  // "a", "▁b", "▁" ... cut before each "▁"
}

}  // namespace test_tokenizer
