// specdec/detail/methods/glide_cape/train_glide.hpp — training GLIDE's drafter against a frozen target (block-wise mask).
// SPDX-License-Identifier: MIT
#pragma once

// GLIDE §4.1: the drafter is trained from scratch with next-token cross-entropy while the target stays
// frozen and only supplies its KV cache. Training sees the target's KV of every window position, so
// the inference-time KV delay is simulated by a block-wise cross-attention mask: windows are cut into
// blocks of L = 5 and a query in block b sees target rows of blocks 0..b-1 only. Self-attention stays
// causal. The vanilla drafter (glide_cross_attention = false) trains with the same code.
//
// TrainableGlide<Real> mirrors TrainableLlama (train/trainable_llama.hpp) layer for layer, with the cross-attention
// sub-layer between self-attention and the FFN; it is a template on the float type so that the
// gradient check runs in float64 (tests/test_glide.cpp). Use: target_kv(target, ...) for a batch;
// forward(batch); cross_entropy(targets); backward(); clip_grad_norm and AdamW (optimizer.hpp, over GlideWeights); zero_grad().
//
// Shape letters: B sequences, T positions, N = B*T rows, Tk target rows per sequence, D width, H/Hkv/hd
// the drafter's heads, Hc = h cross heads of d_k = hdc (the target's heads), Hkt the target's kv heads.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../../core/concepts.hpp"
#include "../../train/dataset.hpp"
#include "../../core/error.hpp"
#include "glide.hpp"
#include "../../train/optimizer.hpp"
#include "../../policies/proposers.hpp"
#include "../../model/thread_pool.hpp"
#include "../../train/layers.hpp"

