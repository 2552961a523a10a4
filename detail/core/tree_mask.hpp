// specdec/detail/core/tree_mask.hpp — the tree attention mask as bits: which tree rows each node sees.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "error.hpp"
#include "tree.hpp"

namespace specdec::detail {

/// Words of one mask row for trees of up to `max_nodes` nodes.
constexpr int mask_words(int max_nodes) { return (max_nodes + 31) / 32; }

/// out (N - first, words): bit j % 32 of word j / 32 in row i is set iff tree node j is visible to node
/// first + i — an ancestor or the node itself (each node also sees the whole committed cache, which
/// needs no bits). The same visibility as CpuModel's path_to, in the form a CUDA kernel tests per key.
inline void ancestor_masks(const Tree& tree, int first, int words, std::span<std::uint32_t> out) {
    const int n = tree.size() - first;
    require(first >= 0 && n >= 0 && tree.size() <= 32 * words &&
                out.size() >= static_cast<std::size_t>(n) * static_cast<std::size_t>(words),
            "tree_mask", [&] {
                return "a mask of " + std::to_string(words) + " words per row for nodes " + std::to_string(first) +
                       ".." + std::to_string(tree.size() - 1) + " does not fit (" + std::to_string(out.size()) +
                       " words given)";
            });
    for (int i = 0; i < n; ++i) {
        std::uint32_t* row = out.data() + static_cast<std::size_t>(i) * words;
        for (int w = 0; w < words; ++w) row[w] = 0;
        for (int j = first + i; j >= 0; j = tree[j].parent) row[j / 32] |= 1u << (j % 32);
    }
}

}  // namespace specdec::detail
