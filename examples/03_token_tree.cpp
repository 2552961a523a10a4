// 03 — Token trees: several candidates per position, verified in one forward (SpecInfer, MCSD).
//
// Teaches: KAryTree{(4,2,2,1)} samples 4 children of the root, 2 of each of those, ... (44 nodes) from
// the drafter; the target scores every node at once with a tree attention mask (each node sees the
// cache and its ancestors). MultiDraftSampling tries siblings in order and stays lossless because
// each was drawn from the q it records; drawing without replacement (MCSD) avoids duplicate siblings.
#include "report.hpp"

using namespace specdec;

int main() try {
    example::RandomPair models;                                        // Step 1: target + drafter
    ModelProposer proposer(models.draft);                              // Step 2: proposer
    KAryTree tree{.k_config = {4, 2, 2, 1}, .draw = DrawPolicy::kSampleWithoutReplacement};  // Step 3
    Chain chain{.gamma = 4};
    TreeVerifier verifier;                                             // Step 4
    MultiDraftSampling multi;                                          // Step 5: lossless for sampled trees
    SpeculativeSampling single;
    const std::vector<int> prompt{10, 20, 30, 40};
    const GenerateOptions opts{.max_new_tokens = 64, .sampling = {.temperature = 1.0f}, .seed = 11};

    const Generation t = speculative_generate(models.target, proposer, tree, verifier, multi, prompt, opts);
    const Generation c = speculative_generate(models.target, proposer, chain, verifier, single, prompt, opts);
    std::printf("sampling at temperature 1, 64 new tokens\n");
    example::print_stats("  tree 4-2-2-1", t);
    example::print_stats("  chain of 4", c);
    std::printf("  the tree commits %.2f tokens per target forward, the chain %.2f\n", t.tau(), c.tau());
    return 0;
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
// Run from the repository root: ./build/release/03_token_tree
// Prints tau and per-position acceptance for the 44-node tree and for a 4-token chain; the tree's tau
// is higher because a rejected first candidate leaves three more to try.
