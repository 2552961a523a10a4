// specdec/detail/train/kernels.hpp — the training layers' steps between products, vectorised: RMSNorm,
// SwiGLU, the losses' rows and attention, forward and backward, and AdamW's update, for float on AVX-512.
// SPDX-License-Identifier: MIT
#pragma once

// layers.hpp and optimizer.hpp call these for float where AVX-512 runs (their plain loops are the
// oracle: tests hold each kernel to them). As libm calls and scalar loops these steps took about a
// third of a training step at the demo target's shape (2 threads, profiled), and distillation's KL
// over the whole vocabulary as much again: exp (and log) per logit in double, SwiGLU's exp per
// activation, attention's dot product per (query, key) pair ending in a horizontal sum. Here exp is
// exp16 (softmax.hpp) and log is log16, each a few ulp from libm's float functions; attention takes
// R query rows at a time against 16 keys per vector from a transposed copy of the head's keys; and
// every reduction runs in a fixed order, so results do not depend on the thread count.
//
// Shape letters as in layers.hpp: N rows, D width, F SwiGLU width, V vocab, B sequences, Tq/Tk query
// and key rows per sequence, H/Hkv heads, hd head size.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "../model/matmul.hpp"
#include "../model/row_ops.hpp"
#include "../model/softmax.hpp"
#include "../model/thread_pool.hpp"

namespace specdec::detail {

/// Whether the kernels below run on this CPU.
inline bool train_kernels_available() {
#if defined(__x86_64__)
    return best_isa() == MatmulIsa::kAvx512;
#else
    return false;
#endif
}

/// A grow-only float buffer per thread, for a task's transposed keys and score rows.
inline float* task_scratch(std::size_t count) {
    thread_local std::vector<float> buffer;
    if (buffer.size() < count) buffer.resize(count);
    return buffer.data();
}

#if defined(__x86_64__)
SPECDEC_INTRINSICS_BEGIN

// ---------------------------------------------------------------------------------------------------
// RMSNorm

/// Rows [r0, r1): out = x · rstd · w, rstd = 1/√(mean(x²) + eps) (the sum of squares in double).
SPECDEC_TARGET_AVX512 inline void rmsnorm_forward_avx512(float* out, float* rstd, const float* x, const float* w, int D,
                                                         float eps, int r0, int r1) {
    for (int r = r0; r < r1; ++r) {
        const float* xr = x + offset(r, D);
        __m512d acc = _mm512_setzero_pd();
        for (int i = 0; i < D; i += 8) {
            const auto m = static_cast<__mmask8>(D - i >= 8 ? 0xFFu : (1u << (D - i)) - 1u);
            const __m512d v = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, xr + i));
            acc = _mm512_fmadd_pd(v, v, acc);
        }
        const float inv = 1.0f / std::sqrt(static_cast<float>(_mm512_reduce_add_pd(acc) / D) + eps);
        rstd[r] = inv;
        const __m512 s = _mm512_set1_ps(inv);
        for (int i = 0; i < D; i += 16) {
            const __mmask16 m = tail_mask16(D - i);
            const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, xr + i), s);
            _mm512_mask_storeu_ps(out + offset(r, D) + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i)));
        }
    }
}

/// Rows [r0, r1): dx += rstd w g - (Σ g w x / D) rstd³ x, and dw_partial (D) = Σ_rows g x rstd in row order.
SPECDEC_TARGET_AVX512 inline void rmsnorm_backward_avx512(float* dx, float* dw_partial, const float* dout,
                                                          const float* x, const float* w, const float* rstd, int D,
                                                          int r0, int r1) {
    if (dw_partial != nullptr) std::fill_n(dw_partial, D, 0.0f);
    for (int r = r0; r < r1; ++r) {
        const float* xr = x + offset(r, D);
        const float* g = dout + offset(r, D);
        __m512 acc = _mm512_setzero_ps();
        for (int i = 0; i < D; i += 16) {
            const __mmask16 m = tail_mask16(D - i);
            acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, g + i), _mm512_maskz_loadu_ps(m, w + i)),
                                  _mm512_maskz_loadu_ps(m, xr + i), acc);
        }
        const float inv = rstd[r], c = _mm512_reduce_add_ps(acc) / static_cast<float>(D) * inv * inv * inv;
        const __m512 vinv = _mm512_set1_ps(inv), vc = _mm512_set1_ps(c);
        for (int i = 0; i < D; i += 16) {
            const __mmask16 m = tail_mask16(D - i);
            const __m512 gv = _mm512_maskz_loadu_ps(m, g + i), xv = _mm512_maskz_loadu_ps(m, xr + i);
            const __m512 term = _mm512_fmsub_ps(_mm512_mul_ps(vinv, _mm512_maskz_loadu_ps(m, w + i)), gv,
                                                _mm512_mul_ps(vc, xv));
            _mm512_mask_storeu_ps(dx + offset(r, D) + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, dx + offset(r, D) + i), term));
            if (dw_partial != nullptr)
                _mm512_mask_storeu_ps(dw_partial + i, m,
                                      _mm512_fmadd_ps(_mm512_mul_ps(gv, xv), vinv, _mm512_maskz_loadu_ps(m, dw_partial + i)));
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// SwiGLU backward

