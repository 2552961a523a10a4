// specdec/detail/methods/mcsd/target_initialised.hpp — improved MCSD's target-initialised candidates: a forest of seeds drawn from the target, and the lossy acceptor that keeps the best seed.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "../../core/concepts.hpp"
#include "../../core/error.hpp"
#include "../../core/sampling.hpp"
#include "../../core/tree.hpp"
#include "../../policies/acceptors.hpp"
#include "../../policies/tree_builders.hpp"
#include "mcsd_tree.hpp"

namespace specdec {

/// Coin node of the seeds' draws (stream kDraft): no tree node has this index.
constexpr std::uint32_t kSeedCoin = 0xFFFFFFFEu;

namespace detail {
/// Improved MCSD's target-initialised seeds (§3.1), each added to `tree` as a root; returns the roots'
/// node indices in order. Under sampling: up to n distinct tokens drawn from the target's law without
/// replacement (fewer when the law has fewer tokens). Under greedy decoding the law is the target's
/// softmax with its argmax strictly largest (AcceptResult::bonus_law): the law's n most likely tokens,
/// the argmax first, so one seed is exactly the greedy token (the paper's T = 0 runs take two, §4.2).
inline std::vector<int> add_seed_roots(Tree& tree, std::span<const float> law, int n, bool greedy, const StepRng& rng) {
    std::vector<int> roots;
    if (greedy) {
        for (int t : top_indices(law, n))
            if (roots.empty() || law[t] > 0.0f) roots.push_back(tree.add(t, -1, law[t], Draw::kGiven));
        return roots;
    }
    std::vector<float> left(law.begin(), law.end());
    for (int i = 0; i < n; ++i) {
        const int t = sample_index(left, rng.uniform(kSeedCoin, static_cast<std::uint32_t>(i)));
        roots.push_back(tree.add(t, -1, law[t], Draw::kGiven));
        left[t] = 0.0f;
        if (std::all_of(left.begin(), left.end(), [](float v) { return v <= 0.0f; })) break;
    }
    return roots;
}

/// The law a deferred bonus hands on under greedy decoding: the target's softmax at T = 1, with every
/// entry that rounding made equal to the argmax's lowered below it, so the ranking's first token is
/// exactly the greedy token (argmax of the logits, the lower index on a true tie).
inline std::vector<float> greedy_seed_law(std::span<const float> logits) {
    std::vector<float> law(logits.begin(), logits.end());
    softmax(law);
    const int y = argmax(logits);
    for (int i = 0; i < static_cast<int>(law.size()); ++i)
        if (i != y && law[i] >= law[y]) law[i] = std::nextafter(law[y], 0.0f);
    return law;
}
}  // namespace detail

/// Improved MCSD's target-initialised multi-candidate tree (§3.1), configuration (n_seeds, k_config...):
/// the paper's best is (2,4,3,1,1). The acceptor defers the bonus (LossyTargetInitialisedSampling), so a
/// step starts from the target's law at the next position (ctx.bonus_law): the builder draws n_seeds
/// distinct tokens from it (without replacement), makes each a root, and grows MCSD's k-config tree below
/// every root, one draft forward per depth over all of them; the target verifies the forest in one pass.
/// A step with a pending root (the first) grows the k-config below that root alone. The mask is
/// (seeds + drafts)², as §3.1 says. Under greedy decoding (T = 0) one seed, the target's argmax, keeps
/// the output exactly greedy; top_seeds_at_t0 takes the target's n_seeds most likely tokens instead, the
/// paper's T = 0 runs (§4.2, App. A.1.2 Table 4), and is lossy there too.
struct TargetInitialisedTree {
    int n_seeds = 2;                        // target-initialised roots per step (the paper: 2; 1 = plain MCSD)
    std::vector<int> k_config{4, 3, 1, 1};  // the draft tree below each root
    bool top_seeds_at_t0 = false;           // T = 0: false, one seed (exact); true, the n_seeds most likely (LOSSY)
    /// T = 0: how drafts are drawn from the drafter's softmax (any draw is exact under the greedy walk):
    /// without replacement as MCSD samples them, or its top-k, the usual greedy tree.
    DrawPolicy draw_at_t0 = DrawPolicy::kSampleWithoutReplacement;

    static constexpr bool draws_roots_from_bonus_law() { return true; }

