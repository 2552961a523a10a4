// The benchmark's methods.json parser: a good file becomes plain structs; each bad entry fails with a
// message naming the file, the entry and the field.
#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include "catch.hpp"
#include "source_dir.hpp"
#include "examples/bench/methods.hpp"
#include "examples/bench/report_html.hpp"

namespace test_bench_config {  // a unity build compiles several test files as one

using namespace specdec;
using namespace specdec::bench;

namespace {

/// A methods file with one entry after the baseline.
std::string with_entry(const std::string& entry) {
    return R"([{"name": "autoregressive", "method": "autoregressive"}, )" + entry + "]";
}

}  // namespace

TEST_CASE("a good methods file parses into one spec per entry, strings turned into enums", "[bench]") {
    const std::vector<MethodSpec> m = parse_methods(R"([
        {"name": "autoregressive", "method": "autoregressive", "about": "baseline"},
        {"name": "SD small g4", "method": "chain", "drafter": "small", "gamma": 4},
        {"name": "tree", "method": "tree", "drafter": "small", "k_config": [4, 2, 2, 1], "draw": "without_replacement"},
        {"name": "topk tree", "method": "tree", "drafter": "mid", "k_config": [2], "draw": "topk"}
    ])", "methods.json");
    REQUIRE(m.size() == 4);
    CHECK(m[0].kind == MethodKind::kAutoregressive);
    CHECK(m[0].drafter.empty());
    CHECK(m[0].about == "baseline");
    CHECK(m[1].kind == MethodKind::kChain);
    CHECK(m[1].drafter == "small");
    CHECK(m[1].gamma == 4);
    CHECK(m[2].kind == MethodKind::kTree);
    CHECK(m[2].k_config == std::vector<int>{4, 2, 2, 1});
    CHECK(m[2].draw == DrawPolicy::kSampleWithoutReplacement);
    CHECK(m[3].draw == DrawPolicy::kTopK);
    CHECK(m[3].drafter == "mid");
    CHECK(draft_nodes(m[2]) == 4 + 8 + 16 + 16);
}

TEST_CASE("the shipped methods.json parses and holds the baseline, both drafters and a tree", "[bench]") {
    // The source tree, given by CMake, so the test runs from the build folder (ctest) and the repo root alike.
    const std::filesystem::path repo = SPECDEC_SOURCE_DIR;
    const std::vector<MethodSpec> m = load_methods(repo / "examples/bench/methods.json");
    REQUIRE(m.size() >= 4);
    CHECK(m[0].kind == MethodKind::kAutoregressive);
    CHECK(std::count_if(m.begin(), m.end(), [](const MethodSpec& s) { return s.kind == MethodKind::kChain; }) >= 2);
    CHECK(std::count_if(m.begin(), m.end(), [](const MethodSpec& s) { return s.kind == MethodKind::kTree; }) >= 1);
}

TEST_CASE("a lookup entry needs no drafter: gamma tokens copied per step, n-grams of max_ngram down to 1", "[bench]") {
    const std::vector<MethodSpec> m =
        parse_methods(with_entry(R"({"name": "lookup g6", "method": "lookup", "gamma": 6, "max_ngram": 2})"), "m.json");
    REQUIRE(m.size() == 2);
    CHECK(m[1].kind == MethodKind::kLookup);
    CHECK(m[1].drafter.empty());
    CHECK(m[1].gamma == 6);
    CHECK(m[1].max_ngram == 2);
    CHECK(draft_nodes(m[1]) == 6);
    CHECK(html::describe(m[1]) == "prompt lookup (no drafter model), gamma 6, n-grams of 2 down to 1");
    CHECK(parse_methods(with_entry(R"({"name": "l", "method": "lookup", "gamma": 4})"), "m.json")[1].max_ngram == 3);
    using Catch::Contains;
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "l", "method": "lookup", "gamma": 4, "drafter": "small"})"), "m.json"),
                      Contains("field 'drafter'") && Contains("not a field of method 'lookup'"));
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "l", "method": "lookup"})"), "m.json"), Contains("field 'gamma'"));
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "l", "method": "lookup", "gamma": 4, "max_ngram": 0})"), "m.json"),
                      Contains("field 'max_ngram'"));
}