/// dgate += dout·up·σ(g)(1 + g(1 - σ(g))), dup += dout·g·σ(g) over n floats.
SPECDEC_TARGET_AVX512 inline void swiglu_backward_avx512(float* dgate, float* dup, const float* dout, const float* gate,
                                                         const float* up, std::size_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (std::size_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask16(static_cast<int>(std::min<std::size_t>(16, n - i)));
        const __m512 g = _mm512_maskz_loadu_ps(m, gate + i), u = _mm512_maskz_loadu_ps(m, up + i);
        const __m512 d = _mm512_maskz_loadu_ps(m, dout + i);
        const __m512 sig = _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
        const __m512 dsilu = _mm512_mul_ps(sig, _mm512_fmadd_ps(g, _mm512_sub_ps(one, sig), one));
        _mm512_mask_storeu_ps(dgate + i, m, _mm512_fmadd_ps(_mm512_mul_ps(d, u), dsilu, _mm512_maskz_loadu_ps(m, dgate + i)));
        _mm512_mask_storeu_ps(dup + i, m, _mm512_fmadd_ps(_mm512_mul_ps(d, g), sig, _mm512_maskz_loadu_ps(m, dup + i)));
    }
}

// ---------------------------------------------------------------------------------------------------
// Cross-entropy

/// One row of logits z (V): returns log Σ exp(z) and adds g · softmax(z) to dz.
SPECDEC_TARGET_AVX512 inline double softmax_grad_row_avx512(float* dz, const float* z, int V, float g) {
    __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int j = 0; j < V; j += 16) mx = _mm512_mask_max_ps(mx, tail_mask16(V - j), mx, _mm512_maskz_loadu_ps(tail_mask16(V - j), z + j));
    const float top = _mm512_reduce_max_ps(mx);
    const __m512 shift = _mm512_set1_ps(top);
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < V; j += 16) {
        const __mmask16 m = tail_mask16(V - j);
        sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, z + j), shift))));
    }
    const float total = _mm512_reduce_add_ps(sum);
    const __m512 scale = _mm512_set1_ps(g / total);
    for (int j = 0; j < V; j += 16) {
        const __mmask16 m = tail_mask16(V - j);
        const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, z + j), shift));
        _mm512_mask_storeu_ps(dz + j, m, _mm512_fmadd_ps(e, scale, _mm512_maskz_loadu_ps(m, dz + j)));
    }
    return double(top) + std::log(double(total));
}

/// Cephes' logf over 16 lanes, x > 0 (x = 0 gives -inf): x = m 2^e with m in [√½, √2), log(1 + (m - 1))
/// by its degree-9 polynomial, e ln 2 in two parts; within a few ulp of logf.
SPECDEC_TARGET_AVX512 inline __m512 log16(__m512 x) {
    __m512 e = _mm512_add_ps(_mm512_getexp_ps(x), _mm512_set1_ps(1.0f));  // frexp's exponent: m in [0.5, 1)
    __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_p5_1, _MM_MANT_SIGN_src);
    const __mmask16 small = _mm512_cmp_ps_mask(m, _mm512_set1_ps(0.707106781186547524f), _CMP_LT_OQ);
    e = _mm512_mask_sub_ps(e, small, e, _mm512_set1_ps(1.0f));
    m = _mm512_sub_ps(_mm512_mask_add_ps(m, small, m, m), _mm512_set1_ps(1.0f));
    constexpr float kP[9] = {7.0376836292E-2f, -1.1514610310E-1f, 1.1676998740E-1f, -1.2420140846E-1f, 1.4249322787E-1f,
                             -1.6668057665E-1f, 2.0000714765E-1f, -2.4999993993E-1f, 3.3333331174E-1f};
    const __m512 z = _mm512_mul_ps(m, m);
    __m512 y = _mm512_set1_ps(kP[0]);
    for (int c = 1; c < 9; ++c) y = _mm512_fmadd_ps(y, m, _mm512_set1_ps(kP[c]));
    y = _mm512_mul_ps(_mm512_mul_ps(y, m), z);
    y = _mm512_fmadd_ps(e, _mm512_set1_ps(kExpLn2Lo), y);
    y = _mm512_fnmadd_ps(z, _mm512_set1_ps(0.5f), y);
    const __m512 r = _mm512_fmadd_ps(e, _mm512_set1_ps(kExpLn2Hi), _mm512_add_ps(m, y));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ), r,
                                _mm512_set1_ps(-std::numeric_limits<float>::infinity()));
}

