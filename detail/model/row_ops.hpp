// specdec/detail/model/row_ops.hpp — the steps between a forward's matrix products, one token (row) at a
// time: RMSNorm with the residual add before it, RoPE, SwiGLU. The plain loops are the reference
// models' (and the CUDA tests' oracle); the fast models take AVX-512 where it runs and spread the rows
// over the pool's threads. As plain loops on one thread these steps took 0.6 ms of a 7.2 ms 16-node
// tree forward (110M shape, bf16), while the other thread waited.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "matmul.hpp"
#include "softmax.hpp"
#include "thread_pool.hpp"

namespace specdec::detail {

inline void rmsnorm(float* out, const float* x, const float* weight, int d, float eps) {
    const float inv = 1.0f / std::sqrt(static_cast<float>(sum_squares(x, d) / d) + eps);
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

/// cs (positions.size(), hd/2, 2): cos and sin of position · inv_freq[j], the angle in double, times
/// `scale` (rope_attention_factor: YaRN's, else 1).
inline void rope_table(std::vector<float>& cs, std::span<const int> positions, std::span<const double> inv_freq,
                       double scale = 1.0) {
    const std::size_t half = inv_freq.size();
    cs.resize(positions.size() * 2 * half);
    for (std::size_t i = 0; i < positions.size(); ++i)
        for (std::size_t j = 0; j < half; ++j) {
            const double a = positions[i] * inv_freq[j];
            cs[(i * half + j) * 2] = static_cast<float>(std::cos(a) * scale);
            cs[(i * half + j) * 2 + 1] = static_cast<float>(std::sin(a) * scale);
        }
}

#if defined(__x86_64__)
SPECDEC_INTRINSICS_BEGIN

inline __mmask16 tail_mask16(int left) { return static_cast<__mmask16>(left >= 16 ? 0xFFFFu : (1u << left) - 1u); }

/// rmsnorm's arithmetic: the sum of squares in double, 8 lanes; then x · inv · weight, 16 lanes.
SPECDEC_TARGET_AVX512 inline void rmsnorm_avx512(float* out, const float* x, const float* weight, int d, float eps) {
    __m512d acc = _mm512_setzero_pd();
    for (int i = 0; i < d; i += 8) {
        const __mmask8 m = static_cast<__mmask8>(d - i >= 8 ? 0xFFu : (1u << (d - i)) - 1u);
        const __m512d v = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x + i));
        acc = _mm512_fmadd_pd(v, v, acc);
    }
    const float inv = 1.0f / std::sqrt(static_cast<float>(_mm512_reduce_add_pd(acc) / d) + eps);
    const __m512 s = _mm512_set1_ps(inv);
    for (int i = 0; i < d; i += 16) {
        const __mmask16 m = tail_mask16(d - i);
        const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), s);
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, weight + i)));
    }
}

/// rope on 16 pairs at a time; the interleaved (cos, sin) of 8 pairs per load, split by permutes.
SPECDEC_TARGET_AVX512 inline void rope_avx512(float* head, int head_dim, const float* cs) {
    const int half = head_dim / 2;
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (int i = 0; i < half; i += 16) {
        const int left = half - i;
        const __mmask16 m = tail_mask16(left);
        const __m512 lo = _mm512_maskz_loadu_ps(tail_mask16(2 * left), cs + 2 * i);
        const __m512 hi = _mm512_maskz_loadu_ps(tail_mask16(2 * left - 16 > 0 ? 2 * left - 16 : 0), cs + 2 * i + 16);
        const __m512 c = _mm512_permutex2var_ps(lo, even, hi), s = _mm512_permutex2var_ps(lo, odd, hi);
        const __m512 x0 = _mm512_maskz_loadu_ps(m, head + i), x1 = _mm512_maskz_loadu_ps(m, head + i + half);
        _mm512_mask_storeu_ps(head + i, m, _mm512_fmsub_ps(x0, c, _mm512_mul_ps(x1, s)));
        _mm512_mask_storeu_ps(head + i + half, m, _mm512_fmadd_ps(x1, c, _mm512_mul_ps(x0, s)));
    }
}

