// examples/course/ex8_typical_acceptance.hpp — exercise 8, your file: a lossy acceptor, and its loss measured.
// The statement is ex8_typical_acceptance.md; grade it with `ctest -L course -R ex8` in a build configured with
// -DSPECDEC_COURSE_GRADE=ON (README.md here).
#pragma once

#include <specdec.hpp>

#include <vector>

namespace course {

using namespace specdec;

/// Typical acceptance (Medusa, Cai et al. 2024): keep the draft x under `node` when the target finds it
/// typical, p(x) > min(epsilon, delta * exp(-H(p))), H the entropy of p in nats; stop at the first draft
/// that is not; the next token is drawn from p at the last kept node. Lossy by design.
struct TypicalAcceptance {
    float epsilon = 0.3f;
    float delta = 0.09f;

    AcceptResult accept(const Tree& tree, Rows logits, const StepContext& ctx) const {
        (void)tree, (void)logits, (void)ctx;
        fail("course", "TypicalAcceptance::accept is not implemented yet: write it in examples/course/ex8_typical_acceptance.hpp");
    }
};

/// The loss of (drafter `draft`, Chain{.gamma = 3}, TypicalAcceptance{}) against `target` at temperature 1,
/// measured with specdec::check over `prompts` (at least 1000 runs per prompt): the checker's report.
inline check::Report measure_loss(CpuModel& target, CpuModel& draft, const std::vector<std::vector<int>>& prompts) {
    (void)target, (void)draft, (void)prompts;
    fail("course", "measure_loss is not implemented yet: write it in examples/course/ex8_typical_acceptance.hpp");
}

}  // namespace course
