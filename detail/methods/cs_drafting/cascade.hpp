// specdec/detail/methods/cs_drafting/cascade.hpp — Cascade Speculative Drafting (Chen et al. 2024): drafters that review
// smaller drafters (vertical cascade), drafters that take turns along one draft (horizontal cascade),
// and lenience between drafters.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../../core/concepts.hpp"
#include "../../core/error.hpp"
#include "max_gram.hpp"
#include "../../policies/proposers.hpp"
#include "../../core/sampling.hpp"
#include "../../core/tree.hpp"

namespace specdec {

namespace detail {

/// Scores continuations of a growing text with one model, keeping its KV cache for the longest prefix
/// shared with the text it scored last. A reviewer sees many texts per step that differ only after the
/// committed part (its own rejected proposals, the target's corrections), so a cascade level needs no
/// observe(): the cache follows whatever text it is asked about.
template <LanguageModel M>
class PrefixScorer {
public:
    explicit PrefixScorer(M& model) : model_(&model) {}

    M& model() const { return *model_; }
    void reset() {
        model_->reset();
        cached_.clear();
    }

    /// Logits for positions from..text.size()-1 (row i predicts the token after text[from + i]); one
    /// forward for those rows, after committing text[..from) where the cache lacks it.
    Rows score(std::span<const int> text, std::size_t from) {
        const std::size_t limit = std::min(from, cached_.size());
        std::size_t keep = 0;
        while (keep < limit && cached_[keep] == text[keep]) ++keep;
        model_->truncate(static_cast<int>(keep));  // the cache keeps no logits: row `from` is recomputed
        // A short gap (the target's bonus, tokens it accepted) rides along in the same forward; a long one
        // (the prompt) is prefilled in chunks first.
        if (from - keep > kRideAlong) {
            prefill(*model_, text.subspan(keep, from - keep));
            keep = from;
        }
        const Tree chain = Tree::chain(text.subspan(keep));
        const Rows rows = model_->forward(chain, 0);
        std::vector<int> all(chain.size());
        for (int i = 0; i < chain.size(); ++i) all[i] = i;
        model_->commit(all);
        cached_.assign(text.begin(), text.end());
        return Rows{rows.data.subspan((from - keep) * static_cast<std::size_t>(rows.cols)), rows.cols};
    }

private:
    static constexpr std::size_t kRideAlong = 16;
    M* model_;
    std::vector<int> cached_;  // the tokens whose keys/values the model holds, in order
};

/// Adds u to the entry of its model in `out` (one entry per drafter model).
inline void merge_usage(std::vector<DrafterUsage>& out, const DrafterUsage& u) {
    for (DrafterUsage& o : out)
        if (o.model == u.model) {
            o.calls += u.calls;
            o.seconds += u.seconds;
            return;
        }
    out.push_back(u);
}

/// Adds what the level `d` (a part of a cascade) spent to `out`, unless `seen` already holds it: one
/// level object may serve at several places of a cascade (CS Drafting's small drafter sits below the mid
/// level and at the top), and its forwards happened once.
template <class D>
void collect_usage(const D& d, std::vector<DrafterUsage>& out, std::vector<const void*>& seen) {
    if constexpr (requires { d.collect_usage(out, seen); }) {
        d.collect_usage(out, seen);
    } else if constexpr (requires { d.usage(); }) {
        if (std::find(seen.begin(), seen.end(), static_cast<const void*>(&d)) != seen.end()) return;
        seen.push_back(&d);
        for (const DrafterUsage& u : d.usage()) merge_usage(out, u);
    }
}

}  // namespace detail

/// Lenience l >= 1 (CS Drafting §3.2): how much a reviewing drafter trusts the drafter below it. It
/// changes the output distribution, so it exists only as an option of a Review, never of an Acceptor,
/// and the decoding loop refuses a proposer whose Review levels drive the target model itself.
struct Lenience {
    double value = 1.0;
};

struct ReviewOptions {
    int budget = 10;         // tokens gathered from the drafter below before one review (a K-matrix row sum)
    Lenience lenience{};     // l = 1: exact review; the paper uses l > 1 between neural drafters only (App. B)
};

/// The vertical cascade (CS Drafting §3.1, Algorithm 1): a drafter model reviewing the proposals of a
/// smaller token drafter with one forward, as the target reviews drafts in speculative decoding. One
/// draft() call is one review: `budget` tokens from below, then the accepted ones plus one token of the
/// reviewer (its correction, or its bonus after accepting all). Being a DraftsTokens proposer itself, a
/// Review can be reviewed again: target <- Review(mid, Review(small, MaxGram)) nests to any depth.
///
/// Review rule, per drafted token x with law q_d (one-hot when the drafter chose x deterministically) and
/// the reviewer's distribution p_r (draft_probs: softmax at T = 1 under greedy decoding):
///   greedy:   accept if x = argmax p_r or q_d(x) <= l p_r(x); else emit argmax p_r and stop.
///   sampling: accept with probability min(1, l p_r(x) / q_d(x)); else draw from the residual
///             norm(max(0, p_r - min(q_d, l p_r))) and stop.
/// Under sampling each emitted token records its exact law q = min(q_d, l p_r) + (1 - beta) residual,
/// beta = sum min(q_d, l p_r); with l = 1 this is p_r itself (speculative sampling's theorem). The paper
/// gives no residual for l > 1 (its footnote: probabilities "not standardized"); this one makes the law
/// of every drafted token known, so the target's speculative sampling stays lossless on top of a lenient
/// cascade.
template <LanguageModel M, DraftsTokens D>
class Review {
public:
    Review(M& reviewer, D& below, ReviewOptions options = {})
        : scorer_(reviewer), below_(&below), opt_(options) {
        detail::require(opt_.budget >= 1, "cascade", [&] {
            return "Review: budget must be >= 1 token per review, got " + std::to_string(opt_.budget);
        });
        detail::require(std::isfinite(opt_.lenience.value) && opt_.lenience.value >= 1.0, "cascade", [&] {
            return "Review: lenience must be a finite number >= 1 (1 = exact review), got " +
                   std::to_string(opt_.lenience.value);
        });
        if constexpr (requires { below.reviews_with(&reviewer); })
            detail::require(!below.reviews_with(&reviewer), "cascade", [] {
                return std::string("Review: this model already reviews at a level below; one model object has one "
                                   "KV cache, so each level needs its own model");
            });
        detail::require(reviewer.vocab_size() == below.vocab_size(), "cascade", [&] {
            return "Review: the reviewer's vocabulary has " + std::to_string(reviewer.vocab_size()) +
                   " tokens, its drafter's " + std::to_string(below.vocab_size()) + "; they must share a tokenizer";
        });
    }

