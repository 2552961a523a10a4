// bench_cuda_spec — speculative generation on the GPU, timed beside autoregressive decoding of the same target.
//
// Teaches: what speculative decoding buys on a GPU, where a decode step is bound by reading the target's
// weights. For each target (the demo target, and the demo target widened to 7B cost: docs/widening.md)
// and each method, greedy generation with speculative_generate, target and drafters on one CudaContext
// (--methods names a subset; the baseline always runs):
//   autoregressive                the baseline: one target forward per token
//   chain        chain 4          the `small` Llama drafter as a CudaModel (ModelProposer, Chain of 4)
//   lookup       prompt lookup 4  no drafter: a chain of 4 copied from what followed the text's last
//                                 n-gram earlier on (examples/prompt_lookup.hpp), drafting for free
//   tree         token trees      with the small drafter, taken by name from --methods-file
//   mcsd                          (methods_scale.json): "tree small top2 2-2-1" (a deterministic top-2
//                                 tree) and "MCSD small 4-2-2-1" (improved MCSD's draft-initialised
//                                 k-config, its siblings drawn without replacement from the drafter's
//                                 softmax as specdec_bench draws them at T = 0; greedy match verifies)
//   cs-drafting  CS(small, MaG)   CS Drafting's vertical cascade: the small drafter reviewing Max-Gram
//                                 (Review + Horizontal over a CudaModel, the entry's K-matrix)
//   glide-cape   GLIDE + CAPE     the `glide` drafter as a CudaGlideModel reading the target's KV cache in
//                                 place (ModelProposer), CAPE's confidence-sized candidates (ExpandedChain)
//   edd-pct      EDD + PCT        the `edd` drafter as a one-layer CudaModel fed the target's states
//                                 (EddProposer), PCT's tree at s_d/s_t measured on the GPU beside that
//                                 target (compose.hpp's measured_cost_ratio); the CPU run takes the same
//   eagle2       EAGLE-2 60/6/10  each feature drafter named by --eagle (CudaFeatureDrafter behind
//                                 FeatureProposer, Eagle2Tree): EAGLE's (FC connector) or FSPAD's
//                                 (Feature Sampler + PAD), by what its folder holds
// On the widened target the drafters that read its internals (GLIDE, EDD, EAGLE, FSPAD) are widened with
// it as specdec_bench widens them (compose.hpp's widen_with_target); token drafters run unchanged.
// Reported per (target, method): τ, ms per token, tokens/s, the speedup over autoregressive decoding of
// the same target in the same run, the loop's time split per step (drafting; the target's verification;
// acceptance and commit), and `same`: how many outputs equal the autoregressive one. Greedy decoding must
// be lossless, but on a GPU a tree of 61 nodes and a single token run different products, whose logits
// differ by rounding: a divergence counts as a near-tie where the autoregressive token's logit exceeds the
// method's by no more than the CUDA suite allows (tests/cuda/cuda_helpers.hpp, check_greedy_equal: 2 x 3e-2 of
// the largest |logit|), and as a FAIL otherwise (printed loudly; the program exits 2).
//
// On the demo target the same compositions also run once on the CPU reference (CpuModel, FeatureDrafter,
// float32): their τ beside the GPU's checks the GPU drafters draft what the CPU ones draft (τ may differ a
// little, by rounding; a gap over 10% is printed as a CHECK line).
//
// A widened target is a SIMULATION: the demo target's outputs at Llama-2-7B's memory traffic and FLOPs,
// so acceptance is the demo target's and the costs are a 7B model's. Every table says so.
//
// How it measures: one untimed pass over every prompt and method first (graph capture per tree size,
// cuBLASLt plans, first touch of every weight); greedy runs are deterministic, so the timed passes see
// the tree sizes the warm-up captured. Then --repeats timed passes, the methods interleaved per prompt,
// each generation between two cudaDeviceSynchronize calls, host wall time.
//
// Run from the repository root:
//   build/bench_cuda_spec [--target-scale demo,7b] [--methods chain,tree,...] [--eagle eagle,fspad]
//                         [--n-prompts 8] [--max-new 64] [--repeats 3] [--graphs on|off] [--max-context N]
//                         [--cpu-tau on|off] [--methods-file FILE] [--out DIR]
// or on a GPU machine: bash scripts/gpu_spec_bench.sh OUT_DIR (builds it there when no binary is carried).
// Prints: the GPU, the CUDA version and one table row per (target, method) on stdout; progress with an
// ETA on stderr; with --out, spec.csv and spec.md (the same table) under DIR. Exits 0; 1 on an error (a
// method that throws is dropped, its message in its row, the rest measured); 2 when a row is not lossless.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "detail/cuda/feature_drafter.cuh"
#include "detail/cuda/glide.cuh"
#include "detail/cuda/model.cuh"
#include "harness.hpp"  // prompts and tokenizer as specdec_bench reads them; drafters widened with the target
#include "methods.hpp"  // the entries of --methods-file, parsed
#include "specdec.hpp"

using namespace specdec;
namespace fs = std::filesystem;

