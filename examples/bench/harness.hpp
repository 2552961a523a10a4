// examples/bench/harness.hpp — specdec_bench as a library: register your own compositions, get its table,
// CSV, JSON and HTML report.
// SPDX-License-Identifier: MIT
#pragma once

// A program registers methods by name, each a factory returning the policies of one composition (the
// check::Composition that check_lossless takes), then hands its command line to run_main:
//
//     bench::register_method("SD small g4, sample-and-match", [](bench::Models& m) {
//         return check::Composition{ModelProposer(m.drafter("small")), Chain{.gamma = 4}, SampleAndMatch{}};
//     }, {.acceptor = "sample-and-match: lossless for any tree", .drafters = {"small"}});
//     int main(int argc, char** argv) { return bench::run_main(argc, argv); }
//
// The run holds the autoregressive baseline and the registered methods (plus the entries of a methods
// file, with --methods), each measured as specdec_bench measures its own: same prompts, same seeds,
// interleaved, greedy identity against the baseline at T = 0. examples/bench/custom_method.cpp is a
// complete program; docs/benchmark.md ("Your own method") says how to build one outside this tree.
// specdec_bench itself is run_main with examples/bench/methods.json as its default methods file.

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "bench_results.hpp"
#include "compose.hpp"
#include "methods.hpp"
#include "report_html.hpp"
#include "../report.hpp"
#include "specdec.hpp"

namespace specdec::bench {

namespace harness {

namespace fs = std::filesystem;

// ---- command line ------------------------------------------------------------------------------------

struct Args {
    fs::path methods;            // empty: the autoregressive baseline and the registered methods only
    fs::path models = "models";
    fs::path prompts = "data/prompts.jsonl";
    int n_prompts = 20;          // taken evenly across kinds
    int max_new = 64;            // new tokens per generation, exactly
    int repeats = 3;
    int threads = 0;             // 0 = every core
    std::vector<float> temperatures{0.0f, 1.0f};
    fs::path out = "build/bench";
    std::uint64_t seed = 1;
    std::string split = "all";   // all | val (even lines of the prompts file) | test (odd lines)
    std::string target_scale;    // 110m | 1b | 7b: the target widened to that cost (docs/widening.md), bf16
    int check_lossless = 0;      // N > 0: check_lossless over N runs for registered methods at T > 0
    bool help = false;           // --help: print the usage, run nothing
};

inline constexpr const char* kUsage =
    "usage: <program> [--methods FILE] [--models DIR] [--prompts FILE] [--n-prompts N] [--max-new N]\n"
    "                     [--repeats R] [--threads N] [--temperatures 0,1] [--out DIR] [--seed S]\n"
    "                     [--split all|val|test]   (val: even lines of the prompts file, test: odd lines)\n"
    "                     [--target-scale 110m|1b|7b]   (the target widened to that cost, same outputs, bf16;\n"
    "                      drafters that read the target's states, KV or features widened with it)\n"
    "                     [--check-lossless N]   (at T > 0, check::check_lossless on each registered method that\n"
    "                      claims losslessness: the first two tokens of the first prompt over N runs)\n";

inline int to_int(const std::string& flag, const std::string& v, int lo) {
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < lo || n > 1'000'000)
        detail::fail("bench", "argument " + flag + " = '" + v + "': expected an integer in [" + std::to_string(lo) +
                                  ", 1000000]");
    return static_cast<int>(n);
}

/// A seed: any unsigned 64-bit integer, in decimal.
inline std::uint64_t to_seed(const std::string& flag, const std::string& v) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || v[0] == '-' || v[0] == '+' || *end != '\0' || errno == ERANGE)
        detail::fail("bench", "argument " + flag + " = '" + v + "': expected an integer in [0, 2^64 - 1]");
    return static_cast<std::uint64_t>(n);
}

inline std::vector<float> to_temperatures(const std::string& v) {
    std::vector<float> out;
    std::stringstream ss(v);
    for (std::string item; std::getline(ss, item, ',');) {
        char* end = nullptr;
        const float t = std::strtof(item.c_str(), &end);
        if (item.empty() || *end != '\0' || !(t >= 0.0f) || !std::isfinite(t))
            detail::fail("bench", "argument --temperatures = '" + v + "': '" + item + "' is not a temperature >= 0");
        out.push_back(t);
    }
    if (out.empty()) detail::fail("bench", "argument --temperatures is empty; e.g. --temperatures 0,1");
    return out;
}

/// `defaults` holds the program's own defaults (specdec_bench: its methods.json); flags override them.
inline Args parse_args(int argc, char** argv, Args a = {}) {
    using Setter = void (*)(Args&, const std::string& flag, const std::string& value);
    // Every flag and what it sets, in one list: the parser and the unknown-flag check read the same names.
    static const std::vector<std::pair<std::string_view, Setter>> kFlags = {
        {"--methods", [](Args& a, const std::string&, const std::string& v) { a.methods = v; }},
        {"--models", [](Args& a, const std::string&, const std::string& v) { a.models = v; }},
        {"--prompts", [](Args& a, const std::string&, const std::string& v) { a.prompts = v; }},
        {"--n-prompts", [](Args& a, const std::string& f, const std::string& v) { a.n_prompts = to_int(f, v, 1); }},
        {"--max-new", [](Args& a, const std::string& f, const std::string& v) { a.max_new = to_int(f, v, 1); }},
        {"--repeats", [](Args& a, const std::string& f, const std::string& v) { a.repeats = to_int(f, v, 1); }},
        {"--threads", [](Args& a, const std::string& f, const std::string& v) { a.threads = to_int(f, v, 0); }},
        {"--temperatures", [](Args& a, const std::string&, const std::string& v) { a.temperatures = to_temperatures(v); }},
        {"--out", [](Args& a, const std::string&, const std::string& v) { a.out = v; }},
        {"--check-lossless", [](Args& a, const std::string& f, const std::string& v) { a.check_lossless = to_int(f, v, 1); }},
        {"--seed", [](Args& a, const std::string& f, const std::string& v) { a.seed = to_seed(f, v); }},
        {"--target-scale", [](Args& a, const std::string&, const std::string& v) {
             (void)widen_preset(v);  // names the presets when v is not one
             a.target_scale = v;
         }},
        {"--split", [](Args& a, const std::string&, const std::string& v) {
             if (v != "all" && v != "val" && v != "test")
                 detail::fail("bench", "argument --split = '" + v + "': expected all, val or test");
             a.split = v;
         }},
    };
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--help" || flag == "-h") {
            a.help = true;
            return a;
        }
        const auto known = std::find_if(kFlags.begin(), kFlags.end(), [&](const auto& f) { return f.first == flag; });
        if (known == kFlags.end()) detail::fail("bench", "unknown argument '" + flag + "'\n" + kUsage);  // named before
        if (i + 1 >= argc) detail::fail("bench", "argument " + flag + " needs a value\n" + kUsage);    // its value is looked for
        known->second(a, flag, argv[++i]);
    }
    return a;
}