TEST_CASE("a text entry names a drafter of any tokenizer and its gamma", "[bench]") {
    const std::vector<MethodSpec> m =
        parse_methods(with_entry(R"({"name": "text g4", "method": "text", "drafter": "other", "gamma": 4})"), "m.json");
    CHECK(m[1].kind == MethodKind::kText);
    CHECK(m[1].drafter == "other");
    CHECK(m[1].gamma == 4);
    CHECK(draft_nodes(m[1]) == 4);
    CHECK(html::describe(m[1]) == "chain through the text, drafter other with its own tokenizer, gamma 4");
    using Catch::Contains;
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "t", "method": "text", "gamma": 4})"), "m.json"), Contains("field 'drafter'"));
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "t", "method": "text", "drafter": "other"})"), "m.json"),
                      Contains("field 'gamma'"));
}

TEST_CASE("a bad methods entry is an error naming the file, the entry and the field", "[bench]") {
    using Catch::Contains;
    SECTION("an unknown method") {
        CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "x", "method": "medusa"})"), "m.json"),
                          Contains("m.json: entry 1 ('x'), field 'method'") && Contains("\"medusa\"") &&
                              Contains("autoregressive, chain, tree"));
    }
    SECTION("a missing drafter") {
        CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "sd", "method": "chain", "gamma": 4})"), "m.json"),
                          Contains("entry 1 ('sd'), field 'drafter'") && Contains("missing"));
    }
    SECTION("a bad k_config") {
        const auto bad = [](const std::string& k) {
            return with_entry(R"({"name": "t", "method": "tree", "drafter": "small", "draw": "topk", "k_config": )" + k + "}");
        };
        CHECK_THROWS_WITH(parse_methods(bad("[4, 0, 1]"), "m.json"),
                          Contains("entry 1 ('t'), field 'k_config[1]'") && Contains("value 0"));
        CHECK_THROWS_WITH(parse_methods(bad("[4, \"2\"]"), "m.json"),
                          Contains("field 'k_config[1]'") && Contains("expected an integer, got string"));
        CHECK_THROWS_WITH(parse_methods(bad("[]"), "m.json"), Contains("field 'k_config'") && Contains("non-empty"));
        CHECK_THROWS_WITH(parse_methods(bad("4"), "m.json"), Contains("field 'k_config'"));
        CHECK_THROWS_WITH(parse_methods(bad("[8, 8, 8]"), "m.json"),
                          Contains("field 'k_config'") && Contains("more than 240 draft nodes"));
        std::string deep = "[64";  // 64 levels of 64 children: the count must not overflow and pass the cap
        for (int i = 1; i < 64; ++i) deep += ", 64";
        CHECK_THROWS_WITH(parse_methods(bad(deep + "]"), "m.json"), Contains("more than 240 draft nodes"));
    }
    SECTION("an unknown draw") {
        CHECK_THROWS_WITH(
            parse_methods(with_entry(R"({"name": "t", "method": "tree", "drafter": "small", "k_config": [2], "draw": "beam"})"),
                          "m.json"),
            Contains("entry 1 ('t'), field 'draw'") && Contains("\"beam\"") && Contains("without_replacement"));
    }
    SECTION("a field of another method, or a typo") {
        CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "sd", "method": "chain", "drafter": "small", "gama": 4})"), "m.json"),
                          Contains("field 'gama'") && Contains("not a field of method 'chain'"));
        CHECK_THROWS_WITH(
            parse_methods(R"([{"name": "ar", "method": "autoregressive", "drafter": "small"}])", "m.json"),
            Contains("entry 0 ('ar'), field 'drafter'"));
    }
    SECTION("a chain's gamma out of range") {
        CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "sd", "method": "chain", "drafter": "small", "gamma": 0})"), "m.json"),
                          Contains("field 'gamma'") && Contains("value 0"));
    }
}

