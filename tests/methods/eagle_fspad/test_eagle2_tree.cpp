// EAGLE-2's dynamic tree (as FSPAD builds it): the expansion and the rerank on a hand-checked toy and
// against a plain re-derivation on random drafters, ties, the bounds, bad parameters, greedy
// losslessness over a model drafter whose cache is checked after every step, and the acceptors at T > 0.
#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_eagle2_tree {  // a unity build compiles several test files as one

using namespace specdec;
using test::MarkovDrafter;

namespace {

/// The toy (vocabulary 16, top_k 2). From root token 0: 1 (.6), 2 (.25); under 1: 3 (.5), 4 (.3);
/// under 2: 5 (.9), 6 (.05); under 3: 7 (.4), 8 (.2); under 5: 9 (.7), 10 (.1). Joint probabilities:
///   depth 1: 1 .6, 2 .25                                  -> both expanded (top 2 of 2);
///   depth 2: 3 .30, 4 .18 (under 1); 5 .225, 6 .0125 (under 2) -> 3 and 5 expanded, not 4, although
///            4's parent is the more probable one: the choice is over the whole depth;
///   depth 3: 7 .12, 8 .06 (under 3); 9 .1575, 10 .0225 (under 5).
/// Overall: 1 .6 > 3 .30 > 2 .25 > 5 .225 > 4 .18 > 9 .1575 > 7 .12 > 8 .06 > 10 .0225 > 6 .0125, so
/// with 6 drafts (total_tokens 7) the rerank keeps 1, 3, 2, 5, 4 and 9: node 4 was never expanded and
/// node 7, deepest on the most probable path, loses to 9.
MarkovDrafter toy() {
    return MarkovDrafter{.table = {{0, {{1, .6f}, {2, .25f}}},
                                   {1, {{3, .5f}, {4, .3f}}},
                                   {2, {{5, .9f}, {6, .05f}}},
                                   {3, {{7, .4f}, {8, .2f}}},
                                   {5, {{9, .7f}, {10, .1f}}}}};
}

Tree build(const Eagle2Tree& builder, MarkovDrafter& d, int room = std::numeric_limits<int>::max()) {
    const Sampling greedy;
    const std::vector<int> text{0};
    StepContext ctx{greedy, StepRng{}, text, 1};
    ctx.room = room;
    return builder.build(d, 0, ctx);
}

using test::check_topk_tree;

using Asked = std::vector<std::vector<int>>;

/// The root-first tokens of every node but the root, as a set: what a tree drafts, whatever its order.
std::set<std::vector<int>> token_paths(const Tree& t) {
    std::set<std::vector<int>> out;
    for (int i = 1; i < t.size(); ++i) {
        std::vector<int> path;
        for (int n : t.path_to(i)) path.push_back(t[n].token);
        out.insert(path);
    }
    return out;
}

/// EAGLE-2 re-derived plainly from a Markov drafter's laws, over token paths: the expected drafts (as a
/// set of root-first token paths) and the tokens each forward expands.
struct Reference {
    std::set<std::vector<int>> kept;
    Asked expanded;
};

Reference eagle2_by_hand(const MarkovDrafter& d, int root, const Eagle2Tree& b) {
    struct Path {
        std::vector<int> tokens;
        double joint;
    };
    const auto by_joint = [](const Path& x, const Path& y) { return x.joint > y.joint; };
    Reference ref;
    std::vector<Path> all, expand{{{root}, 1.0}};
    for (int depth = 1; depth <= b.depth; ++depth) {
        std::vector<Path> level;
        ref.expanded.emplace_back();
        for (const Path& e : expand) {
            ref.expanded.back().push_back(e.tokens.back());
            const std::vector<float> p = d.law(e.tokens.back());
            std::vector<Path> kids;
            for (int t = 0; t < d.vocab; ++t) {
                Path c = e;
                c.tokens.push_back(t);
                c.joint *= p[t];
                kids.push_back(c);
            }
            std::stable_sort(kids.begin(), kids.end(), [&](const Path& x, const Path& y) {
                return p[x.tokens.back()] > p[y.tokens.back()];
            });
            level.insert(level.end(), kids.begin(), kids.begin() + b.top_k);
        }
        all.insert(all.end(), level.begin(), level.end());
        std::stable_sort(level.begin(), level.end(), by_joint);
        expand.assign(level.begin(), level.begin() + std::min<std::size_t>(level.size(), b.top_k));
    }
    std::stable_sort(all.begin(), all.end(), by_joint);
    for (std::size_t i = 0; i < all.size() && i + 1 < static_cast<std::size_t>(b.total_tokens); ++i)
        ref.kept.insert(all[i].tokens);
    return ref;
}

/// A ModelProposer that checks its model after every step: the KV rows it holds equal those of a
/// fresh model fed the same prefix of the committed text, and, when it drafted, it lags the committed
/// text by at most one token (only an accepted leaf can be one it never scored).
struct CheckedProposer {
    ModelProposer<CpuModel> inner;
    CpuModel* draft;
    CpuModel* fresh;
    std::vector<int> text{};  // the committed text, then the pending root
    bool drafted = false;
    int steps = 0, worst_lag = 0, lagged = 0;  // lagged: steps that left an accepted unscored leaf
    float worst_kv = 0.0f;

