// examples/course/ex1_chain_sampling.hpp — exercise 1, your file: speculative sampling for a chain.
// The statement is ex1_chain_sampling.md; grade it with `ctest -L course -R ex1` in a build configured with
// -DSPECDEC_COURSE_GRADE=ON (README.md here).
#pragma once

#include <specdec.hpp>

namespace course {

using namespace specdec;

/// Speculative sampling for a chain of drafts (Leviathan et al. 2023, Alg. 1): walk the chain from the
/// root; accept the draft x under `node` with probability min(1, p(x)/q(x)); at the first rejection draw
/// the next token from norm(max(0, p - q)); if every draft is kept, draw the bonus from p at the last node.
struct ChainSampling {
    AcceptResult accept(const Tree& tree, Rows logits, const StepContext& ctx) const {
        (void)tree, (void)logits, (void)ctx;
        // Write the walk here (about 25 lines); return the accepted path (root first) and the next token.
        fail("course", "ChainSampling::accept is not implemented yet: write it in examples/course/ex1_chain_sampling.hpp");
    }
};

}  // namespace course
