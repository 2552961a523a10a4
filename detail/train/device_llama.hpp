// specdec/detail/train/device_llama.hpp — TrainableLlama's forward and backward written for a device: the GPU trainer.
// SPDX-License-Identifier: MIT
#pragma once

// DeviceLlama<Device> computes TrainableLlama's function and gradients (same inputs, same options: a
// mask, soft-prompt rows, captured hidden states, GQA, tied or untied head, identity_end_norms, PAD's
// doubled down_proj) with every tensor in the Device's memory: the products through Device::gemm, the
// steps between them as device_ops.hpp's functors. With CudaDevice it is the GPU trainer (bf16 products,
// fp32 master weights, activations and gradients); with HostDevice it is the same code on the CPU, which
// the tests compare with TrainableLlama, the reference (llm.c's train_gpt2.cu against train_gpt2.c).
//
// Frozen tensors (a drafter's borrowed embedding and head) get no gradient buffer, and the backward skips
// their weight products: at a 7B shape the head's gradient alone is a product as large as the layer's.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../model/config.hpp"
#include "../model/weights.hpp"
#include "device_ops.hpp"
#include "layers.hpp"
#include "optimizer.hpp"
#include "trainable_llama.hpp"

namespace specdec::train {

/// Named parameters in a device's memory, with gradients for the trained ones (HF names, checkpoint order).
template <class Device>
class DeviceTensors {
public:
    struct Tensor {
        std::string name;
        std::size_t n = 0;
        bool trained = true;
        typename Device::template Buffer<float> value, grad;  // grad empty when frozen
    };

    DeviceTensors() = default;

    /// Uploads every tensor of `host` (a Weights, ConnectorWeights or GlideParams with its shape) except empty ones.
    template <class Tensors, class Shape>
    DeviceTensors(Device& dev, const Tensors& host, const Shape& shape, const std::vector<std::string>& frozen = {})
        : dev_(&dev) {
        for (const std::string& f : frozen) {
            bool found = false;
            for_each_tensor(host, shape, [&](const std::string& n, const std::vector<float>&, const auto&) { found |= n == f; });
            detail::require(found, "train", [&] { return "frozen tensor '" + f + "' is not a tensor of this model"; });
        }
        for_each_tensor(host, shape, [&](const std::string& name, const std::vector<float>& t, const auto&) {
            if (t.empty()) return;
            Tensor x{name, t.size(), std::find(frozen.begin(), frozen.end(), name) == frozen.end(), dev.template alloc<float>(t.size()), {}};
            dev.upload(x.value.data(), t.data(), t.size());
            if (x.trained) x.grad = dev.template alloc<float>(t.size());
            index_[name] = tensors_.size();
            tensors_.push_back(std::move(x));
        });
    }

    std::vector<Tensor>& all() { return tensors_; }
    const std::vector<Tensor>& all() const { return tensors_; }
    bool has(const std::string& name) const { return index_.count(name) != 0; }
    Tensor& at(const std::string& name) { return tensors_[lookup(name)]; }
    const Tensor& at(const std::string& name) const { return tensors_[lookup(name)]; }
    float* value(const std::string& name) { return at(name).value.data(); }
    /// The gradient buffer, null for a frozen tensor.
    float* grad(const std::string& name) {
        Tensor& t = at(name);
        return t.trained ? t.grad.data() : nullptr;
    }

    void zero_grad() {
        for (Tensor& t : tensors_)
            if (t.trained) dev_->fill(t.grad.data(), t.n, 0.0f);
    }

    /// Downloads values (or gradients; zeros for frozen tensors) into a host set of the same shape.
    template <class Tensors, class Shape>
    void download(Tensors& host, const Shape& shape, bool gradients = false) const {
        for_each_tensor(host, shape, [&](const std::string& name, std::vector<float>& t, const auto&) {
            if (t.empty()) return;
            const Tensor& x = at(name);
            if (gradients && !x.trained) return std::fill(t.begin(), t.end(), 0.0f);
            dev_->download(t.data(), gradients ? x.grad.data() : x.value.data(), t.size());
        });
    }

    /// Overwrites the values from a host set of the same shape (a run continued from its saved state).
    template <class Tensors, class Shape>
    void upload(const Tensors& host, const Shape& shape) {
        for_each_tensor(host, shape, [&](const std::string& name, const std::vector<float>& t, const auto&) {
            if (t.empty()) return;
            Tensor& x = at(name);
            detail::require(x.n == t.size(), "train", [&] {
                return "tensor '" + name + "': " + std::to_string(t.size()) + " values for " + std::to_string(x.n) + " on the device";
            });
            dev_->upload(x.value.data(), t.data(), t.size());
        });
    }

private:
    std::size_t lookup(const std::string& name) const {
        const auto it = index_.find(name);
        detail::require(it != index_.end(), "train", [&] { return "no tensor '" + name + "' on the device"; });
        return it->second;
    }

