// examples/course/check_ex7.cpp — the checker of exercise 7 (ex7_speedup_model.md): compiled with the
// student's file as COURSE_FILE, it grades course::expected_tokens and course::predicted_speedup on a
// table of inputs and on cases drawn over the whole parameter range (against a long-double sum), then
// measures alpha, c and verify(gamma+1)/verify(1) on this machine and prints the prediction beside the
// measured speedup (information only: a timing is never a criterion).
// SPDX-License-Identifier: MIT
#include "grading.hpp"

#include COURSE_FILE

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <random>
#include <string>
#include <vector>

using namespace specdec;

namespace {

struct Case {
    double alpha;
    int gamma;
    double c, verify_ratio;
    double tokens, speedup;  // the expected values
};

// The expected values of the model in the statement, to 12 digits.
constexpr Case kCases[] = {
    {0.0, 4, 0.05, 1.0, 1.000000000000, 0.833333333333}, {0.5, 4, 0.05, 1.0, 1.937500000000, 1.614583333333},
    {0.8, 4, 0.05, 1.2, 3.361600000000, 2.401142857143}, {0.8, 8, 0.1, 1.5, 4.328911360000, 1.882135373913},
    {0.9, 3, 0.02, 1.1, 3.439000000000, 2.964655172414}, {1.0, 4, 0.05, 1.0, 5.000000000000, 4.166666666667},
    {0.6, 1, 0.3, 1.0, 1.600000000000, 1.230769230769}, {0.75, 5, 0.0, 2.0, 3.288085937500, 1.644042968750},
};

/// The model's exact values in long double: 1 + alpha + ... + alpha^gamma (no division, no limit to take),
/// over gamma * c + verify_ratio.
Case exact(double alpha, int gamma, double c, double verify_ratio) {
    long double tokens = 0, power = 1;
    for (int i = 0; i <= gamma; ++i, power *= alpha) tokens += power;
    return {alpha, gamma, c, verify_ratio, static_cast<double>(tokens),
            static_cast<double>(tokens / (static_cast<long double>(gamma) * c + verify_ratio))};
}

/// Cases drawn over the whole parameter range from a fixed seed: alpha uniform in [0, 1), near 1 (1 - 10^-u,
/// u uniform in [1, 6]: the range where a too wide "alpha = 1" guard shows), exactly 0 and 1; gamma 1 to 16;
/// c in [0, 1]; verify_ratio in [1, 4].
std::vector<Case> drawn_cases(int n) {
    std::mt19937_64 rng(20240607);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<Case> out;
    for (int i = 0; i < n; ++i) {
        double alpha = unit(rng);
        if (i % 4 == 1) alpha = 1.0 - std::pow(10.0, -(1.0 + 5.0 * unit(rng)));
        if (i % 50 == 7) alpha = 0.0;
        if (i % 50 == 32) alpha = 1.0;
        const int gamma = 1 + static_cast<int>(rng() % 16);
        const double c = unit(rng), verify_ratio = 1.0 + 3.0 * unit(rng);
        out.push_back(exact(alpha, gamma, c, verify_ratio));
    }
    return out;
}

std::string num(double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.12g", x);
    return b;
}

bool close(double a, double b) { return std::isfinite(a) && std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

std::string show(const Case& k) {
    char s[128];
    std::snprintf(s, sizeof s, "alpha %.12g, gamma %d, c %.6g, verify ratio %.6g", k.alpha, k.gamma, k.c, k.verify_ratio);
    return s;
}

}  // namespace

int main() {
    return course::run("exercise 7: predict the speedup", [](course::Grade& g) {
        // 1. The formulas on the table, on alpha 0.995 (gamma 8), and on 400 cases drawn over the whole range.
        std::vector<Case> cases(std::begin(kCases), std::end(kCases));
        cases.push_back(exact(0.995, 8, 0.05, 1.3));
        const std::vector<Case> drawn = drawn_cases(400);
        cases.insert(cases.end(), drawn.begin(), drawn.end());
        std::string wrong_tokens, wrong_speedup;
        for (const Case& k : cases) {
            const double t = course::expected_tokens(k.alpha, k.gamma);
            if (wrong_tokens.empty() && !close(t, k.tokens))
                wrong_tokens = show(k) + ": yours " + num(t) + ", expected " + num(k.tokens);
            const double s = course::predicted_speedup(k.alpha, k.gamma, k.c, k.verify_ratio);
            if (wrong_speedup.empty() && !close(s, k.speedup))
                wrong_speedup = show(k) + ": yours " + num(s) + ", expected " + num(k.speedup);
        }
        g.check(wrong_tokens.empty(), "expected_tokens on " + std::to_string(cases.size()) + " cases (8 fixed, alpha 0.995, 400 drawn: alpha in [0, 1), "
                                      "alpha near 1, alpha = 0 and 1; gamma 1 to 16), to 1e-9 relative" +
                                          (wrong_tokens.empty() ? "" : " -- " + wrong_tokens),
                "count the bonus token: a step commits the accepted drafts and one token of the target's; alpha = 1 is a limit, "
                "and the formula holds right up to it (alpha = 0.995 is not 1)");
        g.check(wrong_speedup.empty(), "predicted_speedup on the same cases" + (wrong_speedup.empty() ? "" : " -- " + wrong_speedup),
                "one step costs gamma drafter forwards and one verification of gamma + 1 tokens, in target forwards of one token");

        // 2. This machine (printed, never graded: timings depend on the load). Small random models, vanilla SD.
        const Config big{.hidden_size = 128, .intermediate_size = 256, .num_hidden_layers = 4, .num_attention_heads = 4,
                         .num_key_value_heads = 2, .vocab_size = 64, .max_position_embeddings = 256};
        const Config small{.hidden_size = 32, .intermediate_size = 64, .num_hidden_layers = 1, .num_attention_heads = 2,
                           .num_key_value_heads = 1, .vocab_size = 64, .max_position_embeddings = 256};
        CpuModel target(big, random_weights(big, 7, 0.3f)), draft(small, random_weights(small, 8, 0.3f));
        const int gamma = 4;
        // Cost of one forward over n tokens (a chain on an empty cache), the median of 31 runs.
        const auto forward_seconds = [](CpuModel& model, int n) {
            Tree t;
            for (int i = 0; i < n; ++i) t.add(i % 7, i - 1);
            std::vector<double> s;
            for (int r = 0; r < 31; ++r) {
                model.reset();
                const auto t0 = std::chrono::steady_clock::now();
                model.forward(t, 0);
                s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            }
            std::nth_element(s.begin(), s.begin() + 15, s.end());
            return s[15];
        };
        const double c = forward_seconds(draft, 1) / forward_seconds(target, 1);
        const double ratio = forward_seconds(target, gamma + 1) / forward_seconds(target, 1);
        target.reset(), draft.reset();

        // alpha from a run where the drafter is the target itself, perturbed: kept drafts per step solve
        // E[kept] = alpha + ... + alpha^gamma (a chain stops at its first rejection).
        CpuModel near(big, perturbed(big, random_weights(big, 7, 0.3f), 0.05f, 9));
        const std::vector<int> prompt{1, 4, 2, 7};
        const GenerateOptions opts{.max_new_tokens = 64};
        ModelProposer proposer(near);
        Chain chain{.gamma = gamma};
        TreeVerifier verifier;
        GreedyMatch acceptor;
        const auto t0 = std::chrono::steady_clock::now();
        const Generation sd = speculative_generate(target, proposer, chain, verifier, acceptor, prompt, opts);
        const auto t1 = std::chrono::steady_clock::now();
        autoregressive_generate(target, prompt, opts);
        const auto t2 = std::chrono::steady_clock::now();
        double kept = 0;
        for (const StepRecord& s : sd.steps) kept += s.n_accepted;
        kept /= static_cast<double>(sd.steps.size());
        double lo = 0, hi = 1;
        for (int i = 0; i < 60; ++i) {
            const double a = (lo + hi) / 2;
            double e = 0, power = 1;
            for (int d = 1; d <= gamma; ++d) e += (power *= a);
            (e < kept ? lo : hi) = a;
        }
        const double alpha = (lo + hi) / 2;
        std::printf("  this machine: alpha %.3f (drafts kept per step %.2f of %d), c %.3f (a 1-layer drafter), "
                    "verify(%d)/verify(1) %.2f\n",
                    alpha, kept, gamma, c, gamma + 1, ratio);
        // The drafter of the alpha run is as large as the target (c near 1): its speedup is below 1.
        const double c_near = forward_seconds(near, 1) / forward_seconds(target, 1);
        target.reset(), near.reset();
        std::printf("  your prediction for that run (c %.2f): tau %.3f (measured %.3f), speedup %.2f (measured %.2f)\n",
                    c_near, course::expected_tokens(alpha, gamma), sd.tau(), course::predicted_speedup(alpha, gamma, c_near, ratio),
                    std::chrono::duration<double>(t2 - t1).count() / std::chrono::duration<double>(t1 - t0).count());
        std::printf("  and with the 1-layer drafter's c at the same alpha: speedup %.2f (a prediction only)\n",
                    course::predicted_speedup(alpha, gamma, c, ratio));
    });
}
