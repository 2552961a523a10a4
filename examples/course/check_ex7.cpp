// examples/course/check_ex7.cpp — the checker of exercise 7 (ex7_speedup_model.md): compiled with the
// student's file as COURSE_FILE, it grades course::expected_tokens and course::predicted_speedup on a
// table of inputs, then measures alpha, c and verify(gamma+1)/verify(1) on this machine and prints the
// prediction beside the measured speedup (information only: a timing is never a criterion).
// SPDX-License-Identifier: MIT
#include "grading.hpp"

#include COURSE_FILE

#include <cmath>
#include <cstdio>
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

bool close(double a, double b) { return std::isfinite(a) && std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

std::string show(const Case& k) {
    char s[128];
    std::snprintf(s, sizeof s, "alpha %g, gamma %d, c %g, verify ratio %g", k.alpha, k.gamma, k.c, k.verify_ratio);
    return s;
}

}  // namespace

int main() {
    return course::run("exercise 7: predict the speedup", [](course::Grade& g) {
        // 1. The formulas on the table.
        std::string wrong_tokens, wrong_speedup;
        for (const Case& k : kCases) {
            const double t = course::expected_tokens(k.alpha, k.gamma);
            if (wrong_tokens.empty() && !close(t, k.tokens))
                wrong_tokens = show(k) + ": yours " + std::to_string(t) + ", expected " + std::to_string(k.tokens);
            const double s = course::predicted_speedup(k.alpha, k.gamma, k.c, k.verify_ratio);
            if (wrong_speedup.empty() && !close(s, k.speedup))
                wrong_speedup = show(k) + ": yours " + std::to_string(s) + ", expected " + std::to_string(k.speedup);
        }
        g.check(wrong_tokens.empty(), "expected_tokens on 8 cases (alpha = 0 and alpha = 1 among them)" +
                                          (wrong_tokens.empty() ? "" : " -- " + wrong_tokens),
                "count the bonus token: a step commits the accepted drafts and one token of the target's; alpha = 1 is a limit");
        g.check(wrong_speedup.empty(), "predicted_speedup on the same cases" + (wrong_speedup.empty() ? "" : " -- " + wrong_speedup),
                "one step costs gamma drafter forwards and one verification of gamma + 1 tokens, in target forwards of one token");

        // 2. This machine (printed, never graded: timings depend on the load). Tiny models, vanilla SD.
        course::TinyModels m(16, 0.5f);
        const std::vector<int> prompt{1, 4, 2, 7};
        const int gamma = 4;
        const GenerateOptions opts{.max_new_tokens = 96};
        ModelProposer proposer(m.draft);
        Chain chain{.gamma = gamma};
        TreeVerifier verifier;
        GreedyMatch acceptor;
        const Generation sd = speculative_generate(m.target, proposer, chain, verifier, acceptor, prompt, opts);
        const Generation ar = autoregressive_generate(m.target, prompt, opts);
        double drafted = 0, accepted = 0, t_draft = 0, t_verify = 0, t_sd = 0, t_ar_verify = 0, t_ar = 0;
        int draft_calls = 0;
        for (const StepRecord& s : sd.steps) {
            drafted += s.n_drafted, accepted += s.n_accepted, t_draft += s.t_draft, t_verify += s.t_verify;
            draft_calls += s.n_draft_calls;
            t_sd += s.t_draft + s.t_verify + s.t_accept + s.t_commit;
        }
        for (const StepRecord& s : ar.steps) t_ar_verify += s.t_verify, t_ar += s.t_draft + s.t_verify + s.t_accept + s.t_commit;
        // alpha from the acceptance per position (a chain stops at its first rejection): E[accepted] = sum alpha^d.
        const double per_step = accepted / sd.steps.size(), forward_1 = t_ar_verify / ar.steps.size();
        double alpha = 0.5;
        for (double lo = 0, hi = 1, i = 0; i < 60; ++i) {  // solve expected_tokens(alpha, gamma) - 1 = per_step
            alpha = (lo + hi) / 2;
            double e = 0, a = 1;
            for (int d = 1; d <= gamma; ++d) e += (a *= alpha);
            (e < per_step ? lo : hi) = alpha;
        }
        const double c = draft_calls > 0 ? (t_draft / draft_calls) / forward_1 : 0.0;
        const double ratio = (t_verify / sd.steps.size()) / forward_1;
        std::printf("  this machine (tiny models, V 16, gamma %d, greedy): drafts kept per step %.2f of %.2f -> alpha %.3f; "
                    "c %.3f; verify(%d)/verify(1) %.3f\n",
                    gamma, per_step, drafted / sd.steps.size(), alpha, c, gamma + 1, ratio);
        std::printf("  your prediction: tau %.3f (measured %.3f), speedup %.2f (measured %.2f, loop overheads included)\n",
                    course::expected_tokens(alpha, gamma), sd.tau(), course::predicted_speedup(alpha, gamma, c, ratio),
                    t_sd > 0 ? t_ar / t_sd : 0.0);
    });
}
