// The token tree: construction, paths, and the errors a hand-made tree can trigger.
#include "catch.hpp"
#include "helpers.hpp"

using namespace specdec;

TEST_CASE("a tree records parents, depths, children and root-to-node paths", "[tree]") {
    Tree t;
    const int r = t.add_root(10);
    const int a = t.add(11, r, 0.5f, Draw::kTopK);
    const int b = t.add(12, r, 0.3f, Draw::kTopK);
    const int c = t.add(13, a, 0.9f, Draw::kTopK);
    CHECK(t.size() == 4);
    CHECK(t[c].depth == 2);
    CHECK(t.children(r) == std::vector<int>{a, b});
    CHECK(t.children(b).empty());
    CHECK(t.path_to(c) == std::vector<int>{r, a, c});
    CHECK(t.max_depth() == 2);
    CHECK_NOTHROW(t.validate(14));
    CHECK_THROWS_WITH(t.validate(13), Catch::Contains("token id 13"));
}

TEST_CASE("a chain is a tree of one branch and a forest may have several roots", "[tree]") {
    const std::vector<int> toks{4, 5, 6};
    const Tree chain = Tree::chain(toks);
    CHECK(chain.path_to(2) == std::vector<int>{0, 1, 2});
    Tree forest;
    forest.add_root(1);
    forest.add_root(2);
    forest.add(3, 1);
    CHECK(forest[2].depth == 1);
    CHECK(forest.path_to(2) == std::vector<int>{1, 2});
}

TEST_CASE("the draft distribution of sampled children is kept per parent", "[tree]") {
    Tree t;
    t.add_root(0);
    const std::vector<float> q{0.1f, 0.9f};
    t.set_child_dist(0, q);
    CHECK(t.has_child_dist(0));
    CHECK(t.child_dist(0)[1] == 0.9f);
    t.add(1, 0, 0.9f, Draw::kSampledWithReplacement);
    CHECK_FALSE(t.has_child_dist(1));
    CHECK_THROWS_WITH(t.child_dist(1), Catch::Contains("node 1 has no recorded draft distribution"));
    const std::vector<float> wrong{0.5f, 0.25f, 0.25f};
    CHECK_THROWS_WITH(t.set_child_dist(1, wrong), Catch::Contains("3 entries"));
}

TEST_CASE("paths that do not follow parent links are rejected", "[tree][errors]") {
    Tree t;
    t.add_root(0);
    t.add(1, 0);
    t.add(2, 0);
    CHECK_NOTHROW(validate_path(t, std::vector<int>{0, 2}, "test"));
    CHECK_THROWS_WITH(validate_path(t, std::vector<int>{0, 1, 2}, "test"), Catch::Contains("node 2") && Catch::Contains("expected 1"));
    CHECK_THROWS_WITH(validate_path(t, std::vector<int>{0, 7}, "test"), Catch::Contains("node 7"));
    CHECK_THROWS_WITH(t.add(5, 3), Catch::Contains("node 3 has parent 3"));
}

TEST_CASE("a law recorded for a node after children drawn from another leaves it with none", "[tree]") {
    const std::vector<float> q{0.25f, 0.75f}, r{0.5f, 0.5f};
    Tree t;
    t.add_root(0);
    t.set_child_dist(0, r);
    t.set_child_dist(0, q);  // no child yet: the law is replaced
    t.add(1, 0, 0.75f, Draw::kSampledWithReplacement);
    t.set_child_dist(0, q);  // the same law again (another draw from it): kept
    t.add(1, 0, 0.75f, Draw::kSampledWithReplacement);
    REQUIRE(t.has_child_dist(0));
    CHECK(t.child_dist(0)[1] == 0.75f);
    CHECK_FALSE(t.child_laws_mixed(0));
    t.set_child_dist(0, r);  // a third child from another law (two add_drafted candidates)
    CHECK_FALSE(t.has_child_dist(0));
    CHECK(t.child_laws_mixed(0));
    t.set_child_dist(0, q);
    CHECK_FALSE(t.has_child_dist(0));  // stays mixed

    Tree late;  // children added first, their law recorded after: one recording, kept
    late.add_root(0);
    late.add(1, 0, 0.75f, Draw::kSampledWithReplacement);
    late.add(0, 0, 0.25f, Draw::kSampledWithReplacement);
    late.set_child_dist(0, q);
    CHECK(late.has_child_dist(0));
}
