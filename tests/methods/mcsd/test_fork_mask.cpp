// Improved MCSD's dynamic sliced mask (§3.2; NOTES §4.4): the slice of the mask built once for the
// maximum depth equals the mask built for the depth reached, and both equal the tree mask of the fork.
#include "catch.hpp"
#include "helpers.hpp"

namespace test_fork_mask {  // a unity build compiles several test files as one

using namespace specdec;

TEST_CASE("the upper-left slice of the fork mask equals a freshly built mask for each depth", "[mcsd][mask]") {
    const int W = GENERATE(1, 3, 16);
    const int D = 4;
    CAPTURE(W);
    const ForkMask built(W, D);
    for (int s = 0; s <= D; ++s) {
        CAPTURE(s);
        const ForkMaskSlice slice = built.slice(s);
        const ForkMask fresh(W, s);
        const ForkMaskSlice whole = fresh.slice(s);
        REQUIRE(slice.n == W * s);
        REQUIRE(whole.n == W * s);
        int differ = 0;
        for (int i = 0; i < slice.n; ++i)
            for (int j = 0; j < slice.n; ++j) differ += slice.visible(i, j) != whole.visible(i, j);
        CHECK(differ == 0);
    }
}

TEST_CASE("the fork mask is the tree attention mask of the depth-major fork (Fig. 2, 3 chains x 3 tokens)",
          "[mcsd][mask]") {
    const ForkMask m(3, 3);
    const ForkMaskSlice s = m.slice(3);
    REQUIRE(s.n == 9);  // Fig. 2's 9x9 mask
    const Tree fork = fork_tree(7, {{1, 2, 3}, {4, 5, 6}, {8, 9, 10}});
    REQUIRE(fork.size() == 10);
    const int words = detail::mask_words(fork.size());
    std::vector<std::uint32_t> bits(static_cast<std::size_t>(fork.size() - 1) * words);
    detail::ancestor_masks(fork, 1, words, bits);
    for (int i = 0; i < 9; ++i)
        for (int j = 0; j < 9; ++j) {
            CAPTURE(i, j);
            const bool tree_sees = (bits[static_cast<std::size_t>(i) * words + (j + 1) / 32] >> ((j + 1) % 32)) & 1u;
            CHECK(s.visible(i, j) == tree_sees);
        }
    CHECK(fork[1 + 3 + 2].parent == 1 + 2);  // chain 2's second token hangs from its first: depth-major
    CHECK(s.visible(5, 2));                  // ... and sees it
    CHECK_FALSE(s.visible(5, 1));            // but not chain 1's
}

TEST_CASE("a mask sliced beyond its built depth is refused with both depths", "[mcsd][mask][errors]") {
    const ForkMask m(4, 3);
    CHECK_THROWS_WITH(m.slice(4), Catch::Contains("[specdec.mcsd]") && Catch::Contains("slice to depth 4") &&
                                      Catch::Contains("built for depth 3") && Catch::Contains("width 4"));
    CHECK_THROWS_WITH(m.slice(-1), Catch::Contains("slice to depth -1"));
    CHECK_THROWS_WITH(ForkMask(0, 3), Catch::Contains("width 0"));
}

TEST_CASE("the dynamic fork draws W chains in depth-major order and decodes losslessly at temperature 0",
          "[mcsd][fork]") {
    test::MarkovDrafter drafter{.table = {}, .vocab = 16};
    const Sampling s{.temperature = 1.0f};
    const std::vector<int> text{3};
    DynamicFork<> fork{.width = 5, .max_depth = 3};
    const Tree t = fork.build(drafter, 3, StepContext{s, StepRng{1, 0, RngStream::kAccept}, text});
    REQUIRE(t.size() == 1 + 5 * 3);
    for (int i = 1; i < t.size(); ++i) CHECK(t[i].depth == 1 + (i - 1) / 5);  // depth-major
    for (int i = 6; i < t.size(); ++i) CHECK(t[i].parent == i - 5);           // one chain per column
    DynamicFork<> wide{.width = 17};
    CHECK_THROWS_WITH(wide.build(drafter, 3, StepContext{s, StepRng{1, 0, RngStream::kAccept}, text}),
                      Catch::Contains("width 17") && Catch::Contains("vocabulary of 16"));

    const Config cfg = test::tiny_config();
    const Weights w = random_weights(cfg, 5, 0.4f);
    CpuModel target(cfg, w), draft(cfg, perturbed(cfg, w, 0.3f, 6));
    const std::vector<int> prompt{3, 9, 1};
    const GenerateOptions opts{.max_new_tokens = 20};
    ModelProposer proposer(draft);
    TreeVerifier verifier;
    MultiDraftSampling acceptor;
    DynamicFork<> builder{.width = 4, .max_depth = 4};
    const Generation g = speculative_generate(target, proposer, builder, verifier, acceptor, prompt, opts);
    CHECK(g.tokens == autoregressive_generate(target, prompt, opts).tokens);
}

}  // namespace test_fork_mask