TEST_CASE("cascade and expanded entries: CS Drafting's K-matrix and CAPE's sizes", "[bench]") {
    using Catch::Contains;
    const std::vector<MethodSpec> m = parse_methods(with_entry(R"(
        {"name": "cs", "method": "cascade", "drafters": ["mid", "small", "maxgram"],
         "k_matrix": [[2, 4, 3], [0, 1, 10], [0, 0, 10]], "lenience": 3},
        {"name": "cs tree", "method": "cascade", "drafters": ["mid", "maxgram"], "k_matrix": [[1, 3], [0, 1]], "children": 8},
        {"name": "cape", "method": "expanded", "drafter": "glide", "gamma": 5, "expansion": "cape"},
        {"name": "fixed", "method": "expanded", "drafter": "glide", "gamma": 5, "expansion": 4, "max_drafts": 24})"), "m.json");
    REQUIRE(m.size() == 5);
    CHECK(m[1].kind == MethodKind::kCascade);
    CHECK(m[1].drafters == std::vector<std::string>{"mid", "small", "maxgram"});
    CHECK(m[1].k_matrix[1] == std::vector<int>{0, 1, 10});
    CHECK(m[1].lenience == 3.0);
    CHECK(draft_nodes(m[1]) == 12);  // mid's review: 11 proposals + its own token
    CHECK(m[2].children == 8);
    CHECK(m[2].sizes(0.5f) == 7);
    CHECK(m[3].kind == MethodKind::kExpanded);
    CHECK(m[3].sizes(0.5f) == 5);  // CAPE's 7/5/3/1
    CHECK(m[4].sizes(0.5f) == 4);
    CHECK(m[4].max_drafts == 24);

    const auto cascade = [](const std::string& fields) {
        return with_entry(R"({"name": "c", "method": "cascade", )" + fields + "}");
    };
    CHECK_THROWS_WITH(parse_methods(cascade(R"("drafters": ["mid", "small"], "k_matrix": [[1, 1], [0, 1]])"), "m.json"),
                      Contains("field 'drafters'") && Contains("\"maxgram\""));
    CHECK_THROWS_WITH(parse_methods(cascade(R"("drafters": ["mid", "maxgram"], "k_matrix": [[1, 1], [2, 1]])"), "m.json"),
                      Contains("field 'k_matrix'") && Contains("[1][0] = 2 lies below the diagonal"));
    CHECK_THROWS_WITH(parse_methods(cascade(R"("drafters": ["mid", "maxgram"], "k_matrix": [[1]])"), "m.json"),
                      Contains("field 'k_matrix'") && Contains("1 rows for 2 drafters"));
    CHECK_THROWS_WITH(parse_methods(cascade(R"("drafters": ["mid", "maxgram"], "k_matrix": [[1, 1], [0, 1]], "lenience": 2)"), "m.json"),
                      Contains("field 'lenience'") && Contains("App. B"));
    CHECK_THROWS_WITH(parse_methods(cascade(R"("drafters": ["a", "b", "maxgram"], "k_matrix": [[1, 1, 1], [0, 1, 1], [0, 0, 1]], "lenience": 0.5)"), "m.json"),
                      Contains("field 'lenience'") && Contains("outside [1"));
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "e", "method": "expanded", "drafter": "g", "gamma": 5, "expansion": "beam"})"), "m.json"),
                      Contains("field 'expansion'") && Contains("\"beam\""));
}

TEST_CASE("a methods file must be a list with exactly one autoregressive baseline and unique names", "[bench]") {
    using Catch::Contains;
    CHECK_THROWS_WITH(parse_methods(R"({"methods": []})", "m.json"), Contains("m.json") && Contains("array"));
    CHECK_THROWS_WITH(parse_methods(R"([{"name": "sd", "method": "chain", "drafter": "small", "gamma": 4}])", "m.json"),
                      Contains("exactly one \"autoregressive\""));
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "autoregressive", "method": "chain", "drafter": "s", "gamma": 2})"),
                                    "m.json"),
                      Contains("entry 1, field 'name'") && Contains("earlier entry"));
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"method": "chain"})"), "m.json"), Contains("entry 1, field 'name'"));
    CHECK_THROWS_WITH(parse_methods("[1, 2", "m.json"), Contains("m.json"));
}

