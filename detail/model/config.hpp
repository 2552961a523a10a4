// specdec/detail/model/config.hpp — the model's shape, field for field a HuggingFace LlamaConfig.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <string>

#include "../core/error.hpp"

namespace specdec {

/// Shape letters used on every buffer: L layers, D = hidden_size, F = intermediate_size, H heads,
/// Hkv kv-heads, hd = D / H, V vocab, N tree nodes, T committed tokens, C cache capacity.
/// Field names are HF's, so config.json maps 1:1 (use designated initialisers).
struct Config {
    int hidden_size = 288;                // D
    int intermediate_size = 768;          // F (SwiGLU width)
    int num_hidden_layers = 6;            // L
    int num_attention_heads = 6;          // H
    int num_key_value_heads = 6;          // Hkv; < H is grouped-query attention
    int vocab_size = 32000;               // V
    float rope_theta = 10000.0f;          // RoPE base
    float rms_norm_eps = 1e-5f;           // RMSNorm epsilon
    int max_position_embeddings = 2048;   // longest committed sequence
    bool tie_word_embeddings = false;     // lm_head shares embed_tokens

    int head_dim() const { return hidden_size / num_attention_heads; }
    int kv_dim() const { return num_key_value_heads * head_dim(); }

    /// Throws naming the field and value when the shape cannot work.
    void validate() const {
        const auto positive = [](int v, const char* field) {
            detail::require(v > 0, "config", [&] { return std::string(field) + " must be > 0, got " + std::to_string(v); });
        };
        positive(hidden_size, "hidden_size");
        positive(intermediate_size, "intermediate_size");
        positive(num_hidden_layers, "num_hidden_layers");
        positive(num_attention_heads, "num_attention_heads");
        positive(num_key_value_heads, "num_key_value_heads");
        positive(vocab_size, "vocab_size");
        positive(max_position_embeddings, "max_position_embeddings");
        detail::require(hidden_size % num_attention_heads == 0, "config", [&] {
            return "hidden_size " + std::to_string(hidden_size) + " is not a multiple of num_attention_heads " +
                   std::to_string(num_attention_heads);
        });
        detail::require(head_dim() % 2 == 0, "config",
                        [&] { return "head_dim " + std::to_string(head_dim()) + " must be even for RoPE"; });
        detail::require(num_attention_heads % num_key_value_heads == 0, "config", [&] {
            return "num_attention_heads " + std::to_string(num_attention_heads) +
                   " is not a multiple of num_key_value_heads " + std::to_string(num_key_value_heads);
        });
        detail::require(std::isfinite(rope_theta) && rope_theta > 0.0f, "config",
                        [&] { return "rope_theta must be > 0, got " + std::to_string(rope_theta); });
        detail::require(std::isfinite(rms_norm_eps) && rms_norm_eps > 0.0f, "config",
                        [&] { return "rms_norm_eps must be > 0, got " + std::to_string(rms_norm_eps); });
    }
};

}  // namespace specdec
