// specdec/detail/policies/tree_builders.hpp — how a draft tree grows: nothing (autoregressive), a chain, a k-ary tree.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "../core/concepts.hpp"
#include "../core/error.hpp"
#include "proposers.hpp"
#include "../core/sampling.hpp"
#include "../core/tree.hpp"

namespace specdec {

/// How children are drawn from the draft distribution q of their parent.
enum class DrawPolicy {
    kTopK,                      // the k most likely tokens, deterministically (greedy trees)
    kSampleWithReplacement,     // k i.i.d. draws from q (SpecInfer; may repeat a token)
    kSampleWithoutReplacement,  // k draws, each from q with earlier draws removed (MCSD)
};

namespace detail {

/// Adds `k` children of `node` drawn from q by `policy`; sampled draws record q on the parent so the
/// acceptor can check its precondition and use the exact distribution.
inline void add_children(Tree& tree, int node, std::span<const float> q, int k, DrawPolicy policy, const StepRng& rng) {
    const int V = static_cast<int>(q.size());
    k = std::min(k, V);
    if (policy == DrawPolicy::kTopK) {
        for (int t : top_indices(q, k)) tree.add(t, node, q[t], Draw::kTopK);
        return;
    }
    tree.set_child_dist(node, q);
    std::vector<float> left(q.begin(), q.end());
    for (int i = 0; i < k; ++i) {
        const int t = sample_index(left, rng.uniform(static_cast<std::uint32_t>(node), static_cast<std::uint32_t>(i)));
        if (policy == DrawPolicy::kSampleWithReplacement) {
            tree.add(t, node, q[t], Draw::kSampledWithReplacement);
        } else {
            tree.add(t, node, q[t], Draw::kSampledWithoutReplacement);
            left[t] = 0.0f;
            if (std::all_of(left.begin(), left.end(), [](float v) { return v <= 0.0f; })) break;
        }
    }
}

/// Up to `n` tokens (and no more than the room left) from a token-drafting proposer, asking again while
/// it yields (a cascade level yields one review's worth per call). The proposer draws at the scope
/// after the builder's own.
template <DraftsTokens P>
Draft draft_tokens(P& proposer, int n, const StepContext& ctx) {
    n = std::min(n, ctx.room);
    const StepContext part = ctx.scoped(ctx.rng.scope + 1);
    Draft out;
    std::vector<int> after;
    while (static_cast<int>(out.size()) < n) {
        Draft more = proposer.draft(after, n - static_cast<int>(out.size()), part);
        if (more.empty()) break;
        more.resize(std::min<std::size_t>(more.size(), n - out.size()));
        for (DraftToken& t : more) {
            after.push_back(t.token);
            out.push_back(std::move(t));
        }
    }
    return out;
}

/// Appends a drafted token under `parent`, recording its law so the acceptor can check and use it.
/// Under sampling a deterministic token is recorded with q = one-hot: a draw from a point mass, which
/// speculative sampling accepts with probability p(x) and which keeps it lossless.
inline int add_drafted(Tree& tree, int parent, const DraftToken& t, const Sampling& sampling, int vocab) {
    require(t.token >= 0 && t.token < vocab, "proposer", [&] {
        return "drafted token id " + std::to_string(t.token) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")";
    });
    require(t.q.empty() || static_cast<int>(t.q.size()) == vocab, "proposer", [&] {
        return "drafted token " + std::to_string(t.token) + " carries a law q of " + std::to_string(t.q.size()) +
               " entries; the vocabulary has " + std::to_string(vocab);
    });
    const float qx = t.q.empty() ? 1.0f : t.q[t.token];
    if (sampling.greedy()) return tree.add(t.token, parent, qx, Draw::kTopK);
    if (t.sampled) {
        // The acceptor takes q on trust: accepting with probability min(1, p/q) is exact only for the
        // normalised law the token was really drawn from (docs/writing_a_policy.md).
        double mass = 0.0;
        for (float v : t.q) mass += v;
        require(!t.q.empty() && qx > 0.0f && std::abs(mass - 1.0) < 1e-3, "proposer", [&] {
            return "drafted token " + std::to_string(t.token) + " is marked sampled, so it must carry the law it was " +
                   "drawn from: q of " + std::to_string(vocab) + " entries summing to 1 with q[token] > 0; got " +
                   std::to_string(t.q.size()) + " entries summing to " + std::to_string(mass) +
                   (t.q.empty() ? std::string() : ", q[token] = " + std::to_string(qx)) +
                   " (a token chosen deterministically is marked sampled = false)";
        });
        tree.set_child_dist(parent, t.q);
    } else {
        std::vector<float> one_hot(vocab, 0.0f);
        one_hot[t.token] = 1.0f;
        tree.set_child_dist(parent, one_hot);
    }
    return tree.add(t.token, parent, t.sampled ? qx : 1.0f, Draw::kSampledWithReplacement);
}

}  // namespace detail

// For builder authors (docs/writing_a_policy.md): children drawn from a node's q at the documented
// coordinates, a token proposer's draft gathered up to n tokens, and a drafted token recorded with its law.
using detail::add_children;
using detail::add_drafted;
using detail::draft_tokens;

/// Drafts nothing: the tree is the pending root alone. With it the loop is autoregressive decoding.
struct RootOnly {
    template <Proposer P>
    Tree build(P&, int root_token, const StepContext&) {
        Tree t;
        t.add_root(root_token);
        return t;
    }
};

/// A k-ary token tree: k_config[d] children for every node at depth d (e.g. MCSD's (4,2,2,1): 4
/// children of the root, 2 of each of those, ...). One draft forward per depth over the whole frontier;
/// no deeper than the room left.
struct KAryTree {
    std::vector<int> k_config;
    DrawPolicy draw = DrawPolicy::kTopK;

