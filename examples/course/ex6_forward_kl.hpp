// examples/course/ex6_forward_kl.hpp — exercise 6, your file: the forward KL loss of distillation and its
// gradient. The statement is ex6_forward_kl.md; grade it with `ctest -L course -R ex6` in a build configured
// with -DSPECDEC_COURSE_GRADE=ON (README.md here).
#pragma once

#include <specdec.hpp>

#include <algorithm>
#include <cmath>
#include <span>

namespace course {

using namespace specdec;

/// Forward KL, the distillation loss (EDD, "Effective Draft Decoder with Pruned Candidate Tree", Eq. 4):
/// the mean over N rows of KL(p_r || q_r) = Σ_j p_rj (log p_rj - log q_rj), q_r = softmax(logits_r), p_r
/// a target distribution (rows of V). Adds weight · d(mean)/d(logits) to dlogits and returns the mean. Shapes: (N, V) each.
inline double forward_kl(std::span<const float> target_probs, std::span<const float> logits, std::span<float> dlogits,
                         int N, int V, double weight = 1.0) {
    (void)target_probs, (void)logits, (void)dlogits, (void)N, (void)V, (void)weight;
    fail("course", "forward_kl is not implemented yet: write it in examples/course/ex6_forward_kl.hpp");
}

}  // namespace course
