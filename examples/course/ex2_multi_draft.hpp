// examples/course/ex2_multi_draft.hpp — exercise 2, your file: multi-draft speculative sampling (SpecInfer),
// for siblings drawn with and without replacement.
// The statement is ex2_multi_draft.md; grade it with `ctest -L course -R ex2` in a build configured with
// -DSPECDEC_COURSE_GRADE=ON (README.md here).
#pragma once

#include <specdec.hpp>

namespace course {

using namespace specdec;

/// Multi-draft speculative sampling over a tree whose siblings were drawn from their parent's q: try the
/// siblings in order, accept x with probability min(1, p(x)/q(x)); after each rejection p becomes
/// norm(max(0, p - q)), and for draws without replacement q(x) is zeroed and q renormalised.
struct MultiDraft {
    AcceptResult accept(const Tree& tree, Rows logits, const StepContext& ctx) const {
        (void)tree, (void)logits, (void)ctx;
        // Write the walk here (about 35 lines).
        fail("course", "MultiDraft::accept is not implemented yet: write it in examples/course/ex2_multi_draft.hpp");
    }
};

}  // namespace course
