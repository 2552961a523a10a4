// specdec/detail/loop/policy_errors.hpp — what the loop says when a policy does not fit its concept.
// SPDX-License-Identifier: MIT
#pragma once

// speculative_generate is constrained by the concepts, so a call with a malformed policy has no match,
// and the compiler reports the unsatisfied concept as a whole. These overloads take exactly the calls
// the constrained ones refuse, and their bodies run the member-by-member checks of
// detail/core/policy_checks.hpp: the error names the missing member and its signature. They never
// compile into a program: a call that reaches one is an error by construction.

#include <span>

#include "../core/concepts.hpp"
#include "../core/policy_checks.hpp"
#include "generate.hpp"

namespace specdec {

namespace detail {

template <class Target, class P, class B, class Ver, class A>
concept Composes = LanguageModel<Target> && Proposer<P> && TreeBuilder<B, P> && Verifier<Ver, Target> && Acceptor<A>;

}  // namespace detail

/// Reached only by a call whose policies do not satisfy the concepts: one static_assert per missing member.
template <class Target, class P, class B, class Ver, class A>
    requires(!detail::Composes<Target, P, B, Ver, A>)
Generation speculative_generate(Target&, P&, B&, Ver&, A&, std::span<const int>, const GenerateOptions&) {
    // check_composition fails one static_assert per missing member and returns false. Should it find
    // nothing missing although a concept failed, the checks lag behind the concepts: say so rather than
    // compile a call that cannot run.
    static_assert(!check_composition<Target, P, B, Ver, A>(),
                  "specdec: these policies do not satisfy the concepts of detail/core/concepts.hpp; compile with "
                  "-fconcepts-diagnostics-depth=3 and static_assert each concept on its own to see which");
    return {};
}

/// Reached only when the target is not a LanguageModel: one static_assert per missing member.
template <class Target>
    requires(!LanguageModel<Target>)
Generation autoregressive_generate(Target&, std::span<const int>, const GenerateOptions&) {
    static_assert(!check_language_model<Target>(), "specdec: the target is not a LanguageModel (detail/core/concepts.hpp)");
    return {};
}

}  // namespace specdec
