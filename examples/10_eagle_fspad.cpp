// 10 — EAGLE-2 and FSPAD (fspad.txt) as two compositions that differ in one drafter.
//
// Teaches: a drafter that works on the target's features rather than its tokens. FeatureProposer
// reads the target's final normed states of the committed text (ExposesCommittedHidden) and drafts
// autoregressively at the feature level inside EAGLE-2's dynamic tree (Eagle2Tree: expand the top-k
// by joint probability, keep the global top-N). EAGLE's drafter joins (e_{t+1}, f_t) with an FC layer;
// FSPAD's with its Feature Sampler, and its layer's MLP outputs two halves (PAD). The composition is
// the same; only the checkpoint differs. Greedy output equals plain greedy decoding; at T > 0 the
// same tree goes with SampleAndMatch (exact for a tree of top-k children). Models: train_demo eagle
// eagle fspad.
//
// Run from the repository root: ./build/release/10_eagle_fspad [n_prompts=4] [half]. Exits 1 if an
// output differs from plain greedy decoding.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "report.hpp"
#include "specdec.hpp"

using namespace specdec;

int main(int argc, char** argv) try {
    const int n_prompts = example::int_argument(argc, argv, 1, "n_prompts", 4, 1, 100000);
    const bool half = example::choice_argument(argc, argv, 2, "tree budget", {"full", "half"}) == "half";
    ThreadPool pool(1);
    const ModelOptions opts{.pool = &pool};
    Checkpoint t = load_checkpoint("models/target");
    CpuModel target(t.config, std::move(t.weights), opts);
    const Tokenizer tok = Tokenizer::load("models/target/tokenizer.json");

    // ---- the compositions (greedy) ------------------------------------------------------------------
    FeatureDrafter eagle(load_feature_checkpoint("models/eagle"), opts);  // FC connector
    FeatureDrafter fspad(load_feature_checkpoint("models/fspad"), opts);  // Feature Sampler + PAD
    FeatureProposer eagle_drafts(target, eagle);                           // reads target's features
    FeatureProposer fspad_drafts(target, fspad);
    Eagle2Tree tree = half ? Eagle2Tree::half_budget() : Eagle2Tree{};     // 60 / 6 / 10, or 30 / 6 / 5
    TreeVerifier verifier;
    GreedyMatch acceptor;                                                  // SampleAndMatch at T > 0
    // ------------------------------------------------------------------------------------------------
    std::printf("EAGLE-2 tree: %d tokens, depth %d, top-k %d\n", tree.total_tokens, tree.depth, tree.top_k);

    const auto prompts = example::read_prompts("data/prompts.jsonl", n_prompts);
    bool lossless = true;
    const auto measure = [&](const char* name, auto&& generate) {
        lossless = example::compare_with_greedy(name, 8, target, tok, prompts, generate) && lossless;
    };
    measure("EAGLE-2", [&](auto prompt, auto o) {
        return speculative_generate(target, eagle_drafts, tree, verifier, acceptor, prompt, o);
    });
    measure("FSPAD", [&](auto prompt, auto o) {
        return speculative_generate(target, fspad_drafts, tree, verifier, acceptor, prompt, o);
    });
    return lossless ? 0 : 1;  // greedy output must be plain greedy decoding's
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
