// pruned(): a builder's way to drop subtrees after scoring (PCT's leaf removal) keeps order, depth,
// draft probabilities and recorded child distributions, and refuses an orphan.
#include "catch.hpp"
#include "helpers.hpp"

using namespace specdec;

TEST_CASE("pruned keeps the flagged nodes in order with renumbered parents", "[tree]") {
    Tree t;
    t.add_root(9);
    const int a = t.add(1, 0, 0.5f, Draw::kTopK);
    const int b = t.add(2, 0, 0.3f, Draw::kTopK);
    t.add(3, a, 0.2f, Draw::kTopK);
    const int d = t.add(4, b, 0.7f, Draw::kSampledWithReplacement);
    const std::vector<float> q{0.1f, 0.9f};
    t.set_child_dist(b, q);
    t.add(5, d, 0.6f, Draw::kTopK);
    const std::vector<std::uint8_t> keep{1, 0, 1, 0, 1, 1};  // drop a and its child
    const Tree p = pruned(t, keep);
    REQUIRE(p.size() == 4);
    CHECK(p[1].token == 2);
    CHECK(p[1].parent == 0);
    CHECK(p[2].token == 4);
    CHECK(p[2].parent == 1);
    CHECK(p[2].depth == 2);
    CHECK(p[2].draw == Draw::kSampledWithReplacement);
    CHECK(p[2].draft_prob == 0.7f);
    CHECK(p[3].parent == 2);
    REQUIRE(p.has_child_dist(1));
    CHECK(p.child_dist(1)[1] == 0.9f);
    CHECK_FALSE(p.has_child_dist(0));

    const std::vector<std::uint8_t> orphan{1, 0, 1, 1, 1, 1};  // node 3's parent a is dropped
    CHECK_THROWS_WITH(pruned(t, orphan), Catch::Contains("[specdec.tree] pruned: node 3 is kept but its parent 1 is not"));
    CHECK_THROWS_WITH(pruned(t, std::vector<std::uint8_t>{1}), Catch::Contains("1 keep flags for a tree of 6 nodes"));
}

TEST_CASE("pruned keeps a node's q only while its kept sampled children are its first draws", "[tree]") {
    Tree t;
    t.add_root(0);
    const std::vector<float> q{0.2f, 0.3f, 0.5f};
    t.set_child_dist(0, q);
    for (const int token : {2, 2, 1, 2}) t.add(token, 0, q[static_cast<std::size_t>(token)], Draw::kSampledWithReplacement);
    const auto keeps_q = [&](std::vector<std::uint8_t> keep) { return pruned(t, keep).has_child_dist(0); };
    CHECK(keeps_q({1, 1, 1, 1, 1}));
    CHECK(keeps_q({1, 1, 1, 0, 0}));  // the first two draws: what drawing two gives
    CHECK(keeps_q({1, 0, 0, 0, 0}));
    CHECK_FALSE(keeps_q({1, 1, 0, 1, 0}));  // a repeated token removed: the rest are not the first draws
    CHECK_FALSE(keeps_q({1, 0, 1, 1, 1}));
    CHECK_FALSE(pruned(t, std::vector<std::uint8_t>{1, 1, 0, 1, 0}).child_laws_mixed(0));  // no q, not a mix
}
