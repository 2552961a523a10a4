// specdec/detail/policies/acceptors.hpp — walking a verified tree: which drafts the target keeps, and its next token.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "../core/concepts.hpp"
#include "../core/error.hpp"
#include "../core/sampling.hpp"
#include "../core/tree.hpp"

namespace specdec {

namespace detail {

// Every acceptor's error starts with the acceptor that was called, says what it needs, and names the
// acceptor to use instead: "[specdec.acceptor] <who> needs ...; got ...; use ...".

inline void require_single_root(const Tree& tree, const char* who) {
    int roots = 0;
    for (const Node& n : tree.nodes()) roots += n.parent < 0;
    require(!tree.empty() && tree[0].parent < 0 && roots == 1, "acceptor", [&] {
        return std::string(who) + " needs a tree with exactly one root at node 0 (the pending token), got " +
               std::to_string(roots) + " roots; the tree builder must hang every draft from the pending token (a "
               "forest of candidate roots needs an acceptor that chooses among them)";
    });
}

inline std::string draw_name(Draw d) {
    switch (d) {
        case Draw::kGiven: return "given";
        case Draw::kTopK: return "drawn by top-k";
        case Draw::kSampledWithReplacement: return "sampled with replacement";
        case Draw::kSampledWithoutReplacement: return "sampled without replacement";
    }
    return "?";
}

/// Whether every child of `node` was drawn at random from the q recorded on it, all the same way: the
/// precondition of speculative sampling over them (one child: SpeculativeSampling; siblings:
/// MultiDraftSampling).
inline bool children_sampled_from_q(const Tree& tree, int node, const std::vector<int>& kids) {
    if (kids.empty()) return true;
    const Draw d = tree[kids[0]].draw;
    if (!tree.has_child_dist(node) || (d != Draw::kSampledWithReplacement && d != Draw::kSampledWithoutReplacement))
        return false;
    return std::all_of(kids.begin(), kids.end(), [&](int c) { return tree[c].draw == d; });
}

/// Throws unless children_sampled_from_q, naming `who` (the acceptor called), the first offending child
/// and the acceptor that takes such children: SampleAndMatch (any tree, any temperature).
inline void require_children_sampled(const Tree& tree, int node, const std::vector<int>& kids, const char* who) {
    require(children_sampled_from_q(tree, node, kids), "acceptor", [&] {
        const auto sampled = [&](int c) {
            return tree[c].draw == Draw::kSampledWithReplacement || tree[c].draw == Draw::kSampledWithoutReplacement;
        };
        int bad = kids[0];  // the first child drawn deterministically, or drawn unlike the first
        for (int c : kids)
            if (!sampled(c) || tree[c].draw != tree[kids[0]].draw) {
                bad = c;
                break;
            }
        std::string what = "node " + std::to_string(bad) + " (child of node " + std::to_string(node) + ") was " +
                           draw_name(tree[bad].draw);
        if (sampled(bad) && tree[bad].draw != tree[kids[0]].draw)
            what += " beside node " + std::to_string(kids[0]) + " " + draw_name(tree[kids[0]].draw);
        if (tree.child_laws_mixed(node))
            what += ", and node " + std::to_string(node) + "'s children were recorded with more than one law q (a " +
                    "draft distribution recorded after children were added: two add_drafted candidates, two " +
                    "add_children calls), so they are not draws from one q";
        else if (!tree.has_child_dist(node))
            what += ", and node " + std::to_string(node) + " has no recorded q";
        return std::string(who) + " needs children sampled from their parent's recorded draft distribution q" +
               (kids.size() > 1 ? ", all siblings the same way" : "") + " (to be lossless at temperature > 0); " + what +
               "; use SampleAndMatch, lossless for any tree (deterministic top-k drafts included)";
    });
}

/// Under greedy decoding the processed target distribution is one-hot, so every acceptor reduces to
/// this walk: descend while a child holds the target's argmax.
inline AcceptResult greedy_walk(const Tree& tree, Rows logits) {
    AcceptResult r{{0}, 0};
    for (int node = 0;;) {
        const int y = argmax(logits.row(node));
        const std::vector<int> kids = tree.children(node);
        const auto hit = std::find_if(kids.begin(), kids.end(), [&](int c) { return tree[c].token == y; });
        if (hit == kids.end()) {
            r.bonus = y;
            return r;
        }
        r.path.push_back(node = *hit);
    }
}

/// Coin index of the final draw at a node; sibling coins use 0..k-1, and k < 2^31 (a tree's size is an
/// int), so the two never meet, whatever the vocabulary.
constexpr std::uint32_t kBonusCoin = 0xFFFFFFFFu;

}  // namespace detail

// For policy authors (docs/writing_a_policy.md): the greedy walk every acceptor reduces to at
// temperature 0, and the coin of the final draw at a node, `ctx.rng.uniform(node, kBonusCoin)`.
using detail::greedy_walk;
using detail::kBonusCoin;

/// Precondition: greedy decoding (temperature 0), and a target whose logits for a node are those its
/// own decode step would give (CpuModel on AVX-512 gives them bit for bit: tree_attention.hpp). Then it
/// is lossless for ANY tree: the output is the target's argmax chain token for token.
struct GreedyMatch {
    AcceptResult accept(const Tree& tree, Rows target_logits, const StepContext& ctx) const {
        detail::require(ctx.sampling.greedy(), "acceptor", [&] {
            return "GreedyMatch needs greedy decoding (temperature 0) to be lossless, got temperature " +
                   std::to_string(ctx.sampling.temperature) + "; at temperature > 0 use SampleAndMatch (any tree), "
                   "SpeculativeSampling (a chain of sampled drafts) or MultiDraftSampling (sampled siblings)";
        });
        detail::require_single_root(tree, "GreedyMatch");
        return detail::greedy_walk(tree, target_logits);
    }
};

/// Sample y from the processed target distribution at the current node, descend if a child holds y.
/// Precondition: none — lossless for any tree at any temperature, because every committed token is a
/// draw from the target itself; drafts only decide how many draws one forward yields.
struct SampleAndMatch {
    AcceptResult accept(const Tree& tree, Rows target_logits, const StepContext& ctx) const {
        detail::require_single_root(tree, "SampleAndMatch");
        if (ctx.sampling.greedy()) return detail::greedy_walk(tree, target_logits);
        std::vector<float> p(target_logits.cols);
        AcceptResult r{{0}, 0};
        for (int node = 0;;) {
            processed_probs(target_logits.row(node), ctx.sampling, p);
            const int y = sample_index(p, ctx.rng.uniform(static_cast<std::uint32_t>(node), detail::kBonusCoin));
            const std::vector<int> kids = tree.children(node);
            const auto hit = std::find_if(kids.begin(), kids.end(), [&](int c) { return tree[c].token == y; });
            if (hit == kids.end()) {
                r.bonus = y;
                return r;
            }
            r.path.push_back(node = *hit);
        }
    }
};

/// Multi-draft speculative sampling for sibling sets drawn from the parent's draft distribution q.
/// Siblings are tried in order: accept x with probability min(1, p(x)/q(x)); on rejection p becomes
/// norm(max(0, p - q)) and, for draws without replacement, q(x) is zeroed and q renormalised
/// (SpecInfer, Miao et al. 2024, for i.i.d. draws; MCSD, Yang et al. 2024, without replacement). When
/// every sibling is rejected the next token is drawn from the residual p.
/// Precondition (checked): under sampling every child was drawn at random from the q recorded on its
/// parent, all siblings the same way; a top-k child is an error, not a silent bias. Under greedy
/// decoding p is one-hot and the walk is GreedyMatch's, lossless for any tree.
struct MultiDraftSampling {
    AcceptResult accept(const Tree& tree, Rows target_logits, const StepContext& ctx) const {
        return walk(tree, target_logits, ctx, "MultiDraftSampling");
    }