namespace {

// ---- command line ------------------------------------------------------------------------------------

struct Args {
    fs::path models = "models";
    fs::path prompts = "data/prompts.jsonl";
    fs::path out;                                     // empty: no files
    std::vector<std::string> targets{"demo", "7b"};   // demo = the trained target; else a widen_preset name
    std::vector<std::string> eagle{"eagle", "fspad"}; // feature-drafter folders under --models
    std::string small = "small";                      // the chain's Llama drafter folder
    std::vector<std::string> methods;                 // --methods names (kChoices); empty: all
    fs::path methods_file = "examples/bench/methods_scale.json";  // the entries the choices take by name
    int n_prompts = 8;
    int max_new = 64;
    int repeats = 3;                                  // timed passes after the warm-up pass
    int max_context = 0;                              // 0: the longest prompt + max_new + kTreeMargin
    std::string split = "all";                        // as specdec_bench: all | val | test
    bool graphs = true;
    bool cpu_tau = true;                              // the demo target's τ on the CPU reference too
    bool help = false;
};

constexpr const char* kUsage =
    "usage: bench_cuda_spec [--target-scale demo,7b]   (demo: the trained target; 110m, 1b, 7b: widened to that cost,\n"
    "                        a simulation: the demo target's outputs at that model's cost)\n"
    "                       [--methods chain,tree,mcsd,cs-drafting,glide-cape,edd-pct,eagle2,lookup]   (default: all;\n"
    "                        autoregressive, the baseline, always runs)\n"
    "                       [--methods-file examples/bench/methods_scale.json]   (the entries tree, mcsd, cs-drafting,\n"
    "                        glide-cape and edd-pct take by name)\n"
    "                       [--eagle eagle,fspad]   (feature-drafter folders under --models: EAGLE-2 60/6/10 with each)\n"
    "                       [--small small]   (the Llama drafter of chain 4)\n"
    "                       [--models DIR] [--prompts FILE] [--split all|val|test] [--n-prompts 8] [--max-new 64]\n"
    "                       [--repeats 3] [--graphs on|off] [--max-context N] [--out DIR]\n"
    "                       [--cpu-tau on|off]   (on: the demo target's compositions also run on the CPU, for their tau)\n";

constexpr int kGamma = 4;           // chain 4 (vanilla SD)
constexpr int kRowsPerForward = 64;   // rows per forward at least: EAGLE-2 60/6/10 verifies 61 nodes, prefill feeds 32
constexpr int kTreeMargin = 64;     // positions past prompt + max_new in the default --max-context
constexpr float kTieTolerance = 2 * 3e-2f;  // of the largest |logit|: the CUDA suite's check_greedy_equal

/// What --methods may name: the built-in compositions (entry null) and the --methods-file entries the
/// others take by name. The file's names have commas and spaces, so the command line uses these keys.
struct Choice {
    const char* key;
    const char* entry;
};
constexpr Choice kChoices[] = {
    {"chain", nullptr},                        // chain 4 with --small
    {"lookup", nullptr},                       // prompt lookup, a chain of 4, no drafter
    {"tree", "tree small top2 2-2-1"},         // a deterministic top-k tree
    {"mcsd", "MCSD small 4-2-2-1"},            // improved MCSD's draft-initialised k-config
    {"cs-drafting", "CS(small, MaG)"},         // CS Drafting's vertical cascade
    {"glide-cape", "GLIDE + CAPE"},
    {"edd-pct", "EDD + PCT"},
    {"eagle2", nullptr},                       // EAGLE-2 60/6/10 with each --eagle folder
};

std::string choice_keys() {
    std::string s;
    for (const Choice& c : kChoices) s += (s.empty() ? "" : ", ") + std::string(c.key);
    return s;
}

bool chosen(const Args& a, const std::string& key) {
    return a.methods.empty() || std::find(a.methods.begin(), a.methods.end(), key) != a.methods.end();
}

std::vector<std::string> to_list(const std::string& flag, const std::string& v) {
    std::vector<std::string> out;
    std::stringstream ss(v);
    for (std::string item; std::getline(ss, item, ',');) {
        if (item.empty()) detail::fail("bench", "argument " + flag + " = '" + v + "': an empty name in the list");
        out.push_back(item);
    }
    if (out.empty()) detail::fail("bench", "argument " + flag + " is empty");
    return out;
}

Args parse_args(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--help" || flag == "-h") {
            a.help = true;
            return a;
        }
        if (i + 1 >= argc) detail::fail("bench", "argument " + flag + " needs a value\n" + kUsage);
        const std::string v = argv[++i];
        using bench::harness::to_int;
        if (flag == "--models") a.models = v;
        else if (flag == "--prompts") a.prompts = v;
        else if (flag == "--out") a.out = v;
        else if (flag == "--small") a.small = v;
        else if (flag == "--eagle") a.eagle = to_list(flag, v);
        else if (flag == "--methods-file") a.methods_file = v;
        else if (flag == "--methods") {
            a.methods = to_list(flag, v);
            for (const std::string& name : a.methods) {
                const bool known = name == "autoregressive" ||
                                   std::any_of(std::begin(kChoices), std::end(kChoices), [&](const Choice& c) { return name == c.key; });
                if (!known)
                    detail::fail("bench", "argument --methods = '" + v + "': '" + name + "' is not a method of bench_cuda_spec; known: " +
                                              choice_keys() + " (autoregressive, the baseline, always runs)");
            }
        }
        else if (flag == "--n-prompts") a.n_prompts = to_int(flag, v, 1);
        else if (flag == "--max-new") a.max_new = to_int(flag, v, 1);
        else if (flag == "--repeats") a.repeats = to_int(flag, v, 1);
        else if (flag == "--max-context") a.max_context = to_int(flag, v, 1);
        else if (flag == "--target-scale") {
            a.targets = to_list(flag, v);
            for (const std::string& t : a.targets) {
                if (t == "demo") continue;
                try {
                    (void)widen_preset(t);
                } catch (const specdec::error& e) {
                    detail::fail("bench", "argument --target-scale = '" + v + "': '" + t +
                                              "' is neither demo (the trained target) nor a widening preset (" + e.what() + ")");
                }
            }
        } else if (flag == "--graphs" || flag == "--cpu-tau") {
            if (v != "on" && v != "off") detail::fail("bench", "argument " + flag + " = '" + v + "': expected on or off");
            (flag == "--graphs" ? a.graphs : a.cpu_tau) = v == "on";
        } else if (flag == "--split") {
            if (v != "all" && v != "val" && v != "test")
                detail::fail("bench", "argument --split = '" + v + "': expected all, val or test");
            a.split = v;
        } else {
            detail::fail("bench", "unknown argument '" + flag + "'\n" + kUsage);
        }
    }
    return a;
}

// ---- the models of one target, all on the GPU ----------------------------------------------------------

/// One row of the table: a composition and the drafter it reads.
struct Method {
    bench::MethodSpec spec;   // its policies: the kind, the drafter folders, the tree's parameters; the name column
    std::string about;        // the drafter column
    float pct_threshold = 0;  // kPct: s_d/s_t measured on the GPU beside this target; the CPU run takes it too
};

/// The drafter folders a method reads, for messages ("small + maxgram").
std::string drafter_label(const bench::MethodSpec& s) {
    if (s.drafters.empty()) return s.drafter;
    std::string out;
    for (const std::string& d : s.drafters) out += (out.empty() ? "" : " + ") + d;
    return out;
}

/// The models of one target on one backend. Members are destroyed in reverse order: the drafters that
/// read the target (GLIDE keeps a pointer to it) go before it.
template <class Model, class Feature, class Glide>
struct Backend {
    std::unique_ptr<Model> target;
    std::map<std::string, std::unique_ptr<Model>> llamas;    // token drafters: chain 4, the trees, the cascade's
    std::map<std::string, std::unique_ptr<Glide>> glides;    // GLIDE drafters (read the target's KV cache)
    std::map<std::string, std::unique_ptr<Model>> edds;      // EDD drafters (read the target's states)
    std::map<std::string, int> edd_layers;                   // the target layer each EDD drafter reads
    std::map<std::string, std::unique_ptr<Feature>> features;
    std::shared_ptr<const Bigram> bigram;                    // Max-Gram's table, when a cascade runs
};

