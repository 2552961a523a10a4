// examples/course/check_ex1.cpp — the checker of exercise 1 (ex1_chain_sampling.md): compiled with the
// student's file as COURSE_FILE, it grades course::ChainSampling on a tiny random target.
// SPDX-License-Identifier: MIT
#include "grading.hpp"

#include COURSE_FILE

#include <string>
#include <vector>

using namespace specdec;

int main() {
    return course::run("exercise 1: speculative sampling for a chain", [](course::Grade& g) {
        course::TinyModels m;
        const std::vector<std::vector<int>> prompts{{1, 4, 2}, {3, 0}};
        const auto make = [&] { return check::Composition{ModelProposer(m.draft), Chain{.gamma = 3}, course::ChainSampling{}}; };

        // 1. Temperature 0: the target's law is one-hot, every lossless acceptor is plain greedy decoding.
        const check::Report greedy = check::check_lossless(m.target, make, prompts, Sampling{}, 2);
        g.check(greedy.lossless(), "greedy decoding gives the tokens of plain greedy decoding",
                "at temperature 0 the target's law is one-hot: greedy_walk(tree, logits) is the whole answer");
        if (!greedy.lossless()) std::cout << greedy;

        // 2. Temperature 1: the law of the first two tokens against the exact one (the second token is
        //    where a wrong residual shows). 2000 generations per prompt, chi-square at p = 0.001.
        const check::Report sampled = check::check_lossless(m.target, make, prompts, Sampling{.temperature = 1.0f}, 2000);
        std::cout << sampled;
        g.check(sampled.lossless(), "sampling: the first two tokens follow the target's law (chi-square at p = 0.001)",
                "accept x with probability min(1, p(x)/q(x)), q the law recorded on the parent (tree.child_dist); "
                "after a rejection draw from norm(max(0, p - q)); with no rejection draw the bonus from p");

        // 2b. The same with top-k and top-p below 1, at temperature 0.7, on a vocabulary of 8: p must be the
        //     target's processed law (processed_probs applies all three), on any vocabulary size.
        {
            course::TinyModels w(course::kWarmVocab);
            const auto make_w = [&] { return check::Composition{ModelProposer(w.draft), Chain{.gamma = 3}, course::ChainSampling{}}; };
            const check::Report warm = check::check_lossless(w.target, make_w, prompts, course::kWarm, 2000);
            std::cout << warm;
            g.check(warm.ok(), "sampling with top-k and top-p (" + course::describe(course::kWarm, course::kWarmVocab) +
                                   "): the first two tokens follow the target's processed law (chi-square at p = 0.001)",
                    "p is the target's processed law, processed_probs(logits.row(node), ctx.sampling, p): temperature, "
                    "top-k and top-p; a law computed by hand that forgets one of them (or assumes a vocabulary size) is "
                    "another law; q is tree.child_dist(node), recorded already processed");
        }

        // 3. The documented coordinates (docs/writing_a_policy.md): the coin of the draft at `node` is
        //    uniform(node, 0), the final draw uses uniform(node, kBonusCoin). Then the acceptor reproduces
        //    the library's SpeculativeSampling token for token; the first difference names the step.
        const Sampling warm{.temperature = 0.8f, .top_k = 4, .top_p = 0.9f};
        for (int seed = 0; seed < 40; ++seed) {
            const GenerateOptions opts{.max_new_tokens = 12, .sampling = warm, .seed = static_cast<std::uint64_t>(seed)};
            ModelProposer pa(m.draft), pb(m.draft);
            Chain ba{.gamma = 3}, bb{.gamma = 3};
            TreeVerifier va, vb;
            course::ChainSampling mine;
            SpeculativeSampling ref;
            const Generation a = speculative_generate(m.target, pa, ba, va, mine, prompts[0], opts);
            const Generation b = speculative_generate(m.target, pb, bb, vb, ref, prompts[0], opts);
            if (a.tokens != b.tokens) {
                std::size_t i = 0;
                while (i < a.tokens.size() && i < b.tokens.size() && a.tokens[i] == b.tokens[i]) ++i;
                g.fail("same coordinates, same tokens: at temperature 0.8, top-k 4, top-p 0.9, seed " + std::to_string(seed) +
                           ", token " + std::to_string(i) + " differs from the library's SpeculativeSampling",
                       "use the processed laws (processed_probs for p; q as recorded), the coin uniform(node, 0) for "
                       "the draft under `node` and uniform(node, kBonusCoin) for the final draw, never one coin twice");
                return;
            }
        }
        g.pass("same coordinates, same tokens: identical to the library's SpeculativeSampling over 40 seeds");
    });
}
