// specdec/detail/methods/mcsd/mcsd_tree.hpp — MCSD's draft-initialised multi-candidate tree: a k-config, sampled without replacement.
// SPDX-License-Identifier: MIT
#pragma once

#include <numeric>
#include <string>
#include <vector>

#include "../../core/concepts.hpp"
#include "../../core/error.hpp"
#include "../../core/tree.hpp"
#include "../../policies/tree_builders.hpp"

namespace specdec {

namespace detail {

/// Refuses a k-config MCSD cannot draw: an entry below 1 (a depth with no candidates), or more
/// candidates per node than the vocabulary holds (draws without replacement would run out), naming
/// the entry and its value.
inline void require_k_config(const std::vector<int>& k_config, int vocab, const char* who) {
    require(!k_config.empty(), "mcsd", [&] { return std::string(who) + ": the k-config is empty (it needs at least one depth)"; });
    for (std::size_t d = 0; d < k_config.size(); ++d) {
        require(k_config[d] >= 1, "mcsd", [&] {
            return std::string(who) + ": k_config[" + std::to_string(d) + "] = " + std::to_string(k_config[d]) +
                   ", must be >= 1 (each depth samples at least one child per node)";
        });
        require(k_config[d] <= vocab, "mcsd", [&] {
            return std::string(who) + ": k_config[" + std::to_string(d) + "] = " + std::to_string(k_config[d]) +
                   " is wider than the vocabulary of " + std::to_string(vocab) +
                   " tokens (children are sampled without replacement)";
        });
    }
}

}  // namespace detail

/// Draft nodes of a full k-config tree below one root: the sum of the cumulative products (improved
/// MCSD §2, following the MCSD code): (4,2,2,1) -> 4 + 8 + 16 + 16 = 44, 16 leaf sequences of length 4.
inline long k_config_nodes(const std::vector<int>& k_config) {
    long nodes = 0, width = 1;
    for (int k : k_config) nodes += (width *= k);
    return nodes;
}

/// MCSD's draft-initialised multi-candidate tree (Yang et al. 2024; improved MCSD's baseline, §2):
/// k_config[d] children of every node at depth d, each sibling drawn from the drafter's q with the
/// earlier siblings removed, verified by MultiDraftSampling without replacement (lossless). Improved
/// MCSD finds (4,2,2,1) better than the original paper's (4,2,2,1,1) (§4.1).
struct McsdTree {
    std::vector<int> k_config{4, 2, 2, 1};

    template <ScoresNodes P>
    Tree build(P& proposer, int root_token, const StepContext& ctx) {
        detail::require_k_config(k_config, proposer.vocab_size(), "McsdTree");
        KAryTree tree{k_config, DrawPolicy::kSampleWithoutReplacement};
        return tree.build(proposer, root_token, ctx);
    }
};

static_assert(TreeBuilder<McsdTree, ModelProposer<CpuModel>>);

}  // namespace specdec
