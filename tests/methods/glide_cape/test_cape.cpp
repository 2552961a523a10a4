// CAPE (GLIDE §4.2) as a tree builder: expansion sizes from confidence, the paper's linearisation and
// mask, the cap on verified tokens, the fixed-size ablation, and greedy losslessness end to end.
#include <algorithm>
#include <cmath>

#include "catch.hpp"
#include "detail/core/tree_mask.hpp"
#include "helpers.hpp"

namespace test_cape {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

constexpr int kV = 16;

/// A drafter whose distribution at chain position i (1-based) has top-1 token 3i mod V with
/// probability conf[i-1]; the other tokens (3i + j) mod V, j = 1..V-1, share the rest geometrically
/// (ratio .95, so each is below the top-1): the expansion tokens are known in advance.
struct ScriptedDrafter {
    std::vector<float> conf;
    std::vector<float> out;
    int vocab_size() const { return kV; }
    void start(std::span<const int>) {}
    void observe(const StepOutcome&) {}
    static std::vector<float> dist(int position, float c) {
        std::vector<float> p(kV);
        double rest = 0;
        for (int j = 1; j < kV; ++j) rest += std::pow(0.95, j - 1);
        p[(3 * position) % kV] = c;
        for (int j = 1; j < kV; ++j) p[(3 * position + j) % kV] = static_cast<float>((1 - c) * std::pow(0.95, j - 1) / rest);
        return p;
    }
    Rows propose(const Tree& tree, std::span<const int> nodes) {
        out.clear();
        for (int n : nodes) {
            const int position = tree[n].depth + 1;
            for (float p : dist(position, conf[position - 1])) out.push_back(std::log(p));
        }
        return Rows{out, kV};
    }
};

Tree build(ExpandedChain builder, std::vector<float> conf) {
    ScriptedDrafter d{std::move(conf), {}};
    const Sampling greedy;
    const std::vector<int> text{1, 2};
    return builder.build(d, 2, StepContext{greedy, StepRng{}, text, 2});
}

}  // namespace

TEST_CASE("CAPE's expansion size follows the confidence of the top-1 draft", "[cape]") {
    const ExpansionSizes s;  // 7, 5, 3, 1 for (0, .3], (.3, .6], (.6, .8], (.8, 1]
    CHECK(s(0.05f) == 7);
    CHECK(s(0.3f) == 7);
    CHECK(s(0.31f) == 5);
    CHECK(s(0.6f) == 5);
    CHECK(s(0.7f) == 3);
    CHECK(s(0.8f) == 3);
    CHECK(s(0.81f) == 1);
    CHECK(s(1.0f) == 1);
    CHECK(ExpansionSizes::fixed(4)(0.1f) == 4);
    CHECK(ExpansionSizes::fixed(4)(0.99f) == 4);
}

TEST_CASE("a CAPE tree: a greedy chain, the next K_i tokens beside each position, leaves only", "[cape]") {
    const std::vector<float> conf{0.95f, 0.7f, 0.5f, 0.2f, 0.1f};  // sizes 1, 3, 5, 7, 7
    const Tree t = build(ExpandedChain{.gamma = 5}, conf);
    const std::vector<int> sizes{1, 3, 5, 7, 7};
    REQUIRE(t.size() == 1 + 5 + 23);
    // Chain first (the paper's linearisation): node i is x_i, the drafter's argmax at position i.
    for (int i = 1; i <= 5; ++i) {
        CHECK(t[i].parent == i - 1);
        CHECK(t[i].token == (3 * i) % kV);
    }
    // Then the expansions by position: siblings of x_i, the next most likely tokens, never extended.
    int node = 6;
    for (int i = 1; i <= 5; ++i)
        for (int j = 1; j <= sizes[i - 1]; ++j, ++node) {
            CHECK(t[node].parent == i - 1);
            CHECK(t[node].depth == i);
            CHECK(t[node].token == (3 * i + j) % kV);
            CHECK(t.children(node).empty());
        }
    SECTION("the engine's tree mask is CAPE's mask") {
        // GLIDE §4.2: mask_ij is kept iff (j <= gamma and pos(i) > j) or i = j, over the linearised
        // proposal P = tree nodes 1..beta, pos(i) = i for chain tokens and the position of the chain
        // token an expansion stands beside; the verified prefix (our root) is visible to all.
        const int beta = t.size() - 1, gamma = 5;
        std::vector<std::uint32_t> bits(t.size());
        detail::ancestor_masks(t, 0, 1, bits);
        const auto pos = [&](int i) { return t[i].depth; };
        for (int i = 1; i <= beta; ++i) {
            CHECK((bits[i] & 1u) == 1u);
            for (int j = 1; j <= beta; ++j) {
                const bool paper = (j <= gamma && pos(i) > j) || i == j;
                const bool ours = (bits[i] >> j) & 1u;
                CAPTURE(i, j);
                CHECK(paper == ours);
            }
        }
    }
}

