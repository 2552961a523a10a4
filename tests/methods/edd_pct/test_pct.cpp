// PCT (EDD+PCT §3.2): the construction rule on a hand-checked toy in the spirit of Fig. 4 (s_d/s_t =
// 0.1, leaf threshold 0.05), the two ablations of Table 3, the bounds, bad parameters, greedy
// losslessness over a model drafter (f32 and bf16, near the context end) and the cost measurement.
#include <algorithm>
#include <cmath>
#include <map>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_pct {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

constexpr int kV = 16;

using test::MarkovDrafter;

/// The toy: from root token 0, children 1 (.6) and 2 (.15); under 1: 3 (.5) and 4 (.12); under 2:
/// 5 (.6) and 6 (.25); under 3: 7 (.25) and 1 (.15). With width 2, s_d/s_t = .1 and leaf threshold .05:
///   depth 1: 1 (p .6) and 2 (p .15) are expandable;
///   depth 2: 3 (p .3) is expandable; 4 (p .072), 5 (p .09) and 6 (p .0375) are not;
///   depth 3: 7 (p .075) and 1 (p .045) are not: no expandable node, construction stops;
///   leaves below .05 go: 6 (.0375) under 2 and 1 (.045) under 3.
MarkovDrafter toy() {
    return MarkovDrafter{.table = {{0, {{1, .6f}, {2, .15f}}},
                                   {1, {{3, .5f}, {4, .12f}}},
                                   {2, {{5, .6f}, {6, .25f}}},
                                   {3, {{7, .25f}, {1, .15f}}}}};
}

PrunedCandidateTree toy_pct() { return {.expand_threshold = 0.1f, .leaf_threshold = 0.05f, .width = 2}; }

Tree build(const PrunedCandidateTree& pct, MarkovDrafter& d) {
    const Sampling greedy;
    const std::vector<int> text{0};
    return pct.build(d, 0, StepContext{greedy, StepRng{}, text, 1});
}

using test::check_topk_tree;

using Asked = std::vector<std::vector<int>>;

}  // namespace

TEST_CASE("PCT builds the hand-checked toy tree of Fig. 4's rule", "[pct]") {
    MarkovDrafter d = toy();
    const Tree t = build(toy_pct(), d);
    check_topk_tree(t, {{0, -1, 1}, {1, 0, .6f}, {2, 0, .15f}, {3, 1, .5f}, {4, 1, .12f}, {5, 2, .6f}, {7, 3, .25f}});
    CHECK(t.max_depth() == 3);          // chosen by the rule, well below max_depth = 10
    CHECK(d.asked == Asked{{0}, {1, 2}, {3}});  // one drafter forward per depth, expandable nodes only
}

TEST_CASE("PCT without leaf removal keeps every constructed node", "[pct][ablation]") {
    MarkovDrafter d = toy();
    PrunedCandidateTree pct = toy_pct();
    pct.remove_leaves = false;  // Table 3: "w/o remove leaf nodes"
    const Tree t = build(pct, d);
    check_topk_tree(t, {{0, -1, 1}, {1, 0, .6f}, {2, 0, .15f}, {3, 1, .5f}, {4, 1, .12f}, {5, 2, .6f}, {6, 2, .25f},
                   {7, 3, .25f}, {1, 3, .15f}});
    CHECK(d.asked == Asked{{0}, {1, 2}, {3}});  // the same expansion: only the removal differs
}

