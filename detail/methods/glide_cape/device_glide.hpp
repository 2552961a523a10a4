// specdec/detail/methods/glide_cape/device_glide.hpp — GLIDE's drafter trained on a device (the GPU): TrainableGlide's forward and backward over a Device.
// SPDX-License-Identifier: MIT
#pragma once

// glide-cape.txt §4.1: a Llama drafter whose every layer has a cross-attention sub-layer between
// self-attention and the FFN, reading the frozen target's K/V of layer N_T - N_D + m under the block-wise
// mask, trained with next-token cross-entropy. DeviceGlide<Device> computes TrainableGlide's function and
// gradients (train_glide.hpp, the reference) with every tensor in the Device's memory: the products
// through Device::gemm, the steps between them as device_ops.hpp's functors, the cross-attention as the
// self-attention's functors with Tk target rows per sequence. With CudaDevice it is the GPU trainer, with
// HostDevice the same code on the CPU (tests/methods/glide_cape/test_device_glide.cpp holds it to
// TrainableGlide). The target is frozen: its K/V get no gradient, so the cross branch computes dq only.
// DeviceAdamW and device_clip_gradients work over tensors(); "norm" in cross_attn_layernorm keeps it
// out of weight decay, as AdamW<> over GlideParams.
//
// Shape letters as train_glide.hpp's: N = B·T rows, Tk target rows per sequence, Hc = h cross heads of
// hdc = d_k, Hkt the target's kv heads.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../../core/error.hpp"
#include "../../train/device_llama.hpp"
#include "../../train/device_ops.hpp"
#include "../../train/layers.hpp"
#include "glide.hpp"
#include "train_glide.hpp"

namespace specdec::train {

template <class Device>
class DeviceGlide {
    template <class T>
    using Buffer = typename Device::template Buffer<T>;

public:
    DeviceGlide(Device& dev, GlideConfig config, const GlideParams<float>& initial) : dev_(&dev), cfg_(std::move(config)) {
        cfg_.validate();
        validate(initial, cfg_);
        params_ = DeviceTensors<Device>(dev, initial, cfg_);
        params_.zero_grad();
    }

    const GlideConfig& config() const { return cfg_; }
    Device& device() { return *dev_; }
    DeviceTensors<Device>& tensors() { return params_; }
    void zero_grad() { params_.zero_grad(); }

    /// The parameters (or their gradients) as a host GlideParams.
    GlideParams<float> params() const { return host_params(false); }
    GlideParams<float> grads() const { return host_params(true); }

    /// As TrainableGlide::forward (same checks and messages): uploads the tokens, the target's KV and
    /// the cross mask, runs the drafter, zeroes dlogits.
    void forward(const GlideBatch<float>& in) {
        check_glide_input(in, cfg_);
        set_inputs(in);
        const Config& c = cfg_.draft;
        const int N = rows(), D = c.hidden_size;
        dev_->run(ops::Index(N) * D,
                  ops::EmbeddingForward{resid_[0].data(), tokens_.data(), params_.value("model.embed_tokens.weight"), nullptr, D});
        for (int m = 0; m < c.num_hidden_layers; ++m) layer_forward(m);
        dev_->run(N, ops::RmsnormForward{final_.data(), final_rstd_.data(), resid_.back().data(), params_.value("model.norm.weight"),
                                         D, c.rms_norm_eps});
        dev_->gemm(logits_.data(), final_.data(), output_matrix(), N, c.vocab_size, D, false, true, false);
        dev_->fill(dlogits_.data(), dlogits_.size(), 0.0f);
    }

    /// Mean next-token cross-entropy against host targets (B, T) (kIgnoreIndex rows skipped), added into
    /// dlogits with `weight`; TrainableGlide::cross_entropy's checks.
    double cross_entropy(std::span<const int> targets, double weight = 1.0) {
        const int N = rows(), V = cfg_.draft.vocab_size;
        check_glide_targets(targets, N, V);
        if (targets_.size() != static_cast<std::size_t>(N)) targets_ = dev_->template alloc<int>(static_cast<std::size_t>(N));
        dev_->upload(targets_.data(), targets.data(), targets.size());
        int counted = 0;
        for (int t : targets) counted += t != kIgnoreIndex;
        return device_cross_entropy(*dev_, dlogits_.data(), logits_.data(), targets_.data(), counted, N, V, weight);
    }