    int vocab_size() const { return scorer_.model().vocab_size(); }
    void start(std::span<const int> prompt) {
        scorer_.reset();
        below_->start(prompt);
        coin_ = 0;
    }
    void observe(const StepOutcome& outcome) { below_->observe(outcome); }

    /// Whether `model` reviews at this level or below. The loop refuses the target: a level driving it
    /// would share its KV cache, and a lenient one would change its output.
    bool reviews_with(const void* model) const {
        bool below = false;
        if constexpr (requires { below_->reviews_with(model); }) below = below_->reviews_with(model);
        return below || model == static_cast<const void*>(&scorer_.model());
    }

    /// Reviewer forwards per model, this level's first, then the levels below; each level counted once
    /// however many places of the cascade it serves.
    std::vector<DrafterUsage> usage() const {
        std::vector<DrafterUsage> out;
        std::vector<const void*> seen;
        collect_usage(out, seen);
        return out;
    }
    /// usage()'s walk: adds this level and those below to `out` unless `seen` holds them.
    void collect_usage(std::vector<DrafterUsage>& out, std::vector<const void*>& seen) const {
        if (std::find(seen.begin(), seen.end(), static_cast<const void*>(this)) != seen.end()) return;
        seen.push_back(this);
        detail::merge_usage(out, {&scorer_.model(), calls_, seconds_});
        detail::collect_usage(*below_, out, seen);
    }
    /// The reviewer's context and those of the levels below (the loop refuses a request that does not
    /// fit one of them).
    std::vector<DrafterContext> drafter_contexts() const {
        std::vector<DrafterContext> out{{"the reviewer of a Review at depth " + std::to_string(depth()) +
                                             " (1 = reviewing a drafter that is not a Review)",
                                         scorer_.model().context_size()}};
        if constexpr (requires { below_->drafter_contexts(); })
            for (DrafterContext& c : below_->drafter_contexts()) out.push_back(std::move(c));
        return out;
    }
    /// Reviews at this level alone (one forward of its model each).
    long n_reviews() const { return calls_; }
    /// Drafter forwards at this level and below, each level once.
    long n_calls() const {
        long n = 0;
        for (const DrafterUsage& u : usage()) n += u.calls;
        return n;
    }

