// Printing shared by the examples (the library itself never prints).
#pragma once

#include <cstdio>
#include <string>

#include "specdec.hpp"

namespace example {

/// A random-weight target and a drafter that is the target plus noise. Until trained demo models ship
/// (see README), this is what the lessons run on: acceptance is real and partial, but the drafter is
/// as large as the target, so these examples show tau and losslessness, not a walltime speedup.
struct RandomPair {
    specdec::Config cfg{.hidden_size = 128, .intermediate_size = 384, .num_hidden_layers = 4,
                        .num_attention_heads = 4, .num_key_value_heads = 2, .vocab_size = 512,
                        .max_position_embeddings = 512};
    specdec::Weights weights = specdec::random_weights(cfg, /*seed=*/1, /*std_dev=*/0.25f);
    specdec::CpuModel target{cfg, weights};
    specdec::CpuModel draft{cfg, specdec::perturbed(cfg, weights, /*rel=*/0.05f, /*seed=*/2)};
};

inline void print_tokens(const char* label, const std::vector<int>& tokens) {
    std::printf("%-14s", label);
    for (int t : tokens) std::printf(" %d", t);
    std::printf("\n");
}

/// tau, target calls, time split and how often each draft position was accepted.
inline void print_stats(const char* label, const specdec::Generation& g) {
    double draft = 0, verify = 0, accept = 0, commit = 0;
    int drafted = 0;
    for (const auto& s : g.steps) {
        draft += s.t_draft, verify += s.t_verify, accept += s.t_accept, commit += s.t_commit;
        drafted += s.n_drafted;
    }
    std::printf("%-14s %3zu tokens, %3d target forwards, tau = %.2f, %d nodes drafted; "
                "time ms: draft %.1f verify %.1f accept %.1f commit %.1f\n",
                label, g.tokens.size(), g.n_target_calls(), g.tau(), drafted, 1e3 * draft, 1e3 * verify, 1e3 * accept,
                1e3 * commit);
    const auto at = g.accepted_at_depth();
    if (at.empty()) return;
    std::printf("%-14s acceptance per draft position:", "");
    for (std::size_t d = 0; d < at.size(); ++d) std::printf("  %zu: %.2f", d + 1, double(at[d]) / g.steps.size());
    std::printf("\n");
}

}  // namespace example