    Device* dev_ = nullptr;
    std::vector<Tensor> tensors_;
    std::map<std::string, std::size_t> index_;
};

/// Σ of squared gradients of the trained tensors (in chunks, summed on the host in order).
template <class Device>
double device_grad_sum_squares(Device& dev, DeviceTensors<Device>& set) {
    constexpr ops::Index kChunk = 1 << 16;
    double ss = 0.0;
    for (auto& t : set.all()) {
        if (!t.trained) continue;
        const ops::Index chunks = (static_cast<ops::Index>(t.n) + kChunk - 1) / kChunk;
        auto partial = dev.template alloc<double>(static_cast<std::size_t>(chunks));
        dev.run(chunks, ops::SumSquaresChunk{partial.data(), t.grad.data(), static_cast<ops::Index>(t.n), kChunk});
        std::vector<double> host(static_cast<std::size_t>(chunks));
        dev.download(host.data(), partial.data(), host.size());
        for (double v : host) ss += v;
    }
    return ss;
}

/// Scales every trained gradient of the sets so that their joint norm is at most max_norm; returns the norm before.
template <class Device>
double device_clip_gradients(Device& dev, std::vector<DeviceTensors<Device>*> sets, double max_norm) {
    double ss = 0.0;
    for (auto* s : sets) ss += device_grad_sum_squares(dev, *s);
    const double norm = std::sqrt(ss);
    if (norm > max_norm) {
        const float scale = static_cast<float>(max_norm / (norm + 1e-6));
        for (auto* s : sets)
            for (auto& t : s->all())
                if (t.trained) dev.run(static_cast<ops::Index>(t.n), ops::Scale{t.grad.data(), scale});
    }
    return norm;
}

/// AdamW over a DeviceTensors (optimizer.hpp's arithmetic and defaults; frozen tensors have no moments):
/// no decay on tensors whose name contains "norm", as AdamW<>.
template <class Device>
class DeviceAdamW {
public:
    DeviceAdamW(Device& dev, DeviceTensors<Device>& params, AdamWOptions options = {})
        : dev_(&dev), params_(&params), opt_(std::move(options)) {
        for (auto& t : params.all()) {
            const bool trained = t.trained && std::find(opt_.frozen.begin(), opt_.frozen.end(), t.name) == opt_.frozen.end();
            moments_.push_back({trained ? dev.template alloc<float>(t.n) : typename Device::template Buffer<float>{},
                                trained ? dev.template alloc<float>(t.n) : typename Device::template Buffer<float>{}, trained});
        }
    }

    void step(float lr) {
        ++t_;
        const float bias1 = 1.0f - std::pow(opt_.beta1, static_cast<float>(t_));
        const float bias2 = 1.0f - std::pow(opt_.beta2, static_cast<float>(t_));
        auto& ts = params_->all();
        for (std::size_t i = 0; i < ts.size(); ++i) {
            if (!moments_[i].trained) continue;
            const bool decays = ts[i].name.find("norm") == std::string::npos;
            dev_->run(static_cast<ops::Index>(ts[i].n),
                      ops::AdamWStep{ts[i].value.data(), moments_[i].m.data(), moments_[i].v.data(), ts[i].grad.data(),
                                     opt_.beta1, opt_.beta2, opt_.eps, lr, decays ? lr * opt_.weight_decay : 0.0f, bias1,
                                     bias2});
        }
    }

    int t() const { return t_; }

    /// The moments into host tensors shaped like the parameters (zeros where a tensor is not trained):
    /// with the parameters and t(), what a run's state file holds (io/train_state.hpp), as AdamW<>'s.
    template <class Tensors, class Shape>
    void download_moments(Tensors& m, Tensors& v, const Shape& shape) const {
        each_pair(m, v, shape, [&](std::vector<float>& hm, std::vector<float>& hv, const Moments& d) {
            if (!d.trained) {
                std::fill(hm.begin(), hm.end(), 0.0f), std::fill(hv.begin(), hv.end(), 0.0f);
                return;
            }
            dev_->download(hm.data(), d.m.data(), hm.size());
            dev_->download(hv.data(), d.v.data(), hv.size());
        });
    }

