// specdec/detail/model/softmax.hpp — exp over vectors, for softmax numerators (the attention's exp per
// (query, key) pair, which as a libm call per score was its largest cost, ~40%) and for SwiGLU.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>

#include "matmul.hpp"

namespace specdec::detail {

#if defined(__x86_64__)
SPECDEC_INTRINSICS_BEGIN

// Cephes' expf constants, shared by exp16 and exp8: log2(e), ln 2 split in two (the high part exact
// in few bits), and the polynomial P, highest power first, with exp(r) ≈ P(r)·r² + r + 1.
constexpr float kExpLog2e = 1.44269504f, kExpLn2Hi = 0.693359375f, kExpLn2Lo = -2.12194440e-4f;
constexpr float kExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                               4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

/// Cephes' expf, the form of llama.cpp's ggml_v_expf: n = round(x / ln 2), r = x - n ln 2 in two
/// parts, exp(r) by a degree-6 polynomial, times 2^n; within a few ulp of expf (the tests allow 4).
/// For x <= 88; x < -87 (where expf leaves the normal range; -inf for a masked key) gives 0.
SPECDEC_TARGET_AVX512 inline __m512 exp16(__m512 x) {
    const __mmask16 normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kExpLog2e)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kExpLn2Hi), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kExpLn2Lo), r);
    __m512 y = _mm512_set1_ps(kExpPoly[0]);
    for (int c = 1; c < 6; ++c) y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kExpPoly[c]));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_scalef_ps(normal, y, n);
}

SPECDEC_TARGET_AVX512 inline float softmax_numerators_avx512(float* p, int len, float scale) {
    const auto tail = [len](int r) { return static_cast<__mmask16>(len - r >= 16 ? 0xffffu : (1u << (len - r)) - 1u); };
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int r = 0; r < len; r += 16) mx = _mm512_mask_max_ps(mx, tail(r), mx, _mm512_maskz_loadu_ps(tail(r), p + r));
    // (p - max) * scale, like the reference: the difference of nearby scores is exact, while
    // p * scale - max * scale would carry max * scale's rounding (ulps of 100 for sharp rows).
    const __m512 s = _mm512_set1_ps(scale), shift = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int r = 0; r < len; r += 16) {
        const __mmask16 m = tail(r);
        const __m512 e = exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, p + r), shift), s));
        _mm512_mask_storeu_ps(p + r, m, e);
        sum = _mm512_mask_add_ps(sum, m, sum, e);
    }
    return _mm512_reduce_add_ps(sum);
}

/// exp16 for 8 floats; 2^n is built in the exponent bits (AVX2 has no scalef).
SPECDEC_TARGET_AVX2 inline __m256 exp8(__m256 x) {
    const __m256 normal = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kExpLog2e)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kExpLn2Hi), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kExpLn2Lo), r);
    __m256 y = _mm256_set1_ps(kExpPoly[0]);
    for (int c = 1; c < 6; ++c) y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kExpPoly[c]));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i pow2n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(pow2n)), normal);
}

SPECDEC_TARGET_AVX2 inline float softmax_numerators_avx2(float* p, int len, float scale) {
    float mx = -INFINITY;
    for (int r = 0; r < len; ++r) mx = std::max(mx, p[r]);
    const __m256 s = _mm256_set1_ps(scale), shift = _mm256_set1_ps(mx);
    __m256 sum8 = _mm256_setzero_ps();
    int r = 0;
    for (; r + 8 <= len; r += 8) {
        const __m256 e = exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(p + r), shift), s));
        _mm256_storeu_ps(p + r, e);
        sum8 = _mm256_add_ps(sum8, e);
    }
    float sum = reduce_add8(sum8);
    for (; r < len; ++r) sum += (p[r] = std::exp((p[r] - mx) * scale));
    return sum;
}

/// h = silu(g) · u over 16 floats at a time (the tail masked).
SPECDEC_TARGET_AVX512 inline void swiglu_avx512(float* h, const float* g, const float* u, int n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int j = 0; j < n; j += 16) {
        const __mmask16 m = static_cast<__mmask16>(n - j >= 16 ? 0xFFFFu : (1u << (n - j)) - 1u);
        const __m512 gv = _mm512_maskz_loadu_ps(m, g + j), uv = _mm512_maskz_loadu_ps(m, u + j);
        // exp16(-g) is +inf past g < -88: g / inf = -0, as with std::exp.
        const __m512 sig = _mm512_div_ps(gv, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), gv))));
        _mm512_mask_storeu_ps(h + j, m, _mm512_mul_ps(sig, uv));
    }
}

SPECDEC_INTRINSICS_END
#endif  // __x86_64__

/// p[r] <- exp(scale * (p[r] - max p)) over [0, len), scale > 0; returns their sum. The max keeps
/// every exponent <= 0 (a stable softmax); -inf (a masked key) becomes 0.
inline float softmax_numerators(float* p, int len, float scale) {
#if defined(__x86_64__)
    switch (best_isa()) {
        case MatmulIsa::kAvx512: return softmax_numerators_avx512(p, len, scale);
        case MatmulIsa::kAvx2: return softmax_numerators_avx2(p, len, scale);
        default: break;
    }
#endif
    const float mx = *std::max_element(p, p + len);
    float sum = 0.0f;
    for (int r = 0; r < len; ++r) sum += (p[r] = std::exp((p[r] - mx) * scale));
    return sum;
}

/// SwiGLU's h = silu(g) · u = g / (1 + exp(-g)) · u over n floats. `fast`: exp by exp16 where
/// AVX-512 runs (a few ulp from std::exp, which the reference models keep); a libm call per element
/// took ~2% of a 16-node tree forward.
inline void swiglu(float* h, const float* g, const float* u, int n, bool fast) {
#if defined(__x86_64__)
    if (fast && best_isa() == MatmulIsa::kAvx512) return swiglu_avx512(h, g, u, n);
#endif
    for (int j = 0; j < n; ++j) h[j] = g[j] / (1.0f + std::exp(-g[j])) * u[j];
}

}  // namespace specdec::detail