/// One row of a loss against a full target distribution p (V) with q = softmax(z): returns
/// -Σ p log q (+ Σ p log p when `with_entropy`) and adds g ((Σ p) q - p) to dz (layers.hpp's
/// soft_target_row, vectorised; its sums in float lanes).
SPECDEC_TARGET_AVX512 inline double soft_target_row_avx512(float* dz, const float* z, const float* p, int V, float g,
                                                           bool with_entropy) {
    __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int j = 0; j < V; j += 16) mx = _mm512_mask_max_ps(mx, tail_mask16(V - j), mx, _mm512_maskz_loadu_ps(tail_mask16(V - j), z + j));
    const float top = _mm512_reduce_max_ps(mx);
    const __m512 shift = _mm512_set1_ps(top);
    __m512 sum = _mm512_setzero_ps(), mass = _mm512_setzero_ps(), pz = _mm512_setzero_ps(), plogp = _mm512_setzero_ps();
    for (int j = 0; j < V; j += 16) {
        const __mmask16 m = tail_mask16(V - j);
        const __m512 zv = _mm512_maskz_loadu_ps(m, z + j), pv = _mm512_maskz_loadu_ps(m, p + j);
        sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(zv, shift))));
        mass = _mm512_add_ps(mass, pv);
        pz = _mm512_fmadd_ps(pv, _mm512_sub_ps(zv, shift), pz);
        if (with_entropy) {
            const __mmask16 positive = _mm512_mask_cmp_ps_mask(m, pv, _mm512_setzero_ps(), _CMP_GT_OQ);
            plogp = _mm512_mask3_fmadd_ps(pv, log16(pv), plogp, positive);
        }
    }
    const double total = _mm512_reduce_add_ps(sum), p_mass = _mm512_reduce_add_ps(mass);
    const double lse_shifted = std::log(total);  // log Σ exp(z - top)
    double loss = p_mass * lse_shifted - _mm512_reduce_add_ps(pz);
    if (with_entropy) loss += _mm512_reduce_add_ps(plogp);
    const __m512 scale = _mm512_set1_ps(static_cast<float>(g * p_mass / total)), gv = _mm512_set1_ps(g);
    for (int j = 0; j < V; j += 16) {
        const __mmask16 m = tail_mask16(V - j);
        const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, z + j), shift));
        const __m512 d = _mm512_fmsub_ps(e, scale, _mm512_mul_ps(gv, _mm512_maskz_loadu_ps(m, p + j)));
        _mm512_mask_storeu_ps(dz + j, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, dz + j), d));
    }
    return loss;
}

/// probs = softmax(z) over one row of V: exp16 of the shifted row, then scaled by 1/Σ.
SPECDEC_TARGET_AVX512 inline void softmax_row_avx512(float* probs, const float* z, int V) {
    __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int j = 0; j < V; j += 16) mx = _mm512_mask_max_ps(mx, tail_mask16(V - j), mx, _mm512_maskz_loadu_ps(tail_mask16(V - j), z + j));
    const __m512 shift = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < V; j += 16) {
        const __mmask16 m = tail_mask16(V - j);
        const __m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, z + j), shift)));
        _mm512_mask_storeu_ps(probs + j, m, e);
        sum = _mm512_add_ps(sum, e);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int j = 0; j < V; j += 16) {
        const __mmask16 m = tail_mask16(V - j);
        _mm512_mask_storeu_ps(probs + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, probs + j), inv));
    }
}

// ---------------------------------------------------------------------------------------------------
// AdamW

/// One AdamW update's constants (optimizer.hpp): moments' decay, eps, learning rate, weight decay
/// lr·wd, and the bias corrections 1 - βᵗ.
struct AdamWStep {
    float beta1, beta2, eps, lr, decay, bias1, bias2;
};

