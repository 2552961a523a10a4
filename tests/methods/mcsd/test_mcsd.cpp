// Improved MCSD: MCSD's k-config tree (NOTES §4.1's count, lossless by chi-square), target-initialised
// candidates through the loop's deferred bonus (exact with one seed, detectably lossy with two, refused
// without the opt-in; at T = 0 greedy with one seed, lossy with the paper's top seeds), and bad k-configs.
#include <map>
#include <random>
#include <utility>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_mcsd {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

constexpr int kVocab = 6;
constexpr int kRuns = 2000;

struct Models {
    Config cfg = test::tiny_config(true, kVocab);
    Weights w = random_weights(cfg, 2024, 0.3f);  // as tests/loop/test_lossless_sampling.cpp
    CpuModel target{cfg, w};
    CpuModel draft{cfg, perturbed(cfg, w, 0.8f, 77)};
};

/// The first two tokens of `runs` seeded generations of a composition, and the target's exact joint law.
template <class Builder, class Acc>
std::pair<std::map<std::pair<int, int>, int>, std::map<std::pair<int, int>, double>> two_tokens(Builder b, Acc a,
                                                                                              const Sampling& s) {
    Models m;
    const std::vector<int> prompt{1, 4, 2};
    auto expected = test::exact_two_tokens(m.target, prompt, s);
    ModelProposer proposer(m.draft);
    auto observed = test::sampled_two_tokens(m.target, proposer, b, a, prompt, s, kRuns);
    return {observed, expected};
}

/// The largest TV distance, over 20 samples of kRuns draws from the exact law itself: what sampling
/// noise alone gives.
double tv_noise_floor(const std::map<std::pair<int, int>, double>& exact) {
    std::vector<std::pair<int, int>> keys;
    std::vector<double> probs;
    for (const auto& [k, p] : exact) {
        keys.push_back(k);
        probs.push_back(p);
    }
    std::mt19937_64 gen(7);
    std::discrete_distribution<int> law(probs.begin(), probs.end());
    double floor = 0.0;
    for (int rep = 0; rep < 20; ++rep) {
        std::map<std::pair<int, int>, int> counts;
        for (int i = 0; i < kRuns; ++i) ++counts[keys[law(gen)]];
        floor = std::max(floor, total_variation(counts, exact, kRuns));
    }
    return floor;
}

/// A drafter with a large vocabulary and a uniform law: every k-config tree is drawn in full.
test::MarkovDrafter uniform_drafter() { return test::MarkovDrafter{.table = {}, .vocab = 16}; }

}  // namespace

TEST_CASE("MCSD's (4,2,2,1) tree has NOTES 4.1's 44 drafts, 16 leaf sequences of length 4, siblings distinct",
          "[mcsd][tree]") {
    CHECK(k_config_nodes({4, 2, 2, 1}) == 44);
    CHECK(k_config_nodes({4, 3, 1, 1}) == 40);  // 2 seeds + 2 * 40 = 82 nodes: NOTES 4.2's (2,4,3,1,1)
    test::MarkovDrafter drafter = uniform_drafter();
    McsdTree builder;  // (4,2,2,1) by default
    const Sampling s{.temperature = 0.7f};
    const std::vector<int> text{3};
    const Tree t = builder.build(drafter, 3, StepContext{s, StepRng{1, 0, RngStream::kAccept}, text});
    REQUIRE(t.size() == 1 + 44);
    int leaves = 0;
    for (int i = 0; i < t.size(); ++i) {
        const auto kids = t.children(i);
        if (t[i].depth < 4) CHECK(static_cast<int>(kids.size()) == builder.k_config[t[i].depth]);
        else ++leaves;
        std::vector<int> tokens;
        for (int c : kids) {
            tokens.push_back(t[c].token);
            CHECK(t[c].draw == Draw::kSampledWithoutReplacement);
        }
        std::sort(tokens.begin(), tokens.end());
        CHECK(std::adjacent_find(tokens.begin(), tokens.end()) == tokens.end());
    }
    CHECK(leaves == 16);
    CHECK(t.max_depth() == 4);
}