    int vocab_size() const { return inner.vocab_size(); }
    long n_calls() const { return inner.n_calls(); }
    std::vector<DrafterContext> drafter_contexts() const { return inner.drafter_contexts(); }
    void start(std::span<const int> prompt) {
        inner.start(prompt);
        text.assign(prompt.begin(), prompt.end());
    }
    Rows propose(const Tree& tree, std::span<const int> nodes) {
        drafted = true;
        return inner.propose(tree, nodes);
    }
    void observe(const StepOutcome& outcome) {
        inner.observe(outcome);
        for (std::size_t j = 1; j < outcome.path.size(); ++j) text.push_back(outcome.tree[outcome.path[j]].token);
        const int committed = static_cast<int>(text.size());
        text.push_back(outcome.next_root);
        const int held = draft->cache_len();
        if (drafted) worst_lag = std::max(worst_lag, committed - held);
        if (drafted) lagged += committed > held;
        drafted = false;
        fresh->reset();
        detail::prefill(*fresh, std::span<const int>(text).first(static_cast<std::size_t>(held)));
        for (int l = 0; l < draft->num_layers(); ++l) {
            const KvView a = draft->kv(l), b = fresh->kv(l);
            for (std::size_t i = 0; i < a.k.size(); ++i)
                worst_kv = std::max({worst_kv, std::abs(a.k[i] - b.k[i]), std::abs(a.v[i] - b.v[i])});
        }
        ++steps;
    }
};

}  // namespace

TEST_CASE("EAGLE-2 expands the most probable nodes of each depth and keeps the most probable overall", "[eagle2]") {
    MarkovDrafter d = toy();
    const Tree t = build({.total_tokens = 7, .depth = 3, .top_k = 2}, d);
    // Drafting order: depth 1 (1, 2), then depth 2 (3, 4 under 1; 5 under 2), then 9 under 5.
    check_topk_tree(t, {{0, -1, 1}, {1, 0, .6f}, {2, 0, .25f}, {3, 1, .5f}, {4, 1, .3f}, {5, 2, .9f}, {9, 5, .7f}});
    CHECK(d.asked_tokens == Asked{{0}, {1, 2}, {3, 5}});  // one forward per depth, the top 2 of the depth before
    CHECK(d.asked == Asked{{0}, {1, 2}, {3, 4}});         // the drafter sees the root and expanded nodes only
}

TEST_CASE("EAGLE-2 with room for every candidate keeps them all, in drafting order", "[eagle2]") {
    MarkovDrafter d = toy();
    const Tree t = build({.total_tokens = 100, .depth = 3, .top_k = 2}, d);
    check_topk_tree(t, {{0, -1, 1}, {1, 0, .6f}, {2, 0, .25f}, {3, 1, .5f}, {4, 1, .3f}, {5, 2, .9f}, {6, 2, .05f},
                   {7, 3, .4f}, {8, 3, .2f}, {9, 5, .7f}, {10, 5, .1f}});
    for (int i = 1; i < t.size(); ++i) CHECK(t[i].parent < i);  // topological
}

TEST_CASE("EAGLE-2's tree matches a plain re-derivation on random drafters", "[eagle2]") {
    const std::uint64_t seed = GENERATE(range(1, 7));
    const Eagle2Tree b = GENERATE(Eagle2Tree{.total_tokens = 12, .depth = 4, .top_k = 3},
                                  Eagle2Tree{.total_tokens = 30, .depth = 5, .top_k = 4}, Eagle2Tree::half_budget());
    CAPTURE(seed, b.total_tokens, b.depth, b.top_k);
    std::mt19937 rng(static_cast<std::uint32_t>(seed));
    MarkovDrafter d{.table = {}, .vocab = 12};
    for (int from = 0; from < d.vocab; ++from) {  // four listed tokens per row, random mass, distinct values
        std::uniform_real_distribution<float> mass(0.02f, 0.24f);
        std::vector<int> tokens(d.vocab);
        std::iota(tokens.begin(), tokens.end(), 0);
        std::shuffle(tokens.begin(), tokens.end(), rng);
        for (int i = 0; i < 4; ++i) d.table[from][tokens[i]] = mass(rng);
    }
    const Tree t = build(b, d);
    const Reference ref = eagle2_by_hand(d, 0, b);
    CHECK(d.asked_tokens == ref.expanded);
    CHECK(token_paths(t) == ref.kept);
    CHECK(t.size() == b.total_tokens);
    CHECK(t.max_depth() <= b.depth);
    for (int i = 1; i < t.size(); ++i) {
        CHECK(t[i].parent < i);                                       // topological, closed under ancestors
        if (t[i].parent > 0) CHECK(t[t[i].parent].depth <= t[i].depth);  // drafting order is depth by depth
        if (i > 1) CHECK(t[i - 1].depth <= t[i].depth);
    }
}