/// AdamW::step's loop over n parameters, 16 at a time, with its operations in its order and no FMA:
/// the same bits as the scalar loop (sqrt and division are correctly rounded in both).
SPECDEC_TARGET_AVX512 inline void adamw_avx512(float* p, const float* g, float* m, float* v, std::size_t n, AdamWStep a) {
    const __m512 b1 = _mm512_set1_ps(a.beta1), b2 = _mm512_set1_ps(a.beta2), c1 = _mm512_set1_ps(1.0f - a.beta1),
                 c2 = _mm512_set1_ps(1.0f - a.beta2), bias1 = _mm512_set1_ps(a.bias1), bias2 = _mm512_set1_ps(a.bias2),
                 eps = _mm512_set1_ps(a.eps), lr = _mm512_set1_ps(a.lr), decay = _mm512_set1_ps(a.decay);
    for (std::size_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask16(static_cast<int>(std::min<std::size_t>(16, n - i)));
        const __m512 gv = _mm512_maskz_loadu_ps(k, g + i);
        const __m512 mv = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_maskz_loadu_ps(k, m + i)), _mm512_mul_ps(c1, gv));
        const __m512 vv = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_maskz_loadu_ps(k, v + i)), _mm512_mul_ps(_mm512_mul_ps(c2, gv), gv));
        _mm512_mask_storeu_ps(m + i, k, mv);
        _mm512_mask_storeu_ps(v + i, k, vv);
        const __m512 m_hat = _mm512_div_ps(mv, bias1), v_hat = _mm512_div_ps(vv, bias2);
        __m512 pv = _mm512_maskz_loadu_ps(k, p + i);
        pv = _mm512_sub_ps(pv, _mm512_mul_ps(decay, pv));
        pv = _mm512_sub_ps(pv, _mm512_div_ps(_mm512_mul_ps(lr, m_hat), _mm512_add_ps(_mm512_sqrt_ps(v_hat), eps)));
        _mm512_mask_storeu_ps(p + i, k, pv);
    }
}

// ---------------------------------------------------------------------------------------------------
// Attention

/// Keys (or values) of one kv head of one sequence, transposed: dst[d * ld + j] = src row j, element d,
/// for j < rows; columns [rows, ld) zero.
SPECDEC_TARGET_AVX512 inline void transpose_head(float* dst, int ld, const float* src, std::size_t row_stride, int rows,
                                                 int hd) {
    for (int j0 = 0; j0 < ld; j0 += 16) {
        for (int d0 = 0; d0 < hd; d0 += 16) {
            __m512 v[16];
#pragma GCC unroll 16
            for (int r = 0; r < 16; ++r)
                v[r] = j0 + r < rows ? _mm512_maskz_loadu_ps(tail_mask16(hd - d0), src + (j0 + r) * row_stride + d0)
                                     : _mm512_setzero_ps();
            transpose16(v);
            for (int d = 0; d < std::min(16, hd - d0); ++d) _mm512_storeu_ps(dst + offset(d0 + d, ld) + j0, v[d]);
        }
    }
}

/// Where a mask row's visible keys end: one past the last visible key (0 when none is).
inline int visible_end(const std::uint8_t* visible, int Tk) {
    int end = Tk;
    while (end > 0 && !visible[end - 1]) --end;
    return end;
}

