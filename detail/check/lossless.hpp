// specdec/detail/check/lossless.hpp — specdec::check: is a composition lossless? Greedy identity, the exact law of
// two tokens, each later token's law given the tokens before it, chi-square and TV against them, with a
// planted lossy control beside every verdict.
// SPDX-License-Identifier: MIT
#pragma once

// A composition is lossless when its output follows the target's (processed) law (docs/losslessness.md).
// Under greedy decoding that is a token-for-token equality; under sampling it is a statement about a
// law. A composition run over N fixed seeds generates as many tokens as its first step can emit (its
// drafts and the bonus below them); the first two must follow their exact joint law, from one target
// forward (the root and every first token as its children), and each later token the target's law
// after the tokens before it (one forward per prefix that came out), both by Pearson's chi-square at
// p = 0.001. A wrong residual at depth d shows in token d + 1, a wrong bonus below a full chain of
// gamma in token gamma + 1; an outcome of probability 0 is a loss on its own. Every verdict comes with
// a control: the same composition whose acceptor is replaced by one that keeps every draft
// (AcceptEveryDraft), checked at the same N: a report whose control passes has no power.
//
// Use (a complete program is tests/consumer/check_acceptor.cpp):
//
//     auto make = [&] { return check::Composition{ModelProposer(draft), Chain{.gamma = 3}, MyAcceptor{}}; };
//     const check::Report r = check::check_lossless(target, make, {{1, 4, 2}}, Sampling{.temperature = 1}, 2000);
//     std::cout << r;          // per prompt: chi-square, dof, critical, TV, verdict, and the control's
//     return r.ok() ? 0 : 1;   // lossless on every prompt, and the control caught on every prompt
//
// The statistics want a small vocabulary (the law of two tokens has V^2 cells; at most kMaxVocab tokens):
// a 6 to 16-token random model (random_weights, perturbed) is what the suite and the consumer test use.
// What N = 2000 can see: on that model a loss of TV 0.05 is caught about half the time, 0.075 almost
// always, below 0.03 rarely (docs/losslessness.md).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <ostream>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/concepts.hpp"
#include "../core/error.hpp"
#include "../core/sampling.hpp"
#include "../core/tree.hpp"
#include "../loop/generate.hpp"
#include "../policies/acceptors.hpp"
#include "../policies/next_token.hpp"
#include "../policies/tree_builders.hpp"
#include "../policies/verifier.hpp"

