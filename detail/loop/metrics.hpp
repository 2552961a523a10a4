// specdec/detail/loop/metrics.hpp — what the papers measure, computed from the loop's per-step records.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "generate.hpp"

namespace specdec {

/// Expected tokens per target forward for a chain of gamma drafts, each accepted i.i.d. with
/// probability alpha (Leviathan et al. 2023, Eq. 1): (1 - alpha^(gamma+1)) / (1 - alpha).
inline double expected_tokens_per_step(double alpha, int gamma) {
    if (alpha >= 1.0) return gamma + 1.0;
    return (1.0 - std::pow(alpha, gamma + 1)) / (1.0 - alpha);
}

/// Expected walltime speedup (Leviathan et al. 2023, Thm 3.8; GLIDE's E(Spd); CS Drafting's EWIF,
/// Cor. 4.2): (1 - alpha^(gamma+1)) / ((1 - alpha)(gamma c + 1)), c = draft time / target time.
inline double expected_speedup(double alpha, int gamma, double c) {
    return expected_tokens_per_step(alpha, gamma) / (gamma * c + 1.0);
}

/// Forwards of one drafter model and the price of each.
struct CallCost {
    long calls = 0;
    double cost = 0.0;
};

/// Standardized walltime improvement (CS Drafting, §5): the cost of generating the same tokens
/// autoregressively over the cost of the method, with a fixed cost per forward of each model
/// (parameter counts, or measured per-call times). A cascade lists each of its drafter models.
inline double standardized_walltime_improvement(int n_tokens, int n_target_calls, double target_cost,
                                                std::span<const CallCost> drafters) {
    double method = n_target_calls * target_cost;
    for (const CallCost& d : drafters) method += static_cast<double>(d.calls) * d.cost;
    return method > 0 ? n_tokens * target_cost / method : 0.0;
}

/// One drafter: n_draft_calls forwards at draft_cost each.
inline double standardized_walltime_improvement(int n_tokens, int n_target_calls, long n_draft_calls,
                                                double target_cost, double draft_cost) {
    const CallCost d{n_draft_calls, draft_cost};
    return standardized_walltime_improvement(n_tokens, n_target_calls, target_cost, std::span<const CallCost>(&d, 1));
}

/// The acceptance figures of the papers, which define "acceptance" differently: each is named for
/// the paper that uses it.
struct Summary {
    int n_tokens = 0;
    int n_target_calls = 0;
    long n_draft_calls = 0;
    double tau = 0;              // tokens committed per target forward, bonus included (EDD, FSPAD, Spec-Bench)
    double alpha_token = 0;      // per-draft-token acceptance of a chain, the alpha of Leviathan et al. and
                                 // GLIDE: accepted / (accepted + rejections), the maximum-likelihood
                                 // estimate of alpha under i.i.d. acceptance
    double alpha_depth = 0;      // EDD's alpha (edd-pct §4.1, Metrics): accepted length, bonus included, over
                                 // the candidate tree's depth, summed over the steps that drafted (depth >= 1).
                                 // tau per unit of depth, not a probability: in [1/d, (d+1)/d] for trees of
                                 // depth d (a chain of 5 accepted whole gives 6/5), as the paper's tables
                                 // satisfy alpha ~ tau / depth; a step with an empty draft has no tree and
                                 // is left out (its bonus alone would count against no depth)
    double alpha_longest = 0;    // MCSD: longest accepted draft / maximum draft length, summed over steps
    std::vector<double> accept_at_position;  // [d-1]: share of steps with depth >= d accepting >= d drafts
    double nodes_per_step = 0;   // draft nodes verified per target forward (PCT vs EAGLE-2: EDD §4.3, Fig. 6)
    double t_draft = 0, t_verify = 0, t_accept = 0, t_commit = 0;  // seconds, summed
    double seconds() const { return t_draft + t_verify + t_accept + t_commit; }
    double draft_share() const { return seconds() > 0 ? t_draft / seconds() : 0.0; }
};

inline Summary summarize(const Generation& g) {
    Summary s;
    s.n_tokens = static_cast<int>(g.tokens.size());
    s.n_target_calls = g.n_target_calls();
    s.tau = g.tau();
    long accepted = 0, rejections = 0, depth = 0, accepted_with_bonus = 0, drafted = 0;
    std::vector<int> reached, offered;
    for (const StepRecord& r : g.steps) {
        s.n_draft_calls += r.n_draft_calls;
        accepted += r.n_accepted;
        drafted += r.n_drafted;
        if (r.depth > 0) accepted_with_bonus += r.n_accepted + 1;
        depth += r.depth;
        rejections += r.n_accepted < r.depth;
        if (static_cast<int>(offered.size()) < r.depth) {
            offered.resize(r.depth, 0);
            reached.resize(r.depth, 0);
        }
        for (int d = 0; d < r.depth; ++d) ++offered[d];
        for (int d = 0; d < r.n_accepted; ++d) ++reached[d];
        s.t_draft += r.t_draft, s.t_verify += r.t_verify, s.t_accept += r.t_accept, s.t_commit += r.t_commit;
    }
    s.alpha_token = accepted + rejections > 0 ? double(accepted) / double(accepted + rejections) : 0.0;
    s.alpha_depth = depth > 0 ? double(accepted_with_bonus) / double(depth) : 0.0;
    s.alpha_longest = depth > 0 ? double(accepted) / double(depth) : 0.0;
    s.nodes_per_step = g.steps.empty() ? 0.0 : double(drafted) / double(g.steps.size());
    for (std::size_t d = 0; d < offered.size(); ++d) s.accept_at_position.push_back(double(reached[d]) / offered[d]);
    return s;
}

// ---- text quality ------------------------------------------------------------------------------------

/// Whether some n consecutive tokens occur twice (overlaps allowed) in `tokens`: the degenerate loops
/// of a weak or greedily decoded model ("and the whale, and the whale, ..."). n = 8 over 64 generated
/// tokens is the demo's measure. False when n < 1 or the text has n tokens or fewer.
inline bool has_repeated_ngram(std::span<const int> tokens, int n) {
    if (n < 1 || tokens.size() <= static_cast<std::size_t>(n)) return false;
    const std::size_t len = static_cast<std::size_t>(n);
    // Each window hashed (FNV-1a over its ids), then candidates compared exactly.
    std::unordered_multimap<std::uint64_t, std::size_t> seen;
    for (std::size_t i = 0; i + len <= tokens.size(); ++i) {
        std::uint64_t h = 1469598103934665603ull;
        for (std::size_t j = i; j < i + len; ++j) h = (h ^ static_cast<std::uint32_t>(tokens[j])) * 1099511628211ull;
        const auto [first, last] = seen.equal_range(h);
        for (auto it = first; it != last; ++it)
            if (std::equal(tokens.begin() + it->second, tokens.begin() + it->second + len, tokens.begin() + i)) return true;
        seen.emplace(h, i);
    }
    return false;
}

}  // namespace specdec