using GpuBackend = Backend<CudaModel, CudaFeatureDrafter, CudaGlideModel>;
using CpuBackend = Backend<CpuModel, FeatureDrafter, GlideModel<CpuModel>>;

struct Loaded {
    std::string scale;     // "demo" or a widen_preset name
    bool simulated = false;  // a widened target: the demo target's outputs at another model's cost
    std::string cost;      // the cost column
    GpuBackend gpu;        // what is timed
    CpuBackend cpu;        // the demo target with --cpu-tau: the reference's τ
    std::vector<Method> methods;  // autoregressive first
};

/// Rows one forward may hold: a verification holds the root and the drafts; a drafter's forward holds
/// its catch-up chain (the accepted path and the bonus, no longer than the drafts plus one) and the tree.
int rows_per_forward(const std::vector<bench::MethodSpec>& entries) {
    long widest = 0;
    for (const bench::MethodSpec& s : entries) widest = std::max(widest, bench::draft_nodes(s));
    return static_cast<int>(std::max<long>(kRowsPerForward, 2 * widest + 2));
}

std::string shape_of(const Config& c) {
    return std::to_string(c.num_hidden_layers) + " x " + std::to_string(c.hidden_size);
}

/// The target at `scale` and the drafters the chosen methods read, each CUDA model holding `positions`
/// tokens and `rows` rows per forward (EDD's drafter `longest` more: the whole prompt's states arrive in its
/// first forward). Folders that are missing, or that cannot read this target, are skipped with a note on stderr.
Loaded load_models(const Args& args, const std::vector<bench::MethodSpec>& entries, const std::string& scale, int positions,
                   int rows, int longest, CudaContext& ctx, ThreadPool& pool) {
    const CudaGraphs graphs = args.graphs ? CudaGraphs::kOn : CudaGraphs::kOff;
    const CudaModelOptions opt{.max_tree_nodes = rows, .max_context = positions, .graphs = graphs};
    const CudaModelOptions edd_opt{.max_tree_nodes = rows + longest, .max_context = positions, .graphs = graphs};
    const fs::path& dir = args.models;
    Loaded m;
    m.scale = scale;
    m.simulated = scale != "demo";
    // Widened as specdec_bench's load_models widens it: matrices generated straight into bf16, one layer at
    // a time on the way to the GPU (no float32 copy of a 7B-cost model on the host).
    Checkpoint t = load_checkpoint(dir / "target", LoadOptions{.defer_matrices = m.simulated});
    const Config trained = t.config;
    if (m.simulated) t = widen(t, widen_preset(scale), bench::kTargetWidenSeed);
    const double params = static_cast<double>(bench::matrix_params(t.config));
    char cost[160];
    if (m.simulated)
        std::snprintf(cost, sizeof cost, "SIMULATION, %s: %.2fB matrix params read per forward",
                      bench::cost_scaled_label(scale).c_str(), params / 1e9);
    else
        std::snprintf(cost, sizeof cost, "trained: %.1fM matrix params read per forward", params / 1e6);
    m.cost = cost;
    std::fprintf(stderr, "[bench] %s: uploading the target (%d layers, D %d, bf16)\n", scale.c_str(),
                 t.config.num_hidden_layers, t.config.hidden_size);
    m.gpu.target = std::make_unique<CudaModel>(t.config, t.weights, ctx, opt);
    const bool cpu = args.cpu_tau && !m.simulated;
    // At least 256 rows: the CPU feature drafter appends a whole prompt at once.
    const ModelOptions cpu_opt{.max_tree_nodes = std::max(256, rows), .pool = &pool};
    const ModelOptions cpu_edd_opt{.max_tree_nodes = std::max(256, rows + longest), .pool = &pool};
    if (cpu) m.cpu.target = std::make_unique<CpuModel>(t.config, t.weights, cpu_opt);
    bench::MethodSpec baseline;
    baseline.name = "autoregressive";
    m.methods.push_back({baseline, "- (the baseline)"});
    std::map<std::string, std::string> about;  // folder -> what it holds, for the drafter column

    // A Llama drafter reads tokens only: never widened.
    const auto load_llama = [&](const std::string& name, const std::string& method) {
        if (m.gpu.llamas.count(name)) return true;
        Checkpoint s = load_checkpoint(dir / name);
        detail::require(s.config.vocab_size == t.config.vocab_size, "bench", [&] {
            return (dir / name).string() + ": vocab_size " + std::to_string(s.config.vocab_size) + " differs from the target's " +
                   std::to_string(t.config.vocab_size) + " (" + method + " needs the target's vocabulary)";
        });
        m.gpu.llamas[name] = std::make_unique<CudaModel>(s.config, s.weights, ctx, opt);
        if (cpu) m.cpu.llamas[name] = std::make_unique<CpuModel>(s.config, s.weights, cpu_opt);
        about[name] = name + " (Llama, " + shape_of(s.config) + ")";
        return true;
    };
    // GLIDE's drafter reads the target's KV cache: widened with it (harness.hpp's load_models).
    const auto load_glide = [&](const std::string& name) {
        if (m.gpu.glides.count(name)) return true;
        GlideCheckpoint g = load_glide_checkpoint(dir / name);
        if (m.simulated) g = bench::widen_with_target(std::move(g), trained, t.config);
        const Config shape = g.config.draft;
        const bool cross = g.config.glide_cross_attention;
        try {
            m.gpu.glides[name] = std::make_unique<CudaGlideModel>(g.config, g.weights, *m.gpu.target, ctx,
                                                                  CudaGlideOptions{.max_tree_nodes = rows, .max_context = positions});
        } catch (const error& e) {  // trained for another target
            std::fprintf(stderr, "[bench] note: %s cannot read the %s target, skipped there: %s\n", (dir / name).c_str(),
                         scale.c_str(), e.what());
            return false;
        }
        if (cpu) m.cpu.glides[name] = std::make_unique<GlideModel<CpuModel>>(std::move(g.config), std::move(g.weights), *m.cpu.target, cpu_opt);
        about[name] = name + " (GLIDE, " + shape_of(shape) + (cross ? ", target's KV)" : ", no cross-attention)");
        return true;
    };
    // EDD's drafter reads the target's states (its layer counted from the end): widened with it.
    const auto load_edd = [&](const std::string& name) {
        if (m.gpu.edds.count(name)) return true;
        EddCheckpoint e = load_edd_checkpoint(dir / name);
        if (m.simulated) e = bench::widen_with_target(std::move(e), trained, t.config);
        try {
            check_edd_pair(e.config, e.target_layer, t.config);
        } catch (const error& err) {
            std::fprintf(stderr, "[bench] note: %s cannot read the %s target, skipped there: %s\n", (dir / name).c_str(),
                         scale.c_str(), err.what());
            return false;
        }
        m.gpu.edds[name] = std::make_unique<CudaModel>(e.config, e.weights, ctx, edd_opt);
        m.gpu.edd_layers[name] = e.target_layer;
        if (cpu) {
            m.cpu.edds[name] = std::make_unique<CpuModel>(e.config, std::move(e.weights), cpu_edd_opt);
            m.cpu.edd_layers[name] = e.target_layer;
        }
        about[name] = name + " (EDD, " + shape_of(e.config) + ", target layer " + std::to_string(e.target_layer) + ")";
        return true;
    };
    const auto load_feature = [&](const std::string& name) {
        if (m.gpu.features.count(name)) return true;
        const fs::path f_dir = dir / name;
        FeatureCheckpoint f;
        if (is_eagle_layout(f_dir)) {
            // EAGLE-1/2's folder reads the target's embedding and head as trained; specdec_bench widens only
            // this library's feature drafter folders.
            if (m.simulated) {
                std::fprintf(stderr, "[bench] note: %s is in EAGLE's layout, which is not widened with the target: skipped at %s\n",
                             f_dir.c_str(), scale.c_str());
                return false;
            }
            f = load_eagle_layout(f_dir, t.config, t.weights);
        } else {
            f = load_feature_checkpoint(f_dir);
            if (m.simulated) f = bench::widen_with_target(std::move(f), trained, t.config);
            try {
                check_feature_pair(f, t.config);
            } catch (const error& e) {  // trained for another target (a drafter trained at 7B cost, at the demo's)
                std::fprintf(stderr, "[bench] note: %s cannot read the %s target, skipped there: %s\n", f_dir.c_str(),
                             scale.c_str(), e.what());
                return false;
            }
        }
        const bool eagle = f.connector == Connector::kFc && !f.config.partial_alignment;
        m.gpu.features[name] = std::make_unique<CudaFeatureDrafter>(f, ctx, opt);
        if (cpu) m.cpu.features[name] = std::make_unique<FeatureDrafter>(std::move(f), cpu_opt);
        about[name] = name + (eagle ? " (EAGLE: FC connector)" : " (FSPAD: Feature Sampler + PAD)");
        return true;
    };
    // A folder's kind from its config.json, as harness.hpp's load_models tells them apart.
    const auto load_drafter = [&](const std::string& name, const std::string& method) {
        const fs::path config = dir / name / "config.json";
        if (!fs::exists(config)) {
            std::fprintf(stderr, "[bench] note: %s has no model, %s skipped\n", (dir / name).c_str(), method.c_str());
            return false;
        }
        const json::Value cfg = json::parse(detail::read_text_file(config, "bench"), config.string());
        const json::Value* type = cfg.find("model_type");
        const std::string kind = type != nullptr && type->is_string() ? type->as_string() : "";
        if (kind == "edd") return load_edd(name);
        if (kind == "eagle" || kind == "fspad" || is_eagle_layout(dir / name)) return load_feature(name);
        if (cfg.find("glide_cross_attention") != nullptr) return load_glide(name);
        return load_llama(name, method);
    };

    if (chosen(args, "chain") && load_drafter(args.small, "chain " + std::to_string(kGamma))) {
        bench::MethodSpec chain;
        chain.name = "chain " + std::to_string(kGamma);
        chain.kind = bench::MethodKind::kChain;
        chain.drafter = args.small;
        chain.gamma = kGamma;
        m.methods.push_back({chain, about.at(args.small)});
    }
    if (chosen(args, "lookup")) {
        bench::MethodSpec lookup;
        lookup.name = "prompt lookup " + std::to_string(kGamma);
        lookup.kind = bench::MethodKind::kLookup;
        lookup.gamma = kGamma;
        m.methods.push_back({lookup, "no drafter: the text's n-grams"});
    }
    for (const bench::MethodSpec& s : entries) {
        bool ready = true;
        for (const std::string& name : bench::drafter_names(s)) ready = ready && load_drafter(name, "'" + s.name + "'");
        if (ready && s.kind == bench::MethodKind::kCascade) {
            for (const std::string& name : bench::drafter_names(s))
                detail::require(m.gpu.llamas.count(name) > 0, "bench", [&] {
                    return args.methods_file.string() + ": '" + s.name + "' reviews with '" + name +
                           "', which is not a Llama drafter (a cascade's drafters draft from tokens)";
                });
            if (!fs::exists(dir / "bigram.json")) {
                std::fprintf(stderr, "[bench] note: %s is missing (Max-Gram's table), '%s' skipped\n",
                             (dir / "bigram.json").c_str(), s.name.c_str());
                ready = false;
            } else if (!m.gpu.bigram) {
                m.gpu.bigram = std::make_shared<const Bigram>(Bigram::load(dir / "bigram.json", t.config.vocab_size));
                m.cpu.bigram = m.gpu.bigram;
            }
        }
        if (!ready) continue;
        std::string text;
        for (const std::string& name : bench::drafter_names(s)) text += (text.empty() ? "" : " + ") + about.at(name);
        if (s.kind == bench::MethodKind::kCascade) text += " + Max-Gram";
        m.methods.push_back({s, text});
    }
    if (chosen(args, "eagle2"))
        for (const std::string& name : args.eagle) {
            if (!fs::exists(dir / name / "config.json")) {
                std::fprintf(stderr, "[bench] note: %s has no model, EAGLE-2 with '%s' skipped\n", (dir / name).c_str(), name.c_str());
                continue;
            }
            if (!load_feature(name)) continue;
            bench::MethodSpec e;
            e.name = "EAGLE-2 60/6/10";
            e.kind = bench::MethodKind::kEagle2;
            e.drafter = name;
            e.eagle2 = Eagle2Tree{};
            m.methods.push_back({e, about.at(name)});
        }
    // The drafters that read the target's states (features: its final layer; EDD: its own) make it copy them
    // out of every forward. It keeps them for every method, so all run the same target (and no graph is
    // recaptured mid-run).
    if (!m.gpu.features.empty()) m.gpu.target->add_hidden_layer(t.config.num_hidden_layers);
    for (const auto& [name, layer] : m.gpu.edd_layers) m.gpu.target->add_hidden_layer(layer);
    SPECDEC_CUDA_CHECK(cudaDeviceSynchronize());

    // PCT's threshold s_d/s_t (edd-pct.txt Eq. 5) measured here, on this GPU beside this target: at a widened
    // target the widened models' ratio. The CPU's τ run takes the same threshold, so both prune alike.
    for (Method& method : m.methods) {
        if (method.spec.kind != bench::MethodKind::kPct) continue;
        method.pct_threshold = method.spec.pct.expand_threshold;
        if (method.pct_threshold <= 0.0f) {
            const std::string& name = method.spec.drafter;
            const auto ratio = [&](auto& drafter) { return static_cast<float>(bench::measured_cost_ratio(*m.gpu.target, drafter)); };
            if (auto e = m.gpu.edds.find(name); e != m.gpu.edds.end()) method.pct_threshold = ratio(*e->second);
            else if (auto g = m.gpu.glides.find(name); g != m.gpu.glides.end()) method.pct_threshold = ratio(*g->second);
            else if (auto l = m.gpu.llamas.find(name); l != m.gpu.llamas.end()) method.pct_threshold = ratio(*l->second);
            else detail::fail("bench", "'" + method.spec.name + "': PCT's s_d/s_t is measured for EDD, GLIDE and Llama drafters; '" +
                                           name + "' is a feature drafter (hint: give the entry an expand_threshold)");
            std::fprintf(stderr, "[bench] %s: PCT s_d/s_t = %.4f for %s beside the target, measured on this GPU\n",
                         scale.c_str(), method.pct_threshold, name.c_str());
        }
        char t_text[96];
        std::snprintf(t_text, sizeof t_text, ", s_d/s_t %.3g %s", method.pct_threshold,
                      method.spec.pct.expand_threshold > 0.0f ? "given" : "measured");
        method.about += t_text;
    }
    return m;
}