namespace specdec::check {

/// The first two generated tokens.
using TokenPair = std::pair<int, int>;
/// An exact law over pairs (probabilities; pairs of probability 0 are absent).
using Law = std::map<TokenPair, double>;
/// How often each pair came out.
using Counts = std::map<TokenPair, int>;

/// The policies of one composition; the verifier defaults to the one-forward TreeVerifier.
/// `check::Composition{ModelProposer(draft), Chain{.gamma = 3}, SpeculativeSampling{}}`.
template <class P, class B, class A, class Ver = TreeVerifier>
struct Composition {
    P proposer;
    B builder;
    A acceptor;
    Ver verifier{};
};
template <class P, class B, class A>
Composition(P, B, A) -> Composition<P, B, A>;
template <class P, class B, class A, class Ver>
Composition(P, B, A, Ver) -> Composition<P, B, A, Ver>;

/// The planted lossy control: keeps every draft along the first child of each node without looking at
/// the target, then draws the bonus from the target's law at the last node (argmax under greedy
/// decoding). Lossy whenever drafts are ever wrong; a check that passes it has no power.
struct AcceptEveryDraft {
    AcceptResult accept(const Tree& tree, Rows target_logits, const StepContext& ctx) const {
        AcceptResult r{{0}, 0};
        for (int node = 0;;) {
            const std::vector<int> kids = tree.children(node);
            if (kids.empty()) break;
            r.path.push_back(node = kids[0]);
        }
        const int last = r.path.back();
        if (ctx.sampling.greedy()) {
            r.bonus = argmax(target_logits.row(last));
            return r;
        }
        std::vector<float> p(target_logits.cols);
        processed_probs(target_logits.row(last), ctx.sampling, p);
        r.bonus = sample_index(p, ctx.rng.uniform(static_cast<std::uint32_t>(last), detail::kBonusCoin));
        return r;
    }
};

// ---- statistics

/// The largest vocabulary whose law of two tokens the check builds: kMaxVocab^2 = 16.8M pairs, about
/// 1.3 GB (the demo target's; specdec_bench --check-lossless and examples/bench/mcsd_study.cpp test its
/// peaked laws). Power wants far fewer: a few thousand runs populate a few hundred cells, so a flat law
/// over a large vocabulary pools into "no verdict"; a 6 to 16-token random model is what has power.
inline constexpr int kMaxVocab = 4096;

/// Pearson's statistic, its degrees of freedom (cells - 1), and how many observations fell on outcomes
/// the law gives probability 0 (each one a loss, whatever the statistic).
struct ChiSquare {
    double statistic = 0;
    int dof = 0;
    int impossible = 0;
};

/// Upper critical value of the chi-square distribution with `dof` degrees of freedom, `z` standard
/// deviations up (Wilson–Hilferty's cube-root normal approximation; z = 3.09: p = 0.001).
inline double chi_square_critical(int dof, double z = 3.09) {
    if (dof < 1) return 0.0;
    const double a = 2.0 / (9.0 * dof);
    return dof * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

/// Pearson's statistic of `n` observations against expected probabilities. Cells expected fewer than 5
/// times are pooled into one (the usual validity rule), then the smallest other cells join the pool
/// until it too is expected 5 times: a pool expected once or twice has a heavy tail (a right law at
/// T = 0.3 over 100 runs failed 0.26% of the time, not 0.1%; with the merge 0.15%). Observed outcomes
/// the law does not list (probability 0) go to the pool and are counted in `impossible`.
template <class Key>
ChiSquare chi_square(const std::map<Key, int>& observed, const std::map<Key, double>& expected, int n) {
    ChiSquare r;
    double pooled_obs = 0, pooled_exp = 0;
    std::vector<std::pair<double, double>> cells;  // (expected, observed) of the cells expected 5 times
    for (const auto& [key, p] : expected) {
        const auto it = observed.find(key);
        const double o = it == observed.end() ? 0.0 : it->second, e = p * n;
        if (e < 5.0) {
            pooled_obs += o;
            pooled_exp += e;
        } else {
            cells.emplace_back(e, o);
        }
    }
    for (const auto& [key, o] : observed)
        if (!expected.count(key)) {
            pooled_obs += o;
            r.impossible += o;
        }
    std::sort(cells.begin(), cells.end());
    std::size_t first = 0;
    for (; pooled_exp > 0 && pooled_exp < 5.0 && first < cells.size(); ++first) {
        pooled_exp += cells[first].first;
        pooled_obs += cells[first].second;
    }
    int k = 0;
    for (std::size_t i = first; i < cells.size(); ++i, ++k) {
        const auto [e, o] = cells[i];
        r.statistic += (o - e) * (o - e) / e;
    }
    if (pooled_exp > 0 || pooled_obs > 0) {
        // max(.., 1): an empty expected pool with observations in it still counts, as a cell of 1.
        r.statistic += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / std::max(pooled_exp, 1.0);
        ++k;
    }
    r.dof = k - 1;
    return r;
}

/// Total variation distance between the empirical law of `n` observations and `expected`:
/// 1/2 sum |o/n - e| over every outcome of either.
template <class Key>
double total_variation(const std::map<Key, int>& observed, const std::map<Key, double>& expected, int n) {
    double tv = 0.0;
    for (const auto& [key, p] : expected) {
        const auto it = observed.find(key);
        tv += std::abs((it == observed.end() ? 0.0 : double(it->second) / n) - p);
    }
    for (const auto& [key, o] : observed)
        if (!expected.count(key)) tv += double(o) / n;
    return tv / 2.0;
}

// ---- the laws

/// Exact P(t1, t2 | prompt) of `target` under `sampling`, from one forward of a tree: the prompt's last
/// token as the root and every token of the vocabulary as its child (the tree attention makes each
/// child's row the law after (prompt, child)). The tree holds vocab + 1 nodes: use a small vocabulary.
template <LanguageModel Model>
Law exact_two_token_law(Model& target, std::span<const int> prompt, const Sampling& sampling) {
    sampling.validate();
    const int V = target.vocab_size();
    detail::require(V <= kMaxVocab, "check", [&] {
        return "a vocabulary of " + std::to_string(V) + " tokens: the law of two tokens would hold " +
               std::to_string(static_cast<long long>(V) * V) + " pairs; the check builds it for at most " +
               std::to_string(kMaxVocab) + " tokens (and has power on 6 to 16: a small random model, as "
               "tests/consumer/check_acceptor.cpp)";
    });
    detail::require(!prompt.empty(), "check", [] { return std::string("the prompt is empty (it needs at least one token)"); });
    detail::require(static_cast<long>(prompt.size()) + 1 <= target.context_size(), "check", [&] {
        return "a prompt of " + std::to_string(prompt.size()) + " tokens leaves no room for two tokens in the target's context of " +
               std::to_string(target.context_size());
    });
    Law out;
    std::vector<float> p1(V), p2(V);
    target.reset();
    prefill(target, prompt.first(prompt.size() - 1));
    Tree t;
    t.add_root(prompt.back());
    for (int a = 0; a < V; ++a) t.add(a, 0);
    const Rows r = target.forward(t, 0);
    processed_probs(r.row(0), sampling, p1);
    for (int a = 0; a < V; ++a) {
        if (p1[a] <= 0.0f) continue;
        processed_probs(r.row(1 + a), sampling, p2);
        for (int b = 0; b < V; ++b)
            if (p2[b] > 0.0f) out[{a, b}] = double(p1[a]) * p2[b];
    }
    target.reset();
    return out;
}

/// How deep a builder drafts when nothing limits it: `gamma` (Chain, ExpandedChain), the levels of a
/// k-config (KAryTree), `max_depth` (PCT), `depth` (EAGLE-2); 0 for RootOnly; 7 when it says nothing.
template <class Builder>
int draft_depth(const Builder& b) {
    if constexpr (std::is_same_v<Builder, RootOnly>) return 0;
    else if constexpr (requires { b.gamma; }) return static_cast<int>(b.gamma);
    else if constexpr (requires { b.k_config.size(); }) return static_cast<int>(b.k_config.size());
    else if constexpr (requires { b.max_depth; }) return static_cast<int>(b.max_depth);
    else if constexpr (requires { b.depth; }) return static_cast<int>(b.depth);
    else return 7;
}

/// The generation length that lets a composition's first step draft as deep as its builder does (the
/// loop leaves max_new_tokens - 1 tokens of room after the root), and at least two tokens.
template <class Builder>
int two_token_length(const Builder& b) {
    return std::max(2, draft_depth(b) + 1);
}

/// The tokens of `runs` generations with seeds 0..runs-1, each `max_new_tokens` long (0:
/// two_token_length(builder): all that the first step can emit).
template <LanguageModel Target, class P, class B, class Ver, class A>
std::vector<std::vector<int>> sampled_generations(Target& target, P& proposer, B& builder, Ver& verifier, A& acceptor,
                                                  std::span<const int> prompt, const Sampling& sampling, int runs,
                                                  int max_new_tokens = 0) {
    detail::require(runs > 0, "check", [&] { return "runs must be > 0, got " + std::to_string(runs); });
    if (max_new_tokens <= 0) max_new_tokens = two_token_length(builder);
    std::vector<std::vector<int>> out;
    for (int seed = 0; seed < runs; ++seed)
        out.push_back(speculative_generate(target, proposer, builder, verifier, acceptor, prompt,
                                           GenerateOptions{.max_new_tokens = std::max(2, max_new_tokens),
                                                           .sampling = sampling,
                                                           .seed = static_cast<std::uint64_t>(seed)})
                          .tokens);
    return out;
}

/// How often each pair of first two tokens came out of `generations`.
inline Counts first_two_tokens(const std::vector<std::vector<int>>& generations) {
    Counts counts;
    for (const std::vector<int>& g : generations) ++counts[{g[0], g[1]}];
    return counts;
}

/// How often each pair of first two tokens came out of `runs` generations with seeds 0..runs-1, each
/// `max_new_tokens` long (0: two_token_length(builder)).
template <LanguageModel Target, class P, class B, class Ver, class A>
Counts sampled_two_token_law(Target& target, P& proposer, B& builder, Ver& verifier, A& acceptor,
                             std::span<const int> prompt, const Sampling& sampling, int runs, int max_new_tokens = 0) {
    return first_two_tokens(sampled_generations(target, proposer, builder, verifier, acceptor, prompt, sampling, runs, max_new_tokens));
}

/// The same over a composition made by `make()` (one Composition for all runs).
template <LanguageModel Target, class Make>
Counts sampled_two_token_law(Target& target, Make&& make, std::span<const int> prompt, const Sampling& sampling, int runs,
                             int max_new_tokens = 0) {
    auto c = make();
    return sampled_two_token_law(target, c.proposer, c.builder, c.verifier, c.acceptor, prompt, sampling, runs, max_new_tokens);
}

// ---- greedy identity

/// One prompt's greedy comparison: the composition's tokens against plain greedy decoding's.
struct GreedyResult {
    int first_difference = -1;  // index of the first differing token; -1: identical
    int n_target_calls = 0;     // the composition's target forwards (plain decoding: one per token)
    int n_tokens = 0;
    bool identical() const { return first_difference < 0; }
};

/// Runs the composition made by `make()` and plain greedy decoding on each prompt (temperature 0,
/// `max_new_tokens` each, the given seed: sampled trees draw their shape from it) and compares them.
template <LanguageModel Target, class Make>
std::vector<GreedyResult> greedy_identity(Target& target, Make&& make, const std::vector<std::vector<int>>& prompts,
                                          int max_new_tokens = 32, std::uint64_t seed = 0) {
    const GenerateOptions opts{.max_new_tokens = max_new_tokens, .seed = seed};
    std::vector<GreedyResult> out;
    for (const std::vector<int>& prompt : prompts) {
        const std::vector<int> plain = autoregressive_generate(target, prompt, opts).tokens;
        auto c = make();
        const Generation g = speculative_generate(target, c.proposer, c.builder, c.verifier, c.acceptor, prompt, opts);
        GreedyResult r{.n_target_calls = g.n_target_calls(), .n_tokens = static_cast<int>(g.tokens.size())};
        const auto [a, b] = std::mismatch(g.tokens.begin(), g.tokens.end(), plain.begin(), plain.end());
        if (a != g.tokens.end() || b != plain.end()) r.first_difference = static_cast<int>(a - g.tokens.begin());
        out.push_back(r);
    }
    return out;
}

// ---- the one call

/// One statistical comparison: the composition's (or the control's) tokens against the exact law.
struct LawCheck {
    ChiSquare chi;
    double critical = 0;  // chi_square_critical(chi.dof): p = 0.001
    double tv = 0;        // total variation distance of the empirical law from the exact one
    int outcomes = 0;     // outcomes of positive probability (1: a point mass, matched exactly or not at all)
    /// A loss seen: an impossible outcome, or the statistic past the critical value.
    bool fails() const { return chi.impossible > 0 || (chi.dof >= 1 && chi.statistic >= critical); }
    /// The law matched; a point mass is matched when nothing else came out.
    bool passes() const { return !fails() && (chi.dof >= 1 || outcomes == 1); }
    /// Neither: every cell pooled into one (too few runs for this law).
    bool inconclusive() const { return !fails() && !passes(); }
};

/// Tokens 3 onwards of `generations` (of `prompt`), each against the target's law after the prompt and
/// the tokens before it: for each position and each prefix that came out at least 5 times, the tokens
/// that followed it against the law of one target forward. Given the prefixes the statistics are
/// independent, so they add up, dof included. `tv`: per position, the TV of each prefix's tally weighted
/// by how often the prefix came out, then the largest over positions.
template <LanguageModel Target>
LawCheck later_tokens_check(Target& target, std::span<const int> prompt, const Sampling& sampling,
                            const std::vector<std::vector<int>>& generations) {
    LawCheck out;
    std::size_t length = 0;
    for (const std::vector<int>& g : generations) length = std::max(length, g.size());
    for (std::size_t j = 2; j < length; ++j) {
        std::map<std::vector<int>, std::map<int, int>> after;  // prefix (tokens 0..j-1) -> tally of token j
        for (const std::vector<int>& g : generations)
            if (g.size() > j) ++after[std::vector<int>(g.begin(), g.begin() + j)][g[j]];
        double tv = 0.0;
        for (const auto& [prefix, tally] : after) {
            int n = 0;
            for (const auto& [token, count] : tally) n += count;
            if (n < 5) continue;  // every cell would pool into one: nothing to test
            std::vector<int> text(prompt.begin(), prompt.end());
            text.insert(text.end(), prefix.begin(), prefix.end());
            const std::vector<float> p = next_token_distribution(target, text, sampling);
            std::map<int, double> law;
            for (int t = 0; t < static_cast<int>(p.size()); ++t)
                if (p[t] > 0.0f) law[t] = p[t];
            const ChiSquare c = chi_square(tally, law, n);
            out.chi.statistic += c.statistic;
            out.chi.dof += std::max(c.dof, 0);
            out.chi.impossible += c.impossible;
            out.outcomes = std::max(out.outcomes, static_cast<int>(law.size()));
            tv += total_variation(tally, law, n) * n / static_cast<double>(generations.size());
        }
        out.tv = std::max(out.tv, tv);
    }
    out.critical = chi_square_critical(out.chi.dof);
    return out;
}

/// One prompt of a report. Under sampling `law` and `control` hold the first two tokens' statistics and
/// `later` and `control_later` those of the tokens after them; under greedy decoding `greedy` and
/// `greedy_control` (the first seed where the composition differs, else seed 0).
struct PromptCheck {
    std::vector<int> prompt;
    LawCheck law, control;
    GreedyResult greedy, greedy_control;
    LawCheck later, control_later;
};

/// What check_lossless found. `lossless()`: every prompt passes; `powered()`: the planted control
/// failed on every prompt (else the check could not have seen a loss); `ok()`: both.
struct Report {
    Sampling sampling;
    int runs = 0;  // generations per prompt (sampling) or seeds per prompt (greedy)
    std::vector<PromptCheck> prompts;

    bool greedy() const { return sampling.greedy(); }
    bool passes(const PromptCheck& p) const {
        return greedy() ? p.greedy.identical() : p.law.passes() && !p.later.fails();
    }
    bool fails(const PromptCheck& p) const {
        return greedy() ? !p.greedy.identical() : p.law.fails() || p.later.fails();
    }
    bool control_caught(const PromptCheck& p) const {
        return greedy() ? !p.greedy_control.identical() : p.control.fails() || p.control_later.fails();
    }
    bool lossless() const {
        return !prompts.empty() && std::all_of(prompts.begin(), prompts.end(), [&](const PromptCheck& p) { return passes(p); });
    }
    bool powered() const {
        return !prompts.empty() && std::all_of(prompts.begin(), prompts.end(), [&](const PromptCheck& p) { return control_caught(p); });
    }
    bool ok() const { return lossless() && powered(); }

    /// One line per prompt, then the verdict (the layout is in docs/losslessness.md).
    std::string to_string() const {
        std::string s;
        const auto format = [](const char* f, auto... args) {
            char line[512];
            std::snprintf(line, sizeof line, f, args...);
            return std::string(line);
        };
        const auto law = [&](const LawCheck& c, const char* pass) {
            return format("chi2 %.1f dof %d critical %.1f TV %.4f", c.chi.statistic, c.chi.dof, c.critical, c.tv) +
                   (c.chi.impossible > 0 ? format(", %d impossible", c.chi.impossible) : std::string()) + " -> " +
                   (c.fails() ? (pass[0] == 'p' ? "FAIL" : "caught") : c.passes() ? pass : "too few cells");
        };
        if (greedy()) {
            s += format("greedy identity with plain decoding, %d seed(s) per prompt\n", runs);
        } else {
            s += format("first two tokens vs the exact law, then each later token vs the target's law after the tokens before "
                        "it: %d runs per prompt, temperature %g, top-k %d, top-p %g, chi-square at p = 0.001\n",
                        runs, double(sampling.temperature), sampling.top_k, double(sampling.top_p));
        }
        for (std::size_t i = 0; i < prompts.size(); ++i) {
            const PromptCheck& p = prompts[i];
            const auto differs = [](const GreedyResult& g) {
                return g.identical() ? std::string("identical") : "differs at token " + std::to_string(g.first_difference);
            };
            if (greedy()) {
                s += format("prompt %zu: %s (%d tokens, %d target forwards) | control (accept every draft): %s -> %s\n", i,
                            differs(p.greedy).c_str(), p.greedy.n_tokens, p.greedy.n_target_calls,
                            differs(p.greedy_control).c_str(), control_caught(p) ? "caught" : "NOT caught");
                continue;
            }
            const bool deeper = p.later.chi.dof > 0 || p.later.chi.impossible > 0 || p.control_later.chi.dof > 0;
            s += format("prompt %zu: %s", i, law(p.law, "pass").c_str());
            if (deeper) s += "; later tokens: " + law(p.later, "pass");
            s += " | control (accept every draft): " + law(p.control, "NOT caught");
            if (deeper) s += "; later tokens: " + law(p.control_later, "NOT caught");
            s += "\n";
        }
        if (lossless()) {
            s += greedy() ? "verdict: identical to plain greedy decoding on every prompt (sampling not checked)"
                          : format("verdict: lossless on every prompt at temperature %g, top-k %d, top-p %g",
                                   double(sampling.temperature), sampling.top_k, double(sampling.top_p));
        } else {
            const bool failed = std::any_of(prompts.begin(), prompts.end(), [&](const PromptCheck& p) { return fails(p); });
            s += failed ? "verdict: NOT lossless" : "verdict: no verdict (every cell pooled into one on some prompt: raise the runs)";
        }
        s += powered() ? "; the control was caught on every prompt (the check sees a loss that large; how small a loss "
                         "it sees: docs/losslessness.md)\n"
                       : "; the control was NOT caught on every prompt, so there the check could not see a loss: the "
                         "drafts already follow the target (a drafter equal to it?) or the runs are too few; use a weaker "
                         "drafter or raise the runs\n";
        return s;
    }
};

inline std::ostream& operator<<(std::ostream& os, const Report& r) { return os << r.to_string(); }

/// Checks the composition `make()` returns against `target` on each prompt, and the same composition
/// with AcceptEveryDraft beside it. Under sampling: `runs` generations per prompt (seeds 0..runs-1), as
/// long as the first step can emit; the first two tokens against exact_two_token_law, the later ones by
/// later_tokens_check. Under greedy decoding: greedy_identity over 64 tokens (fewer where the context
/// ends) at seeds 0..min(runs, 8)-1 (the seed shapes sampled trees).
/// `make` is called once per prompt (and once more for the control): a fresh proposer state each time.
template <LanguageModel Target, class Make>
Report check_lossless(Target& target, Make&& make, const std::vector<std::vector<int>>& prompts, const Sampling& sampling,
                      int runs) {
    sampling.validate();
    detail::require(!prompts.empty(), "check", [] { return std::string("no prompts to check"); });
    detail::require(runs > 0, "check", [&] { return "runs must be > 0, got " + std::to_string(runs); });
    Report report{.sampling = sampling, .runs = sampling.greedy() ? std::min(runs, 8) : runs, .prompts = {}};
    for (const std::vector<int>& prompt : prompts) {
        PromptCheck pc{.prompt = prompt, .law = {}, .control = {}, .greedy = {}, .greedy_control = {}, .later = {}, .control_later = {}};
        auto control = [&] {
            auto c = make();
            return Composition{std::move(c.proposer), std::move(c.builder), AcceptEveryDraft{}, std::move(c.verifier)};
        };
        const int room = target.context_size() - static_cast<int>(prompt.size());
        if (sampling.greedy()) {
            const int length = std::min(64, room);
            detail::require(length >= 2, "check", [&] {
                return "a prompt of " + std::to_string(prompt.size()) + " tokens leaves " + std::to_string(room) +
                       " of the target's context of " + std::to_string(target.context_size()) + " for the greedy comparison (it needs 2)";
            });
            const auto first_difference = [&](auto&& composition, GreedyResult& out) {
                for (int seed = 0; seed < report.runs; ++seed) {
                    const GreedyResult r = greedy_identity(target, composition, {prompt}, length, static_cast<std::uint64_t>(seed))[0];
                    if (seed == 0 || !r.identical()) out = r;
                    if (!r.identical()) break;
                }
            };
            first_difference(make, pc.greedy);
            first_difference(control, pc.greedy_control);
        } else {
            const Law expected = exact_two_token_law(target, prompt, sampling);
            const auto score = [&](auto&& composition, LawCheck& first, LawCheck& later) {
                auto c = composition();
                const int length = two_token_length(c.builder);
                detail::require(length <= room, "check", [&] {
                    return "a prompt of " + std::to_string(prompt.size()) + " tokens leaves " + std::to_string(room) +
                           " of the target's context of " + std::to_string(target.context_size()) + ", and the check generates " +
                           std::to_string(length) + " (all that the builder's first step can emit)";
                });
                const std::vector<std::vector<int>> generations =
                    sampled_generations(target, c.proposer, c.builder, c.verifier, c.acceptor, prompt, sampling, runs, length);
                const Counts observed = first_two_tokens(generations);
                first = LawCheck{.chi = chi_square(observed, expected, runs), .critical = 0,
                                 .tv = total_variation(observed, expected, runs), .outcomes = static_cast<int>(expected.size())};
                first.critical = chi_square_critical(first.chi.dof);
                later = later_tokens_check(target, prompt, sampling, generations);
            };
            score(make, pc.law, pc.later);
            score(control, pc.control, pc.control_later);
        }
        report.prompts.push_back(std::move(pc));
    }
    return report;
}

}  // namespace specdec::check
