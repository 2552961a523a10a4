// The prompt-lookup proposer of lesson 08 (examples/prompt_lookup.hpp, this very code): what it drafts,
// that greedy decoding with it is plain greedy decoding, and that at temperature 1 its deterministic
// drafts under SpeculativeSampling keep the target's distribution (chi-square at p = 0.001).
// This file is compiled with the light include, which checks that the light include is complete.
#define SPECDEC_DECODING_ONLY
#include <map>
#include <utility>

#include "catch.hpp"
#include "examples/prompt_lookup.hpp"
#include "helpers.hpp"

using namespace specdec;
using example::PromptLookup;

namespace {

/// What PromptLookup drafts after `tokens` (committed text) + `after` (this step's drafts).
std::vector<int> lookup(const PromptLookup& p, const std::vector<int>& tokens, const std::vector<int>& after = {},
                        int limit = 8) {
    const Sampling greedy;
    const StepContext ctx{greedy, StepRng{}, tokens, static_cast<int>(tokens.size())};
    std::vector<int> out;
    for (const DraftToken& t : p.draft(after, limit, ctx)) {
        CHECK_FALSE(t.sampled);  // deterministic: the loop records q = one-hot
        CHECK(t.q.empty());
        out.push_back(t.token);
    }
    return out;
}

}  // namespace

TEST_CASE("prompt lookup proposes what followed the latest earlier occurrence of the text's last tokens",
          "[prompt_lookup][proposer]") {
    const PromptLookup p{.vocab = 16};
    SECTION("the last three tokens occurred before: copy what followed, up to the end of the text") {
        CHECK(lookup(p, {5, 1, 2, 3, 9, 8, 1, 2, 3}) == std::vector<int>{9, 8, 1, 2, 3});
    }
    SECTION("a longer match wins over a later, shorter one") {
        CHECK(lookup(p, {1, 2, 3, 7, 4, 3, 6, 1, 2, 3}) == std::vector<int>{7, 4, 3, 6, 1, 2, 3});
    }
    SECTION("among matches of one length, the latest wins") {
        CHECK(lookup(p, {4, 1, 4, 2, 4}, {}, 1) == std::vector<int>{2});
    }
    SECTION("the drafts not yet verified are part of the text") {
        CHECK(lookup(p, {4, 5, 6, 4}, {5}) == std::vector<int>{6, 4, 5});
    }
    SECTION("at most limit and at most max_draft tokens") {
        CHECK(lookup(p, {1, 2, 3, 4, 5, 6, 1}, {}, 2) == std::vector<int>{2, 3});
        CHECK(lookup(PromptLookup{.vocab = 16, .max_draft = 3}, {1, 2, 3, 4, 5, 6, 1}) == std::vector<int>{2, 3, 4});
    }
    SECTION("nothing matches: an empty draft") {
        CHECK(lookup(p, {1, 2, 3}).empty());
        CHECK(lookup(p, {7}).empty());
    }
}

TEST_CASE("Chain asks prompt lookup again while it yields, up to gamma drafts", "[prompt_lookup][proposer]") {
    PromptLookup p{.vocab = 16};
    const Sampling greedy;
    const std::vector<int> tokens{1, 2, 1, 2};  // each call copies two tokens: "1 2" ends the text
    const StepContext ctx{greedy, StepRng{}, tokens, 4};
    Chain builder{.gamma = 7};
    const Tree tree = builder.build(p, tokens.back(), ctx);
    REQUIRE(tree.size() == 8);
    const std::vector<int> want{2, 1, 2, 1, 2, 1, 2, 1};
    for (int i = 0; i < tree.size(); ++i) {
        CHECK(tree[i].token == want[i]);
        CHECK(tree[i].parent == i - 1);
    }
}

TEST_CASE("greedy decoding with prompt lookup equals plain greedy decoding token for token",
          "[prompt_lookup][lossless]") {
    const std::uint64_t seed = GENERATE(range(1, 7));
    const Config cfg = test::tiny_config(true, 16);  // a small vocabulary: the greedy text soon repeats
    CpuModel target(cfg, random_weights(cfg, seed, 0.5f));
    const std::vector<int> prompt{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5};
    const GenerateOptions opts{.max_new_tokens = 60};
    PromptLookup proposer{.vocab = cfg.vocab_size};
    Chain builder{.gamma = 4};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const Generation plain = autoregressive_generate(target, prompt, opts);
    const Generation lookup = speculative_generate(target, proposer, builder, verifier, acceptor, prompt, opts);
    CHECK(lookup.tokens == plain.tokens);
    CHECK(lookup.n_target_calls() < plain.n_target_calls());  // drafts were accepted: the check is not vacuous
}

TEST_CASE("at temperature 1 prompt lookup under SpeculativeSampling keeps the target's distribution",
          "[prompt_lookup][lossless][sampling][slow]") {
    constexpr int kVocab = 6, kRuns = 3000;
    const Config cfg = test::tiny_config(true, kVocab);
    CpuModel target(cfg, random_weights(cfg, 2024, 0.3f));  // spread-out laws (as in test_lossless_sampling)
    const std::vector<int> prompt{1, 4, 2, 1, 4};             // "1 4" occurred: the first draft is "2 1 4"
    const Sampling s{.temperature = 1.0f};

    std::map<std::pair<int, int>, double> expected;  // exact P(t1, t2 | prompt)
    const std::vector<float> p1 = next_token_distribution(target, prompt, s);
    for (int a = 0; a < kVocab; ++a) {
        std::vector<int> longer = prompt;
        longer.push_back(a);
        const std::vector<float> p2 = next_token_distribution(target, longer, s);
        for (int b = 0; b < kVocab; ++b) expected[{a, b}] = double(p1[a]) * p2[b];
    }

    PromptLookup proposer{.vocab = kVocab};
    Chain builder{.gamma = 3};
    TreeVerifier verifier;
    SpeculativeSampling acceptor;
    std::map<std::pair<int, int>, int> observed;
    long drafted = 0;
    for (int seed = 0; seed < kRuns; ++seed) {
        const Generation g = speculative_generate(target, proposer, builder, verifier, acceptor, prompt,
                                                  // 4 new tokens: room for the root's 3 lookups
                                                  GenerateOptions{.max_new_tokens = 4, .sampling = s,
                                                                  .seed = static_cast<std::uint64_t>(seed)});
        ++observed[{g.tokens[0], g.tokens[1]}];
        drafted += g.steps[0].n_drafted;
    }
    REQUIRE(drafted == 3L * kRuns);  // every first step verified a full chain of lookups
    const test::ChiSquare r = test::chi_square(observed, expected, kRuns);
    CAPTURE(r.statistic, r.dof);
    REQUIRE(r.dof >= 8);
    CHECK(r.statistic < test::chi_square_critical(r.dof));
}
