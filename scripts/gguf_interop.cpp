// scripts/gguf_interop.cpp — the specdec side of scripts/llama_cpp_interop.sh (outside CI):
//
//     gguf_interop export HF_DIR OUT.gguf [f32|f16|bf16|q8_0]   HF folder + tokenizer.json -> GGUF
//     gguf_interop greedy MODEL PROMPT N                       N greedy tokens after PROMPT, printed as text
//     gguf_interop against MODEL PROMPT LLAMA_IDS LOGITS.f32   llama.cpp's ids and logits (scripts/llama_cpp_logits.cpp)
//                                                              against specdec's on the same tokens
//     gguf_interop same MODEL_A MODEL_B PROMPT N               the logits of two files of one model, compared
//     gguf_interop tiny HF_DIR                                 a tiny random HF folder (untied, GQA, bf16, its own
//                                                              byte-level tokenizer): the source of tests/data/gguf/llama_cpp/
//     gguf_interop tiny-llama3 HF_DIR                          the same with heads of 32 and Llama 3.x's RoPE (theta
//                                                              500000, rope_scaling llama3 over a context of 40): the
//                                                              source of tests/data/gguf/llama_cpp_llama3/
//     gguf_interop tiny-qwen2 HF_DIR | tiny-qwen3 HF_DIR       the same shape as tiny as a Qwen2 (q/k/v biases, untied) or a
//                                                              Qwen3 (q/k norms, heads of 32, tied): tests/data/gguf/llama_cpp_qwen{2,3}/
//     gguf_interop tiny-yarn HF_DIR                            tiny-qwen3 with rope_scaling yarn (factor 4 over a pretraining
//                                                              context of 4096): tests/data/gguf/llama_cpp_yarn/
//
// MODEL is a .gguf or an HF folder (config.json, safetensors, tokenizer.json).
// Built by the script with: g++ -std=c++20 -O2 -I. scripts/gguf_interop.cpp -o build/llama_cpp/gguf_interop -pthread
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "specdec.hpp"

using namespace specdec;

namespace {

GgufModel load_any(const std::string& path) {
    if (std::filesystem::is_directory(path)) {
        Checkpoint ck = load_checkpoint(path);
        return GgufModel{ck.config, std::move(ck.weights), GgufTokenizer(Tokenizer::load(path + "/tokenizer.json"))};
    }
    GgufModel m = load_gguf(path);
    if (!m.tokenizer) throw std::runtime_error(path + " has no tokenizer");
    return m;
}

std::string ids_text(const std::vector<int>& ids) {
    std::string s;
    for (int id : ids) s += " " + std::to_string(id);
    return s;
}

std::vector<int> ids_after(const std::string& text, const std::string& label) {  // "label: 1 2 3" in text
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(label + ":", 0) == 0) {
            std::istringstream ids(line.substr(label.size() + 1));
            std::vector<int> v;
            for (int id; ids >> id;) v.push_back(id);
            return v;
        }
    throw std::runtime_error("no '" + label + ":' line in llama.cpp's output");
}

/// The next-token logits (one row per step) at every position from prompt_len - 1 on, for tokens = prompt + more.
std::vector<float> step_logits(CpuModel& model, const std::vector<int>& tokens, std::size_t prompt_len) {
    const Tree chain = Tree::chain(tokens);
    const Rows rows = model.forward(chain, 0);
    return {rows.data.begin() + static_cast<std::ptrdiff_t>((prompt_len - 1) * rows.cols), rows.data.end()};
}

