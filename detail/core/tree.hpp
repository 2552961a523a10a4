// specdec/detail/core/tree.hpp — a token tree in topological order.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiled.hpp"
#include "error.hpp"

namespace specdec {

/// How a node's token was chosen. Acceptors check it: speculative sampling is lossless only for
/// tokens drawn at random from the recorded draft distribution q of their parent.
enum class Draw : std::uint8_t {
    kGiven,                      // known token: a root, a prompt token
    kTopK,                       // deterministic: the i-th most likely draft token
    kSampledWithReplacement,     // i.i.d. from q (SpecInfer)
    kSampledWithoutReplacement,  // from q with earlier siblings removed (MCSD)
};

struct Node {
    int token = 0;
    int parent = -1;          // -1 for a root; always < this node's index
    int depth = 0;            // 0 for a root, parent's depth + 1 otherwise
    float draft_prob = 1.0f;  // probability the drafter gave this token (under the builder's q)
    Draw draw = Draw::kGiven;
};

/// Nodes in topological order (parent index < child index). A forest is allowed: several roots.
/// Each node sees the committed cache, its ancestors and itself; its position is cache_len + depth.
/// A node whose children were sampled keeps the draft distribution q they were drawn from.
class Tree {
public:
    Tree() = default;

    /// A chain of given tokens: the shape of a prompt.
    static Tree chain(std::span<const int> tokens) {
        Tree t;
        for (int i = 0; i < static_cast<int>(tokens.size()); ++i) t.add(tokens[i], i - 1);
        return t;
    }

    int add_root(int token) { return add(token, -1); }

    /// Appends a node and returns its index. The parent must already be in the tree.
    int add(int token, int parent, float draft_prob = 1.0f, Draw draw = Draw::kGiven) {
        const int index = size();
        detail::require(parent >= -1 && parent < index, "tree", [&] {
            return "node " + std::to_string(index) + " has parent " + std::to_string(parent) +
                   ", which does not precede it (the tree must be topologically ordered)";
        });
        nodes_.push_back({token, parent, parent < 0 ? 0 : nodes_[parent].depth + 1, draft_prob, draw});
        q_row_.push_back(-1);
        return index;
    }

    /// Records the draft distribution (V values) that the children of `node` were drawn from. A q other
    /// than the recorded one, arriving once `node` has children, means they were not all drawn from one q
    /// (two candidates hung by add_drafted, each with its own law): the node then has no recorded q, so
    /// the acceptors that need one (SpeculativeSampling, MultiDraftSampling) refuse it; SampleAndMatch
    /// needs none.
    void set_child_dist(int node, std::span<const float> q);

    bool has_child_dist(int node) const { return q_row_[node] >= 0; }
    /// Whether q was recorded for `node` after it had children (so it has none: set_child_dist).
    bool child_laws_mixed(int node) const { return q_row_[node] == kMixedLaws; }
    std::span<const float> child_dist(int node) const {
        detail::require(has_child_dist(node), "tree", [&] {
            return "node " + std::to_string(node) + " has no recorded draft distribution for its children";
        });
        return std::span<const float>(q_).subspan(static_cast<std::size_t>(q_row_[node]) * q_cols_, q_cols_);
    }

    int size() const { return static_cast<int>(nodes_.size()); }
    bool empty() const { return nodes_.empty(); }
    const Node& operator[](int i) const { return nodes_[i]; }
    std::span<const Node> nodes() const { return nodes_; }

    /// Children of `node` in index order (the order siblings were drawn in).
    std::vector<int> children(int node) const {
        std::vector<int> out;
        for (int i = node + 1; i < size(); ++i)
            if (nodes_[i].parent == node) out.push_back(i);
        return out;
    }

    int max_depth() const {
        int d = 0;
        for (const Node& n : nodes_) d = std::max(d, n.depth);
        return d;
    }