namespace specdec::train {

// ---------------------------------------------------------------------------------------------------
// Cross-attention masks (Tq, Tk): 1 where query row j may see target row k

/// GLIDE's training mask (§4.1): query j sees target row k iff floor(k / L) < floor(j / L).
inline std::vector<std::uint8_t> glide_block_mask(int Tq, int Tk, int block_length) {
    detail::require(block_length > 0, "train", [&] {
        return "glide_block_mask: block_length must be > 0, got " + std::to_string(block_length);
    });
    std::vector<std::uint8_t> m(static_cast<std::size_t>(Tq) * Tk, 0);
    for (int j = 0; j < Tq; ++j)
        for (int k = 0; k < Tk; ++k) m[static_cast<std::size_t>(j) * Tk + k] = k / block_length < j / block_length;
    return m;
}

/// GlideModel's visibility: query j (at position j) sees target rows k < min(j, target_len).
inline std::vector<std::uint8_t> glide_inference_mask(int Tq, int Tk, int target_len) {
    std::vector<std::uint8_t> m(static_cast<std::size_t>(Tq) * Tk, 0);
    for (int j = 0; j < Tq; ++j)
        for (int k = 0; k < std::min({j, target_len, Tk}); ++k) m[static_cast<std::size_t>(j) * Tk + k] = 1;
    return m;
}

// ---------------------------------------------------------------------------------------------------
// The frozen target's keys and values

/// Per drafter layer m, the target's keys (RoPE applied) and values of layer N_T - N_D + m for a
/// batch: (B, Tk, Hkt*hdc) each.
template <class Real>
struct TargetKv {
    int B = 0, Tk = 0;
    std::vector<std::vector<Real>> k, v;  // (N_D) x (B, Tk, Hkt*hdc)
};

/// Runs the frozen target over each of B windows of T tokens (a chain from position 0) and keeps the
/// KV rows the drafter reads. The target's cache is reset before each window and after the last.
template <ExposesKV Target>
TargetKv<float> target_kv(Target& target, const GlideConfig& cfg, std::span<const int> tokens, int B, int T) {
    TargetKv<float> out{B, T, std::vector<std::vector<float>>(cfg.draft.num_hidden_layers),
                        std::vector<std::vector<float>>(cfg.draft.num_hidden_layers)};
    for (int b = 0; b < B; ++b) {
        target.reset();
        detail::prefill(target, tokens.subspan(static_cast<std::size_t>(b) * T, T), T);
        for (int m = 0; m < cfg.draft.num_hidden_layers; ++m) {
            const KvView kv = target.kv(cfg.target_layer(m));
            out.k[m].insert(out.k[m].end(), kv.k.begin(), kv.k.end());
            out.v[m].insert(out.v[m].end(), kv.v.begin(), kv.v.end());
        }
    }
    target.reset();
    return out;
}

// ---------------------------------------------------------------------------------------------------
// The trainable drafter

/// One batch: B sequences of T tokens at positions 0..T-1, and what the cross-attention reads.
template <class Real>
struct GlideBatch {
    int B = 1;
    int T = 0;
    std::span<const int> tokens;               // (B, T)
    const TargetKv<Real>* target = nullptr;       // needed with cross-attention
    std::span<const std::uint8_t> cross_mask;  // (T, Tk) shared by the batch: glide_block_mask for training
};

/// Throws naming the field and value when a batch does not fit the drafter: token count and range, T within
/// max_position_embeddings, and with cross-attention the target KV's batch, layer count and size and
/// the cross mask's size. TrainableGlide and DeviceGlide check their input with it.
template <class Real>
void check_glide_input(const GlideBatch<Real>& in, const GlideConfig& cfg) {
    detail::require(in.B > 0 && in.T > 0 && in.tokens.size() == static_cast<std::size_t>(in.B) * in.T, "train", [&] {
        return "glide forward: " + std::to_string(in.tokens.size()) + " tokens for B = " + std::to_string(in.B) +
               ", T = " + std::to_string(in.T) + " (expected B*T > 0)";
    });
    for (std::size_t i = 0; i < in.tokens.size(); ++i)
        detail::require(in.tokens[i] >= 0 && in.tokens[i] < cfg.draft.vocab_size, "train", [&] {
            return "glide forward: token " + std::to_string(in.tokens[i]) + " at row " + std::to_string(i) +
                   " is outside [0, " + std::to_string(cfg.draft.vocab_size) + ")";
        });
    detail::require(in.T <= cfg.draft.max_position_embeddings, "train", [&] {
        return "glide forward: T = " + std::to_string(in.T) + " exceeds max_position_embeddings " +
               std::to_string(cfg.draft.max_position_embeddings);
    });
    if (!cfg.glide_cross_attention) return;
    detail::require(in.target != nullptr, "train",
                    [] { return std::string("glide forward: cross-attention needs the target's KV (batch.target)"); });
    const TargetKv<Real>& kv = *in.target;
    const std::size_t want = static_cast<std::size_t>(in.B) * kv.Tk * cfg.glide_target_kv_heads * cfg.glide_cross_head_dim;
    detail::require(kv.B == in.B && static_cast<int>(kv.k.size()) == cfg.draft.num_hidden_layers &&
                        static_cast<int>(kv.v.size()) == cfg.draft.num_hidden_layers,
                    "train", [&] {
                        return "glide forward: target KV for B = " + std::to_string(kv.B) + " and " +
                               std::to_string(kv.k.size()) + " layers, expected B = " + std::to_string(in.B) +
                               " and N_D = " + std::to_string(cfg.draft.num_hidden_layers) + " layers";
                    });
    for (int m = 0; m < cfg.draft.num_hidden_layers; ++m)
        detail::require(kv.k[m].size() == want && kv.v[m].size() == want, "train", [&] {
            return "glide forward: target KV of layer " + std::to_string(m) + " has " + std::to_string(kv.k[m].size()) +
                   " keys, expected (B, Tk, glide_target_kv_heads * glide_cross_head_dim) = " + std::to_string(want);
        });
    detail::require(in.cross_mask.size() == static_cast<std::size_t>(in.T) * kv.Tk, "train", [&] {
        return "glide forward: cross mask of " + std::to_string(in.cross_mask.size()) + " entries, expected (T, Tk) = " +
               std::to_string(static_cast<std::size_t>(in.T) * kv.Tk);
    });
}

/// Throws unless `targets` holds one target per row of the last forward, each in [0, vocab) or the
/// ignore index (layers.hpp's cross_entropy, whose message it repeats for a device that cannot throw).
inline void check_glide_targets(std::span<const int> targets, int rows, int vocab) {
    detail::require(static_cast<int>(targets.size()) == rows, "train", [&] {
        return "cross_entropy: " + std::to_string(targets.size()) + " targets for " + std::to_string(rows) +
               " rows (B*T) of the last forward";
    });
    for (std::size_t r = 0; r < targets.size(); ++r)
        detail::require(targets[r] == kIgnoreIndex || (targets[r] >= 0 && targets[r] < vocab), "train", [&] {
            return "cross_entropy: target " + std::to_string(targets[r]) + " at row " + std::to_string(r) +
                   " is outside [0, " + std::to_string(vocab) + ") and is not the ignore index -1";
        });
}

/// What one drafter layer keeps for its backward. Rows are N = B*T.
template <class Real>
struct GlideLayerActivations {
    std::vector<Real> attn_rstd, attn_in;   // (N), (N, D)
    std::vector<Real> q, k, v;              // (N, H*hd), (N, Hkv*hd) x 2; q and k after RoPE
    std::vector<Real> probs;                // (B, H, T, T)
    std::vector<Real> att, x_attn;          // (N, H*hd) before o_proj; (N, D) residual after self-attention
    std::vector<Real> cross_rstd, cross_in; // (N), (N, D)
    std::vector<Real> cq;                   // (N, Hc*hdc) cross queries after RoPE
    std::vector<Real> cprobs;               // (B, Hc, T, Tk)
    std::vector<Real> catt, x_cross;        // (N, Hc*hdc) before o_proj; (N, D) residual after cross-attention
    std::vector<Real> mlp_rstd, mlp_in;     // (N), (N, D)
    std::vector<Real> gate, up, act;        // (N, F)
};

template <class Real>
class TrainableGlide {
public:
    /// The pool is the caller's and must outlive the model.
    TrainableGlide(GlideConfig config, GlideParams<Real> initial, ThreadPool& pool)
        : cfg_(std::move(config)), params_(std::move(initial)), pool_(&pool) {
        cfg_.validate();
        validate(params_, cfg_);
        grads_ = params_;
        zero_grad();
    }

