// specdec/detail/methods/mcsd/dynamic_fork.hpp — improved MCSD's dynamic configuration: a fork of W sampled chains, stopped early by a decision model.
// SPDX-License-Identifier: MIT
#pragma once

#include <numeric>
#include <string>
#include <vector>

#include "../../core/concepts.hpp"
#include "../../core/error.hpp"
#include "../../core/sampling.hpp"
#include "../../core/tree.hpp"
#include "../../policies/tree_builders.hpp"
#include "decision_model.hpp"

namespace specdec {

/// Drafts to the maximum depth (the fork's static form).
struct NoEarlyStop {
    template <class... Any>
    bool operator()(const Any&...) const { return false; }
};

/// Improved MCSD's early stop (§3.3): before each depth, the decision model scores every chain's next
/// draft — from the law q it will be drawn from (Type 2), or from the drafter's hidden state at the
/// node that produced q (Type 1: `drafter` must capture its last layer, capture_hidden) — and drafting
/// stops when every prediction is below `threshold`.
template <class Drafter>
struct DecisionStop {
    const DecisionModel* model = nullptr;
    const Drafter* drafter = nullptr;  // Type 1 only: the frontier's states are the last rows of its last forward
    float threshold = 0.4f;

    bool operator()(Rows frontier_logits, const Sampling& sampling) const {
        std::vector<float> predicted, q(frontier_logits.cols);
        const int F = frontier_logits.rows();
        if (model->config().input == DecisionInput::kDraftHidden) {
            const Rows h = drafter->hidden(0);
            for (int j = 0; j < F; ++j) predicted.push_back(model->predict(h.row(h.rows() - F + j)));
        } else {
            for (int j = 0; j < F; ++j) {
                draft_probs(frontier_logits.row(j), sampling, q);
                predicted.push_back(model->predict(law_features(q, model->config().top_k)));
            }
        }
        return stop_drafting(predicted, threshold);
    }
};

/// Improved MCSD's dynamic configuration (App. A.1): a fork of `width` chains — the root's children
/// sampled without replacement, then one sampled child per chain per depth — up to `max_depth`, in
/// depth-major order (ForkMask's order: the step's mask is the slice for the depth reached). `stop`
/// may end drafting before any depth. Verified by MultiDraftSampling: lossless, whatever `stop` says.
template <class Stop = NoEarlyStop>
struct DynamicFork {
    int width = 16;     // W: the paper matches it to MCSD's number of candidate sequences
    int max_depth = 4;  // D: the paper fixes it to SD's draft length
    Stop stop{};

    template <ScoresNodes P>
    Tree build(P& proposer, int root_token, const StepContext& ctx) {
        const int V = proposer.vocab_size();
        detail::require(width >= 1 && width <= V && max_depth >= 0, "mcsd", [&] {
            return "DynamicFork: width " + std::to_string(width) + ", max_depth " + std::to_string(max_depth) +
                   " (need 1 <= width <= the vocabulary of " + std::to_string(V) + ", depth >= 0)";
        });
        Tree tree;
        std::vector<int> frontier{tree.add_root(root_token)};
        std::vector<float> q(V);
        const StepRng rng = ctx.rng.with_stream(RngStream::kDraft);
        const int depth = std::min(max_depth, std::max(ctx.room, 0));
        for (int d = 0; d < depth; ++d) {
            const Rows logits = proposer.propose(tree, frontier);
            if (stop(logits, ctx.sampling)) break;
            const int first_new = tree.size();
            for (std::size_t j = 0; j < frontier.size(); ++j) {
                draft_probs(logits.row(static_cast<int>(j)), ctx.sampling, q);
                detail::add_children(tree, frontier[j], q, d == 0 ? width : 1, DrawPolicy::kSampleWithoutReplacement, rng);
            }
            frontier.resize(tree.size() - first_new);
            std::iota(frontier.begin(), frontier.end(), first_new);
        }
        return tree;
    }
};

static_assert(TreeBuilder<DynamicFork<>, ModelProposer<CpuModel>>);
static_assert(TreeBuilder<DynamicFork<DecisionStop<CpuModel>>, ModelProposer<CpuModel>>);

}  // namespace specdec
