// specdec/detail/train/trainable_llama.hpp — a trainable Llama: forward with saved activations, backward, gradients.
// SPDX-License-Identifier: MIT
#pragma once

// TrainableLlama computes exactly CpuModel's function (same weights, same arithmetic in each layer;
// tests check the logits agree within 1e-4 under a causal mask) over a batch of B sequences of T
// tokens, keeps every activation its backward needs (llm.c's ActivationTensors), and accumulates
// parameter gradients into a Weights of the same shapes. The drafters of the papers use it without
// forking it, through three optional inputs and outputs:
//   - a mask per call (default causal): EDD's dual-block mask, GLIDE's block-wise training mask;
//   - input embeddings for chosen rows (token kEmbeddingInput): EDD feeds the target's hidden states
//     as a soft prompt in front of the token rows; their gradient comes back in input_embeddings_grad();
//   - hidden states of chosen layers (capture_hidden, HF numbering as CpuModel) with a gradient
//     input per captured layer (dhidden): EAGLE/FSPAD regress features with SmoothL1.
// Config::partial_alignment (FSPAD's PAD) doubles the last down_proj: its first half feeds the final
// norm and the LM head, its second half, through the same norm, is the captured final state L.
// Config::identity_end_norms (EAGLE's layer) skips layer 0's input norm and the final norm: identities
// in the forward, their gradients passed through unchanged in the backward.
//
// Use: forward(batch); add losses into dlogits()/dhidden() (cross_entropy() is the common one);
// backward(); optimizer step; zero_grad(). Backward adds into grads(), so several forward/backward
// pairs before one step accumulate gradients over micro-batches.
//
// Every layer call passes TrainOptions::reference on as `fast = !reference` (layers.hpp): the fast
// path runs the products on gemm.hpp's kernel, with each residual add inside the product that
// feeds it, and the steps between them on kernels.hpp; the reference path is the layers' plain loops.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../model/config.hpp"
#include "../core/error.hpp"
#include "../model/thread_pool.hpp"
#include "layers.hpp"
#include "../model/weights.hpp"

