// The bit mask the CUDA tree attention reads marks exactly the nodes CpuModel attends to.
#include <algorithm>

#include "catch.hpp"
#include "detail/core/tree_mask.hpp"
#include "helpers.hpp"

using namespace specdec;

TEST_CASE("ancestor masks mark each node's ancestors and itself, nothing else", "[tree][cuda]") {
    const int n = GENERATE(1, 31, 32, 33, 100);
    const int first = GENERATE(0, 1) * (n / 2);  // a fresh tree, or one grown from its first half
    Tree tree;
    StepRng rng{static_cast<std::uint64_t>(n), 0, RngStream::kUser};
    tree.add_root(0);
    for (int i = 1; i < n; ++i) tree.add(i, static_cast<int>(rng.uniform(i) * i));
    const int words = detail::mask_words(n);
    std::vector<std::uint32_t> mask(static_cast<std::size_t>(n - first) * words, 0xdeadbeefu);
    detail::ancestor_masks(tree, first, words, mask);
    for (int i = first; i < n; ++i) {
        const std::vector<int> path = tree.path_to(i);
        for (int j = 0; j < n; ++j) {
            const bool bit = (mask[static_cast<std::size_t>(i - first) * words + j / 32] >> (j % 32)) & 1u;
            INFO("node " << i << ", tree row " << j);
            CHECK(bit == (std::find(path.begin(), path.end(), j) != path.end()));
        }
    }
}

TEST_CASE("an ancestor mask that cannot hold the tree is refused", "[tree][cuda][errors]") {
    const Tree tree = Tree::chain(std::vector<int>(40, 1));
    std::vector<std::uint32_t> mask(40);
    CHECK_THROWS_WITH(detail::ancestor_masks(tree, 0, 1, mask), Catch::Contains("[specdec.tree_mask]"));
}
