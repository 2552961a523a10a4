// examples/course/grading.hpp — what every checker of the course shares: a list of findings, printed for
// the student, and the exit code ctest reads (0: every criterion met).
// SPDX-License-Identifier: MIT
#pragma once

#include <specdec.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <utility>
#include <iostream>
#include <string>
#include <vector>

namespace course {

/// The findings of one checker run: each criterion passes or fails with a sentence a student can act on.
class Grade {
public:
    explicit Grade(std::string exercise) : exercise_(std::move(exercise)) {
        std::cout << "== " << exercise_ << "\n";
    }
    void pass(const std::string& what) { std::cout << "  ok   " << what << "\n"; }
    void fail(const std::string& what, const std::string& hint = {}) {
        std::cout << "  FAIL " << what << "\n";
        if (!hint.empty()) std::cout << "       hint: " << hint << "\n";
        ++failures_;
    }
    void check(bool ok, const std::string& what, const std::string& hint = {}) { ok ? pass(what) : fail(what, hint); }
    /// Prints the verdict and returns the exit code.
    int verdict() const {
        if (failures_ == 0) std::cout << "PASS: " << exercise_ << ": every criterion met\n";
        else std::cout << "NOT PASSED: " << exercise_ << ": " << failures_ << " criterion(s) failed (see FAIL above)\n";
        return failures_ == 0 ? 0 : 1;
    }

private:
    std::string exercise_;
    int failures_ = 0;
};

/// Runs `body(grade)`; an exception from the student's code (the starter throws "not implemented") is a
/// failed criterion with its message, never a crash.
template <class Body>
int run(const std::string& exercise, Body&& body) {
    Grade g(exercise);
    try {
        body(g);
    } catch (const std::exception& e) {
        g.fail(std::string("your code threw: ") + e.what());
    }
    return g.verdict();
}

/// A sampling setting with a temperature other than 1, top-k and top-p, on a vocabulary other than
/// TinyModels' default: a policy that computes the target's law by hand and forgets one of the three (or
/// that assumes 6 tokens) shows there. On these tiny models each of the three binds: the exact law of the
/// first two tokens moves by a total variation of at least 0.10 on both checkers' prompts when any one of
/// them is left out (temperature 1, no top-k, or top-p 1), and 10 to 18 of its pairs are expected 5 times
/// or more in 2000 runs.
inline constexpr int kWarmVocab = 8;
inline const specdec::Sampling kWarm{.temperature = 1.6f, .top_k = 5, .top_p = 0.9f};

/// The setting in words, for a criterion's line.
inline std::string describe(const specdec::Sampling& s, int vocab) {
    char line[160];
    std::snprintf(line, sizeof line, "temperature %g, top-k %d, top-p %g, vocabulary %d", double(s.temperature), s.top_k,
                  double(s.top_p), vocab);
    return line;
}

/// Two samples of the same size `n` (counts of the first two tokens) against each other: is it plausible
/// that they come from one law? Pearson's two-sample statistic sum (a - b)^2 / (a + b) over the pairs,
/// pairs seen fewer than 10 times in both samples together pooled into one cell, dof = cells - 1,
/// critical value at p = 0.001; and the total variation between the two empirical laws. When the two
/// samples share their seeds (one composition's coins reused by the other), they are positively coupled
/// and the test is conservative: it fails only laws that really differ.
struct SameLaw {
    specdec::check::ChiSquare chi;
    double critical = 0, tv = 0;
    bool passes() const { return chi.dof < 1 || chi.statistic < critical; }
};
inline SameLaw same_law(const specdec::check::Counts& a, const specdec::check::Counts& b, int n) {
    std::map<specdec::check::TokenPair, std::pair<int, int>> both;
    for (const auto& [k, v] : a) both[k].first += v;
    for (const auto& [k, v] : b) both[k].second += v;
    SameLaw r;
    double pool_a = 0, pool_b = 0;
    int cells = 0;
    for (const auto& [k, ab] : both) {
        r.tv += std::abs(double(ab.first) - ab.second) / (2.0 * n);
        if (ab.first + ab.second < 10) {
            pool_a += ab.first;
            pool_b += ab.second;
            continue;
        }
        r.chi.statistic += double(ab.first - ab.second) * (ab.first - ab.second) / (ab.first + ab.second);
        ++cells;
    }
    if (pool_a + pool_b > 0) {
        r.chi.statistic += (pool_a - pool_b) * (pool_a - pool_b) / (pool_a + pool_b);
        ++cells;
    }
    r.chi.dof = cells - 1;
    r.critical = specdec::check::chi_square_critical(r.chi.dof);
    return r;
}

/// How far two total variations measured over the same `n` seeds (seeds 0..n-1, as check_lossless runs
/// them) may differ when both measure one composition's law: a seed changes either empirical law by 1/n,
/// so McDiarmid's inequality bounds |tv1 - tv2| by sqrt(2 ln(2 / 0.001) / n) but with probability 0.001.
inline double tv_tolerance(int n) { return std::sqrt(2.0 * std::log(2.0 / 0.001) / n); }

/// The tiny models every checker uses: a random target over `vocab` tokens and a drafter near it (its
/// weights perturbed), so that drafts are often but not always right and a wrong acceptor shows.
struct TinyModels {
    specdec::Config cfg;
    specdec::CpuModel target, draft;
    explicit TinyModels(int vocab = 6, float perturbation = 0.8f)
        : cfg{.hidden_size = 32, .intermediate_size = 48, .num_hidden_layers = 2, .num_attention_heads = 4,
              .num_key_value_heads = 2, .vocab_size = vocab, .max_position_embeddings = 128},
          target(cfg, specdec::random_weights(cfg, 2024, 0.3f)),
          draft(cfg, specdec::perturbed(cfg, specdec::random_weights(cfg, 2024, 0.3f), perturbation, 77)) {}
};

}  // namespace course