    Draft draft(std::span<const int> after, int limit, const StepContext& ctx) {
        // The reviewer scores (and keeps in its cache) every token it reviews, so the proposal, not only
        // the output, stays within the room left. Tokens past `limit` could not be returned, and a
        // review's verdict on a token depends only on the tokens before it: a proposal of
        // min(budget, limit) tokens gives the same output for less.
        limit = static_cast<int>(std::min<long>(limit, static_cast<long>(ctx.room) - static_cast<long>(after.size())));
        if (limit <= 0) return {};
        const int budget = std::min(opt_.budget, limit);
        // 1. A proposal of `budget` tokens from below (a level below yields one review's worth per call).
        std::vector<int> text(ctx.tokens.begin(), ctx.tokens.end());
        text.insert(text.end(), after.begin(), after.end());
        const std::size_t from = text.size() - 1;  // the row that predicts the first proposal token
        Draft proposal;
        const StepContext below_ctx = ctx.scoped(ctx.rng.scope + 1);  // the level below draws at its own scopes
        while (static_cast<int>(proposal.size()) < budget) {
            const std::span<const int> below_after(text.data() + ctx.tokens.size(), text.size() - ctx.tokens.size());
            Draft more = below_->draft(below_after, budget - static_cast<int>(proposal.size()), below_ctx);
            if (more.empty()) break;
            more.resize(std::min<std::size_t>(more.size(), budget - proposal.size()));
            for (DraftToken& t : more) {
                text.push_back(t.token);
                proposal.push_back(std::move(t));
            }
        }
        // 2. One forward of the reviewer over the proposal (and whatever of the text its cache lacks).
        const auto t0 = std::chrono::steady_clock::now();
        const Rows rows = scorer_.score(text, from);
        seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++calls_;
        // 3. The review: accepted tokens, then one of the reviewer's own.
        Draft out;
        const int V = vocab_size();
        std::vector<float> p(V);
        for (std::size_t i = 0; i <= proposal.size() && static_cast<int>(out.size()) < limit; ++i) {
            draft_probs(rows.row(static_cast<int>(i)), ctx.sampling, p);
            if (i == proposal.size()) {  // every proposal token accepted: the reviewer's bonus token
                out.push_back(own_token(p, ctx));
                break;
            }
            out.push_back(review(proposal[i], p, ctx));
            if (rejected_) break;
        }
        return out;
    }

    static constexpr int depth() {
        if constexpr (requires { D::depth(); }) return D::depth() + 1;
        else return 1;
    }
    /// Scopes of its draws (StepRng::scope): its own, then those of the level below.
    static constexpr std::uint32_t rng_scopes() { return 1 + rng_scopes_of<D>(); }

private:
    /// This level's next coin: keyed by the scope it was handed (no other part of the composition draws
    /// there) and a counter of this object (no coin is used twice in one generation, even when one level
    /// serves at several places of a cascade, each with its own scope).
    float coin(const StepContext& ctx) {
        return ctx.rng.with_stream(RngStream::kCascade).uniform(0, coin_++);
    }

