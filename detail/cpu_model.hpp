// specdec/detail/cpu_model.hpp — the float32 CPU reference Llama: one forward pass verifies a whole token tree.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "config.hpp"
#include "error.hpp"
#include "tree.hpp"
#include "views.hpp"
#include "weights.hpp"

namespace specdec {

namespace detail {

/// y (n, m) = x (n, k) · Wᵀ with W (m, k) row-major. Every matrix product of the model goes through
/// here, so one function decides how fast the CPU backend is.
inline void linear(float* y, const float* x, const float* W, int n, int k, int m) {
    for (int r = 0; r < n; ++r)
        for (int o = 0; o < m; ++o) {
            const float* w = W + static_cast<std::size_t>(o) * k;
            const float* xr = x + static_cast<std::size_t>(r) * k;
            float acc = 0.0f;
            for (int i = 0; i < k; ++i) acc += xr[i] * w[i];
            y[static_cast<std::size_t>(r) * m + o] = acc;
        }
}

inline void rmsnorm(float* out, const float* x, const float* weight, int d, float eps) {
    double ss = 0.0;
    for (int i = 0; i < d; ++i) ss += double(x[i]) * x[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / d) + eps);
    for (int i = 0; i < d; ++i) out[i] = x[i] * inv * weight[i];
}

/// HF Llama's rotate-half RoPE: dimension i pairs with i + hd/2 (not interleaved), so HF checkpoints
/// load without permuting q_proj/k_proj.
inline void rope(float* head, int head_dim, int pos, float theta) {
    const int half = head_dim / 2;
    for (int i = 0; i < half; ++i) {
        const float freq = std::pow(theta, -2.0f * i / head_dim);
        const float a = pos * freq, c = std::cos(a), s = std::sin(a);
        const float x0 = head[i], x1 = head[i + half];
        head[i] = x0 * c - x1 * s;
        head[i + half] = x1 * c + x0 * s;
    }
}

}  // namespace detail

/// Options that are not part of the checkpoint.
struct ModelOptions {
    int max_tree_nodes = 256;  // scratch KV rows for one forward beyond the committed context
};

/// The float32 reference model. KV cache: per layer (C, Hkv*hd) with C = max_position_embeddings +
/// max_tree_nodes; rows [0, T) are committed, rows T + i hold tree node i of the last forward.
class CpuModel {
public:
    CpuModel(Config config, Weights weights, ModelOptions options = {})
        : cfg_(config), w_(std::move(weights)), opt_(options) {
        cfg_.validate();
        validate(w_, cfg_);
        detail::require(opt_.max_tree_nodes > 0, "model", [&] {
            return "max_tree_nodes must be > 0, got " + std::to_string(opt_.max_tree_nodes);
        });
        capacity_ = cfg_.max_position_embeddings + opt_.max_tree_nodes;
        const std::size_t kv = static_cast<std::size_t>(cfg_.num_hidden_layers) * capacity_ * cfg_.kv_dim();
        k_cache_.assign(kv, 0.0f);
        v_cache_.assign(kv, 0.0f);
    }

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
        q_.resize(nn * H * hd);
        att_.resize(nn * H * hd);
        gate_.resize(nn * Fw);
        up_.resize(nn * Fw);
        logits_.resize(nn * V);
        hidden_.assign(hidden_layers_.size(), std::vector<float>(nn * D));
        if (n == 0) return Rows{{}, V};

        // Each node attends to the committed cache plus its ancestors (the tree mask, derived from parents).
        std::vector<std::vector<int>> visible(n);
        for (int i = 0; i < n; ++i) visible[i] = tree.path_to(first + i);

        for (int i = 0; i < n; ++i)
            std::copy_n(&w_.embed[static_cast<std::size_t>(tree[first + i].token) * D], D, &x_[i * D]);
        capture(0);
        for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
            const LayerWeights& lw = w_.layers[l];
            float* kc = layer_rows(k_cache_, l);
            float* vc = layer_rows(v_cache_, l);
            for (int i = 0; i < n; ++i) detail::rmsnorm(&xb_[i * D], &x_[i * D], lw.attn_norm.data(), D, cfg_.rms_norm_eps);
            float* k_new = kc + static_cast<std::size_t>(cache_len_ + first) * kvd;
            float* v_new = vc + static_cast<std::size_t>(cache_len_ + first) * kvd;
            detail::linear(q_.data(), xb_.data(), lw.wq.data(), n, D, H * hd);
            detail::linear(k_new, xb_.data(), lw.wk.data(), n, D, kvd);
            detail::linear(v_new, xb_.data(), lw.wv.data(), n, D, kvd);
            for (int i = 0; i < n; ++i) {
                const int pos = cache_len_ + tree[first + i].depth;
                for (int h = 0; h < H; ++h) detail::rope(&q_[(i * H + h) * hd], hd, pos, cfg_.rope_theta);
                for (int h = 0; h < cfg_.num_key_value_heads; ++h)
                    detail::rope(k_new + static_cast<std::size_t>(i) * kvd + h * hd, hd, pos, cfg_.rope_theta);
            }
            attend(kc, vc, visible);
            detail::linear(xb_.data(), att_.data(), lw.wo.data(), n, H * hd, D);
            for (std::size_t j = 0; j < nn * D; ++j) x_[j] += xb_[j];

