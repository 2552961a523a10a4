// specdec/detail/loop/policy_errors.hpp — what the loop says when a policy does not fit its concept.
// SPDX-License-Identifier: MIT
#pragma once

// speculative_generate is constrained by the concepts, so a call with a malformed policy has no match,
// and the compiler reports the unsatisfied concept as a whole. These overloads take exactly the calls
// the constrained ones refuse, and their bodies run the member-by-member checks of
// detail/core/policy_checks.hpp: the error names the missing member and its signature. They never
// compile into a program: a call that reaches one is an error by construction. One more overload takes
// temporaries (a policy written in the call) and passes them on as lvalues.

#include <span>
#include <type_traits>

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

/// Takes policies made in the call itself, `speculative_generate(target, proposer, Chain{.gamma = 4},
/// TreeVerifier{}, GreedyMatch{}, prompt, opts)`: each temporary lives until the call returns, which is
/// all the loop needs (the proposer's state is rebuilt by start() in every generation). The call is
/// passed on with the policies as lvalues, so it reaches the loop above, or, when a policy does not fit
/// its concept, the overload that names the missing member.
template <class Target, class P, class B, class Ver, class A>
    requires(!std::is_lvalue_reference_v<P> || !std::is_lvalue_reference_v<B> || !std::is_lvalue_reference_v<Ver> ||
             !std::is_lvalue_reference_v<A>)
Generation speculative_generate(Target& target, P&& proposer, B&& builder, Ver&& verifier, A&& acceptor,
                                std::span<const int> prompt, const GenerateOptions& opts) {
    return speculative_generate(target, proposer, builder, verifier, acceptor, prompt, opts);
}

/// Reached only when the target is not a LanguageModel: one static_assert per missing member.
template <class Target>
    requires(!LanguageModel<Target>)
Generation autoregressive_generate(Target&, std::span<const int>, const GenerateOptions&) {
    static_assert(!check_language_model<Target>(), "specdec: the target is not a LanguageModel (detail/core/concepts.hpp)");
    return {};
}

}  // namespace specdec