/// Prints the largest |a - b| and the logits' range; returns how many rows' argmax differ.
int compare_rows(const std::vector<float>& a, const std::vector<float>& b, int cols) {
    float diff = 0, scale = 0;
    int argmax_diff = 0;
    for (std::size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i])), scale = std::max(scale, std::abs(a[i]));
    for (std::size_t r = 0; r * static_cast<std::size_t>(cols) < a.size(); ++r) {
        const std::span<const float> ra(a.data() + r * cols, static_cast<std::size_t>(cols)), rb(b.data() + r * cols, static_cast<std::size_t>(cols));
        argmax_diff += argmax(ra) != argmax(rb);
    }
    std::printf("logits: %zu steps x %d, max |diff| %.3g (largest |logit| %.3g), argmax differs at %d steps\n",
                a.size() / static_cast<std::size_t>(cols), cols, static_cast<double>(diff), static_cast<double>(scale), argmax_diff);
    return argmax_diff;
}

}  // namespace

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
        GgufModel m = load_any(argv[2]);
        const std::vector<int> prompt = m.tokenizer->encode(argv[3]);
        CpuModel model(m.config, std::move(m.weights));
        const Generation g = autoregressive_generate(
            model, prompt, GenerateOptions{.max_new_tokens = std::atoi(argv[4]), .eos_token = m.tokenizer->eos_id()});  // llama-simple stops there too
        std::printf("%s", m.tokenizer->decode(g.tokens).c_str());
        std::fprintf(stderr, "prompt:%s\ngreedy:%s\n", ids_text(prompt).c_str(), ids_text(g.tokens).c_str());
        return 0;
    }
    if (mode == "against" && argc == 6) {
        GgufModel m = load_any(argv[2]);
        std::ifstream ids_file(argv[4]);
        const std::string llama_out((std::istreambuf_iterator<char>(ids_file)), std::istreambuf_iterator<char>());
        const std::vector<int> their_prompt = ids_after(llama_out, "prompt"), theirs = ids_after(llama_out, "greedy");
        const std::vector<int> prompt = m.tokenizer->encode(argv[3]);
        CpuModel model(m.config, std::move(m.weights));
        const Generation g = autoregressive_generate(
            model, prompt, GenerateOptions{.max_new_tokens = static_cast<int>(theirs.size()), .eos_token = m.tokenizer->eos_id()});
        std::printf("prompt ids  specdec:%s\n            llama.cpp:%s  %s\n", ids_text(prompt).c_str(), ids_text(their_prompt).c_str(),
                    prompt == their_prompt ? "SAME" : "DIFFERENT");
        std::printf("greedy ids  specdec:%s\n            llama.cpp:%s  %s\n", ids_text(g.tokens).c_str(), ids_text(theirs).c_str(),
                    g.tokens == theirs ? "SAME" : "DIFFERENT");
        // specdec's logits on llama.cpp's tokens, row for row against the ones llama.cpp sampled from.
        std::vector<int> tokens = their_prompt;
        tokens.insert(tokens.end(), theirs.begin(), theirs.end());
        tokens.pop_back();
        model.reset();
        const std::vector<float> ours = step_logits(model, tokens, their_prompt.size());
        std::vector<float> llama(ours.size());
        std::ifstream lf(argv[5], std::ios::binary);
        lf.read(reinterpret_cast<char*>(llama.data()), static_cast<std::streamsize>(llama.size() * sizeof(float)));
        if (lf.gcount() != static_cast<std::streamsize>(llama.size() * sizeof(float)) || lf.peek() != EOF)
            throw std::runtime_error(std::string(argv[5]) + " does not hold " + std::to_string(theirs.size()) + " rows of " +
                                     std::to_string(m.config.vocab_size) + " logits");
        const int argmax_diff = compare_rows(ours, llama, m.config.vocab_size);
        if (g.tokens != theirs) {  // where the two greedy paths part, and how close specdec's own choice was there
            const std::size_t k = static_cast<std::size_t>(std::mismatch(g.tokens.begin(), g.tokens.end(), theirs.begin(), theirs.end()).first - g.tokens.begin());
            if (k < theirs.size()) {
                const std::span<const float> row(ours.data() + k * static_cast<std::size_t>(m.config.vocab_size), static_cast<std::size_t>(m.config.vocab_size));
                std::printf("first different token: %zu; there specdec's logit for llama.cpp's token %d is %.3g below its best (%d)\n", k,
                            theirs[k], static_cast<double>(row[static_cast<std::size_t>(argmax(row))] - row[static_cast<std::size_t>(theirs[k])]), argmax(row));
            }
        }
        return prompt == their_prompt && g.tokens == theirs && argmax_diff == 0 ? 0 : 1;
    }
    if (mode == "same" && argc == 6) {
        GgufModel a = load_any(argv[2]), b = load_any(argv[3]);
        const std::vector<int> prompt = a.tokenizer->encode(argv[4]);
        if (b.tokenizer->encode(argv[4]) != prompt) throw std::runtime_error("the two tokenizers encode the prompt differently");
        CpuModel ma(a.config, std::move(a.weights)), mb(b.config, std::move(b.weights));
        const Generation g = autoregressive_generate(ma, prompt, GenerateOptions{.max_new_tokens = std::atoi(argv[5])});
        std::vector<int> tokens = prompt;
        tokens.insert(tokens.end(), g.tokens.begin(), g.tokens.end());
        ma.reset();
        const std::vector<float> la = step_logits(ma, tokens, prompt.size()), lb = step_logits(mb, tokens, prompt.size());
        compare_rows(la, lb, a.config.vocab_size);
        const bool same = la == lb;
        std::printf("%s logits (bit for bit) on %zu tokens\n", same ? "SAME" : "DIFFERENT", tokens.size());
        return same ? 0 : 1;
    }
    if ((mode == "tiny" || mode == "tiny-llama3" || mode == "tiny-qwen2" || mode == "tiny-qwen3" || mode == "tiny-yarn") &&
        argc == 3) {
        const std::string dir = argv[2];
        std::filesystem::create_directories(dir);
        const std::string corpus =
            "Once upon a time there was a little llama. The llama lived on a hill and ate grass every day. "
            "One day the llama met a fox, and the fox said: \"Where are you going, little llama?\" ";
        const Tokenizer tok = Tokenizer::train(corpus, 300);
        tok.save(dir + "/tokenizer.json");
        Config c;
        c.hidden_size = 64, c.intermediate_size = 128, c.num_hidden_layers = 2, c.num_attention_heads = 4;
        c.num_key_value_heads = 2, c.vocab_size = tok.vocab_size(), c.max_position_embeddings = 128;
        if (mode == "tiny-llama3") {
            // Heads of 32 (2 heads, 1 kv head): 16 frequencies, wavelengths 2 pi 500000^(j/16) = 6.3, 14.3, 32.4,
            // 73.5, ... A pretraining context of 40 keeps the first (< 40 / 4), puts the next two on the ramp
            // (< 40 / 1) and stretches the other 13 by 8: every branch of the llama3 rule.
            c.num_attention_heads = 2, c.num_key_value_heads = 1, c.rope_theta = 500000.0f, c.max_position_embeddings = 256;
            c.rope_scaling = RopeScaling{.type = RopeScalingType::kLlama3, .factor = 8.0f, .low_freq_factor = 1.0f,
                                         .high_freq_factor = 4.0f, .original_max_position_embeddings = 40};
        }
        if (mode == "tiny-qwen2") c.qkv_bias = true, c.rope_theta = 1000000.0f;
        if (mode == "tiny-qwen3" || mode == "tiny-yarn") {  // heads of 32 (not 64 / 4 = 16): q is 128 rows, o_proj 128 columns
            c.qk_norm = true, c.attention_head_dim = 32, c.rope_theta = 1000000.0f, c.tie_word_embeddings = true;
        }
        if (mode == "tiny-yarn") {
            // 16 rotary pairs at theta 1e6 over a pretraining context of 4096: pair j turns 32 times or more
            // for j <= 3 (kept), once or less for j >= 8 (divided by 4), the ramp between: every YaRN band.
            c.max_position_embeddings = 16384;
            c.rope_scaling = RopeScaling{.type = RopeScalingType::kYarn, .factor = 4.0f, .original_max_position_embeddings = 4096};
            c.rope_scaling.attention_factor = static_cast<float>(detail::yarn_mscale(4.0));
        }
        Weights w = random_weights(c, 7, 0.25f);  // std 0.25: a peaked argmax; biases N(0, 0.25)
        detail::NormalStream normal{8};           // q/k norm gains 1 + N(0, 0.2): not the identity
        for (LayerWeights& l : w.layers)
            for (std::vector<float>* g : {&l.q_norm, &l.k_norm})
                for (float& v : *g) v = 1.0f + 0.2f * normal.next();
        save_checkpoint(dir, c, w, SaveFormat::kBF16);
        return 0;
    }
    std::fprintf(stderr,
                 "usage: gguf_interop export HF_DIR OUT.gguf [f32|f16|bf16|q8_0] | greedy MODEL PROMPT N |\n"
                 "       against MODEL PROMPT LLAMA_IDS LOGITS.f32 | same MODEL_A MODEL_B PROMPT N | tiny[-llama3|-qwen2|-qwen3|-yarn] HF_DIR\n");
    return 2;
} catch (const std::exception& e) {
    std::fprintf(stderr, "gguf_interop: %s\n", e.what());
    return 1;
}
