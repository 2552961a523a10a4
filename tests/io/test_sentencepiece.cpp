// SentencePiece's tokenizer.model (detail/io/sentencepiece.hpp): a BPE model trained by the sentencepiece
// library in Llama-2's configuration encodes all 374 golden strings to that library's ids
// (scripts/make_spm_golden.py), and a model the encoder cannot run is refused naming the field and value.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"
#include "source_dir.hpp"

namespace test_sentencepiece {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

std::vector<int> ids_of(const json::Value& v) {
    std::vector<int> out;
    for (const json::Value& id : v.as_array()) out.push_back(static_cast<int>(id.as_int()));
    return out;
}

// ---- a protobuf writer, just enough to build ModelProtos (protobuf.dev, "Encoding")
std::string varint(std::uint64_t v) {
    std::string out;
    do {
        out += static_cast<char>((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
    return out;
}
std::string key(int field, int wire) { return varint(static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire)); }
std::string number(int field, std::int64_t v) { return key(field, 0) + varint(static_cast<std::uint64_t>(v)); }
std::string bytes(int field, const std::string& b) { return key(field, 2) + varint(b.size()) + b; }
std::string piece(const std::string& text, float score, int type) {
    std::string f(4, '\0');
    std::memcpy(f.data(), &score, 4);
    return bytes(1, bytes(1, text) + key(2, 5) + f + number(3, type));
}

/// A ModelProto in Llama-2's configuration: <unk> <s> </s>, the 256 byte pieces, then `normal`.
struct Proto {
    std::vector<std::string> normal{"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab"};
    std::string extra_piece;  // appended after the normal pieces
    std::string trainer = number(3, 2) + number(35, 1);            // model_type BPE, byte_fallback
    std::string normalizer = bytes(1, "identity") + number(4, 0);  // remove_extra_whitespaces false
    std::string bytes_of() const {
        std::string out = piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3);
        for (int b = 0; b < 256; ++b) {
            const char* hex = "0123456789ABCDEF";
            out += piece(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0, 6);
        }
        float score = 0;
        for (const std::string& p : normal) out += piece(p, score -= 1, 1);
        return out + extra_piece + bytes(2, trainer) + bytes(3, normalizer);
    }
};

fs::path write(const std::string& name, const std::string& content) {
    const fs::path dir = fs::temp_directory_path() / "specdec_test_sentencepiece";
    fs::create_directories(dir);
    std::ofstream(dir / name, std::ios::binary) << content;
    return dir / name;
}

}  // namespace

TEST_CASE("a tokenizer.model encodes every golden string to the sentencepiece library's ids", "[tokenizer][sentencepiece]") {
    const fs::path dir = fs::path(SPECDEC_SOURCE_DIR) / "tests/data/tokenizers";
    const Llama2cTokenizer tok = load_sentencepiece_model(dir / "sp_bpe.tokenizer.model");
    REQUIRE(tok.vocab_size() == 600);
    CHECK(tok.token(259) == " t");  // "▁t" as Llama2cTokenizer spells it
    const json::Value golden = json::parse(detail::read_text_file(dir / "sp_bpe.ids.json", "test"), "sp_bpe.ids.json");
    int n = 0;
    for (const json::Value& c : golden.at("cases").as_array()) {
        const std::string& text = c.at("text").as_string();
        INFO("text: " << text);
        CHECK(tok.encode(text, false, false) == ids_of(c.at("ids")));
        CHECK(tok.encode(text, true, false) == ids_of(c.at("ids_special")));
        // After BOS, as run.c decodes: SentencePiece strips the dummy prefix of the first piece.
        CHECK(tok.decode(ids_of(c.at("ids_special"))) == c.at("decoded").as_string());
        ++n;
    }
    CHECK(n == 374);
}

TEST_CASE("a hand-built tokenizer.model in Llama-2's configuration loads and merges by score", "[tokenizer][sentencepiece]") {
    const Llama2cTokenizer tok = load_sentencepiece_model(write("good.model", Proto{}.bytes_of()));
    REQUIRE(tok.vocab_size() == 264);
    CHECK(tok.encode("ab", false) == std::vector<int>{262, 261});  // "▁a" (score -4) is merged before "ab" (-5)
    CHECK(tok.encode("c", false) == std::vector<int>{259, 3 + 'c'});  // "c" falls back to its byte
    // A "▁" in the text is a space, as SentencePiece escapes spaces before encoding (run.c would spell it
    // as its three bytes).
    CHECK(tok.encode("b\xE2\x96\x81" "a", false) == std::vector<int>{259, 261, 262});
    CHECK(tok.encode("b\xE2\x96\x81" "a", false) == tok.encode("b a", false));
}

TEST_CASE("a tokenizer.model the encoder cannot run is refused naming the field and value", "[tokenizer][sentencepiece][errors]") {
    const auto refused = [](const Proto& p, const std::string& message) {
        CHECK_THROWS_WITH(load_sentencepiece_model(write("bad.model", p.bytes_of())),
                          Catch::Contains("[specdec.sentencepiece]") && Catch::Contains("bad.model") && Catch::Contains(message));
    };
    Proto unigram;
    unigram.trainer = number(3, 1) + number(35, 1);
    refused(unigram, "trainer_spec.model_type is 1 (Unigram)");
    Proto no_bytes;
    no_bytes.trainer = number(3, 2);
    refused(no_bytes, "trainer_spec.byte_fallback is false");
    Proto ids;
    ids.trainer += number(41, -1);  // no BOS: an int32 -1 is a ten-byte varint
    refused(ids, "bos_id -1");
    Proto nfkc;
    nfkc.normalizer = bytes(1, "nmt_nfkc") + bytes(2, "charsmap") + number(4, 0);
    refused(nfkc, "normalizer_spec.name is 'nmt_nfkc' with a precompiled_charsmap");
    Proto collapse;
    collapse.normalizer = bytes(1, "identity");  // remove_extra_whitespaces defaults to true
    refused(collapse, "normalizer_spec.remove_extra_whitespaces is true");
    Proto no_prefix;
    no_prefix.normalizer += number(3, 0);
    refused(no_prefix, "normalizer_spec.add_dummy_prefix is false");
    Proto user;
    user.extra_piece = piece("<tool>", 0, 4);
    refused(user, "piece 264 '<tool>' is user-defined");
    Proto bad_type;
    bad_type.extra_piece = piece("x", 0, 9);
    refused(bad_type, "piece 264: has type 9");

    CHECK_THROWS_WITH(load_sentencepiece_model(write("bad.model", Proto{}.bytes_of().substr(0, 1000))),
                      Catch::Contains("bad.model") && Catch::Contains("bytes where"));
    CHECK_THROWS_WITH(load_sentencepiece_model(write("bad.model", "not a ModelProto")),
                      Catch::Contains("bad.model") && Catch::Contains("wire type 6"));
    CHECK_THROWS_WITH(load_sentencepiece_model(write("bad.model", piece("a", 0, 1))),
                      Catch::Contains("bad.model") && Catch::Contains("holds 1 pieces"));
    CHECK_THROWS_WITH(load_sentencepiece_model(write("bad.model", key(5, 0) + std::string(10, '\xff'))),
                      Catch::Contains("varint longer than 10 bytes"));
    CHECK_THROWS_WITH(load_sentencepiece_model(fs::temp_directory_path() / "specdec_no_such.model"),
                      Catch::Contains("specdec_no_such.model"));
}

}  // namespace test_sentencepiece
