// specdec/detail/methods/eagle_fspad/eagle2_tree.hpp — EAGLE-2's dynamic draft tree: expand the most
// probable paths depth by depth, then keep the most probable nodes overall (the tree FSPAD verifies).
// SPDX-License-Identifier: MIT
#pragma once

// EAGLE-2 (Li et al. 2024, "Dynamic Draft Trees"), as FSPAD uses it ("Preliminaries": "by applying a
// top-k operation to all tokens after the draft model inference, we can effectively construct a valid
// token tree while limiting the total number of tokens"). A node's value is its joint probability,
// the product of the drafter's probabilities along its path from the root (the root's is 1).
//   1. expansion: the root, then at each later depth the top_k nodes of the depth before by joint
//      probability, get one drafter forward together; each proposes its top_k tokens as children;
//   2. after `depth` forwards, rerank: of all the nodes proposed, the total_tokens - 1 with the highest
//      joint probabilities, with the root, are the tree the target verifies.
// A child's joint probability never exceeds its parent's and ties go to the node drafted first, so a
// parent always outranks its children and the kept nodes are closed under ancestors. The verified
// tree lists them in drafting order (depth by depth), as EAGLE-2 sorts its kept indices.
//
// Counting, from the EAGLE-2 code (SafeAILab/EAGLE, cnets.py `topK_genrate`): `total_token` counts
// the root (it keeps total_token - 1 drafts and prepends the root), and its `depth` counts the loop's
// forwards after the root's, so depth = 5 drafts 6 levels. Here `depth` is the deepest draft level,
// the number of drafter forwards per step: 6 is the code's 5, and the "draft tree depth of 6" that
// EDD's App. A quotes from the EAGLE-2 paper. Defaults: the code's evaluation settings total_token = 60,
// depth 5 (ours 6), top_k = 10; FSPAD runs 60 candidate tokens and, in Table 2, halves "the total
// number of tokens and the top k" (half_budget()).
//
// Only the expanded nodes are shown to the drafter (it scores top_k nodes per depth, as EAGLE-2's
// drafter does); the candidates that were never expanded join the verified tree unscored. The
// verified tree therefore differs from the scored one (StepOutcome): drafters match the accepted
// path by its tokens, and an accepted unscored leaf is the next step's catch-up.
//
// Composition: any ScoresNodes proposer (a ModelProposer, the EAGLE/FSPAD feature drafter),
// TreeVerifier, GreedyMatch at T = 0, SampleAndMatch at T > 0. The children are the drafter's top-k,
// not draws, so the speculative-sampling acceptors do not apply (MultiDraftSampling refuses them);
// the tree depends on the text and the drafter only, never on the target, so drawing each token from
// the target and descending where a child holds it is the target's own sampling. EAGLE's code
// accepts a top-k candidate x with probability p(x) (q = 1, a point mass), else zeroes p(x) and
// renormalises: the same law.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../../core/concepts.hpp"
#include "../../core/error.hpp"
#include "../../core/sampling.hpp"
#include "../../core/tree.hpp"
#include "../../policies/proposers.hpp"

namespace specdec {

/// The EAGLE-2 dynamic tree builder. Fields as EAGLE-2's code names them; see the file's head for
/// how each counts.
struct Eagle2Tree {
    int total_tokens = 60;  // nodes the target verifies, the root included (EAGLE-2's total_token)
    int depth = 6;          // deepest draft = drafter forwards per step (EAGLE-2's depth = 5, plus the root's)
    int top_k = 10;         // nodes expanded per depth, and children proposed by each (EAGLE-2's top_k)

    /// FSPAD's Table 2 budget: half the total tokens and half the top-k, the same depth.
    static constexpr Eagle2Tree half_budget() { return {.total_tokens = 30, .depth = 6, .top_k = 5}; }

    /// Throws `[specdec.eagle2]` naming the field and value; `vocab` is the drafter's vocabulary.
    void validate(int vocab) const {
        detail::require(total_tokens >= 1, "eagle2", [&] {
            return "total_tokens = " + std::to_string(total_tokens) +
                   ", must be >= 1 (it counts the root: 1 verifies the root alone, 60 is EAGLE-2's default)";
        });
        detail::require(depth >= 1, "eagle2", [&] { return "depth = " + std::to_string(depth) + ", must be >= 1"; });
        detail::require(top_k >= 1, "eagle2", [&] { return "top_k = " + std::to_string(top_k) + ", must be >= 1"; });
        detail::require(top_k <= vocab, "eagle2", [&] {
            return "top_k = " + std::to_string(top_k) + " exceeds the drafter's vocabulary of " + std::to_string(vocab) +
                   " tokens";
        });
    }

    template <ScoresNodes P>
    Tree build(P& proposer, int root_token, const StepContext& ctx) const {
        validate(proposer.vocab_size());
        Tree all;     // the root and every candidate, in drafting order
        Tree scored;  // what the drafter sees: the root and the expanded candidates
        all.add_root(root_token);
        scored.add_root(root_token);
        std::vector<double> joint{1.0};  // per node of `all`: the product of probabilities from the root
        std::vector<int> seen_as{0};     // per node of `all`: its node in `scored`, -1 if never expanded
        std::vector<int> expanding{0};   // nodes of `all` the next forward expands
        std::vector<int> asked;          // the same, as nodes of `scored`
        std::vector<float> q(static_cast<std::size_t>(proposer.vocab_size()));
        const int deepest = total_tokens > 1 ? std::min(depth, ctx.room) : 0;  // the room left near the context's end
        for (int d = 1; d <= deepest; ++d) {
            asked.clear();
            for (int e : expanding) asked.push_back(seen_as[static_cast<std::size_t>(e)]);
            const Rows logits = proposer.propose(scored, asked);
            const int first = all.size();
            for (std::size_t j = 0; j < expanding.size(); ++j) {
                const int parent = expanding[j];
                draft_probs(logits.row(static_cast<int>(j)), ctx.sampling, q);
                for (int t : detail::top_indices(q, top_k)) {
                    all.add(t, parent, q[t], Draw::kTopK);
                    // q <= 1, so a child never outranks its parent (processed q can round above 1).
                    joint.push_back(joint[static_cast<std::size_t>(parent)] * std::min(q[t], 1.0f));
                    seen_as.push_back(-1);
                }
            }
            if (d == deepest) break;
            // Expansion: the newest depth's top_k by joint probability, over the whole depth.
            expanding = detail::top_indices(std::span<const double>(joint).subspan(static_cast<std::size_t>(first)), top_k);
            for (int& e : expanding) {
                e += first;
                const Node& n = all[e];
                seen_as[static_cast<std::size_t>(e)] =
                    scored.add(n.token, seen_as[static_cast<std::size_t>(n.parent)], n.draft_prob, Draw::kTopK);
            }
        }
        // Rerank: the total_tokens - 1 candidates of highest joint probability. Ties go to the lower
        // index, drafted first, and a parent precedes its children with a joint probability at least
        // theirs, so a parent always ranks before its children and the kept set is closed under
        // ancestors (pruned() checks it).
        std::vector<std::uint8_t> keep(static_cast<std::size_t>(all.size()), 0);
        keep[0] = 1;
        for (int c : detail::top_indices(std::span<const double>(joint).subspan(1), total_tokens - 1))
            keep[static_cast<std::size_t>(c) + 1] = 1;
        return pruned(all, keep);
    }
};

static_assert(TreeBuilder<Eagle2Tree, ModelProposer<CpuModel>>);

}  // namespace specdec