    DraftToken own_token(const std::vector<float>& p, const StepContext& ctx) {
        if (ctx.sampling.greedy()) return {argmax(p), p, false};
        return {sample_index(p, coin(ctx)), p, true};
    }

    /// One drafted token against the reviewer's p; sets rejected_ when the review stops here.
    DraftToken review(const DraftToken& t, const std::vector<float>& p, const StepContext& ctx) {
        const double l = opt_.lenience.value;
        const int x = t.token;
        // q_d(x): 1 for a deterministic choice under sampling, or where the drafter gives no law (Max-Gram)
        const float qx = (t.q.empty() || (!t.sampled && !ctx.sampling.greedy())) ? 1.0f : t.q[x];
        rejected_ = false;
        if (ctx.sampling.greedy()) {
            // the authors' code tests probabilities only when l > 1: at l = 1 the review is exact
            if (argmax(p) == x || (l > 1.0 && qx <= l * p[x])) return {x, p, false};
            rejected_ = true;
            return {argmax(p), p, false};
        }
        // Sampling: the law of what this position emits (accepted draft or residual draw), see above.
        const int V = static_cast<int>(p.size());
        std::vector<float> kept(V, 0.0f), residual(V);
        if (t.sampled) {
            for (int y = 0; y < V; ++y) kept[y] = static_cast<float>(std::min<double>(t.q[y], l * p[y]));
        } else {
            kept[x] = static_cast<float>(std::min(1.0, l * p[x]));
        }
        double beta = 0.0, rest = 0.0;
        for (int y = 0; y < V; ++y) {
            beta += kept[y];
            rest += residual[y] = std::max(0.0f, p[y] - kept[y]);
        }
        std::vector<float> law(V);
        for (int y = 0; y < V; ++y)
            law[y] = kept[y] + (rest > 0.0 ? static_cast<float>((1.0 - beta) * residual[y] / rest) : 0.0f);
        // accept with probability kept(x) / q_d(x) = min(1, l p(x) / q_d(x)), written without dividing
        if (coin(ctx) * qx < kept[x]) return {x, std::move(law), true};
        rejected_ = true;
        if (rest <= 0.0) residual = p;  // a rejection of probability zero under rounding: fall back to p
        return {sample_index(residual, coin(ctx)), std::move(law), true};
    }

    detail::PrefixScorer<M> scorer_;
    D* below_;
    ReviewOptions opt_;
    std::uint32_t coin_ = 0;
    bool rejected_ = false;
    long calls_ = 0;
    double seconds_ = 0.0;
};

/// Max-Gram as a proposer (CS Drafting §3.3, App. B): the statistical bottom of every cascade, whose
/// calls cost nothing. Deterministic given the text, so its tokens carry no law (q = one-hot).
class MaxGram {
public:
    explicit MaxGram(const Bigram& bigram, int per_call = 10) : bigram_(&bigram), per_call_(per_call) {
        detail::require(per_call >= 1, "cascade", [&] {
            return "MaxGram: per_call must be >= 1 token, got " + std::to_string(per_call);
        });
    }

    int vocab_size() const { return bigram_->vocab_size; }
    void start(std::span<const int>) {}
    void observe(const StepOutcome&) {}