TEST_CASE("EAGLE-2 breaks ties towards the node drafted first, which keeps parents before children", "[eagle2]") {
    // A drafter with uniform laws: every child has probability 1/16, every depth-d node 16^-d. The
    // top-2 children are tokens 0 and 1 (ties by token id); at depth 2 all four nodes tie and the first
    // two drafted, both under token 0, are expanded; the rerank takes depth 1, then depth 2 in order.
    MarkovDrafter d;
    const Tree t = build({.total_tokens = 5, .depth = 3, .top_k = 2}, d);
    const float p = 1.0f / 16;
    check_topk_tree(t, {{0, -1, 1}, {0, 0, p}, {1, 0, p}, {0, 1, p}, {1, 1, p}});
    CHECK(d.asked == Asked{{0}, {1, 2}, {3, 4}});
    CHECK(d.asked_tokens == Asked{{0}, {0, 1}, {0, 1}});
}

TEST_CASE("EAGLE-2 keeps within its depth, the room left and its token budget", "[eagle2]") {
    SECTION("the room left near the context's end cuts the depth") {
        MarkovDrafter d = toy();
        const Tree t = build({.total_tokens = 100, .depth = 3, .top_k = 2}, d, 2);
        check_topk_tree(t, {{0, -1, 1}, {1, 0, .6f}, {2, 0, .25f}, {3, 1, .5f}, {4, 1, .3f}, {5, 2, .9f}, {6, 2, .05f}});
        CHECK(d.asked_tokens == Asked{{0}, {1, 2}});
    }
    SECTION("no room: the root alone, no forward") {
        MarkovDrafter d = toy();
        CHECK(build({}, d, 0).size() == 1);
        CHECK(d.asked.empty());
    }
    SECTION("total_tokens 1 verifies the root alone, without a forward") {
        MarkovDrafter d = toy();
        CHECK(build({.total_tokens = 1}, d).size() == 1);
        CHECK(d.asked.empty());
    }
    SECTION("depth 1: the root's top-k") {
        MarkovDrafter d = toy();
        check_topk_tree(build({.total_tokens = 60, .depth = 1, .top_k = 2}, d), {{0, -1, 1}, {1, 0, .6f}, {2, 0, .25f}});
    }
    SECTION("top_k 1: the drafter's greedy chain") {
        MarkovDrafter d = toy();
        check_topk_tree(build({.total_tokens = 60, .depth = 3, .top_k = 1}, d), {{0, -1, 1}, {1, 0, .6f}, {3, 1, .5f}, {7, 2, .4f}});
    }
    SECTION("the defaults: 59 drafts over 6 depths, 10 nodes per forward") {
        MarkovDrafter d = toy();
        const Tree t = build({}, d);
        CHECK(t.size() == 60);
        CHECK(t.max_depth() <= 6);
        REQUIRE(d.asked.size() == 6);
        for (std::size_t i = 1; i < d.asked.size(); ++i) CHECK(d.asked[i].size() == 10);
        MarkovDrafter h = toy();
        CHECK(build(Eagle2Tree::half_budget(), h).size() == 30);
        CHECK(h.asked.size() == 6);
    }
}

TEST_CASE("EAGLE-2 names bad parameters", "[eagle2][errors]") {
    MarkovDrafter d = toy();
    const auto fails_with = [&](Eagle2Tree b, const std::string& text) {
        CHECK_THROWS_WITH(build(b, d), Catch::StartsWith("[specdec.eagle2]") && Catch::Contains(text));
    };
    fails_with({.total_tokens = 0}, "total_tokens = 0, must be >= 1 (it counts the root");
    fails_with({.depth = 0}, "depth = 0, must be >= 1");
    fails_with({.top_k = -1}, "top_k = -1, must be >= 1");
    fails_with({.top_k = 17}, "top_k = 17 exceeds the drafter's vocabulary of 16 tokens");
    CHECK(d.asked.empty());
    CHECK_NOTHROW(build({.top_k = 16}, d));
}