TEST_CASE("PCT pruning on per-token confidence expands more and removes whole low subtrees", "[pct][ablation]") {
    // Table 3's "w/o expected time gain": a node is expanded when its own confidence is >= .1. At
    // depth 2 all four nodes qualify (.5, .12, .6, .25), although 4, 5 and 6 have path products
    // below .1. Depth 3 is the last (max_depth = 3).
    PrunedCandidateTree pct = toy_pct();
    pct.prune = PctPrune::kTokenConfidence;
    pct.max_depth = 3;
    SECTION("without leaf removal") {
        MarkovDrafter d = toy();
        pct.remove_leaves = false;
        const Tree t = build(pct, d);
        CHECK(d.asked == Asked{{0}, {1, 2}, {3, 4, 5, 6}});
        // Depth 3: 7 and 1 under 3; the uniform laws of 4, 5 and 6 give tokens 0 and 1 (ties by id).
        check_topk_tree(t, {{0, -1, 1}, {1, 0, .6f}, {2, 0, .15f}, {3, 1, .5f}, {4, 1, .12f}, {5, 2, .6f}, {6, 2, .25f},
                       {7, 3, .25f}, {1, 3, .15f}, {0, 4, 1 / 16.f}, {1, 4, 1 / 16.f}, {0, 5, 1 / 16.f},
                       {1, 5, 1 / 16.f}, {0, 6, 1 / 16.f}, {1, 6, 1 / 16.f}});
    }
    SECTION("with leaf removal, repeated until every leaf clears the threshold") {
        MarkovDrafter d = toy();
        const Tree t = build(pct, d);
        // Node 6 (path product .0375) was expanded, lost its children (.0023 each) and then went too.
        check_topk_tree(t, {{0, -1, 1}, {1, 0, .6f}, {2, 0, .15f}, {3, 1, .5f}, {4, 1, .12f}, {5, 2, .6f}, {7, 3, .25f}});
    }
}

TEST_CASE("PCT stops at max_depth and at max_drafts, keeping the most probable paths", "[pct]") {
    SECTION("max_depth") {
        MarkovDrafter d = toy();
        PrunedCandidateTree pct = toy_pct();
        pct.max_depth = 1;
        const Tree t = build(pct, d);
        check_topk_tree(t, {{0, -1, 1}, {1, 0, .6f}, {2, 0, .15f}});
        CHECK(d.asked == Asked{{0}});
    }
    SECTION("max_drafts") {
        MarkovDrafter d = toy();
        PrunedCandidateTree pct = toy_pct();
        pct.max_drafts = 3;  // depth 2 has room for one of its four children: 3, path product .3
        const Tree t = build(pct, d);
        check_topk_tree(t, {{0, -1, 1}, {1, 0, .6f}, {2, 0, .15f}, {3, 1, .5f}});
        CHECK(d.asked == Asked{{0}, {1, 2}});  // full: no forward for depth 3
    }
    SECTION("width larger than the vocabulary") {
        MarkovDrafter d;
        PrunedCandidateTree pct{.expand_threshold = 0.5f, .leaf_threshold = 0.01f, .width = 40};
        const Tree t = build(pct, d);
        CHECK(t.size() == 1 + kV);  // every token once; 1/16 each, none expandable
    }
}

TEST_CASE("PCT names bad parameters", "[pct][errors]") {
    MarkovDrafter d = toy();
    const auto fails_with = [&](PrunedCandidateTree pct, const std::string& text) {
        CHECK_THROWS_WITH(build(pct, d), Catch::StartsWith("[specdec.pct]") && Catch::Contains(text));
    };
    fails_with({.expand_threshold = 0.1f, .width = 0}, "width = 0, must be >= 1");
    fails_with({}, "expand_threshold = 0.000000 is outside (0, 1] (it is s_d/s_t");
    fails_with({.expand_threshold = 1.5f}, "expand_threshold = 1.500000 is outside (0, 1]");
    fails_with({.expand_threshold = NAN}, "expand_threshold = nan is outside (0, 1]");
    fails_with({.expand_threshold = 0.1f, .leaf_threshold = 0.0f}, "leaf_threshold = 0.000000 is outside (0, 1]");
    fails_with({.expand_threshold = 0.1f, .leaf_threshold = 1.01f}, "leaf_threshold = 1.010000 is outside (0, 1]");
    fails_with({.expand_threshold = 0.1f, .max_depth = 0}, "max_depth = 0, must be >= 1");
    fails_with({.expand_threshold = 0.1f, .max_drafts = 0}, "max_drafts = 0, must be >= 1");
    CHECK_NOTHROW(build({.expand_threshold = 1.0f, .leaf_threshold = 1.0f}, d));  // 1 is allowed: only the root's children
}