    const GlideConfig& config() const { return cfg_; }
    GlideParams<Real>& params() { return params_; }
    const GlideParams<Real>& params() const { return params_; }
    GlideParams<Real>& grads() { return grads_; }
    const GlideParams<Real>& grads() const { return grads_; }

    void zero_grad() {
        for_each_tensor(grads_, cfg_, [&](const std::string&, std::vector<Real>& t, const auto&) {
            detail::fill(*pool_, t, Real(0));
        });
    }

    int rows() const { return B_ * T_; }
    std::span<const Real> logits() const { return logits_; }  // (N, V)
    std::span<Real> dlogits() { return dlogits_; }             // (N, V) losses add here

    /// Runs the drafter over the batch, keeps the activations, zeroes dlogits.
    void forward(const GlideBatch<Real>& in) {
        check_glide_input(in, cfg_);
        resize(in);
        const Config& c = cfg_.draft;
        const int N = rows(), D = c.hidden_size;
        embedding_forward(resid_[0].data(), tokens_.data(), params_.embed.data(), N, D, c.vocab_size);
        for (int m = 0; m < c.num_hidden_layers; ++m) layer_forward(m);
        rmsnorm_forward(*pool_, final_.data(), final_rstd_.data(), resid_.back().data(), params_.norm.data(), N, D,
                        c.rms_norm_eps);
        linear_forward(*pool_, logits_.data(), final_.data(), params_.output_matrix().data(), N, D, c.vocab_size);
        detail::fill(*pool_, dlogits_, Real(0));
    }

    /// Mean next-token cross-entropy against targets (B, T), added into dlogits with `weight`.
    double cross_entropy(std::span<const int> targets, double weight = 1.0) {
        check_glide_targets(targets, rows(), cfg_.draft.vocab_size);
        return train::cross_entropy(*pool_, dlogits_.data(), logits_.data(), targets.data(), rows(),
                                    cfg_.draft.vocab_size, weight);
    }