    Draft draft(std::span<const int> after, int limit, const StepContext& ctx) {
        const long n = std::min<long>({limit, per_call_, static_cast<long>(ctx.room) - static_cast<long>(after.size())});
        if (n <= 0) return {};
        std::vector<int> text(ctx.tokens.begin(), ctx.tokens.end());
        text.insert(text.end(), after.begin(), after.end());
        Draft out;
        for (int t : max_gram(text, static_cast<std::size_t>(ctx.prompt_len), static_cast<int>(n), bigram_))
            out.push_back({t, {}, false});
        return out;
    }

private:
    const Bigram* bigram_;
    int per_call_;
};

/// The horizontal cascade (CS Drafting §3.1): one draft whose earliest tokens come from the largest
/// drafter, later ones from smaller drafters, `budgets[i]` tokens from drafter i. A row of the paper's
/// K-matrix: at the top level K[0] = {k11, k12 - k11, ...} (the paper's k12 is cumulative; its code
/// stores the difference, NOTES §3.1). Drafters are referenced, so one level may serve in several rows.
template <DraftsTokens... Ds>
class Horizontal {
public:
    explicit Horizontal(std::vector<int> budgets, Ds&... drafters) : budgets_(std::move(budgets)), ds_(&drafters...) {
        detail::require(budgets_.size() == sizeof...(Ds), "cascade", [&] {
            return "Horizontal: " + std::to_string(budgets_.size()) + " budgets for " + std::to_string(sizeof...(Ds)) +
                   " drafters";
        });
        for (std::size_t i = 0; i < budgets_.size(); ++i)
            detail::require(budgets_[i] >= 0, "cascade", [&] {
                return "Horizontal: budgets[" + std::to_string(i) + "] = " + std::to_string(budgets_[i]) + ", must be >= 0";
            });
        std::apply([&](auto*... d) { ((vocab_ = d->vocab_size()), ...); }, ds_);
        std::apply([&](auto*... d) {
            ([&] {
                detail::require(d->vocab_size() == vocab_, "cascade", [&] {
                    return "Horizontal: drafters disagree on the vocabulary (" + std::to_string(d->vocab_size()) +
                           " vs " + std::to_string(vocab_) + " tokens)";
                });
            }(), ...);
        }, ds_);
    }

    int vocab_size() const { return vocab_; }
    int total_budget() const {
        int n = 0;
        for (int b : budgets_) n += b;
        return n;
    }
    void start(std::span<const int> prompt) {
        std::apply([&](auto*... d) { (d->start(prompt), ...); }, ds_);
    }
    void observe(const StepOutcome& outcome) {
        std::apply([&](auto*... d) { (d->observe(outcome), ...); }, ds_);
    }
    bool reviews_with(const void* model) const {
        bool any = false;
        std::apply([&](auto*... d) {
            ([&] {
                if constexpr (requires { d->reviews_with(model); }) any = any || d->reviews_with(model);
            }(), ...);
        }, ds_);
        return any;
    }
    /// Per model, summed over the levels that use it; a level that serves at several places (directly
    /// and below another level) counts once.
    std::vector<DrafterUsage> usage() const {
        std::vector<DrafterUsage> out;
        std::vector<const void*> seen;
        collect_usage(out, seen);
        return out;
    }
    /// The contexts of every drafter's models (the loop refuses a request that does not fit one).
    std::vector<DrafterContext> drafter_contexts() const {
        std::vector<DrafterContext> out;
        std::apply([&](auto*... d) {
            ([&] {
                if constexpr (requires { d->drafter_contexts(); })
                    for (DrafterContext& c : d->drafter_contexts()) out.push_back(std::move(c));
            }(), ...);
        }, ds_);
        return out;
    }
    /// usage()'s walk over every drafter, shared levels once.
    void collect_usage(std::vector<DrafterUsage>& out, std::vector<const void*>& seen) const {
        std::apply([&](auto*... d) { (detail::collect_usage(*d, out, seen), ...); }, ds_);
    }
    long n_calls() const {
        long n = 0;
        for (const DrafterUsage& u : usage()) n += u.calls;
        return n;
    }
    static constexpr int depth() {
        int d = 0;
        ((d = std::max(d, depth_of<Ds>())), ...);
        return d;
    }
    /// Scopes of its draws (StepRng::scope): drafter i draws at the scopes after drafters 0..i-1's.
    static constexpr std::uint32_t rng_scopes() { return (std::uint32_t{0} + ... + rng_scopes_of<Ds>()); }