// ---- prompts -----------------------------------------------------------------------------------------

struct Prompt {
    std::string id, kind, text;
    std::vector<int> tokens;
};

/// Reads prompts.jsonl ({"id", "kind", "text"} per line) and takes `n` of them round-robin over the
/// kinds in order of first appearance, so each kind is equally represented (±1). `split` keeps every
/// prompt ("all"), the even-numbered ones ("val": where hyperparameters are searched) or the odd ones
/// ("test": where the chosen ones are reported).
inline std::vector<Prompt> load_prompts(const fs::path& path, int n, const Tokenizer& tok, const std::string& split) {
    std::ifstream in(path);
    detail::require(static_cast<bool>(in), "bench", [&] { return path.string() + ": cannot open the prompts file"; });
    std::vector<std::string> kinds;
    std::map<std::string, std::vector<Prompt>> by_kind;
    int line_no = 0, n_read = 0;
    for (std::string line; std::getline(in, line);) {
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const bool even = n_read++ % 2 == 0;
        if ((split == "val" && !even) || (split == "test" && even)) continue;
        const json::Value v = json::parse(line, path.string() + ":" + std::to_string(line_no));
        Prompt p{v.at("id").as_string(), v.at("kind").as_string(), v.at("text").as_string(), {}};
        p.tokens = tok.encode(p.text);
        detail::require(!p.tokens.empty(), "bench", [&] { return path.string() + ":" + std::to_string(line_no) + ": prompt '" + p.id + "' encodes to no tokens"; });
        if (!by_kind.count(p.kind)) kinds.push_back(p.kind);
        by_kind[p.kind].push_back(std::move(p));
    }
    std::vector<Prompt> out;
    for (std::size_t round = 0; static_cast<int>(out.size()) < n; ++round) {
        bool any = false;
        for (const std::string& k : kinds)
            if (round < by_kind[k].size() && static_cast<int>(out.size()) < n) {
                out.push_back(by_kind[k][round]);
                any = true;
            }
        if (!any) break;
    }
    detail::require(static_cast<int>(out.size()) == n, "bench", [&] {
        return path.string() + ": --n-prompts " + std::to_string(n) + " asked, the file has " + std::to_string(out.size());
    });
    return out;
}

// ---- models ------------------------------------------------------------------------------------------

/// The target's tokenizer: its folder's tokenizer.json, else the shared one beside the models.
inline Tokenizer load_tokenizer(const fs::path& models) {
    const fs::path own = models / "target" / "tokenizer.json";
    return Tokenizer::load(fs::exists(own) ? own : models / "tokenizer.json");
}

