// scripts/llama_cpp_logits.cpp — the llama.cpp side of scripts/llama_cpp_interop.sh (outside CI), written
// against llama.cpp's public llama.h; no specdec code. Greedy decoding as llama-simple does it (prompt
// tokenized with add_special and parse_special, argmax each step, stop at an end-of-generation token),
// but printing token ids rather than text, and saving each step's logits for specdec to compare:
//
//     llama_cpp_logits MODEL.gguf PROMPT N LOGITS.f32 [--defaults]
//
// stdout: "prompt: ID ..." then "greedy: ID ..."; LOGITS.f32: one row of n_vocab float32 per generated
// token (the law it was taken from), row-major. F32 KV cache and no flash attention (see below); --defaults keeps llama.cpp's context defaults
// (llama-simple's: F16 cache, flash attention where the backend has it).
// Built by the script against build/llama_cpp's static libraries.
// SPDX-License-Identifier: MIT
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
    const bool defaults = argc == 6 && std::string(argv[5]) == "--defaults";
    if (argc != 5 && !defaults) {
        std::fprintf(stderr, "usage: llama_cpp_logits MODEL.gguf PROMPT N LOGITS.f32 [--defaults]\n");
        return 2;
    }
    const std::string prompt = argv[2];
    const int n_predict = std::atoi(argv[3]);
    llama_log_set([](ggml_log_level level, const char* text, void*) {
        if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
    }, nullptr);
    llama_backend_init();
    llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (model == nullptr) {
        std::fprintf(stderr, "llama_cpp_logits: cannot load %s\n", argv[1]);
        return 1;
    }
    const llama_vocab* vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const int n_prompt = -llama_tokenize(vocab, prompt.c_str(), static_cast<int>(prompt.size()), nullptr, 0, true, true);
    std::vector<llama_token> tokens(static_cast<std::size_t>(n_prompt));
    if (llama_tokenize(vocab, prompt.c_str(), static_cast<int>(prompt.size()), tokens.data(), n_prompt, true, true) < 0) return 1;

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = static_cast<std::uint32_t>(n_prompt + n_predict);
    cp.n_batch = cp.n_ctx;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.no_perf = true;
    // What is compared is the weights' layout and the model's arithmetic: with llama.cpp's CPU flash-attention
    // kernel (its default) the F32 models/target's logits moved by up to 4.8e-3 from specdec's; without it and
    // with an F32 cache, by 1.9e-5 (logits up to 19.7).
    if (!defaults) {
        cp.type_k = cp.type_v = GGML_TYPE_F32;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
    llama_context* ctx = llama_init_from_model(model, cp);
    if (ctx == nullptr) return 1;

    std::printf("prompt:");
    for (llama_token t : tokens) std::printf(" %d", t);
    std::printf("\ngreedy:");
    std::FILE* out = std::fopen(argv[4], "wb");
    if (out == nullptr) return 1;
    llama_batch batch = llama_batch_get_one(tokens.data(), n_prompt);
    llama_token next = 0;
    for (int i = 0; i < n_predict; ++i) {
        if (llama_decode(ctx, batch) != 0) return 1;
        const float* logits = llama_get_logits_ith(ctx, -1);
        next = 0;
        for (int v = 1; v < n_vocab; ++v)
            if (logits[v] > logits[next]) next = v;  // first maximum, as llama.cpp's greedy sampler
        if (llama_vocab_is_eog(vocab, next)) break;
        std::fwrite(logits, sizeof(float), static_cast<std::size_t>(n_vocab), out);
        std::printf(" %d", next);
        batch = llama_batch_get_one(&next, 1);
    }
    std::printf("\n");
    std::fclose(out);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