/// --methods-file's entries that the chosen --methods name, in kChoices' order; checked before the GPU is touched.
std::vector<bench::MethodSpec> chosen_entries(const Args& args) {
    std::vector<bench::MethodSpec> out;
    std::vector<bench::MethodSpec> file;
    for (const Choice& c : kChoices) {
        if (c.entry == nullptr || !chosen(args, c.key)) continue;
        if (file.empty()) file = bench::load_methods(args.methods_file);
        const auto it = std::find_if(file.begin(), file.end(), [&](const bench::MethodSpec& s) { return s.name == c.entry; });
        if (it == file.end())
            detail::fail("bench", args.methods_file.string() + ": no entry named \"" + c.entry + "\" (--methods " + c.key +
                                      " runs it); hint: --methods-file names a file that has it, or --methods leaves it out");
        using bench::MethodKind;
        const MethodKind k = it->kind;
        if (k != MethodKind::kChain && k != MethodKind::kTree && k != MethodKind::kExpanded && k != MethodKind::kPct &&
            k != MethodKind::kEagle2 && k != MethodKind::kCascade)
            detail::fail("bench", args.methods_file.string() + ": entry \"" + it->name + "\" is a " + bench::method_name(k) +
                                      " method; bench_cuda_spec runs chain, tree, expanded, pct, eagle2 and cascade entries "
                                      "(greedy, lossless)");
        out.push_back(*it);
    }
    return out;
}