TEST_CASE("greedy EAGLE-2 over a model drafter equals plain greedy decoding, with the drafter's cache right after every step",
          "[eagle2][lossless]") {
    const WeightFormat format = GENERATE(WeightFormat::kF32, WeightFormat::kBF16);
    const std::uint64_t seed = GENERATE(range(1, 9));
    const bool fills_context = seed == 8;  // the last prompt's output ends exactly at the context's end
    CAPTURE(static_cast<int>(format), seed);
    const Config cfg = test::tiny_config();
    const ModelOptions opts{.weight_format = format};
    const Weights wt = random_weights(cfg, seed, 0.4f);
    const Weights wd = perturbed(cfg, wt, 0.15f, seed + 100);
    CpuModel target(cfg, wt, opts), draft(cfg, wd, opts), fresh(cfg, wd, opts);
    std::vector<int> prompt{static_cast<int>(seed % 60), 3, 17, 42};
    if (fills_context)
        for (int i = 0; i < 100; ++i) prompt.push_back((7 * i + 1) % cfg.vocab_size);
    const int max_new = fills_context ? cfg.max_position_embeddings - static_cast<int>(prompt.size()) : 40;
    const GenerateOptions gen{.max_new_tokens = max_new, .seed = seed};
    const Eagle2Tree eagle = seed % 2 ? Eagle2Tree{} : Eagle2Tree::half_budget();

    const Generation plain = autoregressive_generate(target, prompt, gen);
    CheckedProposer proposer{.inner = ModelProposer(draft), .draft = &draft, .fresh = &fresh};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const Generation spec = speculative_generate(target, proposer, eagle, verifier, acceptor, prompt, gen);
    CHECK(spec.tokens == plain.tokens);
    CHECK(static_cast<int>(spec.tokens.size()) == max_new);
    CHECK(spec.n_target_calls() < plain.n_target_calls());
    int rejected = 0, accepted = 0;
    for (const StepRecord& s : spec.steps) {
        rejected += s.n_accepted < s.depth;
        accepted += s.n_accepted;
        // One drafter forward per depth drafted; the rerank may keep none of the deepest.
        CHECK(s.n_draft_calls <= eagle.depth);
        CHECK(s.depth <= s.n_draft_calls);
        // Two depths propose top_k + top_k^2 candidates (110, or 30 for the half budget), more than the
        // budget: it is full unless the room left allows one depth or none.
        if (s.n_draft_calls > 1) CHECK(s.n_drafted == eagle.total_tokens - 1);
    }
    CHECK(rejected > 0);
    CHECK(accepted > (fills_context ? 4 : 10));  // accepted drafts, so the cache check below means something
    // The rerank hands the target a tree the drafter never saw in that order; its cache still follows
    // the committed text after every step.
    CHECK(proposer.steps == spec.n_target_calls());
    CHECK(proposer.worst_lag <= 1);
    if (!fills_context) CHECK(proposer.lagged > 0);  // some steps accepted a leaf the drafter never scored
    CHECK(proposer.worst_kv < 1e-5f);
}

TEST_CASE("at T > 0 the EAGLE-2 tree goes with SampleAndMatch, and multi-draft sampling refuses its top-k children",
          "[eagle2][sampling]") {
    const Config cfg = test::tiny_config();
    const Weights w = random_weights(cfg, 5, 0.4f);
    CpuModel target(cfg, w), draft(cfg, perturbed(cfg, w, 0.15f, 6));
    const std::vector<int> prompt{5, 3, 17, 42};
    const GenerateOptions gen{.max_new_tokens = 12, .sampling = {.temperature = 1.0f}, .seed = 3};
    ModelProposer proposer(draft);
    TreeVerifier verifier;
    Eagle2Tree eagle = Eagle2Tree::half_budget();
    SampleAndMatch exact;
    MultiDraftSampling multi_draft;
    const Generation g = speculative_generate(target, proposer, eagle, verifier, exact, prompt, gen);
    CHECK(g.tokens.size() == 12u);  // its distribution: the chi-square test in tests/loop/test_lossless_sampling.cpp
    CHECK_THROWS_WITH(speculative_generate(target, proposer, eagle, verifier, multi_draft, prompt, gen),
                      Catch::Contains("[specdec.acceptor] MultiDraftSampling needs children sampled") &&
                          Catch::Contains("use SampleAndMatch"));
}

}  // namespace test_eagle2_tree
