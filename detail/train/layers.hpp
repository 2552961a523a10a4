// specdec/detail/train/layers.hpp — the layers of a Llama and their hand-written backward passes, llm.c style.
// SPDX-License-Identifier: MIT
#pragma once

// Every layer is a pair of free functions on plain row-major buffers, as in llm.c's train_gpt2.c:
// `X_forward` writes its outputs (and whatever its backward needs, e.g. the RMSNorm's 1/rms), and
// `X_backward` ADDS its input gradients into the buffers it is given (dx += ..., dW += ...), so a
// tensor used twice (a tied embedding, a residual stream, k and v rows shared by several heads) gets
// the sum of its gradients without bookkeeping. Zeroing is the caller's job.
//
// Functions are templates on the float type T, written as plain loops: the gradient checks in
// tests/train/test_train.cpp instantiate double so that finite differences are exact to ~1e-8 instead
// of ~1e-3, and these loops are the oracle of the fast path. For float, `fast` (the default) runs
// the products on gemm.hpp's micro-kernel and the other steps on kernels.hpp's AVX-512 code where it
// runs, within float rounding of the loops (tests hold each to them); fast = false keeps the loops,
// with the products through `specdec::matmul` on transposed copies.
//
// Shape letters: N rows (= B*T tokens), B sequences, T (Tq, Tk) positions, D width, F SwiGLU width,
// H heads, Hkv kv-heads, hd head size, V vocab, K top-k entries.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/error.hpp"
#include "../model/matmul.hpp"
#include "../model/row_ops.hpp"
#include "../model/softmax.hpp"
#include "../model/thread_pool.hpp"
#include "gemm.hpp"
#include "kernels.hpp"

namespace specdec {

namespace detail {

// ---------------------------------------------------------------------------------------------------
// Small kernels shared by the layers (float goes to the SIMD helpers of matmul.hpp, double stays plain)

/// y (n, m) = x (n, k) · Wᵀ with W (m, k): the fast GEMM for float, plain loops for double.
inline void gemm_nt(ThreadPool& pool, float* y, const float* x, const float* W, int n, int k, int m) {
    matmul(pool, y, x, W, n, k, m);
}
inline void gemm_nt(ThreadPool&, double* y, const double* x, const double* W, int n, int k, int m) {
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < m; ++j) {
            double s = 0.0;
            for (int p = 0; p < k; ++p)
                s += x[static_cast<std::size_t>(i) * k + p] * W[static_cast<std::size_t>(j) * k + p];
            y[static_cast<std::size_t>(i) * m + j] = s;
        }
}

inline float vec_dot(const float* a, const float* b, int n) { return dot(a, b, n); }
inline double vec_dot(const double* a, const double* b, int n) {
    double s = 0.0;
    for (int i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}
inline void vec_axpy(float* y, float alpha, const float* x, int n) { axpy(y, alpha, x, n); }
inline void vec_axpy(double* y, double alpha, const double* x, int n) {
    for (int i = 0; i < n; ++i) y[i] += alpha * x[i];
}

/// Calls f(r0, r1) on chunks of [0, n) rows, a few chunks per thread. Each row is written by one task,
/// so results do not depend on the thread count.
template <class F>
void parallel_rows(ThreadPool& pool, int n, F&& f) {
    if (n <= 0) return;
    const int chunks = std::min(n, 4 * pool.size());
    const int per = (n + chunks - 1) / chunks;
    pool.parallel_for((n + per - 1) / per, [&](int c) { f(c * per, std::min(n, (c + 1) * per)); });
}

/// dst[0, n) = value, in chunks over the pool: a training step zeroes or copies ~30 MB of activation
/// gradients and residuals per layer at the demo target's shape, which on one thread left the other idle.
template <class T>
void fill(ThreadPool& pool, T* dst, std::size_t n, T value) {
    constexpr std::size_t kChunk = 1 << 16;
    pool.parallel_for(static_cast<int>((n + kChunk - 1) / kChunk), [&](int c) {
        std::fill(dst + c * kChunk, dst + std::min(n, (c + 1) * kChunk), value);
    });
}
template <class T>
void fill(ThreadPool& pool, std::vector<T>& v, T value) {
    fill(pool, v.data(), v.size(), value);
}

/// dst[0, n) = src[0, n), in chunks over the pool.
template <class T>
void copy(ThreadPool& pool, T* dst, const T* src, std::size_t n) {
    constexpr std::size_t kChunk = 1 << 16;
    pool.parallel_for(static_cast<int>((n + kChunk - 1) / kChunk), [&](int c) {
        std::copy(src + c * kChunk, src + std::min(n, (c + 1) * kChunk), dst + c * kChunk);
    });
}

/// Rows [r0, r1) of in (rows, cols) into columns [r0, r1) of out (cols, rows), in square tiles so
/// that reads and writes both stay in L1. Each output row is written contiguously.
template <class T>
void transpose_band(T* __restrict out, const T* __restrict in, int rows, int cols, int r0, int r1) {
    constexpr int kTile = 32;
    for (int c0 = 0; c0 < cols; c0 += kTile) {
        const int c1 = std::min(cols, c0 + kTile);
        for (int c = c0; c < c1; ++c)
            for (int r = r0; r < r1; ++r)
                out[static_cast<std::size_t>(c) * rows + r] = in[static_cast<std::size_t>(r) * cols + c];
    }
}

/// out (cols, rows) = in (rows, cols)ᵀ, bands of 32 rows in parallel.
template <class T>
void transpose(ThreadPool& pool, T* out, const T* in, int rows, int cols) {
    constexpr int kBand = 32;
    pool.parallel_for((rows + kBand - 1) / kBand, [=](int band) {
        transpose_band(out, in, rows, cols, band * kBand, std::min(rows, (band + 1) * kBand));
    });
}

template <class T>
T* grow(std::vector<T>& v, std::size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

// Loss helpers: log-softmax denominators and deterministic means over rows.

/// log Σ_j exp(z_j) in double, the denominator of a row's log-softmax.
template <class T>
double log_sum_exp(const T* z, int V) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < V; ++j) mx = std::max(mx, double(z[j]));
    double s = 0.0;
    for (int j = 0; j < V; ++j) s += std::exp(double(z[j]) - mx);
    return mx + std::log(s);
}

/// Runs row_loss(r) -> (counted, value) on all rows in parallel, sums values in row order (so the
/// result does not depend on the thread count) and returns the mean over counted rows.
struct RowLoss {
    bool counted = false;
    double value = 0.0;
};

template <class F>
double mean_over_rows(ThreadPool& pool, int N, F&& row_loss) {
    std::vector<RowLoss> rows(N);
    parallel_rows(pool, N, [&](int r0, int r1) {
        for (int r = r0; r < r1; ++r) rows[r] = row_loss(r);
    });
    double sum = 0.0;
    int n = 0;
    for (const RowLoss& r : rows)
        if (r.counted) sum += r.value, ++n;
    return n == 0 ? 0.0 : sum / n;
}

/// Rows a row-masked loss counts: all when row_mask is null.
inline int count_rows(const std::uint8_t* row_mask, int N) {
    if (row_mask == nullptr) return N;
    int n = 0;
    for (int r = 0; r < N; ++r) n += row_mask[r] != 0;
    return n;
}

}  // namespace detail

