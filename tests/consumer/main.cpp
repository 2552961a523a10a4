// Compiles against the installed headers and runs one greedy speculative generation.
#include <specdec.hpp>

#include <cstdio>

int main() {
    using namespace specdec;
    const Config cfg{.hidden_size = 32, .intermediate_size = 64, .num_hidden_layers = 1, .num_attention_heads = 2,
                     .num_key_value_heads = 1, .vocab_size = 50, .max_position_embeddings = 64};
    const Weights w = random_weights(cfg, 1, 0.3f);
    CpuModel target(cfg, w), draft(cfg, perturbed(cfg, w, 0.05f, 2));
    ModelProposer proposer(draft);
    Chain builder{.gamma = 3};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const std::vector<int> prompt{1, 2, 3};
    const GenerateOptions opts{.max_new_tokens = 16};
    const Generation spec = speculative_generate(target, proposer, builder, verifier, acceptor, prompt, opts);
    const bool same = spec.tokens == autoregressive_generate(target, prompt, opts).tokens;
    std::printf("consumer: find_package(specdec) works; greedy speculative == greedy: %s\n", same ? "yes" : "no");
    return same ? 0 : 1;
}