TEST_CASE("MCSD (4,2,2,1) with MultiDraftSampling follows the target's law of two tokens", "[mcsd][lossless][slow]") {
    const Sampling s = GENERATE(Sampling{.temperature = 0.7f}, Sampling{.temperature = 1.0f});
    CAPTURE(s.temperature);
    const auto [observed, expected] = two_tokens(McsdTree{}, MultiDraftSampling{}, s);
    const test::ChiSquare r = test::chi_square(observed, expected, kRuns);
    CAPTURE(r.statistic, r.dof);
    REQUIRE(r.dof >= 8);
    CHECK(r.statistic < test::chi_square_critical(r.dof));
}

TEST_CASE("target-initialised generation with one seed per step is exact, the deferred bonus loses nothing",
          "[mcsd][lossless][slow]") {
    // One seed leaves the acceptor nothing to choose: the seed is a draw from the target's (residual)
    // law, as the bonus would have been. This checks the loop's deferred bonus and the forest path.
    const Sampling s = GENERATE(Sampling{.temperature = 0.7f}, Sampling{.temperature = 1.0f});
    CAPTURE(s.temperature);
    const auto [observed, expected] = two_tokens(TargetInitialisedTree{.n_seeds = 1, .k_config = {2, 1}},
                                                 LossyTargetInitialisedSampling{.allow_lossy = true}, s);
    const test::ChiSquare r = test::chi_square(observed, expected, kRuns);
    CAPTURE(r.statistic, r.dof);
    REQUIRE(r.dof >= 8);
    CHECK(r.statistic < test::chi_square_critical(r.dof));
}

TEST_CASE("target-initialised generation with two seeds is detectably lossy, its TV distance exceeds the noise floor",
          "[mcsd][lossy][slow]") {
    const Sampling s{.temperature = 1.0f};
    const auto [observed, expected] = two_tokens(TargetInitialisedTree{.n_seeds = 2, .k_config = {2, 1}},
                                                 LossyTargetInitialisedSampling{.allow_lossy = true}, s);
    const double tv = total_variation(observed, expected, kRuns);
    const double floor = tv_noise_floor(expected);
    const test::ChiSquare r = test::chi_square(observed, expected, kRuns);
    CAPTURE(tv, floor, kl_divergence(observed, expected, kRuns), r.statistic, r.dof);
    CHECK(tv > floor);
    CHECK(r.statistic > test::chi_square_critical(r.dof));
}

TEST_CASE("target-initialised generation is plain greedy decoding at temperature 0", "[mcsd][greedy]") {
    Models m;
    const std::vector<int> prompt{1, 4, 2};
    const GenerateOptions opts{.max_new_tokens = 24};
    const Generation plain = autoregressive_generate(m.target, prompt, opts);
    ModelProposer proposer(m.draft);
    TargetInitialisedTree builder;
    TreeVerifier verifier;
    LossyTargetInitialisedSampling acceptor{.allow_lossy = true};
    const Generation g = speculative_generate(m.target, proposer, builder, verifier, acceptor, prompt, opts);
    CHECK(g.tokens == plain.tokens);
    CHECK(g.token_depth.size() == g.tokens.size());
}

TEST_CASE("at temperature 0 one seed stays greedy whichever way its drafts are drawn", "[mcsd][greedy]") {
    Models m;
    ModelProposer proposer(m.draft);
    TreeVerifier verifier;
    LossyTargetInitialisedSampling acceptor{.allow_lossy = true};
    const DrawPolicy draw = GENERATE(DrawPolicy::kTopK, DrawPolicy::kSampleWithReplacement);
    const bool top_seeds = GENERATE(false, true);
    // Two seeds asked for, but without top_seeds_at_t0 only the argmax seeds; with it, n_seeds = 1.
    TargetInitialisedTree builder{.n_seeds = top_seeds ? 1 : 2, .k_config = {3, 2, 1}, .top_seeds_at_t0 = top_seeds,
                                  .draw_at_t0 = draw};
    CAPTURE(static_cast<int>(draw), top_seeds);
    for (const std::vector<int>& prompt : {std::vector<int>{1, 4, 2}, std::vector<int>{5, 0, 3, 3}}) {
        const GenerateOptions opts{.max_new_tokens = 24};
        const Generation g = speculative_generate(m.target, proposer, builder, verifier, acceptor, prompt, opts);
        CHECK(g.tokens == autoregressive_generate(m.target, prompt, opts).tokens);
    }
}