TEST_CASE("greedy PCT over a model drafter equals plain greedy decoding, near the context end too", "[pct][lossless]") {
    const WeightFormat format = GENERATE(WeightFormat::kF32, WeightFormat::kBF16);
    const std::uint64_t seed = GENERATE(range(1, 9));
    const bool near_end = seed == 8;  // the last prompt ends 24 tokens before the context does
    CAPTURE(static_cast<int>(format), seed);
    const Config cfg = test::tiny_config();
    const ModelOptions opts{.weight_format = format};
    const Weights wt = random_weights(cfg, seed, 0.4f);
    const Weights wd = perturbed(cfg, wt, 0.15f, seed + 100);
    CpuModel target(cfg, wt, opts), draft(cfg, wd, opts), fresh(cfg, wd, opts);
    std::vector<int> prompt{static_cast<int>(seed % 60), 3, 17, 42};
    if (near_end)
        for (int i = 0; i < 100; ++i) prompt.push_back((7 * i + 1) % cfg.vocab_size);
    const GenerateOptions gen{.max_new_tokens = near_end ? cfg.max_position_embeddings - static_cast<int>(prompt.size()) : 40,
                              .seed = seed};

    const Generation plain = autoregressive_generate(target, prompt, gen);
    ModelProposer proposer(draft);
    PrunedCandidateTree pct{.expand_threshold = 0.1f};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const Generation spec = speculative_generate(target, proposer, pct, verifier, acceptor, prompt, gen);
    CHECK(spec.tokens == plain.tokens);
    CHECK(spec.n_target_calls() < plain.n_target_calls());
    int min_nodes = 1 << 30, max_nodes = 0, rejected = 0;
    for (const StepRecord& s : spec.steps) {
        min_nodes = std::min(min_nodes, s.n_drafted);
        max_nodes = std::max(max_nodes, s.n_drafted);
        rejected += s.n_accepted < s.depth;
        CHECK(s.depth <= pct.max_depth);
    }
    CHECK(rejected > 0);
    if (!near_end) CHECK(min_nodes < max_nodes);  // the tree's size follows the drafter's confidence

    // Leaf removal reindexes the tree the drafter scored; its cache still follows the committed text.
    std::vector<int> text = prompt;
    text.insert(text.end(), spec.tokens.begin(), spec.tokens.end());
    REQUIRE(draft.cache_len() >= static_cast<int>(text.size()) - 3);
    detail::prefill(fresh, std::span(text).first(static_cast<std::size_t>(draft.cache_len())));
    for (int l = 0; l < cfg.num_hidden_layers; ++l) {
        float worst = 0.0f;
        for (std::size_t i = 0; i < draft.kv(l).k.size(); ++i)
            worst = std::max(worst, std::abs(draft.kv(l).k[i] - fresh.kv(l).k[i]));
        CHECK(worst < 1e-5f);
    }
}

TEST_CASE("forward costs are measured on the machine at hand and leave both models reset", "[pct][timing]") {
    const Config cfg = test::tiny_config();
    Config small = cfg;
    small.num_hidden_layers = 1;
    CpuModel target(cfg, random_weights(cfg, 1)), draft(small, random_weights(small, 2));
    detail::prefill(target, std::vector<int>{1, 2, 3});
    const ForwardCosts c = measure_forward_costs(target, draft, CostProbe{.context = 40, .target_nodes = 4, .repeats = 5});
    CHECK(c.target_seconds > 0.0);
    CHECK(c.draft_seconds > 0.0);
    CHECK(std::isfinite(c.ratio()));
    CHECK(target.cache_len() == 0);
    CHECK(draft.cache_len() == 0);
    CHECK_THROWS_WITH(measure_forward_costs(target, draft, CostProbe{.repeats = 0}),
                      Catch::Contains("[specdec.pct] CostProbe::repeats = 0, must be >= 1"));
    CHECK_THROWS_WITH(measure_forward_costs(target, draft, CostProbe{.context = 128}),
                      Catch::Contains("CostProbe: context 128 + 1 nodes exceeds the target's context of 128 tokens"));
}

}  // namespace test_pct