    /// Continues from a saved state: moments shaped like the parameters, `t` steps taken.
    template <class Tensors, class Shape>
    void restore(Tensors m, Tensors v, const Shape& shape, int t) {
        detail::require(t >= 0, "train", [&] { return "DeviceAdamW::restore: t = " + std::to_string(t) + " < 0"; });
        each_pair(m, v, shape, [&](std::vector<float>& hm, std::vector<float>& hv, Moments& d) {
            if (!d.trained) return;
            dev_->upload(d.m.data(), hm.data(), hm.size());
            dev_->upload(d.v.data(), hv.data(), hv.size());
        });
        t_ = t;
    }

private:
    /// f(host m, host v, device moments) for every non-empty tensor of the host sets, checked against
    /// the device tensor of the same name.
    template <class Tensors, class Shape, class F>
    void each_pair(Tensors& m, Tensors& v, const Shape& shape, F&& f) const {
        std::vector<std::vector<float>*> vs;
        for_each_tensor(v, shape, [&](const std::string&, std::vector<float>& t, const auto&) { vs.push_back(&t); });
        std::size_t i = 0;
        for_each_tensor(m, shape, [&](const std::string& name, std::vector<float>& t, const auto&) {
            std::vector<float>& tv = *vs[i++];
            if (t.empty()) return;
            const auto& all = params_->all();
            const auto it = std::find_if(all.begin(), all.end(), [&](const auto& x) { return x.name == name; });
            detail::require(it != all.end() && it->n == t.size() && tv.size() == t.size(), "train", [&] {
                return "DeviceAdamW: moments of '" + name + "' (" + std::to_string(t.size()) +
                       " values) are not shaped like a parameter on the device";
            });
            f(t, tv, const_cast<Moments&>(moments_[static_cast<std::size_t>(it - all.begin())]));
        });
    }

    struct Moments {
        typename Device::template Buffer<float> m, v;
        bool trained;
    };
    Device* dev_;
    DeviceTensors<Device>* params_;
    AdamWOptions opt_;
    std::vector<Moments> moments_;
    int t_ = 0;
};

namespace ops {

/// PAD's forward: out = x_mid + mlp[:, :D], resid_feat = x_mid + mlp[:, D:] (mlp (N, 2D)).
struct PadSplit {
    float* out;
    float* resid_feat;
    const float* x_mid;
    const float* mlp;
    int D;
    SPECDEC_HD void operator()(Index i) const {
        const Index r = i / D, d = i % D;
        out[i] = x_mid[i] + mlp[r * 2 * D + d];
        resid_feat[i] = x_mid[i] + mlp[r * 2 * D + D + d];
    }
};

/// PAD's backward: dmlp = [dres | dres_feat], dres += dres_feat (both branches' skips reach x_mid).
struct PadJoin {
    float* dmlp;
    float* dres;
    const float* dres_feat;
    int D;
    SPECDEC_HD void operator()(Index i) const {
        const Index r = i / D, d = i % D;
        dmlp[r * 2 * D + d] = dres[i];
        dmlp[r * 2 * D + D + d] = dres_feat[i];
        dres[i] += dres_feat[i];
    }
};

}  // namespace ops

template <class Device>
class DeviceLlama {
    template <class T>
    using Buffer = typename Device::template Buffer<T>;

public:
    /// `frozen`: HF names that get no gradient (and no weight product in the backward).
    DeviceLlama(Device& dev, Config config, const Weights& initial, std::vector<std::string> frozen = {})
        : dev_(&dev), cfg_(config) {
        cfg_.validate();
        detail::require_llama_block(cfg_, "train", "DeviceLlama");
        validate(initial, cfg_);
        params_ = DeviceTensors<Device>(dev, initial, cfg_, frozen);
        params_.zero_grad();
    }

    const Config& config() const { return cfg_; }
    Device& device() { return *dev_; }
    DeviceTensors<Device>& tensors() { return params_; }
    void zero_grad() { params_.zero_grad(); }

    /// The parameters (or their gradients, zeros for frozen tensors) as a host Weights.
    Weights params() const { return host_weights(false); }
    Weights grads() const { return host_weights(true); }

    /// As TrainableLlama::capture_hidden: 0 = embeddings, l = output of layer l, L = the final normed state.
    void capture_hidden(std::vector<int> layers) { hidden_layers_ = checked_hidden_layers(std::move(layers), cfg_); }