    /// Adds d(loss)/d(parameters) into the gradients from dlogits. Nothing flows into the target's KV.
    void backward() {
        detail::require(rows() > 0, "train", [] { return std::string("DeviceGlide::backward: no forward to differentiate"); });
        const Config& c = cfg_.draft;
        const int N = rows(), D = c.hidden_size, V = c.vocab_size;
        dev_->fill(dfinal_.data(), dfinal_.size(), 0.0f);
        linear_backward(dfinal_.data(), params_.grad(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"),
                        dlogits_.data(), final_.data(), output_matrix(), D, V);
        dev_->fill(dres_.data(), dres_.size(), 0.0f);
        norm_backward(dres_.data(), "model.norm.weight", dfinal_.data(), resid_.back().data(), final_rstd_.data());
        for (int m = c.num_hidden_layers - 1; m >= 0; --m) layer_backward(m);
        dev_->run(D, ops::EmbeddingBackward{params_.grad("model.embed_tokens.weight"), nullptr, dres_.data(), tokens_.data(), N, D});
    }

    /// Device pointers: logits (N, V), dlogits (N, V) where losses add their gradient.
    const float* logits() const { return logits_.data(); }
    float* dlogits() { return dlogits_.data(); }
    int rows() const { return B_ * T_; }

private:
    struct Acts {
        Buffer<float> attn_rstd, attn_in, q, k, v, probs, att, x_attn;  // (N), (N, D), q/k/v after RoPE, (B, H, T, T), ...
        Buffer<float> cross_rstd, cross_in, cq, cprobs, catt, x_cross;  // (N), (N, D), (N, Hc·hdc), (B, Hc, T, Tk), ...
        Buffer<float> mlp_rstd, mlp_in, gate, up, act;                  // (N), (N, D), (N, F) x 3
    };

    std::string layer_name(int m, const char* what) const { return "model.layers." + std::to_string(m) + "." + what; }
    const float* output_matrix() {
        return params_.value(cfg_.draft.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
    }

    GlideParams<float> host_params(bool gradients) const {
        GlideParams<float> p;
        p.layers.resize(static_cast<std::size_t>(cfg_.draft.num_hidden_layers));
        for_each_tensor(p, cfg_, [](const std::string&, std::vector<float>& t, const std::vector<std::int64_t>& shape) {
            t.resize(detail::elements(shape));
        });
        params_.download(p, cfg_, gradients);
        return p;
    }

    /// Buffers for B sequences of T rows against Tk target rows; the rotations and the causal mask of
    /// positions 0..T-1 in each sequence (TrainableGlide's positions).
    void resize(int B, int T, int Tk) {
        if (B == B_ && T == T_ && Tk == Tk_) return;
        const Config& c = cfg_.draft;
        const bool cross = cfg_.glide_cross_attention;
        const std::size_t N = static_cast<std::size_t>(B) * T, D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
        const std::size_t qd = c.q_dim(), kvd = c.kv_dim(), cq = static_cast<std::size_t>(cfg_.cross_dim()), L = c.num_hidden_layers;
        const std::size_t P = static_cast<std::size_t>(B) * c.num_attention_heads * T * T;
        const std::size_t Pc = cross ? static_cast<std::size_t>(B) * cfg_.glide_cross_heads * T * Tk : 0;
        B_ = B, T_ = T, Tk_ = Tk;
        const auto f = [&](std::size_t n) { return dev_->template alloc<float>(n); };
        resid_.clear();
        for (std::size_t m = 0; m <= L; ++m) resid_.push_back(f(N * D));
        acts_.clear();
        for (std::size_t m = 0; m < L; ++m) {
            const std::size_t nc = cross ? N : 0;  // the cross buffers are empty in the vanilla drafter
            acts_.push_back(Acts{f(N), f(N * D), f(N * qd), f(N * kvd), f(N * kvd), f(P), f(N * qd), f(N * D),
                                 f(nc), f(nc * D), f(nc * cq), f(Pc), f(nc * cq), f(nc * D),
                                 f(N), f(N * D), f(N * F), f(N * F), f(N * F)});
        }
        final_rstd_ = f(N), final_ = f(N * D), logits_ = f(N * V), dlogits_ = f(N * V);
        dfinal_ = f(N * D), dres_ = f(N * D), d_norm_in_ = f(N * D);
        d_att_ = f(N * qd), dq_ = f(N * qd), dk_ = f(N * kvd), dv_ = f(N * kvd), ds_ = f(P);
        d_catt_ = f(cross ? N * cq : 0), dcq_ = f(cross ? N * cq : 0), dcs_ = f(Pc);
        d_act_ = f(N * F), d_gate_ = f(N * F), d_up_ = f(N * F);
        tokens_ = dev_->template alloc<int>(N);

        std::vector<int> positions(N);
        for (std::size_t i = 0; i < N; ++i) positions[i] = static_cast<int>(i % static_cast<std::size_t>(T));
        upload_rope(self_rope_, rope_table(positions, rope_inverse_frequencies(c), rope_attention_factor(c)));
        const Config cr = cfg_.cross_rope();  // the target's rotation, as its cached keys carry it
        if (cross) upload_rope(cross_rope_, rope_table(positions, rope_inverse_frequencies(cr), rope_attention_factor(cr)));
        const std::vector<std::uint8_t> causal = causal_mask(T, T);
        self_mask_ = dev_->template alloc<std::uint8_t>(causal.size());
        dev_->upload(self_mask_.data(), causal.data(), causal.size());
        cross_mask_host_.clear();
    }

    struct DeviceRope {
        Buffer<float> forward, backward;  // (N, hd/2, 2): RopeTable's
    };
    void upload_rope(DeviceRope& r, const RopeTable& t) {
        r.forward = dev_->template alloc<float>(t.forward.size());
        r.backward = dev_->template alloc<float>(t.backward.size());
        dev_->upload(r.forward.data(), t.forward.data(), t.forward.size());
        dev_->upload(r.backward.data(), t.backward.data(), t.backward.size());
    }

    void set_inputs(const GlideBatch<float>& in) {
        const bool cross = cfg_.glide_cross_attention;
        resize(in.B, in.T, cross ? in.target->Tk : 0);
        dev_->upload(tokens_.data(), in.tokens.data(), in.tokens.size());
        if (!cross) return;
        const TargetKv<float>& kv = *in.target;
        const std::size_t L = static_cast<std::size_t>(cfg_.draft.num_hidden_layers), n = kv.k.empty() ? 0 : kv.k[0].size();
        if (target_k_.size() != L || (L > 0 && target_k_[0].size() != n)) {
            target_k_.clear(), target_v_.clear();
            for (std::size_t m = 0; m < L; ++m) {
                target_k_.push_back(dev_->template alloc<float>(n));
                target_v_.push_back(dev_->template alloc<float>(n));
            }
        }
        for (std::size_t m = 0; m < L; ++m) {  // (B, Tk, Hkt·hdc) per layer; RoPE is already in the keys
            dev_->upload(target_k_[m].data(), kv.k[m].data(), n);
            dev_->upload(target_v_[m].data(), kv.v[m].data(), n);
        }
        if (!std::equal(in.cross_mask.begin(), in.cross_mask.end(), cross_mask_host_.begin(), cross_mask_host_.end())) {
            cross_mask_host_.assign(in.cross_mask.begin(), in.cross_mask.end());
            cross_mask_ = dev_->template alloc<std::uint8_t>(cross_mask_host_.size());
            dev_->upload(cross_mask_.data(), cross_mask_host_.data(), cross_mask_host_.size());
        }
    }

    /// The target's keys and values that drafter layer m reads, (B, Tk, Hkt·hdc).
    const float* target_k(int m) const { return target_k_[static_cast<std::size_t>(m)].data(); }
    const float* target_v(int m) const { return target_v_[static_cast<std::size_t>(m)].data(); }

    ops::AttentionGeometry self_geometry() const {
        const Config& c = cfg_.draft;
        return {B_, T_, T_, c.num_attention_heads, c.num_key_value_heads, c.head_dim(), self_mask_.data(), false};
    }
    /// The cross mask (T, Tk) is shared by the batch (GlideBatch's).
    ops::AttentionGeometry cross_geometry() const {
        return {B_, T_, Tk_, cfg_.glide_cross_heads, cfg_.glide_target_kv_heads, cfg_.glide_cross_head_dim, cross_mask_.data(), false};
    }

    /// y (N, m) (+)= x (N, k) · W (m, k)ᵀ.
    void linear(float* y, const float* x, const float* W, int k, int m, bool accumulate = false) {
        dev_->gemm(y, x, W, rows(), m, k, false, true, accumulate);
    }

    /// dx (N, k) += dy (N, m) · W (m, k); dW (m, k) += dyᵀ · x (when dW is not null).
    void linear_backward(float* dx, float* dW, const float* dy, const float* x, const float* W, int k, int m) {
        dev_->gemm(dx, dy, W, rows(), k, m, false, false, true);
        if (dW != nullptr) dev_->gemm(dW, dy, x, m, k, rows(), true, false, true);
    }

    /// dx += RMSNorm's input gradient; the weight's gradient.
    void norm_backward(float* dx, const std::string& weight, const float* dout, const float* x, const float* rstd) {
        const int N = rows(), D = cfg_.draft.hidden_size;
        dev_->run(N, ops::RmsnormBackwardInput{dx, dout, x, params_.value(weight), rstd, D});
        if (float* dw = params_.grad(weight)) dev_->run(D, ops::RmsnormWeightGrad{dw, dout, x, rstd, N, D});
    }

    /// The residual after the self- and cross-attention sub-layers: the FFN's input.
    const float* ffn_input(const Acts& a) const { return cfg_.glide_cross_attention ? a.x_cross.data() : a.x_attn.data(); }

    /// resid_[m + 1] = FFN sub-layer(cross sub-layer(self sub-layer(resid_[m]))), each x + f(norm(x)).
    void layer_forward(int m) {
        Acts& a = acts_[static_cast<std::size_t>(m)];
        const Config& c = cfg_.draft;
        const int N = rows(), D = c.hidden_size, F = c.intermediate_size, hd = c.head_dim();
        const int H = c.num_attention_heads, Hkv = c.num_key_value_heads, qd = c.q_dim(), kvd = c.kv_dim();
        const float eps = c.rms_norm_eps;
        const float* x = resid_[static_cast<std::size_t>(m)].data();
        const auto P = [&](const char* what) { return params_.value(layer_name(m, what)); };

        // Self-attention, causal.
        dev_->run(N, ops::RmsnormForward{a.attn_in.data(), a.attn_rstd.data(), x, P("input_layernorm.weight"), D, eps});
        linear(a.q.data(), a.attn_in.data(), P("self_attn.q_proj.weight"), D, qd);
        linear(a.k.data(), a.attn_in.data(), P("self_attn.k_proj.weight"), D, kvd);
        linear(a.v.data(), a.attn_in.data(), P("self_attn.v_proj.weight"), D, kvd);
        dev_->run(ops::Index(N) * H * (hd / 2), ops::Rope{a.q.data(), self_rope_.forward.data(), H, hd});
        dev_->run(ops::Index(N) * Hkv * (hd / 2), ops::Rope{a.k.data(), self_rope_.forward.data(), Hkv, hd});
        const ops::AttentionGeometry g = self_geometry();
        dev_->run(ops::Index(B_) * H * T_, ops::AttentionProbs{a.probs.data(), a.q.data(), a.k.data(), g});
        dev_->run(ops::Index(N) * qd, ops::AttentionWeightedRows{a.att.data(), a.probs.data(), a.v.data(), g, false});
        dev_->copy(a.x_attn.data(), x, a.x_attn.size());  // the residual; o_proj adds into it
        linear(a.x_attn.data(), a.att.data(), P("self_attn.o_proj.weight"), qd, D, true);

        // Cross-attention (GLIDE §4.1): queries at the drafter's positions rotated with the target's theta
        // and head size, keys and values the target's layer N_T - N_D + m, under the (T, Tk) cross mask.
        if (cfg_.glide_cross_attention) {
            const int Hc = cfg_.glide_cross_heads, hdc = cfg_.glide_cross_head_dim, cq = cfg_.cross_dim();
            const ops::AttentionGeometry gc = cross_geometry();
            dev_->run(N, ops::RmsnormForward{a.cross_in.data(), a.cross_rstd.data(), a.x_attn.data(),
                                             P("cross_attn_layernorm.weight"), D, eps});
            linear(a.cq.data(), a.cross_in.data(), P("cross_attn.q_proj.weight"), D, cq);
            dev_->run(ops::Index(N) * Hc * (hdc / 2), ops::Rope{a.cq.data(), cross_rope_.forward.data(), Hc, hdc});
            dev_->run(ops::Index(B_) * Hc * T_, ops::AttentionProbs{a.cprobs.data(), a.cq.data(), target_k(m), gc});
            dev_->run(ops::Index(N) * cq, ops::AttentionWeightedRows{a.catt.data(), a.cprobs.data(), target_v(m), gc, false});
            dev_->copy(a.x_cross.data(), a.x_attn.data(), a.x_cross.size());  // the residual; the cross o_proj adds into it
            linear(a.x_cross.data(), a.catt.data(), P("cross_attn.o_proj.weight"), cq, D, true);
        }

        // SwiGLU.
        const float* h = ffn_input(a);
        float* out = resid_[static_cast<std::size_t>(m) + 1].data();
        dev_->run(N, ops::RmsnormForward{a.mlp_in.data(), a.mlp_rstd.data(), h, P("post_attention_layernorm.weight"), D,
                                         eps});
        linear(a.gate.data(), a.mlp_in.data(), P("mlp.gate_proj.weight"), D, F);
        linear(a.up.data(), a.mlp_in.data(), P("mlp.up_proj.weight"), D, F);
        dev_->run(ops::Index(N) * F, ops::SwigluForward{a.act.data(), a.gate.data(), a.up.data()});
        dev_->copy(out, h, static_cast<std::size_t>(N) * D);  // the residual; down_proj adds into it
        linear(out, a.act.data(), P("mlp.down_proj.weight"), F, D, true);
    }

    /// On entry dres_ is d(loss)/d(resid_[m + 1]); on exit d(loss)/d(resid_[m]). Each branch adds its
    /// input gradient on top of the skip connection's.
    void layer_backward(int m) {
        const Acts& a = acts_[static_cast<std::size_t>(m)];
        const Config& c = cfg_.draft;
        const int N = rows(), D = c.hidden_size, F = c.intermediate_size, hd = c.head_dim();
        const int H = c.num_attention_heads, Hkv = c.num_key_value_heads, qd = c.q_dim(), kvd = c.kv_dim();
        const auto P = [&](const char* what) { return params_.value(layer_name(m, what)); };
        const auto G = [&](const char* what) { return params_.grad(layer_name(m, what)); };
        const auto zero = [&](Buffer<float>& b) { dev_->fill(b.data(), b.size(), 0.0f); };

        // SwiGLU branch: dres_ becomes d(FFN input).
        zero(d_act_);
        linear_backward(d_act_.data(), G("mlp.down_proj.weight"), dres_.data(), a.act.data(), P("mlp.down_proj.weight"), F, D);
        zero(d_gate_), zero(d_up_);
        dev_->run(ops::Index(N) * F, ops::SwigluBackward{d_gate_.data(), d_up_.data(), d_act_.data(), a.gate.data(), a.up.data()});
        zero(d_norm_in_);
        linear_backward(d_norm_in_.data(), G("mlp.gate_proj.weight"), d_gate_.data(), a.mlp_in.data(), P("mlp.gate_proj.weight"), D, F);
        linear_backward(d_norm_in_.data(), G("mlp.up_proj.weight"), d_up_.data(), a.mlp_in.data(), P("mlp.up_proj.weight"), D, F);
        norm_backward(dres_.data(), layer_name(m, "post_attention_layernorm.weight"), d_norm_in_.data(), ffn_input(a), a.mlp_rstd.data());

        // Cross-attention branch: dres_ becomes d(x_attn). Only the queries' gradient: the target is frozen,
        // so AttentionKeyValueGrad is not run for its K/V.
        if (cfg_.glide_cross_attention) {
            const int Hc = cfg_.glide_cross_heads, hdc = cfg_.glide_cross_head_dim, cq = cfg_.cross_dim();
            const ops::AttentionGeometry gc = cross_geometry();
            zero(d_catt_);
            linear_backward(d_catt_.data(), G("cross_attn.o_proj.weight"), dres_.data(), a.catt.data(),
                            P("cross_attn.o_proj.weight"), cq, D);
            dev_->run(ops::Index(B_) * Hc * T_, ops::AttentionScoreGrad{dcs_.data(), a.cprobs.data(), d_catt_.data(), target_v(m), gc});
            dev_->run(ops::Index(N) * cq, ops::AttentionWeightedRows{dcq_.data(), dcs_.data(), target_k(m), gc, false});
            dev_->run(ops::Index(N) * Hc * (hdc / 2), ops::Rope{dcq_.data(), cross_rope_.backward.data(), Hc, hdc});
            zero(d_norm_in_);
            linear_backward(d_norm_in_.data(), G("cross_attn.q_proj.weight"), dcq_.data(), a.cross_in.data(),
                            P("cross_attn.q_proj.weight"), D, cq);
            norm_backward(dres_.data(), layer_name(m, "cross_attn_layernorm.weight"), d_norm_in_.data(), a.x_attn.data(),
                          a.cross_rstd.data());
        }

        // Self-attention branch: dres_ becomes d(resid_[m]).
        zero(d_att_);
        linear_backward(d_att_.data(), G("self_attn.o_proj.weight"), dres_.data(), a.att.data(), P("self_attn.o_proj.weight"), qd, D);
        zero(dk_), zero(dv_);
        const ops::AttentionGeometry g = self_geometry();
        dev_->run(ops::Index(B_) * H * T_, ops::AttentionScoreGrad{ds_.data(), a.probs.data(), d_att_.data(), a.v.data(), g});
        dev_->run(ops::Index(N) * qd, ops::AttentionWeightedRows{dq_.data(), ds_.data(), a.k.data(), g, false});
        dev_->run(ops::Index(B_) * T_ * kvd,
                  ops::AttentionKeyValueGrad{dk_.data(), dv_.data(), ds_.data(), a.probs.data(), a.q.data(), d_att_.data(), g});
        dev_->run(ops::Index(N) * H * (hd / 2), ops::Rope{dq_.data(), self_rope_.backward.data(), H, hd});
        dev_->run(ops::Index(N) * Hkv * (hd / 2), ops::Rope{dk_.data(), self_rope_.backward.data(), Hkv, hd});
        zero(d_norm_in_);
        linear_backward(d_norm_in_.data(), G("self_attn.q_proj.weight"), dq_.data(), a.attn_in.data(), P("self_attn.q_proj.weight"), D, qd);
        linear_backward(d_norm_in_.data(), G("self_attn.k_proj.weight"), dk_.data(), a.attn_in.data(), P("self_attn.k_proj.weight"), D, kvd);
        linear_backward(d_norm_in_.data(), G("self_attn.v_proj.weight"), dv_.data(), a.attn_in.data(), P("self_attn.v_proj.weight"), D, kvd);
        norm_backward(dres_.data(), layer_name(m, "input_layernorm.weight"), d_norm_in_.data(), resid_[static_cast<std::size_t>(m)].data(),
                      a.attn_rstd.data());
    }

    Device* dev_;
    GlideConfig cfg_;
    DeviceTensors<Device> params_;
    int B_ = 0, T_ = 0, Tk_ = 0;

    // Inputs of the last forward.
    Buffer<int> tokens_, targets_;                      // (N), (N)
    DeviceRope self_rope_, cross_rope_;                 // positions 0..T-1: the drafter's rotation, the target's
    Buffer<std::uint8_t> self_mask_, cross_mask_;       // (T, T) causal, (T, Tk)
    std::vector<std::uint8_t> cross_mask_host_;         // what cross_mask_ holds
    std::vector<Buffer<float>> target_k_, target_v_;    // (N_D) x (B, Tk, Hkt·hdc)

    // Activations.
    std::vector<Buffer<float>> resid_;                  // (N_D + 1) x (N, D)
    std::vector<Acts> acts_;                            // (N_D)
    Buffer<float> final_rstd_, final_, logits_;         // (N), (N, D), (N, V)

    // Gradients of activations, reused by every layer.
    Buffer<float> dlogits_;                             // (N, V)
    Buffer<float> dfinal_, dres_, d_norm_in_;           // (N, D)
    Buffer<float> d_att_, dq_, dk_, dv_, ds_;           // (N, H·hd), (N, H·hd), (N, Hkv·hd) x 2, (B, H, T, T)
    Buffer<float> d_catt_, dcq_, dcs_;                  // (N, Hc·hdc) x 2, (B, Hc, T, Tk)
    Buffer<float> d_act_, d_gate_, d_up_;               // (N, F)
};

}  // namespace specdec::train
