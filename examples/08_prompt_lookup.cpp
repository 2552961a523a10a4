// 08 — Writing your own Proposer: prompt lookup, speculative decoding without a drafter model.
//
// Teaches: the four members a token-drafting proposer needs (PromptLookup, in prompt_lookup.hpp beside
// this file: 30 lines), that it composes with the library's Chain, TreeVerifier and acceptors like any
// shipped policy, and how to measure it honestly against plain decoding: the same prompts and number
// of new tokens, both methods interleaved, the first round a warm-up, greedy output checked token for
// token. Its drafts are deterministic (q = one-hot), so at temperature 1 SpeculativeSampling keeps
// the target's distribution exactly. Where the text repeats itself (quotes, refrains, a model looping)
// whole spans are accepted at once; where it does not, a draft is usually empty or rejected and the
// step costs one forward, as in plain decoding, plus the wider verification.
//
// The program decodes only, so it asks for the light include (specdec.hpp, compile-time options).
#define SPECDEC_DECODING_ONLY
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

#include "prompt_lookup.hpp"
#include "report.hpp"

using namespace specdec;

int main(int argc, char** argv) try {
    const int n_prompts = example::int_argument(argc, argv, 1, "n_prompts", 10, 1, 100000), max_new = 64, rounds = 3;
    // Step 1: the target (one thread and bf16 weights, as in the demo) and its tokenizer.
    ThreadPool pool(1);
    Checkpoint t = load_checkpoint("models/target");
    CpuModel target(t.config, std::move(t.weights), ModelOptions{.weight_format = WeightFormat::kBF16, .pool = &pool});
    const Tokenizer tok = Tokenizer::load("models/target/tokenizer.json");
    // Step 2: our proposer, and the library's builder, verifier and acceptors.
    example::PromptLookup proposer{.vocab = target.vocab_size()};
    Chain builder{.gamma = 4};  // Chain asks draft() again while it yields, up to gamma tokens
    TreeVerifier verifier;
    GreedyMatch greedy;
    SpeculativeSampling sampling;
    const std::vector<example::Prompt> prompts = example::read_prompts("data/prompts.jsonl", n_prompts);
    const bool color = ::isatty(STDOUT_FILENO) == 1;

    // Step 3: plain and prompt-lookup decoding, interleaved per prompt; round 0 warms up.
    const auto run = [&](float temperature, auto& acceptor) {
        double t_plain = 0, t_lookup = 0;
        long tokens = 0, forwards = 0, identical = 0;
        for (std::size_t p = 0; p < prompts.size(); ++p) {
            const std::vector<int> prompt = tok.encode(prompts[p].text);
            const GenerateOptions o{.max_new_tokens = max_new, .sampling = {.temperature = temperature}, .seed = p};
            Generation plain, lookup;
            for (int r = 0; r < rounds; ++r) {
                const double a = example::seconds([&] { plain = autoregressive_generate(target, prompt, o); });
                const double b = example::seconds([&] {
                    lookup = speculative_generate(target, proposer, builder, verifier, acceptor, prompt, o);
                });
                if (r > 0) t_plain += a, t_lookup += b;
            }
            tokens += static_cast<long>(lookup.tokens.size());
            forwards += lookup.n_target_calls();
            identical += lookup.tokens == plain.tokens;
            if (p < 2 && temperature == 0.0f)
                std::printf("  %s%s\n", prompts[p].text.c_str(), example::marked(tok, lookup, color).c_str());
        }
        std::printf("temperature %.0f: tau %.2f tokens per target forward; plain %.1f ms, prompt lookup %.1f ms "
                    "per prompt: speedup %.2fx",
                    temperature, double(tokens) / double(forwards), 1e3 * t_plain / (rounds - 1) / prompts.size(),
                    1e3 * t_lookup / (rounds - 1) / prompts.size(), t_plain / t_lookup);
        if (temperature == 0.0f)
            std::printf("; identical to plain greedy decoding: %ld of %zu prompts\n", identical, prompts.size());
        else
            std::printf(" (sampled: the outputs differ from plain decoding's draw by draw, not in distribution)\n");
        return temperature != 0.0f || identical == static_cast<long>(prompts.size());
    };
    std::printf("%zu held-out prompts, %d new tokens each, chain of %d lookups; %s = accepted drafts\n",
                prompts.size(), max_new, builder.gamma, color ? "green" : "[brackets]");
    const bool lossless = run(0.0f, greedy);
    run(1.0f, sampling);
    return lossless ? 0 : 1;
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
// Run from the repository root: ./build/release/08_prompt_lookup [n_prompts=10]
// Prints two prompts with their greedy continuations (accepted draft tokens marked), then per
// temperature tau, the milliseconds per prompt of plain and prompt-lookup decoding and the speedup,
// and at temperature 0 that every output is identical to plain greedy decoding. Exits 1 if one is not.
