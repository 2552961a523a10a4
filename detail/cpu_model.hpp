// specdec/detail/cpu_model.hpp — the float32 CPU reference Llama: one forward pass verifies a whole token tree.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bf16.hpp"
#include "config.hpp"
#include "error.hpp"
#include "matmul.hpp"
#include "thread_pool.hpp"
#include "tree.hpp"
#include "views.hpp"
#include "weights.hpp"

namespace specdec {

namespace detail {

inline void rmsnorm(float* out, const float* x, const float* weight, int d, float eps) {
    double ss = 0.0;
    for (int i = 0; i < d; ++i) ss += double(x[i]) * x[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / d) + eps);
    for (int i = 0; i < d; ++i) out[i] = x[i] * inv * weight[i];
}

/// HF Llama's rotate-half RoPE: dimension i pairs with i + hd/2 (not interleaved), so HF checkpoints
/// load without permuting q_proj/k_proj. `cs` holds (cos, sin) of pos * theta^(-2i/hd) for i < hd/2.
inline void rope(float* head, int head_dim, const float* cs) {
    const int half = head_dim / 2;
    for (int i = 0; i < half; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = head[i], x1 = head[i + half];
        head[i] = x0 * c - x1 * s;
        head[i + half] = x1 * c + x0 * s;
    }
}

/// A weight matrix (m, k) as the model multiplies it: float32, or bfloat16 widened in registers.
struct Matrix {
    const float* f32 = nullptr;
    std::vector<bf16> bf;  // (m, k) when stored as bfloat16
    int m = 0, k = 0;
};

}  // namespace detail

enum class WeightFormat {
    kF32,   // float32 matrices: the reference numerics
    kBF16,  // bfloat16 matrices, float32 activations and accumulation: half the bytes per decode step
};

/// Options that are not part of the checkpoint.
struct ModelOptions {
    int max_tree_nodes = 256;                    // scratch KV rows for one forward beyond the committed context
    WeightFormat weight_format = WeightFormat::kF32;
    ThreadPool* pool = nullptr;                  // runs the parallel loops; null = one thread (the caller's)
    bool reference = false;                      // plain-loop matrix products: the oracle the fast path is tested against
};

/// The float32 reference model. KV cache: per layer (C, Hkv*hd) with C = max_position_embeddings +
/// max_tree_nodes; rows [0, T) are committed, rows T + i hold tree node i of the last forward.
class CpuModel {
public:
    CpuModel(Config config, Weights weights, ModelOptions options = {})
        : cfg_(config), w_(std::move(weights)), opt_(options) {
        cfg_.validate();
        validate(w_, cfg_);
        if (opt_.pool == nullptr) {
            own_pool_ = std::make_unique<ThreadPool>(1);
            opt_.pool = own_pool_.get();
        }
        prepare_matrices();
        detail::require(opt_.max_tree_nodes > 0, "model", [&] {
            return "max_tree_nodes must be > 0, got " + std::to_string(opt_.max_tree_nodes);
        });
        capacity_ = cfg_.max_position_embeddings + opt_.max_tree_nodes;
        const std::size_t kv = static_cast<std::size_t>(cfg_.num_hidden_layers) * capacity_ * cfg_.kv_dim();
        k_cache_.assign(kv, 0.0f);
        v_cache_.assign(kv, 0.0f);
    }

    // Matrices point into this object's buffers: moving keeps them valid (vectors keep their heap
    // storage), copying would not.
    CpuModel(const CpuModel&) = delete;
    CpuModel& operator=(const CpuModel&) = delete;
    CpuModel(CpuModel&&) = default;
    CpuModel& operator=(CpuModel&&) = default;

    const Config& config() const { return cfg_; }
    const Weights& weights() const { return w_; }
    int vocab_size() const { return cfg_.vocab_size; }
    int cache_len() const { return cache_len_; }
    int context_size() const { return cfg_.max_position_embeddings; }