/// load_checkpoint reads every tensor into heap vectors (not a file mapping): the measured memory is
/// ordinary memory, and the warm-up generations touch every page before timing. A folder whose
/// config.json has GLIDE's fields holds a GLIDE drafter, built next to the loaded target.
/// With `target_scale` (a widen_preset name) the target is widened to that cost, its matrices generated
/// straight into bf16 (docs/widening.md): the same outputs at a larger model's memory traffic and FLOPs.
/// `law_of_two_tokens`: the target verifies a tree of vocab + 1 nodes (check::exact_two_token_law).
inline Models load_models(const fs::path& dir, const std::vector<MethodSpec>& methods, ThreadPool& pool, int max_tree_nodes,
                          const std::string& target_scale, bool law_of_two_tokens = false) {
    const ModelOptions opt{.max_tree_nodes = max_tree_nodes, .pool = &pool};
    Models m;
    const auto need = [&](const std::string& name, const std::string& why) {
        if (!fs::exists(dir / name / "config.json"))
            detail::fail("bench", (dir / name).string() + ": no model here (no config.json), needed " + why +
                                      "; hint: scripts/train_models.sh trains the demo models, --models DIR reads others");
    };
    need("target", "as the target of every method");
    Checkpoint t = load_checkpoint(dir / "target", LoadOptions{.defer_matrices = !target_scale.empty()});
    const Config trained = t.config;
    if (!target_scale.empty()) t = widen(t, widen_preset(target_scale), kTargetWidenSeed);
    m.info.push_back({"target", t.config, matrix_params(t.config)});
    ModelOptions target_opt = opt;
    if (!target_scale.empty()) target_opt.weight_format = WeightFormat::kBF16;
    if (law_of_two_tokens) target_opt.max_tree_nodes = std::max(target_opt.max_tree_nodes, t.config.vocab_size + 1);
    m.target = std::make_unique<CpuModel>(t.config, std::move(t.weights), target_opt);
    for (const MethodSpec& s : methods) {
        for (const std::string& name : drafter_names(s)) {
            if (m.drafters.count(name) || m.glides.count(name) || m.edds.count(name) || m.features.count(name)) continue;
            need(name, "as a drafter of method '" + s.name + "'");
            const json::Value cfg = json::parse(detail::read_text_file(dir / name / "config.json", "bench"),
                                                (dir / name / "config.json").string());
            const json::Value* type = cfg.find("model_type");
            if (type != nullptr && type->is_string() && type->as_string() == "edd") {
                EddCheckpoint e = load_edd_checkpoint(dir / name);
                if (!target_scale.empty()) e = widen_with_target(std::move(e), trained, m.target->config());
                check_edd_pair(e.config, e.target_layer, m.target->config());
                m.info.push_back({name, e.config, matrix_params(e.config)});
                m.edd_layers[name] = e.target_layer;
                m.edds[name] = std::make_unique<CpuModel>(e.config, std::move(e.weights),
                                                          target_scale.empty() ? opt : widened_drafter_options(opt));
            } else if ((type != nullptr && type->is_string() && (type->as_string() == "eagle" || type->as_string() == "fspad")) ||
                       is_eagle_layout(dir / name)) {
                // This library's feature drafter (widened with the target under --target-scale), or EAGLE-1/2's
                // folder as SGLang / vLLM load it: the target's embedding and head, its shape checked by name.
                FeatureCheckpoint f;
                if (is_eagle_layout(dir / name)) {
                    detail::require(target_scale.empty(), "bench", [&] {
                        return (dir / name).string() + ": an EAGLE-layout folder reads the target as trained; under "
                                                       "--target-scale only this library's feature drafter folders are "
                                                       "widened (save it with save_feature_checkpoint first)";
                    });
                    f = load_eagle_layout(dir / name, m.target->config(), m.target->weights());
                } else {
                    f = load_feature_checkpoint(dir / name);
                    if (!target_scale.empty()) f = widen_with_target(std::move(f), trained, m.target->config());
                    check_feature_pair(f, m.target->config());
                }
                m.info.push_back({name, f.config, matrix_params(f.config)});
                m.features[name] = std::make_unique<FeatureDrafter>(std::move(f), target_scale.empty() ? opt : widened_drafter_options(opt));
            } else if (cfg.find("glide_cross_attention") != nullptr) {
                GlideCheckpoint g = load_glide_checkpoint(dir / name);
                if (!target_scale.empty()) g = widen_with_target(std::move(g), trained, m.target->config());
                const Config shape = g.config.draft;
                // The cross-attention's q and o projections (D x cross_dim each, per layer) are read too.
                const long cross = g.config.glide_cross_attention
                                       ? 2L * shape.num_hidden_layers * shape.hidden_size * g.config.cross_dim() : 0L;
                m.glides[name] = std::make_unique<GlideModel<CpuModel>>(std::move(g.config), std::move(g.weights), *m.target, opt);
                m.info.push_back({name, shape, matrix_params(shape) + cross});
            } else if (s.kind == MethodKind::kText) {  // a tokenizer of its own: any vocabulary
                Checkpoint ck = load_checkpoint(dir / name);
                detail::require(fs::exists(dir / name / "tokenizer.json"), "bench", [&] {
                    return (dir / name / "tokenizer.json").string() + " is missing: method '" + s.name +
                           "' drafts through the text with the drafter's own tokenizer";
                });
                m.tokenizers[name] = std::make_unique<Tokenizer>(Tokenizer::load(dir / name / "tokenizer.json"));
                m.info.push_back({name, ck.config, matrix_params(ck.config)});
                m.drafters[name] = std::make_unique<CpuModel>(ck.config, std::move(ck.weights), opt);
            } else {
                Checkpoint ck = load_checkpoint(dir / name);
                detail::require(ck.config.vocab_size == m.target->vocab_size(), "bench", [&] {
                    return (dir / name).string() + ": vocab_size " + std::to_string(ck.config.vocab_size) +
                           " differs from the target's " + std::to_string(m.target->vocab_size()) + " (method '" + s.name + "')";
                });
                m.info.push_back({name, ck.config, matrix_params(ck.config)});
                m.drafters[name] = std::make_unique<CpuModel>(ck.config, std::move(ck.weights), opt);
            }
        }
        if (s.kind == MethodKind::kText && !m.tokenizers.count("target"))
            m.tokenizers["target"] = std::make_unique<Tokenizer>(load_tokenizer(dir));
        if (s.kind == MethodKind::kCascade && !m.bigram) {
            if (!fs::exists(dir / "bigram.json"))
                detail::fail("bench", (dir / "bigram.json").string() + ": Max-Gram's bigram table is missing, needed by method '" +
                                          s.name + "'; hint: ./build/release/train_demo bigram writes it");
            m.bigram = std::make_unique<Bigram>(Bigram::load(dir / "bigram.json", m.target->vocab_size()));
        }
    }
    return m;
}



// ---- measuring ---------------------------------------------------------------------------------------

/// Everything one (method, temperature) cell collects while the runs go.
struct Accumulator {
    Generation pooled;                 // tokens and steps of every timed generation, concatenated
    std::vector<double> seconds;       // per repeat: walltime of all prompts
    std::vector<long> tokens;          // per repeat: new tokens of all prompts
    std::vector<std::vector<int>> outputs;  // (repeats * prompts): for the exact check against autoregressive
    std::vector<Generation> first_repeat;   // (prompts): repeat 0, for the case studies
    std::vector<DrafterUsage> usage;        // per drafter model: forwards and seconds, all timed runs
    std::string acceptor;                   // Run::acceptor (one per method and temperature)

    void add_usage(const std::vector<DrafterUsage>& us) {
        for (const DrafterUsage& u : us) {
            auto it = std::find_if(usage.begin(), usage.end(), [&](const DrafterUsage& o) { return o.model == u.model; });
            if (it == usage.end()) usage.push_back(u);
            else it->calls += u.calls, it->seconds += u.seconds;
        }
    }
};

