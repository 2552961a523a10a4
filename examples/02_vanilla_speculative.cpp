// 02 — Vanilla speculative decoding (Leviathan et al. 2023; Chen et al. 2023).
//
// Teaches: a drafter proposes a chain of gamma tokens; the target scores the whole chain in one
// forward; the acceptor keeps a prefix. Greedy: GreedyMatch keeps drafts equal to the target's argmax,
// so the output is the target's greedy output token for token. Sampling: SpeculativeSampling accepts
// x with probability min(1, p(x)/q(x)) and resamples from norm(max(0, p - q)), so the output has
// exactly the target's distribution.
#include "report.hpp"

using namespace specdec;

int main() try {
    example::RandomPair models;                   // Step 1: target + drafter (same vocabulary)
    ModelProposer proposer(models.draft);         // Step 2: the drafter as a Proposer
    Chain builder{.gamma = 4};                    // Step 3: a chain of 4 drafts
    TreeVerifier verifier;                        // Step 4: one target forward over the chain
    GreedyMatch greedy;                           // Step 5: the acceptors
    SpeculativeSampling sampling;
    const std::vector<int> prompt{10, 20, 30, 40};

    const GenerateOptions greedy_opts{.max_new_tokens = 48};
    const Generation spec = speculative_generate(models.target, proposer, builder, verifier, greedy, prompt, greedy_opts);
    const Generation plain = autoregressive_generate(models.target, prompt, greedy_opts);
    std::printf("greedy (temperature 0)\n");
    example::print_tokens("  speculative", spec.tokens);
    example::print_stats("  speculative", spec);
    example::print_stats("  plain", plain);
    std::printf("  identical to plain greedy decoding: %s\n", spec.tokens == plain.tokens ? "yes" : "NO");

    const GenerateOptions sample_opts{.max_new_tokens = 48, .sampling = {.temperature = 1.0f}, .seed = 3};
    const Generation s = speculative_generate(models.target, proposer, builder, verifier, sampling, prompt, sample_opts);
    std::printf("sampling (temperature 1)\n");
    example::print_tokens("  speculative", s.tokens);
    example::print_stats("  speculative", s);
    return 0;
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
// Run from the repository root: ./build/release/02_vanilla_speculative
// Prints the tokens, tau > 1 (several tokens per target forward), the acceptance of each draft position,
// and "identical to plain greedy decoding: yes".