    /// Logits (N - first, V) for tree nodes first..N-1. Nodes before `first` must be exactly those of
    /// the previous forward (same tree, grown since): their KV rows are reused, so a drafter extends its
    /// tree one depth at a time without recomputing. The view lives until the next forward.
    Rows forward(const Tree& tree, int first = 0) {
        const int N = tree.size(), n = N - first;
        detail::require(first >= 0 && first <= n_computed_ && first <= N, "model", [&] {
            return "forward from node " + std::to_string(first) + ", but only " + std::to_string(n_computed_) +
                   " nodes of this tree were computed before (pass 0 for a new tree)";
        });
        tree.validate(cfg_.vocab_size);
        detail::require(cache_len_ + N <= capacity_, "model", [&] {
            return "tree of " + std::to_string(N) + " nodes does not fit: cache holds " + std::to_string(cache_len_) +
                   " tokens, capacity is " + std::to_string(capacity_) + " (max_position_embeddings " +
                   std::to_string(cfg_.max_position_embeddings) + " + max_tree_nodes " +
                   std::to_string(opt_.max_tree_nodes) + ")";
        });
        n_computed_ = N;
        const int D = cfg_.hidden_size, hd = cfg_.head_dim(), H = cfg_.num_attention_heads;
        const int kvd = cfg_.kv_dim(), Fw = cfg_.intermediate_size, V = cfg_.vocab_size;
        const std::size_t nn = static_cast<std::size_t>(std::max(n, 0));
        x_.assign(nn * D, 0.0f);
        xb_.resize(nn * D);
        qkv_.resize(nn * (H * hd + 2 * kvd));
        q_.resize(nn * H * hd);
        att_.resize(nn * H * hd);
        gate_up_.resize(nn * 2 * Fw);
        hidden_mlp_.resize(nn * Fw);
        logits_.resize(nn * V);
        hidden_.assign(hidden_layers_.size(), std::vector<float>(nn * D));
        if (n == 0) return Rows{{}, V};

        // Each node attends to the committed cache plus its ancestors (the tree mask, derived from parents).
        std::vector<std::vector<int>> visible(n);
        for (int i = 0; i < n; ++i) visible[i] = tree.path_to(first + i);
        // RoPE angles once per node (position cache_len + depth), shared by every head and layer.
        rope_cs_.resize(nn * hd);
        for (int i = 0; i < n; ++i) {
            const int pos = cache_len_ + tree[first + i].depth;
            for (int j = 0; j < hd / 2; ++j) {
                const double a = pos * inv_freq_[j];
                rope_cs_[static_cast<std::size_t>(i) * hd + 2 * j] = static_cast<float>(std::cos(a));
                rope_cs_[static_cast<std::size_t>(i) * hd + 2 * j + 1] = static_cast<float>(std::sin(a));
            }
        }

        for (int i = 0; i < n; ++i)
            std::copy_n(&w_.embed[static_cast<std::size_t>(tree[first + i].token) * D], D, &x_[i * D]);
        capture(0);
        for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
            const LayerWeights& lw = w_.layers[l];
            float* kc = layer_rows(k_cache_, l);
            float* vc = layer_rows(v_cache_, l);
            for (int i = 0; i < n; ++i) detail::rmsnorm(&xb_[i * D], &x_[i * D], lw.attn_norm.data(), D, cfg_.rms_norm_eps);
            // q, k and v in one product over the fused (H*hd + 2*Hkv*hd, D) matrix.
            const int qkv_dim = H * hd + 2 * kvd;
            linear(qkv_.data(), xb_.data(), mats_[l].qkv, n);
            for (int i = 0; i < n; ++i) {
                const float* row = &qkv_[static_cast<std::size_t>(i) * qkv_dim];
                const float* cs = &rope_cs_[static_cast<std::size_t>(i) * hd];
                float* q = &q_[static_cast<std::size_t>(i) * H * hd];
                float* k = kc + static_cast<std::size_t>(cache_len_ + first + i) * kvd;
                float* v = vc + static_cast<std::size_t>(cache_len_ + first + i) * kvd;
                std::copy_n(row, H * hd, q);
                std::copy_n(row + H * hd, kvd, k);
                std::copy_n(row + H * hd + kvd, kvd, v);
                for (int h = 0; h < H; ++h) detail::rope(q + h * hd, hd, cs);
                for (int h = 0; h < cfg_.num_key_value_heads; ++h) detail::rope(k + h * hd, hd, cs);
            }
            attend(kc, vc, visible);
            linear(xb_.data(), att_.data(), mats_[l].wo, n);
            for (std::size_t j = 0; j < nn * D; ++j) x_[j] += xb_[j];

            // SwiGLU over the fused (2F, D) gate|up matrix.
            for (int i = 0; i < n; ++i) detail::rmsnorm(&xb_[i * D], &x_[i * D], lw.mlp_norm.data(), D, cfg_.rms_norm_eps);
            linear(gate_up_.data(), xb_.data(), mats_[l].gate_up, n);
            for (int i = 0; i < n; ++i) {
                const float* g = &gate_up_[static_cast<std::size_t>(i) * 2 * Fw];
                float* h = &hidden_mlp_[static_cast<std::size_t>(i) * Fw];
                for (int j = 0; j < Fw; ++j) h[j] = g[j] / (1.0f + std::exp(-g[j])) * g[Fw + j];
            }
            linear(xb_.data(), hidden_mlp_.data(), mats_[l].down, n);
            for (std::size_t j = 0; j < nn * D; ++j) x_[j] += xb_[j];
            if (l + 1 < cfg_.num_hidden_layers) capture(l + 1);
        }
        for (int i = 0; i < n; ++i) detail::rmsnorm(&xb_[i * D], &x_[i * D], w_.norm.data(), D, cfg_.rms_norm_eps);
        std::swap(x_, xb_);
        capture(cfg_.num_hidden_layers);  // HF's last hidden state is the normed one
        linear(logits_.data(), x_.data(), head_, n);
        return Rows{logits_, V};
    }

    /// Keeps the KV rows of `path` (node indices of the last forward's tree, root first, each the
    /// parent of the next) as the next committed tokens, and drops every other tree row.
    void commit(std::span<const int> path) {
        for (int j = 0; j < static_cast<int>(path.size()); ++j)
            detail::require(path[j] >= 0 && path[j] < n_computed_, "model", [&] {
                return "commit: path entry " + std::to_string(j) + " is node " + std::to_string(path[j]) +
                       ", but the last forward computed " + std::to_string(n_computed_) + " nodes";
            });
        detail::require(cache_len_ + static_cast<int>(path.size()) <= cfg_.max_position_embeddings, "model", [&] {
            return "commit of " + std::to_string(path.size()) + " tokens overflows the context: " +
                   std::to_string(cache_len_) + " already committed, max_position_embeddings is " +
                   std::to_string(cfg_.max_position_embeddings);
        });
        for (int j = 1; j < static_cast<int>(path.size()); ++j)
            detail::require(path[j] > path[j - 1], "model", [&] {
                return "commit: path is not root-first (node " + std::to_string(path[j]) + " follows node " +
                       std::to_string(path[j - 1]) + ")";
            });
        // Sources are at or after their destinations and increase, so an in-order move never
        // overwrites a row it still has to read.
        const int kvd = cfg_.kv_dim();
        for (int l = 0; l < cfg_.num_hidden_layers; ++l)
            for (std::vector<float>* cache : {&k_cache_, &v_cache_}) {
                float* rows = layer_rows(*cache, l);
                for (int j = 0; j < static_cast<int>(path.size()); ++j)
                    if (path[j] != j)
                        std::copy_n(rows + static_cast<std::size_t>(cache_len_ + path[j]) * kvd, kvd,
                                    rows + static_cast<std::size_t>(cache_len_ + j) * kvd);
            }
        cache_len_ += static_cast<int>(path.size());
        n_computed_ = 0;
    }

    /// Forgets committed tokens beyond the first n.
    void truncate(int n) {
        detail::require(n >= 0 && n <= cache_len_, "model", [&] {
            return "truncate to " + std::to_string(n) + " tokens, but the cache holds " + std::to_string(cache_len_);
        });
        cache_len_ = n;
        n_computed_ = 0;
    }
    void reset() { truncate(0); }

    // ---- ExposesKV --------------------------------------------------------------------------------
    int num_layers() const { return cfg_.num_hidden_layers; }
    KvView kv(int layer) const {
        detail::require(layer >= 0 && layer < cfg_.num_hidden_layers, "model", [&] {
            return "kv(" + std::to_string(layer) + "): the model has " + std::to_string(cfg_.num_hidden_layers) + " layers";
        });
        const std::size_t off = static_cast<std::size_t>(layer) * capacity_ * cfg_.kv_dim();
        const std::size_t len = static_cast<std::size_t>(cache_len_) * cfg_.kv_dim();
        return {std::span<const float>(k_cache_).subspan(off, len), std::span<const float>(v_cache_).subspan(off, len),
                cache_len_, cfg_.num_key_value_heads, cfg_.head_dim()};
    }

    // ---- ExposesHidden ----------------------------------------------------------------------------
    /// Chooses which hidden states the next forwards keep, HF numbering: 0 = embeddings, l = output of
    /// layer l, L = the final normed state. EDD reads L-4 (its 4th-to-last layer), EAGLE/FSPAD read L.
    void capture_hidden(std::vector<int> layers) {
        for (int l : layers)
            detail::require(l >= 0 && l <= cfg_.num_hidden_layers, "model", [&] {
                return "capture_hidden: layer " + std::to_string(l) + " is outside [0, " +
                       std::to_string(cfg_.num_hidden_layers) + "]";
            });
        hidden_layers_ = std::move(layers);
        hidden_.clear();
    }
    /// (N - first, D) hidden states of the last forward for the i-th captured layer.
    Rows hidden(int i) const {
        detail::require(i >= 0 && i < static_cast<int>(hidden_.size()), "model", [&] {
            return "hidden(" + std::to_string(i) + "): " + std::to_string(hidden_.size()) +
                   " layers captured in the last forward (see capture_hidden)";
        });
        return Rows{hidden_[i], cfg_.hidden_size};
    }