namespace specdec::train {

/// A token row whose input embedding comes from ModelInput::input_embeddings instead of embed_tokens.
constexpr int kEmbeddingInput = -1;

/// One batch of B sequences of T positions (N = B*T rows).
struct ModelInput {
    int B = 1;
    int T = 0;
    std::span<const int> tokens;                 // (B, T); kEmbeddingInput rows read input_embeddings
    std::span<const float> input_embeddings{};   // (B, T, D), read only where tokens == kEmbeddingInput
    std::span<const int> positions{};            // (B, T) RoPE positions; empty: 0..T-1 in every sequence
    std::span<const std::uint8_t> mask{};        // (T, T) shared or (B, T, T); 1 = row may attend column; empty: causal
};

/// What one decoder layer keeps for its backward. Rows are N = B*T.
struct LayerActivations {
    std::vector<float> attn_rstd;  // (N)        1/rms of the layer input
    std::vector<float> attn_in;    // (N, D)     input_layernorm output
    std::vector<float> q;          // (N, H*hd)  after RoPE
    std::vector<float> k;          // (N, Hkv*hd) after RoPE
    std::vector<float> v;          // (N, Hkv*hd)
    std::vector<float> probs;      // (B, H, T, T) attention weights
    std::vector<float> att;        // (N, H*hd)  attention output, before o_proj
    std::vector<float> x_mid;      // (N, D)     residual stream after attention
    std::vector<float> mlp_rstd;   // (N)
    std::vector<float> mlp_in;     // (N, D)     post_attention_layernorm output
    std::vector<float> gate;       // (N, F)     gate_proj output, before SiLU
    std::vector<float> up;         // (N, F)
    std::vector<float> act;        // (N, F)     silu(gate) · up, input of down_proj
};

struct TrainOptions {
    bool reference = false;  // the layers' plain loops (products through matmul): the oracle of the fast path
};

/// `layers` if each is a hidden state of `cfg` (0 = embeddings .. L = the final normed state), else an error naming it.
inline std::vector<int> checked_hidden_layers(std::vector<int> layers, const Config& cfg) {
    for (int l : layers)
        detail::require(l >= 0 && l <= cfg.num_hidden_layers, "train", [&] {
            return "capture_hidden: layer " + std::to_string(l) + " is outside [0, " + std::to_string(cfg.num_hidden_layers) + "]";
        });
    return layers;
}

/// Refuses a batch that does not fit the model `cfg`, naming the value: sizes, tokens, positions, the mask,
/// and soft-prompt rows without their embeddings (unless they come another way: `embeddings_elsewhere`).
inline void check_model_input(const ModelInput& in, const Config& cfg, bool embeddings_elsewhere = false) {
    const std::size_t N = static_cast<std::size_t>(in.B) * in.T;
    detail::require(in.B > 0 && in.T > 0, "train", [&] {
        return "forward: batch B = " + std::to_string(in.B) + ", T = " + std::to_string(in.T) +
               ", both must be > 0";
    });
    detail::require(in.tokens.size() == N, "train", [&] {
        return "forward: " + std::to_string(in.tokens.size()) + " tokens, expected B*T = " + std::to_string(N);
    });
    detail::require(in.positions.empty() || in.positions.size() == N, "train", [&] {
        return "forward: " + std::to_string(in.positions.size()) +
               " positions, expected B*T = " + std::to_string(N);
    });
    const std::size_t tt = static_cast<std::size_t>(in.T) * in.T;
    detail::require(in.mask.empty() || in.mask.size() == tt || in.mask.size() == N * in.T, "train", [&] {
        return "forward: mask of " + std::to_string(in.mask.size()) + " entries, expected (T, T) = " +
               std::to_string(tt) + " or (B, T, T) = " + std::to_string(N * in.T);
    });
    bool needs_embeddings = false;
    for (std::size_t i = 0; i < N; ++i) {
        detail::require(
            in.tokens[i] == kEmbeddingInput || (in.tokens[i] >= 0 && in.tokens[i] < cfg.vocab_size), "train", [&] {
                return "forward: token " + std::to_string(in.tokens[i]) + " at row " + std::to_string(i) +
                       " is outside [0, " + std::to_string(cfg.vocab_size) + ") and is not kEmbeddingInput (-1)";
            });
        needs_embeddings |= in.tokens[i] == kEmbeddingInput;
    }
    detail::require(!needs_embeddings || embeddings_elsewhere || in.input_embeddings.size() == N * cfg.hidden_size, "train", [&] {
        return "forward: rows with token kEmbeddingInput need input_embeddings (B, T, D) = " +
               std::to_string(N * cfg.hidden_size) + " floats, got " + std::to_string(in.input_embeddings.size());
    });
    for (std::size_t i = 0; i < in.positions.size(); ++i)
        detail::require(in.positions[i] >= 0 && in.positions[i] < cfg.max_position_embeddings, "train", [&] {
            return "forward: position " + std::to_string(in.positions[i]) + " at row " + std::to_string(i) +
                   " is outside [0, max_position_embeddings " + std::to_string(cfg.max_position_embeddings) + ")";
        });
}

class TrainableLlama {
public:
    /// The pool is the caller's and must outlive the model (every layer runs on it).
    TrainableLlama(Config config, Weights initial, ThreadPool& pool, TrainOptions options = {})
        : cfg_(config), params_(std::move(initial)), pool_(&pool), fast_(!options.reference) {
        cfg_.validate();
        detail::require_llama_block(cfg_, "train", "TrainableLlama");
        validate(params_, cfg_);
        grads_ = params_;
        zero_grad();
    }

    const Config& config() const { return cfg_; }
    TrainOptions options() const { return {.reference = !fast_}; }
    ThreadPool& pool() { return *pool_; }
    Weights& params() { return params_; }
    const Weights& params() const { return params_; }
    Weights& grads() { return grads_; }
    const Weights& grads() const { return grads_; }

    void zero_grad() {
        for_each_tensor(grads_, cfg_, [&](const std::string&, std::vector<float>& t, std::size_t) {
            detail::fill(*pool_, t, 0.0f);
        });
    }

    /// Hidden states the next forwards keep, CpuModel's numbering: 0 = embeddings, l = output of
    /// layer l, L = the final normed state (the LM head's input).
    void capture_hidden(std::vector<int> layers) { hidden_layers_ = checked_hidden_layers(std::move(layers), cfg_); }

    // ---- forward ----------------------------------------------------------------------------------