    /// Root-first node indices from a root to `node`.
    std::vector<int> path_to(int node) const {
        std::vector<int> path;
        for (int i = node; i >= 0; i = nodes_[i].parent) path.push_back(i);
        return {path.rbegin(), path.rend()};
    }

    /// Checks every invariant a model relies on; throws naming the node and value.
    /// (Trees built through add() hold them by construction; this guards hand-made node lists.)
    void validate(int vocab_size) const;

    /// Builds a tree from raw nodes (for tests and loaders); depth is recomputed, order is checked.
    static Tree from_nodes(std::span<const Node> nodes) {
        Tree t;
        for (const Node& n : nodes) t.add(n.token, n.parent, n.draft_prob, n.draw);
        return t;
    }

private:
    std::vector<Node> nodes_;
    std::vector<int> q_row_;  // per node: row of q_ holding its children's draft distribution, -1 none,
                              // kMixedLaws when its children came from more than one recording
    std::vector<float> q_;    // (R, V)
    int q_cols_ = 0;
    static constexpr int kMixedLaws = -2;
};

/// The nodes of `tree` with keep[i] set, in their order, parents renumbered. Every kept node's parent must
/// be kept (a builder drops whole subtrees: PCT's leaf removal, a rerank that keeps the best N). A node's
/// recorded q comes along while its kept sampled children are the first draws, in order: the draws a
/// shorter sampling would have made. Dropping an earlier draw (removing repeated tokens, keeping the best)
/// leaves siblings that were not drawn that way, so the node loses its q (MultiDraftSampling then refuses
/// the tree rather than use a residual the draws do not match; SampleAndMatch takes it).
SPECDEC_INLINE Tree pruned(const Tree& tree, std::span<const std::uint8_t> keep);

/// Checks that `path` is a root-first chain in `tree` (each node the parent of the next).
SPECDEC_INLINE void validate_path(const Tree& tree, std::span<const int> path, std::string_view who);

/// What every model's commit(path) requires: nodes the last forward computed, in increasing (root-first)
/// order, and room in the context. `who` prefixes the error ("model", "cuda.model").
SPECDEC_INLINE void validate_commit(std::span<const int> path, int n_computed, int cache_len, int max_positions,
                                    std::string_view who);

#if SPECDEC_BODIES

SPECDEC_INLINE void Tree::set_child_dist(int node, std::span<const float> q) {
    if (q_cols_ == 0) q_cols_ = static_cast<int>(q.size());
    detail::require(static_cast<int>(q.size()) == q_cols_, "tree", [&] {
        return "draft distribution of node " + std::to_string(node) + " has " + std::to_string(q.size()) +
               " entries, earlier ones had " + std::to_string(q_cols_);
    });
    if (q_row_[node] == kMixedLaws) return;
    const bool other_law = q_row_[node] >= 0 && !std::equal(q.begin(), q.end(), child_dist(node).begin());
    for (int i = node + 1; i < size() && other_law; ++i)
        if (nodes_[i].parent == node) {  // children there already, drawn from the law recorded before
            q_row_[node] = kMixedLaws;
            return;
        }
    if (q_row_[node] < 0) {
        q_row_[node] = static_cast<int>(q_.size()) / q_cols_;
        q_.insert(q_.end(), q.begin(), q.end());
    } else {
        std::copy(q.begin(), q.end(), q_.begin() + static_cast<std::ptrdiff_t>(q_row_[node]) * q_cols_);
    }
}

SPECDEC_INLINE void Tree::validate(int vocab_size) const {
    for (int i = 0; i < size(); ++i) {
        const Node& n = nodes_[i];
        detail::require(n.parent >= -1 && n.parent < i, "tree", [&] {
            return "node " + std::to_string(i) + " has parent " + std::to_string(n.parent) +
                   ", which does not precede it (the tree must be topologically ordered)";
        });
        const int want_depth = n.parent < 0 ? 0 : nodes_[n.parent].depth + 1;
        detail::require(n.depth == want_depth, "tree", [&] {
            return "node " + std::to_string(i) + " has depth " + std::to_string(n.depth) + ", expected " +
                   std::to_string(want_depth);
        });
        detail::require(n.token >= 0 && n.token < vocab_size, "tree", [&] {
            return "node " + std::to_string(i) + " has token id " + std::to_string(n.token) +
                   ", outside the vocabulary [0, " + std::to_string(vocab_size) + ")";
        });
    }
}

SPECDEC_INLINE Tree pruned(const Tree& tree, std::span<const std::uint8_t> keep) {
    detail::require(static_cast<int>(keep.size()) == tree.size(), "tree", [&] {
        return "pruned: " + std::to_string(keep.size()) + " keep flags for a tree of " + std::to_string(tree.size()) +
               " nodes";
    });
    // Whether node i's kept sampled children precede every dropped one (its q then comes along).
    const auto first_draws = [&](int i) {
        bool dropped = false;
        for (const int c : tree.children(i)) {
            if (tree[c].draw != Draw::kSampledWithReplacement && tree[c].draw != Draw::kSampledWithoutReplacement) continue;
            if (!keep[c]) dropped = true;
            else if (dropped) return false;
        }
        return true;
    };
    Tree out;
    std::vector<int> index(tree.size(), -1);  // old node -> new node
    for (int i = 0; i < tree.size(); ++i) {
        if (!keep[i]) continue;
        const int parent = tree[i].parent;
        detail::require(parent < 0 || index[parent] >= 0, "tree", [&] {
            return "pruned: node " + std::to_string(i) + " is kept but its parent " + std::to_string(parent) + " is not";
        });
        index[i] = out.add(tree[i].token, parent < 0 ? -1 : index[parent], tree[i].draft_prob, tree[i].draw);
        if (tree.has_child_dist(i) && first_draws(i)) out.set_child_dist(index[i], tree.child_dist(i));  // before its children
    }
    return out;
}

SPECDEC_INLINE void validate_path(const Tree& tree, std::span<const int> path, std::string_view who) {
    for (int j = 0; j < static_cast<int>(path.size()); ++j) {
        const int node = path[j];
        detail::require(node >= 0 && node < tree.size(), who, [&] {
            return "path entry " + std::to_string(j) + " is node " + std::to_string(node) + ", the tree has " +
                   std::to_string(tree.size()) + " nodes";
        });
        const int want_parent = j == 0 ? -1 : path[j - 1];
        detail::require(tree[node].parent == want_parent, who, [&] {
            return "path entry " + std::to_string(j) + " (node " + std::to_string(node) + ") has parent " +
                   std::to_string(tree[node].parent) + ", expected " + std::to_string(want_parent) +
                   " (a path runs from a root down, each node the child of the one before)";
        });
    }
}

SPECDEC_INLINE void validate_commit(std::span<const int> path, int n_computed, int cache_len, int max_positions,
                                    std::string_view who) {
    const int P = static_cast<int>(path.size());
    for (int j = 0; j < P; ++j)
        detail::require(path[j] >= 0 && path[j] < n_computed, who, [&] {
            return "commit: path entry " + std::to_string(j) + " is node " + std::to_string(path[j]) +
                   ", but the last forward computed " + std::to_string(n_computed) + " nodes";
        });
    detail::require(cache_len + P <= max_positions, who, [&] {
        return "commit of " + std::to_string(P) + " tokens overflows the context: " + std::to_string(cache_len) +
               " already committed, max_position_embeddings is " + std::to_string(max_positions);
    });
    for (int j = 1; j < P; ++j)
        detail::require(path[j] > path[j - 1], who, [&] {
            return "commit: path is not root-first (node " + std::to_string(path[j]) + " follows node " +
                   std::to_string(path[j - 1]) + ")";
        });
}

#endif  // SPECDEC_BODIES

}  // namespace specdec
