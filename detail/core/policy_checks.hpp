// specdec/detail/core/policy_checks.hpp — the concepts checked member by member, one readable error each.
// SPDX-License-Identifier: MIT
#pragma once

// A policy that misses one member fails its concept as a whole, and the compiler's answer ends in "no
// operand of the disjunction is satisfied". These checks ask for the same members one at a time, each
// in its own static_assert whose message names the member and the signature the loop calls. The
// decoding loop runs them when a composition does not fit (detail/loop/policy_errors.hpp); a policy's
// author can run them under the class:
//
//     static_assert(specdec::check_proposer<MyProposer>());
//
// A check returns whether every member is there, so that assert fails too, after the messages that
// say why. Together a check's asserts hold exactly when the concept does
// (tests/policies/test_policy_checks.cpp).

#include <concepts>
#include <span>

#include "concepts.hpp"
#include "tree.hpp"
#include "views.hpp"

namespace specdec {

/// LanguageModel, member by member.
template <class M>
constexpr bool check_language_model() {
    constexpr bool has_vocab_size = requires(const M& m) { { m.vocab_size() } -> std::convertible_to<int>; };
    constexpr bool has_cache_len = requires(const M& m) { { m.cache_len() } -> std::convertible_to<int>; };
    constexpr bool has_context_size = requires(const M& m) { { m.context_size() } -> std::convertible_to<int>; };
    constexpr bool has_forward = requires(M& m, const Tree& tree, int first) {
        { m.forward(tree, first) } -> std::same_as<Rows>;
    };
    constexpr bool has_commit = requires(M& m, std::span<const int> path) { m.commit(path); };
    constexpr bool has_truncate = requires(M& m, int n) { m.truncate(n); };
    constexpr bool has_reset = requires(M& m) { m.reset(); };
    static_assert(has_vocab_size, "specdec: a LanguageModel needs `int vocab_size() const`");
    static_assert(has_cache_len, "specdec: a LanguageModel needs `int cache_len() const` (tokens committed to its KV cache)");
    static_assert(has_context_size,
                  "specdec: a LanguageModel needs `int context_size() const` (the most tokens its cache holds)");
    static_assert(has_forward, "specdec: a LanguageModel needs `Rows forward(const Tree& tree, int first)` returning "
                               "one logits row per node first..N-1");
    static_assert(has_commit, "specdec: a LanguageModel needs `void commit(std::span<const int> path)` (keep the KV "
                              "rows of these nodes of the last forward)");
    static_assert(has_truncate,
                  "specdec: a LanguageModel needs `void truncate(int n)` (keep only the first n committed tokens)");
    static_assert(has_reset, "specdec: a LanguageModel needs `void reset()` (empty the cache)");
    return has_vocab_size && has_cache_len && has_context_size && has_forward && has_commit && has_truncate && has_reset;
}

/// Proposer (DrafterBase, then ScoresNodes or DraftsTokens), member by member.
template <class P>
constexpr bool check_proposer() {
    constexpr bool has_vocab_size = requires(const P& p) { { p.vocab_size() } -> std::convertible_to<int>; };
    constexpr bool has_start = requires(P& p, std::span<const int> prompt) { p.start(prompt); };
    constexpr bool has_observe = requires(P& p, const StepOutcome& outcome) { p.observe(outcome); };
    constexpr bool has_propose = requires(P& p, const Tree& tree, std::span<const int> nodes) { p.propose(tree, nodes); };
    constexpr bool has_draft = requires(P& p, std::span<const int> after, int limit, const StepContext& ctx) {
        p.draft(after, limit, ctx);
    };
    constexpr bool scores_nodes = requires(P& p, const Tree& tree, std::span<const int> nodes) {
        { p.propose(tree, nodes) } -> std::same_as<Rows>;
    };
    constexpr bool drafts_tokens = requires(P& p, std::span<const int> after, int limit, const StepContext& ctx) {
        { p.draft(after, limit, ctx) } -> std::same_as<Draft>;
    };
    // A wrong return type matters only when the other kind is not there to make it a Proposer.
    constexpr bool propose_returns_rows = !has_propose || scores_nodes || drafts_tokens;
    constexpr bool draft_returns_draft = !has_draft || drafts_tokens || scores_nodes;
    static_assert(has_vocab_size, "specdec: a Proposer needs `int vocab_size() const` (the target's vocabulary: "
                                  "drafter and target share one tokenizer)");
    static_assert(has_start, "specdec: a Proposer needs `void start(std::span<const int> prompt)` (called once per "
                             "generation; the prompt's last token is the pending root)");
    static_assert(has_observe, "specdec: a Proposer needs `void observe(const StepOutcome& outcome)` (called after "
                               "every step with the target's verdict; it may do nothing)");
    static_assert(has_propose || has_draft,
                  "specdec: a Proposer needs one of `Rows propose(const Tree& tree, std::span<const int> nodes)` "
                  "(it scores the builder's nodes: ScoresNodes) or `Draft draft(std::span<const int> after, int "
                  "limit, const StepContext& ctx)` (it drafts tokens itself: DraftsTokens)");
    static_assert(propose_returns_rows,
                  "specdec: propose(tree, nodes) must return specdec::Rows (one logits row per requested node)");
    static_assert(draft_returns_draft,
                  "specdec: draft(after, limit, ctx) must return specdec::Draft (a std::vector<DraftToken>)");
    return has_vocab_size && has_start && has_observe && (scores_nodes || drafts_tokens);
}

/// TreeBuilder<B, P>, for a P that is a Proposer.
template <class B, class P>
constexpr bool check_tree_builder() {
    constexpr bool has_build = requires(B& b, P& p, int root_token, const StepContext& ctx) { b.build(p, root_token, ctx); };
    constexpr bool builds_tree = requires(B& b, P& p, int root_token, const StepContext& ctx) {
        { b.build(p, root_token, ctx) } -> std::same_as<Tree>;
    };
    constexpr bool build_returns_tree = !has_build || builds_tree;
    static_assert(has_build, "specdec: a TreeBuilder needs `Tree build(P& proposer, int root_token, const "
                             "StepContext& ctx)` callable with this proposer (KAryTree drives only proposers that "
                             "score nodes, ScoresNodes; Chain drives both kinds)");
    static_assert(build_returns_tree, "specdec: build(proposer, root_token, ctx) must return specdec::Tree");
    return Proposer<P> && builds_tree;
}

/// Verifier<V, M>, for an M that is a LanguageModel.
template <class V, class M>
constexpr bool check_verifier() {
    constexpr bool has_verify = requires(V& v, M& target, const Tree& tree) { v.verify(target, tree); };
    constexpr bool verifies_rows = requires(V& v, M& target, const Tree& tree) {
        { v.verify(target, tree) } -> std::same_as<Rows>;
    };
    constexpr bool verify_returns_rows = !has_verify || verifies_rows;
    static_assert(has_verify, "specdec: a Verifier needs `Rows verify(M& target, const Tree& tree)` callable with "
                              "this target");
    static_assert(verify_returns_rows,
                  "specdec: verify(target, tree) must return specdec::Rows (one logits row per tree node)");
    return LanguageModel<M> && verifies_rows;
}

/// Acceptor, member by member.
template <class A>
constexpr bool check_acceptor() {
    constexpr bool has_accept = requires(A& a, const Tree& tree, Rows logits, const StepContext& ctx) {
        a.accept(tree, logits, ctx);
    };
    constexpr bool accepts_result = requires(A& a, const Tree& tree, Rows logits, const StepContext& ctx) {
        { a.accept(tree, logits, ctx) } -> std::same_as<AcceptResult>;
    };
    constexpr bool accept_returns_result = !has_accept || accepts_result;
    static_assert(has_accept, "specdec: an Acceptor needs `AcceptResult accept(const Tree& tree, Rows target_logits, "
                              "const StepContext& ctx)`");
    static_assert(accept_returns_result,
                  "specdec: accept(tree, target_logits, ctx) must return specdec::AcceptResult {path, bonus}");
    return accepts_result;
}

/// Every role of one speculative_generate call. A builder is checked only over a proposer that passed
/// (and a verifier over a target that passed): a broken proposer would fail them all for its sake.
template <class Target, class P, class B, class Ver, class A>
constexpr bool check_composition() {
    const bool target = check_language_model<Target>();
    const bool proposer = check_proposer<P>();
    bool builder = false, verifier = false;
    if constexpr (Proposer<P>) builder = check_tree_builder<B, P>();
    if constexpr (LanguageModel<Target>) verifier = check_verifier<Ver, Target>();
    const bool acceptor = check_acceptor<A>();
    return target && proposer && builder && verifier && acceptor;
}

}  // namespace specdec