            for (int i = 0; i < n; ++i) detail::rmsnorm(&xb_[i * D], &x_[i * D], lw.mlp_norm.data(), D, cfg_.rms_norm_eps);
            detail::linear(gate_.data(), xb_.data(), lw.w_gate.data(), n, D, Fw);
            detail::linear(up_.data(), xb_.data(), lw.w_up.data(), n, D, Fw);
            for (std::size_t j = 0; j < nn * Fw; ++j) gate_[j] = gate_[j] / (1.0f + std::exp(-gate_[j])) * up_[j];
            detail::linear(xb_.data(), gate_.data(), lw.w_down.data(), n, Fw, D);
            for (std::size_t j = 0; j < nn * D; ++j) x_[j] += xb_[j];
            if (l + 1 < cfg_.num_hidden_layers) capture(l + 1);
        }
        for (int i = 0; i < n; ++i) detail::rmsnorm(&xb_[i * D], &x_[i * D], w_.norm.data(), D, cfg_.rms_norm_eps);
        std::swap(x_, xb_);
        capture(cfg_.num_hidden_layers);  // HF's last hidden state is the normed one
        detail::linear(logits_.data(), x_.data(), w_.output_matrix().data(), n, D, V);
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

    /// att_ (n, H*hd): softmax(q·kᵀ/√hd)·v over committed rows and each node's visible tree rows.
    void attend(const float* kc, const float* vc, const std::vector<std::vector<int>>& visible) {
        const int n = static_cast<int>(visible.size()), H = cfg_.num_attention_heads, hd = cfg_.head_dim();
        const int kvd = cfg_.kv_dim(), group = H / cfg_.num_key_value_heads;
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::vector<float> scores;
        std::vector<int> rows;
        for (int i = 0; i < n; ++i) {
            rows.resize(cache_len_);
            for (int t = 0; t < cache_len_; ++t) rows[t] = t;
            for (int a : visible[i]) rows.push_back(cache_len_ + a);
            scores.resize(rows.size());
            for (int h = 0; h < H; ++h) {
                const float* q = &q_[(static_cast<std::size_t>(i) * H + h) * hd];
                const int kvh = h / group;
                float mx = -INFINITY;
                for (std::size_t r = 0; r < rows.size(); ++r) {
                    const float* k = kc + static_cast<std::size_t>(rows[r]) * kvd + kvh * hd;
                    float s = 0.0f;
                    for (int j = 0; j < hd; ++j) s += q[j] * k[j];
                    scores[r] = s * scale;
                    mx = std::max(mx, scores[r]);
                }
                float sum = 0.0f;
                for (float& s : scores) sum += (s = std::exp(s - mx));
                float* out = &att_[(static_cast<std::size_t>(i) * H + h) * hd];
                std::fill(out, out + hd, 0.0f);
                for (std::size_t r = 0; r < rows.size(); ++r) {
                    const float* v = vc + static_cast<std::size_t>(rows[r]) * kvd + kvh * hd;
                    const float p = scores[r] / sum;
                    for (int j = 0; j < hd; ++j) out[j] += p * v[j];
                }
            }
        }
    }

    Config cfg_;
    Weights w_;
    ModelOptions opt_;
    int capacity_ = 0;       // C
    int cache_len_ = 0;      // T
    int n_computed_ = 0;     // nodes of the current tree whose KV rows sit after the committed ones
    std::vector<float> k_cache_, v_cache_;  // (L, C, Hkv*hd)
    std::vector<float> x_, xb_;             // (n, D)
    std::vector<float> q_, att_;            // (n, H*hd)
    std::vector<float> gate_, up_;          // (n, F)
    std::vector<float> logits_;             // (n, V)
    std::vector<int> hidden_layers_;
    std::vector<std::vector<float>> hidden_;  // per captured layer: (n, D)
};

}  // namespace specdec