    /// Runs the model over the batch, keeps the activations, and zeroes dlogits and dhidden.
    void forward(const ModelInput& in) {
        check_input(in);
        resize(in.B, in.T);
        set_positions_and_mask(in);
        embed(in);
        for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
            keep_hidden(l, resid_[l]);
            layer_forward(l);
        }
        const int N = rows(), D = cfg_.hidden_size;
        if (cfg_.identity_end_norms)
            detail::copy(*pool_, final_.data(), resid_.back().data(), final_.size());
        else
            rmsnorm_forward(*pool_, final_.data(), final_rstd_.data(), resid_.back().data(), params_.norm.data(), N, D,
                            cfg_.rms_norm_eps, fast_);
        if (cfg_.partial_alignment) {
            rmsnorm_forward(*pool_, feat_final_.data(), feat_rstd_.data(), resid_feat_.data(), params_.norm.data(), N, D,
                            cfg_.rms_norm_eps, fast_);
            keep_hidden(cfg_.num_hidden_layers, feat_final_);
        } else {
            keep_hidden(cfg_.num_hidden_layers, final_);
        }
        linear_forward(*pool_, logits_.data(), final_.data(), params_.output_matrix().data(), N, D, cfg_.vocab_size,
                       fast_);
        detail::fill(*pool_, dlogits_, 0.0f);
        for (auto& d : dhidden_) detail::fill(*pool_, d, 0.0f);
    }

    int batch_size() const { return B_; }
    int seq_len() const { return T_; }
    int rows() const { return B_ * T_; }

    std::span<const float> logits() const { return logits_; }  // (N, V)
    std::span<float> dlogits() { return dlogits_; }             // (N, V) losses add here
    /// (N, D) hidden state of the i-th captured layer, and its gradient input.
    std::span<const float> hidden(int i) const { return hidden_.at(checked_hidden(i)); }
    std::span<float> dhidden(int i) { return dhidden_.at(checked_hidden(i)); }
    /// (B, T, D) gradient of the loss with respect to input_embeddings, after backward (0 on token rows).
    std::span<const float> input_embeddings_grad() const { return dinput_; }

    /// The usual loss: mean next-token cross-entropy against targets (B, T) (kIgnoreIndex skips),
    /// added into dlogits with `weight`. Returns the mean.
    double cross_entropy(std::span<const int> targets, double weight = 1.0) {
        detail::require(static_cast<int>(targets.size()) == rows(), "train", [&] {
            return "cross_entropy: " + std::to_string(targets.size()) + " targets for " + std::to_string(rows()) +
                   " rows (B*T) of the last forward";
        });
        return train::cross_entropy(*pool_, dlogits_.data(), logits_.data(), targets.data(), rows(), cfg_.vocab_size,
                                    weight, fast_);
    }

    // ---- backward ---------------------------------------------------------------------------------

    /// Adds d(loss)/d(parameters) into grads() from what the losses put in dlogits() and dhidden().
    void backward() {
        const int N = rows(), D = cfg_.hidden_size, L = cfg_.num_hidden_layers;
        std::vector<float>& dout_matrix = cfg_.tie_word_embeddings ? grads_.embed : grads_.lm_head;
        detail::fill(*pool_, dfinal_, 0.0f);
        linear_backward(*pool_, dfinal_.data(), dout_matrix.data(), dlogits_.data(), final_.data(),
                        params_.output_matrix().data(), N, D, cfg_.vocab_size, scratch_, fast_);
        if (cfg_.partial_alignment) {
            // The captured state L is the feature branch: its gradient goes back through that branch's norm.
            detail::fill(*pool_, dres_feat_, 0.0f);
            detail::fill(*pool_, dfeat_final_, 0.0f);
            add_dhidden(L, dfeat_final_);
            rmsnorm_backward(*pool_, dres_feat_.data(), grads_.norm.data(), dfeat_final_.data(), resid_feat_.data(),
                             params_.norm.data(), feat_rstd_.data(), N, D, fast_);
        } else {
            add_dhidden(L, dfinal_);
        }
        if (cfg_.identity_end_norms) {
            detail::copy(*pool_, dres_.data(), dfinal_.data(), dres_.size());
        } else {
            detail::fill(*pool_, dres_, 0.0f);
            rmsnorm_backward(*pool_, dres_.data(), grads_.norm.data(), dfinal_.data(), resid_.back().data(),
                             params_.norm.data(), final_rstd_.data(), N, D, fast_);
        }
        for (int l = L - 1; l >= 0; --l) {
            layer_backward(l);  // dres_: gradient of resid_[l + 1] -> of resid_[l]
            add_dhidden(l, dres_);
        }
        embed_backward();
    }

private:
    // ---- forward steps ----------------------------------------------------------------------------

