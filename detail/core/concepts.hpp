// specdec/detail/core/concepts.hpp — what the decoding loop needs from a model and from each policy.
// SPDX-License-Identifier: MIT
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "error.hpp"

#include "rng.hpp"
#include "sampling.hpp"
#include "tree.hpp"
#include "views.hpp"

namespace specdec {

/// A decoder with a KV cache that scores every node of a token tree in one pass.
/// Contract: `forward(tree, first)` returns logits (N - first, V) for nodes first..N-1, each node
/// seeing the committed tokens, its ancestors and itself at position cache_len + depth; nodes before
/// `first` are those of the previous forward. `commit(path)` appends the path's tokens to the cache.
template <class M>
concept LanguageModel = requires(M& m, const M& cm, const Tree& tree, std::span<const int> path, int n) {
    { cm.vocab_size() } -> std::convertible_to<int>;
    { cm.cache_len() } -> std::convertible_to<int>;
    { cm.context_size() } -> std::convertible_to<int>;
    { m.forward(tree, n) } -> std::same_as<Rows>;
    m.commit(path);
    m.truncate(n);
    m.reset();
};

/// A model whose committed keys/values can be read (GLIDE's drafter attends to them).
/// Contract: kv(l) covers exactly the committed rows 0..cache_len-1; never the rows of a pending tree.
template <class M>
concept ExposesKV = LanguageModel<M> && requires(const M& m, int layer) {
    { m.num_layers() } -> std::convertible_to<int>;
    { m.kv(layer) } -> std::same_as<KvView>;
};

/// A model that keeps chosen hidden states of its last forward (EDD, EAGLE/FSPAD read them).
template <class M>
concept ExposesHidden = LanguageModel<M> && requires(M& m, const M& cm, std::vector<int> layers, int i) {
    m.capture_hidden(layers);
    { cm.hidden(i) } -> std::same_as<Rows>;
};

/// A model that also keeps the captured hidden states of its committed tokens, as it keeps their KV.
/// Contract: committed_hidden(i) covers exactly the committed rows 0..cache_len-1 of the i-th captured
/// layer — the prompt's prefill chunks, then every committed path — and never a pending tree's rows;
/// capture_hidden must precede the forwards whose states are read (the loop prefills the prompt
/// before proposer.start(), so a drafter asks in its constructor). A drafter fed by the target's
/// states (EDD's soft prompt, EAGLE's features) reads them here in start() and observe(): the
/// loop commits the target before the drafter observes, so the accepted tokens are already in.
/// Several such drafters may share one target: each adds its layer (add_hidden_layer keeps the
/// layers already captured, the set is their union) and reads committed_hidden(hidden_index(layer)).
template <class M>
concept ExposesCommittedHidden = ExposesHidden<M> && requires(M& m, const M& cm, int i) {
    { cm.committed_hidden(i) } -> std::same_as<Rows>;
    { m.add_hidden_layer(i) } -> std::convertible_to<int>;
    { cm.hidden_index(i) } -> std::convertible_to<int>;
};

/// What one speculative step produced, as drafters see it in observe().
/// The verified tree need not be the tree the builder showed the drafter: after its last propose()
/// a builder may prune, reorder or add unscored nodes (PCT's leaf removal, EAGLE-2's rerank). A
/// drafter therefore finds the accepted nodes it scored by their root-first tokens, never by index:
/// a node's KV rows (and its logits) depend only on the committed text and its path of tokens, so
/// any scored node with the accepted path's tokens holds the rows to keep.
struct StepOutcome {
    const Tree& tree;            // the tree the target verified
    std::span<const int> path;   // accepted node indices, root first (the root is the old pending token,
                                 // or, in a step that began without one, the candidate root the acceptor kept)
    int next_root = 0;           // the token now pending: the bonus token (or the next accepted one);
                                 // -1 when the acceptor deferred its bonus (AcceptResult::bonus_law): every
                                 // token of the path is committed and none is pending
};

/// Everything a policy may read about the step in progress.
struct StepContext {
    const Sampling& sampling;
    StepRng rng;                      // counter-based; builders use stream kDraft, acceptors kAccept
    std::span<const int> tokens{};    // the text so far: prompt, then every committed token, ending with the root
    int prompt_len = 0;               // how many of `tokens` are the prompt (Max-Gram looks there first)
    /// The room left: how many tokens any draft of this step may hold after the root (ctx.tokens.back()),
    /// `after` included. The loop sets it to what every model's context still holds and what
    /// max_new_tokens can still emit; builders build no deeper, proposers draft and score no further.
    int room = std::numeric_limits<int>::max();
    /// The target's law (V) at this step's first new position when the previous acceptor deferred its
    /// bonus (AcceptResult::bonus_law); empty otherwise. When it is set no token is pending: ctx.tokens
    /// ends with the last committed token, the builder is handed root_token -1 and draws its roots from
    /// this law (target-initialised candidates, improved MCSD §3.1), each at depth 0, and `room` counts
    /// the depth below them. Under greedy decoding it is the target's softmax at T = 1 with its argmax
    /// strictly largest: that argmax is the next token, the rest only ranks alternatives (as draft_probs).
    std::span<const float> bonus_law{};

