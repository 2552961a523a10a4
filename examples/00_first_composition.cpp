// 00 — Your first composition: the shipped models, a tokenized prompt, the four policies, the loop.
//
// Teaches: loading a HuggingFace model folder (config.json + model.safetensors) with load_checkpoint,
// encoding and decoding text with the byte-level BPE tokenizer, and composing vanilla speculative
// decoding from a Proposer, a TreeBuilder, a Verifier and an Acceptor. The code below is the example
// at the top of specdec.hpp, line for line (a ctest compares them).
#include "specdec.hpp"
#include <cstdio>
using namespace specdec;

int main() try {
    // Step 1: the target, and a drafter that shares its tokenizer.
    Checkpoint t = load_checkpoint("models/target"), d = load_checkpoint("models/small");
    CpuModel target(t.config, std::move(t.weights));
    CpuModel draft(d.config, std::move(d.weights));
    const Tokenizer tok = Tokenizer::load("models/target/tokenizer.json");
    // Step 2: the four policies.
    ModelProposer proposer(draft);   // Proposer: the drafter's next-token logits
    Chain builder{.gamma = 4};       // TreeBuilder: a chain of 4 drafts
    TreeVerifier verifier;           // Verifier: one target forward over the tree
    GreedyMatch acceptor;            // Acceptor: keep drafts equal to the target's argmax
    // Step 3: the loop, on a tokenized prompt.
    const std::vector<int> prompt = tok.encode("It was the best of times, it was the worst of times,");
    const Generation g = speculative_generate(target, proposer, builder, verifier, acceptor, prompt,
                                              GenerateOptions{.max_new_tokens = 48});
    std::printf("%s\n%zu tokens, tau = %.2f tokens per target forward\n", tok.decode(g.tokens).c_str(),
                g.tokens.size(), g.tau());
    return 0;
} catch (const specdec::error& e) {  // a missing file, a bad config.json: the message names it
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
// Run from the repository root: ./build/release/00_first_composition
// Prints the prompt's continuation (48 tokens of the target's greedy output: a 14M model soon repeats
// itself) and tau, the tokens committed per target forward: 2.09 here, where plain decoding makes 1.
