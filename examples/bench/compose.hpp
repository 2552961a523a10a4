// examples/bench/compose.hpp — a MethodSpec (methods.hpp) as a composition of policies, run once.
// SPDX-License-Identifier: MIT
#pragma once

// The benchmark (specdec_bench) and the specdec command share this: both load a target and drafters
// into Models, then run_method composes the method's proposer, tree builder, verifier and acceptor and
// decodes one prompt. GenerateOptions pass through unchanged (on_step streams a run as it goes).

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../prompt_lookup.hpp"
#include "bench_results.hpp"
#include "methods.hpp"
#include "specdec.hpp"

// run_method composes every method's policies: about 80 s of code generation (GCC 12, -O3) in each
// translation unit that calls it. A program may compile it once, as the library compiles its bodies
// (detail/core/compiled.hpp): one unit defines SPECDEC_BENCH_IMPLEMENTATION before including this
// file, the others SPECDEC_BENCH_COMPILED (CMake's specdec_bench_compose target does both).
#if defined(SPECDEC_BENCH_IMPLEMENTATION)
#define SPECDEC_BENCH_BODIES 1
#define SPECDEC_BENCH_INLINE
#elif defined(SPECDEC_BENCH_COMPILED)
#define SPECDEC_BENCH_BODIES 0
#define SPECDEC_BENCH_INLINE
#else
#define SPECDEC_BENCH_BODIES 1
#define SPECDEC_BENCH_INLINE inline
#endif

namespace specdec::bench {

// ---- models ------------------------------------------------------------------------------------------
/// Parameters read per forward: every layer matrix and the LM head (the embedding is gathered, not read).
inline long matrix_params(const Config& c) {
    const long D = c.hidden_size, F = c.intermediate_size, q = long(c.num_attention_heads) * c.head_dim();
    return c.num_hidden_layers * (q * D + 2L * c.kv_dim() * D + D * q + 3 * F * D) + long(c.vocab_size) * D;
}

struct Models {
    std::unique_ptr<CpuModel> target;
    std::map<std::string, std::unique_ptr<CpuModel>> drafters;               // Llama drafters
    std::map<std::string, std::unique_ptr<GlideModel<CpuModel>>> glides;     // GLIDE drafters (read the target's KV)
    std::map<std::string, std::unique_ptr<CpuModel>> edds;                   // EDD drafters (read the target's states)
    std::map<std::string, int> edd_layers;                                    // the state each EDD drafter reads
    std::map<std::string, std::unique_ptr<FeatureDrafter>> features;         // EAGLE / FSPAD drafters (read the target's features)
    std::map<std::string, double> cost_ratios;                                // s_d/s_t per drafter shape (cost_key), when a PCT needs it
    std::unique_ptr<Bigram> bigram;                                           // Max-Gram's table, when a cascade needs it
    std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;            // "target" and each text drafter's, when a
                                                                              // text method drafts through the text
    std::vector<ModelInfo> info;  // target first