// ---- one generation ----------------------------------------------------------------------------------

template <class Model, class P, class B>
Generation greedy(Model& target, P& proposer, B builder, std::span<const int> prompt, const GenerateOptions& opts) {
    TreeVerifier verifier;
    GreedyMatch acceptor;  // the target's argmax decides: lossless for any tree
    return speculative_generate(target, proposer, builder, verifier, acceptor, prompt, opts);
}

/// Calls f with a proposer over the named drafter, whichever kind it is (compose.hpp's with_proposer on
/// either backend): EDD's fed the target's states, EAGLE's / FSPAD's fed its features, a GLIDE or Llama
/// drafter drafting on its own.
template <class Model, class Feature, class Glide, class F>
Generation with_proposer(Backend<Model, Feature, Glide>& b, const std::string& name, F&& f) {
    if (auto it = b.edds.find(name); it != b.edds.end()) {
        EddProposer<Model, Model> proposer(*b.target, *it->second, b.edd_layers.at(name));
        return f(proposer);
    }
    if (auto it = b.features.find(name); it != b.features.end()) {
        FeatureProposer<Model, Feature> proposer(*b.target, *it->second);
        return f(proposer);
    }
    if (auto it = b.glides.find(name); it != b.glides.end()) {
        ModelProposer proposer(*it->second);
        return f(proposer);
    }
    ModelProposer proposer(*b.llamas.at(name));
    return f(proposer);
}

/// CS Drafting's vertical cascade (Chen et al. 2024, Algorithm 1), composed as specdec_bench composes it.
template <class Model, class Feature, class Glide>
Generation cascade(const bench::MethodSpec& s, Backend<Model, Feature, Glide>& b, std::span<const int> prompt,
                   const GenerateOptions& opts) {
    Model* d2 = s.drafters.size() == 2 ? nullptr : b.llamas.at(s.drafters[1]).get();
    return bench::compose_cascade(s, *b.llamas.at(s.drafters[0]), d2, *b.bigram,
                                  [&](auto& top, auto builder, bench::TreeKind) { return greedy(*b.target, top, builder, prompt, opts); });
}

template <class Model, class Feature, class Glide>
Generation generate(const Method& method, Backend<Model, Feature, Glide>& b, std::span<const int> prompt,
                    const GenerateOptions& opts) {
    const bench::MethodSpec& s = method.spec;
    using bench::MethodKind;
    switch (s.kind) {
        case MethodKind::kAutoregressive: return autoregressive_generate(*b.target, prompt, opts);
        case MethodKind::kChain:
            return with_proposer(b, s.drafter, [&](auto& p) { return greedy(*b.target, p, Chain{.gamma = s.gamma}, prompt, opts); });
        case MethodKind::kTree:  // a sampled draw stays sampled at T = 0 (from the drafter's softmax), as in compose.hpp
            return with_proposer(b, s.drafter, [&](auto& p) {
                return greedy(*b.target, p, KAryTree{.k_config = s.k_config, .draw = s.draw}, prompt, opts);
            });
        case MethodKind::kExpanded:  // CAPE (GLIDE §4.2) or a fixed number of extra candidates
            return with_proposer(b, s.drafter, [&](auto& p) {
                return greedy(*b.target, p, ExpandedChain{.gamma = s.gamma, .sizes = s.sizes, .max_drafts = s.max_drafts}, prompt, opts);
            });
        case MethodKind::kPct: {  // EDD's pruned candidate tree (edd-pct.txt §3.2)
            PrunedCandidateTree pct = s.pct;
            pct.expand_threshold = method.pct_threshold;
            return with_proposer(b, s.drafter, [&](auto& p) { return greedy(*b.target, p, pct, prompt, opts); });
        }
        case MethodKind::kEagle2:
            return with_proposer(b, s.drafter, [&](auto& p) { return greedy(*b.target, p, s.eagle2, prompt, opts); });
        case MethodKind::kCascade: return cascade(s, b, prompt, opts);
        case MethodKind::kLookup: {  // the text drafts: nothing runs but the target
            example::PromptLookup p{.vocab = b.target->vocab_size(), .max_ngram = s.max_ngram, .max_draft = s.gamma};
            return greedy(*b.target, p, Chain{.gamma = s.gamma}, prompt, opts);
        }
        default: break;  // chosen_entries refuses the other kinds
    }
    detail::fail("bench", "method '" + s.name + "': its kind (" + bench::method_name(s.kind) + ") does not run here");
}