    /// Adds d(loss)/d(parameters) into grads() from dlogits(). Nothing flows into the target's KV.
    void backward() {
        const Config& c = cfg_.draft;
        const int N = rows(), D = c.hidden_size;
        std::vector<Real>& dout_matrix = c.tie_word_embeddings ? grads_.embed : grads_.lm_head;
        detail::fill(*pool_, dfinal_, Real(0));
        linear_backward(*pool_, dfinal_.data(), dout_matrix.data(), dlogits_.data(), final_.data(),
                        params_.output_matrix().data(), N, D, c.vocab_size, scratch_);
        detail::fill(*pool_, dres_, Real(0));
        rmsnorm_backward(*pool_, dres_.data(), grads_.norm.data(), dfinal_.data(), resid_.back().data(),
                         params_.norm.data(), final_rstd_.data(), N, D);
        for (int m = c.num_hidden_layers - 1; m >= 0; --m) layer_backward(m);
        embedding_backward(*pool_, grads_.embed.data(), dres_.data(), tokens_.data(), N, D);
    }

private:
    void resize(const GlideBatch<Real>& in) {
        const Config& c = cfg_.draft;
        B_ = in.B;
        T_ = in.T;
        Tk_ = in.target != nullptr ? in.target->Tk : 0;
        target_ = in.target;
        tokens_.assign(in.tokens.begin(), in.tokens.end());
        positions_.resize(tokens_.size());
        for (std::size_t i = 0; i < positions_.size(); ++i) positions_[i] = static_cast<int>(i % in.T);
        self_rope_ = rope_table(positions_, rope_inverse_frequencies(c), rope_attention_factor(c));
        if (const Config cr = cfg_.cross_rope(); cfg_.glide_cross_attention)  // the target's rotation, scaling included
            cross_rope_ = rope_table(positions_, rope_inverse_frequencies(cr), rope_attention_factor(cr));
        self_mask_ = causal_mask(in.T, in.T);
        cross_mask_.assign(in.cross_mask.begin(), in.cross_mask.end());

        const std::size_t N = static_cast<std::size_t>(B_) * T_, D = c.hidden_size, F = c.intermediate_size;
        const std::size_t qd = static_cast<std::size_t>(c.num_attention_heads) * c.head_dim(), kvd = c.kv_dim();
        const std::size_t cq = cfg_.cross_dim(), Hc = cfg_.glide_cross_heads, V = c.vocab_size;
        const bool cross = cfg_.glide_cross_attention;
        resid_.resize(c.num_hidden_layers + 1);
        for (auto& r : resid_) r.resize(N * D);
        acts_.resize(c.num_hidden_layers);
        for (GlideLayerActivations<Real>& a : acts_) {
            a.attn_rstd.resize(N), a.attn_in.resize(N * D);
            a.q.resize(N * qd), a.k.resize(N * kvd), a.v.resize(N * kvd);
            a.probs.resize(static_cast<std::size_t>(B_) * c.num_attention_heads * T_ * T_);
            a.att.resize(N * qd), a.x_attn.resize(N * D);
            if (cross) {
                a.cross_rstd.resize(N), a.cross_in.resize(N * D), a.cq.resize(N * cq);
                a.cprobs.resize(static_cast<std::size_t>(B_) * Hc * T_ * Tk_);
                a.catt.resize(N * cq), a.x_cross.resize(N * D);
            }
            a.mlp_rstd.resize(N), a.mlp_in.resize(N * D);
            a.gate.resize(N * F), a.up.resize(N * F), a.act.resize(N * F);
        }
        final_rstd_.resize(N), final_.resize(N * D);
        logits_.resize(N * V), dlogits_.resize(N * V);
        dfinal_.resize(N * D), dres_.resize(N * D), d_norm_in_.resize(N * D);
        d_att_.resize(N * qd), dq_.resize(N * qd), dk_.resize(N * kvd), dv_.resize(N * kvd);
        if (cross) {
            d_catt_.resize(N * cq), dcq_.resize(N * cq);
            const std::size_t target_rows = static_cast<std::size_t>(B_) * Tk_ * cfg_.glide_target_kv_heads * cfg_.glide_cross_head_dim;
            d_target_k_.resize(target_rows), d_target_v_.resize(target_rows);
        }
        d_act_.resize(N * F), d_gate_.resize(N * F), d_up_.resize(N * F);
    }

    AttentionShape self_shape() const {
        const Config& c = cfg_.draft;
        return {B_, T_, T_, c.num_attention_heads, c.num_key_value_heads, c.head_dim()};
    }
    AttentionShape cross_shape() const {
        return {B_, T_, Tk_, cfg_.glide_cross_heads, cfg_.glide_target_kv_heads, cfg_.glide_cross_head_dim};
    }