/// S[r][j] = Σ_d x_r[d] · kt[d][j] for R rows x_r (`x_stride` floats apart) and the keys of vectors
/// [0, nvec) (kt: hd x ld, transposed keys; S rows ld apart): 4 vectors of keys per pass, each kt load
/// serving the R rows.
template <int R>
SPECDEC_TARGET_AVX512 void scores_rows(float* s, const float* x, std::size_t x_stride, const float* kt, int ld, int hd,
                                       int nvec) {
    for (int v0 = 0; v0 < nvec; v0 += 4) {
        const int nv = std::min(4, nvec - v0);
        __m512 acc[R][4];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_setzero_ps();
        for (int d = 0; d < hd; ++d) {
            const float* row = kt + offset(d, ld) + 16 * v0;
            __m512 kv[4];
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v) kv[v] = v < nv ? _mm512_loadu_ps(row + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const __m512 xd = _mm512_set1_ps(x[r * x_stride + d]);
#pragma GCC unroll 4
                for (int v = 0; v < 4; ++v)
                    if (v < nv) acc[r][v] = _mm512_fmadd_ps(xd, kv[v], acc[r][v]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v)
                if (v < nv) _mm512_storeu_ps(s + offset(r, ld) + 16 * (v0 + v), acc[r][v]);
    }
}

/// out_r (NV vectors, rows `out_stride` apart) += Σ_{j < n} w_r[j] · rows[j * stride] for R rows of
/// weights w (ld apart): each row of `rows` (a value or key row) loaded once for the R outputs. `last`
/// masks the last vector (a head size that is not a multiple of 16).
template <int R, int NV>
SPECDEC_TARGET_AVX512 void weighted_rows(float* out, std::size_t out_stride, const float* w, int ld, const float* rows,
                                         std::size_t stride, int n, __mmask16 last) {
    __m512 acc[R][NV];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int j = 0; j < n; ++j) {
        __m512 x[NV];
#pragma GCC unroll 8
        for (int c = 0; c < NV; ++c) x[c] = _mm512_maskz_loadu_ps(c + 1 < NV ? 0xFFFF : last, rows + j * stride + 16 * c);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const __m512 wj = _mm512_set1_ps(w[offset(r, ld) + j]);
#pragma GCC unroll 8
            for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_fmadd_ps(wj, x[c], acc[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int c = 0; c < NV; ++c) {
            float* o = out + r * out_stride + 16 * c;
            const __mmask16 lanes = c + 1 < NV ? 0xFFFF : last;
            _mm512_mask_storeu_ps(o, lanes, _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, o), acc[r][c]));
        }
}

/// The shape of an attention call, as layers.hpp's AttentionShape, plus where rows live.
struct AttentionGeometry {
    int B, Tq, Tk, H, Hkv, hd;
    std::size_t q_row, kv_row;  // floats between consecutive rows of q (H*hd) and of k, v (Hkv*hd)
    const std::uint8_t* mask;   // (Tq, Tk), or (B, Tq, Tk) when mask_per_sequence; the forward's only
    bool mask_per_sequence;

    const std::uint8_t* mask_row(int b, int i) const {
        return mask + (static_cast<std::size_t>(mask_per_sequence ? b : 0) * Tq + i) * Tk;
    }
};

/// Query rows per block of the attention kernels: R rows x NV vectors accumulate in registers.
template <int NV>
constexpr int kAttentionRows = NV <= 4 ? 4 : 2;

/// One past the last non-zero of p (n floats): where a row of probabilities ends. Past it the row adds
/// nothing to any gradient, whether its keys were masked or their weights underflowed.
SPECDEC_TARGET_AVX512 inline int nonzero_end(const float* p, int n) {
    for (int c = (n - 1) / 16; c >= 0; --c) {
        const auto lanes = static_cast<unsigned>(
            _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(tail_mask16(n - 16 * c), p + 16 * c), _mm512_setzero_ps(), _CMP_NEQ_UQ));
        if (lanes != 0) return 16 * c + 32 - __builtin_clz(lanes);
    }
    return 0;
}

