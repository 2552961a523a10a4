// specdec/detail/methods/edd_pct/pct.hpp — the Pruned Candidate Tree: a draft tree whose width and depth
// follow the expected time gain of each node (EDD+PCT, §3.2), and the forward costs s_d, s_t it needs.
// SPDX-License-Identifier: MIT
#pragma once

// PCT, §3.2. Drafting step j pays s_d and saves s_t when its token is accepted, which happens with
// probability p_j; its expected time change is (1 - p_j)(s_t + s_d) + p_j s_d - s_t = s_d - p_j s_t
// (Eq. 5), a loss unless p_j >= s_d/s_t. The draft confidences are calibrated (ECE 0.019, Fig. 3b),
// so p_j ~ prod_{i<=j} c_i, the product of the drafter's probabilities along the path from the root.
// Construction (Fig. 4, "Implementation Details"):
//   1. from the root, every expandable node of the last layer gets its top-k children (k = 5, App. B);
//   2. a node whose path product is < s_d/s_t stays in the tree but is not expandable;
//   3. stop when no node is expandable or the depth reaches the maximum (10, App. B);
//   4. remove leaves whose path product is < a leaf threshold (0.01, App. B);
//   5. the target verifies the flattened tree with a tree mask (the engine's TreeVerifier).
// One drafter forward per depth, over all expandable nodes of that depth at once.
//
// Composition: PCT over any ScoresNodes proposer (a ModelProposer, the EDD drafter), TreeVerifier,
// GreedyMatch (the paper's acceptance, §3.2) or SampleAndMatch at T > 0: the tree is a function of the
// text and the drafter, never of the target, so drawing each token from the target and descending
// where a child holds it is the target's own sampling, for top-k (deterministic) children too.

#include <algorithm>
#include <chrono>
#include <cmath>
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

/// What decides whether a node is expanded.
enum class PctPrune {
    kPathProduct,      // PCT: the path product of confidences, p_j ~ prod c_i, against s_d/s_t (Eq. 5)
    kTokenConfidence,  // Table 3's "w/o expected time gain": the node's own confidence c_j instead
};

/// The Pruned Candidate Tree builder (EDD+PCT, §3.2 and App. B). `expand_threshold` is s_d/s_t of
/// the machine at hand: measure it (measure_forward_costs) and pass it in; it has no default.
struct PrunedCandidateTree {
    float expand_threshold = 0.0f;   // s_d/s_t, in (0, 1]: a node with path product below it is not expanded
    float leaf_threshold = 0.01f;    // in (0, 1]: leaves with path product below it are removed (App. B: 0.01)
    int width = 5;                   // k: children of each expanded node, the drafter's top-k (App. B: 5)
    int max_depth = 10;              // deepest draft (App. B: 10)
    int max_drafts = 128;            // nodes besides the root, a bound the paper does not state: when a depth
                                     // would pass it, its children with the highest path products are kept,
                                     // so trees fit the models' tree buffers (ModelOptions::max_tree_nodes)
    PctPrune prune = PctPrune::kPathProduct;
    bool remove_leaves = true;       // false: Table 3's "w/o remove leaf nodes"

    /// Throws `[specdec.pct]` naming the field and value.
    void validate() const {
        const auto unit = [](float v, const char* field, const char* hint) {
            detail::require(std::isfinite(v) && v > 0.0f && v <= 1.0f, "pct", [&] {
                return std::string(field) + " = " + std::to_string(v) + " is outside (0, 1]" + hint;
            });
        };
        unit(expand_threshold, "expand_threshold",
             " (it is s_d/s_t, the drafter's forward time over the target's: measure both on this machine with "
             "measure_forward_costs; above 1 no draft pays for itself)");
        unit(leaf_threshold, "leaf_threshold", "");
        detail::require(width >= 1, "pct", [&] { return "width = " + std::to_string(width) + ", must be >= 1"; });
        detail::require(max_depth >= 1, "pct", [&] { return "max_depth = " + std::to_string(max_depth) + ", must be >= 1"; });
        detail::require(max_drafts >= 1, "pct",
                        [&] { return "max_drafts = " + std::to_string(max_drafts) + ", must be >= 1"; });
    }

    template <ScoresNodes P>
    Tree build(P& proposer, int root_token, const StepContext& ctx) const {
        validate();
        struct Child {
            int parent;
            int token;
            float confidence;  // c: the drafter's probability of the token (draft_probs under ctx.sampling)
            double product;    // p ~ prod c along the path from the root (the root's is 1)
        };
        Tree tree;
        std::vector<double> product{1.0};                // per node
        std::vector<int> frontier{tree.add_root(root_token)};  // the expandable nodes of the last depth
        const int V = proposer.vocab_size();
        std::vector<float> q(V);
        std::vector<Child> children;
        const int deepest = std::min(max_depth, ctx.room);  // the room left near the context's end
        for (int depth = 1; depth <= deepest && !frontier.empty() && tree.size() - 1 < max_drafts; ++depth) {
            const Rows logits = proposer.propose(tree, frontier);
            children.clear();
            for (std::size_t j = 0; j < frontier.size(); ++j) {
                draft_probs(logits.row(static_cast<int>(j)), ctx.sampling, q);
                for (int t : detail::top_indices(q, width))
                    children.push_back({frontier[j], t, q[t], product[frontier[j]] * q[t]});
            }
            keep_most_valuable(children, static_cast<std::size_t>(max_drafts - (tree.size() - 1)));
            frontier.clear();
            for (const Child& c : children) {
                const int node = tree.add(c.token, c.parent, c.confidence, Draw::kTopK);
                product.push_back(c.product);
                const double value = prune == PctPrune::kPathProduct ? c.product : double(c.confidence);
                if (depth < deepest && value >= expand_threshold) frontier.push_back(node);
            }
        }
        if (!remove_leaves) return tree;
        return pruned(tree, leaves_removed(tree, product, leaf_threshold));
    }

private:
    /// Keeps at most `room` of a depth's children, those with the highest path products, in their order.
    template <class Child>
    static void keep_most_valuable(std::vector<Child>& children, std::size_t room) {
        if (children.size() <= room) return;
        std::vector<double> products;
        for (const Child& c : children) products.push_back(c.product);
        std::vector<int> rank = detail::top_indices(products, static_cast<int>(room));
        std::sort(rank.begin(), rank.end());
        std::vector<Child> kept;
        for (int r : rank) kept.push_back(children[static_cast<std::size_t>(r)]);
        children = std::move(kept);
    }

