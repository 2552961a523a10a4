// Max-Gram (CS Drafting §3.3, App. A) on hand-made contexts that pin each part of the rule, and the
// bigram table it falls back to: built with ties, saved, loaded, and every broken file rejected.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "catch.hpp"
#include "detail/methods/cs_drafting/max_gram.hpp"

namespace test_max_gram {  // a unity build compiles several test files as one

using namespace specdec;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

using Tokens = std::vector<int>;

fs::path fresh_dir(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / ("specdec_test_" + name);
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

/// The rule spelled out as a brute force: the longest length first, then the leftmost start.
MaxGramMatch brute_force_match(const Tokens& c) {
    const std::size_t L = c.size();
    for (std::size_t m = L == 0 ? 0 : L - 1; m >= 1; --m)
        for (std::size_t j = 0; j + m <= L - 1; ++j)
            if (std::equal(c.begin() + static_cast<std::ptrdiff_t>(j), c.begin() + static_cast<std::ptrdiff_t>(j + m),
                           c.end() - static_cast<std::ptrdiff_t>(m)))
                return MaxGramMatch{.start = j, .length = m};
    return MaxGramMatch{};
}

}  // namespace

TEST_CASE("max_gram copies what followed the leftmost of the longest earlier occurrences", "[max_gram]") {
    SECTION("a longer occurrence wins even when it lies to the right of a shorter one") {
        //                  0  1  2  3  4  5  6  7  8  9  10
        const Tokens c{2, 3, 8, 1, 2, 3, 6, 4, 1, 2, 3};  // suffix 1 2 3; "2 3" at 0, "1 2 3" at 3
        const MaxGramMatch m = longest_earlier_suffix(c);
        CHECK(m.start == 3);
        CHECK(m.length == 3);
        CHECK(max_gram(c, c.size(), 3, nullptr) == Tokens{6, 4, 1});
    }
    SECTION("of two occurrences of the same length the leftmost wins") {
        const Tokens c{5, 1, 7, 5, 1, 8, 9, 5, 1};  // suffix 9 5 1: "5 1" at 0 and at 3, neither preceded by 9
        const MaxGramMatch m = longest_earlier_suffix(c);
        CHECK(m.start == 0);
        CHECK(m.length == 2);
        CHECK(max_gram(c, c.size(), 2, nullptr) == Tokens{7, 5});
    }
    SECTION("an occurrence may overlap the suffix itself") {
        const Tokens c{7, 7, 7, 7};  // "7 7 7" at 0 ends at 3 <= L-1, followed by the last 7
        CHECK(longest_earlier_suffix(c).length == 3);
        CHECK(max_gram(c, 1, 5, nullptr) == Tokens{7, 7, 7, 7, 7});  // a period of 1 keeps repeating
    }
    SECTION("it agrees with a brute-force search on random contexts") {
        std::mt19937_64 rng(7);
        for (int trial = 0; trial < 500; ++trial) {
            Tokens c(1 + rng() % 40);
            const int alphabet = 2 + static_cast<int>(rng() % 4);
            for (int& t : c) t = static_cast<int>(rng() % static_cast<unsigned>(alphabet));
            const MaxGramMatch fast = longest_earlier_suffix(c), slow = brute_force_match(c);
            CAPTURE(trial, c);
            CHECK(fast.length == slow.length);
            CHECK(fast.start == slow.start);
        }
    }
}

TEST_CASE("max_gram searches prompt and generation in one pass, the prompt first", "[max_gram]") {
    SECTION("at equal length the prompt's occurrence wins, and its copy runs on into the generation") {
        const Tokens c{4, 1, 7, /* generation: */ 2, 1, 8, 3, 1};  // "1" at 1 (prompt) and at 4
        CHECK(max_gram(c, 3, 1, nullptr) == Tokens{7});
        CHECK(max_gram(c, 3, 3, nullptr) == Tokens{7, 2, 1});
    }
    SECTION("a longer occurrence in the generation beats a shorter one in the prompt") {
        // The authors match against concat(prompt, generation[:-1]) at once, so length decides first.
        const Tokens c{1, 7, 9, /* generation: */ 3, 1, 8, 3, 1};  // "1" at 0 (prompt), "3 1" at 3
        CHECK(max_gram(c, 3, 3, nullptr) == Tokens{8, 3, 1});
    }
    SECTION("when the last token never occurs in the prompt, the generation is searched") {
        const Tokens c{1, 2, 3, /* generation: */ 6, 4, 5, 6};
        CHECK(max_gram(c, 3, 2, nullptr) == Tokens{4, 5});
    }
    SECTION("the copy runs up to the end of the context, the last token included, then repeats itself") {
        // "6" at 3 is followed by 4 5 6, which ends with "6" again: the text is taken to loop.
        const Tokens c{1, 2, 3, /* generation: */ 6, 4, 5, 6};
        CHECK(max_gram(c, 3, 3, nullptr) == Tokens{4, 5, 6});
        CHECK(max_gram(c, 3, 8, nullptr) == Tokens{4, 5, 6, 4, 5, 6, 4, 5});
    }
    SECTION("prompt_len does not change the proposal") {
        const Tokens c{1, 7, 9, 3, 1, 8, 3, 1};
        for (std::size_t p = 0; p <= c.size(); ++p) CHECK(max_gram(c, p, 3, nullptr) == Tokens{8, 3, 1});
    }
}

TEST_CASE("max_gram falls back to the bigram table and stops where it has no successor", "[max_gram]") {
    // next: 0->1, 1->2, 2->-1, 3->4, 4->3, 5->-1, 6->7, 7->-1
    const Bigram bigram{.vocab_size = 8, .next = {1, 2, -1, 4, 3, -1, 7, -1}};
    SECTION("a match never needs the table: the copy fills n") {
        const Tokens c{1, 2, 3, 6, 4, 5, 6};
        CHECK(max_gram(c, 3, 4, &bigram) == Tokens{4, 5, 6, 4});
    }
    SECTION("when the last token never occurred before, from the last token") {
        CHECK(max_gram(Tokens{0, 1, 2, 3}, 4, 5, &bigram) == Tokens{4, 3, 4, 3, 4});
        CHECK(max_gram(Tokens{0, 1, 5}, 2, 5, &bigram).empty());  // 5 has no successor
    }
    SECTION("a one-token context has no earlier occurrence: the bigram alone") {
        CHECK(max_gram(Tokens{0}, 1, 3, &bigram) == Tokens{1, 2});
        CHECK(max_gram(Tokens{0}, 1, 3, nullptr).empty());
    }
    SECTION("n = 0 and an empty context propose nothing") {
        CHECK(max_gram(Tokens{0, 1, 0}, 1, 0, &bigram).empty());
        CHECK(max_gram(Tokens{}, 0, 5, &bigram).empty());
    }
    SECTION("a token outside the table's vocabulary is an error naming it") {
        CHECK_THROWS_WITH(max_gram(Tokens{0, 9}, 1, 2, &bigram), Contains("token 9") && Contains("[0, 8)"));
    }
}

TEST_CASE("max_gram rejects a prompt longer than the context and a negative n", "[max_gram]") {
    CHECK_THROWS_WITH(max_gram(Tokens{1, 2, 3}, 4, 2, nullptr),
                      Contains("[specdec.max_gram]") && Contains("prompt_len = 4") && Contains("3 tokens"));
    CHECK_THROWS_WITH(max_gram(Tokens{1, 2, 3}, 1, -1, nullptr), Contains("n = -1"));
}

TEST_CASE("a bigram table keeps each token's most frequent successor, the smallest id on a tie", "[max_gram]") {
    // 0->1 twice and 0->2 twice (tie: 1); 1->0 twice; 2->0 once and 2->3 once (tie: 0); 3->3; 4 never seen.
    const Tokens corpus{0, 1, 0, 2, 0, 1, 0, 2, 3, 3};
    const Bigram b = Bigram::build(corpus, 5);
    CHECK(b.vocab_size == 5);
    CHECK(b.next == Tokens{1, 0, 0, 3, -1});
    CHECK(Bigram::build(Tokens{}, 3).next == Tokens{-1, -1, -1});
    CHECK(Bigram::build(Tokens{2}, 3).next == Tokens{-1, -1, -1});

    CHECK_THROWS_WITH(Bigram::build(Tokens{0, 1, 5, 2}, 5),
                      Contains("[specdec.bigram]") && Contains("token 5 at position 2") && Contains("[0, 5)"));
    CHECK_THROWS_WITH(Bigram::build(Tokens{0, -1}, 5), Contains("token -1 at position 1"));
    CHECK_THROWS_WITH(Bigram::build(Tokens{0}, 0), Contains("vocab_size = 0"));

    SECTION("the same table from a training token file") {
        const fs::path dir = fresh_dir("bigram_tokens");
        train::write_token_file((dir / "corpus.bin").string(), corpus);
        const train::TokenFile file((dir / "corpus.bin").string());
        CHECK(Bigram::build(file, 5).next == b.next);
        fs::remove_all(dir);
    }
}

TEST_CASE("a bigram table round-trips through its JSON file, and broken files name file and field", "[max_gram]") {
    const fs::path dir = fresh_dir("bigram_json");
    const Bigram b = Bigram::build(Tokens{0, 1, 0, 2, 0, 1, 0, 2, 3, 3}, 5);
    b.save(dir / "bigram.json");
    const Bigram back = Bigram::load(dir / "bigram.json", 5);
    CHECK(back.vocab_size == 5);
    CHECK(back.next == b.next);

    const fs::path bad = dir / "bad.json";
    const auto load_text = [&](const std::string& text) {
        write_text(bad, text);
        return Bigram::load(bad, 5);
    };
    CHECK_THROWS_WITH(load_text(R"({"vocab_size": 5, "next": [1, 0, 0, 3, -1)"),
                      Contains("[specdec.json]") && Contains("bad.json"));                       // not JSON
    CHECK_THROWS_WITH(load_text("[1, 0, 0, 3, -1]"), Contains("bad.json") && Contains("expected a JSON object"));
    CHECK_THROWS_WITH(load_text(R"({"vocab_size": 4, "next": [1, 0, 0, 3]})"),
                      Contains("[specdec.bigram]") && Contains("bad.json") && Contains("'vocab_size' = 4") &&
                          Contains("5 tokens"));                                                  // another vocabulary
    CHECK_THROWS_WITH(load_text(R"({"vocab_size": 5, "next": [1, 0, 0]})"),
                      Contains("bad.json") && Contains("'next' has 3 entries"));                  // wrong length
    CHECK_THROWS_WITH(load_text(R"({"vocab_size": 5, "next": [1, 0, 7, 3, -1]})"),
                      Contains("bad.json") && Contains("'next'[2] = 7") && Contains("[-1, 5)"));  // out of range
    CHECK_THROWS_WITH(load_text(R"({"vocab_size": 5, "next": [1, 0, 0, 3, -2]})"), Contains("'next'[4] = -2"));
    CHECK_THROWS_WITH(load_text(R"({"vocab_size": 5, "next": [1, 0, 0.5, 3, -1]})"),
                      Contains("bad.json") && Contains("expected an integer"));
    CHECK_THROWS_WITH(load_text(R"({"vocab_size": 5})"), Contains("bad.json") && Contains("missing field 'next'"));
    CHECK_THROWS_WITH(Bigram::load(dir / "absent.json", 5), Contains("absent.json") && Contains("cannot open"));
    fs::remove_all(dir);
}

}  // namespace test_max_gram