    /// The residual after the self- and cross-attention sub-layers: the FFN's input.
    const std::vector<Real>& ffn_input(const GlideLayerActivations<Real>& a) const {
        return cfg_.glide_cross_attention ? a.x_cross : a.x_attn;
    }

    /// resid_[m + 1] = FFN sub-layer(cross sub-layer(self sub-layer(resid_[m]))), each x + f(norm(x)).
    void layer_forward(int m) {
        const GlideLayer<Real>& w = params_.layers[m];
        GlideLayerActivations<Real>& a = acts_[m];
        const Config& c = cfg_.draft;
        const int N = rows(), D = c.hidden_size, F = c.intermediate_size, hd = c.head_dim();
        const int H = c.num_attention_heads, Hkv = c.num_key_value_heads, qd = H * hd, kvd = c.kv_dim();
        const float eps = c.rms_norm_eps;
        const Real* x = resid_[m].data();

        // Self-attention, causal.
        rmsnorm_forward(*pool_, a.attn_in.data(), a.attn_rstd.data(), x, w.attn_norm.data(), N, D, eps);
        linear_forward(*pool_, a.q.data(), a.attn_in.data(), w.wq.data(), N, D, qd);
        linear_forward(*pool_, a.k.data(), a.attn_in.data(), w.wk.data(), N, D, kvd);
        linear_forward(*pool_, a.v.data(), a.attn_in.data(), w.wv.data(), N, D, kvd);
        rope_forward(*pool_, a.q.data(), self_rope_, N, H, hd);
        rope_forward(*pool_, a.k.data(), self_rope_, N, Hkv, hd);
        attention_forward(*pool_, a.att.data(), a.probs.data(), a.q.data(), a.k.data(), a.v.data(), self_shape(),
                          AttentionMask{self_mask_.data()});
        detail::copy(*pool_, a.x_attn.data(), x, a.x_attn.size());  // the residual; o_proj adds into it
        linear_forward_add(*pool_, a.x_attn.data(), a.att.data(), w.wo.data(), N, qd, D);

        // Cross-attention (GLIDE §4.1): queries at the drafter's positions, rotated like the target's
        // keys; keys and values are the target's layer N_T - N_D + m, masked block-wise.
        if (cfg_.glide_cross_attention) {
            const int cq = cfg_.cross_dim();
            rmsnorm_forward(*pool_, a.cross_in.data(), a.cross_rstd.data(), a.x_attn.data(), w.cross_norm.data(), N, D, eps);
            linear_forward(*pool_, a.cq.data(), a.cross_in.data(), w.cross_wq.data(), N, D, cq);
            rope_forward(*pool_, a.cq.data(), cross_rope_, N, cfg_.glide_cross_heads, cfg_.glide_cross_head_dim);
            attention_forward(*pool_, a.catt.data(), a.cprobs.data(), a.cq.data(), target_->k[m].data(),
                              target_->v[m].data(), cross_shape(), AttentionMask{cross_mask_.data()});
            detail::copy(*pool_, a.x_cross.data(), a.x_attn.data(), a.x_attn.size());  // the residual; the cross o_proj adds into it
            linear_forward_add(*pool_, a.x_cross.data(), a.catt.data(), w.cross_wo.data(), N, cq, D);
        }

        // SwiGLU.
        const Real* h = ffn_input(a).data();
        Real* out = resid_[m + 1].data();
        rmsnorm_forward(*pool_, a.mlp_in.data(), a.mlp_rstd.data(), h, w.mlp_norm.data(), N, D, eps);
        linear_forward(*pool_, a.gate.data(), a.mlp_in.data(), w.w_gate.data(), N, D, F);
        linear_forward(*pool_, a.up.data(), a.mlp_in.data(), w.w_up.data(), N, D, F);
        swiglu_forward(*pool_, a.act.data(), a.gate.data(), a.up.data(), N, F);
        detail::copy(*pool_, out, h, static_cast<std::size_t>(N) * D);  // the residual; down_proj adds into it
        linear_forward_add(*pool_, out, a.act.data(), w.w_down.data(), N, F, D);
    }

