// examples/bench/bench_results.hpp — what one run of specdec_bench measured: the harness fills it, the
// table, CSV, JSON and HTML writers read it.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "methods.hpp"
#include "specdec.hpp"

namespace specdec::bench {

/// A median over repeats with the range it came from (lo = min, hi = max).
struct Spread {
    double median = NAN, lo = NAN, hi = NAN;
};

inline Spread spread_of(std::vector<double> v) {
    if (v.empty()) return {};
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return {median, v.front(), v.back()};
}

inline double median_of(std::vector<double> v) { return spread_of(std::move(v)).median; }

/// One method at one temperature, pooled over every prompt and repeat.
struct MethodResult {
    MethodSpec spec;
    float temperature = 0;
    Summary summary;              // tau and the alphas as ratios of sums over all steps; times summed
    Spread tokens_per_s;          // per repeat: new tokens of all prompts / their walltime
    Spread speedup;               // per repeat: autoregressive walltime / this method's walltime
    double target_call_s = NAN;   // median seconds of one target forward of the autoregressive baseline (1 token)
    double verify_s = NAN;        // median seconds of this method's verification (one target forward over its tree)
    double draft_call_s = NAN;    // mean seconds of one drafter forward, over every drafter model's calls
    double swi_params = NAN;      // standardized walltime improvement, cost = matrix parameters per forward
    double swi_measured = NAN;    // the same with measured seconds as costs: target_call_s and each model's mean
    double expected_speedup = NAN;  // chains: (1 - a^(g+1)) / ((1 - a)(g c + 1)), a = alpha_token,
                                    // c = draft_call_s / target_call_s
    double pct_threshold = NAN;     // pct: the s_d/s_t it pruned with (the entry's, or measured once in the run)
    bool pct_threshold_measured = false;  // true: measured on this machine in this run
    std::vector<std::pair<std::string, long>> calls_per_model;  // drafter forwards per model folder, all timed runs
    std::vector<long> tau_hist;   // [k]: steps that added k tokens to the output (StepRecord::n_emitted): mean tau
    bool exact_check = false;     // greedy: outputs compared token for token with autoregressive
    std::string acceptor;         // the acceptor that ran and its precondition (compose.hpp's Run::acceptor)
    bool claims_lossless = true;  // false: lossy by design (target-initialised MCSD, a registered method saying so)
    std::string check_report;     // T > 0: check::check_lossless's verdict when the run called it, else empty
    int n_compared = 0;           // prompts compared (over all repeats)
    int n_mismatched = 0;         // prompts whose output differed from autoregressive in any repeat
};

/// A stretch of decoded text and the depth of the draft it came from (0 = the target's own token).
/// A piece is one token, or several when a character's UTF-8 bytes span tokens.
struct Piece {
    std::string text;  // UTF-8, except bytes that never formed a character (the report spells them out)
    int depth = 0;
    int n_tokens = 1;
};

/// One prompt as every method continued it, for the coloured case-study view (GLIDE, §5 case study).
struct CaseStudy {
    std::string prompt_id, kind, prompt_text;
    float temperature = 0;
    std::vector<std::string> methods;          // method names, one per row of pieces
    std::vector<std::vector<Piece>> outputs;   // (methods, pieces)
};

struct ModelInfo {
    std::string name;      // folder name under --models
    Config config;
    long matrix_params = 0;  // parameters read per forward: every layer matrix + the LM head
};

struct Results {
    std::string command;              // how this run was started
    std::string machine;              // CPU model and cores
    std::string started;              // local date and time
    int threads = 1;
    std::string weights = "float32 in ordinary memory";
    std::string target_scale;         // --target-scale: a widened target's preset (110m, 1b, 7b), or empty
    std::string target_label;         // cost_scaled_label(target_scale), on every table, CSV row and chart
    std::vector<ModelInfo> models;    // target first
    int n_prompts = 0, max_new = 0, repeats = 0;
    std::uint64_t seed = 0;
    std::vector<float> temperatures;
    std::vector<MethodResult> rows;   // temperature-major, methods in file order
    std::vector<CaseStudy> cases;
};

/// What this run checked of a method's losslessness, in the words of the table, CSV, JSON and HTML:
/// at T = 0 the greedy identity it measured; at T > 0 check_lossless's verdict when the run called it,
/// else "not checked in this run" with the acceptor that ran and its precondition.
inline std::string lossless_text(const MethodResult& r) {
    if (r.spec.kind == MethodKind::kAutoregressive) return "reference";
    if (r.exact_check) {
        const std::string measured = "greedy identity measured: " + std::to_string(r.n_compared - r.n_mismatched) + "/" +
                                     std::to_string(r.n_compared) + " prompts identical to autoregressive";
        if (!r.claims_lossless) return "LOSSY by design; " + measured;  // improved MCSD's top seeds at T = 0
        return r.n_mismatched > 0 ? "NOT LOSSLESS: " + measured : measured;
    }
    if (r.spec.kind == MethodKind::kTargetInit)
        return "LOSSY by design (improved MCSD; its loss measured by examples/bench/mcsd_study law)";
    const std::string by_design = r.claims_lossless ? "" : "LOSSY by design; ";
    if (!r.check_report.empty()) return by_design + "check_lossless ran: " + r.check_report;
    // A few prompts cannot test a law: this run did not check it, and says what the acceptor needs.
    return by_design + "not checked in this run (" + r.acceptor + ")";
}

/// The target as the CSV names it on every row: the simulation label of a widened target, else the
/// folder's name and size.
inline std::string target_text(const Results& res) {
    if (!res.target_label.empty()) return res.target_label;
    if (res.models.empty()) return "";
    char size[32];
    std::snprintf(size, sizeof size, "%.1fM", static_cast<double>(res.models.front().config.parameter_count()) / 1e6);
    return res.models.front().name + " (" + size + " parameters)";
}

/// The label every result on a widened target carries (docs/widening.md, the label rule): the numbers
/// are the demo pair's acceptance at the named cost, not a real model's of that size.
inline std::string cost_scaled_label(const std::string& preset) {
    if (preset.empty()) return "";
    std::string cost = preset;
    for (char& c : cost) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return "cost-scaled (widened demo target: same outputs, " + cost + " cost)";
}

}  // namespace specdec::bench