    template <ScoresNodes P>
    Tree build(P& proposer, int root_token, const StepContext& ctx) {
        for (std::size_t d = 0; d < k_config.size(); ++d)
            detail::require(k_config[d] >= 1, "tree_builder", [&] {
                return "k_config[" + std::to_string(d) + "] = " + std::to_string(k_config[d]) + ", must be >= 1";
            });
        Tree tree;
        std::vector<int> frontier{tree.add_root(root_token)};
        std::vector<float> q(proposer.vocab_size());
        const StepRng rng = ctx.rng.with_stream(RngStream::kDraft);
        const std::size_t depth = std::min<std::size_t>(k_config.size(), static_cast<std::size_t>(std::max(ctx.room, 0)));
        for (std::size_t d = 0; d < depth; ++d) {
            const int k = k_config[d];
            const Rows logits = proposer.propose(tree, frontier);
            const int first_new = tree.size();
            for (std::size_t j = 0; j < frontier.size(); ++j) {
                draft_probs(logits.row(static_cast<int>(j)), ctx.sampling, q);
                detail::add_children(tree, frontier[j], q, k, draw, rng);
            }
            frontier.resize(tree.size() - first_new);
            std::iota(frontier.begin(), frontier.end(), first_new);
        }
        return tree;
    }
};

/// Vanilla speculative decoding's draft (Leviathan et al. 2023; Chen et al. 2023): gamma tokens in a
/// chain, the drafter's argmax under greedy decoding and a draw from q under sampling, which is what
/// SpeculativeSampling needs. A token-drafting proposer (a cascade) is asked for the gamma tokens and
/// their laws instead. Near the end of the context or of max_new_tokens the chain is cut to the room left.
struct Chain {
    int gamma = 4;

    template <Proposer P>
    Tree build(P& proposer, int root_token, const StepContext& ctx) {
        detail::require(gamma >= 0, "tree_builder", [&] { return "Chain: gamma must be >= 0, got " + std::to_string(gamma); });
        if constexpr (ScoresNodes<P>) {
            KAryTree k{std::vector<int>(std::max(0, std::min(gamma, ctx.room)), 1),
                       ctx.sampling.greedy() ? DrawPolicy::kTopK : DrawPolicy::kSampleWithReplacement};
            return k.build(proposer, root_token, ctx);
        } else {
            Tree tree;
            int last = tree.add_root(root_token);
            for (const DraftToken& t : detail::draft_tokens(proposer, gamma, ctx))
                last = detail::add_drafted(tree, last, t, ctx.sampling, proposer.vocab_size());
            return tree;
        }
    }
};

static_assert(TreeBuilder<RootOnly, NoProposer>);
static_assert(TreeBuilder<Chain, ModelProposer<CpuModel>>);
static_assert(TreeBuilder<KAryTree, ModelProposer<CpuModel>>);

}  // namespace specdec