private:
    float* layer_rows(std::vector<float>& cache, int layer) {
        return cache.data() + static_cast<std::size_t>(layer) * capacity_ * cfg_.kv_dim();
    }

    void capture(int layer) {
        for (std::size_t i = 0; i < hidden_layers_.size(); ++i)
            if (hidden_layers_[i] == layer) std::copy(x_.begin(), x_.end(), hidden_[i].begin());
    }

    /// y (n, m) = x (n, k) · Wᵀ: every matrix product of the model goes through here.
    void linear(float* y, const float* x, const detail::Matrix& w, int n) {
        if (opt_.reference) {
            if (w.bf.empty()) matmul_reference(y, x, w.f32, n, w.k, w.m);
            else matmul_reference(y, x, w.bf.data(), n, w.k, w.m);
        } else {
            if (w.bf.empty()) matmul(*opt_.pool, y, x, w.f32, n, w.k, w.m);
            else matmul(*opt_.pool, y, x, w.bf.data(), n, w.k, w.m);
        }
    }

    /// Fuses q|k|v and gate|up into single matrices (fewer, larger products: one pass over x and one
    /// thread dispatch instead of three), and converts to bfloat16 when asked.
    void prepare_matrices() {
        const int D = cfg_.hidden_size, Fw = cfg_.intermediate_size, qd = cfg_.num_attention_heads * cfg_.head_dim();
        const int kvd = cfg_.kv_dim();
        const bool bf = opt_.weight_format == WeightFormat::kBF16;
        const auto make = [&](std::vector<float>* store, std::vector<const std::vector<float>*> parts, int m, int k) {
            detail::Matrix mat;
            mat.m = m;
            mat.k = k;
            if (parts.size() == 1 && !bf) {
                mat.f32 = parts[0]->data();
                return mat;
            }
            if (bf) {
                mat.bf.reserve(static_cast<std::size_t>(m) * k);
                for (const auto* p : parts)
                    for (float v : *p) mat.bf.push_back(to_bf16(v));
            } else {
                store->clear();
                for (const auto* p : parts) store->insert(store->end(), p->begin(), p->end());
                mat.f32 = store->data();
            }
            return mat;
        };
        fused_.resize(2 * static_cast<std::size_t>(cfg_.num_hidden_layers));
        mats_.resize(cfg_.num_hidden_layers);
        for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
            const LayerWeights& lw = w_.layers[l];
            mats_[l].qkv = make(&fused_[2 * l], {&lw.wq, &lw.wk, &lw.wv}, qd + 2 * kvd, D);
            mats_[l].wo = make(nullptr, {&lw.wo}, D, qd);
            mats_[l].gate_up = make(&fused_[2 * l + 1], {&lw.w_gate, &lw.w_up}, 2 * Fw, D);
            mats_[l].down = make(nullptr, {&lw.w_down}, D, Fw);
        }
        head_ = make(nullptr, {&w_.output_matrix()}, cfg_.vocab_size, D);
        inv_freq_.resize(cfg_.head_dim() / 2);
        for (int j = 0; j < cfg_.head_dim() / 2; ++j)
            inv_freq_[j] = std::pow(static_cast<double>(cfg_.rope_theta), -2.0 * j / cfg_.head_dim());
    }

    /// att_ (n, H*hd): softmax(q·kᵀ/√hd)·v over committed rows and each node's visible tree rows.
    /// One task per (node, head); scores live in scores_ (n*H, T + depth + 1).
    void attend(const float* kc, const float* vc, const std::vector<std::vector<int>>& visible) {
        const int n = static_cast<int>(visible.size()), H = cfg_.num_attention_heads, hd = cfg_.head_dim();
        const int kvd = cfg_.kv_dim(), group = H / cfg_.num_key_value_heads, T = cache_len_;
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::size_t stride = 0;
        for (const auto& v : visible) stride = std::max(stride, static_cast<std::size_t>(T) + v.size());
        scores_.resize(static_cast<std::size_t>(n) * H * stride);
        const auto task = [&](int t) {
            const int i = t / H, h = t % H, kvh = h / group;
            const float* q = &q_[(static_cast<std::size_t>(i) * H + h) * hd];
            float* s = &scores_[static_cast<std::size_t>(t) * stride];
            const auto key_row = [&](std::size_t r) { return static_cast<std::size_t>(r < static_cast<std::size_t>(T) ? r : T + visible[i][r - T]); };
            const std::size_t len = T + visible[i].size();
            float mx = -INFINITY;
            for (std::size_t r = 0; r < len; ++r) {
                s[r] = dot(q, kc + key_row(r) * kvd + kvh * hd, hd) * scale;
                mx = std::max(mx, s[r]);
            }
            float sum = 0.0f;
            for (std::size_t r = 0; r < len; ++r) sum += (s[r] = std::exp(s[r] - mx));
            float* out = &att_[(static_cast<std::size_t>(i) * H + h) * hd];
            std::fill(out, out + hd, 0.0f);
            const float inv = 1.0f / sum;
            for (std::size_t r = 0; r < len; ++r) axpy(out, s[r] * inv, vc + key_row(r) * kvd + kvh * hd, hd);
        };
        if (opt_.reference) {
            for (int t = 0; t < n * H; ++t) task(t);
        } else {
            opt_.pool->parallel_for(n * H, task);
        }
    }

    struct LayerMatrices {
        detail::Matrix qkv, wo, gate_up, down;
    };

    Config cfg_;
    Weights w_;
    ModelOptions opt_;
    std::unique_ptr<ThreadPool> own_pool_;    // when the caller gave none
    std::vector<LayerMatrices> mats_;         // per layer, views into w_ or fused_ (or bf16 copies)
    std::vector<std::vector<float>> fused_;   // per layer: (H*hd + 2*Hkv*hd, D) and (2F, D) in float32
    detail::Matrix head_;                     // (V, D)
    std::vector<double> inv_freq_;            // (hd/2) RoPE frequencies
    std::vector<float> rope_cs_;              // (n, hd/2, 2) cos, sin per node
    int capacity_ = 0;       // C
    int cache_len_ = 0;      // T
    int n_computed_ = 0;     // nodes of the current tree whose KV rows sit after the committed ones
    std::vector<float> k_cache_, v_cache_;  // (L, C, Hkv*hd)
    std::vector<float> x_, xb_;             // (n, D)
    std::vector<float> qkv_;                // (n, H*hd + 2*Hkv*hd)
    std::vector<float> q_, att_;            // (n, H*hd)
    std::vector<float> scores_;             // (n*H, T + depth + 1)
    std::vector<float> gate_up_;            // (n, 2F)
    std::vector<float> hidden_mlp_;         // (n, F)
    std::vector<float> logits_;             // (n, V)
    std::vector<int> hidden_layers_;
    std::vector<std::vector<float>> hidden_;  // per captured layer: (n, D)
};

}  // namespace specdec
