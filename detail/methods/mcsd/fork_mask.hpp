// specdec/detail/methods/mcsd/fork_mask.hpp — improved MCSD's dynamic sliced mask: a fork of W chains, built once for the deepest draft, sliced per step.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../../core/error.hpp"
#include "../../core/tree.hpp"
#include "../../core/tree_mask.hpp"

namespace specdec {

/// The (W·s)×(W·s) upper-left corner of a ForkMask: visible(i, j) iff draft token i attends to token j.
struct ForkMaskSlice {
    const std::uint8_t* bits = nullptr;  // row-major, `stride` per row
    int n = 0;                           // W·s rows and columns
    int stride = 0;                      // the built mask's W·D
    bool visible(int i, int j) const { return bits[static_cast<std::size_t>(i) * stride + j] != 0; }
};

/// Improved MCSD's dynamic sliced topology-aware mask (§3.2, Fig. 2). The draft is a fork: W parallel
/// chains below the committed text, no branching after the first level, so the mask grows linearly
/// with depth. Tokens are ordered depth-major — the token of chain c at depth s (1-based) is row
/// (s − 1)·W + c — so a step that stops drafting at depth s needs exactly the upper-left (W·s)×(W·s)
/// slice of the mask built once for the maximum depth D. Each token sees the committed text (no bits
/// needed), the earlier tokens of its own chain and itself.
class ForkMask {
public:
    ForkMask(int width, int max_depth) : width_(width), depth_(max_depth) {
        detail::require(width >= 1 && max_depth >= 0, "mcsd", [&] {
            return "ForkMask: width " + std::to_string(width) + " and max depth " + std::to_string(max_depth) +
                   " (need width >= 1, depth >= 0)";
        });
        const int n = width * max_depth;
        bits_.assign(static_cast<std::size_t>(n) * n, 0);
        for (int i = 0; i < n; ++i)
            for (int j = i % width; j <= i; j += width) bits_[static_cast<std::size_t>(i) * n + j] = 1;  // same chain, not deeper
    }

    int width() const { return width_; }
    int max_depth() const { return depth_; }

    /// The mask of a step that drafted to depth s <= max_depth: a view, nothing rebuilt.
    ForkMaskSlice slice(int s) const {
        detail::require(s >= 0 && s <= depth_, "mcsd", [&] {
            return "ForkMask: slice to depth " + std::to_string(s) + " of a mask built for depth " +
                   std::to_string(depth_) + " (width " + std::to_string(width_) + "); build it for the deepest draft";
        });
        return {bits_.data(), width_ * s, width_ * depth_};
    }

private:
    int width_, depth_;
    std::vector<std::uint8_t> bits_;  // (W·D, W·D)
};

/// A fork as a Tree: the root, then chains[c][s] in depth-major order (every chain the same length),
/// so tree node 1 + r is the mask's row r.
inline Tree fork_tree(int root_token, const std::vector<std::vector<int>>& chains) {
    Tree t;
    t.add_root(root_token);
    const int W = static_cast<int>(chains.size());
    const int D = W == 0 ? 0 : static_cast<int>(chains[0].size());
    for (int s = 0; s < D; ++s)
        for (int c = 0; c < W; ++c) {
            detail::require(static_cast<int>(chains[c].size()) == D, "mcsd", [&] {
                return "fork_tree: chain " + std::to_string(c) + " holds " + std::to_string(chains[c].size()) +
                       " tokens, chain 0 holds " + std::to_string(D);
            });
            t.add(chains[c][s], s == 0 ? 0 : 1 + (s - 1) * W + c);
        }
    return t;
}

}  // namespace specdec
