// specdec/detail/check/lossless.hpp — specdec::check: is a composition lossless? Greedy identity, the exact law of
// two tokens, chi-square and TV against it, with a planted lossy control beside every verdict.
// SPDX-License-Identifier: MIT
#pragma once

// A composition is lossless when its output follows the target's (processed) law (docs/losslessness.md).
// Under greedy decoding that is a token-for-token equality; under sampling it is a statement about a
// law, tested on the first two generated tokens: their exact joint law comes from one target forward
// (the root and every first token as its children), and a composition run over N fixed seeds must
// match it (Pearson's chi-square at p = 0.001). The second token is where a wrong residual shows.
// Every verdict comes with a control: the same composition whose acceptor is replaced by one that keeps
// every draft (AcceptEveryDraft), checked at the same N: a report whose control passes has no power.
//
// Use (a complete program is tests/consumer/check_acceptor.cpp):
//
//     auto make = [&] { return check::Composition{ModelProposer(draft), Chain{.gamma = 3}, MyAcceptor{}}; };
//     const check::Report r = check::check_lossless(target, make, {{1, 4, 2}}, Sampling{.temperature = 1}, 2000);
//     std::cout << r;          // per prompt: chi-square, dof, critical, TV, verdict, and the control's
//     return r.ok() ? 0 : 1;   // lossless on every prompt, and the control caught on every prompt
//
// The statistics assume a small vocabulary (the law of two tokens has V^2 cells): a 6 to 16-token
// random model (random_weights, perturbed) is what the suite and the consumer test use.

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

/// Pearson's statistic and its degrees of freedom (populated cells - 1).
struct ChiSquare {
    double statistic = 0;
    int dof = 0;
};

