// specdec/detail/policies/padded_vocab.hpp — a drafter whose vocabulary is a prefix of the target's, padded to the target's V.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "../core/concepts.hpp"
#include "../core/error.hpp"
#include "../core/tree.hpp"

namespace specdec {

/// Wraps a node-scoring drafter of vocabulary Vd so that it speaks for a target of vocabulary V > Vd
/// whose first Vd ids mean the same pieces (check_vocab_compatible, io/vocab_compat.hpp, says so):
///  - its logits rows are padded with -inf up to V: q is 0 on the target's tail, so the drafter never
///    proposes a tail id, and speculative sampling's residual norm(max(0, p - q)) carries the target's
///    whole tail mass — the output law is exactly the target's (Leviathan et al. 2023, §2.3);
///  - a tail id the target emitted reaches the drafter's input as `substitute` (an id the drafter
///    embeds): only its later proposals change, never what is accepted.
/// Everything else (start, observe, the calls it counts, its context) is the inner drafter's.
template <ScoresNodes P>
class PaddedVocabProposer {
public:
    PaddedVocabProposer(P& inner, int target_vocab_size, int substitute = 0)
        : inner_(&inner), V_(target_vocab_size), Vd_(inner.vocab_size()), substitute_(substitute) {
        detail::require(Vd_ > 0 && Vd_ <= V_, "proposer", [&] {
            return "PaddedVocabProposer: the drafter's vocabulary of " + std::to_string(Vd_) +
                   " must be > 0 and at most the target's " + std::to_string(V_);
        });
        detail::require(substitute_ >= 0 && substitute_ < Vd_, "proposer", [&] {
            return "PaddedVocabProposer: substitute id " + std::to_string(substitute_) +
                   " is outside the drafter's vocabulary [0, " + std::to_string(Vd_) + ")";
        });
    }

    int vocab_size() const { return V_; }

    void start(std::span<const int> prompt) {
        std::vector<int> mapped(prompt.begin(), prompt.end());
        for (int& t : mapped) t = map(t);
        inner_->start(mapped);
    }

    Rows propose(const Tree& tree, std::span<const int> nodes) {
        const Rows rows = inner_->propose(mapped_tree(tree), nodes);
        out_.assign(static_cast<std::size_t>(rows.rows()) * V_, -INFINITY);
        for (int r = 0; r < rows.rows(); ++r)
            std::copy_n(rows.row(r).begin(), Vd_, out_.begin() + static_cast<std::ptrdiff_t>(r) * V_);
        return Rows{out_, V_};
    }

    void observe(const StepOutcome& outcome) {
        const Tree& mapped = mapped_tree(outcome.tree);
        inner_->observe(StepOutcome{mapped, outcome.path, map(outcome.next_root)});
    }

    long n_calls() const
        requires requires(const P& p) { p.n_calls(); }
    {
        return inner_->n_calls();
    }
    auto usage() const
        requires requires(const P& p) { p.usage(); }
    {
        return inner_->usage();
    }
    auto drafter_contexts() const
        requires requires(const P& p) { p.drafter_contexts(); }
    {
        return inner_->drafter_contexts();
    }

private:
    int map(int token) const { return token >= Vd_ ? substitute_ : token; }

    /// `tree` itself when every token is the drafter's, else a copy with tail ids substituted.
    const Tree& mapped_tree(const Tree& tree) {
        bool tail = false;
        for (int i = 0; i < tree.size() && !tail; ++i) tail = tree[i].token >= Vd_;
        if (!tail) return tree;
        std::vector<Node> nodes(tree.size());
        for (int i = 0; i < tree.size(); ++i) {
            nodes[i] = tree[i];
            nodes[i].token = map(nodes[i].token);
        }
        mapped_ = Tree::from_nodes(nodes);
        return mapped_;
    }

    P* inner_;
    int V_ = 0, Vd_ = 0, substitute_ = 0;
    Tree mapped_;             // the last tree with tail ids substituted
    std::vector<float> out_;  // (nodes, V)
};

}  // namespace specdec