TEST_CASE("the law a deferred greedy bonus hands on ranks the logits' argmax first, even where softmax rounds to a tie",
          "[mcsd][greedy]") {
    // exp(0 - 1e-45) rounds to 1: softmax alone would tie tokens 0 and 1, and rank token 0 (the lower index) first.
    const std::vector<float> logits{0.0f, std::nextafter(0.0f, 1.0f), -5.0f};
    const std::vector<float> law = detail::greedy_seed_law(logits);
    CHECK(detail::top_indices(law, 1)[0] == 1);
    CHECK(law[0] < law[1]);
    CHECK(law[2] < law[0]);
    const std::vector<float> tied = detail::greedy_seed_law(std::vector<float>{2.0f, 2.0f});  // a true tie: argmax's lower index
    CHECK(tied[0] > tied[1]);
}

TEST_CASE("top seeds at temperature 0 are the target's most likely tokens, and the drafts below them its drafter's top-k",
          "[mcsd][tree]") {
    test::MarkovDrafter drafter = uniform_drafter();  // 16 tokens, uniform: top-k is the k lowest indices
    const Sampling greedy{};
    const std::vector<int> text{3};
    StepContext ctx{greedy, StepRng{1, 0, RngStream::kAccept}, text};
    std::vector<float> law(16, 0.0f);
    law[9] = 0.5f, law[2] = 0.3f, law[7] = 0.2f;
    ctx.bonus_law = law;
    const auto roots = [](const Tree& t) {
        std::vector<int> r;
        for (int i = 0; i < t.size(); ++i)
            if (t[i].parent < 0) r.push_back(t[i].token);
        return r;
    };
    TargetInitialisedTree top{.n_seeds = 2, .k_config = {3, 1}, .top_seeds_at_t0 = true, .draw_at_t0 = DrawPolicy::kTopK};
    const Tree t = top.build(drafter, -1, ctx);
    CHECK(roots(t) == std::vector<int>{9, 2});  // ranked, the argmax first
    REQUIRE(t.size() == 2 + 2 * (3 + 3));
    for (int i = 0; i < t.size(); ++i)
        if (t[i].parent >= 0) CHECK(t[i].draw == Draw::kTopK);
    CHECK(t[t.children(0)[0]].token == 0);
    CHECK(t[t.children(0)[2]].token == 2);
    top.n_seeds = 5;  // never a token the law gives no probability
    CHECK(roots(top.build(drafter, -1, ctx)) == std::vector<int>{9, 2, 7});
    TargetInitialisedTree one{.n_seeds = 3, .k_config = {1}};  // the default at T = 0: the argmax alone
    CHECK(roots(one.build(drafter, -1, ctx)) == std::vector<int>{9});
}

TEST_CASE("top seeds at temperature 0 are lossy: every token is among the target's two most likely, and greedy is left",
          "[mcsd][lossy]") {
    Models m;
    ModelProposer proposer(m.draft);
    TreeVerifier verifier;
    LossyTargetInitialisedSampling acceptor{.allow_lossy = true};
    TargetInitialisedTree builder{.n_seeds = 2, .k_config = {3, 2, 1}, .top_seeds_at_t0 = true, .draw_at_t0 = DrawPolicy::kTopK};
    int departed = 0;
    for (int a = 0; a < kVocab; ++a) {
        const std::vector<int> prompt{a, (a + 2) % kVocab, 1};
        const GenerateOptions opts{.max_new_tokens = 24};
        const Generation g = speculative_generate(m.target, proposer, builder, verifier, acceptor, prompt, opts);
        departed += g.tokens != autoregressive_generate(m.target, prompt, opts).tokens;
        // The target's logits along the prompt and the output: each output token ranks first or second.
        std::vector<int> text = prompt;
        text.insert(text.end(), g.tokens.begin(), g.tokens.end() - 1);
        m.target.reset();
        const Rows logits = m.target.forward(Tree::chain(text), 0);
        for (std::size_t i = 0; i < g.tokens.size(); ++i) {
            const std::vector<int> top2 = detail::top_indices(logits.row(static_cast<int>(prompt.size() - 1 + i)), 2);
            CAPTURE(a, i);
            CHECK((g.tokens[i] == top2[0] || g.tokens[i] == top2[1]));
        }
        m.target.reset();
    }
    CHECK(departed > 0);
}