namespace train {

/// Scratch memory the plain linear backward needs for its transposes and products; reuse one across
/// calls (the fast path keeps its own).
template <class T>
struct LinearScratch {
    std::vector<T> w_t;     // (k, m) Wᵀ
    std::vector<T> dy_t;    // (m, n) dyᵀ
    std::vector<T> x_t;     // (k, n) xᵀ
    std::vector<T> product; // (n, k) or (m, k) before it is added in
};

// ---------------------------------------------------------------------------------------------------
// Embedding

/// out (N, D) = embed[tokens] for rows with tokens[i] >= 0; rows with a negative token are left as
/// they are (the model fills them from its `input_embeddings`, EDD's soft prompt).
template <class T>
void embedding_forward(T* out, const int* tokens, const T* embed, int N, int D, int V) {
    for (int i = 0; i < N; ++i) {
        if (tokens[i] < 0) continue;
        detail::require(tokens[i] < V, "train", [&] {
            return "token " + std::to_string(tokens[i]) + " at row " + std::to_string(i) +
                   " is outside the vocabulary of " + std::to_string(V);
        });
        std::copy_n(embed + static_cast<std::size_t>(tokens[i]) * D, D, out + static_cast<std::size_t>(i) * D);
    }
}

/// dembed (V, D) += scatter of dout (N, D) rows by token. Rows in order (two rows may share a token),
/// the columns split over the pool.
template <class T>
void embedding_backward(ThreadPool& pool, T* dembed, const T* dout, const int* tokens, int N, int D) {
    constexpr int kColumns = 64;
    pool.parallel_for((D + kColumns - 1) / kColumns, [&](int c) {
        const int c0 = c * kColumns, width = std::min(D, c0 + kColumns) - c0;
        for (int i = 0; i < N; ++i)
            if (tokens[i] >= 0)
                detail::vec_axpy(dembed + static_cast<std::size_t>(tokens[i]) * D + c0, T(1),
                                 dout + static_cast<std::size_t>(i) * D + c0, width);
    });
}

// ---------------------------------------------------------------------------------------------------
// RMSNorm: out = x / sqrt(mean(x²) + eps) · w, exactly the arithmetic of CpuModel's rmsnorm

/// out (N, D), rstd (N) = 1/rms per row (kept for the backward), from x (N, D) and weight (D).
template <class T>
void rmsnorm_forward(ThreadPool& pool, T* out, T* rstd, const T* x, const T* weight, int N, int D, float eps,
                     bool fast = true) {
#if defined(__x86_64__)
    if constexpr (std::is_same_v<T, float>)
        if (fast && detail::train_kernels_available())
            return detail::parallel_rows(pool, N, [&](int r0, int r1) {
                detail::rmsnorm_forward_avx512(out, rstd, x, weight, D, eps, r0, r1);
            });
#endif
    detail::parallel_rows(pool, N, [&](int r0, int r1) {
        for (int r = r0; r < r1; ++r) {
            const T* xr = x + static_cast<std::size_t>(r) * D;
            T* o = out + static_cast<std::size_t>(r) * D;
            const T inv = T(1) / std::sqrt(static_cast<T>(detail::sum_squares(xr, D) / D) + static_cast<T>(eps));
            rstd[r] = inv;
            for (int i = 0; i < D; ++i) o[i] = xr[i] * inv * weight[i];
        }
    });
}

/// dx (N, D) += and dweight (D) += from dout (N, D). With r = rstd and out_i = x_i r w_i:
/// dx_j = r w_j dout_j - r³ x_j / D · Σ_i dout_i w_i x_i, dw_i = Σ_rows dout_i x_i r.
template <class T>
void rmsnorm_backward(ThreadPool& pool, T* dx, T* dweight, const T* dout, const T* x, const T* weight, const T* rstd,
                      int N, int D, bool fast = true) {
#if defined(__x86_64__)
    if constexpr (std::is_same_v<T, float>)
        if (fast && detail::train_kernels_available()) {
            // dweight as a sum over fixed chunks of rows, each chunk in row order, then the chunks in
            // order: the same bits on any number of threads.
            constexpr int kChunk = 32;
            const int chunks = (N + kChunk - 1) / kChunk;
            std::vector<float> partial(dweight != nullptr ? static_cast<std::size_t>(chunks) * D : 0);
            pool.parallel_for(chunks, [&](int c) {
                detail::rmsnorm_backward_avx512(dx, dweight != nullptr ? partial.data() + static_cast<std::size_t>(c) * D : nullptr,
                                                dout, x, weight, rstd, D, c * kChunk, std::min(N, (c + 1) * kChunk));
            });
            if (dweight != nullptr)
                for (int c = 0; c < chunks; ++c)
                    for (int i = 0; i < D; ++i) dweight[i] += partial[static_cast<std::size_t>(c) * D + i];
            return;
        }
#endif
    detail::parallel_rows(pool, N, [&](int r0, int r1) {
        for (int r = r0; r < r1; ++r) {
            const T* xr = x + static_cast<std::size_t>(r) * D;
            const T* g = dout + static_cast<std::size_t>(r) * D;
            T* d = dx + static_cast<std::size_t>(r) * D;
            double s = 0.0;
            for (int i = 0; i < D; ++i) s += double(g[i]) * weight[i] * xr[i];
            const T inv = rstd[r], c = static_cast<T>(s / D) * inv * inv * inv;
            for (int i = 0; i < D; ++i) d[i] += inv * weight[i] * g[i] - c * xr[i];
        }
    });
    if (dweight == nullptr) return;
    // Rows in order on one thread: a sum over rows split across threads would depend on the thread count.
    for (int r = 0; r < N; ++r) {
        const T* xr = x + static_cast<std::size_t>(r) * D;
        const T* g = dout + static_cast<std::size_t>(r) * D;
        for (int i = 0; i < D; ++i) dweight[i] += g[i] * xr[i] * rstd[r];
    }
}

// ---------------------------------------------------------------------------------------------------
// Linear: y = x · Wᵀ (nn.Linear without bias, W stored (out_features, in_features) as in HF)

/// y (n, m) = x (n, k) · W (m, k)ᵀ.
template <class T>
void linear_forward(ThreadPool& pool, T* y, const T* x, const T* W, int n, int k, int m, bool fast = true) {
    if constexpr (std::is_same_v<T, float>)
        if (fast) return detail::gemm(pool, detail::GemmOp::kNT, y, x, W, n, k, m, false);
    detail::gemm_nt(pool, y, x, W, n, k, m);
}

/// y (n, m) += x (n, k) · W (m, k)ᵀ: a sublayer's output joining the residual stream y. The fast path
/// adds in the product's own stores, with no pass of its own.
template <class T>
void linear_forward_add(ThreadPool& pool, T* y, const T* x, const T* W, int n, int k, int m, bool fast = true) {
    if constexpr (std::is_same_v<T, float>)
        if (fast) return detail::gemm(pool, detail::GemmOp::kNT, y, x, W, n, k, m, true);
    std::vector<T> product(static_cast<std::size_t>(n) * m);
    detail::gemm_nt(pool, product.data(), x, W, n, k, m);
    for (std::size_t i = 0; i < product.size(); ++i) y[i] += product[i];
}

/// dx (n, k) += dy (n, m) · W and dW (m, k) += dyᵀ · x; either may be null (an input that needs no
/// gradient, a frozen weight), as llm.c's matmul_backward. The fast path runs both on gemm's kernel,
/// adding into dx and dW as it stores; the plain one transposes W, dy and x so that matmul can take
/// them, then adds its products.
template <class T>
void linear_backward(ThreadPool& pool, T* dx, T* dW, const T* dy, const T* x, const T* W, int n, int k, int m,
                     LinearScratch<T>& s, bool fast = true) {
    if (n == 0) return;
    if constexpr (std::is_same_v<T, float>)
        if (fast) {
            if (dx != nullptr) detail::gemm(pool, detail::GemmOp::kNN, dx, dy, W, n, m, k, true);
            if (dW != nullptr) detail::gemm(pool, detail::GemmOp::kTN, dW, dy, x, m, n, k, true);
            return;
        }
    const std::size_t nk = static_cast<std::size_t>(n) * k, mk = static_cast<std::size_t>(m) * k;
    if (dx != nullptr) {
        T* w_t = detail::grow(s.w_t, mk);
        T* p = detail::grow(s.product, std::max(nk, mk));
        detail::transpose(pool, w_t, W, m, k);
        detail::gemm_nt(pool, p, dy, w_t, n, m, k);  // (n, k) = dy (n, m) · (Wᵀ (k, m))ᵀ
        detail::parallel_rows(pool, n, [&](int r0, int r1) {
            for (std::size_t i = static_cast<std::size_t>(r0) * k; i < static_cast<std::size_t>(r1) * k; ++i)
                dx[i] += p[i];
        });
    }
    if (dW != nullptr) {
        T* dy_t = detail::grow(s.dy_t, static_cast<std::size_t>(m) * n);
        T* x_t = detail::grow(s.x_t, nk);
        T* p = detail::grow(s.product, std::max(nk, mk));
        detail::transpose(pool, dy_t, dy, n, m);
        detail::transpose(pool, x_t, x, n, k);
        detail::gemm_nt(pool, p, dy_t, x_t, m, n, k);  // (m, k) = dyᵀ (m, n) · (xᵀ (k, n))ᵀ
        detail::parallel_rows(pool, m, [&](int r0, int r1) {
            for (std::size_t i = static_cast<std::size_t>(r0) * k; i < static_cast<std::size_t>(r1) * k; ++i)
                dW[i] += p[i];
        });
    }
}

// ---------------------------------------------------------------------------------------------------
// RoPE, HF's rotate-half convention (dimension i pairs with i + hd/2), in place

/// The rotations of a batch's rows, computed once per forward and used by every layer's q and k,
/// forward and backward: (cos, sin) of position · θ^(-2i/hd), the angle in double and stored as float,
/// exactly CpuModel's rope_table, so the trained model and the inference model rotate alike.
struct RopeTable {
    int hd = 0;
    std::vector<float> forward;   // (N, hd/2, 2) (cos, sin)
    std::vector<float> backward;  // (N, hd/2, 2) (cos, -sin): the inverse rotation
};

/// `scale`: YaRN's attention factor (rope_attention_factor); the backward table carries it too, as the
/// derivative of scale · R x is scale · R^T.
inline RopeTable rope_table(std::span<const int> positions, std::span<const double> inv_freq, double scale = 1.0) {
    RopeTable t{static_cast<int>(2 * inv_freq.size()), {}, {}};
    detail::rope_table(t.forward, positions, inv_freq, scale);
    t.backward = t.forward;
    for (std::size_t i = 1; i < t.backward.size(); i += 2) t.backward[i] = -t.backward[i];
    return t;
}

/// The table for theta^(-2j/hd), no scaling.
inline RopeTable rope_table(std::span<const int> positions, int hd, float theta) {
    std::vector<double> inv_freq(static_cast<std::size_t>(hd / 2));
    for (int j = 0; j < hd / 2; ++j) inv_freq[j] = std::pow(static_cast<double>(theta), -2.0 * j / hd);
    return rope_table(positions, inv_freq);
}

/// x (N, n_heads, hd) rotated in place by cs (N, hd/2, 2), a RopeTable's forward or backward.
template <class T>
void rope_rows(ThreadPool& pool, T* x, const std::vector<float>& cs, int N, int n_heads, int hd, bool fast) {
    const int half = hd / 2;
    detail::parallel_rows(pool, N, [&](int r0, int r1) {
        for (int r = r0; r < r1; ++r) {
            const float* c = cs.data() + static_cast<std::size_t>(r) * hd;
            for (int h = 0; h < n_heads; ++h) {
                T* head = x + (static_cast<std::size_t>(r) * n_heads + h) * hd;
                if constexpr (std::is_same_v<T, float>) {
                    detail::rope(head, hd, c, fast);
                } else {
                    for (int i = 0; i < half; ++i) {
                        const T x0 = head[i], x1 = head[i + half];
                        head[i] = x0 * c[2 * i] - x1 * c[2 * i + 1];
                        head[i + half] = x1 * c[2 * i] + x0 * c[2 * i + 1];
                    }
                }
            }
        }
    });
}

/// x (N, n_heads, hd) rotated in place by the angles of its rows' positions.
template <class T>
void rope_forward(ThreadPool& pool, T* x, const RopeTable& table, int N, int n_heads, int hd, bool fast = true) {
    rope_rows(pool, x, table.forward, N, n_heads, hd, fast);
}

/// dx (N, n_heads, hd) in place: y = R x with R a rotation, so dx = Rᵀ dy, the inverse rotation.
template <class T>
void rope_backward(ThreadPool& pool, T* dx, const RopeTable& table, int N, int n_heads, int hd, bool fast = true) {
    rope_rows(pool, dx, table.backward, N, n_heads, hd, fast);
}

// ---------------------------------------------------------------------------------------------------
// Attention with grouped-query heads and a mask given as data

/// 1 where query row i may attend key column j. `per_sequence`: (B, Tq, Tk), else (Tq, Tk) shared by
/// the batch. Causal, EDD's dual-block, GLIDE's block-wise or a tree mask are all just data here.
struct AttentionMask {
    const std::uint8_t* data = nullptr;
    bool per_sequence = false;

