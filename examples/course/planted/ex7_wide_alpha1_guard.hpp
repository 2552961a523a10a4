// examples/course/planted/ex7_wide_alpha1_guard.hpp — a planted wrong solution of exercise 7 (the suite proves the checker
// fails it): returns the alpha = 1 limit for every alpha > 0.99.
#pragma once

#include <cmath>

namespace course {

/// (1 - alpha^(gamma+1)) / (1 - alpha): Leviathan et al. 2023, Eq. (1); gamma + 1 at alpha = 1 (its limit).
inline double expected_tokens(double alpha, int gamma) {
    if (alpha > 0.99) return gamma + 1.0;  // PLANTED BUG: "alpha near 1" guard far too wide
    return (1.0 - std::pow(alpha, gamma + 1)) / (1.0 - alpha);
}

/// Tokens per step over the step's cost in target forwards of one token: gamma drafter forwards (c each)
/// and one verification (verify_ratio). With verify_ratio = 1 this is Leviathan et al.'s Theorem 3.8.
inline double predicted_speedup(double alpha, int gamma, double c, double verify_ratio) {
    return expected_tokens(alpha, gamma) / (gamma * c + verify_ratio);
}

}  // namespace course
