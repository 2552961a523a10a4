// specdec/detail/policies/verifier.hpp — the target's side of a step: score every tree node in one forward.
// SPDX-License-Identifier: MIT
#pragma once

#include "../core/concepts.hpp"
#include "../model/cpu_model.hpp"
#include "../core/tree.hpp"

namespace specdec {

/// One target forward over the whole tree (tree attention): the verifier of every method here.
struct TreeVerifier {
    template <LanguageModel M>
    Rows verify(M& target, const Tree& tree) {
        return target.forward(tree, 0);
    }
};

static_assert(Verifier<TreeVerifier, CpuModel>);

}  // namespace specdec
