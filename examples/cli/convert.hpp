// examples/cli/convert.hpp — `specdec convert IN OUT`: one model format to another.
// SPDX-License-Identifier: MIT
#pragma once

// Loads IN with load_model and writes it with save_model (model_files.hpp), so every pair of formats
// those two know converts. The weights pass through float32: converting to f32 is exact; to bf16 each
// weight is rounded to nearest even. llama2.c's .bin holds float32 only, and its header fixes
// rope_theta 10000 and rms_norm_eps 1e-5 (save_llama2c refuses a config it cannot express).
// `--to eagle` takes a feature drafter folder instead (train_demo's EAGLE drafter) and writes EAGLE-1/2's
// drafter folder for SGLang's or vLLM's EAGLE loader (eagle_layout.hpp; docs/serving.md): what that
// layout cannot hold (FSPAD's sampler or PAD, a layer with its end norms) is refused by name.

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "args.hpp"
#include "model_files.hpp"
#include "specdec.hpp"

namespace specdec::cli {

inline const std::vector<Flag>& convert_flags() {
    static const std::vector<Flag> flags{
        {"dtype", "f32|bf16|f16|q8_0", "weights of the output (default f32; a llama2.c .bin is always f32; f16 and q8_0: GGUF only)"},
        {"tokenizer", "PATH", "the input's tokenizer (default: tokenizer.json, else tokenizer.model, else tokenizer.bin, in "
                              "the folder; tokenizer.bin beside a .bin; the GGUF's own)"},
        {"force", "", "overwrite OUT if it exists"},
        {"to", "eagle", "IN is a feature drafter folder; write OUT as EAGLE-1/2's drafter folder for a serving engine"},
        {"engine", "sglang|vllm", "with --to eagle: whose loader OUT is written for (default sglang)"},
    };
    return flags;
}

inline std::string convert_usage() {
    return usage_text("specdec convert IN OUT [--dtype f32|bf16|f16|q8_0] [--tokenizer PATH] [--force]\n"
                      "       specdec convert --to eagle DRAFTER OUT [--engine sglang|vllm] [--dtype f32|bf16] [--force]",
                      "Converts a model between an HF folder (config.json, model.safetensors, tokenizer), a llama2.c\n"
                      "file (run.c's version 0, with tokenizer.bin beside) and a GGUF file (llama.cpp: weights and\n"
                      "tokenizer in one file). The kind of OUT follows its name: *.bin is llama2.c, *.gguf is GGUF,\n"
                      "anything else a folder. The tokenizer goes along: a GGUF's becomes the folder's tokenizer.json\n"
                      "(byte-level \"gpt2\") or llama2.c's tokenizer.bin (SentencePiece \"llama\": scores, no merges,\n"
                      "so no tokenizer.json); a folder or .bin's file is copied, or written into a GGUF. Beside a .bin\n"
                      "goes a tokenizer.bin where the vocabulary has scores (tokenizer.bin, tokenizer.model, a GGUF's\n"
                      "\"llama\"); byte-level BPE has no llama2.c form. The same format both sides re-encodes (GGUF in\n"
                      "another --dtype, a llama2.c version 1 or 2 file as version 0). A folder OUT is created, but\n"
                      "not its parent folder, as for a file OUT.\n"
                      "With --to eagle, IN is an EAGLE feature drafter trained with \"layout\": \"eagle\" and OUT the\n"
                      "folder SGLang's (--engine sglang) or vLLM's (--engine vllm) EAGLE loader reads: one LlamaConfig\n"
                      "layer, fc, no end norms; the target's embedding and head are the engine's (docs/serving.md).",
                      convert_flags());
}

/// Whether `name` is a file a model folder holds (HF's, and what this library writes beside it).
inline bool model_folder_file(const std::string& name) {
    static const char* const kNames[] = {"config.json", "generation_config.json", "model.safetensors",
                                         "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json",
                                         "special_tokens_map.json", "tokenizer.model", "tokenizer.bin"};
    for (const char* n : kNames)
        if (name == n) return true;
    return name.rfind("model-", 0) == 0 && name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0;
}

/// Makes room for OUT under --force, touching nothing but what the conversion replaces: a file OUT is
/// overwritten by the writer; a folder OUT loses its model files first (a stale tokenizer.json would
/// pair with the new weights) and is refused if it holds anything else, or holds the input.
inline void clear_output(const fs::path& in, const fs::path& out, bool folder) {
    std::error_code ec;
    if (!fs::exists(out, ec)) return;
    if (fs::is_directory(out, ec) != folder)
        detail::fail("cli", out.string() + (folder ? ": exists and is not a folder; a folder is written here"
                                                  : ": is a folder; a file is written here"));
    if (!folder) return;
    const fs::path rel = fs::relative(fs::weakly_canonical(in, ec), fs::weakly_canonical(out, ec), ec);
    if (!ec && (rel.empty() || *rel.begin() != ".."))
        detail::fail("cli", out.string() + ": holds the input " + in.string() + "; --force does not replace it");
    std::vector<fs::path> ours;
    std::string others;
    for (const fs::directory_entry& e : fs::directory_iterator(out)) {
        const std::string name = e.path().filename().string();
        if (e.is_regular_file() && !e.is_symlink() && model_folder_file(name)) ours.push_back(e.path());
        else others += (others.empty() ? "" : ", ") + name;
    }
    if (!others.empty())
        detail::fail("cli", out.string() + ": holds " + others + ", which no model folder's writer replaces; --force "
                            "replaces a model folder's own files only: choose a new or empty OUT");
    for (const fs::path& p : ours) fs::remove(p);
}

/// Refuses an OUT whose parent folder is missing, file or folder alike: a mistyped path should not
/// leave a tree of new folders behind. OUT itself may be a new folder.
inline void require_parent_folder(const fs::path& out) {
    const fs::path named = out.has_filename() ? out : out.parent_path();  // "a/b/" names the folder b
    if (named.has_parent_path() && !fs::is_directory(named.parent_path()))
        detail::fail("cli", out.string() + ": its folder " + named.parent_path().string() + " does not exist; create it first");
}

/// `--to eagle`: a feature drafter folder to EAGLE-1/2's drafter folder for `--engine`.
inline int run_convert_to_eagle(const Args& args, const fs::path& in, const fs::path& out, const std::string& dtype_text) {
    const std::string engine_text = args.text("engine", "sglang");
    if (engine_text != "sglang" && engine_text != "vllm")
        throw UsageError("option '--engine': '" + engine_text + "'; known: sglang, vllm");
    if (dtype_text != "f32" && dtype_text != "bf16")
        throw UsageError("option '--dtype': '" + dtype_text + "'; --to eagle writes f32 or bf16");
    if (args.has("tokenizer")) throw UsageError("option '--tokenizer' does not go with --to eagle (the drafter uses the target's)");
    if (format_of(out, true) != ModelFormat::kHfFolder)
        throw UsageError("OUT '" + out.string() + "': --to eagle writes a folder, not a " + out.extension().string() + " file");
    if (fs::exists(out) && !args.has("force"))
        detail::fail("cli", out.string() + ": exists; choose another OUT or pass --force to overwrite it");
    if (fs::exists(in) && fs::exists(out) && fs::equivalent(in, out))
        detail::fail("cli", out.string() + ": is the input itself");
    require_parent_folder(out);
    const FeatureCheckpoint ck = load_feature_checkpoint(in);
    const ServingEngine engine = engine_text == "sglang" ? ServingEngine::kSglang : ServingEngine::kVllm;
    check_eagle_exportable(ck, engine, in.string());  // before OUT is touched
    clear_output(in, out, true);
    save_eagle_layout(out, ck, engine, dtype_text == "bf16" ? SaveFormat::kBF16 : SaveFormat::kF32);
    std::printf("%s (feature drafter, fc, layout eagle) -> %s (EAGLE-1/2 drafter for %s, architectures [\"%s\"], %s): wrote "
                "config.json, model.safetensors\n",
                in.string().c_str(), out.string().c_str(), engine_name(engine), eagle_architecture(engine), dtype_text.c_str());
    return 0;
}

inline int run_convert(const Args& args) {
    if (args.positional().size() != 2)
        throw UsageError("expected IN and OUT, got " + std::to_string(args.positional().size()) + " paths");
    const fs::path in = args.positional()[0], out = args.positional()[1];
    const std::string dtype_text = args.text("dtype", "f32");
    if (args.has("to")) {
        const std::string to_text = args.text("to", "");
        if (to_text != "eagle") throw UsageError("option '--to': '" + to_text + "'; known: eagle");
        return run_convert_to_eagle(args, in, out, dtype_text);
    }
    if (args.has("engine")) throw UsageError("option '--engine' goes with --to eagle");
    if (dtype_text != "f32" && dtype_text != "bf16" && dtype_text != "f16" && dtype_text != "q8_0")
        throw UsageError("option '--dtype': '" + dtype_text + "'; known: f32, bf16, f16, q8_0");
    const ModelFormat to = format_of(out, true);
    // A --dtype the kind of OUT cannot hold is a mistake in the call (exit 2), as with --to eagle.
    if (to == ModelFormat::kLlama2c && dtype_text != "f32")
        throw UsageError("option '--dtype': '" + dtype_text + "' for OUT '" + out.string() +
                         "': llama2.c's run.c reads float32 .bin files only (--dtype f32)");
    if (to == ModelFormat::kHfFolder && dtype_text != "f32" && dtype_text != "bf16")
        throw UsageError("option '--dtype': '" + dtype_text + "' for OUT '" + out.string() +
                         "', a folder: an HF folder is written in f32 or bf16 (f16 and q8_0 are for a .gguf OUT)");
    // Checked before loading: a mistake here should not cost a large model's load.
    if (fs::exists(out) && !args.has("force"))
        detail::fail("cli", out.string() + ": exists; choose another OUT or pass --force to overwrite it");
    if (fs::exists(in) && fs::exists(out) && fs::equivalent(in, out))
        detail::fail("cli", out.string() + ": is the input itself");
    require_parent_folder(out);  // the writers would make a folder's parents, or say only "cannot write"
    // Same format both sides is a conversion too: GGUF re-encoded in another --dtype, llama2.c version 1
    // or 2 rewritten as run.c's version 0, an HF folder resharded or cast.
    const LoadedModel m = load_model(in, args.has("tokenizer") ? fs::path(args.text("tokenizer")) : fs::path{});
    const bool writes_tokenizer_bin =
        to == ModelFormat::kLlama2c && (m.tokenizer_path.extension() == ".bin" || m.vocab.has_scores());
    if (writes_tokenizer_bin) {  // beside OUT: another model's tokenizer.bin may be there
        const fs::path beside = llama2c_tokenizer_beside(out);
        std::error_code ec;
        if (fs::exists(beside) && !fs::equivalent(beside, m.tokenizer_path, ec) && !args.has("force"))
            detail::fail("cli", beside.string() + ": exists, and run.c reads the tokenizer of " + out.string() +
                                    " there; choose another folder or pass --force to overwrite it");
    }
    clear_output(in, out, to == ModelFormat::kHfFolder);
    const std::string wrote = save_model(m, out, to, dtype_text);
    std::printf("%s (%s) -> %s (%s, %s): wrote %s\n", in.string().c_str(), format_name(m.format), out.string().c_str(),
                format_name(to), dtype_text.c_str(), wrote.c_str());
    if (to == ModelFormat::kLlama2c && m.vocab.present() && !writes_tokenizer_bin)
        std::printf("note: the tokenizer (%s) has no llama2.c form (run.c's tokenizer.bin holds a SentencePiece "
                    "vocabulary with scores): none written beside %s; generate it with --tokenizer\n",
                    m.vocab.kind().c_str(), out.string().c_str());
    return 0;
}

}  // namespace specdec::cli
