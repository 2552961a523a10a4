// examples/cli/model_files.hpp — a path on the command line as a model: which format, loading, saving.
// SPDX-License-Identifier: MIT
#pragma once

// Every subcommand reaches model files through the three functions here, so a format is added in one
// place: format_of (the path's kind), load_model (path -> Config, Weights and tokenizer) and save_model.
// The formats:
//   an HF folder   config.json + model.safetensors (+ tokenizer.json; without one, SentencePiece's
//                  tokenizer.model or a tokenizer.bin, as `convert` leaves one beside a llama2.c model)
//   a llama2.c .bin (load_llama2c); its tokenizer is tokenizer.bin beside it unless --tokenizer says
//   a .gguf        load_gguf / save_gguf: config, weights (dequantized) and tokenizer in one file; as an
//                  HF folder its tokenizer is written as tokenizer.json ("gpt2") or tokenizer.bin ("llama")

#include <filesystem>
#include <string>

#include "specdec.hpp"
#include "vocab.hpp"

namespace specdec::cli {

namespace fs = std::filesystem;

enum class ModelFormat { kHfFolder, kLlama2c, kGguf };

inline const char* format_name(ModelFormat f) {
    switch (f) {
        case ModelFormat::kHfFolder: return "HF folder";
        case ModelFormat::kLlama2c: return "llama2.c .bin";
        case ModelFormat::kGguf: return "GGUF";
    }
    return "?";
}

/// The format a path names: a folder is an HF folder, then by extension. `for_writing`: the path need
/// not exist (a new folder is any path without .bin or .gguf).
inline ModelFormat format_of(const fs::path& p, bool for_writing = false) {
    const std::string ext = p.extension().string();
    if (ext == ".gguf") return ModelFormat::kGguf;
    if (ext == ".bin" && !fs::is_directory(p)) return ModelFormat::kLlama2c;
    if (fs::is_directory(p) && !for_writing && !fs::exists(p / "config.json"))
        detail::fail("cli", p.string() + ": a folder without config.json, so not an HF model folder");
    if (fs::is_directory(p) || for_writing) return ModelFormat::kHfFolder;
    if (!fs::exists(p)) detail::fail("cli", p.string() + ": no such file or folder");
    detail::fail("cli", p.string() + ": not a model: expected an HF folder (config.json, model.safetensors), "
                                     "a llama2.c .bin or a .gguf file");
}

/// One model as the command holds it.
struct LoadedModel {
    fs::path path;
    ModelFormat format = ModelFormat::kHfFolder;
    Checkpoint checkpoint;
    Vocab vocab;               // absent when the model came without a tokenizer
    fs::path tokenizer_path;   // where the vocab was read ("" when absent)
};

/// Where llama2.c's run.c looks for the tokenizer of the model file `model`: tokenizer.bin beside it.
inline fs::path llama2c_tokenizer_beside(const fs::path& model) {
    return (model.has_parent_path() ? model.parent_path() : fs::path(".")) / "tokenizer.bin";
}

/// The tokenizer a model path implies: `explicit_path` if given, else the format's usual file.
inline fs::path default_tokenizer(const fs::path& model, ModelFormat format) {
    switch (format) {
        case ModelFormat::kHfFolder:
            if (fs::exists(model / "tokenizer.json")) return model / "tokenizer.json";
            if (fs::exists(model / "tokenizer.model")) return model / "tokenizer.model";
            if (fs::exists(model / "tokenizer.bin")) return model / "tokenizer.bin";
            return {};
        case ModelFormat::kLlama2c: {
            const fs::path beside = llama2c_tokenizer_beside(model);
            return fs::exists(beside) ? beside : fs::path{};
        }
        case ModelFormat::kGguf: return {};  // a GGUF file holds its tokenizer
    }
    return {};
}

/// Reads a tokenizer by its file name: tokenizer.json (HF), SentencePiece's tokenizer.model or a llama2.c
/// tokenizer.bin.
inline Vocab load_vocab(const fs::path& path) {
    if (path.extension() == ".json") return Vocab(Tokenizer::load(path));
    if (path.extension() == ".model") return Vocab(load_sentencepiece_model(path), Vocab::kSentencePieceModel);
    if (path.extension() == ".bin") return Vocab(Llama2cTokenizer::load(path));
    detail::fail("cli", path.string() + ": not a tokenizer: expected tokenizer.json (HF), SentencePiece's "
                                        "tokenizer.model or a llama2.c tokenizer.bin");
}

/// Loads a model of any format with its tokenizer (`tokenizer` overrides the default file; empty = default).
/// `options` reach the HF and GGUF loaders: generate defers the matrices to the model (no float32 copy),
/// convert reads them.
inline LoadedModel load_model(const fs::path& path, const fs::path& tokenizer = {}, LoadOptions options = {}) {
    LoadedModel m;
    m.path = path;
    m.format = format_of(path);
    switch (m.format) {
        case ModelFormat::kHfFolder: m.checkpoint = load_checkpoint(path, options); break;
        case ModelFormat::kLlama2c: m.checkpoint = load_llama2c(path); break;
        case ModelFormat::kGguf: {
            GgufModel g = load_gguf(path, options);
            m.checkpoint = Checkpoint{g.config, std::move(g.weights)};
            if (g.tokenizer && tokenizer.empty()) {  // the file's own tokenizer, unless --tokenizer names another
                m.vocab = Vocab(*g.tokenizer);
                return m;
            }
            break;
        }
    }
    m.tokenizer_path = tokenizer.empty() ? default_tokenizer(path, m.format) : tokenizer;
    if (!m.tokenizer_path.empty()) m.vocab = load_vocab(m.tokenizer_path);
    return m;
}

/// The tensor type of a GGUF written with --dtype `dtype` (f32, f16, bf16 or q8_0).
inline GgufSaveType gguf_save_type(const std::string& dtype) {
    if (dtype == "f32") return GgufSaveType::kF32;
    if (dtype == "f16") return GgufSaveType::kF16;
    if (dtype == "bf16") return GgufSaveType::kBF16;
    if (dtype == "q8_0") return GgufSaveType::kQ8_0;
    detail::fail("cli", "a GGUF is written in f32, f16, bf16 or q8_0, not " + dtype);
}

/// Writes `m` in `format` at `out`: an HF folder (config.json + model.safetensors, f32 or bf16), a
/// llama2.c .bin (version 0, run.c's, f32 only) or a GGUF file (f32, f16, bf16 or q8_0, with the
/// tokenizer). Returns what was written, for the message.
inline std::string save_model(const LoadedModel& m, const fs::path& out, ModelFormat format, const std::string& dtype) {
    const Config& c = m.checkpoint.config;
    const Weights& w = m.checkpoint.weights;
    switch (format) {
        case ModelFormat::kHfFolder: {
            detail::require(dtype == "f32" || dtype == "bf16", "cli", [&] {
                return out.string() + ": an HF folder is written in f32 or bf16, not " + dtype;
            });
            // The tokenizer first: one that cannot be written stops the conversion before the weights are.
            // A file travels as it is, under the name of its kind (tokenizer.json, tokenizer.model or
            // tokenizer.bin: load_vocab reads by that name). A GGUF's tokenizer has no file: it is written
            // out (Vocab::save_into), so that the folder generates as the GGUF did.
            fs::path tokenizer;
            if (!m.tokenizer_path.empty()) {
                tokenizer = out / ("tokenizer" + m.tokenizer_path.extension().string());
                fs::create_directories(out);
                if (fs::absolute(tokenizer) != fs::absolute(m.tokenizer_path))
                    fs::copy_file(m.tokenizer_path, tokenizer, fs::copy_options::overwrite_existing);
            } else if (m.vocab.present()) {
                fs::create_directories(out);
                try {
                    tokenizer = m.vocab.save_into(out);
                } catch (const error& e) {
                    detail::fail("cli", out.string() + ": the tokenizer of " + m.path.string() + " (" + m.vocab.kind() +
                                            ") cannot be written, so the folder could not generate: " + e.what());
                }
            }
            save_checkpoint(out, c, w, dtype == "bf16" ? SaveFormat::kBF16 : SaveFormat::kF32);
            std::string wrote = (out / "config.json").string() + ", " + (out / "model.safetensors").string();
            if (!tokenizer.empty()) wrote += ", " + tokenizer.string();
            else wrote += " (no tokenizer: none was loaded; generate needs --tokenizer)";
            return wrote;
        }
        case ModelFormat::kLlama2c: {
            detail::require(dtype == "f32", "cli", [&] {
                return out.string() + ": llama2.c's run.c reads float32 .bin files only (--dtype f32)";
            });
            save_llama2c(out, c, w, Llama2cVersion::kLegacy);
            std::string wrote = out.string();
            // run.c reads tokenizer.bin beside the model: a tokenizer.bin travels as it is, and a SentencePiece
            // vocabulary with scores (a tokenizer.model, a GGUF's "llama") is written as one. Byte-level BPE
            // and tokenizer.json's merges have no tokenizer.bin form (convert says so).
            const fs::path dst = llama2c_tokenizer_beside(out);
            if (!m.tokenizer_path.empty() && m.tokenizer_path.extension() == ".bin") {
                if (fs::absolute(dst) != fs::absolute(m.tokenizer_path))
                    fs::copy_file(m.tokenizer_path, dst, fs::copy_options::overwrite_existing);
                wrote += ", " + dst.string();
            } else if (m.vocab.has_scores()) {
                wrote += ", " + m.vocab.save_into(dst.parent_path()).string();
            }
            return wrote;
        }
        case ModelFormat::kGguf: {
            const std::optional<GgufTokenizer> tok = m.vocab.to_gguf();
            save_gguf(out, c, w, tok ? &*tok : nullptr, gguf_save_type(dtype));
            return out.string() + (tok ? " (with its tokenizer)" : " (no tokenizer: none was loaded)");
        }
    }
    return {};
}

}  // namespace specdec::cli
