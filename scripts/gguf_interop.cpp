// scripts/gguf_interop.cpp — the specdec side of scripts/llama_cpp_interop.sh (outside CI):
//
//     gguf_interop export HF_DIR OUT.gguf [f32|f16|bf16|q8_0]   HF folder + tokenizer.json -> GGUF
//     gguf_interop greedy MODEL.gguf PROMPT N                  N greedy tokens after PROMPT, printed as text
//
// Built by the script with: g++ -std=c++20 -O2 -I. scripts/gguf_interop.cpp -o build/llama_cpp/gguf_interop -pthread
// SPDX-License-Identifier: MIT
#include <cstdio>
#include <cstdlib>
#include <string>

#include "specdec.hpp"

using namespace specdec;

int main(int argc, char** argv) try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "export" && (argc == 4 || argc == 5)) {
        const Checkpoint ck = load_checkpoint(argv[2]);
        const GgufTokenizer tok(Tokenizer::load(std::string(argv[2]) + "/tokenizer.json"));
        const std::string t = argc == 5 ? argv[4] : "f32";
        const GgufSaveType type = t == "f16" ? GgufSaveType::kF16 : t == "bf16" ? GgufSaveType::kBF16
                                  : t == "q8_0" ? GgufSaveType::kQ8_0 : GgufSaveType::kF32;
        save_gguf(argv[3], ck.config, ck.weights, &tok, type);
        return 0;
    }
    if (mode == "greedy" && argc == 5) {
        GgufModel m = load_gguf(argv[2]);
        if (!m.tokenizer) throw std::runtime_error("the file has no tokenizer");
        const std::vector<int> prompt = m.tokenizer->encode(argv[3]);
        CpuModel model(m.config, std::move(m.weights));
        const Generation g = autoregressive_generate(
            model, prompt, GenerateOptions{.max_new_tokens = std::atoi(argv[4]), .eos_token = m.tokenizer->eos_id()});  // llama-simple stops there too
        std::printf("%s", m.tokenizer->decode(g.tokens).c_str());
        std::fprintf(stderr, "ids:");
        for (int id : g.tokens) std::fprintf(stderr, " %d", id);
        std::fprintf(stderr, "\n");
        return 0;
    }
    std::fprintf(stderr, "usage: gguf_interop export HF_DIR OUT.gguf [f32|f16|bf16|q8_0] | greedy MODEL.gguf PROMPT N\n");
    return 2;
} catch (const std::exception& e) {
    std::fprintf(stderr, "gguf_interop: %s\n", e.what());
    return 1;
}
