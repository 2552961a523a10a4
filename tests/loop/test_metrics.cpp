// The papers' metrics on hand-made traces, and the analytic speedup against GLIDE's Table 1.
#include "catch.hpp"
#include "helpers.hpp"

namespace test_metrics {  // a unity build compiles several test files as one

using namespace specdec;

TEST_CASE("the expected speedup formula reproduces every E(Spd) cell of GLIDE's Table 1", "[metrics]") {
    struct Cell {
        double cost, acc, espd;
    };
    // (Cost %, Acc %, E(Spd)) for each drafter row and dataset of Table 1, gamma = 5.
    const std::vector<Cell> table{
        {7.7, 51.6, 1.46}, {7.7, 49.7, 1.41}, {7.7, 19.2, 0.89}, {7.7, 34.8, 1.11},      // Vicuna-7B, LLAMA-68m
        {49.0, 58.0, 0.66}, {49.0, 57.1, 0.65}, {49.0, 25.1, 0.38}, {49.0, 40.0, 0.48},  // LLAMA-160m
        {6.7, 64.8, 1.97}, {6.7, 63.2, 1.90}, {6.7, 55.7, 1.64}, {6.7, 67.0, 2.06},      // GLIDE-47m
        {6.2, 50.2, 1.51}, {6.2, 49.3, 1.48}, {6.2, 19.0, 0.94}, {6.2, 32.7, 1.13},      // Vicuna-13B
        {39.3, 56.8, 0.75}, {39.3, 56.8, 0.75}, {39.3, 25.4, 0.45}, {39.3, 38.3, 0.54},
        {5.5, 67.1, 2.16}, {5.5, 65.0, 2.07}, {5.5, 57.1, 1.77}, {5.5, 68.6, 2.24},
        {4.6, 49.1, 1.57}, {4.6, 46.5, 1.50}, {4.6, 30.0, 1.16}, {4.6, 31.5, 1.19},      // Vicuna-33B
        {29.5, 56.1, 0.89}, {29.5, 53.1, 0.84}, {29.5, 31.4, 0.59}, {29.5, 36.7, 0.64},
        {6.8, 69.3, 2.16}, {6.8, 64.3, 1.94}, {6.8, 62.7, 1.87}, {6.8, 68.9, 2.14},
        {4.9, 36.7, 1.27}, {4.9, 40.2, 1.34}, {4.9, 41.9, 1.38}, {4.9, 44.5, 1.44},      // Mistral-7B
        {6.6, 60.1, 1.80}, {6.6, 56.4, 1.67}, {6.6, 59.8, 1.79}, {6.6, 62.6, 1.89},
    };
    for (const Cell& c : table) {
        CAPTURE(c.cost, c.acc);
        CHECK_THAT(expected_speedup(c.acc / 100, 5, c.cost / 100), Catch::WithinAbs(c.espd, 0.01));
    }
    CHECK(expected_tokens_per_step(1.0, 4) == 5.0);
    CHECK_THAT(expected_tokens_per_step(0.5, 2), Catch::WithinRel(1.75, 1e-12));
}

TEST_CASE("summaries of a hand-made trace give each paper's acceptance", "[metrics]") {
    Generation g;
    // Three steps of a depth-4 chain: accepted 4 (all), 1, 0 drafts.
    g.steps = {StepRecord{.n_drafted = 4, .depth = 4, .n_accepted = 4, .n_emitted = 5, .n_draft_calls = 4},
               StepRecord{.n_drafted = 4, .depth = 4, .n_accepted = 1, .n_emitted = 2, .n_draft_calls = 4},
               StepRecord{.n_drafted = 4, .depth = 4, .n_accepted = 0, .n_emitted = 1, .n_draft_calls = 4}};
    g.tokens.assign(8, 0);
    const Summary s = summarize(g);
    CHECK(s.n_target_calls == 3);
    CHECK(s.n_draft_calls == 12);
    CHECK_THAT(s.tau, Catch::WithinRel(8.0 / 3, 1e-12));
    CHECK_THAT(s.alpha_token, Catch::WithinRel(5.0 / 7, 1e-12));    // 5 accepted, 2 rejections
    CHECK_THAT(s.alpha_depth, Catch::WithinRel(8.0 / 12, 1e-12));   // (5 + 2 + 1) / (4 * 3) = tau / depth
    CHECK_THAT(s.alpha_longest, Catch::WithinRel(5.0 / 12, 1e-12));
    // Steps with an empty draft (Max-Gram found nothing, no room left) have no tree: EDD's alpha leaves
    // them out, where counting their bonus would lift it to (8 + 6) / 12 > 1.
    Generation with_empty = g;
    for (int i = 0; i < 6; ++i) with_empty.steps.push_back(StepRecord{.n_emitted = 1});
    with_empty.tokens.assign(14, 0);
    CHECK_THAT(summarize(with_empty).alpha_depth, Catch::WithinRel(8.0 / 12, 1e-12));
    REQUIRE(s.accept_at_position.size() == 4);
    CHECK_THAT(s.accept_at_position[0], Catch::WithinRel(2.0 / 3, 1e-12));
    CHECK_THAT(s.accept_at_position[1], Catch::WithinRel(1.0 / 3, 1e-12));
    CHECK_THAT(s.accept_at_position[3], Catch::WithinRel(1.0 / 3, 1e-12));
    // SWI: 8 tokens at target cost 100 = 800, against 3 target calls + 12 draft calls at cost 1.
    CHECK_THAT(standardized_walltime_improvement(8, 3, 12, 100, 1), Catch::WithinRel(800.0 / 312, 1e-12));
}

TEST_CASE("the loop records where each committed token came from", "[metrics][generate]") {
    const Config cfg = test::tiny_config();
    const Weights w = random_weights(cfg, 4, 0.4f);
    CpuModel target(cfg, w), draft(cfg, perturbed(cfg, w, 0.1f, 9));
    ModelProposer proposer(draft);
    Chain builder{.gamma = 3};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const std::vector<int> prompt{1, 2, 3};
    const Generation g = speculative_generate(target, proposer, builder, verifier, acceptor, prompt,
                                              GenerateOptions{.max_new_tokens = 30});
    REQUIRE(g.token_depth.size() == g.tokens.size());
    int bonus = 0, from_draft = 0, calls = 0;
    for (int d : g.token_depth) (d == 0 ? bonus : from_draft)++;
    for (const StepRecord& s : g.steps) calls += s.n_draft_calls;
    CHECK(bonus + from_draft == 30);
    CHECK(from_draft > 0);
    CHECK(bonus >= g.n_target_calls() - 1);  // every step ends in the target's token (the last may be cut)
    int depths = 0;
    for (const StepRecord& s : g.steps) depths += s.depth;
    CHECK(calls == depths);  // a chain: one draft forward per depth (3, less in the last steps: the room left)
    CHECK(depths > 3 * (g.n_target_calls() - 2));
    const Summary s = summarize(g);
    CHECK_THAT(s.tau, Catch::WithinRel(g.tau(), 1e-12));
}

TEST_CASE("a repeated n-gram is found where n tokens recur, overlapping or not, and nowhere else", "[metrics]") {
    const std::vector<int> loop{5, 1, 2, 3, 1, 2, 3, 1, 2, 3};  // "1 2 3" repeating: 4-grams recur
    CHECK(has_repeated_ngram(loop, 3));
    CHECK(has_repeated_ngram(loop, 4));    // 1 2 3 1 at 1 and 4 (overlapping)
    CHECK(has_repeated_ngram(loop, 6));    // 1 2 3 1 2 3 at 1 and 4
    CHECK_FALSE(has_repeated_ngram(loop, 7));
    const std::vector<int> distinct{1, 2, 3, 4, 5, 6, 7, 8, 9};
    CHECK_FALSE(has_repeated_ngram(distinct, 1));
    CHECK_FALSE(has_repeated_ngram(std::vector<int>{}, 8));
    CHECK_FALSE(has_repeated_ngram(loop, 0));
    const std::vector<int> twice{7, 7};
    CHECK(has_repeated_ngram(twice, 1));
    CHECK_FALSE(has_repeated_ngram(twice, 2));
}

}  // namespace test_metrics
