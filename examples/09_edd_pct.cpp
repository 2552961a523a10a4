// 09 — EDD + PCT (edd-pct.txt) as a composition of policies.
//
// Teaches: a drafter that reads the target's hidden states. EDD's one decoder layer takes the
// target's states of its fourth-to-last layer (edd_hidden_layer) as a soft prompt in front of the
// tokens it drafts; EddProposer feeds them from the target's committed states (ExposesCommittedHidden)
// each step. PCT is a TreeBuilder: each node with path confidence at least s_d/s_t gets its top-5
// children, and leaves below 0.01 are dropped — with s_d/s_t measured here, on this machine. Greedy
// output equals plain greedy decoding; VDM (the same layer without the soft prompt) is the baseline
// of the paper's Table 1. Models: train_demo edd edd | vdm.
//
// Run from the repository root: ./build/release/09_edd_pct [n_prompts=6]. Exits 1 if an output differs
// from plain greedy decoding.
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
    Checkpoint t = load_checkpoint("models/target"), v = load_checkpoint("models/vdm");
    EddCheckpoint e = load_edd_checkpoint("models/edd");
    check_edd_pair(e.config, e.target_layer, t.config);
    CpuModel target(t.config, std::move(t.weights), opts), vdm(v.config, std::move(v.weights), opts);
    CpuModel edd(e.config, std::move(e.weights), opts);
    const Tokenizer tok = Tokenizer::load("models/target/tokenizer.json");

    // ---- the compositions (greedy) ------------------------------------------------------------------
    const ForwardCosts costs = measure_forward_costs(target, edd);  // s_d and s_t, measured now
    EddProposer edd_drafts(target, edd, e.target_layer);            // reads target's layer L-3 states
    ModelProposer vdm_drafts(vdm);
    Chain chain{.gamma = 5};                                        // Table 1: a chain of 5
    PrunedCandidateTree pct{.expand_threshold = static_cast<float>(costs.ratio())};  // width 5, depth 10, leaves 0.01
    TreeVerifier verifier;
    GreedyMatch acceptor;
    // ------------------------------------------------------------------------------------------------
    std::printf("s_d = %.3f ms, s_t = %.3f ms: PCT expands nodes with path confidence >= %.3f\n",
                1e3 * costs.draft_seconds, 1e3 * costs.target_seconds, costs.ratio());

    const auto prompts = example::read_prompts("data/prompts.jsonl", n_prompts);
    bool lossless = true;
    const auto measure = [&](const char* name, auto&& generate) {
        lossless = example::compare_with_greedy(name, 16, target, tok, prompts, generate) && lossless;
    };
    measure("VDM, chain 5", [&](auto prompt, auto o) {
        return speculative_generate(target, vdm_drafts, chain, verifier, acceptor, prompt, o);
    });
    measure("EDD, chain 5", [&](auto prompt, auto o) {
        return speculative_generate(target, edd_drafts, chain, verifier, acceptor, prompt, o);
    });
    measure("EDD + PCT", [&](auto prompt, auto o) {
        return speculative_generate(target, edd_drafts, pct, verifier, acceptor, prompt, o);
    });
    return lossless ? 0 : 1;  // greedy output must be plain greedy decoding's
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