    /// On entry dres_ is d(loss)/d(resid_[m + 1]); on exit d(loss)/d(resid_[m]). Each branch adds its
    /// input gradient on top of the skip connection's (the backward functions accumulate).
    void layer_backward(int m) {
        const GlideLayer<Real>& w = params_.layers[m];
        GlideLayer<Real>& g = grads_.layers[m];
        const GlideLayerActivations<Real>& a = acts_[m];
        const Config& c = cfg_.draft;
        const int N = rows(), D = c.hidden_size, F = c.intermediate_size, hd = c.head_dim();
        const int H = c.num_attention_heads, Hkv = c.num_key_value_heads, qd = H * hd, kvd = c.kv_dim();
        const auto zero = [&](std::vector<Real>& v) { detail::fill(*pool_, v, Real(0)); };

        // SwiGLU branch: dres_ becomes d(FFN input).
        zero(d_act_);
        linear_backward(*pool_, d_act_.data(), g.w_down.data(), dres_.data(), a.act.data(), w.w_down.data(), N, F, D,
                        scratch_);
        zero(d_gate_), zero(d_up_);
        swiglu_backward(*pool_, d_gate_.data(), d_up_.data(), d_act_.data(), a.gate.data(), a.up.data(), N, F);
        zero(d_norm_in_);
        linear_backward(*pool_, d_norm_in_.data(), g.w_gate.data(), d_gate_.data(), a.mlp_in.data(), w.w_gate.data(), N,
                        D, F, scratch_);
        linear_backward(*pool_, d_norm_in_.data(), g.w_up.data(), d_up_.data(), a.mlp_in.data(), w.w_up.data(), N, D, F,
                        scratch_);
        rmsnorm_backward(*pool_, dres_.data(), g.mlp_norm.data(), d_norm_in_.data(), ffn_input(a).data(),
                         w.mlp_norm.data(), a.mlp_rstd.data(), N, D);

        // Cross-attention branch: dres_ becomes d(x_attn). The target's KV gets a gradient in
        // d_target_k_/d_target_v_ that is dropped: the target is frozen.
        if (cfg_.glide_cross_attention) {
            const int cq = cfg_.cross_dim();
            zero(d_catt_);
            linear_backward(*pool_, d_catt_.data(), g.cross_wo.data(), dres_.data(), a.catt.data(), w.cross_wo.data(), N,
                            cq, D, scratch_);
            zero(dcq_), zero(d_target_k_), zero(d_target_v_);
            attention_backward(*pool_, dcq_.data(), d_target_k_.data(), d_target_v_.data(), d_catt_.data(),
                               a.cprobs.data(), a.cq.data(), target_->k[m].data(), target_->v[m].data(), cross_shape());
            rope_backward(*pool_, dcq_.data(), cross_rope_, N, cfg_.glide_cross_heads, cfg_.glide_cross_head_dim);
            zero(d_norm_in_);
            linear_backward(*pool_, d_norm_in_.data(), g.cross_wq.data(), dcq_.data(), a.cross_in.data(),
                            w.cross_wq.data(), N, D, cq, scratch_);
            rmsnorm_backward(*pool_, dres_.data(), g.cross_norm.data(), d_norm_in_.data(), a.x_attn.data(),
                             w.cross_norm.data(), a.cross_rstd.data(), N, D);
        }

        // Self-attention branch: dres_ becomes d(resid_[m]).
        zero(d_att_);
        linear_backward(*pool_, d_att_.data(), g.wo.data(), dres_.data(), a.att.data(), w.wo.data(), N, qd, D, scratch_);
        zero(dq_), zero(dk_), zero(dv_);
        attention_backward(*pool_, dq_.data(), dk_.data(), dv_.data(), d_att_.data(), a.probs.data(), a.q.data(),
                           a.k.data(), a.v.data(), self_shape());
        rope_backward(*pool_, dq_.data(), self_rope_, N, H, hd);
        rope_backward(*pool_, dk_.data(), self_rope_, N, Hkv, hd);
        zero(d_norm_in_);
        linear_backward(*pool_, d_norm_in_.data(), g.wq.data(), dq_.data(), a.attn_in.data(), w.wq.data(), N, D, qd,
                        scratch_);
        linear_backward(*pool_, d_norm_in_.data(), g.wk.data(), dk_.data(), a.attn_in.data(), w.wk.data(), N, D, kvd,
                        scratch_);
        linear_backward(*pool_, d_norm_in_.data(), g.wv.data(), dv_.data(), a.attn_in.data(), w.wv.data(), N, D, kvd,
                        scratch_);
        rmsnorm_backward(*pool_, dres_.data(), g.attn_norm.data(), d_norm_in_.data(), resid_[m].data(),
                         w.attn_norm.data(), a.attn_rstd.data(), N, D);
    }