// ---- measuring ---------------------------------------------------------------------------------------

/// How one method's output compares with autoregressive decoding's: every generation (warm-up included).
struct Verdict {
    int n_runs = 0, n_same = 0;
    int n_ties = 0;           // prompts whose output diverges at a near-tie of the target's logits
    int n_fail = 0;           // prompts whose output diverges where the target's argmax is clear
    float worst_margin = 0;   // the largest logit gap at a divergence, over the largest |logit| there
    bool lossless() const { return n_fail == 0; }
};

struct Row {
    std::string target, cost, method, drafter;
    bool simulated = false;  // a widened target (Loaded::simulated)
    double tau = 0, ms_per_token = 0, tokens_per_s = 0, speedup = 0;
    double tau_cpu = NAN;  // the same composition on the CPU reference (demo target, --cpu-tau), else NaN
    double draft_ms = 0, verify_ms = 0, other_ms = 0;  // per step (target forward)
    long tokens = 0;
    int steps = 0;
    Verdict verdict{};
    std::string error{};  // the method failed with this message: no figures
};

struct Cell {
    Generation pooled;  // timed generations: tokens and steps concatenated
    double seconds = 0;
    int n_same = 0, n_runs = 0;
    std::map<std::size_t, std::vector<int>> diverged;  // prompt -> the first output that differs from the reference
    std::string error;  // the specdec::error that stopped the method, if one did
};

/// The target's logit gap at the first token where `other` leaves `reference` (both continuations of
/// `prompt`), over the largest |logit| there, from a one-token forward as autoregressive decoding runs it.
float divergence_margin(CudaModel& target, std::span<const int> prompt, const std::vector<int>& reference,
                        const std::vector<int>& other) {
    const std::size_t at = static_cast<std::size_t>(
        std::mismatch(reference.begin(), reference.end(), other.begin(), other.end()).first - reference.begin());
    if (at >= reference.size() || at >= other.size()) return INFINITY;  // one output stops early: not a tie
    std::vector<int> text(prompt.begin(), prompt.end());
    text.insert(text.end(), reference.begin(), reference.begin() + static_cast<std::ptrdiff_t>(at));
    target.reset();
    detail::prefill(target, std::span<const int>(text).first(text.size() - 1));
    const Rows logits = target.forward(Tree::chain(std::vector<int>{text.back()}), 0);
    const std::span<const float> row = logits.row(0);
    float scale = 0;
    for (float x : row) scale = std::max(scale, std::abs(x));
    const float gap = row[static_cast<std::size_t>(reference[at])] - row[static_cast<std::size_t>(other[at])];
    target.reset();
    return scale > 0 ? std::abs(gap) / scale : INFINITY;
}

/// τ of one method on the CPU reference, each prompt once, as the GPU runs them.
double cpu_tau(const Method& method, CpuBackend& cpu, const std::vector<bench::harness::Prompt>& prompts,
               int max_new) {
    std::fprintf(stderr, "[bench] %s on the CPU reference, for its tau\n", method.spec.name.c_str());
    long tokens = 0, steps = 0;
    for (std::size_t p = 0; p < prompts.size(); ++p) {
        const Generation g = generate(method, cpu, prompts[p].tokens, {.max_new_tokens = max_new, .seed = 1'000'003ULL + p});
        tokens += static_cast<long>(g.tokens.size());
        steps += g.n_target_calls();
    }
    return steps > 0 ? static_cast<double>(tokens) / static_cast<double>(steps) : 0.0;
}

std::vector<Row> measure(const Args& args, Loaded& m, const std::vector<bench::harness::Prompt>& prompts) {
    using clock = std::chrono::steady_clock;
    const std::size_t M = m.methods.size(), P = prompts.size();
    std::vector<Cell> cells(M);
    std::vector<std::vector<int>> reference(P);  // autoregressive output per prompt (the warm-up's)
    ProgressLine progress(std::cerr, static_cast<int>((1 + args.repeats) * P * M),
                          {.terminal = stderr_is_terminal(), .plain_every_s = 10, .unit = "tok"});
    int done = 0;
    double tokens_done = 0;
    for (int pass = 0; pass <= args.repeats; ++pass) {  // pass 0: the warm-up, untimed
        for (std::size_t p = 0; p < P; ++p) {
            const GenerateOptions opts{.max_new_tokens = args.max_new, .seed = 1'000'003ULL + p};
            for (std::size_t mi = 0; mi < M; ++mi) {
                Cell& c = cells[mi];
                if (!c.error.empty()) continue;
                SPECDEC_CUDA_CHECK(cudaDeviceSynchronize());
                const auto t0 = clock::now();
                Generation g;
                try {
                    g = generate(m.methods[mi], m.gpu, prompts[p].tokens, opts);
                } catch (const specdec::error& e) {
                    // A method that fails is dropped, and the others still measured; not the baseline, which
                    // every row is compared with. A CUDA error that poisons the context fails the next check.
                    if (mi == 0) throw;
                    c.error = e.what();
                    std::fprintf(stderr, "\n[bench] ERROR: %s, %s, %s: %s; the method is dropped\n", m.scale.c_str(),
                                 m.methods[mi].spec.name.c_str(), drafter_label(m.methods[mi].spec).c_str(), e.what());
                    continue;
                }
                SPECDEC_CUDA_CHECK(cudaDeviceSynchronize());
                const double s = std::chrono::duration<double>(clock::now() - t0).count();
                if (pass == 0 && mi == 0) reference[p] = g.tokens;
                const bool same = g.tokens == reference[p];
                c.n_same += same;
                ++c.n_runs;
                if (!same && !c.diverged.count(p)) c.diverged[p] = g.tokens;  // greedy: each pass repeats it
                if (pass > 0) {
                    c.seconds += s;
                    c.pooled.tokens.insert(c.pooled.tokens.end(), g.tokens.begin(), g.tokens.end());
                    c.pooled.steps.insert(c.pooled.steps.end(), g.steps.begin(), g.steps.end());
                }
                tokens_done += static_cast<double>(g.tokens.size());
                progress.update(++done, NAN, tokens_done);
            }
        }
    }
    progress.finish();

    std::vector<Row> rows;
    for (std::size_t mi = 0; mi < M; ++mi) {
        const Cell& c = cells[mi];
        if (!c.error.empty()) {
            rows.push_back({.target = m.scale, .cost = m.cost, .method = m.methods[mi].spec.name, .drafter = m.methods[mi].about,
                            .simulated = m.simulated, .error = c.error});
            continue;
        }
        const Summary s = summarize(c.pooled);
        const double steps = std::max(1, s.n_target_calls);
        Row r{.target = m.scale, .cost = m.cost, .method = m.methods[mi].spec.name, .drafter = m.methods[mi].about,
              .simulated = m.simulated};
        r.tau = s.tau;
        r.tokens = s.n_tokens;
        r.steps = s.n_target_calls;
        r.ms_per_token = 1e3 * c.seconds / std::max(1, s.n_tokens);
        r.tokens_per_s = s.n_tokens / c.seconds;
        r.speedup = cells[0].seconds / c.seconds;
        r.draft_ms = 1e3 * s.t_draft / steps;
        r.verify_ms = 1e3 * s.t_verify / steps;
        r.other_ms = 1e3 * (s.t_accept + s.t_commit) / steps;
        r.verdict.n_runs = c.n_runs;
        r.verdict.n_same = c.n_same;
        for (const auto& [p, tokens] : c.diverged) {  // after the timed runs: these forwards are not timed
            const float margin = divergence_margin(*m.gpu.target, prompts[p].tokens, reference[p], tokens);
            r.verdict.worst_margin = std::max(r.verdict.worst_margin, margin);
            ++(margin <= kTieTolerance ? r.verdict.n_ties : r.verdict.n_fail);
        }
        if (m.cpu.target) r.tau_cpu = cpu_tau(m.methods[mi], m.cpu, prompts, args.max_new);
        rows.push_back(std::move(r));
    }
    return rows;
}

