// specdec/detail/loop/generate.hpp — the one decoding loop: build, verify, accept, commit.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "../policies/acceptors.hpp"
#include "../core/concepts.hpp"
#include "../core/error.hpp"
#include "../policies/proposers.hpp"
#include "../core/sampling.hpp"
#include "../policies/tree_builders.hpp"
#include "../policies/verifier.hpp"

namespace specdec {

struct GenerateOptions {
    int max_new_tokens = 64;   // stop after this many new tokens (the output is cut to it exactly)
    Sampling sampling{};       // applied to target and draft rows alike; temperature 0 = greedy
    std::uint64_t seed = 0;    // keys every random draw (counter-based: same seed, same draws)
    int eos_token = -1;        // stop after emitting this token; -1 = never
    /// Called after each step with the tokens it added to the output (in order; their concatenation over
    /// the steps is Generation::tokens) and, per token, its tree depth as in Generation::token_depth: > 0 an
    /// accepted draft, 0 the target's own token (the bonus, or a root drawn from a deferred bonus law, which
    /// comes first). For streaming; its time is outside the step's timings. Empty = not called.
    std::function<void(std::span<const int> tokens, std::span<const int> depths)> on_step{};
};

/// One target forward and what it yielded.
struct StepRecord {
    int n_drafted = 0;   // tree nodes other than the roots
    int depth = 0;       // deepest draft
    int n_accepted = 0;  // drafts kept (the path minus its root)
    int n_emitted = 0;   // tokens this step added to the output: accepted drafts + bonus, after the cut
    int n_draft_calls = 0;  // drafter forwards this step (0 when the proposer does not count them)
    double t_draft = 0, t_verify = 0, t_accept = 0, t_commit = 0;  // seconds
};

struct Generation {
    std::vector<int> tokens;        // new tokens only, prompt excluded
    std::vector<int> token_depth;   // per token: depth of the accepted draft it was, 0 = the target's own
    std::vector<StepRecord> steps;

    int n_target_calls() const { return static_cast<int>(steps.size()); }
    /// tau: tokens committed per target forward, bonus included (EDD, FSPAD, Spec-Bench).
    double tau() const { return steps.empty() ? 0.0 : static_cast<double>(tokens.size()) / steps.size(); }
    /// How many steps accepted at least d drafts, for d = 1..max depth: acceptance per draft position.
    std::vector<int> accepted_at_depth() const {
        std::vector<int> out;
        for (const StepRecord& s : steps) {
            if (static_cast<int>(out.size()) < s.depth) out.resize(s.depth, 0);
            for (int d = 0; d < s.n_accepted; ++d) ++out[d];
        }
        return out;
    }
};

namespace detail {

/// Refuses logits holding NaN or +Inf (a corrupted model, an overflow), naming the step and node: the
/// argmax of NaN is token 0 and sampling from it is undefined, so such a step must not emit a token.
/// A float is NaN or ±Inf when its exponent bits are all ones: an integer OR over the row, which the
/// compiler vectorises (a float sum would not be, its order being fixed), costs well under a microsecond.
inline void require_finite(Rows logits, const Tree& tree, std::uint32_t step) {
    for (int r = 0; r < logits.rows(); ++r) {
        const std::span<const float> row = logits.row(r);
        std::uint32_t special = 0;
        for (float x : row) {
            std::uint32_t bits;
            std::memcpy(&bits, &x, 4);
            special |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u) &
                       static_cast<std::uint32_t>(bits != 0xff800000u);  // -Inf is a banned token, not an error
        }
        if (special == 0) continue;
        const auto bad = std::find_if(row.begin(), row.end(), [](float x) { return std::isnan(x) || x == INFINITY; });
        fail("generate", "step " + std::to_string(step) + ": the target's logits for tree node " + std::to_string(r) +
                             " (token " + std::to_string(tree[r].token) + ") hold " +
                             (std::isnan(*bad) ? "NaN" : "Inf") + " at token " + std::to_string(bad - row.begin()) +
                             " (corrupted weights, or an overflow in the model)");
    }
}

}  // namespace detail