/// One (sequence b, kv head) of attention_forward: the group's query heads against the head's keys,
/// transposed once, R query rows at a time. Scores run only up to each block's last visible key (half
/// the work for a causal mask); probabilities past a row's own last visible key are 0.
template <int NV>
SPECDEC_TARGET_AVX512 void attention_forward_task(float* out, float* probs, const float* q, const float* k,
                                                  const float* v, const AttentionGeometry& g, int b, int kvh) {
    constexpr int R = kAttentionRows<NV>;
    const int hd = g.hd, group = g.H / g.Hkv, ld = (g.Tk + 15) / 16 * 16;
    const __mmask16 last = tail_mask16(hd - 16 * (NV - 1));
    float* kt = task_scratch(static_cast<std::size_t>(hd) * ld + static_cast<std::size_t>(R) * ld);
    float* s = kt + static_cast<std::size_t>(hd) * ld;  // (R, ld) the block's scores, then probabilities
    const std::size_t kv_off = static_cast<std::size_t>(b) * g.Tk * g.kv_row + static_cast<std::size_t>(kvh) * hd;
    transpose_head(kt, ld, k + kv_off, g.kv_row, g.Tk, hd);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int h = kvh * group; h < (kvh + 1) * group; ++h)
        for (int i0 = 0; i0 < g.Tq; i0 += R) {
            const int rows = std::min(R, g.Tq - i0);
            int ends[R] = {}, block_end = 0;
            for (int r = 0; r < rows; ++r) block_end = std::max(block_end, ends[r] = visible_end(g.mask_row(b, i0 + r), g.Tk));
            const int block_vecs = (block_end + 15) / 16;
            const std::size_t q_off = (static_cast<std::size_t>(b) * g.Tq + i0) * g.q_row + static_cast<std::size_t>(h) * hd;
            if (rows == R) scores_rows<R>(s, q + q_off, g.q_row, kt, ld, hd, block_vecs);
            else
                for (int r = 0; r < rows; ++r) scores_rows<1>(s + offset(r, ld), q + q_off + r * g.q_row, g.q_row, kt, ld, hd, block_vecs);
            for (int r = 0; r < rows; ++r) {
                const int end = ends[r], nvec = (end + 15) / 16;
                const std::uint8_t* visible = g.mask_row(b, i0 + r);
                float* sr = s + offset(r, ld);
                float* p = probs + ((static_cast<std::size_t>(b) * g.H + h) * g.Tq + i0 + r) * g.Tk;
                std::fill_n(out + q_off + r * g.q_row, hd, 0.0f);
                std::fill(p + end, p + g.Tk, 0.0f);
                std::fill(sr + 16 * nvec, sr + 16 * block_vecs, 0.0f);  // weighs nothing in the block's sums
                if (end == 0) continue;
                __m512 mx = neg_inf;
                for (int c = 0; c < nvec; ++c) {
                    const __mmask16 lanes = tail_mask16(end - 16 * c);
                    const __mmask16 seen = _mm_test_epi8_mask(_mm_maskz_loadu_epi8(lanes, visible + 16 * c),
                                                              _mm_set1_epi8(static_cast<char>(0xFF)));
                    const __m512 sc = _mm512_mask_mul_ps(neg_inf, seen, _mm512_loadu_ps(sr + 16 * c), _mm512_set1_ps(scale));
                    _mm512_storeu_ps(sr + 16 * c, sc);
                    mx = _mm512_max_ps(mx, sc);
                }
                const __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
                __m512 sum = _mm512_setzero_ps();
                for (int c = 0; c < nvec; ++c) {
                    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(sr + 16 * c), top));  // masked: exp(-inf) = 0
                    _mm512_storeu_ps(sr + 16 * c, e);
                    sum = _mm512_add_ps(sum, e);
                }
                const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
                for (int c = 0; c < nvec; ++c) {
                    const __m512 pr = _mm512_mul_ps(_mm512_loadu_ps(sr + 16 * c), inv);
                    _mm512_storeu_ps(sr + 16 * c, pr);
                    _mm512_mask_storeu_ps(p + 16 * c, tail_mask16(end - 16 * c), pr);
                }
            }
            if (rows == R) weighted_rows<R, NV>(out + q_off, g.q_row, s, ld, v + kv_off, g.kv_row, block_end, last);
            else
                for (int r = 0; r < rows; ++r)
                    weighted_rows<1, NV>(out + q_off + r * g.q_row, g.q_row, s + offset(r, ld), ld, v + kv_off, g.kv_row, ends[r], last);
        }
}

/// Keys [j0, j0 + JB) of attention_backward_task: dk_j += Σ_i dS_ij q_i and dv_j += Σ_i P_ij dout_i over
/// the group's rows, each row's q and dout loaded once for the JB keys.
template <int NV, int JB>
SPECDEC_TARGET_AVX512 void attention_key_block(float* dk, float* dv, const float* dout, const float* probs, const float* q,
                                               const float* ds, const int* ends, const AttentionGeometry& g, int b,
                                               int kvh, int j0) {
    const int hd = g.hd, group = g.H / g.Hkv, ld = (g.Tk + 15) / 16 * 16;
    const __mmask16 last = tail_mask16(hd - 16 * (NV - 1));
    const std::size_t kv_off = static_cast<std::size_t>(b) * g.Tk * g.kv_row + static_cast<std::size_t>(kvh) * hd;
    __m512 acc_k[JB][NV], acc_v[JB][NV];
#pragma GCC unroll 4
    for (int t = 0; t < JB; ++t)
#pragma GCC unroll 8
        for (int c = 0; c < NV; ++c) acc_k[t][c] = acc_v[t][c] = _mm512_setzero_ps();
    for (int gi = 0; gi < group; ++gi) {
        const int h = kvh * group + gi;
        for (int i = 0; i < g.Tq; ++i) {
            if (ends[i] <= j0) continue;  // sees none of these keys: P and dS are 0
            const std::size_t q_off = (static_cast<std::size_t>(b) * g.Tq + i) * g.q_row + static_cast<std::size_t>(h) * hd;
            const float* p = probs + ((static_cast<std::size_t>(b) * g.H + h) * g.Tq + i) * g.Tk + j0;
            const float* dsi = ds + (static_cast<std::size_t>(gi) * g.Tq + i) * ld + j0;
            __m512 qv[NV], gv[NV];
#pragma GCC unroll 8
            for (int c = 0; c < NV; ++c) {
                const __mmask16 lanes = c + 1 < NV ? 0xFFFF : last;
                qv[c] = _mm512_maskz_loadu_ps(lanes, q + q_off + 16 * c), gv[c] = _mm512_maskz_loadu_ps(lanes, dout + q_off + 16 * c);
            }
#pragma GCC unroll 4
            for (int t = 0; t < JB; ++t) {
                const __m512 dst = _mm512_set1_ps(dsi[t]), pt = _mm512_set1_ps(p[t]);
#pragma GCC unroll 8
                for (int c = 0; c < NV; ++c) {
                    acc_k[t][c] = _mm512_fmadd_ps(dst, qv[c], acc_k[t][c]);
                    acc_v[t][c] = _mm512_fmadd_ps(pt, gv[c], acc_v[t][c]);
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < JB; ++t)
#pragma GCC unroll 8
        for (int c = 0; c < NV; ++c) {
            float* dkr = dk + kv_off + (j0 + t) * g.kv_row + 16 * c;
            float* dvr = dv + kv_off + (j0 + t) * g.kv_row + 16 * c;
            const __mmask16 lanes = c + 1 < NV ? 0xFFFF : last;
            _mm512_mask_storeu_ps(dkr, lanes, _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, dkr), acc_k[t][c]));
            _mm512_mask_storeu_ps(dvr, lanes, _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, dvr), acc_v[t][c]));
        }
}