    /// Runs the model over the batch (host inputs; input_embeddings may instead be given on the device
    /// with device_embeddings) and zeroes dlogits and dhidden.
    void forward(const ModelInput& in, const float* device_embeddings = nullptr) {
        check_model_input(in, cfg_, device_embeddings != nullptr);
        resize(in.B, in.T);
        set_inputs(in);
        const int N = rows(), D = cfg_.hidden_size, L = cfg_.num_hidden_layers;
        const float* soft = device_embeddings;
        if (soft == nullptr && !in.input_embeddings.empty()) {
            dev_->upload(soft_.data(), in.input_embeddings.data(), in.input_embeddings.size());
            soft = soft_.data();
        }
        dev_->run(ops::Index(N) * D, ops::EmbeddingForward{resid_[0].data(), tokens_.data(), params_.value("model.embed_tokens.weight"), soft, D});
        for (int l = 0; l < L; ++l) layer_forward(l);
        if (cfg_.identity_end_norms)
            dev_->copy(final_.data(), resid_[L].data(), final_.size());
        else
            dev_->run(N, ops::RmsnormForward{final_.data(), final_rstd_.data(), resid_[L].data(), params_.value("model.norm.weight"), D, cfg_.rms_norm_eps});
        if (cfg_.partial_alignment)
            dev_->run(N, ops::RmsnormForward{feat_final_.data(), feat_rstd_.data(), resid_feat_.data(), params_.value("model.norm.weight"), D, cfg_.rms_norm_eps});
        dev_->gemm(logits_.data(), final_.data(), output_matrix(), N, cfg_.vocab_size, D, false, true, false);
        dev_->fill(dlogits_.data(), dlogits_.size(), 0.0f);
        for (auto& d : dhidden_) dev_->fill(d.data(), d.size(), 0.0f);
    }

    int batch_size() const { return B_; }
    int seq_len() const { return T_; }
    int rows() const { return B_ * T_; }

    /// Device pointers: logits (N, V), dlogits (N, V), the i-th captured state (N, D) and its gradient
    /// input, the soft-prompt rows' gradient (N, D) after backward (0 on token rows).
    const float* logits() const { return logits_.data(); }
    float* dlogits() { return dlogits_.data(); }
    const float* hidden(int i) const { return hidden_state(hidden_layers_.at(checked_hidden(i))); }
    float* dhidden(int i) { return dhidden_.at(checked_hidden(i)).data(); }
    const float* input_embeddings_grad() const { return dinput_.data(); }

    /// Adds d(loss)/d(parameters) into the gradients from dlogits and dhidden.
    void backward() {
        const int N = rows(), D = cfg_.hidden_size, L = cfg_.num_hidden_layers, V = cfg_.vocab_size;
        const std::string out_name = cfg_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
        dev_->fill(dfinal_.data(), dfinal_.size(), 0.0f);
        linear_backward(dfinal_.data(), params_.grad(out_name), dlogits_.data(), final_.data(), output_matrix(), N, D, V);
        if (cfg_.partial_alignment) {
            dev_->fill(dres_feat_.data(), dres_feat_.size(), 0.0f);
            dev_->fill(dfeat_final_.data(), dfeat_final_.size(), 0.0f);
            add_dhidden(L, dfeat_final_.data());
            norm_backward(dres_feat_.data(), "model.norm.weight", dfeat_final_.data(), resid_feat_.data(), feat_rstd_.data());
        } else {
            add_dhidden(L, dfinal_.data());
        }
        if (cfg_.identity_end_norms) {
            dev_->copy(dres_.data(), dfinal_.data(), dres_.size());
        } else {
            dev_->fill(dres_.data(), dres_.size(), 0.0f);
            norm_backward(dres_.data(), "model.norm.weight", dfinal_.data(), resid_[L].data(), final_rstd_.data());
        }
        for (int l = L - 1; l >= 0; --l) {
            layer_backward(l);
            add_dhidden(l, dres_.data());
        }
        float* dembed = params_.grad("model.embed_tokens.weight");
        dev_->run(D, ops::EmbeddingBackward{dembed, dinput_.data(), dres_.data(), tokens_.data(), N, D});
    }

private:
    struct Acts {
        Buffer<float> attn_rstd, attn_in, q, k, v, probs, att, x_mid, mlp_rstd, mlp_in, gate, up, act;
    };

    std::string layer_name(int l, const char* what) const { return "model.layers." + std::to_string(l) + "." + what; }
    const float* output_matrix() {
        return params_.value(cfg_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
    }

    Weights host_weights(bool gradients) const {
        Weights w;
        w.embed.resize(static_cast<std::size_t>(cfg_.vocab_size) * cfg_.hidden_size);
        w.layers.resize(cfg_.num_hidden_layers);
        const std::size_t D = cfg_.hidden_size, F = cfg_.intermediate_size, q = cfg_.q_dim(), kv = cfg_.kv_dim();
        for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
            LayerWeights& x = w.layers[l];
            x.attn_norm.resize(D), x.mlp_norm.resize(D);
            x.wq.resize(q * D), x.wk.resize(kv * D), x.wv.resize(kv * D), x.wo.resize(D * q);
            x.w_gate.resize(F * D), x.w_up.resize(F * D), x.w_down.resize(static_cast<std::size_t>(cfg_.down_rows(l)) * F);
        }
        w.norm.resize(D);
        if (!cfg_.tie_word_embeddings) w.lm_head.resize(w.embed.size());
        params_.download(w, cfg_, gradients);
        return w;
    }