/// Speculative decoding, one step per target forward:
///   1. build  — the TreeBuilder drives the Proposer from the pending root and returns a Tree
///   2. verify — the Verifier scores every node with one target forward (tree attention)
///   3. accept — the Acceptor walks the tree: accepted path (root first) and the next token
///   4. commit — the target keeps the path's KV rows; the drafter observes; the bonus is the new root
/// Autoregressive decoding is this loop with RootOnly (an empty draft). An acceptor may defer the bonus
/// (AcceptResult::bonus_law): then the whole path is committed, no root is pending, and the next
/// builder draws that position's candidates from the law itself (target-initialised MCSD's forest).
template <LanguageModel Target, Proposer P, TreeBuilder<P> B, Verifier<Target> Ver, Acceptor A>
Generation speculative_generate(Target& target, P& proposer, B& builder, Ver& verifier, A& acceptor,
                                std::span<const int> prompt, const GenerateOptions& opts) {
    using clock = std::chrono::steady_clock;
    const auto seconds = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    opts.sampling.validate();
    const int V = target.vocab_size();
    detail::require(proposer.vocab_size() == V, "generate", [&] {
        return "the target's vocabulary has " + std::to_string(V) + " tokens, the drafter's has " +
               std::to_string(proposer.vocab_size()) + "; a drafter must share the target's tokenizer";
    });
    detail::require(!prompt.empty(), "generate", [] { return std::string("the prompt is empty (it needs at least one token)"); });
    for (std::size_t i = 0; i < prompt.size(); ++i)
        detail::require(prompt[i] >= 0 && prompt[i] < V, "generate", [&] {
            return "prompt token " + std::to_string(i) + " has id " + std::to_string(prompt[i]) +
                   ", outside the vocabulary [0, " + std::to_string(V) + ")";
        });
    detail::require(opts.max_new_tokens >= 0, "generate",
                    [&] { return "max_new_tokens must be >= 0, got " + std::to_string(opts.max_new_tokens); });
    const long needed = static_cast<long>(prompt.size()) + opts.max_new_tokens;
    detail::require(needed <= target.context_size(), "generate", [&] {
        return "prompt of " + std::to_string(prompt.size()) + " tokens + max_new_tokens " +
               std::to_string(opts.max_new_tokens) + " exceeds the target's context of " +
               std::to_string(target.context_size()) + " tokens";
    });
    // A drafter keeps the text in its own cache, so a request must fit every drafter's context as it
    // fits the target's: refused here, naming the drafter, rather than failing mid-generation.
    int context = target.context_size();  // what every model of a step holds
    if constexpr (requires { proposer.drafter_contexts(); })
        for (const DrafterContext& d : proposer.drafter_contexts()) {
            detail::require(needed <= d.context, "generate", [&] {
                const long fits = d.context - static_cast<long>(prompt.size());
                return "the drafter (" + d.drafter + ") holds " + std::to_string(d.context) + " positions, the target " +
                       std::to_string(target.context_size()) + ", and this request needs " + std::to_string(needed) +
                       " (prompt of " + std::to_string(prompt.size()) + " tokens + max_new_tokens " +
                       std::to_string(opts.max_new_tokens) + "); every drafter keeps the whole text in its cache: " +
                       (fits >= 0 ? "lower max_new_tokens to " + std::to_string(fits) : std::string("shorten the prompt")) +
                       " or use a drafter with a longer context";
            });
            context = std::min(context, d.context);
        }

    if constexpr (requires { proposer.reviews_with(static_cast<const void*>(&target)); })
        detail::require(!proposer.reviews_with(static_cast<const void*>(&target)), "generate", [] {
            return std::string("a Review level of the proposer drives the target model itself: it would share the "
                               "target's KV cache, and its lenience (CS Drafting §3) would change the target's "
                               "output; lenience is allowed only between drafters (review with another model)");
        });

    // A drafter truncates, prefills and commits its own cache; driving the target object itself it would
    // overwrite the target's mid-step (a model with the target's weights is a second object).
    if constexpr (requires { proposer.usage(); })
        for (const DrafterUsage& u : proposer.usage())
            detail::require(u.model != static_cast<const void*>(&target), "generate", [] {
                return std::string("the proposer drafts with the target model object itself, which would share and "
                                   "overwrite the target's KV cache; draft with a second model object (the same "
                                   "checkpoint loaded again drafts with the target's own weights)");
            });

    Generation out;
    std::vector<int> text(prompt.begin(), prompt.end());  // prompt + committed tokens; ends with the root, if any
    target.reset();
    detail::prefill(target, prompt.first(prompt.size() - 1));
    proposer.start(prompt);
    int root = prompt.back();       // the pending token, or -1 after a deferred bonus
    std::vector<float> bonus_law;   // (V) the deferred bonus's law (AcceptResult::bonus_law), else empty
    const auto draft_calls = [&] {
        if constexpr (requires { proposer.n_calls(); }) return static_cast<int>(proposer.n_calls());
        else return 0;
    };
    for (std::uint32_t step = 0; static_cast<int>(out.tokens.size()) < opts.max_new_tokens; ++step) {
        // The room left bounds every draft of the step (builders and proposers honour ctx.room): positions
        // past a model's context do not exist, and drafts past max_new_tokens - 1 cannot be emitted
        // (the bonus token completes the output). Without a pending root (a deferred bonus) the step's
        // roots are new tokens themselves, one position further on.
        const bool has_root = root >= 0;
        const int left = opts.max_new_tokens - static_cast<int>(out.tokens.size());
        const int room = std::max(0, std::min(context - static_cast<int>(text.size()) - (has_root ? 0 : 1), left - 1));
        const StepContext ctx{opts.sampling, StepRng{opts.seed, step, RngStream::kAccept}, text,
                              static_cast<int>(prompt.size()), room, bonus_law};
        StepRecord rec;
        const int calls_before = draft_calls();
        const auto t0 = clock::now();
        const Tree tree = builder.build(proposer, root, ctx);
        detail::require(!tree.empty() && tree[0].parent < 0 && (!has_root || tree[0].token == root), "generate", [&] {
            return has_root ? "the tree builder must return a tree whose node 0 is a root holding the pending token " +
                                  std::to_string(root)
                            : std::string("the tree builder must return a tree with a root at node 0 (drawn from the "
                                          "deferred bonus's law)");
        });
        detail::require(tree.max_depth() <= room, "generate", [&] {
            return "the tree builder drafted to depth " + std::to_string(tree.max_depth()) + ", but the room left this step is " +
                   std::to_string(room) + " tokens after the root (StepContext::room: the contexts and max_new_tokens)";
        });
        // A tree the target takes only while the text is short would fail half-way, its tokens lost: the
        // bound is the target's max_tree_nodes, from the first step.
        if constexpr (requires { target.max_tree_nodes(); })
            detail::require(tree.size() <= target.max_tree_nodes(), "generate", [&] {
                return "the tree builder built a tree of " + std::to_string(tree.size()) + " nodes, but the target verifies "
                       "at most max_tree_nodes = " + std::to_string(target.max_tree_nodes()) +
                       " per forward (hint: raise the target's ModelOptions::max_tree_nodes, or build a smaller tree)";
            });
        const auto t1 = clock::now();
        const Rows logits = verifier.verify(target, tree);
        detail::require_finite(logits, tree, step);
        const auto t2 = clock::now();
        AcceptResult res = acceptor.accept(tree, logits, ctx);
        validate_path(tree, res.path, "acceptor");
        const bool deferred = !res.bonus_law.empty();
        detail::require(!res.path.empty() && (has_root ? res.path[0] == 0 : tree[res.path[0]].parent < 0) &&
                            (deferred ? static_cast<int>(res.bonus_law.size()) == V : res.bonus >= 0 && res.bonus < V),
                        "acceptor", [&] {
                            return std::string("an acceptor must return a path starting at ") +
                                   (has_root ? "node 0 (the pending root)" : "a root") + " and a bonus token in [0, " +
                                   std::to_string(V) + ") or a bonus law of " + std::to_string(V) + " entries, got bonus " +
                                   std::to_string(res.bonus) + " and a law of " + std::to_string(res.bonus_law.size()) +
                                   " entries";
                        });
        if constexpr (!draws_roots_from_bonus_law<B>())
            detail::require(!deferred, "generate", [] {
                return std::string("the acceptor deferred its bonus (AcceptResult::bonus_law), but the tree builder "
                                   "cannot draw its roots from that law (it declares no draws_roots_from_bonus_law()); "
                                   "pair such an acceptor with a builder that does");
            });
        const auto t3 = clock::now();

        // The step's new tokens: accepted drafts (and the kept root when none was pending), then the bonus
        // unless deferred. Cut at max_new_tokens or EOS; the first token past the cut stays pending (it is
        // a correct next token, so nothing is lost), and a deferred law cut off is dropped.
        std::vector<int> emitted, depth_of;  // depth_of: per emitted token, its tree depth; 0 = the target's own
        for (std::size_t j = has_root ? 1 : 0; j < res.path.size(); ++j) {
            emitted.push_back(tree[res.path[j]].token);
            depth_of.push_back(tree[res.path[j]].depth);
        }
        if (!deferred) {
            emitted.push_back(res.bonus);
            depth_of.push_back(0);
        }
        const int n_new = static_cast<int>(emitted.size());
        int keep = std::min<int>(n_new, opts.max_new_tokens - static_cast<int>(out.tokens.size()));
        for (int j = 0; j < keep; ++j)
            if (emitted[j] == opts.eos_token) keep = j + 1;
        const bool defer_on = deferred && keep == n_new;
        // Committed to the target's cache: the path up to the new pending token, or all of it when the
        // bonus is deferred (nothing pending). The path's first emitted entry is path[has_root ? 1 : 0].
        if (!defer_on) res.path.resize((has_root ? 1 : 0) + keep - 1);
        target.commit(res.path);
        const int next_root = defer_on ? -1 : emitted[keep - 1];
        proposer.observe(StepOutcome{tree, res.path, next_root});
        root = next_root;
        if (defer_on) bonus_law = std::move(res.bonus_law);
        else bonus_law.clear();
        out.tokens.insert(out.tokens.end(), emitted.begin(), emitted.begin() + keep);
        text.insert(text.end(), emitted.begin(), emitted.begin() + keep);
        out.token_depth.insert(out.token_depth.end(), depth_of.begin(), depth_of.begin() + keep);
        const auto t4 = clock::now();

        rec.n_drafted = 0;
        for (const Node& n : tree.nodes()) rec.n_drafted += n.parent >= 0;  // roots are not drafts
        rec.depth = tree.max_depth();
        rec.n_accepted = n_new - (deferred ? 0 : 1) - (has_root ? 0 : 1);
        rec.n_emitted = keep;
        rec.n_draft_calls = draft_calls() - calls_before;
        rec.t_draft = seconds(t0, t1);
        rec.t_verify = seconds(t1, t2);
        rec.t_accept = seconds(t2, t3);
        rec.t_commit = seconds(t3, t4);
        out.steps.push_back(rec);
        if (opts.on_step)
            opts.on_step(std::span<const int>(out.tokens).last(keep), std::span<const int>(out.token_depth).last(keep));
        if (keep > 0 && out.tokens.back() == opts.eos_token) break;
    }
    return out;
}

/// Plain decoding with the target alone: the same loop with an empty draft, one token per forward.
template <LanguageModel Target>
Generation autoregressive_generate(Target& target, std::span<const int> prompt, const GenerateOptions& opts) {
    NoProposer none{target.vocab_size()};
    RootOnly builder;
    TreeVerifier verifier;
    SampleAndMatch acceptor;
    return speculative_generate(target, none, builder, verifier, acceptor, prompt, opts);
}

}  // namespace specdec
