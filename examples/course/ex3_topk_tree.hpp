// examples/course/ex3_topk_tree.hpp — exercise 3, your file: a k-ary top-k token tree builder.
// The statement is ex3_topk_tree.md; grade it with `ctest -L course -R ex3` in a build configured with
// -DSPECDEC_COURSE_GRADE=ON (README.md here).
#pragma once

#include <specdec.hpp>

#include <vector>

namespace course {

using namespace specdec;

/// A k-ary token tree (SpecInfer §3, Medusa's and MCSD's static trees): k_config[d] children for every
/// node at depth d, the drafter's k_config[d] most likely tokens, one draft forward per depth over the
/// whole frontier, no deeper than ctx.room.
struct TopKTree {
    std::vector<int> k_config;

    template <ScoresNodes P>
    Tree build(P& proposer, int root_token, const StepContext& ctx) {
        (void)proposer, (void)root_token, (void)ctx;
        // Write the builder here (about 20 lines): the root, then per depth one proposer.propose(tree,
        // frontier) and k children per frontier node.
        fail("course", "TopKTree::build is not implemented yet: write it in examples/course/ex3_topk_tree.hpp");
    }
};

}  // namespace course