SPECDEC_INTRINSICS_END
#endif  // __x86_64__

/// The fast models' row steps (fast = true: AVX-512 where it runs, results within a few ulp of the
/// plain loops, which fast = false runs).
inline void rmsnorm(float* out, const float* x, const float* weight, int d, float eps, bool fast) {
#if defined(__x86_64__)
    if (fast && best_isa() == MatmulIsa::kAvx512) return rmsnorm_avx512(out, x, weight, d, eps);
#endif
    rmsnorm(out, x, weight, d, eps);
}

inline void rope(float* head, int head_dim, const float* cs, bool fast) {
#if defined(__x86_64__)
    if (fast && best_isa() == MatmulIsa::kAvx512) return rope_avx512(head, head_dim, cs);
#endif
    rope(head, head_dim, cs);
}

/// x += r (a sublayer's output joins the residual stream), then out = RMSNorm(x) · weight; out may
/// be r. One row of d floats.
inline void add_rmsnorm(float* out, float* x, const float* r, const float* weight, int d, float eps, bool fast) {
    for (int i = 0; i < d; ++i) x[i] += r[i];
    rmsnorm(out, x, weight, d, eps, fast);
}

/// One row of a fused q|k|v product: q to `q`, k and v to their cache rows, RoPE on every q and k
/// head (`cs`: this token's rope_table row).
inline void split_qkv(const float* row, float* q, float* k, float* v, int heads, int kv_heads, int head_dim,
                      const float* cs, bool fast) {
    const int qd = heads * head_dim, kvd = kv_heads * head_dim;
    std::copy_n(row, qd, q);
    std::copy_n(row + qd, kvd, k);
    std::copy_n(row + qd + kvd, kvd, v);
    for (int h = 0; h < heads; ++h) rope(q + h * head_dim, head_dim, cs, fast);
    for (int h = 0; h < kv_heads; ++h) rope(k + h * head_dim, head_dim, cs, fast);
}

/// Before split_qkv, on one row of the fused q|k|v product: Qwen2's biases (`bq` (H*hd), `bk`, `bv`
/// (Hkv*hd); null: none) added, then Qwen3's RMSNorm over each q head with `q_norm` (hd) and each k head
/// with `k_norm` (null: none), as transformers' modeling_qwen2.py / modeling_qwen3.py do before RoPE.
inline void qkv_extras(float* row, const float* bq, const float* bk, const float* bv, const float* q_norm,
                       const float* k_norm, int heads, int kv_heads, int head_dim, float eps, bool fast) {
    const int qd = heads * head_dim, kvd = kv_heads * head_dim;
    if (bq != nullptr) {
        for (int j = 0; j < qd; ++j) row[j] += bq[j];
        for (int j = 0; j < kvd; ++j) row[qd + j] += bk[j];
        for (int j = 0; j < kvd; ++j) row[qd + kvd + j] += bv[j];
    }
    if (q_norm != nullptr) {
        for (int h = 0; h < heads; ++h) rmsnorm(row + h * head_dim, row + h * head_dim, q_norm, head_dim, eps, fast);
        for (int h = 0; h < kv_heads; ++h) rmsnorm(row + qd + h * head_dim, row + qd + h * head_dim, k_norm, head_dim, eps, fast);
    }
}

/// f(i) for every row i < n: where `parallel` (the fast models) and there is more than one row, as
/// one run of consecutive rows per thread of the pool, else in order on the calling thread. One task
/// per row was slower (16 rows, 110M shape: 0.59 -> 0.50 ms of row steps per forward, medians of 6):
/// each claim moves the pool's counter between cores, ~0.24 us one way on the 2-vCPU test machine.
template <class F>
void for_rows(ThreadPool& pool, int n, bool parallel, F&& f) {
    const int parts = parallel ? std::min(n, pool.size()) : 1;
    if (parts <= 1) {
        for (int i = 0; i < n; ++i) f(i);
        return;
    }
    pool.parallel_for(parts, [&](int t) {
        for (int i = n * t / parts; i < n * (t + 1) / parts; ++i) f(i);
    });
}

}  // namespace specdec::detail