    /// The walk, its errors naming `who`: the acceptor the caller called (SpeculativeSampling runs it
    /// for chains).
    static AcceptResult walk(const Tree& tree, Rows target_logits, const StepContext& ctx, const char* who) {
        detail::require_single_root(tree, who);
        if (ctx.sampling.greedy()) return detail::greedy_walk(tree, target_logits);
        std::vector<float> p(target_logits.cols);
        AcceptResult r{descend(tree, target_logits, ctx, 0, p, who), 0};
        r.bonus = sample_index(p, ctx.rng.uniform(static_cast<std::uint32_t>(r.path.back()), detail::kBonusCoin));
        return r;
    }

    /// The walk's descent from node `from` (a root) without its final draw: returns the accepted path,
    /// `from` first, and leaves in `p` (V) the law the next token is drawn from at the path's end — the
    /// residual after the rejected siblings, or the target's processed law (one-hot under greedy
    /// decoding, where the descent follows the argmax). Acceptors that treat the final draw otherwise
    /// (one that defers it: AcceptResult::bonus_law) or that compare several roots run this.
    static std::vector<int> descend(const Tree& tree, Rows target_logits, const StepContext& ctx, int from,
                                    std::vector<float>& p, const char* who) {
        const int V = target_logits.cols;
        p.resize(V);
        std::vector<float> q(V);
        std::vector<int> path{from};
        for (int node = from;;) {
            processed_probs(target_logits.row(node), ctx.sampling, p);
            const std::vector<int> kids = tree.children(node);
            int accepted = -1;
            if (ctx.sampling.greedy()) {
                const int y = argmax(target_logits.row(node));
                for (int c : kids)
                    if (tree[c].token == y) {
                        accepted = c;
                        break;
                    }
            } else if (!kids.empty()) {
                detail::require_children_sampled(tree, node, kids, who);
                const auto qs = tree.child_dist(node);
                q.assign(qs.begin(), qs.end());
                const bool without = tree[kids[0]].draw == Draw::kSampledWithoutReplacement;
                for (std::size_t i = 0; i < kids.size() && accepted < 0; ++i) {
                    const int x = tree[kids[i]].token;
                    const float u = ctx.rng.uniform(static_cast<std::uint32_t>(node), static_cast<std::uint32_t>(i));
                    // u < p/q, written without dividing so q(x) = 0 (impossible draw) cannot divide by 0.
                    if (u * q[x] < p[x]) {
                        accepted = kids[i];
                        break;
                    }
                    residual(p, q);
                    if (without) {
                        q[x] = 0.0f;
                        normalise(q);
                    }
                }
            }
            if (accepted < 0) return path;
            path.push_back(node = accepted);
        }
    }

private:
    static void normalise(std::vector<float>& v) {
        double s = 0.0;
        for (float x : v) s += x;
        if (s <= 0.0) return;
        const float inv = static_cast<float>(1.0 / s);
        for (float& x : v) x *= inv;
    }
    /// p <- norm(max(0, p - q)). If rounding leaves no mass (p == q, where a rejection has probability
    /// zero), p is kept.
    static void residual(std::vector<float>& p, const std::vector<float>& q) {
        std::vector<float> r(p.size());
        double s = 0.0;
        for (std::size_t i = 0; i < p.size(); ++i) s += (r[i] = std::max(0.0f, p[i] - q[i]));
        if (s <= 0.0) return;
        const float inv = static_cast<float>(1.0 / s);
        for (std::size_t i = 0; i < p.size(); ++i) p[i] = r[i] * inv;
    }
};

/// Speculative sampling for a chain of drafts (Leviathan et al. 2023, Alg. 1; Chen et al. 2023): accept
/// x with probability min(1, p(x)/q(x)), else resample from norm(max(0, p - q)).
/// Precondition (checked): the tree is a chain (at most one child per node) whose tokens were sampled
/// from the recorded q under sampling — exactly MultiDraftSampling with one sibling.
struct SpeculativeSampling {
    AcceptResult accept(const Tree& tree, Rows target_logits, const StepContext& ctx) const {
        for (int i = 0; i < tree.size(); ++i) {
            const auto kids = tree.children(i);
            // Which acceptor takes this tree: sampled siblings are MultiDraftSampling's, anything else
            // (top-k siblings: a top-k tree, CAPE) SampleAndMatch's.
            detail::require(kids.size() <= 1, "acceptor", [&] {
                const bool sampled = detail::children_sampled_from_q(tree, i, kids);
                return "SpeculativeSampling needs a chain (at most one child per node), but node " + std::to_string(i) +
                       " has " + std::to_string(kids.size()) + " children, " + detail::draw_name(tree[kids[0]].draw) +
                       "; for this tree use " +
                       (sampled ? "MultiDraftSampling (siblings sampled from their parent's q)"
                                : "SampleAndMatch (any tree; MultiDraftSampling takes only siblings sampled from q)");
            });
        }
        return MultiDraftSampling::walk(tree, target_logits, ctx, "SpeculativeSampling");
    }
};

static_assert(Acceptor<GreedyMatch>);
static_assert(Acceptor<SampleAndMatch>);
static_assert(Acceptor<MultiDraftSampling>);
static_assert(Acceptor<SpeculativeSampling>);

}  // namespace specdec