TEST_CASE("over the cap, the expansions least likely to be reached and picked go first", "[cape]") {
    const std::vector<float> conf{0.95f, 0.7f, 0.5f, 0.2f, 0.1f};  // 5 + 23 drafts uncapped
    const Tree t = build(ExpandedChain{.gamma = 5, .max_drafts = 20}, conf);
    REQUIRE(t.size() == 1 + 20);
    // value(y at position i) = prod_{j<i} conf_j * q_i(y). The 8 lowest of 23: position 5's seven
    // (reach .95*.7*.5*.2 = .0665, values .0041-.0056) and position 1's one (q = .0047: the drafter is
    // 95% sure of its chain token there). The chain stays whole.
    std::vector<int> per_position(6, 0);
    for (int n = 6; n < t.size(); ++n) ++per_position[t[n].depth];
    CHECK(per_position[1] == 0);
    CHECK(per_position[2] == 3);
    CHECK(per_position[3] == 5);
    CHECK(per_position[4] == 7);
    CHECK(per_position[5] == 0);
    for (int i = 1; i <= 5; ++i) CHECK(t[i].token == (3 * i) % kV);
}

TEST_CASE("the fixed-size ablation gives every position the same number of candidates", "[cape]") {
    const Tree t = build(ExpandedChain{.gamma = 3, .sizes = ExpansionSizes::fixed(4)}, {0.95f, 0.5f, 0.1f});
    CHECK(t.size() == 1 + 3 + 12);
}

TEST_CASE("ExpandedChain options are checked", "[cape][errors]") {
    CHECK_THROWS_WITH(build(ExpandedChain{.gamma = 40}, std::vector<float>(40, 0.5f)), Catch::Contains("gamma = 40"));
    CHECK_THROWS_WITH(build(ExpandedChain{.gamma = 0}, {0.5f}), Catch::Contains("gamma = 0"));
    CHECK_THROWS_WITH(build(ExpandedChain{.gamma = 2, .sizes = {{0.5f, 1.0f}, {3}}}, {0.5f, 0.5f}),
                      Catch::Contains("2 confidence bounds for 1 sizes"));
    CHECK_THROWS_WITH(build(ExpandedChain{.gamma = 2, .sizes = {{0.5f, 0.4f}, {3, 1}}}, {0.5f, 0.5f}),
                      Catch::Contains("bounds must increase"));
    CHECK_THROWS_WITH(build(ExpandedChain{.gamma = 2, .sizes = {{1.0f}, {-1}}}, {0.5f, 0.5f}),
                      Catch::Contains("sizes[0] = -1"));
}

namespace {

/// GreedyMatch, counting the steps whose accepted path went through an expansion (a node past the chain).
struct CountingGreedy {
    int gamma = 0;
    int* through_expansion = nullptr;
    AcceptResult accept(const Tree& tree, Rows logits, const StepContext& ctx) const {
        AcceptResult r = GreedyMatch{}.accept(tree, logits, ctx);
        *through_expansion += std::any_of(r.path.begin(), r.path.end(), [&](int n) { return n > gamma; });
        return r;
    }
};

}  // namespace

TEST_CASE("greedy decoding with a CAPE tree equals plain greedy decoding", "[cape][lossless]") {
    const std::uint64_t seed = GENERATE(1, 2, 3, 4);
    const Config cfg = test::tiny_config();
    const Weights w = random_weights(cfg, seed, 0.4f);
    CpuModel target(cfg, w), draft(cfg, perturbed(cfg, w, 0.3f, seed + 50));
    const std::vector<int> prompt{static_cast<int>(seed), 7, 30};
    const GenerateOptions opts{.max_new_tokens = 40};
    ModelProposer proposer(draft);
    ExpandedChain builder{.gamma = 5};
    TreeVerifier verifier;
    int through_expansion = 0;
    CountingGreedy acceptor{5, &through_expansion};
    const Generation g = speculative_generate(target, proposer, builder, verifier, acceptor, prompt, opts);
    CHECK(g.tokens == autoregressive_generate(target, prompt, opts).tokens);
    CHECK(through_expansion > 0);  // the expansions were used, so the equality is not the chain's alone
}

}  // namespace test_cape
