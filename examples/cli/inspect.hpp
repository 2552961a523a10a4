// examples/cli/inspect.hpp — `specdec inspect PATH`: what a model file holds, without running it.
// SPDX-License-Identifier: MIT
#pragma once

// For an HF folder the tensor table comes from the safetensors headers alone (SafetensorsFile::open
// maps the file and validates its header; no tensor is read), so inspecting a large model is quick;
// config.json is printed field by field as written, whatever fields it has. A llama2.c .bin has no
// names or header beyond seven integers: it is loaded, and its tensors are listed under the HF names
// it loads as.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "args.hpp"
#include "model_files.hpp"
#include "specdec.hpp"

namespace specdec::cli {

inline const std::vector<Flag>& inspect_flags() {
    static const std::vector<Flag> flags{
        {"tokenizer", "PATH", "the tokenizer file (default: tokenizer.json, else tokenizer.model, else tokenizer.bin, in the "
                              "folder; tokenizer.bin beside a .bin; the GGUF's own)"},
    };
    return flags;
}

inline std::string inspect_usage() {
    return usage_text("specdec inspect PATH [--tokenizer PATH]",
                      "Prints a model's config (every field), its tensors (name, dtype, shape, bytes), its tokenizer\n"
                      "(kind, vocab size, special tokens), the parameter count and the file sizes. PATH is an HF\n"
                      "folder (config.json, model.safetensors), a llama2.c .bin or a .gguf file. Two counts: \"tensors\"\n"
                      "adds up every tensor in the file; \"parameters\" counts the Llama the config describes (embedding,\n"
                      "layers, norm, head), so a drafter's own tensors (GLIDE's cross-attention, an EAGLE or FSPAD\n"
                      "connector, FSPAD's sampler) make the two differ, and the difference is printed.",
                      inspect_flags());
}

namespace inspecting {

/// "28,332,704" — digits grouped so sizes read at a glance.
inline std::string grouped(std::int64_t n) {
    std::string s = std::to_string(n), out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (i > 0 && (s.size() - i) % 3 == 0 && s[i - 1] != '-') out += ',';
        out += s[i];
    }
    return out;
}

/// "14.2M", "1.10B": a parameter count or byte size in a word.
inline std::string short_count(double n) {
    char buf[32];
    if (n >= 1e9) std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
    else if (n >= 1e6) std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
    else if (n >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", n / 1e3);
    else std::snprintf(buf, sizeof buf, "%.0f", n);
    return buf;
}

struct TensorRow {
    std::string name, dtype, shape;
    std::int64_t numel = 0, bytes = 0;
};

inline void print_tensors(const std::vector<TensorRow>& rows, const std::string& source) {
    std::size_t w_name = 4, w_shape = 5;
    for (const TensorRow& r : rows) w_name = std::max(w_name, r.name.size()), w_shape = std::max(w_shape, r.shape.size());
    std::int64_t numel = 0, bytes = 0;
    for (const TensorRow& r : rows) numel += r.numel, bytes += r.bytes;
    std::printf("\ntensors: %zu, %s parameters in all the file's tensors, %s bytes (%s)\n", rows.size(),
                grouped(numel).c_str(), grouped(bytes).c_str(), source.c_str());
    std::printf("  %-*s  %-5s  %-*s  %14s\n", static_cast<int>(w_name), "name", "dtype", static_cast<int>(w_shape), "shape", "bytes");
    for (const TensorRow& r : rows)
        std::printf("  %-*s  %-5s  %-*s  %14s\n", static_cast<int>(w_name), r.name.c_str(), r.dtype.c_str(),
                    static_cast<int>(w_shape), r.shape.c_str(), grouped(r.bytes).c_str());
}

/// The safetensors files of an HF folder: model.safetensors, or the shards an index names.
inline std::vector<fs::path> safetensors_files(const fs::path& dir) {
    if (fs::exists(dir / "model.safetensors")) return {dir / "model.safetensors"};
    const fs::path index = dir / "model.safetensors.index.json";
    if (!fs::exists(index)) (void)CheckpointTensors::open_folder(dir);  // names PyTorch weights where they are
    detail::require(fs::exists(index), "cli", [&] {
        return dir.string() + ": neither model.safetensors nor model.safetensors.index.json is here";
    });
    const json::Value root = json::parse(detail::read_text_file(index, "cli"), index.string());
    const json::Value* map = root.is_object() ? root.find("weight_map") : nullptr;
    detail::require(map != nullptr && map->is_object(), "cli", [&] { return index.string() + ": no 'weight_map' object"; });
    std::vector<fs::path> out;
    for (const json::Member& m : map->as_object()) {
        detail::require(m.value.is_string(), "cli", [&] { return index.string() + ": weight_map['" + m.key + "'] is not a file name"; });
        const fs::path shard = dir / m.value.as_string();
        if (std::find(out.begin(), out.end(), shard) == out.end()) out.push_back(shard);
    }
    return out;
}

inline void print_config_json(const fs::path& dir) {
    const fs::path path = dir / "config.json";
    const json::Value root = json::parse(detail::read_text_file(path, "cli"), path.string());
    detail::require(root.is_object(), "cli", [&] { return path.string() + ": not a JSON object"; });
    std::printf("\nconfig (%s):\n", path.string().c_str());
    for (const json::Member& m : root.as_object())
        std::printf("  %-28s %s\n", m.key.c_str(), json::dump(m.value).c_str());
}

/// The config as the loader read it; `source` says from where (a llama2.c header, a GGUF's llama.* keys).
inline void print_config(const Config& c, const char* source) {
    std::printf("\nconfig (%s):\n", source);
    std::printf("  %-28s %d\n  %-28s %d\n  %-28s %d\n  %-28s %d\n  %-28s %d\n  %-28s %d\n  %-28s %d\n", "hidden_size",
                c.hidden_size, "intermediate_size", c.intermediate_size, "num_hidden_layers", c.num_hidden_layers,
                "num_attention_heads", c.num_attention_heads, "num_key_value_heads", c.num_key_value_heads, "vocab_size",
                c.vocab_size, "max_position_embeddings", c.max_position_embeddings);
    std::printf("  %-28s %g\n  %-28s %g\n  %-28s %s\n", "rope_theta", c.rope_theta, "rms_norm_eps", c.rms_norm_eps,
                "tie_word_embeddings", c.tie_word_embeddings ? "true" : "false");
    if (c.attention_head_dim > 0) std::printf("  %-28s %d\n", "head_dim", c.attention_head_dim);
    if (c.rope_scaling.type != RopeScalingType::kNone)
        std::printf("  %-28s %s\n", "rope_scaling", detail::rope_scaling_string(c.rope_scaling).c_str());
}

/// llama2.c's header version: 1 or 2 after the magic "ak42", else the legacy version 0.
inline int llama2c_version(const fs::path& path) {
    std::ifstream f(path, std::ios::binary);
    std::uint32_t head[2] = {0, 0};
    f.read(reinterpret_cast<char*>(head), sizeof head);
    return f && head[0] == detail::kLlama2cMagic ? static_cast<int>(head[1]) : 0;
}

inline std::int64_t folder_bytes(const fs::path& dir) {
    std::int64_t n = 0;
    for (const fs::directory_entry& e : fs::directory_iterator(dir))
        if (e.is_regular_file()) n += static_cast<std::int64_t>(e.file_size());
    return n;
}

inline void print_tokenizer(const LoadedModel& m) {
    std::printf("\ntokenizer: ");
    if (!m.vocab.present()) {
        std::printf("none found (give one with --tokenizer PATH)\n");
        return;
    }
    const Vocab& v = m.vocab;
    const std::string file = !m.tokenizer_path.empty() ? m.tokenizer_path.string()
                             : v.in_gguf()               ? "none of its own: the GGUF file's tokenizer.ggml.* keys"
                                                         : "";
    std::printf("%s\n  %-28s %s\n  %-28s %d", v.kind().c_str(), "file", file.c_str(), "vocab size", v.size());
    if (v.size() != m.checkpoint.config.vocab_size)
        std::printf(" (the model's vocab_size is %d: %s)", m.checkpoint.config.vocab_size,
                    v.size() < m.checkpoint.config.vocab_size ? "ids past the tokenizer are padding" : "MISMATCH");
    std::printf("\n");
    const auto show = [&](const char* what, std::optional<int> id) {
        if (id) std::printf("  %-28s %d %s\n", what, *id, json::dump(json::Value(v.spelling(*id))).c_str());
        else std::printf("  %-28s none\n", what);
    };
    show("bos", v.bos());
    show("eos", v.eos());
    const std::vector<int> special = v.special_ids();
    std::printf("  %-28s %zu:", "special tokens", special.size());
    for (std::size_t i = 0; i < special.size() && i < 16; ++i)
        std::printf(" %d %s", special[i], json::dump(json::Value(v.spelling(special[i]))).c_str());
    std::printf("%s\n", special.size() > 16 ? " ..." : "");
}

}  // namespace inspecting

inline int run_inspect(const Args& args) {
    using namespace inspecting;
    if (args.positional().size() != 1)
        throw UsageError(args.positional().empty() ? "a model PATH is required" : "expected one PATH, got " +
                                                                                     std::to_string(args.positional().size()));
    const fs::path path = args.positional()[0];
    const ModelFormat format = format_of(path);
    std::printf("%s: %s\n", path.string().c_str(), format_name(format));

    std::vector<TensorRow> rows;
    std::string source;
    std::int64_t file_bytes = 0;
    Config config;
    LoadedModel tok_only;  // the tokenizer, and the model itself where there is no header to read
    tok_only.path = path;
    tok_only.format = format;
    switch (format) {
        case ModelFormat::kHfFolder: {
            print_config_json(path);
            // GLIDE and EDD drafters carry more fields; load_config reads the Llama ones all of them share.
            // EAGLE's folder for SGLang or vLLM adds "bias" (whether fc has one), which only its loader reads.
            config = is_eagle_layout(path) ? load_config(path / "config.json", detail::kEagleLayoutConfigKeys)
                                           : load_config(path / "config.json");
            if (config.sliding_window > 0)  // Mistral's window: the context the models hold (docs/formats.md)
                std::printf("  read as: max_position_embeddings %d, capped at the sliding window (full attention "
                            "is exact within it)\n",
                            config.max_position_embeddings);
            for (const fs::path& file : safetensors_files(path)) {
                const SafetensorsFile st = SafetensorsFile::open(file);
                for (const TensorInfo& t : st.tensors())
                    rows.push_back({t.name, std::string(dtype_name(t.dtype)), detail::shape_string(t.shape), t.numel,
                                    static_cast<std::int64_t>(t.bytes.size())});
            }
            source = "from the safetensors header";
            file_bytes = folder_bytes(path);
            break;
        }
        case ModelFormat::kLlama2c: {
            LoadedModel m = load_model(path);  // the header has no names: load, and list what it loads as
            config = m.checkpoint.config;
            std::printf("  %-28s %d (%s)\n", "llama2.c version", llama2c_version(path),
                        llama2c_version(path) == 2 ? "int8 Q8_0 matrices, dequantized at load" : "float32");
            print_config(config, "the llama2.c header, with the values llama2.c fixes");
            for_each_tensor(m.checkpoint.weights, config, [&](const std::string& name, const std::vector<float>& t, std::size_t) {
                rows.push_back({name, "F32", detail::shape_string(detail::hf_shape(name, config)),
                                static_cast<std::int64_t>(t.size()), static_cast<std::int64_t>(t.size() * 4)});
            });
            source = "as loaded, under HF names; float32 in memory";
            file_bytes = static_cast<std::int64_t>(fs::file_size(path));
            break;
        }
        case ModelFormat::kGguf: {
            // The header lists metadata and tensors as stored (ggml's names, types and dims, columns first);
            // the config is what load_gguf reads from the architecture's keys (llama.*, qwen2.*, qwen3.*).
            const GgufFile f = read_gguf_header(path);
            std::printf("  %-28s %u, alignment %llu\n", "GGUF version", f.version(),
                        static_cast<unsigned long long>(f.alignment()));
            for (const auto& [key, v] : f.metadata()) {
                if (v.is_array()) std::printf("  %-40s [%zu values]\n", key.c_str(), v.size());
                else if (v.type == GgufValueType::kString) std::printf("  %-40s %s\n", key.c_str(), json::dump(json::Value(v.string)).c_str());
                else if (v.is_float()) std::printf("  %-40s %g\n", key.c_str(), v.real);
                else std::printf("  %-40s %lld\n", key.c_str(), static_cast<long long>(v.integer));
            }
            for (const GgufTensorInfo& t : f.tensors())
                rows.push_back({t.name, detail::gguf_type_traits(t.type).name, detail::shape_string(t.dims), t.elements(),
                                static_cast<std::int64_t>(t.bytes)});
            tok_only = load_model(path);  // the config and the file's own tokenizer
            config = tok_only.checkpoint.config;
            const GgufValue* arch = f.find("general.architecture");  // llama, qwen2 or qwen3: their keys' prefix
            const std::string keys = arch != nullptr && arch->type == GgufValueType::kString ? arch->string : "llama";
            print_config(config, ("as load_gguf reads it from the " + keys + ".* keys").c_str());
            source = "from the GGUF header (ggml dims: columns first)";
            file_bytes = static_cast<std::int64_t>(fs::file_size(path));
            break;
        }
    }
    print_tensors(rows, source);
    // Config::parameter_count is the Llama's alone; a drafter's file holds more (or, in EAGLE's layout,
    // other) tensors, so the two counts are labelled and their difference said.
    const std::int64_t llama = config.parameter_count();
    std::int64_t in_file = 0;
    for (const TensorRow& r : rows) in_file += r.numel;
    std::printf("\nparameters: %s (%s) in the Llama the config describes (embedding, %d layer%s, norm%s), head_dim %d, "
                "kv_dim %d\n", grouped(llama).c_str(), short_count(static_cast<double>(llama)).c_str(),
                config.num_hidden_layers, config.num_hidden_layers == 1 ? "" : "s",
                config.tie_word_embeddings ? "; head tied to the embedding" : ", head", config.head_dim(), config.kv_dim());
    if (in_file != llama)
        std::printf("  the file's tensors hold %s %s: tensors outside that Llama (a drafter's connector, cross-attention "
                    "or sampler) or a layout without some of its norms\n",
                    grouped(in_file > llama ? in_file - llama : llama - in_file).c_str(), in_file > llama ? "more" : "fewer");
    std::printf("file size: %s bytes (%s)\n", grouped(file_bytes).c_str(), (short_count(static_cast<double>(file_bytes)) + "B").c_str());

    tok_only.checkpoint.config = config;
    tok_only.tokenizer_path = args.has("tokenizer") ? fs::path(args.text("tokenizer")) : default_tokenizer(path, format);
    if (!tok_only.tokenizer_path.empty()) tok_only.vocab = load_vocab(tok_only.tokenizer_path);  // a GGUF keeps its own
    print_tokenizer(tok_only);
    return 0;
}

}  // namespace specdec::cli