    template <DrafterBase P>
    Tree build(P& proposer, int root_token, const StepContext& ctx) {
        static_assert(ScoresNodes<P>,
                      "specdec: TargetInitialisedTree needs a drafter that scores nodes (ScoresNodes: a small LM, GLIDE, EDD, "
                      "EAGLE/FSPAD): its roots are drawn from the target's bonus law, and a drafter that chooses its own "
                      "tokens (DraftsTokens: Max-Gram, prompt lookup, a cascade) drafts after a pending root, which such "
                      "a step does not have");
        const int V = proposer.vocab_size();
        detail::require_k_config(k_config, V, "TargetInitialisedTree");
        detail::require(n_seeds >= 1 && n_seeds <= V, "mcsd", [&] {
            return "TargetInitialisedTree: n_seeds = " + std::to_string(n_seeds) + ", must be in [1, " +
                   std::to_string(V) + "] (the vocabulary)";
        });
        const StepRng rng = ctx.rng.with_stream(RngStream::kDraft);
        Tree tree;
        std::vector<int> frontier;
        const bool greedy = ctx.sampling.greedy();
        if (ctx.bonus_law.empty()) frontier.push_back(tree.add_root(root_token));
        else frontier = detail::add_seed_roots(tree, ctx.bonus_law, greedy && !top_seeds_at_t0 ? 1 : n_seeds, greedy, rng);
        const DrawPolicy draw = greedy ? draw_at_t0 : DrawPolicy::kSampleWithoutReplacement;
        std::vector<float> q(V);
        const std::size_t depth = std::min<std::size_t>(k_config.size(), static_cast<std::size_t>(std::max(ctx.room, 0)));
        for (std::size_t d = 0; d < depth; ++d) {
            const Rows logits = proposer.propose(tree, frontier);
            const int first_new = tree.size();
            for (std::size_t j = 0; j < frontier.size(); ++j) {
                draft_probs(logits.row(static_cast<int>(j)), ctx.sampling, q);
                detail::add_children(tree, frontier[j], q, k_config[d], draw, rng);
            }
            frontier.resize(tree.size() - first_new);
            std::iota(frontier.begin(), frontier.end(), first_new);
        }
        return tree;
    }
};

/// Improved MCSD's verification of target-initialised candidates (§3.1) — LOSSY. Below each root it runs
/// MCSD's lossless multi-candidate walk (MultiDraftSampling without replacement), keeps the root whose
/// walk accepted the most drafts (the first such root on a tie) and defers the bonus: it returns the
/// target's law at the kept path's end (AcceptResult::bonus_law) for the next step's seeds. Choosing the
/// seed by its drafts' luck reweights it to p(x)·P(drafts accepted | x), normalised, so the output no
/// longer follows the target's law (the paper says so; tests/methods/mcsd measures the distance). With
/// one seed per step there is nothing to choose and the walk is exact. Under greedy decoding the walk
/// follows the target's argmax below each root and the law handed on is detail::greedy_seed_law: one
/// seed (the argmax) stays exactly greedy; a second seed that wins commits a token greedy would not.
/// Precondition (checked): `allow_lossy` set by the caller; under sampling each root's children sampled
/// from its q.
struct LossyTargetInitialisedSampling {
    bool allow_lossy = false;  // must be set to true: the output does not follow the target's distribution

    AcceptResult accept(const Tree& tree, Rows target_logits, const StepContext& ctx) const {
        detail::require(allow_lossy, "acceptor", [] {
            return std::string("LossyTargetInitialisedSampling is lossy (improved MCSD §3.1: keeping the seed whose "
                               "drafts were accepted longest reweights it, so the output no longer follows the "
                               "target's distribution); set allow_lossy = true to run it anyway, or use "
                               "MultiDraftSampling with McsdTree for MCSD's lossless tree");
        });
        AcceptResult best;
        std::vector<float> p;
        for (int r = 0; r < tree.size(); ++r) {
            if (tree[r].parent >= 0) continue;
            std::vector<int> path = MultiDraftSampling::descend(tree, target_logits, ctx, r, p,
                                                                "LossyTargetInitialisedSampling");
            if (path.size() > best.path.size()) {
                best.path = std::move(path);
                best.bonus_law = p;
            }
        }
        if (ctx.sampling.greedy()) best.bonus_law = detail::greedy_seed_law(target_logits.row(best.path.back()));
        return best;
    }
};

static_assert(TreeBuilder<TargetInitialisedTree, ModelProposer<CpuModel>>);
static_assert(Acceptor<LossyTargetInitialisedSampling>);
static_assert(draws_roots_from_bonus_law<TargetInitialisedTree>());

}  // namespace specdec
