// Golden tests: llama.cpp's own tokenizer test vocabularies (models/ggml-vocab-*.gguf, metadata only) and
// their reference tokenizations (.inp / .out, what llama.cpp's tests/test-tokenizer-0 checks with
// add_special = false, parse_special = false). tests/data/gguf/README.md says which files are committed.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "source_dir.hpp"
#include "skip_without.hpp"
#include "helpers.hpp"

namespace test_gguf_golden {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = fs::path(SPECDEC_SOURCE_DIR) / "tests/data/gguf";

std::string read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

/// The cases of a .inp / .out pair, split as test-tokenizer-0.cpp splits them.
struct Case {
    std::string text;
    std::vector<int> ids;
};
std::vector<Case> read_cases(const fs::path& base) {
    const std::string raw = read_text(base.string() + ".inp");
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> texts;
    for (std::size_t pos = 0; pos < raw.size();) {
        const std::size_t next = raw.find(sep, pos);
        if (next == std::string::npos) {
            texts.push_back(raw.substr(pos));
            break;
        }
        texts.push_back(raw.substr(pos, next - pos));
        pos = next + sep.size();
    }
    std::istringstream out(read_text(base.string() + ".out"));
    std::vector<Case> cases;
    std::string line;
    for (std::size_t i = 0; std::getline(out, line); ++i) {
        REQUIRE(i < texts.size());
        Case c{texts[i], {}};
        std::istringstream ids(line);
        for (int id; ids >> id;) c.ids.push_back(id);
        cases.push_back(std::move(c));
    }
    REQUIRE(cases.size() == texts.size());
    return cases;
}

/// A vocabulary the repository may not ship (Meta's licence): ctest reports the case as skipped (exit 77).
bool skip_without(const fs::path& file) { return test::skip_without(file, "not redistributable; scripts/llama_cpp_interop.sh --vocab copies it from node-llama-cpp"); }

/// Encodes every case of kDir/<name>.inp/.out with the vocabulary `vocab`; returns how many match.
int check_vocab(const fs::path& vocab, GgufTokenizer::Kind kind, bool check_decode) {
    const GgufFile f = read_gguf_header(vocab);
    const std::optional<GgufTokenizer> tok = GgufTokenizer::from_gguf(f);
    REQUIRE(tok.has_value());
    CHECK(tok->kind() == kind);
    const std::vector<Case> cases = read_cases(kDir / vocab.filename());
    int matched = 0, shown = 0;
    for (const Case& c : cases) {
        const std::vector<int> got = tok->encode(c.text, /*add_special=*/false);
        if (got == c.ids) {
            ++matched;
        } else if (shown++ < 5) {
            UNSCOPED_INFO("mismatch on '" << c.text << "'");
        }
        if (check_decode) CHECK(tok->decode(c.ids) == c.text);
    }
    INFO(vocab.filename().string() << ": " << matched << " of " << cases.size() << " cases match llama.cpp");
    CHECK(matched == static_cast<int>(cases.size()));
    return matched;
}

}  // namespace

TEST_CASE("GPT-2's vocabulary from GGUF tokenizes every llama.cpp test case as llama.cpp does", "[gguf][golden]") {
    check_vocab(kDir / "ggml-vocab-gpt-2.gguf", GgufTokenizer::Kind::kGpt2, /*check_decode=*/true);
}

TEST_CASE("Phi-3's SentencePiece vocabulary from GGUF tokenizes every llama.cpp test case as llama.cpp does",
          "[gguf][golden]") {
    check_vocab(kDir / "ggml-vocab-phi-3.gguf", GgufTokenizer::Kind::kLlama, /*check_decode=*/false);
}

TEST_CASE("Llama-2's SentencePiece vocabulary from GGUF tokenizes every llama.cpp test case as llama.cpp does",
          "[gguf][golden]") {
    const fs::path vocab = kDir / "cache/ggml-vocab-llama-spm.gguf";
    if (skip_without(vocab)) return;
    // The .inp/.out pair is committed beside the other files; only the vocabulary is cached.
    check_vocab(vocab, GgufTokenizer::Kind::kLlama, /*check_decode=*/false);
}

TEST_CASE("Llama-3's byte-level vocabulary from GGUF tokenizes every llama.cpp test case as llama.cpp does",
          "[gguf][golden]") {
    const fs::path vocab = kDir / "cache/ggml-vocab-llama-bpe.gguf";
    if (skip_without(vocab)) return;
    check_vocab(vocab, GgufTokenizer::Kind::kGpt2, /*check_decode=*/true);
}

}  // namespace test_gguf_golden