    void resize(int B, int T) {
        if (B == B_ && T == T_) return;
        const std::size_t N = static_cast<std::size_t>(B) * T, D = cfg_.hidden_size, F = cfg_.intermediate_size;
        const std::size_t qd = cfg_.q_dim(), kvd = cfg_.kv_dim(), L = cfg_.num_hidden_layers, V = cfg_.vocab_size;
        const std::size_t P = static_cast<std::size_t>(B) * cfg_.num_attention_heads * T * T;
        B_ = B, T_ = T;
        const auto f = [&](std::size_t n) { return dev_->template alloc<float>(n); };
        resid_.clear();
        for (std::size_t l = 0; l <= L; ++l) resid_.push_back(f(N * D));
        acts_.clear();
        for (std::size_t l = 0; l < L; ++l)
            acts_.push_back(Acts{f(N), f(N * D), f(N * qd), f(N * kvd), f(N * kvd), f(P), f(N * qd), f(N * D), f(N),
                                 f(N * D), f(N * F), f(N * F), f(N * F)});
        final_rstd_ = f(N), final_ = f(N * D), logits_ = f(N * V), dlogits_ = f(N * V);
        if (cfg_.partial_alignment) {
            mlp_out_ = f(N * 2 * D), resid_feat_ = f(N * D), feat_rstd_ = f(N), feat_final_ = f(N * D);
            dfeat_final_ = f(N * D), dres_feat_ = f(N * D);
        }
        soft_ = f(N * D), dinput_ = f(N * D), dfinal_ = f(N * D), dres_ = f(N * D);
        d_att_ = f(N * qd), dq_ = f(N * qd), dk_ = f(N * kvd), dv_ = f(N * kvd), d_norm_in_ = f(N * D);
        d_act_ = f(N * F), d_gate_ = f(N * F), d_up_ = f(N * F), ds_ = f(P);
        tokens_ = dev_->template alloc<int>(N);
        dhidden_.clear();  // set_inputs makes one per captured layer, N rows
        positions_host_.clear();
        mask_host_.clear();
    }

    void set_inputs(const ModelInput& in) {
        const std::size_t N = static_cast<std::size_t>(in.B) * in.T;
        dev_->upload(tokens_.data(), in.tokens.data(), N);
        std::vector<int> positions(in.positions.begin(), in.positions.end());
        if (in.positions.empty()) {
            positions.resize(N);
            for (std::size_t i = 0; i < N; ++i) positions[i] = static_cast<int>(i % in.T);
        }
        if (positions != positions_host_) {  // as TrainableLlama: the table is kept while the positions repeat
            positions_host_ = std::move(positions);
            const RopeTable t = rope_table(positions_host_, rope_inverse_frequencies(cfg_), rope_attention_factor(cfg_));
            rope_fwd_ = dev_->template alloc<float>(t.forward.size());
            rope_bwd_ = dev_->template alloc<float>(t.backward.size());
            dev_->upload(rope_fwd_.data(), t.forward.data(), t.forward.size());
            dev_->upload(rope_bwd_.data(), t.backward.data(), t.backward.size());
        }
        std::vector<std::uint8_t> mask = in.mask.empty() ? causal_mask(in.T, in.T)
                                                         : std::vector<std::uint8_t>(in.mask.begin(), in.mask.end());
        if (mask != mask_host_) {
            mask_host_ = std::move(mask);
            mask_ = dev_->template alloc<std::uint8_t>(mask_host_.size());
            dev_->upload(mask_.data(), mask_host_.data(), mask_host_.size());
        }
        per_sequence_ = mask_host_.size() != static_cast<std::size_t>(in.T) * in.T;
        while (dhidden_.size() < hidden_layers_.size()) dhidden_.push_back(dev_->template alloc<float>(N * cfg_.hidden_size));
    }

    ops::AttentionGeometry geometry() const {
        return {B_, T_, T_, cfg_.num_attention_heads, cfg_.num_key_value_heads, cfg_.head_dim(), mask_.data(), per_sequence_};
    }

    /// y (N, m) (+)= x (N, k) · W (m, k)ᵀ.
    void linear(float* y, const float* x, const float* W, int k, int m, bool accumulate = false) {
        dev_->gemm(y, x, W, rows(), m, k, false, true, accumulate);
    }

