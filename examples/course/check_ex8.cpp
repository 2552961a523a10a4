// examples/course/check_ex8.cpp — the checker of exercise 8 (ex8_typical_acceptance.md): compiled with the
// student's file as COURSE_FILE, it grades course::TypicalAcceptance (its rule, step by step; the law of its
// next token; greedy identity) and course::measure_loss (a sampling report of the composition named that
// finds the loss, with a control that has power, and that the checker's own measurement reproduces).
// SPDX-License-Identifier: MIT
#include "grading.hpp"

#include COURSE_FILE

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace specdec;

/// The student's acceptor, watched: every kept draft must be typical, and the draft after the last kept
/// one (if any) must not be, within 1e-5 (rounding of the entropy).
struct WatchedTypical {
    course::TypicalAcceptance inner;
    std::string* problem;
    AcceptResult accept(const Tree& tree, Rows logits, const StepContext& ctx) const {
        AcceptResult r = inner.accept(tree, logits, ctx);
        std::vector<float> p(logits.cols);
        const auto typical = [&](int node, int token) {  // +1: typical, -1: not, 0: too close to call
            processed_probs(logits.row(node), ctx.sampling, p);
            double h = 0.0;
            for (float v : p)
                if (v > 0.0f) h -= v * std::log(double(v));
            const double margin = p[token] - std::min(double(inner.epsilon), inner.delta * std::exp(-h));
            return margin > 1e-5 ? 1 : margin < -1e-5 ? -1 : 0;
        };
        for (std::size_t i = 1; i < r.path.size() && problem->empty(); ++i)
            if (typical(r.path[i - 1], tree[r.path[i]].token) < 0)
                *problem = "you kept node " + std::to_string(r.path[i]) + " (token " + std::to_string(tree[r.path[i]].token) +
                           "), whose p(x) is not above min(epsilon, delta * exp(-H(p)))";
        const std::vector<int> next = tree.children(r.path.back());
        if (problem->empty() && !next.empty() && typical(r.path.back(), tree[next[0]].token) > 0)
            *problem = "you stopped before node " + std::to_string(next[0]) + " (token " + std::to_string(tree[next[0]].token) +
                       "), whose p(x) is above min(epsilon, delta * exp(-H(p))): a typical draft is kept";
        return r;
    }
};

/// The student's path, with the next token drawn as the statement says: from p, the target's processed law
/// at the last kept node (coin uniform(node, kBonusCoin)). The rule keeps no coin of its own, so over the
/// same seeds this composition and the student's differ only in their next tokens: their laws must agree.
struct YourPathNextFromP {
    course::TypicalAcceptance inner;
    AcceptResult accept(const Tree& tree, Rows logits, const StepContext& ctx) const {
        AcceptResult r = inner.accept(tree, logits, ctx);
        if (ctx.sampling.greedy()) return r;
        std::vector<float> p(logits.cols);
        const int last = r.path.back();
        processed_probs(logits.row(last), ctx.sampling, p);
        r.bonus = sample_index(p, ctx.rng.uniform(static_cast<std::uint32_t>(last), kBonusCoin));
        return r;
    }
};