// ---- reports -----------------------------------------------------------------------------------------

struct Header {
    std::string gpu, cuda, setup;
};

std::string same_text(const Verdict& v) {
    std::string s = (v.lossless() ? "" : "FAIL ") + std::to_string(v.n_same) + "/" + std::to_string(v.n_runs);
    if (v.n_ties + v.n_fail == 0) return s;
    char more[160];
    std::snprintf(more, sizeof more, "; diverging prompts: %d at near-ties, %d beyond rounding (worst gap %.3g of max|logit|, %.3g allowed)",
                  v.n_ties, v.n_fail, v.worst_margin, kTieTolerance);
    return s + more;
}

std::string tau_cpu_text(const Row& r) {
    if (std::isnan(r.tau_cpu)) return "-";
    char t[32];
    std::snprintf(t, sizeof t, "%.2f", r.tau_cpu);
    return t;
}

/// τ on the GPU more than 10% away from the CPU reference's: a drafter that drafts differently.
bool tau_disagrees(const Row& r) { return !std::isnan(r.tau_cpu) && std::abs(r.tau - r.tau_cpu) > 0.1 * r.tau_cpu; }

std::string title(const Header& h) {
    return "Greedy speculative generation on the GPU: " + h.gpu + ", " + h.cuda + "\n" + h.setup +
           "\nA widened target (SIMULATED / SIMULATION in the target and cost columns) is the demo target widened to a larger model's cost "
           "(docs/widening.md): the demo target's outputs, so the same acceptance, at that model's memory traffic and FLOPs.";
}

void print_rows(const std::vector<Row>& rows) {
    for (const Row& r : rows)
        if (!r.error.empty())
            std::printf("%-15s %-21s %-52s ERROR: %s\n", (r.target + (r.simulated ? " SIMULATED" : "")).c_str(),
                        r.method.c_str(), r.drafter.c_str(), r.error.c_str());
        else
            std::printf("%-15s %-21s %-52s %6.2f %7s %8.3f %9.0f %7.2fx %8.3f %9.3f %8.3f  %s\n",
                    (r.target + (r.simulated ? " SIMULATED" : "")).c_str(), r.method.c_str(),
                    r.drafter.c_str(), r.tau, tau_cpu_text(r).c_str(), r.ms_per_token, r.tokens_per_s, r.speedup, r.draft_ms, r.verify_ms,
                    r.other_ms, same_text(r.verdict).c_str());
    std::fflush(stdout);
}

void print_header(const Header& h) {
    std::printf("%s\n\n", title(h).c_str());
    std::printf("%-15s %-21s %-52s %6s %7s %8s %9s %8s %8s %9s %8s  %s\n", "target", "method", "drafter", "tau", "tau CPU", "ms/tok",
                "tok/s", "speedup", "draft ms", "verify ms", "other ms", "same");
    std::fflush(stdout);
}

std::string csv_of(const std::vector<Row>& rows, const Header& h) {
    std::string s = "gpu,cuda,target,simulated,cost,method,drafter,tau,tau_cpu,ms_per_token,tokens_per_s,speedup,draft_ms_per_step,"
                    "verify_ms_per_step,accept_commit_ms_per_step,tokens,target_calls,lossless,same_runs,runs,"
                    "prompts_diverging_at_ties,prompts_diverging_beyond_rounding,worst_gap\n";
    const auto quoted = [](const std::string& x) { return "\"" + x + "\""; };
    char num[256];
    for (const Row& r : rows) {
        if (!r.error.empty()) {
            s += quoted(h.gpu) + "," + quoted(h.cuda) + "," + r.target + "," + (r.simulated ? "yes" : "no") + "," +
                 quoted(r.cost) + "," + quoted(r.method) + "," + quoted(r.drafter) + ",,,,,,,,,,,ERROR,,,,,\n";
            continue;
        }
        const Verdict& v = r.verdict;
        std::snprintf(num, sizeof num, "%.4f,%s,%.4f,%.2f,%.4f,%.4f,%.4f,%.4f,%ld,%d,%s,%d,%d,%d,%d,%.4g", r.tau,
                      std::isnan(r.tau_cpu) ? "" : tau_cpu_text(r).c_str(), r.ms_per_token, r.tokens_per_s, r.speedup, r.draft_ms, r.verify_ms, r.other_ms, r.tokens, r.steps,
                      v.lossless() ? "yes" : "FAIL", v.n_same, v.n_runs, v.n_ties, v.n_fail, v.worst_margin);
        s += quoted(h.gpu) + "," + quoted(h.cuda) + "," + r.target + "," + (r.simulated ? "yes" : "no") + "," +
             quoted(r.cost) + "," + quoted(r.method) + "," +
             quoted(r.drafter) + "," + num + "\n";
    }
    return s;
}

