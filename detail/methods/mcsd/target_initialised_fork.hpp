// specdec/detail/methods/mcsd/target_initialised_fork.hpp — improved MCSD's full framework: chains started from target-drawn seeds, a fork, stopped early by a decision model.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "../../core/concepts.hpp"
#include "../../core/error.hpp"
#include "../../core/sampling.hpp"
#include "../../core/tree.hpp"
#include "../../policies/tree_builders.hpp"
#include "dynamic_fork.hpp"
#include "target_initialised.hpp"

namespace specdec {

/// Improved MCSD's framework (§3, §5, App. A.1): the three parts composed — target-initialised seeds
/// (§3.1), a fork of chains (§3.2's fork-shaped tree) and the decision model's early stop (§3.3). Each
/// step draws `width` distinct seeds from the target's law at the bonus position (ctx.bonus_law), and
/// below each seed one chain, one token sampled from q per depth, up to `max_depth`; `stop` may end
/// drafting before any depth. So the chains start from target tokens, as §5 says ("the fork-shaped token
/// tree produces only two candidate sequences" with two seeds), where DynamicFork's chains start from
/// the drafter's tokens below one pending root. Order is depth-major (seeds, then depth 1, ...): the
/// forest's mask is ForkMask(width, depth + 1)'s slice. The first step has a pending root and no law; it
/// grows DynamicFork's draft-initialised fork of `width` chains below it. LOSSY with two seeds or more:
/// verified only by LossyTargetInitialisedSampling, which refuses to run without allow_lossy.
template <class Stop = NoEarlyStop>
struct TargetInitialisedFork {
    int width = 2;      // W: seeds, one chain each (the paper keeps 2 for output quality, §4.1)
    int max_depth = 4;  // D: drafts below each seed (SD's gamma, App. A.1)
    Stop stop{};

    static constexpr bool draws_roots_from_bonus_law() { return true; }

    template <ScoresNodes P>
    Tree build(P& proposer, int root_token, const StepContext& ctx) {
        const int V = proposer.vocab_size();
        detail::require(width >= 1 && width <= V && max_depth >= 0, "mcsd", [&] {
            return "TargetInitialisedFork: width " + std::to_string(width) + ", max_depth " +
                   std::to_string(max_depth) + " (need 1 <= width <= the vocabulary of " + std::to_string(V) +
                   ", depth >= 0)";
        });
        if (ctx.bonus_law.empty())
            return DynamicFork<Stop>{.width = width, .max_depth = max_depth, .stop = stop}.build(proposer, root_token, ctx);
        const StepRng rng = ctx.rng.with_stream(RngStream::kDraft);
        Tree tree;
        // Under greedy decoding one seed, the target's argmax: the fork stays exactly greedy.
        const bool greedy = ctx.sampling.greedy();
        std::vector<int> frontier = detail::add_seed_roots(tree, ctx.bonus_law, greedy ? 1 : width, greedy, rng);
        std::vector<float> q(V);
        const int depth = std::min(max_depth, std::max(ctx.room, 0));
        for (int d = 0; d < depth; ++d) {
            const Rows logits = proposer.propose(tree, frontier);
            if (stop(logits, ctx.sampling)) break;
            for (std::size_t j = 0; j < frontier.size(); ++j) {
                draft_probs(logits.row(static_cast<int>(j)), ctx.sampling, q);
                const int child = tree.size();
                detail::add_children(tree, frontier[j], q, 1, DrawPolicy::kSampleWithoutReplacement, rng);
                frontier[j] = child;
            }
        }
        return tree;
    }
};

static_assert(TreeBuilder<TargetInitialisedFork<>, ModelProposer<CpuModel>>);
static_assert(TreeBuilder<TargetInitialisedFork<DecisionStop<CpuModel>>, ModelProposer<CpuModel>>);
static_assert(draws_roots_from_bonus_law<TargetInitialisedFork<>>());

}  // namespace specdec