int main() {
    return course::run("exercise 8: measure the loss of typical acceptance", [](course::Grade& g) {
        course::TinyModels m, w(course::kWarmVocab);
        const std::vector<std::vector<int>> prompts{{1, 4, 2}, {3, 0}};
        struct Setting {
            CpuModel* target;
            CpuModel* draft;
            Sampling sampling;
            std::string name;
        };
        const std::vector<Setting> settings{
            {&m.target, &m.draft, Sampling{.temperature = 1.0f}, course::describe(Sampling{.temperature = 1.0f}, 6)},
            {&w.target, &w.draft, course::kWarm, course::describe(course::kWarm, course::kWarmVocab)}};

        // 1. The rule, over 200 seeded generations at temperature 1, then 200 with a temperature other than 1,
        //    top-k and top-p on another vocabulary (p is the processed law, not softmax(logits)).
        std::string problem;
        for (const Setting& s : settings) {
            for (int seed = 0; seed < 200 && problem.empty(); ++seed) {
                ModelProposer proposer(*s.draft);
                Chain chain{.gamma = 3};
                TreeVerifier verifier;
                WatchedTypical acceptor{course::TypicalAcceptance{}, &problem};
                speculative_generate(*s.target, proposer, chain, verifier, acceptor, prompts[seed % 2],
                                     GenerateOptions{.max_new_tokens = 8, .sampling = s.sampling,
                                                     .seed = static_cast<std::uint64_t>(seed)});
            }
            if (!problem.empty()) {
                problem = "at " + s.name + ": " + problem;
                break;
            }
        }
        g.check(problem.empty(), "the rule: a draft is kept exactly when p(x) > min(epsilon, delta * exp(-H(p)))" +
                                     (problem.empty() ? "" : " -- " + problem),
                "p is the target's processed law at the draft's parent, processed_probs(logits.row(node), ctx.sampling, p) "
                "(temperature, top-k, top-p), H its entropy in nats");

        // 2. The next token: drawn from p at the last kept node. The first two tokens of your composition against
        //    those of the same composition whose next token the checker draws from p (same seeds, same path):
        //    2000 runs per prompt in each setting, a two-sample chi-square at p = 0.001.
        std::string differs;
        for (const Setting& s : settings) {
            for (std::size_t i = 0; i < prompts.size(); ++i) {
                const int runs = 2000;
                const check::Counts yours = check::sampled_two_token_law(
                    *s.target, [&] { return check::Composition{ModelProposer(*s.draft), Chain{.gamma = 3}, course::TypicalAcceptance{}}; },
                    prompts[i], s.sampling, runs);
                const check::Counts from_p = check::sampled_two_token_law(
                    *s.target,
                    [&] { return check::Composition{ModelProposer(*s.draft), Chain{.gamma = 3}, YourPathNextFromP{course::TypicalAcceptance{}}}; },
                    prompts[i], s.sampling, runs);
                const course::SameLaw c = course::same_law(yours, from_p, runs);
                char line[200];
                std::snprintf(line, sizeof line, "next token, %s, prompt %zu: chi2 %.1f dof %d critical %.1f TV %.4f -> %s\n",
                              s.name.c_str(), i, c.chi.statistic, c.chi.dof, c.critical, c.tv, c.passes() ? "pass" : "FAIL");
                std::cout << line;
                if (!c.passes() && differs.empty())
                    differs = "at " + s.name + ", prompt " + std::to_string(i) + " the law differs by a total variation of " +
                              std::to_string(c.tv);
            }
        }
        g.check(differs.empty(),
                "the next token is drawn from p at the last kept node: the first two tokens follow the law of your path "
                "with the next token drawn from p (two-sample chi-square at p = 0.001)" + (differs.empty() ? "" : " -- " + differs),
                "after the walk, whether it kept every draft or stopped at one, draw the next token from p, the target's "
                "processed law at the last kept node, with sample_index(p, ctx.rng.uniform(node, kBonusCoin)): not its "
                "argmax, not the residual norm(max(0, p - q)) of exercise 1 (typical acceptance never looks at q)");

        // 3. Greedy identity: at temperature 0 typical acceptance keeps the argmax only.
        const auto make = [&] { return check::Composition{ModelProposer(m.draft), Chain{.gamma = 3}, course::TypicalAcceptance{}}; };
        g.check(check::check_lossless(m.target, make, prompts, Sampling{}, 1).lossless(),
                "greedy decoding gives the tokens of plain greedy decoding", "at temperature 0 greedy_walk(tree, logits) is the answer");

        // 4. The measurement.
        const check::Report r = course::measure_loss(m.target, m.draft, prompts);
        std::cout << r;
        g.check(!r.greedy() && r.sampling.temperature == 1.0f,
                "your measurement samples at temperature 1 (a loss in law does not show at temperature 0)");
        g.check(r.runs >= 1000 && r.prompts.size() == prompts.size(), "it runs at least 1000 generations on each prompt given");
        g.check(r.powered(), "its control was caught: the measurement has power");
        g.check(!r.lossless(), "it finds the loss: typical acceptance is NOT lossless",
                "a lossless verdict means the acceptor is not typical acceptance, or the check drafts too little");

        // 5. What was measured: the checker runs check_lossless on the composition of the statement, with your
        //    acceptor, at your report's sampling and runs; per prompt the loss (TV) and the control's TV must agree
        //    with yours within the tolerance of two measurements over the same seeds (McDiarmid, p = 0.001).
        std::string other;
        if (r.runs < 1 || r.prompts.size() != prompts.size() || r.greedy()) {
            other = "your report is not a sampling report over the prompts given";
        } else {
            const check::Report mine = check::check_lossless(m.target, make, prompts, r.sampling, r.runs);
            const double tol = course::tv_tolerance(r.runs);
            for (std::size_t i = 0; i < prompts.size() && other.empty(); ++i) {
                const check::PromptCheck &a = r.prompts[i], &b = mine.prompts[i];
                if (a.prompt != prompts[i]) other = "prompt " + std::to_string(i) + " of your report is not the prompt given";
                else if (std::abs(a.law.tv - b.law.tv) > tol || std::abs(a.control.tv - b.control.tv) > tol)
                    other = "prompt " + std::to_string(i) + ": your report's TV " + std::to_string(a.law.tv) + " (control " +
                            std::to_string(a.control.tv) + "), the checker's " + std::to_string(b.law.tv) + " (control " +
                            std::to_string(b.control.tv) + "), tolerance " + std::to_string(tol);
            }
        }
        g.check(other.empty(),
                "it measures (ModelProposer(draft), Chain{.gamma = 3}, TypicalAcceptance{}): the checker's own measurement of "
                "that composition agrees with your report" + (other.empty() ? "" : " -- " + other),
                "call check::check_lossless on exactly that composition (the default TypicalAcceptance{}, the drafter and "
                "target given) and return its report unchanged");
        double tv = 0;
        for (const check::PromptCheck& p : r.prompts) tv = std::max(tv, p.law.tv);
        std::cout << "  the loss you measured: total variation of the first two tokens up to " << tv << "\n";
    });
}