std::string markdown_of(const std::vector<Row>& rows, const Header& h, const std::string& command) {
    std::string t = title(h);
    t.replace(t.find('\n'), 1, "\n\n");  // the first line is the heading
    std::string s = "# " + t + "\n\nCommand: `" + command + "`\n\n"
                    "| target | cost | method | drafter | τ | τ on the CPU | ms/token | tokens/s | speedup | draft ms/step | verify ms/step "
                    "| accept+commit ms/step | same as autoregressive |\n"
                    "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
    char line[1024];
    for (const Row& r : rows) {
        if (!r.error.empty()) {
            s += "| " + r.target + " | " + r.cost + " | " + r.method + " | " + r.drafter + " | | | | | | | | | **ERROR: " +
                 r.error + "** |\n";
            continue;
        }
        std::snprintf(line, sizeof line, "| %s | %s | %s | %s | %.2f | %s | %.3f | %.0f | %.2f× | %.3f | %.3f | %.3f | %s |\n",
                      r.target.c_str(), r.cost.c_str(), r.method.c_str(), r.drafter.c_str(), r.tau,
                      tau_cpu_text(r).c_str(), r.ms_per_token,
                      r.tokens_per_s, r.speedup, r.draft_ms, r.verify_ms, r.other_ms,
                      (r.verdict.lossless() ? same_text(r.verdict) : "**" + same_text(r.verdict) + "**").c_str());
        s += line;
    }
    return s;
}

void write_reports(const Args& args, const std::vector<Row>& rows, const Header& h, const std::string& command) {
    if (args.out.empty()) return;
    bench::harness::write_file(args.out / "spec.csv", csv_of(rows, h));
    bench::harness::write_file(args.out / "spec.md", markdown_of(rows, h, command));
}

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

int run(int argc, char** argv) {
    const Args args = parse_args(argc, argv);
    if (args.help) {
        std::printf("%s", kUsage);
        return 0;
    }
    std::string command;
    for (int i = 0; i < argc; ++i) command += (i > 0 ? " " : "") + std::string(argv[i]);

    // Files first, so that a wrong path fails before the GPU is touched.
    if (!fs::exists(args.models / "target" / "config.json"))
        detail::fail("bench", (args.models / "target").string() + ": no model here (no config.json); hint: run from the "
                                                                   "repository root, or name the models' folder with --models DIR");
    if (!args.out.empty()) {
        std::error_code ec;
        fs::create_directories(args.out, ec);
        detail::require(!ec && fs::is_directory(args.out), "bench", [&] {
            return "--out " + args.out.string() + ": cannot create the folder (" + ec.message() + ")";
        });
    }
    const Tokenizer tok = bench::harness::load_tokenizer(args.models);
    const std::vector<bench::harness::Prompt> prompts =
        bench::harness::load_prompts(args.prompts, args.n_prompts, tok, args.split);
    std::size_t longest = 0;
    for (const auto& p : prompts) longest = std::max(longest, p.tokens.size());
    const int positions = args.max_context > 0 ? args.max_context : static_cast<int>(longest) + args.max_new + kTreeMargin;
    const std::vector<bench::MethodSpec> entries = chosen_entries(args);
    const int rows = rows_per_forward(entries);

    int devices = 0;
    const cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess || devices == 0)
        detail::fail("bench", std::string("no usable CUDA device: ") +
                                  (status != cudaSuccess ? std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")"
                                                         : std::string("cudaGetDeviceCount found none")) +
                                  "; bench_cuda_spec runs the target and its drafters on a GPU");
    CudaContext ctx;
    int runtime = 0, driver = 0;
    SPECDEC_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    SPECDEC_CUDA_CHECK(cudaDriverGetVersion(&driver));
    Header h;
    h.gpu = ctx.properties().name;
    h.cuda = "CUDA runtime " + version_text(runtime) + ", driver " + version_text(driver);
    h.setup = std::to_string(args.n_prompts) + " prompts (" + args.prompts.string() + ", split " + args.split + ") x " +
              std::to_string(args.max_new) + " new tokens, greedy; " + std::to_string(args.repeats) +
              " timed passes after an untimed warm-up pass; CUDA graphs " + (args.graphs ? "on" : "off") +
              "; times are host wall time per step (the loop's split); same = outputs equal to autoregressive "
              "decoding's, warm-up included (a divergence where the target's two logits are within rounding is a "
              "near-tie, not a failure)";

    print_header(h);
    ThreadPool pool(0);  // the CPU reference's threads: every core
    std::vector<Row> all;
    for (const std::string& scale : args.targets) {
        Loaded m = load_models(args, entries, scale, positions, rows, static_cast<int>(longest), ctx, pool);
        std::fprintf(stderr, "[bench] %s: %zu methods x %zu prompts x (1 warm-up + %d timed passes)\n", scale.c_str(),
                     m.methods.size(), prompts.size(), args.repeats);
        const std::vector<Row> rows = measure(args, m, prompts);
        print_rows(rows);
        all.insert(all.end(), rows.begin(), rows.end());
        write_reports(args, all, h, command);  // after each target: a later failure keeps what was measured
    }
    if (!args.out.empty())
        std::fprintf(stderr, "[bench] wrote %s and %s\n", (args.out / "spec.csv").c_str(), (args.out / "spec.md").c_str());
    for (const Row& r : all)
        if (r.error.empty() && tau_disagrees(r))
            std::printf("CHECK: %s, %s: tau %.2f on the GPU, %.2f on the CPU reference (more than 10%% apart: does the GPU "
                        "drafter draft what the CPU one drafts?)\n", r.target.c_str(), r.drafter.c_str(), r.tau, r.tau_cpu);
    const long failed = std::count_if(all.begin(), all.end(), [](const Row& r) { return !r.verdict.lossless(); });
    const long errors = std::count_if(all.begin(), all.end(), [](const Row& r) { return !r.error.empty(); });
    if (errors > 0)
        std::printf("\nERROR: %ld (target, method) rows failed to run (the same column holds the message)\n", errors);
    if (failed > 0) {
        std::printf("\nFAIL: in %ld (target, method) rows an output leaves autoregressive greedy decoding's where the "
                    "target's argmax is clear (beyond rounding): greedy speculative decoding must be lossless\n", failed);
        std::fprintf(stderr, "FAIL: %ld rows are not lossless (see the same column)\n", failed);
    }
    std::fflush(stdout);
    return failed > 0 ? 2 : errors > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {  // specdec::error (with its [specdec.*] prefix), or bad_alloc
        std::fprintf(stderr, "bench_cuda_spec: %s\n", e.what());
        return 1;
    }
}