inline MethodResult finish(const MethodSpec& spec, float temperature, const Accumulator& a, const Accumulator& baseline,
                    Models& models, int n_prompts) {
    MethodResult r;
    r.spec = spec;
    r.temperature = temperature;
    if (spec.kind == MethodKind::kPct) {  // measured before the runs (warm-up) and kept: this reads it back
        r.pct_threshold = pct_threshold(spec, models);
        r.pct_threshold_measured = spec.pct.expand_threshold <= 0.0f;
    }
    r.summary = summarize(a.pooled);
    std::vector<double> rate, speedup;
    for (std::size_t i = 0; i < a.seconds.size(); ++i) {
        rate.push_back(a.tokens[i] / a.seconds[i]);
        speedup.push_back(baseline.seconds[i] / a.seconds[i]);
    }
    r.tokens_per_s = spread_of(rate);
    r.speedup = spread_of(speedup);

    std::vector<double> verify, single;
    for (const StepRecord& s : a.pooled.steps) {
        verify.push_back(s.t_verify);
        const int k = s.n_emitted;  // tokens the step added: the histogram's mean is tau
        if (static_cast<int>(r.tau_hist.size()) <= k) r.tau_hist.resize(k + 1, 0);
        ++r.tau_hist[k];
    }
    for (const StepRecord& s : baseline.pooled.steps) single.push_back(s.t_verify);
    // SWI and the expected speedup price every target call alike (CS Drafting §5; Leviathan et al.
    // §3.5): at the autoregressive baseline's one-token forward. What a wide tree's verification
    // costs beyond that shows up as the gap between them and the measured speedup.
    r.target_call_s = median_of(single);
    r.verify_s = median_of(verify);
    // Each drafter model is priced by its parameters (MS) or by its measured mean seconds per forward.
    const Summary& s = r.summary;
    std::vector<CallCost> by_params, by_time;
    long calls = 0;
    double draft_seconds = 0;
    for (const DrafterUsage& u : a.usage) {
        const ModelInfo& info = models.info_of(u.model);
        by_params.push_back({u.calls, static_cast<double>(info.matrix_params)});
        by_time.push_back({u.calls, u.calls > 0 ? u.seconds / u.calls : 0.0});
        r.calls_per_model.push_back({info.name, u.calls});
        calls += u.calls;
        draft_seconds += u.seconds;
    }
    r.swi_params = standardized_walltime_improvement(s.n_tokens, s.n_target_calls,
                                                     static_cast<double>(models.info.front().matrix_params), by_params);
    if (spec.kind == MethodKind::kAutoregressive) {
        r.swi_measured = 1.0;
    } else {
        r.draft_call_s = calls > 0 ? draft_seconds / calls : 0.0;
        r.swi_measured = standardized_walltime_improvement(s.n_tokens, s.n_target_calls, r.target_call_s, by_time);
    }
    if (spec.kind == MethodKind::kChain)
        r.expected_speedup = expected_speedup(s.alpha_token, spec.gamma, r.draft_call_s / r.target_call_s);

    r.acceptor = a.acceptor;
    // Target-initialised MCSD is lossy, except at T = 0 with its one seed (the argmax).
    r.claims_lossless = spec.kind != MethodKind::kTargetInit ||
                        (temperature == 0.0f && (!spec.top_seeds_at_t0 || spec.seeds == 1));
    if (spec.registered) {
        r.acceptor = spec.registered->acceptor;
        r.claims_lossless = spec.registered->claims_lossless;
    }
    r.exact_check = temperature == 0.0f;
    if (r.exact_check) {
        r.n_compared = n_prompts;
        for (int p = 0; p < n_prompts; ++p) {
            bool same = true;
            for (std::size_t i = p; i < a.outputs.size(); i += n_prompts) same = same && a.outputs[i] == baseline.outputs[i];
            r.n_mismatched += !same;
        }
    }
    return r;
}

// ---- case studies ------------------------------------------------------------------------------------

inline bool is_valid_utf8(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        const std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (std::size_t j = 1; j < n; ++j)
            if ((static_cast<unsigned char>(s[i + j]) & 0xC0) != 0x80) return false;
        i += n;
    }
    return true;
}

/// Decodes token by token; a character whose UTF-8 bytes span several tokens becomes one piece (with
/// the depth of its first token). Bytes that never form a character stay as they are (at most 4 tokens
/// are grouped); the report spells them out.
inline std::vector<Piece> decode_pieces(const Tokenizer& tok, const Generation& g) {
    std::vector<Piece> out;
    std::vector<int> group;
    int depth = 0;
    for (std::size_t i = 0; i < g.tokens.size(); ++i) {
        if (g.tokens[i] >= tok.vocab_size()) {  // a target padded past its tokenizer: name the id
            if (!group.empty()) out.push_back({tok.decode(group), depth, static_cast<int>(group.size())});
            group.clear();
            out.push_back({"<token " + std::to_string(g.tokens[i]) + ">", g.token_depth[i], 1});
            continue;
        }
        if (group.empty()) depth = g.token_depth[i];
        group.push_back(g.tokens[i]);
        std::string text = tok.decode(group);
        if (is_valid_utf8(text) || group.size() >= 4 || i + 1 == g.tokens.size()) {
            out.push_back({std::move(text), depth, static_cast<int>(group.size())});
            group.clear();
        }
    }
    return out;
}

/// Three prompts of different kinds, each continued by every speculative method at the lowest
/// temperature run (at T = 0 the texts are identical, so only the colours differ between rows).
inline std::vector<CaseStudy> case_studies(const std::vector<Prompt>& prompts, const std::vector<MethodSpec>& methods,
                                    const std::vector<Accumulator>& cells, float temperature, const Tokenizer& tok) {
    std::vector<CaseStudy> out;
    std::vector<std::string> kinds_done;
    for (std::size_t p = 0; p < prompts.size() && out.size() < 3; ++p) {
        if (std::find(kinds_done.begin(), kinds_done.end(), prompts[p].kind) != kinds_done.end()) continue;
        kinds_done.push_back(prompts[p].kind);
        CaseStudy c{prompts[p].id, prompts[p].kind, prompts[p].text, temperature, {}, {}};
        for (std::size_t m = 0; m < methods.size(); ++m) {
            if (methods[m].kind == MethodKind::kAutoregressive) continue;
            c.methods.push_back(methods[m].name);
            c.outputs.push_back(decode_pieces(tok, cells[m].first_repeat[p]));
        }
        out.push_back(std::move(c));
    }
    return out;
}