/// One (sequence b, kv head) of attention_backward. Per block of R query rows of each head of the
/// group: dP = dout·vᵀ (from transposed values), dS = P (dP - Σ P dP) /√hd kept for the keys,
/// dq += dS·k. Then per block of J keys, over the rows: dk += dSᵀ q and dv += Pᵀ dout, each row's q
/// and dout loaded once for J keys.
template <int NV>
SPECDEC_TARGET_AVX512 void attention_backward_task(float* dq, float* dk, float* dv, const float* dout, const float* probs,
                                                   const float* q, const float* k, const float* v,
                                                   const AttentionGeometry& g, int b, int kvh) {
    constexpr int J = NV <= 2 ? 4 : NV <= 4 ? 2 : 1;  // keys per block: 2 J NV accumulators
    constexpr int R = kAttentionRows<NV>;
    const int hd = g.hd, group = g.H / g.Hkv, ld = (g.Tk + 15) / 16 * 16;
    const __mmask16 last = tail_mask16(hd - 16 * (NV - 1));
    const std::size_t ds_size = static_cast<std::size_t>(group) * g.Tq * ld;
    float* vt = task_scratch(static_cast<std::size_t>(hd) * ld + ds_size);
    float* ds = vt + static_cast<std::size_t>(hd) * ld;  // (group, Tq, ld)
    std::vector<int> ends(static_cast<std::size_t>(group) * g.Tq);  // (group, Tq) where each row's P ends
    const std::size_t kv_off = static_cast<std::size_t>(b) * g.Tk * g.kv_row + static_cast<std::size_t>(kvh) * hd;
    transpose_head(vt, ld, v + kv_off, g.kv_row, g.Tk, hd);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

    for (int gi = 0; gi < group; ++gi) {
        const int h = kvh * group + gi;
        for (int i0 = 0; i0 < g.Tq; i0 += R) {
            const int rows = std::min(R, g.Tq - i0);
            int block_end = 0;
            for (int r = 0; r < rows; ++r) {
                const float* p = probs + ((static_cast<std::size_t>(b) * g.H + h) * g.Tq + i0 + r) * g.Tk;
                block_end = std::max(block_end, ends[static_cast<std::size_t>(gi) * g.Tq + i0 + r] = nonzero_end(p, g.Tk));
            }
            const int block_vecs = (block_end + 15) / 16;
            const std::size_t q_off = (static_cast<std::size_t>(b) * g.Tq + i0) * g.q_row + static_cast<std::size_t>(h) * hd;
            float* dsb = ds + (static_cast<std::size_t>(gi) * g.Tq + i0) * ld;  // the block's rows of dS
            if (rows == R) scores_rows<R>(dsb, dout + q_off, g.q_row, vt, ld, hd, block_vecs);  // dP
            else
                for (int r = 0; r < rows; ++r)
                    scores_rows<1>(dsb + offset(r, ld), dout + q_off + r * g.q_row, g.q_row, vt, ld, hd, block_vecs);
            for (int r = 0; r < rows; ++r) {
                const int end = ends[static_cast<std::size_t>(gi) * g.Tq + i0 + r], nvec = (end + 15) / 16;
                const float* p = probs + ((static_cast<std::size_t>(b) * g.H + h) * g.Tq + i0 + r) * g.Tk;
                float* dsi = dsb + offset(r, ld);
                std::fill(dsi + 16 * nvec, dsi + ld, 0.0f);
                __m512 dot = _mm512_setzero_ps();
                for (int c = 0; c < nvec; ++c) {
                    const __mmask16 m = tail_mask16(end - 16 * c);
                    dot = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p + 16 * c), _mm512_maskz_loadu_ps(m, dsi + 16 * c), dot);
                }
                const __m512 dot_sum = _mm512_set1_ps(_mm512_reduce_add_ps(dot)), sc = _mm512_set1_ps(scale);
                for (int c = 0; c < nvec; ++c) {
                    const __mmask16 m = tail_mask16(end - 16 * c);
                    const __m512 pv = _mm512_maskz_loadu_ps(m, p + 16 * c);
                    const __m512 d = _mm512_mul_ps(_mm512_mul_ps(pv, _mm512_sub_ps(_mm512_loadu_ps(dsi + 16 * c), dot_sum)), sc);
                    _mm512_storeu_ps(dsi + 16 * c, _mm512_maskz_mov_ps(m, d));
                }
            }
            if (rows == R) weighted_rows<R, NV>(dq + q_off, g.q_row, dsb, ld, k + kv_off, g.kv_row, block_end, last);
            else
                for (int r = 0; r < rows; ++r)
                    weighted_rows<1, NV>(dq + q_off + r * g.q_row, g.q_row, dsb + offset(r, ld), ld, k + kv_off, g.kv_row,
                                         ends[static_cast<std::size_t>(gi) * g.Tq + i0 + r], last);
        }
    }

    int j0 = 0;
    for (; j0 + J <= g.Tk; j0 += J) attention_key_block<NV, J>(dk, dv, dout, probs, q, ds, ends.data(), g, b, kvh, j0);
    for (; j0 < g.Tk; ++j0) attention_key_block<NV, 1>(dk, dv, dout, probs, q, ds, ends.data(), g, b, kvh, j0);
}

