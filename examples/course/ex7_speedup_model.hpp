// examples/course/ex7_speedup_model.hpp — exercise 7, your file: predict a method's speedup.
// The statement is ex7_speedup_model.md; grade it with `ctest -L course -R ex7` in a build configured with
// -DSPECDEC_COURSE_GRADE=ON (README.md here).
#pragma once

#include <specdec.hpp>

namespace course {

/// Expected tokens one step of vanilla speculative decoding commits (bonus included), when each of the
/// gamma drafts is accepted with probability alpha independently of the others (Leviathan et al. 2023, §3.1).
inline double expected_tokens(double alpha, int gamma) {
    (void)alpha, (void)gamma;
    specdec::fail("course", "expected_tokens is not implemented yet: write it in examples/course/ex7_speedup_model.hpp");
}

/// Predicted walltime speedup over plain decoding: c is the cost of one drafter forward over one target
/// forward, verify_ratio the cost of one target forward over gamma + 1 tokens over a forward over 1.
inline double predicted_speedup(double alpha, int gamma, double c, double verify_ratio) {
    (void)alpha, (void)gamma, (void)c, (void)verify_ratio;
    specdec::fail("course", "predicted_speedup is not implemented yet: write it in examples/course/ex7_speedup_model.hpp");
}

}  // namespace course
