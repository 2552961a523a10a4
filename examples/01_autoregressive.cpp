// 01 — Autoregressive decoding is the speculative loop with an empty draft.
//
// Teaches: the decoding loop's four policy slots, filled with the trivial choices — NoProposer drafts
// nothing, RootOnly builds a tree holding only the pending token, TreeVerifier runs the target once,
// SampleAndMatch samples the target's next token (argmax at temperature 0). One token per forward.
#include "report.hpp"

using namespace specdec;

int main() try {
    example::RandomPair models;  // Step 1: the target (random weights: no files needed)
    NoProposer proposer{models.target.vocab_size()};  // Step 2: the policies
    RootOnly builder;
    TreeVerifier verifier;
    SampleAndMatch acceptor;
    const std::vector<int> prompt{10, 20, 30, 40};  // Step 3: the loop
    for (float temperature : {0.0f, 1.0f}) {
        const GenerateOptions opts{.max_new_tokens = 24, .sampling = {.temperature = temperature}, .seed = 7};
        const Generation g = speculative_generate(models.target, proposer, builder, verifier, acceptor, prompt, opts);
        const Generation same = autoregressive_generate(models.target, prompt, opts);  // the shorthand
        std::printf("temperature %.1f\n", temperature);
        example::print_tokens("  tokens", g.tokens);
        example::print_stats("  loop", g);
        std::printf("  autoregressive_generate gives the same tokens: %s\n", g.tokens == same.tokens ? "yes" : "NO");
    }
    return 0;
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
// Run from the repository root: ./build/release/01_autoregressive
// Prints, per temperature, the 24 generated token ids and tau = 1.00 (one token per target forward).