    GlideConfig cfg_;
    GlideParams<Real> params_;
    GlideParams<Real> grads_;  // same shapes as params_; backward adds into it
    ThreadPool* pool_;
    int B_ = 0, T_ = 0, Tk_ = 0;

    // Inputs of the last forward.
    std::vector<int> tokens_, positions_;   // (N)
    RopeTable self_rope_, cross_rope_;      // the rotations of positions_: the drafter's, the target's
    std::vector<std::uint8_t> self_mask_;   // (T, T) causal
    std::vector<std::uint8_t> cross_mask_;  // (T, Tk)
    const TargetKv<Real>* target_ = nullptr;   // the caller's; must live until backward()

    // Activations.
    std::vector<std::vector<Real>> resid_;            // (N_D + 1) x (N, D)
    std::vector<GlideLayerActivations<Real>> acts_;   // (N_D)
    std::vector<Real> final_rstd_, final_;            // (N), (N, D)
    std::vector<Real> logits_;                        // (N, V)

    // Gradients of activations, reused by every layer.
    std::vector<Real> dlogits_;                       // (N, V)
    std::vector<Real> dfinal_, dres_, d_norm_in_;     // (N, D)
    std::vector<Real> d_att_, dq_;                    // (N, H*hd)
    std::vector<Real> dk_, dv_;                       // (N, Hkv*hd)
    std::vector<Real> d_catt_, dcq_;                  // (N, Hc*hdc)
    std::vector<Real> d_target_k_, d_target_v_;       // (B, Tk, Hkt*hdc) computed, then dropped
    std::vector<Real> d_act_, d_gate_, d_up_;         // (N, F)
    LinearScratch<Real> scratch_;
};

// ---------------------------------------------------------------------------------------------------
// Conversions, optimizer and clipping over a drafter's tensors

/// The same parameters in another float type (the float64 gradient check starts from float weights).
template <class U, class Real>
GlideParams<U> params_cast(const GlideParams<Real>& p, const GlideConfig& c) {
    std::vector<const std::vector<Real>*> src;
    for_each_tensor(p, c, [&](const std::string&, const std::vector<Real>& t, const auto&) { src.push_back(&t); });
    GlideParams<U> out;
    out.layers.resize(p.layers.size());
    std::size_t i = 0;
    for_each_tensor(out, c, [&](const std::string&, std::vector<U>& t, const auto&) {
        t.assign(src[i]->begin(), src[i]->end());
        ++i;
    });
    return out;
}

// ---------------------------------------------------------------------------------------------------
// One batch, and evaluation

/// Forward (and backward when asked) of the drafter on a batch of windows: the frozen target's KV
/// first (skipped without cross-attention), then the mean next-token cross-entropy. Returns the loss.
template <ExposesKV Target>
double glide_batch(TrainableGlide<float>& model, Target& target, const WindowBatch& w,
                   std::span<const std::uint8_t> cross_mask, bool with_backward) {
    TargetKv<float> kv;
    if (model.config().glide_cross_attention) kv = target_kv(target, model.config(), w.inputs, w.B, w.T);
    model.forward(GlideBatch<float>{.B = w.B, .T = w.T, .tokens = w.inputs, .target = &kv, .cross_mask = cross_mask});
    const double loss = model.cross_entropy(w.targets, with_backward ? 1.0 : 0.0);
    if (with_backward) model.backward();
    return loss;
}

/// Mean loss over `n_windows` evenly spaced windows of the range, B at a time, under `cross_mask`
/// (T, T) (dataset.hpp's evaluate for a GLIDE drafter). Leaves parameters and gradients alone.
template <ExposesKV Target>
EvalResult evaluate_glide(TrainableGlide<float>& model, Target& target, const TokenFile& file, TokenRange range, int T,
                          int n_windows, int B, std::span<const std::uint8_t> cross_mask) {
    return evaluate_windows(file, range, T, n_windows, B,
                            [&](const WindowBatch& w) { return glide_batch(model, target, w, cross_mask, false); });
}

}  // namespace specdec::train
