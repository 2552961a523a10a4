// 06 — Cascade Speculative Drafting (Chen et al. 2024) as a composition of policies.
//
// Teaches: a speculative decoder over (drafter, smaller drafter) is itself a proposer. The 1.5M "mid"
// drafter reviews what the 0.6M "small" drafter and Max-Gram propose (vertical cascade), the small one
// reviews Max-Gram, and along one draft the larger drafters produce the earlier tokens (horizontal
// cascade). Lenience lets mid accept small's tokens more easily; it lives inside the proposer, and
// the target still verifies every draft exactly: greedy output is plain greedy output, and sampled
// output follows the target's distribution (tests/loop/test_lossless_sampling.cpp).
//
// Run from the repository root: ./build/release/06_cs_drafting [n_prompts=6]
// The K-matrix and lenience below are the ones scripts/cs_experiment.sh picked on validation prompts.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "report.hpp"
#include "specdec.hpp"

using namespace specdec;

int main(int argc, char** argv) try {
    const int n_prompts = example::int_argument(argc, argv, 1, "n_prompts", 6, 1, 100000), max_new = 64;
    ThreadPool pool(1);
    const ModelOptions opts{.pool = &pool};
    const auto load = [&](const std::string& name) {
        Checkpoint c = load_checkpoint("models/" + name);
        return std::make_unique<CpuModel>(c.config, std::move(c.weights), opts);
    };
    const auto target = load("target"), mid = load("mid"), small = load("small");
    const Bigram bigram = Bigram::load("models/bigram.json", target->vocab_size());
    const Tokenizer tok = Tokenizer::load("models/target/tokenizer.json");

    // ---- the composition: K = [[k11, k12 - k11, kT], [0, k22, kM], [0, 0, kS]], lenience l ------------
    const KMatrix K{{{2, 2, 0}, {0, 1, 0}, {0, 0, 3}}};
    K.validate();
    MaxGram mag(bigram);                                         // 10 tokens per call, free (App. B)
    Review small_level(*small, mag, {.budget = K.k[2][2]});      // small reviews Max-Gram
    Horizontal below_mid(K.row(1), small_level, mag);            // small's tokens first, then Max-Gram's
    Review mid_level(*mid, below_mid, {.budget = K.row_sum(1), .lenience = {3.0}});
    Horizontal top(K.row(0), mid_level, small_level, mag);       // what the target verifies
    Chain builder{.gamma = K.row_sum(0)};
    TreeVerifier verifier;
    // ------------------------------------------------------------------------------------------------

    for (const float temperature : {0.0f, 1.0f}) {
        double t_plain = 0, t_cs = 0;  // (the first prompt's runs also warm the caches up)
        long tokens = 0, identical = 0, steps = 0;
        const long mid_before = mid_level.usage()[0].calls;
        for (int p = 0; const example::Prompt& pr : example::read_prompts("data/prompts.jsonl", n_prompts)) {
            const std::vector<int> prompt = tok.encode(pr.text);
            const GenerateOptions o{.max_new_tokens = max_new, .sampling = {.temperature = temperature}, .seed = std::uint64_t(p++)};
            Generation plain, cs;
            t_plain += example::seconds([&] { plain = autoregressive_generate(*target, prompt, o); });
            t_cs += example::seconds([&] {
                if (temperature == 0.0f) {
                    GreedyMatch acceptor;
                    cs = speculative_generate(*target, top, builder, verifier, acceptor, prompt, o);
                } else {
                    SpeculativeSampling acceptor;  // each drafted token carries the law it was drawn from
                    cs = speculative_generate(*target, top, builder, verifier, acceptor, prompt, o);
                }
            });
            tokens += static_cast<long>(cs.tokens.size());
            steps += cs.n_target_calls();
            identical += cs.tokens == plain.tokens;
            if (p == 1) std::printf("\n[T=%.0f] %s%s\n", temperature, pr.text.c_str(), example::marked(tok, cs, false).c_str());
        }
        std::printf("T=%.0f: tau %.2f tokens per target forward, %.2f mid reviews per target forward, speedup %.2fx "
                    "(%.0f vs %.0f tok/s)%s\n",
                    temperature, double(tokens) / steps, double(mid_level.usage()[0].calls - mid_before) / steps,
                    t_plain / t_cs, tokens / t_cs, tokens / t_plain,
                    temperature == 0.0f ? (identical == n_prompts ? "; identical to plain greedy: yes" : "; identical: NO")
                                        : "; distribution not checked in this run (SpeculativeSampling at the top: lossless when each draft carries the law it was drawn from)");
    }
    return 0;
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