TEST_CASE("the report escapes generated text and spells out bytes that are not characters", "[bench]") {
    CHECK(html::escape("<b>\"a\" & 'b'</b>") == "&lt;b&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/b&gt;");
    CHECK(html::visible("a\x15" "b\n") == "a<0x15>b\n");
    CHECK(html::visible("caf\xC3\xA9") == "caf\xC3\xA9");
    CHECK(html::visible("\xC3") == "<0xC3>");

    Results r;
    r.temperatures = {0.0f};
    MethodResult ar;
    ar.spec.name = "<ar>";
    r.rows.push_back(ar);
    CaseStudy c;
    c.prompt_text = "<script>x</script>";
    c.methods = {"<ar>"};
    c.outputs = {{Piece{"</td>", 1, 1}}};
    r.cases.push_back(c);
    const std::string page = report_html(r);
    CHECK(page.find("<script") == std::string::npos);
    CHECK(page.find("&lt;script&gt;x&lt;/script&gt;") != std::string::npos);
    CHECK(page.find("&lt;ar&gt;") != std::string::npos);
}

TEST_CASE("pct and eagle2 entries: EDD's pruned tree with a measured or given threshold, EAGLE-2's budget", "[bench]") {
    const std::vector<MethodSpec> m = parse_methods(with_entry(R"(
        {"name": "pct", "method": "pct", "drafter": "edd", "expand_threshold": "measured"},
        {"name": "pct ablation", "method": "pct", "drafter": "edd", "expand_threshold": 0.05, "prune": "token",
         "remove_leaves": false, "width": 3, "max_depth": 6, "max_drafts": 40, "leaf_threshold": 0.02},
        {"name": "eagle2", "method": "eagle2", "drafter": "edd", "total_tokens": 51, "depth": 6, "top_k": 10})"),
                                                    "m.json");
    REQUIRE(m.size() == 4);
    CHECK(m[1].kind == MethodKind::kPct);
    CHECK(m[1].pct.expand_threshold == 0.0f);  // measured before the runs
    CHECK(m[1].pct.width == 5);
    CHECK(m[1].pct.max_depth == 10);
    CHECK(m[1].pct.remove_leaves);
    CHECK(m[2].pct.expand_threshold == 0.05f);
    CHECK(m[2].pct.prune == PctPrune::kTokenConfidence);
    CHECK(!m[2].pct.remove_leaves);
    CHECK(m[2].pct.width == 3);
    CHECK(m[2].pct.max_drafts == 40);
    CHECK(m[2].pct.leaf_threshold == 0.02f);
    CHECK(draft_nodes(m[2]) == 40);
    CHECK(m[3].kind == MethodKind::kEagle2);
    CHECK(m[3].eagle2.total_tokens == 51);
    CHECK(draft_nodes(m[3]) == 50);
    using Catch::Contains;
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "p", "method": "pct", "drafter": "edd", "expand_threshold": "fast"})"), "m.json"),
                      Contains("entry 1 ('p'), field 'expand_threshold': unknown value \"fast\""));
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "p", "method": "pct", "drafter": "edd", "expand_threshold": 1.5})"), "m.json"),
                      Contains("field 'expand_threshold': value 1.5"));
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "p", "method": "pct", "drafter": "edd", "expand_threshold": 0.1, "prune": "leaf"})"), "m.json"),
                      Contains("field 'prune': unknown value \"leaf\""));
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "e", "method": "eagle2", "drafter": "edd", "gamma": 4})"), "m.json"),
                      Contains("field 'gamma': not a field of method 'eagle2'"));
    const std::filesystem::path repo = SPECDEC_SOURCE_DIR;
    CHECK(load_methods(repo / "examples/bench/methods_edd.json").size() == 14u);
}

