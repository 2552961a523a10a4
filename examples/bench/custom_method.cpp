// custom_method — your own method in specdec_bench's tables and report, without forking the harness.
//
// A program registers compositions by name: a factory returning the policies (a proposer over a drafter
// the harness loads, a tree builder, an acceptor), the acceptor's precondition for the reports, and
// whether the method claims to be lossless. run_main then runs them beside the autoregressive baseline
// (and beside a methods file's entries, with --methods), and prints and writes what specdec_bench does.
// Here: prompt lookup (examples/prompt_lookup.hpp, a proposer with no model that copies what followed
// the text's last tokens earlier on), drafting chains of up to 4 tokens, verified by speculative
// sampling (exact at any temperature: its drafts are deterministic, q one-hot).
#include "../prompt_lookup.hpp"
#include "harness.hpp"

using namespace specdec;

int main(int argc, char** argv) {
    bench::register_method(
        "prompt lookup g4",
        [](bench::Models& models) {  // called once per generation: fresh policies each time
            return check::Composition{example::PromptLookup{.vocab = models.target->vocab_size(), .max_draft = 4},
                                      Chain{.gamma = 4}, SpeculativeSampling{}};
        },
        {.claims_lossless = true, .acceptor = "speculative sampling: exact for deterministic drafts (q one-hot)"});
    return bench::run_main(argc, argv);
}
// Build and run (from the repository root):
//   cmake --build build --target custom_method
//   ./build/custom_method --n-prompts 5 --repeats 1 --max-new 32
//   ./build/custom_method --methods examples/bench/methods.json   (beside every built-in method)
// Prints the table (the registered row says "greedy identity measured: 5/5 prompts identical to
// autoregressive" at T = 0) and writes build/bench/table.csv, table.json and report.html.