    /// dx (N, k) += dy (N, m) · W (m, k) (when dx is not null); dW (m, k) += dyᵀ · x (when dW is not null).
    void linear_backward(float* dx, float* dW, const float* dy, const float* x, const float* W, int N, int k, int m) {
        if (dx != nullptr) dev_->gemm(dx, dy, W, N, k, m, false, false, true);
        if (dW != nullptr) dev_->gemm(dW, dy, x, m, k, N, true, false, true);
    }

    /// dx += RMSNorm's input gradient; the weight's gradient where it is trained.
    void norm_backward(float* dx, const std::string& weight, const float* dout, const float* x, const float* rstd) {
        const int N = rows(), D = cfg_.hidden_size;
        dev_->run(N, ops::RmsnormBackwardInput{dx, dout, x, params_.value(weight), rstd, D});
        if (float* dw = params_.grad(weight)) dev_->run(D, ops::RmsnormWeightGrad{dw, dout, x, rstd, N, D});
    }

    void layer_forward(int l) {
        Acts& a = acts_[l];
        const int N = rows(), D = cfg_.hidden_size, F = cfg_.intermediate_size, hd = cfg_.head_dim();
        const int H = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads, qd = cfg_.q_dim(), kvd = cfg_.kv_dim();
        const float* x = resid_[l].data();
        float* out = resid_[l + 1].data();
        const auto P = [&](const char* what) { return params_.value(layer_name(l, what)); };
        if (l == 0 && cfg_.identity_end_norms)
            dev_->copy(a.attn_in.data(), x, a.attn_in.size());
        else
            dev_->run(N, ops::RmsnormForward{a.attn_in.data(), a.attn_rstd.data(), x, P("input_layernorm.weight"), D, cfg_.rms_norm_eps});
        linear(a.q.data(), a.attn_in.data(), P("self_attn.q_proj.weight"), D, qd);
        linear(a.k.data(), a.attn_in.data(), P("self_attn.k_proj.weight"), D, kvd);
        linear(a.v.data(), a.attn_in.data(), P("self_attn.v_proj.weight"), D, kvd);
        dev_->run(ops::Index(N) * H * (hd / 2), ops::Rope{a.q.data(), rope_fwd_.data(), H, hd});
        dev_->run(ops::Index(N) * Hkv * (hd / 2), ops::Rope{a.k.data(), rope_fwd_.data(), Hkv, hd});
        dev_->run(ops::Index(B_) * H * T_, ops::AttentionProbs{a.probs.data(), a.q.data(), a.k.data(), geometry()});
        dev_->run(ops::Index(N) * qd, ops::AttentionWeightedRows{a.att.data(), a.probs.data(), a.v.data(), geometry(), false});
        dev_->copy(a.x_mid.data(), x, a.x_mid.size());
        linear(a.x_mid.data(), a.att.data(), P("self_attn.o_proj.weight"), qd, D, true);
        dev_->run(N, ops::RmsnormForward{a.mlp_in.data(), a.mlp_rstd.data(), a.x_mid.data(), P("post_attention_layernorm.weight"), D, cfg_.rms_norm_eps});
        linear(a.gate.data(), a.mlp_in.data(), P("mlp.gate_proj.weight"), D, F);
        linear(a.up.data(), a.mlp_in.data(), P("mlp.up_proj.weight"), D, F);
        dev_->run(ops::Index(N) * F, ops::SwigluForward{a.act.data(), a.gate.data(), a.up.data()});
        if (cfg_.down_rows(l) != D) {  // PAD: both halves of the (2D, F) down_proj add to x_mid
            linear(mlp_out_.data(), a.act.data(), P("mlp.down_proj.weight"), F, 2 * D);
            dev_->run(ops::Index(N) * D, ops::PadSplit{out, resid_feat_.data(), a.x_mid.data(), mlp_out_.data(), D});
            return;
        }
        dev_->copy(out, a.x_mid.data(), a.x_mid.size());
        linear(out, a.act.data(), P("mlp.down_proj.weight"), F, D, true);
    }

    const float* hidden_state(int layer) const {
        if (layer < cfg_.num_hidden_layers) return resid_[layer].data();
        return cfg_.partial_alignment ? feat_final_.data() : final_.data();
    }

    void add_dhidden(int layer, float* grad) {
        for (std::size_t i = 0; i < hidden_layers_.size(); ++i)
            if (hidden_layers_[i] == layer)
                dev_->run(ops::Index(rows()) * cfg_.hidden_size, ops::AddInto{grad, dhidden_[i].data()});
    }