    Draft draft(std::span<const int> after, int limit, const StepContext& ctx) {
        limit = static_cast<int>(std::min<long>(limit, static_cast<long>(ctx.room) - static_cast<long>(after.size())));
        Draft out;
        std::vector<int> text(after.begin(), after.end());
        int end = 0;  // cumulative budget of drafters 0..i
        std::size_t i = 0;
        std::uint32_t scope = ctx.rng.scope;  // drafter i's first scope
        std::apply([&](auto*... d) {
            ([&] {
                const StepContext part = ctx.scoped(scope);
                scope += rng_scopes_of<std::remove_pointer_t<decltype(d)>>();
                end = std::min(end + budgets_[i++], limit);
                while (static_cast<int>(out.size()) < end) {
                    Draft more = d->draft(text, end - static_cast<int>(out.size()), part);
                    if (more.empty()) break;
                    more.resize(std::min<std::size_t>(more.size(), end - out.size()));
                    for (DraftToken& t : more) {
                        text.push_back(t.token);
                        out.push_back(std::move(t));
                    }
                }
            }(), ...);
        }, ds_);
        return out;
    }

private:
    template <class T>
    static constexpr int depth_of() {
        if constexpr (requires { T::depth(); }) return T::depth();
        else return 0;
    }

    std::vector<int> budgets_;
    std::tuple<Ds*...> ds_;
    int vocab_ = 0;
};

/// The paper's K-matrix (CS Drafting §3.1, App. B), checked: n x n, upper-triangular, entries >= 0.
/// Row r holds the budgets of drafters r..n-1 in the call where drafter r-1 reviews (row 0: the target
/// reviews), drafters ordered largest first, Max-Gram last. The decoder-only configuration of the
/// paper is {{2, 10}, {0, 10}}: the target reviews 2 tokens from the 68M level and 10 from Max-Gram,
/// and the 68M model reviews 10 Max-Gram tokens per call.
struct KMatrix {
    std::vector<std::vector<int>> k;

    int size() const { return static_cast<int>(k.size()); }
    /// Budgets of drafters r..n-1 at recursion depth r.
    std::vector<int> row(int r) const { return {k.at(r).begin() + r, k.at(r).end()}; }
    int row_sum(int r) const {
        int s = 0;
        for (int b : row(r)) s += b;
        return s;
    }

    void validate() const {
        const int n = size();
        detail::require(n >= 1, "cascade", [] { return std::string("K-matrix is empty"); });
        for (int r = 0; r < n; ++r) {
            detail::require(static_cast<int>(k[r].size()) == n, "cascade", [&] {
                return "K-matrix row " + std::to_string(r) + " has " + std::to_string(k[r].size()) +
                       " entries, expected " + std::to_string(n) + " (the matrix is square, one column per drafter)";
            });
            for (int c = 0; c < n; ++c) {
                detail::require(k[r][c] >= 0, "cascade", [&] {
                    return "K-matrix entry [" + std::to_string(r) + "][" + std::to_string(c) + "] = " +
                           std::to_string(k[r][c]) + ", budgets must be >= 0";
                });
                detail::require(c >= r || k[r][c] == 0, "cascade", [&] {
                    return "K-matrix entry [" + std::to_string(r) + "][" + std::to_string(c) + "] = " +
                           std::to_string(k[r][c]) + " lies below the diagonal (drafter " + std::to_string(c) +
                           " is larger than the reviewer of row " + std::to_string(r) + "); it must be 0";
                });
            }
            detail::require(row_sum(r) >= 1, "cascade", [&] {
                return "K-matrix row " + std::to_string(r) + " drafts nothing (every budget is 0)";
            });
        }
    }
};

}  // namespace specdec