TEST_CASE("the lossy acceptor refuses to run without allow_lossy, and a builder that cannot take its law is refused",
          "[mcsd][errors]") {
    Models m;
    const std::vector<int> prompt{1, 4, 2};
    const GenerateOptions opts{.max_new_tokens = 8, .sampling = {.temperature = 1.0f}};
    ModelProposer proposer(m.draft);
    TreeVerifier verifier;
    TargetInitialisedTree forest;
    LossyTargetInitialisedSampling refused;  // allow_lossy left false
    CHECK_THROWS_WITH(speculative_generate(m.target, proposer, forest, verifier, refused, prompt, opts),
                      Catch::Contains("[specdec.acceptor]") && Catch::Contains("is lossy") &&
                          Catch::Contains("allow_lossy = true"));
    McsdTree one_root;
    LossyTargetInitialisedSampling opted{.allow_lossy = true};
    CHECK_THROWS_WITH(speculative_generate(m.target, proposer, one_root, verifier, opted, prompt, opts),
                      Catch::Contains("deferred its bonus") && Catch::Contains("draws_roots_from_bonus_law"));
}

TEST_CASE("a k-config with a zero or negative entry, or wider than the vocabulary, is refused with its values",
          "[mcsd][errors]") {
    test::MarkovDrafter drafter = uniform_drafter();  // 16 tokens
    const Sampling s{.temperature = 1.0f};
    const std::vector<int> text{3};
    const StepContext ctx{s, StepRng{1, 0, RngStream::kAccept}, text};
    McsdTree zero{{4, 0, 1}};
    CHECK_THROWS_WITH(zero.build(drafter, 3, ctx), Catch::Contains("[specdec.mcsd]") && Catch::Contains("k_config[1] = 0"));
    McsdTree negative{{-2}};
    CHECK_THROWS_WITH(negative.build(drafter, 3, ctx), Catch::Contains("k_config[0] = -2"));
    McsdTree wide{{4, 17}};
    CHECK_THROWS_WITH(wide.build(drafter, 3, ctx),
                      Catch::Contains("k_config[1] = 17") && Catch::Contains("vocabulary of 16"));
    TargetInitialisedTree seeds{.n_seeds = 0};
    CHECK_THROWS_WITH(seeds.build(drafter, 3, ctx), Catch::Contains("n_seeds = 0"));
    TargetInitialisedTree empty{.n_seeds = 2, .k_config = {}};
    CHECK_THROWS_WITH(empty.build(drafter, 3, ctx), Catch::Contains("k-config is empty"));
}

// ---- the full framework: target-initialised seeds + fork + early stop ---------------------------------

namespace {

/// Stops before depth `at` (counting the calls), as a decision model would.
struct StopAt {
    int at = 0;
    int* calls = nullptr;
    bool operator()(Rows, const Sampling&) const { return ++*calls > at; }
};

}  // namespace

