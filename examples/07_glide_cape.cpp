// 07 — GLIDE with a CAPE (Du et al. 2024) as a composition of policies.
//
// Teaches: a drafter that reads the target's KV cache. GLIDE's one layer attends to the target's
// committed keys and values of its top layer (through ExposesKV, never a copy), so it is a
// LanguageModel like any other and ModelProposer drives it. CAPE is a TreeBuilder: the greedy chain
// plus, at each position, 7/5/3/1 more candidates as the drafter's confidence falls; the engine's tree
// mask is CAPE's mask. Greedy output equals plain greedy decoding; at T > 0 SampleAndMatch keeps it
// lossless. The "vanilla" drafter is the same architecture without cross-attention (the paper's
// ablation), trained identically (train_demo glide glide | vanilla).
//
// Run from the repository root: ./build/release/07_glide_cape [n_prompts=6]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "report.hpp"
#include "specdec.hpp"

using namespace specdec;

int main(int argc, char** argv) try {
    const int n_prompts = example::int_argument(argc, argv, 1, "n_prompts", 6, 1, 100000);
    ThreadPool pool(1);
    const ModelOptions opts{.pool = &pool};
    Checkpoint t = load_checkpoint("models/target"), v = load_checkpoint("models/vanilla");
    GlideCheckpoint g = load_glide_checkpoint("models/glide");
    CpuModel target(t.config, std::move(t.weights), opts), vanilla(v.config, std::move(v.weights), opts);
    GlideModel glide(std::move(g.config), std::move(g.weights), target, opts);  // reads target.kv(top layer)
    const Tokenizer tok = Tokenizer::load("models/target/tokenizer.json");

    // ---- the compositions (greedy) ------------------------------------------------------------------
    ModelProposer vanilla_drafts(vanilla);
    ModelProposer glide_drafts(glide);
    Chain chain{.gamma = 5};                                     // gamma = 5 as in the paper's Table 1
    ExpandedChain cape{.gamma = 5};                              // + 7/5/3/1 candidates by confidence
    ExpandedChain fixed4{.gamma = 5, .sizes = ExpansionSizes::fixed(4)};  // the §5 ablation
    TreeVerifier verifier;
    GreedyMatch acceptor;
    // ------------------------------------------------------------------------------------------------

    const auto prompts = example::read_prompts("data/prompts.jsonl", n_prompts);
    const auto measure = [&](const char* name, auto&& generate) {
        double t_plain = 0, t_spec = 0;
        long tokens = 0, steps = 0, identical = 0;
        for (const example::Prompt& p : prompts) {
            const std::vector<int> prompt = tok.encode(p.text);
            const GenerateOptions o{.max_new_tokens = 64};
            Generation plain, spec;
            t_plain += example::seconds([&] { plain = autoregressive_generate(target, prompt, o); });
            t_spec += example::seconds([&] { spec = generate(prompt, o); });
            tokens += static_cast<long>(spec.tokens.size());
            steps += spec.n_target_calls();
            identical += spec.tokens == plain.tokens;
        }
        std::printf("%-26s tau %.2f, speedup %.2fx, identical to plain greedy on %ld/%zu prompts\n", name,
                    double(tokens) / steps, t_plain / t_spec, identical, prompts.size());
    };
    measure("vanilla drafter, chain 5", [&](auto prompt, auto o) {
        return speculative_generate(target, vanilla_drafts, chain, verifier, acceptor, prompt, o);
    });
    measure("GLIDE, chain 5", [&](auto prompt, auto o) {
        return speculative_generate(target, glide_drafts, chain, verifier, acceptor, prompt, o);
    });
    measure("GLIDE + CAPE", [&](auto prompt, auto o) {
        return speculative_generate(target, glide_drafts, cape, verifier, acceptor, prompt, o);
    });
    measure("GLIDE + fixed 4", [&](auto prompt, auto o) {
        return speculative_generate(target, glide_drafts, fixed4, verifier, acceptor, prompt, o);
    });
    return 0;
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
