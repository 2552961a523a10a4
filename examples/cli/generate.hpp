// examples/cli/generate.hpp — `specdec generate`: one prompt, streamed as the target accepts it.
// SPDX-License-Identifier: MIT
#pragma once

// The method flag names a composition of the benchmark's (examples/bench/methods.hpp: a MethodSpec,
// composed and run by compose.hpp's run_method), so the command runs exactly what specdec_bench
// measures. Acceptors as there: GreedyMatch at temperature 0; at T > 0 SpeculativeSampling for a
// chain, MultiDraftSampling for sampled siblings, SampleAndMatch for deterministic ones — all lossless.
// Text streams through GenerateOptions::on_step (one call per target forward) into a TextStream; the
// summary (tau, tok/s, speedup against the target alone on the same prompt and length) goes to
// stderr, so stdout holds the text only.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../bench/compose.hpp"
#include "../bench/methods.hpp"
#include "../machine.hpp"
#include "args.hpp"
#include "model_files.hpp"
#include "specdec.hpp"
#include "text_stream.hpp"

namespace specdec::cli {

inline const std::vector<Flag>& generate_flags() {
    static const std::vector<Flag> flags{
        {"target", "PATH", "the target model: an HF folder, a llama2.c .bin or a .gguf (required)"},
        {"draft", "PATH", "the drafter: an HF folder (a Llama, GLIDE, EDD, EAGLE or FSPAD drafter, or an EAGLE folder for "
                          "SGLang or vLLM), a .bin or a .gguf"},
        {"method", "NAME", "ar | sd | tree | cs | glide | edd | pct | eagle2 | lookup | text (default: sd with --draft, else "
                           "ar; lookup needs no drafter, text takes one of any tokenizer)"},
        {"prompt", "TEXT", "the text to continue (required)"},
        {"max-new-tokens", "N", "new tokens to generate, at least 1 (default 64; fewer when the end-of-text token comes)"},
        {"temperature", "T", "0 = greedy (default); > 0 samples, losslessly"},
        {"top-p", "P", "nucleus sampling mass, in (0, 1] (default 1 = off; no effect at temperature 0)"},
        {"top-k", "K", "keep the K most likely tokens (default 0 = off; no effect at temperature 0)"},
        {"seed", "S", "seed of every random draw (default 0)"},
        {"gamma", "G", "drafts per step: sd, lookup, text (default 4), glide, edd (default 5), cs (default 5: G-3 reviewed, "
                       "3 Max-Gram)"},
        {"ngram", "N", "lookup: match the text's last N tokens, else fewer, down to 1 (default 3)"},
        {"k-config", "LIST", "tree: children per node at each depth (default 2,2,1)"},
        {"draw", "HOW", "tree: topk (default) | with_replacement | without_replacement"},
        {"bigram", "PATH", "cs: Max-Gram's table (default bigram.json in the drafter's folder, else beside it)"},
        {"tokenizer", "PATH", "the target's tokenizer (default: tokenizer.json, else tokenizer.model, else tokenizer.bin, in "
                              "its folder; tokenizer.bin beside a .bin; the GGUF's own)"},
        {"draft-tokenizer", "PATH", "the drafter's tokenizer, if it is not in the usual place"},
        {"target-scale", "SIZE", "110m | 1b | 7b: the target (an HF folder) widened to that cost, bf16, same outputs; drafters "
                                 "that read its internals widened with it (docs/widening.md)"},
        {"threads", "N", "threads of the model's matrix products (default 1; 0 = every core)"},
        {"color", "WHEN", "colour accepted drafts: auto (default: on a terminal) | always | never"},
        {"no-baseline", "", "skip the plain autoregressive run that gives the speedup"},
        {"ignore-eos", "", "do not stop at the end-of-text token"},
    };
    return flags;
}

inline std::string generate_usage() {
    return usage_text(
        "specdec generate --target PATH [--draft PATH] [--method NAME] --prompt TEXT [options]",
        "Continues TEXT with the target model, drafting with --draft, and streams the text as it is accepted:\n"
        "accepted draft tokens are coloured on a terminal, plain when piped. Then, on stderr: tau (tokens per\n"
        "target forward), tokens/s, and the speedup over the target decoding alone (same prompt, same length).\n"
        "Methods: ar (the target alone), sd (a chain of drafts; Leviathan et al. 2023), tree (a k-ary token tree),\n"
        "cs (CS Drafting: the drafter reviewing Max-Gram), glide (a GLIDE drafter with CAPE), edd (an EDD drafter,\n"
        "a chain), pct (EDD's pruned candidate tree), eagle2 (EAGLE-2's dynamic tree over any drafter; an EAGLE or\n"
        "FSPAD drafter, or an EAGLE folder written for SGLang or vLLM, drafts from the target's features; sd, tree\n"
        "and pct take one too), lookup (prompt lookup: no drafter, a chain copied from what followed\n"
        "the text's last tokens earlier on; for a target that has no drafter), text (a drafter with a tokenizer of\n"
        "its own drafts as text, re-encoded into the target's tokens; both tokenizers as tokenizer.json).",
        generate_flags());
}

namespace generating {

/// The method flag as the benchmark's MethodSpec; the drafter is named "draft" in Models.
inline bench::MethodSpec method_spec(const Args& args, const std::string& method) {
    using bench::MethodKind;
    bench::MethodSpec m;
    m.name = method;
    m.drafter = "draft";
    const int gamma_default = (method == "glide" || method == "edd") ? 5 : 4;
    const int gamma = static_cast<int>(args.integer("gamma", gamma_default, 1, bench::kMaxGamma));
    if (method == "ar") {
        m.kind = MethodKind::kAutoregressive;
        m.drafter.clear();
    } else if (method == "sd" || method == "edd") {
        m.kind = MethodKind::kChain;
        m.gamma = gamma;
    } else if (method == "tree") {
        m.kind = MethodKind::kTree;
        m.k_config = args.integers("k-config", {2, 2, 1}, 1, 64);
        const std::string draw = args.text("draw", "topk");
        if (draw == "topk") m.draw = DrawPolicy::kTopK;
        else if (draw == "with_replacement") m.draw = DrawPolicy::kSampleWithReplacement;
        else if (draw == "without_replacement") m.draw = DrawPolicy::kSampleWithoutReplacement;
        else throw UsageError("option '--draw': '" + draw + "'; known: topk, with_replacement, without_replacement");
        if (bench::draft_nodes(m) > bench::kMaxTreeNodes)
            throw UsageError("option '--k-config': the tree has more than " + std::to_string(bench::kMaxTreeNodes) + " nodes");
    } else if (method == "cs") {  // CS Drafting's best two-level cascade on the shipped models: K [[2,3],[0,10]]
        m.kind = MethodKind::kCascade;
        m.drafter.clear();
        m.drafters = {"draft", bench::kMaxGramName};
        m.k_matrix = {{args.has("gamma") ? gamma - 3 : 2, 3}, {0, 10}};
        if (m.k_matrix[0][0] < 1) throw UsageError("option '--gamma': cs drafts gamma - 3 from the drafter and 3 from Max-Gram: gamma >= 4");
    } else if (method == "glide") {  // GLIDE + CAPE (GLIDE §4.2): 7/5/3/1 extra candidates as confidence falls
        m.kind = MethodKind::kExpanded;
        m.gamma = gamma;
        if (gamma > m.max_drafts)  // CAPE's chain is part of its draft budget
            throw UsageError("option '--gamma': glide's chain of " + std::to_string(gamma) + " exceeds its " +
                             std::to_string(m.max_drafts) + " drafts a step: at most " + std::to_string(m.max_drafts));
    } else if (method == "pct") {  // EDD's PCT with s_d/s_t measured on this machine (expand_threshold 0)
        m.kind = MethodKind::kPct;
        m.pct.expand_threshold = 0.0f;
    } else if (method == "eagle2") {
        m.kind = MethodKind::kEagle2;
    } else if (method == "text") {  // a drafter of another tokenizer drafting through the text (TextBridgeProposer)
        m.kind = MethodKind::kText;
        m.gamma = gamma;
    } else if (method == "lookup") {  // prompt lookup (examples/prompt_lookup.hpp): the text itself drafts
        m.kind = MethodKind::kLookup;
        m.drafter.clear();
        m.gamma = gamma;
        m.max_ngram = static_cast<int>(args.integer("ngram", 3, 1, 64));
    } else {
        throw UsageError("option '--method': '" + method + "'; known: ar, sd, tree, cs, glide, edd, pct, eagle2, lookup, text");
    }
    for (const char* flag : {"k-config", "draw"})
        if (args.has(flag) && m.kind != MethodKind::kTree) throw UsageError(std::string("option '--") + flag + "' applies to --method tree");
    if (args.has("gamma") && m.kind != MethodKind::kChain && m.kind != MethodKind::kExpanded && m.kind != MethodKind::kCascade &&
        m.kind != MethodKind::kLookup && m.kind != MethodKind::kText)
        throw UsageError("option '--gamma' applies to --method sd, cs, glide, edd, lookup and text");
    if (args.has("ngram") && m.kind != MethodKind::kLookup) throw UsageError("option '--ngram' applies to --method lookup");
    if (args.has("bigram") && m.kind != MethodKind::kCascade) throw UsageError("option '--bigram' applies to --method cs");
    return m;
}

/// "llama", "glide", "edd" or "feature" (EAGLE / FSPAD, or EAGLE-1/2's folder as SGLang and vLLM load
/// it: is_eagle_layout): what a drafter folder's config.json says it is (as specdec_bench reads it).
inline std::string drafter_kind(const fs::path& path) {
    if (!fs::is_directory(path) || !fs::exists(path / "config.json")) return "llama";
    const json::Value cfg = json::parse(detail::read_text_file(path / "config.json", "cli"), (path / "config.json").string());
    const json::Value* type = cfg.is_object() ? cfg.find("model_type") : nullptr;
    if (type != nullptr && type->is_string() && type->as_string() == "edd") return "edd";
    if (type != nullptr && type->is_string() && (type->as_string() == "eagle" || type->as_string() == "fspad")) return "feature";
    if (cfg.is_object() && cfg.find("glide_cross_attention") != nullptr) return "glide";
    return is_eagle_layout(path) ? "feature" : "llama";
}

/// The library's vocabulary check (check_vocab_compatible, io/vocab_compat.hpp) of a Llama drafter
/// against the target: the tokenizers piece by piece where both are at hand, then the models' sizes
/// (embedding rows, which may exceed a tokenizer's). Identical, or a prefix: the drafter's ids are the
/// target's first ones, and run_method pads its rows with PaddedVocabProposer (lossless). Anything else is
/// refused with the library's message (the first differing ids and pieces) and both files named. A
/// prefix needs both tokenizers as evidence: sizes alone cannot tell a shorter list of the same pieces.
inline VocabCompatibility check_vocabularies(const LoadedModel& target, int draft_vocab_size, const fs::path& draft_path,
                                             const Vocab& draft_vocab, const fs::path& draft_tokenizer) {
    const auto files = [&] {
        return " (target " + target.path.string() + ", drafter " + draft_path.string() +
               (draft_tokenizer.empty() ? std::string() : " with tokenizer " + draft_tokenizer.string()) + ")";
    };
    try {
        const bool both = target.vocab.present() && draft_vocab.present();
        if (both)
            check_vocab_compatible(
                target.vocab.size(), [&](int id) -> std::string_view { return target.vocab.spelling(id); },
                draft_vocab.size(), [&](int id) -> std::string_view { return draft_vocab.spelling(id); });
        const VocabCompatibility c = check_vocab_compatible(target.checkpoint.config.vocab_size, draft_vocab_size);
        detail::require(both || c.relation == VocabRelation::kIdentical, "vocab", [&] {
            return "the drafter's vocabulary of " + std::to_string(draft_vocab_size) + " is smaller than the target's " +
                   std::to_string(c.target_size) + ", and without both tokenizers nothing shows it is a prefix of the "
                   "target's: give the missing one with --tokenizer or --draft-tokenizer";
        });
        return c;
    } catch (const error& e) {
        throw error(e.what() + files() + "; hint: --method text drafts through the text, whatever the drafter's tokenizer");
    }
}

/// --method text reads both tokenizers as tokenizer.json (the Tokenizer that TextBridgeProposer encodes with).
inline std::unique_ptr<Tokenizer> tokenizer_json(const fs::path& file, const fs::path& model) {
    detail::require(file.extension() == ".json", "cli", [&] {
        return model.string() + ": --method text reads a tokenizer.json beside each model, and this one's tokenizer is " +
               (file.empty() ? std::string("missing") : file.string()) + "; give one with --tokenizer or --draft-tokenizer";
    });
    return std::make_unique<Tokenizer>(Tokenizer::load(file));
}

inline bool use_color(const std::string& when) {
    if (when == "always") return true;
    if (when == "never") return false;
    if (when != "auto") throw UsageError("option '--color': '" + when + "'; known: auto, always, never");
    const char* term = std::getenv("TERM");
    return isatty(fileno(stdout)) && std::getenv("NO_COLOR") == nullptr && !(term && std::string(term) == "dumb");
}

}  // namespace generating

inline int run_generate(const Args& args) {
    using namespace generating;
    using clock = std::chrono::steady_clock;
    if (!args.positional().empty()) throw UsageError("unexpected argument '" + args.positional()[0] + "' (the prompt goes after --prompt)");
    const fs::path target_path = args.need("target");
    const std::string prompt_text = args.need("prompt");
    const std::string method = args.text("method", args.has("draft") ? "sd" : "ar");
    const bench::MethodSpec spec = method_spec(args, method);
    if (args.has("draft-tokenizer") && !args.has("draft")) throw UsageError("option '--draft-tokenizer' goes with --draft");
    const bool speculative = spec.kind != bench::MethodKind::kAutoregressive;
    const bool needs_draft = speculative && spec.kind != bench::MethodKind::kLookup;
    if (needs_draft && !args.has("draft")) throw UsageError("--method " + method + " needs a drafter: --draft PATH");
    if (!needs_draft && args.has("draft"))
        throw UsageError(spec.kind == bench::MethodKind::kLookup
                             ? "--method lookup drafts from the text itself: drop --draft"
                             : "--method ar decodes with the target alone: drop --draft, or choose a method");
    const bool color = use_color(args.text("color", "auto"));
    const std::string scale = args.text("target-scale", "");
    if (args.has("target-scale") && scale != "110m" && scale != "1b" && scale != "7b")
        throw UsageError("option '--target-scale': '" + scale + "'; known: 110m, 1b, 7b");
    if (!scale.empty()) {  // refused before anything loads
        const ModelFormat format = format_of(target_path);
        detail::require(format == ModelFormat::kHfFolder, "cli", [&] {
            return target_path.string() + ": --target-scale widens an HF folder (config.json + model.safetensors, as "
                                          "models/target), this is a " + format_name(format) +
                   "; hint: specdec convert it to a folder first";
        });
    }

    GenerateOptions opts;
    opts.max_new_tokens = static_cast<int>(args.integer("max-new-tokens", 64, 1, 1 << 20));  // 0 would summarise nothing
    opts.sampling.temperature = static_cast<float>(args.number("temperature", 0.0, 0.0, 1e6));
    opts.sampling.top_p = static_cast<float>(args.number("top-p", 1.0, 0.0, 1.0, /*lo_open=*/true));
    opts.sampling.top_k = static_cast<int>(args.integer("top-k", 0, 0, 1 << 30));
    if (opts.sampling.greedy() && (args.has("top-p") || args.has("top-k"))) {  // legal, but likely not what was meant
        const std::string which = args.has("top-p") && args.has("top-k") ? "--top-p and --top-k have"
                                  : args.has("top-p")                     ? "--top-p has"
                                                                          : "--top-k has";
        std::fprintf(stderr, "specdec: note: %s no effect under greedy decoding (temperature 0); give --temperature T > 0 "
                             "to sample\n", which.c_str());
    }
    opts.seed = args.unsigned64("seed", 0);
    ThreadPool pool(static_cast<int>(args.integer("threads", 1, 0, 1024)));

    // ---- the models ------------------------------------------------------------------------------------
    // The models only run here: their matrices are packed from the mapped files, no float32 copy.
    const LoadOptions in_place{.defer_matrices = true};
    // An EAGLE folder for SGLang or vLLM drafts with the target's head, which a deferred load leaves in
    // the file: such a pair loads the target's weights.
    const bool eagle_folder = needs_draft && is_eagle_layout(args.text("draft"));
    if (eagle_folder && !scale.empty())
        detail::fail("cli", args.text("draft") + ": an EAGLE folder for SGLang or vLLM reads the target as trained; "
                                                 "--target-scale widens only this library's feature drafter folders");
    LoadedModel target = load_model(target_path, args.has("tokenizer") ? fs::path(args.text("tokenizer")) : fs::path{},
                                    eagle_folder ? LoadOptions{} : in_place);
    detail::require(target.vocab.present(), "cli",
                    [&] { return target_path.string() + ": no tokenizer found beside the model; give one with --tokenizer PATH"; });
    {  // another model's tokenizer decodes the model's ids into another text, silently: compare the sizes
        const int n_tok = target.vocab.size(), n_model = target.checkpoint.config.vocab_size;
        const std::string tok_name = target.tokenizer_path.empty() ? "the tokenizer in " + target_path.string()
                                                                   : "the tokenizer " + target.tokenizer_path.string();
        detail::require(n_tok <= n_model, "cli", [&] {
            return tok_name + " has " + std::to_string(n_tok) + " tokens, more than the vocab_size " +
                   std::to_string(n_model) + " of the model " + target_path.string() +
                   ": it is not this model's tokenizer; give the model's own with --tokenizer PATH";
        });
        if (n_tok < n_model)  // padding rows are legitimate; a far smaller tokenizer is likely the wrong one
            std::fprintf(stderr,
                         "specdec: warning: %s has %d tokens, the model %s has vocab_size %d: ids %d..%d have no text "
                         "(printed as <token N>); is it this model's tokenizer?\n",
                         tok_name.c_str(), n_tok, target_path.string().c_str(), n_model, n_tok, n_model - 1);
    }
    const long widest = bench::draft_nodes(spec);  // the drafter's scratch holds a catch-up chain before the tree
    const ModelOptions model_opts{.max_tree_nodes = static_cast<int>(std::max(256L, 2 * widest + 8)), .pool = &pool};
    bench::Models models;
    const Config trained = target.checkpoint.config;
    ModelOptions target_opts = model_opts;
    if (!scale.empty()) {
        // The benchmark's cost-scaled target (docs/widening.md): widened from the file's rows straight
        // into bf16; the drafters below that read its internals are widened with it.
        try {
            target.checkpoint = widen(target.checkpoint, widen_preset(scale), bench::kTargetWidenSeed);
        } catch (const error& e) {
            detail::fail("cli", target_path.string() + ": --target-scale " + scale + " cannot widen this model: " + e.what());
        }
        target_opts.weight_format = WeightFormat::kBF16;
    }
    models.info.push_back({"target", target.checkpoint.config, bench::matrix_params(target.checkpoint.config)});
    models.target = std::make_unique<CpuModel>(target.checkpoint.config, std::move(target.checkpoint.weights), target_opts);
    if (needs_draft) {
        const fs::path draft_path = args.text("draft");
        const std::string kind = drafter_kind(draft_path);
        const char* kind_name = kind == "edd" ? "an EDD drafter" : kind == "feature" ? "an EAGLE/FSPAD drafter" : "a Llama";
        if (method == "glide" && kind != "glide")
            detail::fail("cli", draft_path.string() + ": --method glide needs a GLIDE drafter (a folder whose config.json has "
                                                      "glide_cross_attention), this one is " + kind_name);
        if (method == "edd" && kind != "edd")
            detail::fail("cli", draft_path.string() + ": --method edd needs an EDD drafter (model_type \"edd\" in config.json)");
        if ((method == "cs" || method == "text") && kind != "llama")
            detail::fail("cli", draft_path.string() + ": --method " + method + " drafts with a plain Llama drafter, this is a " +
                                    kind + " drafter");
        const fs::path draft_tok_arg = args.has("draft-tokenizer") ? fs::path(args.text("draft-tokenizer")) : fs::path{};
        Config draft_config;
        if (kind == "edd") {
            EddCheckpoint e = load_edd_checkpoint(draft_path);
            if (!scale.empty()) e = bench::widen_with_target(std::move(e), trained, models.target->config());
            check_edd_pair(e.config, e.target_layer, models.target->config());
            draft_config = e.config;
            models.edd_layers["draft"] = e.target_layer;
            models.edds["draft"] = std::make_unique<CpuModel>(e.config, std::move(e.weights),
                                                              scale.empty() ? model_opts : bench::widened_drafter_options(model_opts));
        } else if (kind == "glide") {
            GlideCheckpoint g = load_glide_checkpoint(draft_path);
            if (!scale.empty()) g = bench::widen_with_target(std::move(g), trained, models.target->config());
            draft_config = g.config.draft;
            models.glides["draft"] = std::make_unique<GlideModel<CpuModel>>(std::move(g.config), std::move(g.weights), *models.target, model_opts);
        } else if (kind == "feature") {
            // load_feature_drafter reads either kind of folder: this library's, or EAGLE's layout, which
            // takes the target's embedding and head (as SGLang and vLLM do).
            FeatureCheckpoint f;
            if (scale.empty()) {
                f = load_feature_drafter(draft_path, models.target->config(), models.target->weights());
            } else {
                f = bench::widen_with_target(load_feature_checkpoint(draft_path), trained, models.target->config());
                check_feature_pair(f, models.target->config());
            }
            draft_config = f.config;
            models.features["draft"] = std::make_unique<FeatureDrafter>(
                std::move(f), scale.empty() ? model_opts : bench::widened_drafter_options(model_opts));
        } else {
            LoadedModel d = load_model(draft_path, draft_tok_arg, in_place);
            draft_config = d.checkpoint.config;
            if (spec.kind == bench::MethodKind::kText) {  // any vocabulary: the drafts go through the text
                models.tokenizers["target"] = tokenizer_json(target.tokenizer_path, target_path);
                models.tokenizers["draft"] = tokenizer_json(d.tokenizer_path, draft_path);
            } else {
                check_vocabularies(target, draft_config.vocab_size, draft_path, d.vocab, d.tokenizer_path);
            }
            models.drafters["draft"] = std::make_unique<CpuModel>(d.checkpoint.config, std::move(d.checkpoint.weights), model_opts);
        }
        if (kind != "llama") {  // GLIDE, EDD and feature drafter folders are HF folders: their tokenizer is in the usual place
            const fs::path tok = draft_tok_arg.empty() ? default_tokenizer(draft_path, ModelFormat::kHfFolder) : draft_tok_arg;
            check_vocabularies(target, draft_config.vocab_size, draft_path, tok.empty() ? Vocab{} : load_vocab(tok), tok);
        }
        models.info.push_back({"draft", draft_config, bench::matrix_params(draft_config)});
        // A drafter larger than its target costs more per draft than the verification it saves: the
        // speedup printed at the end would be below 1 (--target and --draft swapped reads as "0.00x").
        if (models.info[1].matrix_params > models.info[0].matrix_params)
            std::fprintf(stderr,
                         "specdec: warning: the drafter %s (%ld matrix parameters per forward) is larger than the "
                         "target %s (%ld): speculative decoding pays only with a much cheaper drafter; are --target "
                         "and --draft swapped?\n",
                         draft_path.string().c_str(), models.info[1].matrix_params, target_path.string().c_str(),
                         models.info[0].matrix_params);
        if (spec.kind == bench::MethodKind::kCascade) {
            const fs::path bigram = args.has("bigram") ? fs::path(args.text("bigram"))
                                  : fs::exists(draft_path / "bigram.json") ? draft_path / "bigram.json"
                                                                           : draft_path.parent_path() / "bigram.json";
            if (!args.has("bigram") && !fs::exists(bigram))  // the reader would say only "cannot open file"
                detail::fail("cli", bigram.string() + ": no such file; --method cs reads Max-Gram's table from bigram.json "
                                                      "in the drafter's folder, else beside it (models/bigram.json for the "
                                                      "shipped drafters); give another with --bigram PATH");
            models.bigram = std::make_unique<Bigram>(Bigram::load(bigram, models.target->vocab_size()));
        }
    }

    // ---- the prompt, the run, streamed -------------------------------------------------------------------
    const std::vector<int> prompt = target.vocab.encode_prompt(prompt_text);
    detail::require(!prompt.empty(), "cli", [] { return std::string("the prompt is empty: give some text with --prompt"); });
    if (!args.has("ignore-eos"))
        if (const std::optional<int> eos = target.vocab.eos()) opts.eos_token = *eos;
    if (spec.kind == bench::MethodKind::kPct) bench::pct_threshold(spec, models);  // measured before the timed run

    TextStream stream(stdout, color);
    // The prompt is printed with the first step, not before the run: a request the loop refuses (too
    // long for a model's context, ...) prints only the refusal.
    bool prompt_shown = false;
    const auto show_prompt = [&] {
        if (!prompt_shown) stream.add(prompt_text, false);
        prompt_shown = true;
    };
    int prev = prompt.back();
    double t_streaming = 0;  // printing is not decoding: left out of tok/s
    opts.on_step = [&](std::span<const int> tokens, std::span<const int> depths) {
        const auto t0 = clock::now();
        show_prompt();
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            stream.add(target.vocab.piece(prev, tokens[i]), depths[i] > 0);  // an accepted draft
            prev = tokens[i];
        }
        t_streaming += std::chrono::duration<double>(clock::now() - t0).count();
    };
    const auto end_line = [&] {  // the text ends its line, whatever happens next
        stream.finish();
        std::fputc('\n', stdout);
        std::fflush(stdout);
    };
    const auto t0 = clock::now();
    bench::Run run;
    try {
        run = bench::run_method(spec, models, prompt, opts);
    } catch (...) {
        if (prompt_shown) end_line();
        throw;
    }
    const double seconds = std::chrono::duration<double>(clock::now() - t0).count() - t_streaming;
    show_prompt();  // the prompt shows even where no step ran
    end_line();

