// examples/course/planted/ex7_free_verification.hpp — a planted wrong solution of exercise 7 (the suite proves the checker
// fails it): ignores the measured cost of verifying gamma + 1 tokens (takes it as one forward).
#pragma once

#include <cmath>

namespace course {

/// (1 - alpha^(gamma+1)) / (1 - alpha): Leviathan et al. 2023, Eq. (1); gamma + 1 at alpha = 1 (its limit).
inline double expected_tokens(double alpha, int gamma) {
    if (alpha >= 1.0) return gamma + 1.0;
    return (1.0 - std::pow(alpha, gamma + 1)) / (1.0 - alpha);
}

/// Tokens per step over the step's cost in target forwards of one token: gamma drafter forwards (c each)
/// and one verification (verify_ratio). With verify_ratio = 1 this is Leviathan et al.'s Theorem 3.8.
inline double predicted_speedup(double alpha, int gamma, double c, double verify_ratio) {
    (void)verify_ratio;  // PLANTED BUG: verification as cheap as one token
    return expected_tokens(alpha, gamma) / (gamma * c + 1.0);
}

}  // namespace course
