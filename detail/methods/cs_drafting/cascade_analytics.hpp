// specdec/detail/methods/cs_drafting/cascade_analytics.hpp — CS Drafting's closed forms: tokens per step and expected speedup.
// SPDX-License-Identifier: MIT
#pragma once

// CS Drafting (Chen et al. 2023), §4. Every formula assumes i.i.d. Bernoulli acceptance: a reviewer
// accepts each draft token with a fixed probability alpha, independently, until the first rejection,
// then adds one token of its own. Costs c are a drafter's time per forward over the target's, and EWIF
// ("expected walltime improvement factor") = expected tokens per target step / cost of that step,
// both in units of one target forward.

#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "../../core/error.hpp"
#include "../../loop/metrics.hpp"

namespace specdec {

namespace detail {

inline void check_acceptance(double alpha, std::string_view name) {
    require(alpha >= 0.0 && alpha <= 1.0, "cs_analytics",
            [&] { return std::string(name) + " = " + std::to_string(alpha) + " is outside [0, 1]"; });
}

inline void check_cost(double c, std::string_view name) {
    require(c >= 0.0 && std::isfinite(c), "cs_analytics",
            [&] { return std::string(name) + " = " + std::to_string(c) + " is not a finite cost >= 0"; });
}

inline void check_count(int k, std::string_view name) {
    require(k >= 0, "cs_analytics", [&] { return std::string(name) + " = " + std::to_string(k) + " is negative"; });
}

}  // namespace detail

/// Thm 4.1: the probability generating function of the tokens one review step yields when a reviewer
/// checks k drafts, each accepted with probability alpha:
///   phi_(alpha,k)(x) = 1 + (x - 1)(1 - alpha^(k+1) x^(k+1)) / (1 - alpha x).
/// Its coefficients (App. C.1) are P(i+1 tokens) = alpha^i - alpha^(i+1) for i < k, P(k+1) = alpha^k.
inline double cs_pgf(double alpha, int k, double x) {
    detail::check_acceptance(alpha, "alpha");
    detail::check_count(k, "k");
    // (1 - y^(k+1)) / (1 - y) with y = alpha x, summed directly as 1 + y + ... + y^k: the same
    // polynomial, and also right at y = 1, where the quotient is 0/0 (its limit is k + 1).
    const double y = alpha * x;
    double sum = 0.0, y_power = 1.0;
    for (int i = 0; i <= k; ++i, y_power *= y) sum += y_power;
    return 1.0 + (x - 1.0) * sum;
}

/// Cor. 4.2: EWIF of plain speculative decoding, k drafts from one drafter of cost c:
///   phi'(1) / (c k + 1) = (1 - alpha^(k+1)) / ((1 - alpha)(c k + 1)),
/// which is Leviathan et al.'s expected speedup; metrics.hpp holds the one definition.
inline double cs_ewif_sd(double alpha, int k, double c) {
    detail::check_acceptance(alpha, "alpha");
    detail::check_count(k, "k");
    detail::check_cost(c, "c");
    return expected_speedup(alpha, k, c);
}

/// Thm 4.3: EWIF of a vertical cascade target <- d1 <- d2. Per target step, d1 makes n review passes
/// over k drafts of d2 (each pass yields d1's accepted tokens + 1, distributed as phi = phi_(alpha_inner,k),
/// so their sum has PGF phi^n); then the target reviews them all with acceptance alpha:
///   EWIF = (1 - alpha phi(alpha)^n) / ((1 - alpha)(1 + n c_d1 + n k c_d2)).
/// alpha = alpha(target, d1), alpha_inner = alpha(d1, d2); c_d1, c_d2 are per forward. The numerator
/// over (1 - alpha) is the paper's operator T_alpha applied to phi^n: x^j -> (1 - alpha^(j+1)) / (1 - alpha).
inline double cs_ewif_vertical(double alpha, double alpha_inner, int k, int n, double c_d1, double c_d2) {
    detail::check_acceptance(alpha, "alpha");
    detail::check_acceptance(alpha_inner, "alpha_inner");
    detail::check_count(k, "k");
    detail::check_count(n, "n");
    detail::check_cost(c_d1, "c_d1");
    detail::check_cost(c_d2, "c_d2");
    const double cost = 1.0 + n * c_d1 + n * k * c_d2;
    if (alpha >= 1.0)  // the limit alpha -> 1: every draft is accepted, 1 + E[sum of the passes]
        return (1.0 + n * expected_tokens_per_step(alpha_inner, k)) / cost;
    const double phi = cs_pgf(alpha_inner, k, alpha);
    return (1.0 - alpha * std::pow(phi, n)) / ((1.0 - alpha) * cost);
}

/// Thm 4.5: EWIF of a horizontal cascade, draft token i (1-based) made by model M_i with acceptance
/// alpha_i and cost c_i. Token i survives when it and every earlier one are accepted (Cor. 4.6:
/// probability prod_{j<=i} alpha_j), and the target adds one token:
///   EWIF = sum_{i=0}^{k} prod_{j=1}^{i} alpha_j / (1 + sum_{i=1}^{k} c_i).
inline double cs_ewif_horizontal(std::span<const double> alphas, std::span<const double> costs) {
    detail::require(alphas.size() == costs.size(), "cs_analytics", [&] {
        return std::string("cs_ewif_horizontal: ") + std::to_string(alphas.size()) + " acceptance rates but " +
               std::to_string(costs.size()) + " costs (one of each per draft token)";
    });
    double tokens = 1.0, survive = 1.0, cost = 1.0;  // i = 0: the target's own token
    for (std::size_t i = 0; i < alphas.size(); ++i) {
        detail::check_acceptance(alphas[i], std::string("alphas[") + std::to_string(i) + "]");
        detail::check_cost(costs[i], std::string("costs[") + std::to_string(i) + "]");
        survive *= alphas[i];
        tokens += survive;
        cost += costs[i];
    }
    return tokens / cost;
}

}  // namespace specdec