    // ---- the summary -------------------------------------------------------------------------------------
    const Generation& g = run.g;
    const auto rate = [](const Generation& x, double s) { return s > 0 ? static_cast<double>(x.tokens.size()) / s : 0.0; };
    if (!speculative || args.has("no-baseline")) {
        std::fprintf(stderr, "%s: %zu tokens in %d target forwards, tau %.2f, %.1f tok/s", method.c_str(), g.tokens.size(),
                     g.n_target_calls(), g.tau(), rate(g, seconds));
    } else {
        // The streamed run went first, on cold caches and buffers: the comparison times both again, warm and
        // silent, the baseline first, so that neither runs on the other's leftovers alone.
        GenerateOptions silent = opts;
        silent.on_step = nullptr;
        const auto b0 = clock::now();
        const Generation plain = autoregressive_generate(*models.target, prompt, silent);
        const double b_seconds = std::chrono::duration<double>(clock::now() - b0).count();
        const auto s0 = clock::now();
        const bench::Run again = bench::run_method(spec, models, prompt, silent);
        const double s_seconds = std::chrono::duration<double>(clock::now() - s0).count();
        const double tok_s = rate(again.g, s_seconds), b_tok_s = rate(plain, b_seconds);
        std::fprintf(stderr, "%s: %zu tokens in %d target forwards, tau %.2f, %.1f tok/s; autoregressive %.1f tok/s: "
                     "speedup %.2fx (timed again without printing, one run each; %s, %d thread%s)", method.c_str(),
                     g.tokens.size(), g.n_target_calls(), g.tau(), tok_s, b_tok_s, b_tok_s > 0 ? tok_s / b_tok_s : 0.0,
                     example::machine_name().c_str(), pool.size(), pool.size() == 1 ? "" : "s");
        if (opts.sampling.greedy())
            std::fprintf(stderr, "; %s", plain.tokens == g.tokens ? "identical to autoregressive greedy decoding"
                                                                   : "DIFFERS from autoregressive greedy decoding");
    }
    // One sampled text cannot test a law: say so, and what the acceptor that ran needs to be lossless.
    if (speculative && !opts.sampling.greedy()) std::fprintf(stderr, "; distribution not checked in this run (%s)", run.acceptor);
    if (!scale.empty()) std::fprintf(stderr, "; %s", bench::cost_scaled_label(scale).c_str());
    // Fewer tokens than asked for needs its reason, or it reads as a fault.
    if (opts.eos_token >= 0 && !g.tokens.empty() && g.tokens.back() == opts.eos_token)
        std::fprintf(stderr, "; stopped at the end-of-text token %d %s after %zu of --max-new-tokens %d (--ignore-eos goes on)",
                     opts.eos_token, json::dump(json::Value(target.vocab.spelling(opts.eos_token))).c_str(), g.tokens.size(),
                     opts.max_new_tokens);
    std::fprintf(stderr, "\n");
    return 0;
}

}  // namespace specdec::cli