    void check_input(const ModelInput& in) const { check_model_input(in, cfg_); }

    void resize(int B, int T) {
        const std::size_t N = static_cast<std::size_t>(B) * T, D = cfg_.hidden_size, F = cfg_.intermediate_size;
        const std::size_t qd = static_cast<std::size_t>(cfg_.num_attention_heads) * cfg_.head_dim(),
                          kvd = cfg_.kv_dim();
        const std::size_t L = cfg_.num_hidden_layers, V = cfg_.vocab_size;
        B_ = B;
        T_ = T;
        resid_.resize(L + 1);
        for (auto& r : resid_) r.resize(N * D);
        acts_.resize(L);
        for (LayerActivations& a : acts_) {
            a.attn_rstd.resize(N);
            a.attn_in.resize(N * D);
            a.q.resize(N * qd);
            a.k.resize(N * kvd);
            a.v.resize(N * kvd);
            a.probs.resize(static_cast<std::size_t>(B) * cfg_.num_attention_heads * T * T);
            a.att.resize(N * qd);
            a.x_mid.resize(N * D);
            a.mlp_rstd.resize(N);
            a.mlp_in.resize(N * D);
            a.gate.resize(N * F);
            a.up.resize(N * F);
            a.act.resize(N * F);
        }
        final_rstd_.resize(N);
        final_.resize(N * D);
        if (cfg_.partial_alignment) {
            mlp_out_.resize(N * 2 * D);
            resid_feat_.resize(N * D);
            feat_rstd_.resize(N);
            feat_final_.resize(N * D);
            dfeat_final_.resize(N * D);
            dres_feat_.resize(N * D);
        }
        logits_.resize(N * V);
        dlogits_.resize(N * V);
        hidden_.assign(hidden_layers_.size(), std::vector<float>(N * D));
        dhidden_.assign(hidden_layers_.size(), std::vector<float>(N * D));
        dinput_.assign(N * D, 0.0f);
        dfinal_.resize(N * D);
        dres_.resize(N * D);
        d_att_.resize(N * qd);
        dq_.resize(N * qd);
        dk_.resize(N * kvd);
        dv_.resize(N * kvd);
        d_norm_in_.resize(N * D);
        d_act_.resize(N * F);
        d_gate_.resize(N * F);
        d_up_.resize(N * F);
    }

