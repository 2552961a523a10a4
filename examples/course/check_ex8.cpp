// examples/course/check_ex8.cpp — the checker of exercise 8 (ex8_typical_acceptance.md): compiled with the
// student's file as COURSE_FILE, it grades course::TypicalAcceptance (its rule, step by step; greedy
// identity) and course::measure_loss (a sampling report that finds the loss, with a control that has power).
// SPDX-License-Identifier: MIT
#include "grading.hpp"

#include COURSE_FILE

#include <cmath>
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

int main() {
    return course::run("exercise 8: measure the loss of typical acceptance", [](course::Grade& g) {
        course::TinyModels m;
        const std::vector<std::vector<int>> prompts{{1, 4, 2}, {3, 0}};

        // 1. The rule, at temperature 1, over 200 seeded generations.
        std::string problem;
        for (int seed = 0; seed < 200 && problem.empty(); ++seed) {
            ModelProposer proposer(m.draft);
            Chain chain{.gamma = 3};
            TreeVerifier verifier;
            WatchedTypical acceptor{course::TypicalAcceptance{}, &problem};
            speculative_generate(m.target, proposer, chain, verifier, acceptor, prompts[seed % 2],
                                 GenerateOptions{.max_new_tokens = 8, .sampling = {.temperature = 1.0f},
                                                 .seed = static_cast<std::uint64_t>(seed)});
        }
        g.check(problem.empty(), "the rule: a draft is kept exactly when p(x) > min(epsilon, delta * exp(-H(p)))" +
                                     (problem.empty() ? "" : " -- " + problem),
                "p is the target's processed law at the draft's parent, H its entropy in nats");

        // 2. Greedy identity: at temperature 0 typical acceptance keeps the argmax only.
        const auto make = [&] { return check::Composition{ModelProposer(m.draft), Chain{.gamma = 3}, course::TypicalAcceptance{}}; };
        g.check(check::check_lossless(m.target, make, prompts, Sampling{}, 1).lossless(),
                "greedy decoding gives the tokens of plain greedy decoding", "at temperature 0 greedy_walk(tree, logits) is the answer");

        // 3. The measurement.
        const check::Report r = course::measure_loss(m.target, m.draft, prompts);
        std::cout << r;
        g.check(!r.greedy() && r.sampling.temperature == 1.0f,
                "your measurement samples at temperature 1 (a loss in law does not show at temperature 0)");
        g.check(r.runs >= 1000 && r.prompts.size() == prompts.size(), "it runs at least 1000 generations on each prompt given");
        g.check(r.powered(), "its control was caught: the measurement has power");
        g.check(!r.lossless(), "it finds the loss: typical acceptance is NOT lossless",
                "a lossless verdict means the acceptor is not typical acceptance, or the check drafts too little");
        double tv = 0;
        for (const check::PromptCheck& p : r.prompts) tv = std::max(tv, p.law.tv);
        std::cout << "  the loss you measured: total variation of the first two tokens up to " << tv << "\n";
    });
}