TEST_CASE("the improved-MCSD entries parse, and a target_initialised entry must opt in to its loss", "[bench][mcsd]") {
    const std::filesystem::path repo = SPECDEC_SOURCE_DIR;
    const std::vector<MethodSpec> m = load_methods(repo / "examples/bench/methods_mcsd.json");
    REQUIRE(m.size() == 10u);
    CHECK(m[3].kind == MethodKind::kTargetInit);
    CHECK(m[3].seeds == 2);
    CHECK(draft_nodes(m[3]) == 82);  // 2 seeds + 2 x 40 drafts: (2,4,3,1,1)
    CHECK(m[7].kind == MethodKind::kFork);
    CHECK(draft_nodes(m[7]) == 64);
    CHECK(m[9].kind == MethodKind::kTargetInit);  // the paper's framework without early stop: a chain below each seed
    CHECK(m[9].seeds == 16);
    CHECK(draft_nodes(m[9]) == 16 + 16 * 4);
    using Catch::Contains;
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "t", "method": "target_initialised", "drafter": "small", "seeds": 2, "k_config": [4, 3, 1, 1]})"), "m.json"),
                      Contains("field 'allow_lossy': missing"));
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "t", "method": "target_initialised", "drafter": "small", "seeds": 2, "k_config": [4, 3, 1, 1], "allow_lossy": false})"), "m.json"),
                      Contains("field 'allow_lossy': must be true"));
}

TEST_CASE("the T = 0 entries of target-initialised MCSD parse their seeds and draw, and refuse a bad one by name",
          "[bench][mcsd]") {
    const std::filesystem::path repo = SPECDEC_SOURCE_DIR;
    const std::vector<MethodSpec> m = load_methods(repo / "examples/bench/methods_mcsd_t0.json");
    REQUIRE(m.size() == 11u);
    CHECK(m[4].kind == MethodKind::kTargetInit);  // the default: one seed at T = 0, drafts sampled as MCSD's
    CHECK(!m[4].top_seeds_at_t0);
    CHECK(m[4].draw == DrawPolicy::kSampleWithoutReplacement);
    CHECK(m[6].top_seeds_at_t0);  // the paper's T = 0 runs
    CHECK(m[6].draw == DrawPolicy::kTopK);
    using Catch::Contains;
    const std::string ti = R"({"name": "t", "method": "target_initialised", "drafter": "small", "seeds": 2, "k_config": [4, 3, 1, 1], "allow_lossy": true, )";
    CHECK_THROWS_WITH(parse_methods(with_entry(ti + R"("draw_at_t0": "best"})"), "m.json"),
                      Contains("field 'draw_at_t0': unknown draw \"best\""));
    CHECK_THROWS_WITH(parse_methods(with_entry(ti + R"("top_seeds_at_t0": 2})"), "m.json"),
                      Contains("field 'top_seeds_at_t0': expected true or false"));
    CHECK_THROWS_WITH(parse_methods(with_entry(R"({"name": "t", "method": "tree", "drafter": "small", "k_config": [2], "draw_at_t0": "topk"})"), "m.json"),
                      Contains("field 'draw_at_t0': not a field of method 'tree'"));
}

TEST_CASE("the scale experiment's methods file holds every method kind of the README's table", "[bench][widen]") {
    const std::filesystem::path repo = SPECDEC_SOURCE_DIR;
    const std::vector<MethodSpec> m = load_methods(repo / "examples/bench/methods_scale.json");
    REQUIRE(m.size() == 12u);
    CHECK(m[0].kind == MethodKind::kAutoregressive);
    std::set<MethodKind> kinds;
    std::set<std::string> drafters;
    for (const MethodSpec& s : m) {
        kinds.insert(s.kind);
        if (!s.drafter.empty()) drafters.insert(s.drafter);
        drafters.insert(s.drafters.begin(), s.drafters.end());
    }
    for (MethodKind k : {MethodKind::kChain, MethodKind::kTree, MethodKind::kCascade, MethodKind::kExpanded, MethodKind::kPct,
                         MethodKind::kEagle2, MethodKind::kTargetInit})
        CHECK(kinds.count(k) == 1u);
    // Every drafter kind the widening must carry along: a separate LM, GLIDE, EDD, EAGLE and FSPAD.
    for (const char* d : {"small", "glide", "edd", "eagle", "fspad"}) CHECK(drafters.count(d) == 1u);
}

}  // namespace test_bench_config
