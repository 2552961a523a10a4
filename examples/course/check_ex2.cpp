// examples/course/check_ex2.cpp — the checker of exercise 2 (ex2_multi_draft.md): compiled with the
// student's file as COURSE_FILE, it grades course::MultiDraft on trees of siblings sampled with and
// without replacement from a tiny random drafter.
// SPDX-License-Identifier: MIT
#include "grading.hpp"

#include COURSE_FILE

#include <string>
#include <vector>

using namespace specdec;

int main() {
    return course::run("exercise 2: multi-draft speculative sampling", [](course::Grade& g) {
        course::TinyModels m;
        course::TinyModels w(course::kWarmVocab);  // for the criterion at top-k and top-p
        const std::vector<std::vector<int>> prompts{{1, 4, 2}, {3, 0}};
        for (const DrawPolicy draw : {DrawPolicy::kSampleWithReplacement, DrawPolicy::kSampleWithoutReplacement}) {
            const std::string how = draw == DrawPolicy::kSampleWithReplacement ? "with replacement" : "without replacement";
            const KAryTree tree{{3, 2}, draw};  // 3 siblings under the root, 2 under each of them
            const auto make = [&] { return check::Composition{ModelProposer(m.draft), tree, course::MultiDraft{}}; };

            // 1. Temperature 0: p is one-hot, the walk is greedy_walk's.
            const check::Report greedy = check::check_lossless(m.target, make, prompts, Sampling{}, 2);
            g.check(greedy.lossless(), how + ": greedy decoding gives the tokens of plain greedy decoding",
                    "at temperature 0 greedy_walk(tree, logits) is the whole answer");

            // 2. Temperature 1: the first two tokens against their exact law.
            const check::Report sampled = check::check_lossless(m.target, make, prompts, Sampling{.temperature = 1.0f}, 2000);
            std::cout << sampled;
            const std::string law_hint =
                "after each rejected sibling x, in this order: p <- norm(max(0, p - q)) with the q that x was drawn from; "
                "then, without replacement only, q(x) <- 0 and q renormalised (the law the next sibling was drawn from); the "
                "next token after all are rejected comes from the last p";
            g.check(sampled.lossless(), how + ": sampling: the first two tokens follow the target's law (chi-square at p = 0.001)",
                    law_hint);

            // 2b. The same with a temperature other than 1, top-k and top-p, on a vocabulary of 8: p must be the
            //     target's processed law (processed_probs applies all three), on any vocabulary size.
            const auto make_w = [&] { return check::Composition{ModelProposer(w.draft), tree, course::MultiDraft{}}; };
            const check::Report warm = check::check_lossless(w.target, make_w, prompts, course::kWarm, 2000);
            std::cout << warm;
            g.check(warm.ok(), how + ": sampling with top-k and top-p (" + course::describe(course::kWarm, course::kWarmVocab) +
                                   "): the first two tokens follow the target's processed law (chi-square at p = 0.001)",
                    "p is the target's processed law, processed_probs(logits.row(node), ctx.sampling, p): temperature, top-k "
                    "and top-p (a law computed by hand that forgets one of them, or assumes a vocabulary size, is another "
                    "law); q is tree.child_dist(node), recorded already processed");

            // 3. The documented coordinates: sibling i of `node` is tested with uniform(node, i), the final draw
            //    uses uniform(node, kBonusCoin); then the walk is the library's MultiDraftSampling token for token.
            std::string differs;
            for (int seed = 0; seed < 40 && differs.empty(); ++seed) {
                const GenerateOptions opts{.max_new_tokens = 12, .sampling = Sampling{.temperature = 0.8f, .top_k = 4, .top_p = 0.9f},
                                           .seed = static_cast<std::uint64_t>(seed)};
                ModelProposer pa(m.draft), pb(m.draft);
                KAryTree ba = tree, bb = tree;
                TreeVerifier va, vb;
                course::MultiDraft mine;
                MultiDraftSampling ref;
                const Generation a = speculative_generate(m.target, pa, ba, va, mine, prompts[0], opts);
                const Generation b = speculative_generate(m.target, pb, bb, vb, ref, prompts[0], opts);
                if (a.tokens != b.tokens) differs = "seed " + std::to_string(seed);
            }
            g.check(differs.empty(), how + ": same coordinates, same tokens as the library's MultiDraftSampling over 40 seeds" +
                                         (differs.empty() ? "" : " (differs at " + differs + ")"),
                    "coin uniform(node, i) for sibling i, uniform(node, kBonusCoin) for the final draw; if a sampling "
                    "criterion above failed too, the law is wrong, not (only) the coins: the order of the updates after a "
                    "rejection (p's residual with the q that drew x first, then q(x) <- 0) or p's processing (see its hint)");
        }
    });
}
