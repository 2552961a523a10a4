// Printing shared by the examples (the library itself never prints).
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "machine.hpp"
#include "specdec.hpp"

namespace example {

struct Prompt {
    std::string kind, text;
};

/// A lesson's optional argument argv[index] as a whole number in [lo, hi]; `fallback` when it is absent.
/// (std::atoi would read "abc" and -2 as zero prompts: the lesson would run nothing and print tau = nan.)
inline int int_argument(int argc, char** argv, int index, const char* name, int fallback, int lo, int hi) {
    if (argc <= index) return fallback;
    const std::string_view s = argv[index];
    int v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi)
        specdec::detail::fail("example", "argument " + std::to_string(index) + " (" + name + ") is '" + std::string(s) +
                                             "': expected a whole number in [" + std::to_string(lo) + ", " +
                                             std::to_string(hi) + "]");
    return v;
}

/// A lesson's optional argument argv[index] as one of `choices`; the first when it is absent.
inline std::string choice_argument(int argc, char** argv, int index, const char* name,
                                   std::initializer_list<const char*> choices) {
    if (argc <= index) return *choices.begin();
    const std::string s = argv[index];
    std::string known;
    for (const char* c : choices) {
        if (s == c) return s;
        known += (known.empty() ? "" : " or ") + std::string(c);
    }
    specdec::detail::fail("example", "argument " + std::to_string(index) + " (" + name + ") is '" + s + "': expected " + known);
}

/// `count` prompts spread evenly over data/prompts.jsonl (one JSON object per line, held-out text).
inline std::vector<Prompt> read_prompts(const std::string& path, int count) {
    std::ifstream in(path);
    if (!in) specdec::detail::fail("demo", "cannot open '" + path + "' (run from the repository root)");
    std::vector<Prompt> all;
    int line_no = 0;
    for (std::string line; std::getline(in, line);)
        if (++line_no, !line.empty()) {  // messages name the file's line, as the benchmark's do
            const specdec::json::Value v = specdec::json::parse(line, path + ":" + std::to_string(line_no));
            all.push_back({v.at("kind").as_string(), v.at("text").as_string()});
        }
    std::vector<Prompt> picked;
    const std::size_t stride = std::max<std::size_t>(1, all.size() / std::max(count, 1));
    for (std::size_t i = 0; i < all.size() && static_cast<int>(picked.size()) < count; i += stride) picked.push_back(all[i]);
    return picked;
}

/// The generated text, with runs of accepted draft tokens marked.
inline std::string marked(const specdec::Tokenizer& tok, const specdec::Generation& g, bool color) {
    std::string out;
    bool in_draft = false;
    for (std::size_t i = 0; i < g.tokens.size(); ++i) {
        const bool draft = g.token_depth[i] > 0;
        if (draft != in_draft) out += draft ? (color ? "\033[32m" : "[") : (color ? "\033[0m" : "]");
        in_draft = draft;
        out += tok.decode(std::span<const int>(&g.tokens[i], 1));
    }
    if (in_draft) out += color ? "\033[0m" : "]";
    return out;
}

template <class F>
double seconds(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Runs `generate(prompt, options)` on every prompt beside plain greedy decoding of `target` (64 new
/// tokens each) and prints tau, draft nodes per step, the speedup and on how many prompts the text was
/// identical. Returns whether it was identical on all (a greedy method's precondition).
template <class Generate>
bool compare_with_greedy(const char* name, int name_width, specdec::CpuModel& target, const specdec::Tokenizer& tok,
                         const std::vector<Prompt>& prompts, Generate&& generate) {
    double t_plain = 0, t_spec = 0;
    long tokens = 0, steps = 0, nodes = 0, identical = 0;
    for (const Prompt& p : prompts) {
        const std::vector<int> prompt = tok.encode(p.text);
        const specdec::GenerateOptions o{.max_new_tokens = 64};
        specdec::Generation plain, spec;
        t_plain += seconds([&] { plain = specdec::autoregressive_generate(target, prompt, o); });
        t_spec += seconds([&] { spec = generate(prompt, o); });
        tokens += static_cast<long>(spec.tokens.size());
        steps += spec.n_target_calls();
        for (const specdec::StepRecord& s : spec.steps) nodes += s.n_drafted;
        identical += spec.tokens == plain.tokens;
    }
    std::printf("%-*s tau %.2f, %5.1f draft nodes per step, speedup %.2fx, identical to plain greedy on %ld/%zu prompts\n",
                name_width, name, double(tokens) / steps, double(nodes) / steps, t_plain / t_spec, identical, prompts.size());
    return identical == static_cast<long>(prompts.size());
}

/// A random-weight target and a drafter that is the target plus noise: lessons 01-03 run on it so that
/// they need no files. Acceptance is real and partial, but the drafter is as large as the target, so
/// these lessons show tau and losslessness, not a walltime speedup (05_demo shows that, on the shipped
/// models).
struct RandomPair {
    specdec::Config cfg{.hidden_size = 128, .intermediate_size = 384, .num_hidden_layers = 4,
                        .num_attention_heads = 4, .num_key_value_heads = 2, .vocab_size = 512,
                        .max_position_embeddings = 512};
    specdec::Weights weights = specdec::random_weights(cfg, /*seed=*/1, /*std_dev=*/0.25f);
    specdec::CpuModel target{cfg, weights};
    specdec::CpuModel draft{cfg, specdec::perturbed(cfg, weights, /*rel=*/0.05f, /*seed=*/2)};
};

inline void print_tokens(const char* label, const std::vector<int>& tokens) {
    std::printf("%-14s", label);
    for (int t : tokens) std::printf(" %d", t);
    std::printf("\n");
}

/// tau, target calls, time split and how often each draft position was accepted.
inline void print_stats(const char* label, const specdec::Generation& g) {
    double draft = 0, verify = 0, accept = 0, commit = 0;
    int drafted = 0;
    for (const auto& s : g.steps) {
        draft += s.t_draft, verify += s.t_verify, accept += s.t_accept, commit += s.t_commit;
        drafted += s.n_drafted;
    }
    std::printf("%-14s %3zu tokens, %3d target forwards, tau = %.2f, %d nodes drafted; "
                "time ms: draft %.1f verify %.1f accept %.1f commit %.1f\n",
                label, g.tokens.size(), g.n_target_calls(), g.tau(), drafted, 1e3 * draft, 1e3 * verify, 1e3 * accept,
                1e3 * commit);
    const auto at = g.accepted_at_depth();
    if (at.empty()) return;
    std::printf("%-14s acceptance per draft position:", "");
    for (std::size_t d = 0; d < at.size(); ++d) std::printf("  %zu: %.2f", d + 1, double(at[d]) / g.steps.size());
    std::printf("\n");
}

}  // namespace example