    void set_positions_and_mask(const ModelInput& in) {
        tokens_.assign(in.tokens.begin(), in.tokens.end());
        std::vector<int> positions(in.positions.begin(), in.positions.end());
        if (in.positions.empty()) {
            positions.resize(tokens_.size());
            for (std::size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int>(i % in.T);
        }
        // The table costs a sine and a cosine per row and rotation pair: kept while the positions are
        // the same (every training step of a run).
        if (positions != positions_ || rope_.forward.empty()) {
            positions_ = std::move(positions);
            rope_ = rope_table(positions_, rope_inverse_frequencies(cfg_), rope_attention_factor(cfg_));  // as CpuModel: head_dim, rope_scaling
        }
        if (in.mask.empty()) {
            mask_ = causal_mask(in.T, in.T);
            mask_per_sequence_ = false;
        } else {
            mask_.assign(in.mask.begin(), in.mask.end());
            mask_per_sequence_ = in.mask.size() != static_cast<std::size_t>(in.T) * in.T;
        }
    }

    void embed(const ModelInput& in) {
        const int N = rows(), D = cfg_.hidden_size;
        embedding_forward(resid_[0].data(), tokens_.data(), params_.embed.data(), N, D, cfg_.vocab_size);
        for (int i = 0; i < N; ++i)
            if (tokens_[i] == kEmbeddingInput)
                std::copy_n(in.input_embeddings.data() + static_cast<std::size_t>(i) * D, D,
                            resid_[0].data() + static_cast<std::size_t>(i) * D);
    }

    AttentionShape attention_shape() const {
        return {B_, T_, T_, cfg_.num_attention_heads, cfg_.num_key_value_heads, cfg_.head_dim()};
    }

    /// resid_[l + 1] = x_mid + mlp(x_mid), x_mid = resid_[l] + attention(resid_[l]).
    void layer_forward(int l) {
        const LayerWeights& w = params_.layers[l];
        LayerActivations& a = acts_[l];
        const int N = rows(), D = cfg_.hidden_size, F = cfg_.intermediate_size, hd = cfg_.head_dim();
        const int H = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads, qd = H * hd, kvd = cfg_.kv_dim();
        const float* x = resid_[l].data();
        float* out = resid_[l + 1].data();

        const float eps = cfg_.rms_norm_eps;
        if (l == 0 && cfg_.identity_end_norms)
            detail::copy(*pool_, a.attn_in.data(), x, a.attn_in.size());
        else
            rmsnorm_forward(*pool_, a.attn_in.data(), a.attn_rstd.data(), x, w.attn_norm.data(), N, D, eps, fast_);
        linear_forward(*pool_, a.q.data(), a.attn_in.data(), w.wq.data(), N, D, qd, fast_);
        linear_forward(*pool_, a.k.data(), a.attn_in.data(), w.wk.data(), N, D, kvd, fast_);
        linear_forward(*pool_, a.v.data(), a.attn_in.data(), w.wv.data(), N, D, kvd, fast_);
        rope_forward(*pool_, a.q.data(), rope_, N, H, hd, fast_);
        rope_forward(*pool_, a.k.data(), rope_, N, Hkv, hd, fast_);
        attention_forward(*pool_, a.att.data(), a.probs.data(), a.q.data(), a.k.data(), a.v.data(), attention_shape(),
                          AttentionMask{mask_.data(), mask_per_sequence_}, fast_);
        detail::copy(*pool_, a.x_mid.data(), x, a.x_mid.size());  // the residual; o_proj adds into it
        linear_forward_add(*pool_, a.x_mid.data(), a.att.data(), w.wo.data(), N, qd, D, fast_);

        rmsnorm_forward(*pool_, a.mlp_in.data(), a.mlp_rstd.data(), a.x_mid.data(), w.mlp_norm.data(), N, D, eps, fast_);
        linear_forward(*pool_, a.gate.data(), a.mlp_in.data(), w.w_gate.data(), N, D, F, fast_);
        linear_forward(*pool_, a.up.data(), a.mlp_in.data(), w.w_up.data(), N, D, F, fast_);
        swiglu_forward(*pool_, a.act.data(), a.gate.data(), a.up.data(), N, F, fast_);
        if (cfg_.down_rows(l) != D) {
            // PAD: both halves of the (2D, F) down_proj add to the same residual x_mid.
            linear_forward(*pool_, mlp_out_.data(), a.act.data(), w.w_down.data(), N, F, 2 * D, fast_);
            detail::parallel_rows(*pool_, N, [&](int r0, int r1) {
                for (std::size_t i = static_cast<std::size_t>(r0) * D; i < static_cast<std::size_t>(r1) * D; ++i) {
                    const std::size_t r = i / D, d = i % D;
                    out[i] = a.x_mid[i] + mlp_out_[r * 2 * D + d];
                    resid_feat_[i] = a.x_mid[i] + mlp_out_[r * 2 * D + D + d];
                }
            });
            return;
        }
        detail::copy(*pool_, out, a.x_mid.data(), a.x_mid.size());  // the residual; down_proj adds into it
        linear_forward_add(*pool_, out, a.act.data(), w.w_down.data(), N, F, D, fast_);
    }

    void keep_hidden(int layer, const std::vector<float>& state) {
        for (std::size_t i = 0; i < hidden_layers_.size(); ++i)
            if (hidden_layers_[i] == layer) hidden_[i] = state;
    }

    // ---- backward steps ---------------------------------------------------------------------------

    void add_dhidden(int layer, std::vector<float>& grad) {
        for (std::size_t i = 0; i < hidden_layers_.size(); ++i)
            if (hidden_layers_[i] == layer)
                for (std::size_t j = 0; j < grad.size(); ++j) grad[j] += dhidden_[i][j];
    }

    /// On entry dres_ is d(loss)/d(resid_[l + 1]); on exit d(loss)/d(resid_[l]). Each residual branch
    /// adds its input gradient on top of the skip connection's (the backward functions accumulate).
    void layer_backward(int l) {
        const LayerWeights& w = params_.layers[l];
        LayerWeights& g = grads_.layers[l];
        const LayerActivations& a = acts_[l];
        const int N = rows(), D = cfg_.hidden_size, F = cfg_.intermediate_size, hd = cfg_.head_dim();
        const int H = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads, qd = H * hd, kvd = cfg_.kv_dim();

        // MLP branch: dres_ becomes d(x_mid).
        const float* dmlp = dres_.data();
        if (cfg_.down_rows(l) != D) {
            // PAD: the (2D, F) down_proj's output gradient is [d token branch | d feature branch]; both
            // branches' skip connections reach x_mid.
            detail::parallel_rows(*pool_, N, [&](int r0, int r1) {
                for (std::size_t i = static_cast<std::size_t>(r0) * D; i < static_cast<std::size_t>(r1) * D; ++i) {
                    const std::size_t r = i / D, d = i % D;
                    mlp_out_[r * 2 * D + d] = dres_[i];
                    mlp_out_[r * 2 * D + D + d] = dres_feat_[i];
                    dres_[i] += dres_feat_[i];
                }
            });
            dmlp = mlp_out_.data();
        }
        detail::fill(*pool_, d_act_, 0.0f);
        linear_backward(*pool_, d_act_.data(), g.w_down.data(), dmlp, a.act.data(), w.w_down.data(), N, F,
                        cfg_.down_rows(l), scratch_, fast_);
        detail::fill(*pool_, d_gate_, 0.0f);
        detail::fill(*pool_, d_up_, 0.0f);
        swiglu_backward(*pool_, d_gate_.data(), d_up_.data(), d_act_.data(), a.gate.data(), a.up.data(), N, F, fast_);
        detail::fill(*pool_, d_norm_in_, 0.0f);
        linear_backward(*pool_, d_norm_in_.data(), g.w_gate.data(), d_gate_.data(), a.mlp_in.data(), w.w_gate.data(), N,
                        D, F, scratch_, fast_);
        linear_backward(*pool_, d_norm_in_.data(), g.w_up.data(), d_up_.data(), a.mlp_in.data(), w.w_up.data(), N, D, F,
                        scratch_, fast_);
        rmsnorm_backward(*pool_, dres_.data(), g.mlp_norm.data(), d_norm_in_.data(), a.x_mid.data(), w.mlp_norm.data(),
                         a.mlp_rstd.data(), N, D, fast_);

        // Attention branch: dres_ becomes d(resid_[l]).
        detail::fill(*pool_, d_att_, 0.0f);
        linear_backward(*pool_, d_att_.data(), g.wo.data(), dres_.data(), a.att.data(), w.wo.data(), N, qd, D,
                        scratch_, fast_);
        detail::fill(*pool_, dq_, 0.0f);
        detail::fill(*pool_, dk_, 0.0f);
        detail::fill(*pool_, dv_, 0.0f);
        attention_backward(*pool_, dq_.data(), dk_.data(), dv_.data(), d_att_.data(), a.probs.data(), a.q.data(),
                           a.k.data(), a.v.data(), attention_shape(), fast_);
        rope_backward(*pool_, dq_.data(), rope_, N, H, hd, fast_);
        rope_backward(*pool_, dk_.data(), rope_, N, Hkv, hd, fast_);
        detail::fill(*pool_, d_norm_in_, 0.0f);
        linear_backward(*pool_, d_norm_in_.data(), g.wq.data(), dq_.data(), a.attn_in.data(), w.wq.data(), N, D, qd,
                        scratch_, fast_);
        linear_backward(*pool_, d_norm_in_.data(), g.wk.data(), dk_.data(), a.attn_in.data(), w.wk.data(), N, D, kvd,
                        scratch_, fast_);
        linear_backward(*pool_, d_norm_in_.data(), g.wv.data(), dv_.data(), a.attn_in.data(), w.wv.data(), N, D, kvd,
                        scratch_, fast_);
        if (l == 0 && cfg_.identity_end_norms) {
            detail::parallel_rows(*pool_, N, [&](int r0, int r1) {
                for (std::size_t i = static_cast<std::size_t>(r0) * D; i < static_cast<std::size_t>(r1) * D; ++i)
                    dres_[i] += d_norm_in_[i];
            });
        } else {
            rmsnorm_backward(*pool_, dres_.data(), g.attn_norm.data(), d_norm_in_.data(), resid_[l].data(),
                             w.attn_norm.data(), a.attn_rstd.data(), N, D, fast_);
        }
    }

    /// Token rows scatter into embed_tokens' gradient (summed with the LM head's when tied); soft-prompt
    /// rows hand their gradient to the caller.
    void embed_backward() {
        const int N = rows(), D = cfg_.hidden_size;
        embedding_backward(*pool_, grads_.embed.data(), dres_.data(), tokens_.data(), N, D);
        for (int i = 0; i < N; ++i)
            if (tokens_[i] == kEmbeddingInput)
                std::copy_n(dres_.data() + static_cast<std::size_t>(i) * D, D,
                            dinput_.data() + static_cast<std::size_t>(i) * D);
    }

    int checked_hidden(int i) const {
        detail::require(i >= 0 && i < static_cast<int>(hidden_.size()), "train", [&] {
            return "hidden(" + std::to_string(i) + "): " + std::to_string(hidden_.size()) +
                   " layers captured in the last forward (see capture_hidden)";
        });
        return i;
    }

    Config cfg_;
    Weights params_;
    Weights grads_;  // same shapes as params_; backward adds into it
    ThreadPool* pool_;
    bool fast_ = true;  // !TrainOptions::reference
    int B_ = 0, T_ = 0;

    // Inputs of the last forward.
    std::vector<int> tokens_;                // (N)
    std::vector<int> positions_;             // (N)
    RopeTable rope_;                         // the rotations of positions_
    std::vector<std::uint8_t> mask_;         // (T, T) or (B, T, T)
    bool mask_per_sequence_ = false;
    std::vector<int> hidden_layers_;

    // Activations (llm.c's ActivationTensors).
    std::vector<std::vector<float>> resid_;  // (L + 1) x (N, D) residual stream: input of layer l, then the last output
    std::vector<LayerActivations> acts_;     // (L)
    std::vector<float> final_rstd_;          // (N)
    std::vector<float> final_;               // (N, D) model.norm output
    std::vector<float> logits_;              // (N, V)
    std::vector<std::vector<float>> hidden_; // per captured layer: (N, D)
    // partial_alignment only: the last down_proj's output (N, 2D) (its gradient in backward), the
    // feature branch's residual (N, D), its final-norm statistics and output, and their gradients.
    std::vector<float> mlp_out_, resid_feat_, feat_rstd_, feat_final_, dfeat_final_, dres_feat_;

    // Gradients of activations, reused by every layer.
    std::vector<float> dlogits_;                  // (N, V)
    std::vector<std::vector<float>> dhidden_;     // per captured layer: (N, D)
    std::vector<float> dinput_;                   // (N, D)
    std::vector<float> dfinal_, dres_;            // (N, D)
    std::vector<float> d_att_, dq_;               // (N, H*hd)
    std::vector<float> dk_, dv_;                  // (N, Hkv*hd)
    std::vector<float> d_norm_in_;                // (N, D)
    std::vector<float> d_act_, d_gate_, d_up_;    // (N, F)
    LinearScratch<float> scratch_;
};

// ---------------------------------------------------------------------------------------------------
// Model FLOPs

/// FLOPs per token of a forward over windows of T tokens under a causal mask, counting the matrix
/// products only: 2 per weight of every product (the LM head included; an untied embedding table is
/// gathered, not multiplied) and, per layer, 4·H·hd per visible key for the scores and the weighted
/// values, (T + 1) / 2 keys on average. A training step costs three times this (the backward does
/// two products per forward product): the 6N + attention of model FLOPs utilisation (PaLM, App. B,
/// whose attention term counts all T keys; here only the keys a causal mask leaves).
inline double forward_flops_per_token(const Config& c, int T) {
    const double D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size, L = c.num_hidden_layers;
    const double q = static_cast<double>(c.num_attention_heads) * c.head_dim(), kv = c.kv_dim();
    const double weights = L * (D * q + 2 * D * kv + q * D + 3 * D * F) + V * D;
    const double attention = L * 4.0 * q * (T + 1) / 2.0;
    return 2.0 * weights + attention;
}

}  // namespace specdec::train