    /// On entry dres_ is d(loss)/d(resid_[l + 1]); on exit d(loss)/d(resid_[l]).
    void layer_backward(int l) {
        const Acts& a = acts_[l];
        const int N = rows(), D = cfg_.hidden_size, F = cfg_.intermediate_size, hd = cfg_.head_dim();
        const int H = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads, qd = cfg_.q_dim(), kvd = cfg_.kv_dim();
        const auto P = [&](const char* what) { return params_.value(layer_name(l, what)); };
        const auto G = [&](const char* what) { return params_.grad(layer_name(l, what)); };

        const float* dmlp = dres_.data();
        if (cfg_.down_rows(l) != D) {
            dev_->run(ops::Index(N) * D, ops::PadJoin{mlp_out_.data(), dres_.data(), dres_feat_.data(), D});
            dmlp = mlp_out_.data();
        }
        dev_->fill(d_act_.data(), d_act_.size(), 0.0f);
        linear_backward(d_act_.data(), G("mlp.down_proj.weight"), dmlp, a.act.data(), P("mlp.down_proj.weight"), N, F, cfg_.down_rows(l));
        dev_->fill(d_gate_.data(), d_gate_.size(), 0.0f);
        dev_->fill(d_up_.data(), d_up_.size(), 0.0f);
        dev_->run(ops::Index(N) * F, ops::SwigluBackward{d_gate_.data(), d_up_.data(), d_act_.data(), a.gate.data(), a.up.data()});
        dev_->fill(d_norm_in_.data(), d_norm_in_.size(), 0.0f);
        linear_backward(d_norm_in_.data(), G("mlp.gate_proj.weight"), d_gate_.data(), a.mlp_in.data(), P("mlp.gate_proj.weight"), N, D, F);
        linear_backward(d_norm_in_.data(), G("mlp.up_proj.weight"), d_up_.data(), a.mlp_in.data(), P("mlp.up_proj.weight"), N, D, F);
        norm_backward(dres_.data(), layer_name(l, "post_attention_layernorm.weight"), d_norm_in_.data(), a.x_mid.data(), a.mlp_rstd.data());

        dev_->fill(d_att_.data(), d_att_.size(), 0.0f);
        linear_backward(d_att_.data(), G("self_attn.o_proj.weight"), dres_.data(), a.att.data(), P("self_attn.o_proj.weight"), N, qd, D);
        dev_->fill(dq_.data(), dq_.size(), 0.0f);
        dev_->fill(dk_.data(), dk_.size(), 0.0f);
        dev_->fill(dv_.data(), dv_.size(), 0.0f);
        const ops::AttentionGeometry g = geometry();
        dev_->run(ops::Index(B_) * H * T_, ops::AttentionScoreGrad{ds_.data(), a.probs.data(), d_att_.data(), a.v.data(), g});
        dev_->run(ops::Index(N) * qd, ops::AttentionWeightedRows{dq_.data(), ds_.data(), a.k.data(), g, true});
        dev_->run(ops::Index(N) * kvd, ops::AttentionKeyValueGrad{dk_.data(), dv_.data(), ds_.data(), a.probs.data(), a.q.data(), d_att_.data(), g});
        dev_->run(ops::Index(N) * H * (hd / 2), ops::Rope{dq_.data(), rope_bwd_.data(), H, hd});
        dev_->run(ops::Index(N) * Hkv * (hd / 2), ops::Rope{dk_.data(), rope_bwd_.data(), Hkv, hd});
        dev_->fill(d_norm_in_.data(), d_norm_in_.size(), 0.0f);
        linear_backward(d_norm_in_.data(), G("self_attn.q_proj.weight"), dq_.data(), a.attn_in.data(), P("self_attn.q_proj.weight"), N, D, qd);
        linear_backward(d_norm_in_.data(), G("self_attn.k_proj.weight"), dk_.data(), a.attn_in.data(), P("self_attn.k_proj.weight"), N, D, kvd);
        linear_backward(d_norm_in_.data(), G("self_attn.v_proj.weight"), dv_.data(), a.attn_in.data(), P("self_attn.v_proj.weight"), N, D, kvd);
        if (l == 0 && cfg_.identity_end_norms)
            dev_->run(ops::Index(N) * D, ops::AddInto{dres_.data(), d_norm_in_.data()});
        else
            norm_backward(dres_.data(), layer_name(l, "input_layernorm.weight"), d_norm_in_.data(), resid_[l].data(), a.attn_rstd.data());
    }

    int checked_hidden(int i) const {
        detail::require(i >= 0 && i < static_cast<int>(hidden_layers_.size()), "train", [&] {
            return "hidden(" + std::to_string(i) + "): " + std::to_string(hidden_layers_.size()) +
                   " layers captured (see capture_hidden)";
        });
        return i;
    }