    const std::uint8_t* row(int b, int i, int Tq, int Tk) const {
        return data + (static_cast<std::size_t>(per_sequence ? b : 0) * Tq + i) * Tk;
    }
};

/// (Tq, Tk) lower-triangular mask, with query i at key position i + (Tk - Tq): the last Tq keys are
/// the queries' own rows, earlier keys (a prefix, a cache) are visible to all.
inline std::vector<std::uint8_t> causal_mask(int Tq, int Tk) {
    std::vector<std::uint8_t> m(static_cast<std::size_t>(Tq) * Tk, 0);
    for (int i = 0; i < Tq; ++i)
        for (int j = 0; j <= i + (Tk - Tq) && j < Tk; ++j) m[static_cast<std::size_t>(i) * Tk + j] = 1;
    return m;
}

struct AttentionShape {
    int B = 1;    // sequences
    int Tq = 0;   // query rows per sequence
    int Tk = 0;   // key/value rows per sequence
    int H = 1;    // query heads
    int Hkv = 1;  // kv heads; query head h reads kv head h / (H / Hkv)
    int hd = 0;   // head size
};

inline detail::AttentionGeometry attention_geometry(AttentionShape s, AttentionMask mask) {
    return {s.B, s.Tq, s.Tk, s.H, s.Hkv, s.hd, static_cast<std::size_t>(s.H) * s.hd,
            static_cast<std::size_t>(s.Hkv) * s.hd, mask.data, mask.per_sequence};
}

/// out (B, Tq, H, hd) = softmax(q·kᵀ/√hd, masked)·v; probs (B, H, Tq, Tk) kept for the backward
/// (0 where masked). q (B, Tq, H, hd), k and v (B, Tk, Hkv, hd).
///
/// Self-attention passes q, k, v from the same rows (Tq = Tk). Extra key/value rows from outside (a
/// target's KV rows for GLIDE's cross-attention, a cached prefix) are just more rows of k and v with
/// their own mask columns: concatenate them in front of the self rows and widen the mask; the backward
/// then returns their gradient in the same rows of dk/dv (ignore it for a frozen target).
/// A query row that sees no key gets out = 0 and no gradient (instead of a NaN).
template <class T>
void attention_forward(ThreadPool& pool, T* out, T* probs, const T* q, const T* k, const T* v, AttentionShape s,
                       AttentionMask mask, bool fast = true) {
    detail::require(s.Hkv > 0 && s.H % s.Hkv == 0, "train", [&] {
        return "attention: H = " + std::to_string(s.H) +
               " query heads is not a multiple of Hkv = " + std::to_string(s.Hkv);
    });
    detail::require(mask.data != nullptr, "train",
                    [] { return std::string("attention: no mask (pass causal_mask(Tq, Tk) for causal)"); });
#if defined(__x86_64__)
    if constexpr (std::is_same_v<T, float>)
        if (fast && detail::attention_kernels_serve(s.hd))
            return detail::attention_forward_avx512(pool, out, probs, q, k, v, attention_geometry(s, mask));
#endif
    const int group = s.H / s.Hkv;
    const std::size_t q_row = static_cast<std::size_t>(s.H) * s.hd, kv_row = static_cast<std::size_t>(s.Hkv) * s.hd;
    const T scale = T(1) / std::sqrt(static_cast<T>(s.hd));
    pool.parallel_for(s.B * s.H, [&](int task) {
        const int b = task / s.H, h = task % s.H, kvh = h / group;
        const T* kb = k + static_cast<std::size_t>(b) * s.Tk * kv_row + kvh * s.hd;
        const T* vb = v + static_cast<std::size_t>(b) * s.Tk * kv_row + kvh * s.hd;
        for (int i = 0; i < s.Tq; ++i) {
            const T* qi = q + (static_cast<std::size_t>(b) * s.Tq + i) * q_row + h * s.hd;
            T* p = probs + ((static_cast<std::size_t>(b) * s.H + h) * s.Tq + i) * s.Tk;
            T* o = out + (static_cast<std::size_t>(b) * s.Tq + i) * q_row + h * s.hd;
            const std::uint8_t* visible = mask.row(b, i, s.Tq, s.Tk);
            T mx = -std::numeric_limits<T>::infinity();
            for (int j = 0; j < s.Tk; ++j) {
                if (!visible[j]) continue;
                p[j] = detail::vec_dot(qi, kb + j * kv_row, s.hd) * scale;
                mx = std::max(mx, p[j]);
            }
            std::fill(o, o + s.hd, T(0));
            if (mx == -std::numeric_limits<T>::infinity()) {
                std::fill(p, p + s.Tk, T(0));
                continue;
            }
            T sum = 0;
            for (int j = 0; j < s.Tk; ++j) sum += (p[j] = visible[j] ? std::exp(p[j] - mx) : T(0));
            for (int j = 0; j < s.Tk; ++j) {
                if (p[j] == T(0)) continue;
                p[j] /= sum;
                detail::vec_axpy(o, p[j], vb + j * kv_row, s.hd);
            }
        }
    });
}

/// dq (B, Tq, H, hd) +=, dk and dv (B, Tk, Hkv, hd) += from dout (B, Tq, H, hd), with P = probs:
/// dv_j += Σ_i P_ij dout_i; dP_ij = dout_i·v_j; dS_ij = P_ij (dP_ij - Σ_l P_il dP_il);
/// dq_i += Σ_j dS_ij k_j /√hd; dk_j += Σ_i dS_ij q_i /√hd. One task per (sequence, kv head): the
/// query heads of a group all add into the same dk/dv rows, so they run on one thread, in order.
template <class T>
void attention_backward(ThreadPool& pool, T* dq, T* dk, T* dv, const T* dout, const T* probs, const T* q, const T* k,
                        const T* v, AttentionShape s, bool fast = true) {
#if defined(__x86_64__)
    if constexpr (std::is_same_v<T, float>)
        if (fast && detail::attention_kernels_serve(s.hd))
            return detail::attention_backward_avx512(pool, dq, dk, dv, dout, probs, q, k, v, attention_geometry(s, {}));
#endif
    const int group = s.H / s.Hkv;
    const std::size_t q_row = static_cast<std::size_t>(s.H) * s.hd, kv_row = static_cast<std::size_t>(s.Hkv) * s.hd;
    const T scale = T(1) / std::sqrt(static_cast<T>(s.hd));
    pool.parallel_for(s.B * s.Hkv, [&](int task) {
        const int b = task / s.Hkv, kvh = task % s.Hkv;
        const std::size_t kv_off = static_cast<std::size_t>(b) * s.Tk * kv_row + kvh * s.hd;
        std::vector<T> dp(s.Tk);
        for (int h = kvh * group; h < (kvh + 1) * group; ++h)
            for (int i = 0; i < s.Tq; ++i) {
                const std::size_t q_off = (static_cast<std::size_t>(b) * s.Tq + i) * q_row + h * s.hd;
                const T* p = probs + ((static_cast<std::size_t>(b) * s.H + h) * s.Tq + i) * s.Tk;
                const T* g = dout + q_off;
                T dot_sum = 0;
                for (int j = 0; j < s.Tk; ++j) {
                    if (p[j] == T(0)) continue;  // masked (or underflowed): contributes nothing below
                    dp[j] = detail::vec_dot(g, v + kv_off + j * kv_row, s.hd);
                    dot_sum += p[j] * dp[j];
                }
                for (int j = 0; j < s.Tk; ++j) {
                    if (p[j] == T(0)) continue;
                    const T ds = p[j] * (dp[j] - dot_sum) * scale;
                    detail::vec_axpy(dv + kv_off + j * kv_row, p[j], g, s.hd);
                    detail::vec_axpy(dq + q_off, ds, k + kv_off + j * kv_row, s.hd);
                    detail::vec_axpy(dk + kv_off + j * kv_row, ds, q + q_off, s.hd);
                }
            }
    });
}

// ---------------------------------------------------------------------------------------------------
// SwiGLU: out = silu(gate) · up, the arithmetic of CpuModel

/// out (N, F) from gate (N, F) and up (N, F) (the two projections, pre-activation).
template <class T>
void swiglu_forward(ThreadPool& pool, T* out, const T* gate, const T* up, int N, int F, bool fast = true) {
    if constexpr (std::is_same_v<T, float>)
        if (fast)
            return detail::parallel_rows(pool, N, [&](int r0, int r1) {
                const std::size_t i0 = static_cast<std::size_t>(r0) * F;
                detail::swiglu(out + i0, gate + i0, up + i0, (r1 - r0) * F, true);
            });
    detail::parallel_rows(pool, N, [&](int r0, int r1) {
        for (std::size_t i = static_cast<std::size_t>(r0) * F; i < static_cast<std::size_t>(r1) * F; ++i)
            out[i] = gate[i] / (T(1) + std::exp(-gate[i])) * up[i];
    });
}

/// dgate, dup (N, F) += from dout (N, F): silu'(g) = σ(g)(1 + g(1 - σ(g))).
template <class T>
void swiglu_backward(ThreadPool& pool, T* dgate, T* dup, const T* dout, const T* gate, const T* up, int N, int F,
                     bool fast = true) {
#if defined(__x86_64__)
    if constexpr (std::is_same_v<T, float>)
        if (fast && detail::train_kernels_available())
            return detail::parallel_rows(pool, N, [&](int r0, int r1) {
                const std::size_t i0 = static_cast<std::size_t>(r0) * F;
                detail::swiglu_backward_avx512(dgate + i0, dup + i0, dout + i0, gate + i0, up + i0,
                                               static_cast<std::size_t>(r1 - r0) * F);
            });
#endif
    detail::parallel_rows(pool, N, [&](int r0, int r1) {
        for (std::size_t i = static_cast<std::size_t>(r0) * F; i < static_cast<std::size_t>(r1) * F; ++i) {
            const T sig = T(1) / (T(1) + std::exp(-gate[i]));
            dgate[i] += dout[i] * up[i] * sig * (T(1) + gate[i] * (T(1) - sig));
            dup[i] += dout[i] * gate[i] * sig;
        }
    });
}

// ---------------------------------------------------------------------------------------------------
// Losses on logits (N, V) and features (N, D)
//
// Each loss returns its value (a mean over the rows it counts) and ADDS weight · d(value)/d(input) to
// the gradient buffer, so a weighted sum of losses (EAGLE: 0.1 · soft cross-entropy + SmoothL1) is
// several calls into the same buffers, and gradient accumulation over micro-batches is one call per
// micro-batch with weight = (rows counted in it) / (rows counted in the whole batch).

/// Marks a target row that no loss should count (PyTorch's ignore_index = -100; llm.c uses -1).
constexpr int kIgnoreIndex = -1;


/// Mean cross-entropy of hard targets (N) over rows whose target is not kIgnoreIndex;
/// dlogits += weight · (softmax(z) - onehot) / n_counted.
template <class T>
double cross_entropy(ThreadPool& pool, T* dlogits, const T* logits, const int* targets, int N, int V,
                     double weight = 1.0, bool fast = true) {
    int n = 0;
    for (int r = 0; r < N; ++r) {
        detail::require(targets[r] == kIgnoreIndex || (targets[r] >= 0 && targets[r] < V), "train", [&] {
            return "cross_entropy: target " + std::to_string(targets[r]) + " at row " + std::to_string(r) +
                   " is outside [0, " + std::to_string(V) + ") and is not the ignore index -1";
        });
        n += targets[r] != kIgnoreIndex;
    }
    const double g = n == 0 ? 0.0 : weight / n;
#if defined(__x86_64__)
    if constexpr (std::is_same_v<T, float>)
        if (fast && detail::train_kernels_available())
            return detail::mean_over_rows(pool, N, [&](int r) -> detail::RowLoss {
                if (targets[r] == kIgnoreIndex) return {};
                const std::size_t off = static_cast<std::size_t>(r) * V;
                const double lse = detail::softmax_grad_row_avx512(dlogits + off, logits + off, V, static_cast<float>(g));
                dlogits[off + targets[r]] -= static_cast<T>(g);
                return {true, lse - logits[off + targets[r]]};
            });
#endif
    return detail::mean_over_rows(pool, N, [&](int r) -> detail::RowLoss {
        if (targets[r] == kIgnoreIndex) return {};
        const T* z = logits + static_cast<std::size_t>(r) * V;
        T* dz = dlogits + static_cast<std::size_t>(r) * V;
        const double lse = detail::log_sum_exp(z, V);
        for (int j = 0; j < V; ++j) dz[j] += static_cast<T>(g * std::exp(double(z[j]) - lse));
        dz[targets[r]] -= static_cast<T>(g);
        return {true, lse - z[targets[r]]};
    });
}

/// One row of a loss against a full target distribution p (N, V) with q = softmax(logits): returns
/// -Σ p log q (plus Σ p log p when `with_entropy`, which makes it KL(p ‖ q)) and adds
/// g · ((Σp) q - p) to dlogits — the gradient is the same for both.
template <class T>
detail::RowLoss soft_target_row(T* dz, const T* z, const float* p, int V, double g, bool with_entropy) {
    const double lse = detail::log_sum_exp(z, V);
    double loss = 0.0, mass = 0.0;
    for (int j = 0; j < V; ++j) {
        mass += p[j];
        loss -= p[j] * (double(z[j]) - lse);
        if (with_entropy && p[j] > 0) loss += p[j] * std::log(double(p[j]));
    }
    for (int j = 0; j < V; ++j) dz[j] += static_cast<T>(g * (mass * std::exp(double(z[j]) - lse) - p[j]));
    return {true, loss};
}

template <class T>
double soft_target_loss(ThreadPool& pool, T* dlogits, const T* logits, const float* target_probs, int N, int V,
                        double weight, const std::uint8_t* row_mask, bool with_entropy, bool fast = true) {
    const int n = detail::count_rows(row_mask, N);
    const double g = n == 0 ? 0.0 : weight / n;
#if defined(__x86_64__)
    if constexpr (std::is_same_v<T, float>)
        if (fast && detail::train_kernels_available())
            return detail::mean_over_rows(pool, N, [&](int r) -> detail::RowLoss {
                if (row_mask != nullptr && !row_mask[r]) return {};
                const std::size_t off = static_cast<std::size_t>(r) * V;
                return {true, detail::soft_target_row_avx512(dlogits + off, logits + off, target_probs + off, V,
                                                             static_cast<float>(g), with_entropy)};
            });
#endif
    return detail::mean_over_rows(pool, N, [&](int r) -> detail::RowLoss {
        if (row_mask != nullptr && !row_mask[r]) return {};
        const std::size_t off = static_cast<std::size_t>(r) * V;
        return soft_target_row(dlogits + off, logits + off, target_probs + off, V, g, with_entropy);
    });
}

/// Mean over counted rows of H(p, q) = -Σ_j p_j log q_j with q = softmax(logits), p = target_probs
/// (N, V) (soft labels: a teacher's distribution). row_mask (N) may be null (all rows count).
/// dlogits += weight · ((Σp) q - p) / n_counted.
template <class T>
double soft_cross_entropy(ThreadPool& pool, T* dlogits, const T* logits, const float* target_probs, int N, int V,
                          double weight = 1.0, const std::uint8_t* row_mask = nullptr, bool fast = true) {
    return soft_target_loss(pool, dlogits, logits, target_probs, N, V, weight, row_mask, false, fast);
}

/// Mean over counted rows of KL(p ‖ q) = Σ_j p_j (log p_j - log q_j), p = target_probs (N, V) a full
/// target distribution, q = softmax(logits): the forward KL of distillation (EDD trains with it).
/// Differs from soft_cross_entropy by the target's entropy only; the gradient is the same.
template <class T>
double kl_divergence(ThreadPool& pool, T* dlogits, const T* logits, const float* target_probs, int N, int V,
                     double weight = 1.0, const std::uint8_t* row_mask = nullptr, bool fast = true) {
    return soft_target_loss(pool, dlogits, logits, target_probs, N, V, weight, row_mask, true, fast);
}

/// probs (N, V) = softmax of each row of logits (N, V): a teacher's distribution for the losses above
/// (float rows vectorised where AVX-512 runs), rows over the pool.
template <class T>
void softmax_rows(ThreadPool& pool, float* probs, const T* logits, int N, int V, bool fast = true) {
    detail::parallel_rows(pool, N, [&](int r0, int r1) {
        for (int r = r0; r < r1; ++r) {
            const std::size_t off = static_cast<std::size_t>(r) * V;
#if defined(__x86_64__)
            if constexpr (std::is_same_v<T, float>)
                if (fast && detail::train_kernels_available()) {
                    detail::softmax_row_avx512(probs + off, logits + off, V);
                    continue;
                }
#endif
            const double lse = detail::log_sum_exp(logits + off, V);
            for (int j = 0; j < V; ++j) probs[off + j] = static_cast<float>(std::exp(double(logits[off + j]) - lse));
        }
    });
}

/// A target distribution kept as its top K entries per row: ids (N, K) distinct token ids and
/// probs (N, K) their probabilities under the full softmax, so 1 - Σ probs is the tail mass.
struct TopKRows {
    const int* ids = nullptr;     // (N, K)
    const float* probs = nullptr; // (N, K)
    int K = 0;
};

/// Mean over counted rows of the forward KL from a top-K target, with the tail as ONE event:
///   KL = Σ_{j∈S} p_j log(p_j / q_j) + r log(r / q_rest),  r = 1 - Σ_{j∈S} p_j,  q_rest = Σ_{j∉S} q_j.
/// This is the exact KL between the two distributions coarsened to K + 1 outcomes (S and "other"):
/// it never invents a shape for the tail the target did not keep, it is 0 iff the model matches the
/// kept entries and the tail mass, and it equals the full KL when the model's tail is shaped like the
/// target's. Gradient: dz_j = q_j - p_j for j in S, q_j (1 - r / q_rest) outside S. A row whose kept
/// probabilities sum to 1 (a renormalised top-K) simply pushes the model's tail to 0.
template <class T>
double kl_divergence_topk(ThreadPool& pool, T* dlogits, const T* logits, TopKRows target, int N, int V,
                          double weight = 1.0, const std::uint8_t* row_mask = nullptr) {
    detail::require(target.K > 0 && target.K <= V, "train", [&] {
        return "kl_divergence_topk: K = " + std::to_string(target.K) + ", expected 1..V (" + std::to_string(V) + ")";
    });
    const int n = detail::count_rows(row_mask, N);
    const double g = n == 0 ? 0.0 : weight / n;
    return detail::mean_over_rows(pool, N, [&](int r) -> detail::RowLoss {
        if (row_mask != nullptr && !row_mask[r]) return {};
        const T* z = logits + static_cast<std::size_t>(r) * V;
        T* dz = dlogits + static_cast<std::size_t>(r) * V;
        const int* ids = target.ids + static_cast<std::size_t>(r) * target.K;
        const float* p = target.probs + static_cast<std::size_t>(r) * target.K;
        std::vector<std::uint8_t> in_top(V, 0);
        double kept = 0.0;
        for (int e = 0; e < target.K; ++e) {
            detail::require(ids[e] >= 0 && ids[e] < V && !in_top[ids[e]], "train", [&] {
                return "kl_divergence_topk: row " + std::to_string(r) + " entry " + std::to_string(e) + " has token " +
                       std::to_string(ids[e]) + ", which is outside [0, " + std::to_string(V) + ") or repeated";
            });
            in_top[ids[e]] = 1;
            kept += p[e];
        }
        detail::require(kept <= 1.0 + 1e-3, "train", [&] {
            return "kl_divergence_topk: row " + std::to_string(r) + " keeps probability " + std::to_string(kept) +
                   " > 1 (probs must be the full softmax's)";
        });
        const double lse = detail::log_sum_exp(z, V);
        // log q_rest from the tail's own log-sum-exp: 1 - Σ_S q_j would cancel catastrophically.
        double tail_max = -std::numeric_limits<double>::infinity(), tail_sum = 0.0;
        for (int j = 0; j < V; ++j)
            if (!in_top[j]) tail_max = std::max(tail_max, double(z[j]));
        for (int j = 0; j < V; ++j)
            if (!in_top[j]) tail_sum += std::exp(double(z[j]) - tail_max);
        const double rest = std::max(0.0, 1.0 - kept);
        const bool has_tail = tail_sum > 0.0;
        const double lse_tail = has_tail ? tail_max + std::log(tail_sum) : 0.0;
        double loss = 0.0;
        for (int e = 0; e < target.K; ++e)
            if (p[e] > 0) loss += p[e] * (std::log(double(p[e])) - (double(z[ids[e]]) - lse));
        if (rest > 0 && has_tail) loss += rest * (std::log(rest) - (lse_tail - lse));
        for (int j = 0; j < V; ++j) {
            const double q = std::exp(double(z[j]) - lse);
            // q_j / q_rest = exp(z_j - lse_tail), exact even when q_rest underflows.
            const double target_j = in_top[j] ? 0.0 : rest * std::exp(double(z[j]) - lse_tail);
            dz[j] += static_cast<T>(g * (q - target_j));
        }
        for (int e = 0; e < target.K; ++e) dz[ids[e]] -= static_cast<T>(g * p[e]);
        return {true, loss};
    });
}

/// SmoothL1 between predicted and target features (N, D), as EAGLE trains its feature regression:
/// per element 0.5 d²/β if |d| < β else |d| - 0.5β; mean over D, then mean over counted rows (EAGLE's
/// `sum(mean(loss_mask · vloss, 2)) / loss_mask.sum()`). dpred += weight · d(value)/dpred.
template <class T>
double smooth_l1(ThreadPool& pool, T* dpred, const T* pred, const T* target, int N, int D, double beta = 1.0,
                 double weight = 1.0, const std::uint8_t* row_mask = nullptr) {
    detail::require(beta > 0, "train", [&] { return "smooth_l1: beta must be > 0, got " + std::to_string(beta); });
    const int n = detail::count_rows(row_mask, N);
    const double g = n == 0 ? 0.0 : weight / (static_cast<double>(n) * D);
    return detail::mean_over_rows(pool, N, [&](int r) -> detail::RowLoss {
        if (row_mask != nullptr && !row_mask[r]) return {};
        const std::size_t off = static_cast<std::size_t>(r) * D;
        double loss = 0.0;
        for (int i = 0; i < D; ++i) {
            const double d = double(pred[off + i]) - double(target[off + i]);
            const double ad = std::abs(d);
            loss += ad < beta ? 0.5 * d * d / beta : ad - 0.5 * beta;
            dpred[off + i] += static_cast<T>(g * (ad < beta ? d / beta : (d > 0 ? 1.0 : -1.0)));
        }
        return {true, loss / D};
    });
}

}  // namespace train
}  // namespace specdec