// ---- output ------------------------------------------------------------------------------------------

inline std::string fmt(const char* f, double v) {
    if (!std::isfinite(v)) return "-";
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

inline void print_table(const Results& res) {
    std::printf("%s, %d thread%s used | weights %s\n", res.machine.c_str(), res.threads, res.threads == 1 ? "" : "s",
                res.weights.c_str());
    if (!res.target_label.empty()) std::printf("target: %s\n", res.target_label.c_str());
    for (const ModelInfo& m : res.models)
        std::printf("  %-8s %2d layers, width %3d: %ld matrix parameters per forward\n", m.name.c_str(),
                    m.config.num_hidden_layers, m.config.hidden_size, m.matrix_params);
    std::printf("%d prompts x %d new tokens x %d repeats, seed %llu; medians over repeats [min-max]\n\n", res.n_prompts,
                res.max_new, res.repeats, static_cast<unsigned long long>(res.seed));
    std::printf("%-26s %4s %5s %5s %5s %5s %5s %18s %17s %6s %6s %6s %6s  %s\n", "method", "T", "tau", "a_tok", "a_EDD",
                "a_MCS", "nodes", "tok/s [min-max]", "speedup [min-max]", "SWIpar", "SWIms", "E[spd]", "draft%", "lossless");
    for (const MethodResult& r : res.rows) {
        const std::string rate = fmt("%.0f", r.tokens_per_s.median) + " [" + fmt("%.0f", r.tokens_per_s.lo) + "-" +
                                 fmt("%.0f", r.tokens_per_s.hi) + "]";
        const std::string spd = fmt("%.2f", r.speedup.median) + " [" + fmt("%.2f", r.speedup.lo) + "-" +
                                fmt("%.2f", r.speedup.hi) + "]";
        const bool ar = r.spec.kind == MethodKind::kAutoregressive;
        std::printf("%-26s %4s %5.2f %5s %5s %5s %5s %18s %17s %6.2f %6.2f %6s %6s  %s\n", r.spec.name.c_str(),
                    fmt("%g", r.temperature).c_str(), r.summary.tau, ar ? "-" : fmt("%.2f", r.summary.alpha_token).c_str(),
                    ar ? "-" : fmt("%.2f", r.summary.alpha_depth).c_str(),
                    ar ? "-" : fmt("%.2f", r.summary.alpha_longest).c_str(),
                    ar ? "-" : fmt("%.1f", r.summary.nodes_per_step).c_str(), rate.c_str(), spd.c_str(), r.swi_params,
                    r.swi_measured, fmt("%.2f", r.expected_speedup).c_str(),
                    ar ? "-" : fmt("%.1f", 100 * r.summary.draft_share()).c_str(), lossless_text(r).c_str());
    }
    std::fflush(stdout);
}

inline void write_file(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    detail::require(static_cast<bool>(out), "bench", [&] { return path.string() + ": cannot write"; });
    out << text;
    detail::require(static_cast<bool>(out), "bench", [&] { return path.string() + ": writing failed"; });
}

inline std::string csv_of(const Results& res) {
    std::string s =
        "method,kind,drafter,temperature,tau,alpha_token,alpha_depth_edd,alpha_longest_mcsd,nodes_per_step,tokens_per_s,"
        "tokens_per_s_min,tokens_per_s_max,speedup,speedup_min,speedup_max,swi_params,swi_measured,"
        "expected_speedup,target_call_ms,verify_ms,draft_call_ms,draft_share,n_tokens,n_target_calls,n_draft_calls,"
        "prompts_compared,prompts_mismatched,lossless,target,pct_threshold,machine,threads,weights\n";
    for (const MethodResult& r : res.rows) {
        const Summary& m = r.summary;
        std::string name = r.spec.name;  // CSV-quote: names may hold commas
        for (std::size_t i = 0; (i = name.find('"', i)) != std::string::npos; i += 2) name.insert(i, 1, '"');
        s += "\"" + name + "\"," + method_name(r.spec.kind) + "," + r.spec.drafter + "," + fmt("%g", r.temperature) + "," +
             fmt("%.4f", m.tau) + "," + fmt("%.4f", m.alpha_token) + "," + fmt("%.4f", m.alpha_depth) + "," +
             fmt("%.4f", m.alpha_longest) + "," + fmt("%.2f", m.nodes_per_step) + "," + fmt("%.1f", r.tokens_per_s.median) + "," + fmt("%.1f", r.tokens_per_s.lo) +
             "," + fmt("%.1f", r.tokens_per_s.hi) + "," + fmt("%.4f", r.speedup.median) + "," + fmt("%.4f", r.speedup.lo) +
             "," + fmt("%.4f", r.speedup.hi) + "," + fmt("%.4f", r.swi_params) + "," + fmt("%.4f", r.swi_measured) + "," +
             fmt("%.4f", r.expected_speedup) + "," + fmt("%.4f", 1e3 * r.target_call_s) + "," + fmt("%.4f", 1e3 * r.verify_s) + "," +
             fmt("%.4f", 1e3 * r.draft_call_s) + "," + fmt("%.4f", m.draft_share()) + "," + std::to_string(m.n_tokens) +
             "," + std::to_string(m.n_target_calls) + "," + std::to_string(m.n_draft_calls) + "," +
             std::to_string(r.n_compared) + "," + std::to_string(r.n_mismatched) + ",\"" + lossless_text(r) + "\",\"" +
             target_text(res) + "\"," + (std::isfinite(r.pct_threshold) ? fmt("%.4f", r.pct_threshold) : std::string()) +
             ",\"" + res.machine + "\"," + std::to_string(res.threads) + ",\"" + res.weights + "\"\n";
    }
    return s;
}

inline json::Value num(double v) { return std::isfinite(v) ? json::Value(v) : json::Value(nullptr); }

inline json::Value spread_json(const Spread& s) {
    json::Object o;
    o.set("median", num(s.median));
    o.set("min", num(s.lo));
    o.set("max", num(s.hi));
    return o;
}

inline std::string json_of(const Results& res) {
    json::Object root;
    root.set("command", res.command);
    root.set("machine", res.machine);
    root.set("started", res.started);
    root.set("threads", res.threads);
    root.set("weights", res.weights);
    root.set("target_scale", res.target_scale.empty() ? json::Value(nullptr) : json::Value(res.target_scale));
    root.set("target_label", res.target_label.empty() ? json::Value(nullptr) : json::Value(res.target_label));
    json::Array models;
    for (const ModelInfo& m : res.models) {
        json::Object o;
        o.set("name", m.name);
        o.set("num_hidden_layers", m.config.num_hidden_layers);
        o.set("hidden_size", m.config.hidden_size);
        o.set("matrix_params", m.matrix_params);
        models.push_back(std::move(o));
    }
    root.set("models", std::move(models));
    root.set("n_prompts", res.n_prompts);
    root.set("max_new_tokens", res.max_new);
    root.set("repeats", res.repeats);
    root.set("seed", static_cast<std::int64_t>(res.seed));
    json::Array rows;
    for (const MethodResult& r : res.rows) {
        const Summary& m = r.summary;
        json::Object o;
        o.set("method", r.spec.name);
        o.set("kind", method_name(r.spec.kind));
        if (!r.spec.about.empty()) o.set("about", r.spec.about);
        if (!r.spec.drafter.empty()) o.set("drafter", r.spec.drafter);
        if (r.spec.kind == MethodKind::kChain || r.spec.kind == MethodKind::kExpanded || r.spec.kind == MethodKind::kLookup ||
            r.spec.kind == MethodKind::kText)
            o.set("gamma", r.spec.gamma);
        if (r.spec.kind == MethodKind::kLookup) o.set("max_ngram", r.spec.max_ngram);
        if (r.spec.kind == MethodKind::kCascade) {
            json::Array names, k;
            for (const std::string& d : r.spec.drafters) names.push_back(d);
            for (const std::vector<int>& row : r.spec.k_matrix) {
                json::Array a;
                for (int v : row) a.push_back(v);
                k.push_back(std::move(a));
            }
            o.set("drafters", std::move(names));
            o.set("k_matrix", std::move(k));
            o.set("lenience", r.spec.lenience);
            o.set("children", r.spec.children);
        }
        if (r.spec.kind == MethodKind::kTree) {
            json::Array k;
            for (int v : r.spec.k_config) k.push_back(v);
            o.set("k_config", std::move(k));
            o.set("draw", draw_name(r.spec.draw));
        }
        if (r.spec.kind == MethodKind::kTargetInit) {
            o.set("seeds", r.spec.seeds);
            json::Array k;
            for (int v : r.spec.k_config) k.push_back(v);
            o.set("k_config", std::move(k));
            o.set("top_seeds_at_t0", r.spec.top_seeds_at_t0);
            o.set("draw_at_t0", draw_name(r.spec.draw));
        }
        o.set("temperature", static_cast<double>(r.temperature));
        o.set("tau", num(m.tau));
        o.set("alpha_token", num(m.alpha_token));
        o.set("alpha_depth_edd", num(m.alpha_depth));
        if (r.spec.kind == MethodKind::kPct) {
            o.set("pct_threshold", num(r.pct_threshold));  // s_d/s_t
            o.set("pct_threshold_measured", r.pct_threshold_measured);
        }
        o.set("alpha_longest_mcsd", num(m.alpha_longest));
        o.set("nodes_per_step", num(m.nodes_per_step));
        json::Array at;
        for (double v : m.accept_at_position) at.push_back(num(v));
        o.set("accept_at_position", std::move(at));
        json::Array hist;
        for (long v : r.tau_hist) hist.push_back(v);
        o.set("tokens_per_step_histogram", std::move(hist));
        o.set("tokens_per_s", spread_json(r.tokens_per_s));
        o.set("speedup", spread_json(r.speedup));
        o.set("swi_params", num(r.swi_params));
        o.set("swi_measured", num(r.swi_measured));
        o.set("expected_speedup", num(r.expected_speedup));
        o.set("target_call_ms", num(1e3 * r.target_call_s));
        o.set("verify_ms", num(1e3 * r.verify_s));
        o.set("draft_call_ms", num(1e3 * r.draft_call_s));
        o.set("draft_share", num(m.draft_share()));
        o.set("n_tokens", m.n_tokens);
        o.set("n_target_calls", m.n_target_calls);
        o.set("n_draft_calls", m.n_draft_calls);
        json::Object per_model;
        for (const auto& [name, calls] : r.calls_per_model) per_model.set(name, calls);
        o.set("draft_calls_per_model", std::move(per_model));
        o.set("lossless", lossless_text(r));
        o.set("prompts_compared", r.n_compared);
        o.set("prompts_mismatched", r.n_mismatched);
        rows.push_back(std::move(o));
    }
    root.set("rows", std::move(rows));
    return json::dump(json::Value(std::move(root)), 2) + "\n";
}

inline std::string now_text() {
    const std::time_t t = std::time(nullptr);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", std::localtime(&t));
    return buf;
}

/// check_lossless's verdict on one prompt in one line of the lossless column.
inline std::string summarize_check(const check::Report& report) {
    const check::PromptCheck& p = report.prompts.front();
    const bool failed = report.fails(p);
    char line[480];
    std::snprintf(line, sizeof line,
                  "%s, first two tokens of prompt 1 over %d runs: chi2 %.1f (dof %d, critical %.1f at p = 0.001), TV %.3f%s; "
                  "later tokens: chi2 %.1f (dof %d, critical %.1f)%s; planted lossy control %s (chi2 %.1f)",
                  failed                      ? "NOT LOSSLESS"
                  : p.law.inconclusive()      ? "no verdict (too few populated cells: raise N)"
                                              : "lossless",
                  report.runs, p.law.chi.statistic, p.law.chi.dof, p.law.critical, p.law.tv,
                  p.law.chi.impossible > 0 ? ", outcomes of probability 0 seen" : "", p.later.chi.statistic,
                  p.later.chi.dof, p.later.critical, p.later.chi.impossible > 0 ? ", outcomes of probability 0 seen" : "",
                  report.powered() ? "caught" : "NOT caught, so the check had no power", p.control.chi.statistic);
    return line;
}

// ---- the run -----------------------------------------------------------------------------------------

/// The methods of one run: the methods file's entries (or the autoregressive baseline alone when the
/// run names no file), then the registered ones, in registration order.
inline std::vector<MethodSpec> methods_of(const Args& args, const std::vector<MethodSpec>& registered) {
    std::vector<MethodSpec> methods;
    if (args.methods.empty()) {
        MethodSpec baseline;
        baseline.name = "autoregressive";
        baseline.about = "the target alone (the baseline)";
        methods.push_back(std::move(baseline));
    } else {
        methods = load_methods(args.methods);
    }
    for (const MethodSpec& r : registered) {
        for (const MethodSpec& m : methods)
            detail::require(m.name != r.name, "bench", [&] {
                return "registered method '" + r.name + "': the name is taken by " +
                       (args.methods.empty() ? std::string("the baseline") : "an entry of " + args.methods.string()) +
                       " (names label the results)";
            });
        methods.push_back(r);
    }
    return methods;
}

/// Runs every method on every prompt, repeat and temperature and returns what it measured.
inline Results measure(const Args& args, const std::vector<MethodSpec>& registered, const std::string& command) {
    const std::vector<MethodSpec> methods = methods_of(args, registered);
    ThreadPool pool(args.threads);
    long widest = 0;  // the drafter's scratch holds a catch-up chain (<= gamma + 1) before the tree
    for (const MethodSpec& m : methods) widest = std::max(widest, draft_nodes(m));
    Models models =
        load_models(args.models, methods, pool, static_cast<int>(std::max(256L, 2 * widest + 8)), args.target_scale,
                    args.check_lossless > 0);
    const Tokenizer tok = load_tokenizer(args.models);
    detail::require(tok.vocab_size() <= models.target->vocab_size(), "bench", [&] {
        return "the tokenizer has " + std::to_string(tok.vocab_size()) + " tokens, the target's vocabulary " +
               std::to_string(models.target->vocab_size());
    });
    const std::vector<Prompt> prompts = load_prompts(args.prompts, args.n_prompts, tok, args.split);

    Results res;
    res.command = command;
    res.machine = example::machine_name();
    res.started = now_text();
    res.threads = pool.size();
    res.models = models.info;
    res.n_prompts = args.n_prompts;
    res.max_new = args.max_new;
    res.repeats = args.repeats;
    res.seed = args.seed;
    res.temperatures = args.temperatures;
    res.target_scale = args.target_scale;
    res.target_label = cost_scaled_label(args.target_scale);
    if (!res.target_scale.empty())
        res.weights = "target bf16 (widened, generated rows); EDD and EAGLE/FSPAD drafters widened with it, bf16; other drafters "
                      "float32; in ordinary memory";

    const std::size_t M = methods.size(), P = prompts.size();
    const std::size_t baseline = static_cast<std::size_t>(std::find_if(methods.begin(), methods.end(), [](const MethodSpec& m) {
        return m.kind == MethodKind::kAutoregressive;
    }) - methods.begin());
    const int total = static_cast<int>(args.temperatures.size() * args.repeats * P * M);
    ProgressLine progress(std::cerr, total, {.terminal = stderr_is_terminal(), .plain_every_s = 10, .unit = "tok"});
    int done = 0;
    double tokens_done = 0;
    using clock = std::chrono::steady_clock;

    for (const float temperature : args.temperatures) {
        const Sampling sampling{.temperature = temperature};
        for (const MethodSpec& m : methods)  // warm-up: touches every weight page, fills caches; not timed
            run_method(m, models, prompts[0].tokens, {.max_new_tokens = args.max_new, .sampling = sampling, .seed = args.seed});
        std::vector<Accumulator> cells(M);
        for (int rep = 0; rep < args.repeats; ++rep) {
            for (Accumulator& a : cells) a.seconds.push_back(0), a.tokens.push_back(0);
            for (std::size_t p = 0; p < P; ++p) {
                // One seed per (prompt, repeat), shared by every method.
                const GenerateOptions opts{.max_new_tokens = args.max_new, .sampling = sampling,
                                           .seed = args.seed * 1'000'003ULL + rep * 10'007ULL + p, .eos_token = -1};
                // Every method on this prompt, one after another, the first one rotating: no method always
                // runs first (on what the one before it left in the caches) or last.
                for (std::size_t k = 0; k < M; ++k) {
                    const std::size_t mi = (k + static_cast<std::size_t>(rep) * P + p) % M;
                    const auto t0 = clock::now();
                    Run run = run_method(methods[mi], models, prompts[p].tokens, opts);
                    const double s = std::chrono::duration<double>(clock::now() - t0).count();
                    Generation& g = run.g;
                    Accumulator& a = cells[mi];
                    a.add_usage(run.usage);
                    a.acceptor = run.acceptor;
                    a.seconds.back() += s;
                    a.tokens.back() += static_cast<long>(g.tokens.size());
                    a.outputs.push_back(g.tokens);
                    a.pooled.tokens.insert(a.pooled.tokens.end(), g.tokens.begin(), g.tokens.end());
                    a.pooled.token_depth.insert(a.pooled.token_depth.end(), g.token_depth.begin(), g.token_depth.end());
                    a.pooled.steps.insert(a.pooled.steps.end(), g.steps.begin(), g.steps.end());
                    tokens_done += static_cast<double>(g.tokens.size());
                    if (rep == 0) a.first_repeat.push_back(std::move(g));
                    progress.update(++done, NAN, tokens_done);
                }
            }
        }
        for (std::size_t mi = 0; mi < M; ++mi) {
            MethodResult r = finish(methods[mi], temperature, cells[mi], cells[baseline], models, static_cast<int>(P));
            if (args.check_lossless > 0 && !sampling.greedy() && methods[mi].registered && r.claims_lossless)
                r.check_report = summarize_check(
                    methods[mi].registered->check_lossless(models, prompts[0].tokens, sampling, args.check_lossless));
            res.rows.push_back(std::move(r));
        }
        if (temperature == *std::min_element(args.temperatures.begin(), args.temperatures.end()) && res.cases.empty())
            res.cases = case_studies(prompts, methods, cells, temperature, tok);
    }
    progress.finish();
    return res;
}

/// The table on stdout; table.csv, table.json and report.html under `out`.
inline void write_reports(const Results& res, const fs::path& out) {
    print_table(res);
    fs::create_directories(out);
    write_file(out / "table.csv", csv_of(res));
    write_file(out / "table.json", json_of(res));
    write_file(out / "report.html", report_html(res));
    std::fprintf(stderr, "wrote %s, %s, %s\n", (out / "table.csv").c_str(), (out / "table.json").c_str(),
                 (out / "report.html").c_str());
}

}  // namespace harness

// ---- registering methods -----------------------------------------------------------------------------

/// What the reports say about a registered method besides its name.
struct MethodOptions {
    bool claims_lossless = true;         // false: lossy by design (at T > 0 the reports say so)
    std::string acceptor{};              // the acceptor and its precondition, e.g. "speculative sampling: lossless when
                                         // each draft is drawn from q"; printed where the run did not check the law
    std::vector<std::string> drafters{}; // the Llama model folders under --models it reads (Models::drafter)
    std::string about{};                 // free text for the report (the method cell's tooltip)
    int max_drafts = 32;                 // the most draft nodes one step verifies (sizes the models' scratch)
};

/// The methods a program registered, in registration order. register_method fills the one `registry()`
/// returns; a test may fill its own and pass it to run_main.
class Registry {
public:
    /// `factory(models)` returns the policies of one composition, fresh for each generation: a
    /// check::Composition{proposer, builder, acceptor} (the verifier defaults to TreeVerifier), built
    /// over the target and the drafters the harness loaded (`models.target`, `models.drafter(name)`).
    template <class Factory>
    void add(std::string name, Factory factory, MethodOptions options = {}) {
        static_assert(std::is_invocable_v<Factory&, Models&>, "register_method: the factory is called as factory(bench::Models&)");
        static_assert(requires(std::invoke_result_t<Factory&, Models&> c) {
            c.proposer;
            c.builder;
            c.verifier;
            c.acceptor;
        }, "register_method: the factory returns check::Composition{proposer, builder, acceptor}");
        detail::require(!name.empty(), "bench", [] { return std::string("register_method: the name is empty"); });
        for (const MethodSpec& m : methods_)
            detail::require(m.name != name, "bench", [&] {
                return "register_method('" + name + "'): a method of that name is already registered (names label the results)";
            });
        detail::require(options.max_drafts >= 0 && options.max_drafts <= kMaxTreeNodes, "bench", [&] {
            return "register_method('" + name + "'): max_drafts " + std::to_string(options.max_drafts) + " is outside [0, " +
                   std::to_string(kMaxTreeNodes) + "]";
        });
        auto method = std::make_shared<RegisteredMethod>();
        method->acceptor = options.acceptor.empty() ? std::string("the program's acceptor") : options.acceptor;
        method->claims_lossless = options.claims_lossless;
        auto make = std::make_shared<Factory>(std::move(factory));  // shared by the runner and the checker
        method->run = [make](Models& models, std::span<const int> prompt, const GenerateOptions& opts) {
            auto c = (*make)(models);
            Generation g = speculative_generate(*models.target, c.proposer, c.builder, c.verifier, c.acceptor, prompt, opts);
            std::vector<DrafterUsage> usage;
            if constexpr (requires { c.proposer.usage(); }) usage = c.proposer.usage();
            return Run{std::move(g), std::move(usage), ""};
        };
        method->check_lossless = [make](Models& models, std::span<const int> prompt, const Sampling& sampling, int runs) {
            return check::check_lossless(*models.target, [&] { return (*make)(models); },
                                         {std::vector<int>(prompt.begin(), prompt.end())}, sampling, runs);
        };
        MethodSpec spec;
        spec.name = std::move(name);
        spec.kind = MethodKind::kRegistered;
        spec.max_drafts = options.max_drafts;
        spec.drafters = std::move(options.drafters);
        spec.about = std::move(options.about);
        spec.registered = std::move(method);
        methods_.push_back(std::move(spec));
    }

    const std::vector<MethodSpec>& methods() const { return methods_; }

private:
    std::vector<MethodSpec> methods_;
};

/// The registry register_method fills and run_main reads by default.
inline Registry& registry() {
    static Registry r;
    return r;
}

/// Registers a method with the program's registry (see Registry::add).
template <class Factory>
void register_method(std::string name, Factory factory, MethodOptions options = {}) {
    registry().add(std::move(name), std::move(factory), std::move(options));
}

// ---- running -----------------------------------------------------------------------------------------

/// A program's own defaults for the flags (specdec_bench: its methods.json).
struct RunOptions {
    std::filesystem::path methods;  // the methods file when the command line names none; empty: none
};

/// Parses the command line (--help lists the flags), runs the methods file's entries and the registered
/// methods, prints the table and writes table.csv, table.json and report.html under --out. Returns the
/// exit status: 0, or 1 after printing a specdec::error's message.
inline int run_main(int argc, char** argv, const Registry& methods = registry(), const RunOptions& options = {}) {
    try {
        harness::Args defaults;
        defaults.methods = options.methods;
        const harness::Args args = harness::parse_args(argc, argv, defaults);
        if (args.help) {
            const std::string program = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "bench";
            std::printf("usage: %s%s", program.c_str(), harness::kUsage + std::string_view("usage: <program>").size());
            return 0;
        }
        std::string command;
        for (int i = 0; i < argc; ++i) {
            if (i > 0) command += ' ';
            command += argv[i];
        }
        harness::write_reports(harness::measure(args, methods.methods(), command), args.out);
        return 0;
    } catch (const specdec::error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}

}  // namespace specdec::bench