    Device* dev_;
    Config cfg_;
    DeviceTensors<Device> params_;
    int B_ = 0, T_ = 0;
    std::vector<int> hidden_layers_;
    std::vector<int> positions_host_;
    std::vector<std::uint8_t> mask_host_;
    bool per_sequence_ = false;

    Buffer<int> tokens_;
    Buffer<std::uint8_t> mask_;
    Buffer<float> rope_fwd_, rope_bwd_;
    std::vector<Buffer<float>> resid_;
    std::vector<Acts> acts_;
    Buffer<float> final_rstd_, final_, logits_, dlogits_, soft_;
    Buffer<float> mlp_out_, resid_feat_, feat_rstd_, feat_final_, dfeat_final_, dres_feat_;
    std::vector<Buffer<float>> dhidden_;
    Buffer<float> dinput_, dfinal_, dres_, d_att_, dq_, dk_, dv_, d_norm_in_, d_act_, d_gate_, d_up_, ds_;
};

/// The mean of per-row losses (device, N) over the n_counted rows that count (the others hold 0),
/// summed on the host in row order.
template <class Device>
double device_mean_of_rows(Device& dev, const float* loss, int N, int n_counted) {
    std::vector<float> host(static_cast<std::size_t>(N));
    dev.download(host.data(), loss, host.size());
    double sum = 0.0;
    for (float v : host) sum += v;
    return n_counted == 0 ? 0.0 : sum / n_counted;
}

/// Mean over counted rows of the soft cross-entropy (or, `with_entropy`, KL(p ‖ softmax z)) of device
/// logits z (N, V) against device laws p (N, V); adds weight · gradient into dz. `counted` (device, N)
/// may be null; n_counted is how many rows count.
template <class Device>
double device_soft_target_loss(Device& dev, float* dz, const float* z, const float* p, const std::uint8_t* counted,
                               int n_counted, int N, int V, double weight, bool with_entropy = false) {
    const double g = n_counted == 0 ? 0.0 : weight / n_counted;
    auto loss = dev.template alloc<float>(static_cast<std::size_t>(N));
    dev.run(N, ops::SoftTargetRow{dz, loss.data(), z, p, counted, V, static_cast<float>(g), with_entropy});
    return device_mean_of_rows(dev, loss.data(), N, n_counted);
}

/// Mean next-token cross-entropy of device logits z (N, V) against device targets (N, kIgnoreIndex
/// skipped, n_counted the others); adds weight · gradient into dz.
template <class Device>
double device_cross_entropy(Device& dev, float* dz, const float* z, const int* targets, int n_counted, int N, int V,
                            double weight = 1.0) {
    const double g = n_counted == 0 ? 0.0 : weight / n_counted;
    auto loss = dev.template alloc<float>(static_cast<std::size_t>(N));
    dev.run(N, ops::HardTargetRow{dz, loss.data(), z, targets, V, static_cast<float>(g)});
    return device_mean_of_rows(dev, loss.data(), N, n_counted);
}

/// SmoothL1 (β, mean over D) of device pred against target over counted rows; adds weight · gradient into dpred.
template <class Device>
double device_smooth_l1(Device& dev, float* dpred, const float* pred, const float* target, const std::uint8_t* counted,
                        int n_counted, int N, int D, double beta = 1.0, double weight = 1.0) {
    const double g = n_counted == 0 ? 0.0 : weight / (static_cast<double>(n_counted) * D);
    auto loss = dev.template alloc<float>(static_cast<std::size_t>(N));
    dev.run(N, ops::SmoothL1Row{dpred, loss.data(), pred, target, counted, D, static_cast<float>(beta), static_cast<float>(g)});
    return device_mean_of_rows(dev, loss.data(), N, n_counted);
}

/// How often the argmax of device logits (N, V) is the argmax of device laws (N, V) over the rows where
/// the host's `counted` (N) is 1.
template <class Device>
double device_top1_agreement(Device& dev, const float* logits, const float* probs, std::span<const std::uint8_t> counted, int V) {
    const int N = static_cast<int>(counted.size());
    auto hits = dev.template alloc<float>(counted.size());
    dev.run(N, ops::Top1Agrees{hits.data(), logits, probs, V});
    std::vector<float> host(counted.size());
    dev.download(host.data(), hits.data(), host.size());
    long agree = 0, rows = 0;
    for (std::size_t r = 0; r < counted.size(); ++r)
        if (counted[r]) agree += host[r] != 0.0f, ++rows;
    return rows == 0 ? 0.0 : double(agree) / rows;
}

}  // namespace specdec::train