TEST_CASE("the seeded fork draws distinct seeds from the law and hangs one chain below each, depth-major",
          "[mcsd][tree]") {
    test::MarkovDrafter drafter = uniform_drafter();  // 16 tokens
    const Sampling s{.temperature = 1.0f};
    const std::vector<int> text{3};
    StepContext ctx{s, StepRng{1, 0, RngStream::kAccept}, text};
    std::vector<float> law(16, 0.0f);
    law[2] = 0.5f, law[7] = 0.3f, law[9] = 0.2f;
    ctx.bonus_law = law;
    SECTION("drafted to the maximum depth") {
        TargetInitialisedFork<> fork{.width = 3, .max_depth = 4};
        const Tree t = fork.build(drafter, -1, ctx);
        REQUIRE(t.size() == 3 + 3 * 4);
        std::vector<int> seeds;
        for (int i = 0; i < t.size(); ++i) {
            CHECK(t[i].depth == i / 3);  // depth-major: ForkMask's order with the seeds as the first level
            CHECK(static_cast<int>(t.children(i).size()) == (t[i].depth < 4 ? 1 : 0));
            if (t[i].parent < 0) seeds.push_back(t[i].token);
            else CHECK(t[t[i].parent].depth == t[i].depth - 1);
        }
        std::sort(seeds.begin(), seeds.end());
        CHECK(seeds == std::vector<int>{2, 7, 9});  // the law's whole support, each once
    }
    SECTION("stopped early, and never wider than the law's support") {
        int calls = 0;
        TargetInitialisedFork<StopAt> fork{.width = 5, .max_depth = 6, .stop = {2, &calls}};
        const Tree t = fork.build(drafter, -1, ctx);
        CHECK(t.size() == 3 + 3 * 2);
        CHECK(t.max_depth() == 2);
        CHECK(calls == 3);
    }
    SECTION("the first step, with a pending root and no law, is the draft-initialised fork") {
        ctx.bonus_law = {};
        TargetInitialisedFork<> fork{.width = 4, .max_depth = 3};
        const Tree t = fork.build(drafter, 3, ctx);
        CHECK(t.size() == 1 + 4 * 3);
        CHECK(t.children(0).size() == 4);
    }
}

TEST_CASE("the seeded fork runs in the loop only with the lossy opt-in, and is plain greedy decoding at T = 0",
          "[mcsd][greedy]") {
    Models m;
    const std::vector<int> prompt{1, 4, 2};
    ModelProposer proposer(m.draft);
    TreeVerifier verifier;
    TargetInitialisedFork<> fork{.width = 2, .max_depth = 3};
    const GenerateOptions greedy{.max_new_tokens = 24};
    const Generation plain = autoregressive_generate(m.target, prompt, greedy);
    LossyTargetInitialisedSampling opted{.allow_lossy = true};
    CHECK(speculative_generate(m.target, proposer, fork, verifier, opted, prompt, greedy).tokens == plain.tokens);
    const GenerateOptions sampled{.max_new_tokens = 24, .sampling = {.temperature = 1.0f}, .seed = 5};
    const Generation g = speculative_generate(m.target, proposer, fork, verifier, opted, prompt, sampled);
    CHECK(g.tokens.size() == 24);
    LossyTargetInitialisedSampling refused;
    CHECK_THROWS_WITH(speculative_generate(m.target, proposer, fork, verifier, refused, prompt, sampled),
                      Catch::Contains("is lossy") && Catch::Contains("allow_lossy = true"));
    SECTION("with a decision model's early stop (threshold above 1: it always stops, so only seeds are verified)") {
        DecisionModel type2({.input = DecisionInput::kDraftLaw, .n_in = 5, .hidden = 8, .n_layers = 2, .top_k = 4}, 3);
        TargetInitialisedFork<DecisionStop<CpuModel>> stopped{.width = 2, .max_depth = 3, .stop = {&type2, nullptr, 1.1f}};
        const Generation h = speculative_generate(m.target, proposer, stopped, verifier, opted, prompt, sampled);
        CHECK(h.tokens.size() == 24);
        for (const StepRecord& r : h.steps) CHECK(r.depth == 0);
    }
}

TEST_CASE("the seeded fork is exact with one seed and detectably lossy with two (first two tokens' law)",
          "[mcsd][lossy][slow]") {
    const Sampling s{.temperature = 1.0f};
    const auto [exact_obs, expected] = two_tokens(TargetInitialisedFork<>{.width = 1, .max_depth = 2},
                                                  LossyTargetInitialisedSampling{.allow_lossy = true}, s);
    const test::ChiSquare one = test::chi_square(exact_obs, expected, kRuns);
    const auto [lossy_obs, expected2] = two_tokens(TargetInitialisedFork<>{.width = 2, .max_depth = 2},
                                                   LossyTargetInitialisedSampling{.allow_lossy = true}, s);
    const test::ChiSquare two = test::chi_square(lossy_obs, expected2, kRuns);
    CAPTURE(one.statistic, one.dof, two.statistic, two.dof);
    REQUIRE(one.dof >= 8);
    CHECK(one.statistic < test::chi_square_critical(one.dof));
    CHECK(two.statistic > test::chi_square_critical(two.dof));
}

}  // namespace test_mcsd