    /// Keep flags after removing every leaf whose path product is below `threshold`, repeatedly: a
    /// node whose children all went is a leaf too (PCT, §3.2: "we remove leaf nodes whose overall
    /// acceptance confidence is below a given threshold"). Children follow their parents, so one sweep
    /// from the last node reaches the fixed point. With the path product and a leaf threshold at most
    /// s_d/s_t every expanded node is above it and the sweep removes leaves only; with the token
    /// confidence ablation an expanded node can fall below it and go with its subtree.
    static std::vector<std::uint8_t> leaves_removed(const Tree& tree, const std::vector<double>& product, float threshold) {
        std::vector<std::uint8_t> keep(tree.size(), 0), has_kept_child(tree.size(), 0);
        for (int i = tree.size() - 1; i >= 0; --i) {
            keep[i] = tree[i].parent < 0 || has_kept_child[i] || product[i] >= threshold;
            if (keep[i] && tree[i].parent >= 0) has_kept_child[tree[i].parent] = 1;
        }
        return keep;
    }
};

// ---------------------------------------------------------------------------------------------------
// s_d and s_t on the machine at hand

/// Median seconds of one forward of each model (the paper's s_t and s_d, App. B: 29.8 ms and 1.1 ms
/// for LLaMA2-7B and its one-layer EDD on an A6000).
struct ForwardCosts {
    double target_seconds = 0.0;  // s_t
    double draft_seconds = 0.0;   // s_d
    /// s_d/s_t: PCT's expand_threshold.
    float ratio() const { return static_cast<float>(draft_seconds / target_seconds); }
};

/// How the forwards are timed: after `context` committed tokens, `repeats` forwards of a tree of
/// `target_nodes` (resp. `draft_nodes`) nodes in a chain, the median kept. One node is a decode step,
/// the paper's measure; a target that verifies trees of N nodes may be timed at N.
struct CostProbe {
    int context = 64;
    int target_nodes = 1;
    int draft_nodes = 1;
    int repeats = 21;
};

namespace detail {

/// Median seconds of `probe.repeats` forwards of `nodes` chained tokens over `probe.context` committed
/// ones; leaves the model reset.
template <LanguageModel M>
double median_forward_seconds(M& model, int nodes, const CostProbe& probe) {
    const int V = model.vocab_size();
    std::vector<int> text(static_cast<std::size_t>(probe.context + nodes));
    for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<int>((7 * i + 3) % static_cast<std::size_t>(V));
    model.reset();
    const std::span<const int> all(text);
    prefill(model, all.first(static_cast<std::size_t>(probe.context)));
    const Tree tree = Tree::chain(all.subspan(static_cast<std::size_t>(probe.context)));
    model.forward(tree, 0);  // warm-up: scratch buffers, caches
    std::vector<double> seconds;
    for (int r = 0; r < probe.repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        model.forward(tree, 0);
        seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    model.reset();
    std::nth_element(seconds.begin(), seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 2), seconds.end());
    return seconds[seconds.size() / 2];
}

}  // namespace detail

/// Times a target and a drafter model as CostProbe says; both are left reset. PCT's threshold is
/// `measure_forward_costs(target, draft).ratio()`.
template <LanguageModel Target, LanguageModel Draft>
ForwardCosts measure_forward_costs(Target& target, Draft& draft, const CostProbe& probe = {}) {
    const auto check = [&](int value, const char* field, int lowest) {
        detail::require(value >= lowest, "pct", [&] {
            return std::string("CostProbe::") + field + " = " + std::to_string(value) + ", must be >= " + std::to_string(lowest);
        });
    };
    check(probe.context, "context", 0);
    check(probe.target_nodes, "target_nodes", 1);
    check(probe.draft_nodes, "draft_nodes", 1);
    check(probe.repeats, "repeats", 1);
    const auto fits = [&](int context_size, int nodes, const char* who) {
        detail::require(probe.context + nodes <= context_size, "pct", [&] {
            return std::string("CostProbe: context ") + std::to_string(probe.context) + " + " + std::to_string(nodes) +
                   " nodes exceeds the " + who + "'s context of " + std::to_string(context_size) + " tokens";
        });
    };
    fits(target.context_size(), probe.target_nodes, "target");
    fits(draft.context_size(), probe.draft_nodes, "drafter");
    return {.target_seconds = detail::median_forward_seconds(target, probe.target_nodes, probe),
            .draft_seconds = detail::median_forward_seconds(draft, probe.draft_nodes, probe)};
}

}  // namespace specdec
