// 11 — Improved multi-candidate speculative decoding (improved-mcsd.txt) as compositions of policies.
//
// Teaches: one drafter, four tree shapes. MCSD's draft-initialised k-config tree (4,2,2,1), sampled
// without replacement and verified losslessly by MultiDraftSampling; the paper's target-initialised
// candidates (2,4,3,1,1): two seeds drawn from the target's law at the bonus position, a (4,3,1,1) tree
// below each, all verified in one forward, the seed with the longest accepted drafts kept — LOSSY, so
// its acceptor runs only with allow_lossy; the dynamic configuration's fork of W chains (lossless); and
// the paper's framework, a chain below each of two target-drawn seeds (lossy; add a decision model's
// early stop with TargetInitialisedFork<DecisionStop<...>>). The loop needs no special case for seeds:
// the acceptor defers its bonus (AcceptResult::bonus_law) and the next builder draws its roots from it.
// What the lossiness costs, the decision models and the sliced mask are measured by
// examples/bench/mcsd_study.cpp (scripts/mcsd_experiment.sh).
#include <cstdio>
#include <string>

#include "report.hpp"
#include "specdec.hpp"

using namespace specdec;

int main(int argc, char** argv) try {
    const std::string drafter = argc > 1 ? argv[1] : "small";
    Checkpoint t = load_checkpoint("models/target"), d = load_checkpoint("models/" + drafter);
    CpuModel target(t.config, std::move(t.weights)), draft(d.config, std::move(d.weights));
    const Tokenizer tok = Tokenizer::load("models/target/tokenizer.json");

    // ---- the compositions ----------------------------------------------------------------------------
    ModelProposer proposer(draft);
    TreeVerifier verifier;
    McsdTree mcsd{.k_config = {4, 2, 2, 1}};                                     // MCSD: lossless
    TargetInitialisedTree seeds{.n_seeds = 2, .k_config = {4, 3, 1, 1}};         // the paper's (2,4,3,1,1)
    DynamicFork<> fork{.width = 16, .max_depth = 4};                             // W chains, depth D: lossless
    TargetInitialisedFork<> seeded_fork{.width = 2, .max_depth = 4};             // a chain below each seed
    MultiDraftSampling lossless;
    LossyTargetInitialisedSampling lossy{.allow_lossy = true};                   // LOSSY: an explicit opt-in
    // ---------------------------------------------------------------------------------------------------

    const GenerateOptions opts{.max_new_tokens = 64, .sampling = {.temperature = 0.7f}, .seed = 3};
    const auto prompts = example::read_prompts("data/prompts.jsonl", 6);
    std::printf("T = 0.7, %zu prompts x 64 tokens   %6s %7s %6s\n", prompts.size(), "tau", "accept", "nodes");
    const auto run = [&](const char* name, auto& builder, auto& acceptor) {
        Generation pooled;  // every prompt's steps: improved MCSD's acceptance pooled over all of them
        for (const example::Prompt& p : prompts) {
            const Generation g = speculative_generate(target, proposer, builder, verifier, acceptor, tok.encode(p.text), opts);
            pooled.tokens.insert(pooled.tokens.end(), g.tokens.begin(), g.tokens.end());
            pooled.steps.insert(pooled.steps.end(), g.steps.begin(), g.steps.end());
        }
        const Summary s = summarize(pooled);
        std::printf("%-38s %6.2f %7.2f %6.1f\n", name, s.tau, s.alpha_longest, s.nodes_per_step);
    };
    run("MCSD (4,2,2,1)", mcsd, lossless);
    run("target-initialised (2,4,3,1,1) LOSSY", seeds, lossy);
    run("fork W = 16, D = 4", fork, lossless);
    run("2 seeds, a chain of 4 below each LOSSY", seeded_fork, lossy);
    return 0;
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
// Run from the repository root: ./build/release/11_mcsd [small|mid] (the drafter; under a minute).
// Prints, per composition, tau (tokens per target forward), the acceptance alpha_longest (longest
// accepted draft / maximum draft length, summed over all steps: improved MCSD §1) and draft nodes
// per step; the target-initialised compositions accept the most, and they are the lossy ones.