    /// The folder name of a drafter model object (for per-model call counts).
    const ModelInfo& info_of(const void* model) const {
        for (const auto& [name, m] : drafters)
            if (m.get() == model) return find(name);
        for (const auto& [name, m] : glides)
            if (m.get() == model) return find(name);
        for (const auto& [name, m] : edds)
            if (m.get() == model) return find(name);
        for (const auto& [name, m] : features)
            if (&m->model == model) return find(name);
        detail::fail("bench", "a proposer reported calls of a model the harness did not load; hint: a registered method "
                              "names its drafters' folders in MethodOptions::drafters and takes them from Models");
    }
    /// A Llama drafter the harness loaded from the folder `name` under --models (a registered method
    /// names its folders in MethodOptions::drafters).
    CpuModel& drafter(const std::string& name) const {
        auto it = drafters.find(name);
        if (it == drafters.end())
            detail::fail("bench", "no Llama drafter '" + name + "' loaded; hint: name its folder in the method's drafters");
        return *it->second;
    }
    const ModelInfo& find(const std::string& name) const {
        for (const ModelInfo& i : info)
            if (i.name == name) return i;
        detail::fail("bench", "no model named '" + name + "' loaded");
    }
};

// ---- drafters widened with the target (docs/widening.md) ----------------------------------------------
// On a widened target (--target-scale), the drafters that read its internals are widened with it, with
// one seed (the target's is 1): EDD's layer (its state counted from the end), GLIDE's cross-attention,
// EAGLE's / FSPAD's connector and layer. Each then drafts what it drafted against the trained target.
// Drafters that read only tokens (Llama drafters, Max-Gram) run unchanged.
inline constexpr std::uint64_t kTargetWidenSeed = 1, kDrafterWidenSeed = 2;

/// The options of a drafter widened with the target: bf16 weights like the target's, so a drafter that
/// is a layer of the target's width costs what that layer costs in the bigger model (in float32 it would
/// read twice the bytes and tilt the ranking against EDD, EAGLE and FSPAD).
inline ModelOptions widened_drafter_options(ModelOptions opt) {
    opt.weight_format = WeightFormat::kBF16;
    return opt;
}

/// EDD's drafter made to read `widened` (widened_config of `trained`).
inline EddCheckpoint widen_with_target(EddCheckpoint e, const Config& trained, const Config& widened) {
    const WidenShape shape{.hidden_size = widened.hidden_size, .intermediate_size = widened.intermediate_size,
                           .num_hidden_layers = e.config.num_hidden_layers,
                           .num_attention_heads = widened.num_attention_heads,
                           .num_key_value_heads = widened.num_key_value_heads, .head_dim = widened.head_dim()};
    const int added = added_layers(trained, widened);
    e = widen(e, shape, kDrafterWidenSeed);
    e.target_layer += added;
    return e;
}
inline GlideCheckpoint widen_with_target(GlideCheckpoint g, const Config& trained, const Config& widened) {
    return widen_glide(std::move(g), trained, widened, kDrafterWidenSeed);
}
/// A feature drafter trained against the widened target itself (train_demo --target-scale, its target_hash
/// the widened config's) already reads it, and is kept as it is.
inline FeatureCheckpoint widen_with_target(FeatureCheckpoint f, const Config& trained, const Config& widened) {
    if (f.target_hash == target_config_hash(widened)) return f;
    return widen_feature(std::move(f), trained, widened, kDrafterWidenSeed);
}

// ---- the methods: each a composition of policies -------------------------------------------------------

/// One generation and what each drafter model spent on it.
struct Run {
    Generation g;
    std::vector<DrafterUsage> usage;
    const char* acceptor = "";  // the acceptor that ran and its precondition for losslessness, for the reports
};

/// A composition a program registered (harness.hpp's register_method): how to run it on one prompt,
/// the acceptor it uses, and whether it claims to be lossless (its drafter folders: MethodSpec::drafters).
struct RegisteredMethod {
    std::function<Run(Models&, std::span<const int>, const GenerateOptions&)> run;
    std::string acceptor;         // the acceptor and its precondition, as the reports print it
    bool claims_lossless = true;  // false: lossy by design, reported so at T > 0
    /// check::check_lossless on the same factory (the harness's --check-lossless N).
    std::function<check::Report(Models&, std::span<const int>, const Sampling&, int)> check_lossless;
};

/// Names of the model folders a method reads (Max-Gram excluded).
inline std::vector<std::string> drafter_names(const MethodSpec& m) {
    std::vector<std::string> out;
    if (!m.drafter.empty()) out.push_back(m.drafter);
    for (const std::string& d : m.drafters)
        if (d != kMaxGramName) out.push_back(d);
    return out;
}

/// The acceptor for a method's tree: greedy match at T = 0; at T > 0 speculative sampling for a chain
/// of sampled drafts (Leviathan et al. 2023, Alg. 1), multi-draft sampling for sampled siblings
/// (SpecInfer, MCSD), sample-and-match for deterministic siblings (which MultiDraftSampling refuses:
/// q is not their law).
enum class TreeKind { kChain, kSampledTree, kDeterministicTree };

/// The drafter models' calls and time; none for a proposer without a model (prompt lookup). A function
/// template of its own, not a branch in run_with's lambda, where nvcc would compile the discarded call.
template <class P>
std::vector<DrafterUsage> usage_of(P& proposer) {
    if constexpr (requires { proposer.usage(); })
        return proposer.usage();
    else
        return {};
}

template <class P, class B>
Run run_with(CpuModel& target, P& proposer, B builder, TreeKind kind, std::span<const int> prompt, const GenerateOptions& opts) {
    TreeVerifier verifier;
    const auto go = [&](auto acceptor, const char* precondition) {
        Generation g = speculative_generate(target, proposer, builder, verifier, acceptor, prompt, opts);
        return Run{std::move(g), usage_of(proposer), precondition};
    };
    if (opts.sampling.greedy()) return go(GreedyMatch{}, "greedy match: the target's argmax decides, for any tree");
    switch (kind) {
        case TreeKind::kChain:
            return go(SpeculativeSampling{}, "speculative sampling: lossless when each draft is drawn from q");
        case TreeKind::kSampledTree:
            return go(MultiDraftSampling{}, "multi-draft sampling: lossless when siblings are drawn from q");
        case TreeKind::kDeterministicTree: break;
    }
    return go(SampleAndMatch{}, "sample-and-match: lossless for any tree");
}

/// Calls f with a proposer over the named drafter model, whichever kind it is: a model drafting on its
/// own (ModelProposer over a Llama or GLIDE; a Llama of a smaller, prefix vocabulary padded to the
/// target's), EDD's fed the target's states, or EAGLE's / FSPAD's fed its features.
template <class F>
Run with_proposer(Models& models, const std::string& name, F&& f) {
    if (auto it = models.edds.find(name); it != models.edds.end()) {
        EddProposer proposer(*models.target, *it->second, models.edd_layers.at(name));
        return f(proposer);
    }
    if (auto it = models.features.find(name); it != models.features.end()) {
        FeatureProposer proposer(*models.target, *it->second);
        return f(proposer);
    }
    if (auto it = models.glides.find(name); it != models.glides.end()) {
        ModelProposer proposer(*it->second);
        return f(proposer);
    }
    CpuModel& drafter = *models.drafters.at(name);
    ModelProposer proposer(drafter);
    if (drafter.vocab_size() < models.target->vocab_size()) {
        // A drafter whose vocabulary is a prefix of the target's (check_vocab_compatible said so): its
        // rows padded with -inf up to the target's V, lossless (policies/padded_vocab.hpp).
        PaddedVocabProposer padded(proposer, models.target->vocab_size());
        return f(padded);
    }
    return f(proposer);
}

/// The drafter model object behind a name (for timing its forward).
template <class F>
auto with_model(Models& models, const std::string& name, F&& f) {
    if (auto it = models.edds.find(name); it != models.edds.end()) return f(*it->second);
    if (auto it = models.features.find(name); it != models.features.end()) return f(it->second->model);
    if (auto it = models.glides.find(name); it != models.glides.end()) return f(*it->second);
    return f(*models.drafters.at(name));
}

/// What a drafter's forward costs depends on: its kind and shape. Drafters of one key (EDD and its
/// ablations, VDM: one layer of the target's shape) share one measured s_d/s_t in a run, so PCT rows
/// that differ in the drafter's weights alone prune with the same threshold (measured apart, timing
/// noise gave them different ones).
inline std::string cost_key(const Models& models, const std::string& name) {
    const auto shape = [](const Config& c) {
        return std::to_string(c.num_hidden_layers) + "x" + std::to_string(c.hidden_size) + "/" +
               std::to_string(c.intermediate_size) + " h" + std::to_string(c.num_attention_heads) + "/" +
               std::to_string(c.num_key_value_heads) + " V" + std::to_string(c.vocab_size);
    };
    if (auto it = models.edds.find(name); it != models.edds.end()) return "llama " + shape(it->second->config());
    if (auto it = models.drafters.find(name); it != models.drafters.end()) return "llama " + shape(it->second->config());
    if (auto it = models.features.find(name); it != models.features.end())
        return std::string("feature ") + connector_name(it->second->kind) + " " + shape(it->second->model.config());
    return "glide " + name;  // its cross-attention makes each GLIDE drafter its own cost
}

/// s_d/s_t of a drafter beside its target on the backend they run on (CpuModel, CudaModel, a GLIDE
/// drafter...): one-token forwards at a 64-token context, medians of 21, clamped into (0, 1] as PCT takes
/// it (above 1 no draft pays for itself).
template <class Target, class Draft>
double measured_cost_ratio(Target& target, Draft& draft) {
    return std::clamp(static_cast<double>(measure_forward_costs(target, draft).ratio()), 1e-6, 1.0);
}

/// PCT's threshold s_d/s_t (edd-pct.txt Eq. 5): the method's own, or measured once per run for each
/// drafter kind and shape (cost_key) on the machine at hand (measured_cost_ratio). The results record
/// it (MethodResult::pct_threshold).
inline float pct_threshold(const MethodSpec& m, Models& models) {
    if (m.pct.expand_threshold > 0.0f) return m.pct.expand_threshold;
    const std::string key = cost_key(models, m.drafter);
    auto it = models.cost_ratios.find(key);
    if (it == models.cost_ratios.end()) {
        const double r = with_model(models, m.drafter, [&](auto& d) { return measured_cost_ratio(*models.target, d); });
        it = models.cost_ratios.emplace(key, r).first;
        std::fprintf(stderr, "PCT: s_d/s_t = %.4f for drafters of shape %s (first: %s), measured on this machine\n",
                     it->second, key.c_str(), m.drafter.c_str());
    }
    return static_cast<float>(it->second);
}

/// CS Drafting (Chen et al. 2024, Algorithm 1) from the K-matrix: row r holds the budgets of drafters
/// r..n-1 in the call where drafter r-1 reviews (row 0: the target). Max-Gram proposes 10 tokens per
/// call (App. B); lenience applies only where a neural drafter reviews another (App. B). Composes the
/// cascade over drafters d1 (and d2, where the method has two) of any model type and hands its top
/// proposer to `run(top, builder, kind)`: a chain of the first row's budget, or CAPE's expansion.
template <class Model, class RunTop>
auto compose_cascade(const MethodSpec& m, Model& d1, Model* d2, const Bigram& bigram, RunTop&& run) {
    const KMatrix K{m.k_matrix};
    MaxGram mag(bigram);
    const auto top_level = [&](auto& top) {
        if (m.children > 0)
            return run(top, ExpandedChain{.gamma = K.row_sum(0), .sizes = m.sizes, .max_drafts = m.max_drafts},
                       TreeKind::kDeterministicTree);
        return run(top, Chain{.gamma = K.row_sum(0)}, TreeKind::kChain);
    };
    if (d2 == nullptr) {  // target <- d1 <- Max-Gram
        Review l1(d1, mag, {.budget = K.k[1][1]});
        Horizontal top(K.row(0), l1, mag);
        return top_level(top);
    }
    Review l2(*d2, mag, {.budget = K.k[2][2]});  // target <- d1 <- d2 <- Max-Gram
    Horizontal below_d1(K.row(1), l2, mag);
    Review l1(d1, below_d1, {.budget = K.row_sum(1), .lenience = {m.lenience}});
    Horizontal top(K.row(0), l1, l2, mag);
    return top_level(top);
}

/// Composes the method's policies over `models` and decodes `prompt` once.
SPECDEC_BENCH_INLINE Run run_method(const MethodSpec& m, Models& models, std::span<const int> prompt,
                                    const GenerateOptions& opts);

#if SPECDEC_BENCH_BODIES
inline Run run_cascade(const MethodSpec& m, Models& models, std::span<const int> prompt, const GenerateOptions& opts) {
    for (const std::string& name : drafter_names(m))  // Review reads each drafter's rows as they are: no padding
        detail::require(models.drafters.at(name)->vocab_size() == models.target->vocab_size(), "bench", [&] {
            return "method '" + m.name + "': the cascade's drafter '" + name + "' has vocab_size " +
                   std::to_string(models.drafters.at(name)->vocab_size()) + ", the target " +
                   std::to_string(models.target->vocab_size()) + ": a cascade needs the target's whole vocabulary";
        });
    CpuModel* d2 = m.drafters.size() == 2 ? nullptr : models.drafters.at(m.drafters[1]).get();
    return compose_cascade(m, *models.drafters.at(m.drafters[0]), d2, *models.bigram, [&](auto& top, auto builder, TreeKind kind) {
        return run_with(*models.target, top, builder, kind, prompt, opts);
    });
}

SPECDEC_BENCH_INLINE Run run_method(const MethodSpec& m, Models& models, std::span<const int> prompt, const GenerateOptions& opts) {
    switch (m.kind) {
        case MethodKind::kAutoregressive: return {autoregressive_generate(*models.target, prompt, opts), {}};
        case MethodKind::kChain:  // vanilla SD, GLIDE
            return with_proposer(models, m.drafter, [&](auto& proposer) {
                return run_with(*models.target, proposer, Chain{.gamma = m.gamma}, TreeKind::kChain, prompt, opts);
            });
        case MethodKind::kTree:
            return with_proposer(models, m.drafter, [&](auto& proposer) {
                return run_with(*models.target, proposer, KAryTree{.k_config = m.k_config, .draw = m.draw},
                                m.draw == DrawPolicy::kTopK ? TreeKind::kDeterministicTree : TreeKind::kSampledTree, prompt, opts);
            });
        case MethodKind::kExpanded:  // CAPE and its fixed-size ablation
            return with_proposer(models, m.drafter, [&](auto& proposer) {
                return run_with(*models.target, proposer,
                                ExpandedChain{.gamma = m.gamma, .sizes = m.sizes, .max_drafts = m.max_drafts},
                                TreeKind::kDeterministicTree, prompt, opts);
            });
        case MethodKind::kCascade: return run_cascade(m, models, prompt, opts);
        case MethodKind::kPct: {  // EDD's pruned candidate tree
            PrunedCandidateTree pct = m.pct;
            pct.expand_threshold = pct_threshold(m, models);
            return with_proposer(models, m.drafter, [&](auto& proposer) {
                return run_with(*models.target, proposer, pct, TreeKind::kDeterministicTree, prompt, opts);
            });
        }
        case MethodKind::kEagle2:
            return with_proposer(models, m.drafter, [&](auto& proposer) {
                return run_with(*models.target, proposer, m.eagle2, TreeKind::kDeterministicTree, prompt, opts);
            });
        case MethodKind::kTargetInit:  // improved MCSD: lossy at T > 0, opted in by the entry's allow_lossy
            return with_proposer(models, m.drafter, [&](auto& proposer) {
                if constexpr (ScoresNodes<std::remove_reference_t<decltype(proposer)>>) {
                    TreeVerifier verifier;
                    TargetInitialisedTree builder{.n_seeds = m.seeds, .k_config = m.k_config,
                                                  .top_seeds_at_t0 = m.top_seeds_at_t0, .draw_at_t0 = m.draw};
                    LossyTargetInitialisedSampling acceptor{.allow_lossy = true};
                    Generation g = speculative_generate(*models.target, proposer, builder, verifier, acceptor, prompt, opts);
                    return Run{std::move(g), proposer.usage(),
                               m.top_seeds_at_t0 && m.seeds > 1 ? "longest-root: LOSSY by design, at T = 0 too"
                                                                : "longest-root: LOSSY by design at T > 0"};
                } else {
                    detail::fail("bench", "method '" + m.name + "': target_initialised needs a drafter that scores nodes");
                    return Run{};
                }
            });
        case MethodKind::kFork:
            return with_proposer(models, m.drafter, [&](auto& proposer) {
                return run_with(*models.target, proposer, DynamicFork<>{.width = m.width, .max_depth = m.max_depth},
                                TreeKind::kSampledTree, prompt, opts);
            });
        case MethodKind::kText: {  // a drafter of another tokenizer: deterministic drafts through the text
            TextBridgeProposer bridge(*models.drafters.at(m.drafter), text_codec(*models.tokenizers.at("target")),
                                      text_codec(*models.tokenizers.at(m.drafter), true), models.target->vocab_size(), m.gamma);
            return run_with(*models.target, bridge, Chain{.gamma = m.gamma}, TreeKind::kChain, prompt, opts);
        }
        case MethodKind::kLookup: {  // a deterministic chain: q one-hot, so SpeculativeSampling is exact at any T
            example::PromptLookup lookup{.vocab = models.target->vocab_size(), .max_ngram = m.max_ngram, .max_draft = m.gamma};
            return run_with(*models.target, lookup, Chain{.gamma = m.gamma}, TreeKind::kChain, prompt, opts);
        }
        case MethodKind::kRegistered: return m.registered->run(models, prompt, opts);
    }
    detail::fail("bench", "unhandled method kind");
}
#endif  // SPECDEC_BENCH_BODIES

}  // namespace specdec::bench