    /// The same step for a part of the composition that draws at `scope` (StepRng::scope). Whoever hands
    /// a context to a sub-policy gives it a scope of its own: a tree builder at scope s drives its
    /// proposer at s + 1, a cascade gives each of its parts the next rng_scopes_of<Part>() scopes.
    StepContext scoped(std::uint32_t scope) const {
        detail::require(scope < kRngScopes, "rng", [&] {
            return "scope " + std::to_string(scope) + " is beyond the " + std::to_string(kRngScopes) +
                   " a step has (a composition of that many drawing parts?)";
        });
        StepContext c = *this;
        c.rng.scope = scope;
        return c;
    }
};

/// How many consecutive scopes (StepRng::scope) a proposer's draws span, from the one it is handed:
/// its `rng_scopes()` where it declares one (a cascade: one per part that may draw), else 1.
template <class P>
constexpr std::uint32_t rng_scopes_of() {
    if constexpr (requires { P::rng_scopes(); }) return P::rng_scopes();
    else return 1;
}

/// What every drafter has: a vocabulary, `start(prompt)` (a new text whose last token is the pending
/// root) and `observe(outcome)` (the target's verdict on a step). It must never touch the target's cache.
template <class P>
concept DrafterBase = requires(P& p, const P& cp, std::span<const int> tokens, const StepOutcome& outcome) {
    { cp.vocab_size() } -> std::convertible_to<int>;
    p.start(tokens);
    p.observe(outcome);
};

/// A drafter that scores nodes and lets the builder choose tokens (a small LM, GLIDE, EAGLE):
/// `propose(tree, nodes)` returns one logits row per requested node, in order, for a tree that only
/// grew since the last call this step (node 0 is the root). What the builder returns afterwards may
/// differ from the tree it showed (see StepOutcome).
template <class P>
concept ScoresNodes = DrafterBase<P> && requires(P& p, std::span<const int> nodes, const Tree& tree) {
    { p.propose(tree, nodes) } -> std::same_as<Rows>;
};

/// One drafted token and the law it came from, given the text before it (the acceptor's q).
struct DraftToken {
    int token = 0;
    std::vector<float> q;  // (V) the distribution the token came from; empty: not known (Max-Gram)
    bool sampled = false;  // true: drawn at random from q; false: chosen deterministically (q = one-hot)
};
using Draft = std::vector<DraftToken>;

/// A drafter that chooses its tokens itself (Max-Gram, a cascade of reviewing drafters):
/// `draft(after, limit, ctx)` continues ctx.tokens + `after` (drafts not yet verified) by at most
/// `limit` tokens, each with the law it was drawn from, so that the target can still verify losslessly.
/// It drafts at most ctx.room - after.size() tokens, and scores no text longer than ctx.tokens + ctx.room
/// (the positions past it may not exist in some model's context). Its random draws are keyed by
/// ctx.rng.scope (stream kCascade) and by a counter of its own that never repeats within a generation;
/// a proposer made of parts hands each part ctx.scoped() with scopes of its own and declares how many
/// it spans (rng_scopes_of), so no two parts ever share a uniform.
template <class P>
concept DraftsTokens = DrafterBase<P> && requires(P& p, std::span<const int> after, int limit, const StepContext& ctx) {
    { p.draft(after, limit, ctx) } -> std::same_as<Draft>;
};

/// Supplies drafts in one of the two forms. A speculative decoder over (drafter, smaller drafter) is
/// itself a DraftsTokens proposer, which is how cascades nest (CS Drafting's vertical cascade).
template <class P>
concept Proposer = ScoresNodes<P> || DraftsTokens<P>;

/// Owns the search over a Proposer. Contract: returns a tree whose node 0 is a root holding
/// `root_token`, no deeper than ctx.room (the loop checks); other roots (a forest) are allowed; nodes
/// drawn at random record the distribution they came from (Tree::set_child_dist on their parent).
/// Between propose() calls of one step the tree only grows; the returned tree may then be pruned or
/// reordered (see StepOutcome). A builder that can start a step from a deferred bonus (ctx.bonus_law,
/// root_token -1: its roots are its own draws from that law) declares `draws_roots_from_bonus_law()`;
/// the loop refuses an acceptor that defers its bonus to a builder that does not.
template <class B, class P>
concept TreeBuilder = Proposer<P> && requires(B& b, P& p, int root_token, const StepContext& ctx) {
    { b.build(p, root_token, ctx) } -> std::same_as<Tree>;
};

/// Runs the target over the tree. Contract: one row of logits per tree node, in tree order.
template <class V, class M>
concept Verifier = LanguageModel<M> && requires(V& v, M& target, const Tree& tree) {
    { v.verify(target, tree) } -> std::same_as<Rows>;
};

/// The accepted path (node indices, root first) and the next token, sampled from the target.
/// An acceptor may instead defer the bonus: it leaves `bonus` unused and returns the target's law at the
/// bonus position in `bonus_law` (V probabilities); the loop then commits the whole path and hands the
/// law to the next step's builder (StepContext::bonus_law), which draws that position's token itself —
/// several of them, as roots of a forest, in target-initialised MCSD. Under greedy decoding the law is
/// the target's softmax at T = 1 with the argmax strictly largest (see StepContext::bonus_law).
struct AcceptResult {
    std::vector<int> path;
    int bonus = 0;
    std::vector<float> bonus_law{};  // (V) empty: `bonus` is the next token
};

/// Whether builder B can start a step from a deferred bonus (see TreeBuilder).
template <class B>
constexpr bool draws_roots_from_bonus_law() {
    if constexpr (requires { B::draws_roots_from_bonus_law(); }) return B::draws_roots_from_bonus_law();
    else return false;
}

/// Walks the tree against the target. Contract: states its precondition and throws specdec::error
/// when a tree or sampling config violates it — never a silent change of distribution. Its path starts
/// at node 0 (the pending root) or, when the step began without one (ctx.bonus_law set), at any root.
template <class A>
concept Acceptor = requires(A& a, const Tree& tree, Rows target_logits, const StepContext& ctx) {
    { a.accept(tree, target_logits, ctx) } -> std::same_as<AcceptResult>;
};

}  // namespace specdec