SPECDEC_INTRINSICS_END
#endif  // __x86_64__

/// Whether attention_forward/backward_avx512 serve this head size: up to 8 vectors, the last one masked.
inline bool attention_kernels_serve(int hd) { return train_kernels_available() && hd > 0 && hd <= 128; }

#if defined(__x86_64__)
/// task(NV) with NV = the head's vectors of 16, as a compile-time constant.
template <class Task>
void for_head_size(int hd, Task&& task) {
    switch ((hd + 15) / 16) {
        case 1: return task(std::integral_constant<int, 1>{});
        case 2: return task(std::integral_constant<int, 2>{});
        case 3: return task(std::integral_constant<int, 3>{});
        case 4: return task(std::integral_constant<int, 4>{});
        case 5: return task(std::integral_constant<int, 5>{});
        case 6: return task(std::integral_constant<int, 6>{});
        case 7: return task(std::integral_constant<int, 7>{});
        default: return task(std::integral_constant<int, 8>{});
    }
}

/// One task per (sequence, kv head): the heads of a group add into the same dk/dv rows, and share
/// one transpose of the keys or values.
inline void attention_forward_avx512(ThreadPool& pool, float* out, float* probs, const float* q, const float* k,
                                     const float* v, const AttentionGeometry& g) {
    pool.parallel_for(g.B * g.Hkv, [&](int task) {
        for_head_size(g.hd, [&]<int NV>(std::integral_constant<int, NV>) {
            attention_forward_task<NV>(out, probs, q, k, v, g, task / g.Hkv, task % g.Hkv);
        });
    });
}

inline void attention_backward_avx512(ThreadPool& pool, float* dq, float* dk, float* dv, const float* dout,
                                      const float* probs, const float* q, const float* k, const float* v,
                                      const AttentionGeometry& g) {
    pool.parallel_for(g.B * g.Hkv, [&](int task) {
        for_head_size(g.hd, [&]<int NV>(std::integral_constant<int, NV>) {
            attention_backward_task<NV>(dq, dk, dv, dout, probs, q, k, v, g, task / g.Hkv, task % g.Hkv);
        });
    });
}
#endif

}  // namespace specdec::detail