/// Upper critical value of the chi-square distribution with `dof` degrees of freedom, `z` standard
/// deviations up (Wilson–Hilferty's cube-root normal approximation; z = 3.09: p = 0.001).
inline double chi_square_critical(int dof, double z = 3.09) {
    if (dof < 1) return 0.0;
    const double a = 2.0 / (9.0 * dof);
    return dof * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

/// Pearson's statistic of `n` observations against expected probabilities. Cells expected fewer than 5
/// times are pooled into one (the usual validity rule), and so are observed outcomes the expected law
/// does not list (probability 0): an impossible outcome observed often makes the pool large.
template <class Key>
ChiSquare chi_square(const std::map<Key, int>& observed, const std::map<Key, double>& expected, int n) {
    ChiSquare r;
    double pooled_obs = 0, pooled_exp = 0;
    int cells = 0;
    for (const auto& [key, p] : expected) {
        const auto it = observed.find(key);
        const double o = it == observed.end() ? 0.0 : it->second, e = p * n;
        if (e < 5.0) {
            pooled_obs += o;
            pooled_exp += e;
            continue;
        }
        r.statistic += (o - e) * (o - e) / e;
        ++cells;
    }
    for (const auto& [key, o] : observed)
        if (!expected.count(key)) pooled_obs += o;
    if (pooled_exp > 0 || pooled_obs > 0) {
        // max(.., 1): an empty expected pool with observations in it still counts, as a cell of 1.
        r.statistic += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / std::max(pooled_exp, 1.0);
        ++cells;
    }
    r.dof = cells - 1;
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

/// How often each pair of first two tokens came out of `runs` generations with seeds 0..runs-1, each
/// `max_new_tokens` long (0: two_token_length(builder)).
template <LanguageModel Target, class P, class B, class Ver, class A>
Counts sampled_two_token_law(Target& target, P& proposer, B& builder, Ver& verifier, A& acceptor,
                             std::span<const int> prompt, const Sampling& sampling, int runs, int max_new_tokens = 0) {
    detail::require(runs > 0, "check", [&] { return "runs must be > 0, got " + std::to_string(runs); });
    if (max_new_tokens <= 0) max_new_tokens = two_token_length(builder);
    Counts counts;
    for (int seed = 0; seed < runs; ++seed) {
        const Generation g = speculative_generate(
            target, proposer, builder, verifier, acceptor, prompt,
            GenerateOptions{.max_new_tokens = std::max(2, max_new_tokens), .sampling = sampling, .seed = static_cast<std::uint64_t>(seed)});
        ++counts[{g.tokens[0], g.tokens[1]}];
    }
    return counts;
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

/// One statistical comparison: the composition's (or the control's) first two tokens against the law.
struct LawCheck {
    ChiSquare chi;
    double critical = 0;  // chi_square_critical(chi.dof): p = 0.001
    double tv = 0;        // total variation distance of the empirical law from the exact one
    bool passes() const { return chi.dof >= 1 && chi.statistic < critical; }
};

/// One prompt of a report. Under sampling `law` and `control` hold the statistics; under greedy decoding
/// `greedy` and `greedy_control` (taken at the first seed where the composition differs, else seed 0).
struct PromptCheck {
    std::vector<int> prompt;
    LawCheck law, control;
    GreedyResult greedy, greedy_control;
};

/// What check_lossless found. `lossless()`: every prompt passes; `powered()`: the planted control
/// failed on every prompt (else the check could not have seen a loss); `ok()`: both.
struct Report {
    Sampling sampling;
    int runs = 0;  // generations per prompt (sampling) or seeds per prompt (greedy)
    std::vector<PromptCheck> prompts;

    bool greedy() const { return sampling.greedy(); }
    bool passes(const PromptCheck& p) const { return greedy() ? p.greedy.identical() : p.law.passes(); }
    bool control_caught(const PromptCheck& p) const {
        return greedy() ? !p.greedy_control.identical() : p.control.chi.dof >= 1 && !p.control.passes();
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
        char line[256];
        if (greedy()) {
            std::snprintf(line, sizeof line, "greedy identity with plain decoding, %d seed(s) per prompt\n", runs);
            s += line;
        } else {
            std::snprintf(line, sizeof line,
                          "first two tokens vs the exact law: %d runs per prompt, temperature %g, top-k %d, top-p %g, "
                          "chi-square at p = 0.001\n",
                          runs, double(sampling.temperature), sampling.top_k, double(sampling.top_p));
            s += line;
        }
        for (std::size_t i = 0; i < prompts.size(); ++i) {
            const PromptCheck& p = prompts[i];
            if (greedy()) {
                std::snprintf(line, sizeof line,
                              "prompt %zu: %s (%d tokens, %d target forwards) | control (accept every draft): %s -> %s\n", i,
                              p.greedy.identical() ? "identical" : ("differs at token " + std::to_string(p.greedy.first_difference)).c_str(),
                              p.greedy.n_tokens, p.greedy.n_target_calls,
                              p.greedy_control.identical() ? "identical"
                                                           : ("differs at token " + std::to_string(p.greedy_control.first_difference)).c_str(),
                              control_caught(p) ? "caught" : "NOT caught");
            } else {
                std::snprintf(line, sizeof line,
                              "prompt %zu: chi2 %.1f dof %d critical %.1f TV %.4f -> %s | control (accept every draft): "
                              "chi2 %.1f dof %d critical %.1f TV %.4f -> %s\n",
                              i, p.law.chi.statistic, p.law.chi.dof, p.law.critical, p.law.tv,
                              p.law.chi.dof < 1 ? "too few cells" : p.law.passes() ? "pass" : "FAIL", p.control.chi.statistic,
                              p.control.chi.dof, p.control.critical, p.control.tv, control_caught(p) ? "caught" : "NOT caught");
            }
            s += line;
        }
        s += lossless() ? "verdict: lossless on every prompt" : "verdict: NOT lossless";
        s += powered() ? "; the control was caught on every prompt (the check has power)\n"
                       : "; the control was NOT caught on every prompt (no power there: the composition drafts too "
                         "little, or raise the runs)\n";
        return s;
    }
};

inline std::ostream& operator<<(std::ostream& os, const Report& r) { return os << r.to_string(); }

/// Checks the composition `make()` returns against `target` on each prompt, and the same composition
/// with AcceptEveryDraft beside it. Under sampling: `runs` generations per prompt (seeds 0..runs-1), the
/// first two tokens against exact_two_token_law. Under greedy decoding: greedy_identity over 32 tokens
/// at seeds 0..min(runs, 8)-1 (the seed shapes sampled trees).
/// `make` is called once per prompt (and once more for the control): a fresh proposer state each time.
template <LanguageModel Target, class Make>
Report check_lossless(Target& target, Make&& make, const std::vector<std::vector<int>>& prompts, const Sampling& sampling,
                      int runs) {
    sampling.validate();
    detail::require(!prompts.empty(), "check", [] { return std::string("no prompts to check"); });
    detail::require(runs > 0, "check", [&] { return "runs must be > 0, got " + std::to_string(runs); });
    Report report{.sampling = sampling, .runs = sampling.greedy() ? std::min(runs, 8) : runs, .prompts = {}};
    for (const std::vector<int>& prompt : prompts) {
        PromptCheck pc{.prompt = prompt, .law = {}, .control = {}, .greedy = {}, .greedy_control = {}};
        auto control = [&] {
            auto c = make();
            return Composition{std::move(c.proposer), std::move(c.builder), AcceptEveryDraft{}, std::move(c.verifier)};
        };
        if (sampling.greedy()) {
            bool differed = false;
            for (int seed = 0; seed < report.runs && !differed; ++seed) {
                pc.greedy = greedy_identity(target, make, {prompt}, 32, static_cast<std::uint64_t>(seed))[0];
                differed = !pc.greedy.identical();
            }
            for (int seed = 0; seed < report.runs; ++seed) {
                pc.greedy_control = greedy_identity(target, control, {prompt}, 32, static_cast<std::uint64_t>(seed))[0];
                if (!pc.greedy_control.identical()) break;
            }
        } else {
            const Law expected = exact_two_token_law(target, prompt, sampling);
            const auto score = [&](const Counts& observed) {
                LawCheck c{.chi = chi_square(observed, expected, runs), .critical = 0, .tv = total_variation(observed, expected, runs)};
                c.critical = chi_square_critical(c.chi.dof);
                return c;
            };
            pc.law = score(sampled_two_token_law(target, make, prompt, sampling, runs));
            pc.control = score(sampled_two_token_law(target, control, prompt, sampling, runs));
        }
        report.prompts.push_back(std::move(pc));
    }
    return report;
}

}  // namespace specdec::check
