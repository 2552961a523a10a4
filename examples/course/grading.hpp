// examples/course/grading.hpp — what every checker of the course shares: a list of findings, printed for
// the student, and the exit code ctest reads (0: every criterion met).
// SPDX-License-Identifier: MIT
#pragma once

#include <specdec.hpp>

#include <exception>
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
