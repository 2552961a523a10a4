// specdec_bench — every method side by side: same prompts, same output length, same machine, losslessness checked.
//
// For each temperature, each repeat, each prompt, every method of methods.json runs in turn
// (interleaved, so drift in the machine's speed hits all methods alike), with the same seed per
// (prompt, repeat) for all of them. Outputs are exactly --max-new tokens (EOS does not stop them), so
// every method produces the same amount of text. Models are loaded into ordinary memory (float32) and
// each method runs one untimed warm-up generation per temperature before timing.
//
// Per method and temperature it reports tau, the three acceptance rates of the papers, tokens/s and
// speedup over autoregressive (median over repeats, min–max beside), the standardized walltime
// improvement with parameter counts and with measured per-call times as costs, the analytic expected
// speedup for chains, the draft share of time, and losslessness: at T = 0 every output must equal the
// autoregressive one token for token; at T > 0 the run checks nothing (a law is not tested by 20
// prompts) and says so, naming the acceptor that ran and the precondition under which it is lossless.
//
// The harness is examples/bench/harness.hpp: a program of yours registers its own compositions there and
// gets this table, CSV, JSON and HTML (examples/bench/custom_method.cpp); this program is that harness
// with the built-in kinds of methods.json.
//
// Build and run:
//   cmake --build build --target specdec_bench && ./build/specdec_bench
//   (by hand: g++ -std=c++20 -O2 -I. examples/bench/specdec_bench.cpp -o specdec_bench -pthread)
// Writes build/bench/table.csv, table.json and report.html; prints the table; progress on stderr.
#include "harness.hpp"

int main(int argc, char** argv) {
    return specdec::bench::run_main(argc, argv, specdec::bench::registry(), {.methods = "examples/bench/methods.json"});
}
// Run from the repository root: ./build/release/specdec_bench   (about a minute on 2 cores with the demo models; --repeats 1 --n-prompts 5 for a smoke test)
// Prints the setup, then one row per method and temperature: tau, acceptance, tokens/s and speedup with
// their spread, SWI, expected speedup (chains), draft share, and "greedy identity measured: 20/20 prompts identical to autoregressive" at T = 0.
