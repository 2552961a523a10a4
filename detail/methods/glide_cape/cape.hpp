// specdec/detail/methods/glide_cape/cape.hpp — a draft chain with extra candidates beside it: GLIDE's confidence-aware
// proposal expansion (CAPE), its fixed-size ablation, and CS Drafting's tree variant.
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

namespace specdec {

/// How many extra candidates a chain position gets for the drafter's top-1 confidence p there:
/// sizes[i] for p in (upper[i-1], upper[i]]. The default is CAPE's S(p) = 7, 5, 3, 1 for p in
/// (0, .3], (.3, .6], (.6, .8], (.8, 1] (GLIDE §4.2).
struct ExpansionSizes {
    std::vector<float> upper{0.3f, 0.6f, 0.8f, 1.0f};
    std::vector<int> sizes{7, 5, 3, 1};

    /// The same number everywhere: GLIDE's ablation (4, §5) and CS Drafting's tree (8 children of each
    /// lead node = the chain's own token + 7, App. B).
    static ExpansionSizes fixed(int n) { return {{1.0f}, {n}}; }

    int operator()(float p) const {
        for (std::size_t i = 0; i < upper.size(); ++i)
            if (p <= upper[i]) return sizes[i];
        return sizes.back();  // p rounded above the last bound
    }

    void validate() const {
        detail::require(!upper.empty() && upper.size() == sizes.size(), "tree_builder", [&] {
            return "ExpansionSizes: " + std::to_string(upper.size()) + " confidence bounds for " +
                   std::to_string(sizes.size()) + " sizes (need one size per interval, at least one)";
        });
        for (std::size_t i = 0; i < upper.size(); ++i) {
            detail::require(sizes[i] >= 0, "tree_builder", [&] {
                return "ExpansionSizes: sizes[" + std::to_string(i) + "] = " + std::to_string(sizes[i]) + ", must be >= 0";
            });
            detail::require(i == 0 || upper[i] > upper[i - 1], "tree_builder", [&] {
                return "ExpansionSizes: bounds must increase, upper[" + std::to_string(i) + "] = " +
                       std::to_string(upper[i]) + " after " + std::to_string(upper[i - 1]);
            });
        }
    }
};

/// A chain of `gamma` drafts, the drafter's argmax at each position (or a token drafter's own choices,
/// CS Drafting), plus at each position i the next sizes(p_i) most likely tokens of the drafter's
/// distribution there as siblings of the chain token: leaves that are not extended (GLIDE §4.2, CAPE).
///
/// Node order is the paper's linearisation: root, the chain x_1..x_gamma, then the expansions by
/// position. Each node sees the committed text, its ancestors and itself at position cache_len + depth,
/// so an expansion at position i sees x_1..x_{i-1} and itself at position i — the tree mask of the
/// engine *is* CAPE's mask (mask_ij kept iff j <= gamma and pos(i) > j, or i = j; tests/test_cape.cpp
/// checks the two agree).
///
/// At most `max_drafts` nodes besides the root are verified (32 in the paper, whose overflow rule is
/// unstated). Ours: chain tokens always stay; expansions are ranked by the drafter's estimate that the
/// target reaches and picks them, prod_{j<i} q_j(x_j) * q_i(y), and the lowest go first.
///
/// Lossless with GreedyMatch at T = 0, and with SampleAndMatch at T > 0: the tree is a function of
/// the text (and of the drafter's own coins), never of the target's, so drawing each token from the
/// target and descending where a child matches is the target's own sampling.
struct ExpandedChain {
    int gamma = 5;
    ExpansionSizes sizes{};
    int max_drafts = 32;

    template <Proposer P>
    Tree build(P& proposer, int root_token, const StepContext& ctx) {
        detail::require(gamma >= 1 && gamma <= max_drafts, "tree_builder", [&] {
            return "ExpandedChain: gamma = " + std::to_string(gamma) + " must be in [1, max_drafts = " +
                   std::to_string(max_drafts) + "]";
        });
        sizes.validate();
        // The chain, cut to the room left near the end of the context or of max_new_tokens; expansions
        // sit beside it, no deeper.
        const int length = std::max(0, std::min(gamma, ctx.room));
        Tree tree;
        std::vector<int> chain{tree.add_root(root_token)};  // chain[i] = node at position i (0 = root)
        std::vector<std::vector<float>> q;                  // q[i] = drafter's law at position i + 1
        if constexpr (ScoresNodes<P>) {
            for (int i = 0; i < length; ++i) {
                const int last = chain.back();
                const Rows logits = proposer.propose(tree, std::span<const int>(&last, 1));
                q.emplace_back(proposer.vocab_size());
                draft_probs(logits.row(0), ctx.sampling, q.back());
                const int x = argmax(q.back());
                chain.push_back(tree.add(x, last, q.back()[x], Draw::kTopK));
            }
        } else {
            for (DraftToken& t : detail::draft_tokens(proposer, length, ctx)) {
                chain.push_back(detail::add_drafted(tree, chain.back(), t, ctx.sampling, proposer.vocab_size()));
                q.push_back(std::move(t.q));
            }
        }

        struct Candidate {
            int position;  // 1-based chain position it stands beside
            int token;
            float q;
            double value;  // estimated chance the target reaches and picks it
        };
        std::vector<Candidate> cands;
        double reach = 1.0;
        for (std::size_t i = 0; i < q.size(); ++i) {
            const std::vector<float>& qi = q[i];
            const int x = tree[chain[i + 1]].token;
            if (!qi.empty()) {
                const int k = sizes(*std::max_element(qi.begin(), qi.end()));
                int added = 0;
                for (int t : detail::top_indices(qi, k + 1)) {  // one more: the chain's own token is among them
                    if (added == k) break;
                    if (t == x) continue;
                    cands.push_back({static_cast<int>(i) + 1, t, qi[t], reach * qi[t]});
                    ++added;
                }
                reach *= qi[x];
            }
        }
        const std::size_t slots = static_cast<std::size_t>(max_drafts) - (chain.size() - 1);
        if (cands.size() > slots) {
            std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) { return a.value > b.value; });
            cands.resize(slots);
            std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
                return a.position < b.position || (a.position == b.position && a.q > b.q);
            });
        }
        for (const Candidate& c : cands) tree.add(c.token, chain[c.position - 1], c.q, Draw::kTopK);
        return tree;
    }
};

}  // namespace specdec
