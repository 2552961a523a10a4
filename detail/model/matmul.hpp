// specdec/detail/model/matmul.hpp — y = x·Wᵀ, the one matrix product of the model: plain loops and fast paths.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>

#include "bf16.hpp"
#include "../core/error.hpp"
#include "thread_pool.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// Shapes (HF / llama2.c layout): n rows of activations, k inputs, m outputs.
//   x (n, k) row-major, W (m, k) row-major = (out_features, in_features), y (n, m) = x · Wᵀ.
// n = 1 is a decode step, 2..64 a tree verification, 512 a prefill.
//
// Two kernels, three instruction sets, chosen once per call:
//  - rows: each output is a dot product of an x row and a W row, both contiguous in k. A block of
//    4 W rows is streamed from memory once and meets up to 6 x rows in registers, so for small n
//    the product stays bound by the bandwidth of reading W (the point of tree verification).
//  - packed (large n, GotoBLAS/BLIS): x and W are copied into k-major panels and a register-blocked
//    micro-kernel computes MR x NR tiles of y from broadcasts of x and vectors of W; compute-bound.
// bf16 weights are widened to f32 in registers (rows) or while packing (packed), which is exact, so
// every path computes the same products in f32 and differs only in summation order.

#if defined(__x86_64__)
#define SPECDEC_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define SPECDEC_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
#define SPECDEC_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")))
#endif

// Around code that inlines AVX-512 intrinsics: GCC 12's seed their results with `_mm512_undefined_*()`
// (`__m512 __Y = __Y;`), which -Wuninitialized and -Wmaybe-uninitialized flag once inlined into our
// kernels; the warnings are spurious. (-Wmaybe-uninitialized is GCC's alone: clang would warn about the
// unknown group.)
#if defined(__clang__)
#define SPECDEC_INTRINSICS_BEGIN _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#else
#define SPECDEC_INTRINSICS_BEGIN                                                                                 \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")                       \
        _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#endif
#define SPECDEC_INTRINSICS_END _Pragma("GCC diagnostic pop")

namespace specdec {

// ---------------------------------------------------------------------------------------------------
// CPU features

/// What the running CPU (and OS) can execute; read once.
struct CpuFeatures {
    bool avx2_fma = false;     // AVX2 + FMA3 (Haswell, Zen 1 and later)
    bool avx512 = false;       // AVX-512 F + BW + VL (Skylake-X, Zen 4 and later)
    bool avx512_bf16 = false;  // AVX-512 BF16 (vdpbf16ps): the panel product's bf16 x bf16 path
};

inline CpuFeatures cpu_features() {
    static const CpuFeatures features = [] {
        CpuFeatures f;
#if defined(__x86_64__)
        __builtin_cpu_init();
        f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        f.avx512 = f.avx2_fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl");
        f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
#endif
        return f;
    }();
    return features;
}

// ---------------------------------------------------------------------------------------------------
// Reference: the oracle

/// y (n, m) = x (n, k) · W (m, k)ᵀ, sequential f32 sums in k order. Single-threaded, slow, obvious.
inline void matmul_reference(float* y, const float* x, const float* W, int n, int k, int m) {
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < m; ++j) {
            float s = 0.0f;
            for (int p = 0; p < k; ++p)
                s += x[static_cast<std::ptrdiff_t>(i) * k + p] * W[static_cast<std::ptrdiff_t>(j) * k + p];
            y[static_cast<std::ptrdiff_t>(i) * m + j] = s;
        }
}

/// Same with bf16 weights, widened exactly to f32.
inline void matmul_reference(float* y, const float* x, const bf16* W, int n, int k, int m) {
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < m; ++j) {
            float s = 0.0f;
            for (int p = 0; p < k; ++p)
                s += x[static_cast<std::ptrdiff_t>(i) * k + p] *
                     to_float(W[static_cast<std::ptrdiff_t>(j) * k + p]);
            y[static_cast<std::ptrdiff_t>(i) * m + j] = s;
        }
}

namespace detail {

// ---------------------------------------------------------------------------------------------------
// Path selection

/// Instruction set of a fast path. kAuto picks the best the CPU has.
enum class MatmulIsa { kAuto, kScalar, kAvx2, kAvx512 };

/// Kernel of a fast path. kAuto picks rows for small n and packed for large n.
enum class MatmulKernel { kAuto, kRows, kPacked };

/// A forced choice, for tests and benchmarks; the public `matmul` uses the defaults.
struct MatmulPath {
    MatmulIsa isa = MatmulIsa::kAuto;
    MatmulKernel kernel = MatmulKernel::kAuto;
};

inline const char* isa_name(MatmulIsa isa) {
    switch (isa) {
        case MatmulIsa::kAuto: return "auto";
        case MatmulIsa::kScalar: return "scalar";
        case MatmulIsa::kAvx2: return "avx2";
        case MatmulIsa::kAvx512: return "avx512";
    }
    return "?";
}

inline bool isa_available(MatmulIsa isa) {
    switch (isa) {
        case MatmulIsa::kAuto:
        case MatmulIsa::kScalar: return true;
        case MatmulIsa::kAvx2: return cpu_features().avx2_fma;
        case MatmulIsa::kAvx512: return cpu_features().avx512;
    }
    return false;
}

inline MatmulIsa best_isa() {
    static const MatmulIsa best = isa_available(MatmulIsa::kAvx512) ? MatmulIsa::kAvx512
                                  : isa_available(MatmulIsa::kAvx2) ? MatmulIsa::kAvx2
                                                                    : MatmulIsa::kScalar;
    return best;
}

inline float widen(float w) { return w; }
inline float widen(bf16 w) { return to_float(w); }

inline std::ptrdiff_t offset(int row, int stride) { return static_cast<std::ptrdiff_t>(row) * stride; }

/// Heap buffer aligned for full-vector loads; the packed path's panels.
struct AlignedFloats {
    struct Free {
        void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
    };
    std::unique_ptr<float[], Free> data;
    explicit AlignedFloats(std::size_t count)
        : data(static_cast<float*>(::operator new[](count * sizeof(float), std::align_val_t{64}))) {}
    float* get() const { return data.get(); }
};

/// Per-thread scratch that grows on demand and is kept: calls reuse it instead of allocating (and
/// page-faulting fresh memory) each time. Slot 0 holds what a caller prepares for all its tasks (the
/// packed x), slot 1 what one task uses alone; a thread is the caller of at most one product at a
/// time, so the two never collide. Contents are undefined on return.
inline float* thread_scratch(int slot, std::size_t count) {
    struct Slot {
        AlignedFloats buffer{0};
        std::size_t size = 0;
    };
    thread_local Slot slots[3];  // 0, 1: the products' packed x and W; 2: a model's rounded x
    Slot& s = slots[slot];
    if (s.size < count) {
        s.size = std::max(count, s.size + s.size / 2);
        s.buffer = AlignedFloats(s.size);
    }
    return s.buffer.get();
}

// ---------------------------------------------------------------------------------------------------
// Scalar rows kernel: the portable path (any CPU, any compiler)

/// Rows [j0, j1) of y; sums in k order like the reference, four W rows at a time.
template <class WT>
void rows_scalar(float* y, const float* x, const WT* W, int n, int k, int m, int j0, int j1) {
    int j = j0;
    for (; j + 4 <= j1; j += 4) {
        const WT* w0 = W + offset(j, k);
        const WT* w1 = w0 + k;
        const WT* w2 = w1 + k;
        const WT* w3 = w2 + k;
        for (int i = 0; i < n; ++i) {
            const float* xi = x + offset(i, k);
            float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
            for (int p = 0; p < k; ++p) {
                s0 += xi[p] * widen(w0[p]);
                s1 += xi[p] * widen(w1[p]);
                s2 += xi[p] * widen(w2[p]);
                s3 += xi[p] * widen(w3[p]);
            }
            float* yi = y + offset(i, m) + j;
            yi[0] = s0, yi[1] = s1, yi[2] = s2, yi[3] = s3;
        }
    }
    for (; j < j1; ++j) {
        const WT* wj = W + offset(j, k);
        for (int i = 0; i < n; ++i) {
            const float* xi = x + offset(i, k);
            float s = 0.0f;
            for (int p = 0; p < k; ++p) s += xi[p] * widen(wj[p]);
            y[offset(i, m) + j] = s;
        }
    }
}

#if defined(__x86_64__)
SPECDEC_INTRINSICS_BEGIN

// ---------------------------------------------------------------------------------------------------
// AVX-512 kernels

SPECDEC_TARGET_AVX2 inline float reduce_add8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

SPECDEC_TARGET_AVX512 inline float reduce_add16(__m512 v) {
    const __m512 s = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));  // + the other 256-bit half
    return reduce_add8(_mm512_castps512_ps256(s));
}

SPECDEC_TARGET_AVX512 inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }

/// r[c] <- column c of the 16 x 16 block whose rows are r[0..15] (lanes are columns): unpack pairs of
/// rows, shuffle quads, then exchange 128-bit lanes (64 shuffles). Lanes are moved, not converted, so
/// it serves any 32-bit data.
SPECDEC_TARGET_AVX512 inline void transpose16(__m512 (&r)[16]) {
    __m512 t[16], u[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4g + c], 128-bit lane L: column 4L + c of rows 4g .. 4g + 3.
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
        u[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
        const __m512 w0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), w1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
        const __m512 z0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88), z1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_shuffle_f32x4(w0, z0, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(w1, z1, 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(w0, z0, 0xDD);
        r[12 + c] = _mm512_shuffle_f32x4(w1, z1, 0xDD);
    }
}
SPECDEC_TARGET_AVX512 inline __m512 load16(const bf16* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
SPECDEC_TARGET_AVX512 inline __m512 load16_masked(const float* p, __mmask16 mask) {
    return _mm512_maskz_loadu_ps(mask, p);
}
SPECDEC_TARGET_AVX512 inline __m512 load16_masked(const bf16* p, __mmask16 mask) {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/// A byte range of W to pull towards the core, a little per k step: the next W block. Without it the
/// memory sits idle while a block meets its second and later x tiles (for n > IB), and the product
/// costs the sum of memory and compute time rather than the larger of the two.
struct PrefetchRange {
    const char* next;
    const char* end;
    void step() {
        if (next >= end) return;
        _mm_prefetch(next, _MM_HINT_T1);
        _mm_prefetch(next + 64, _MM_HINT_T1);
        next += 128;
    }
};

/// The share of `bytes` after `begin` that tile t of n_tiles prefetches.
inline PrefetchRange prefetch_share(const void* begin, std::ptrdiff_t bytes, int t, int n_tiles) {
    const std::ptrdiff_t share = (bytes / n_tiles + 127) / 128 * 128;
    const char* b = static_cast<const char*>(begin);
    return {b + std::min(bytes, share * t), b + std::min(bytes, share * (t + 1))};
}

/// y[i][j] = x_i · W_j for a JB x IB tile; y, x and W point at the tile's first row of each.
template <int JB, int IB, class WT>
SPECDEC_TARGET_AVX512 inline void rows_tile_avx512(float* y, const float* x, const WT* W, int k, int m,
                                                   PrefetchRange pf) {
    __m512 acc[JB][IB];
#pragma GCC unroll 8
    for (int j = 0; j < JB; ++j)
#pragma GCC unroll 8
        for (int i = 0; i < IB; ++i) acc[j][i] = _mm512_setzero_ps();
    int p = 0;
    for (; p + 16 <= k; p += 16) {
        pf.step();
        __m512 xv[IB];
#pragma GCC unroll 8
        for (int i = 0; i < IB; ++i) xv[i] = _mm512_loadu_ps(x + offset(i, k) + p);
#pragma GCC unroll 8
        for (int j = 0; j < JB; ++j) {
            const __m512 w = load16(W + offset(j, k) + p);
#pragma GCC unroll 8
            for (int i = 0; i < IB; ++i) acc[j][i] = _mm512_fmadd_ps(w, xv[i], acc[j][i]);
        }
    }
    if (p < k) {
        const __mmask16 mask = static_cast<__mmask16>((1u << (k - p)) - 1u);
        __m512 xv[IB];
#pragma GCC unroll 8
        for (int i = 0; i < IB; ++i) xv[i] = _mm512_maskz_loadu_ps(mask, x + offset(i, k) + p);
#pragma GCC unroll 8
        for (int j = 0; j < JB; ++j) {
            const __m512 w = load16_masked(W + offset(j, k) + p, mask);
#pragma GCC unroll 8
            for (int i = 0; i < IB; ++i) acc[j][i] = _mm512_fmadd_ps(w, xv[i], acc[j][i]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < JB; ++j)
#pragma GCC unroll 8
        for (int i = 0; i < IB; ++i) y[offset(i, m) + j] = reduce_add16(acc[j][i]);
}

/// One JB-row block of W against all n rows of x, IB rows at a time (the block stays in L1), while
/// the next `next_bytes` of W (the next block) are prefetched.
template <int JB, int IB, class WT>
SPECDEC_TARGET_AVX512 inline void rows_block_avx512(float* y, const float* x, const WT* W, int n, int k, int m,
                                                    std::ptrdiff_t next_bytes) {
    const void* next = W + offset(JB, k);
    const int n_tiles = (n + IB - 1) / IB;
    int i = 0, t = 0;
    for (; i + IB <= n; i += IB, ++t)
        rows_tile_avx512<JB, IB>(y + offset(i, m), x + offset(i, k), W, k, m,
                                 prefetch_share(next, next_bytes, t, n_tiles));
    float* yi = y + offset(i, m);
    const float* xi = x + offset(i, k);
    const PrefetchRange pf = prefetch_share(next, next_bytes, t, n_tiles);
    switch (n - i) {
        case 5: if constexpr (IB > 5) rows_tile_avx512<JB, 5>(yi, xi, W, k, m, pf); break;
        case 4: if constexpr (IB > 4) rows_tile_avx512<JB, 4>(yi, xi, W, k, m, pf); break;
        case 3: if constexpr (IB > 3) rows_tile_avx512<JB, 3>(yi, xi, W, k, m, pf); break;
        case 2: if constexpr (IB > 2) rows_tile_avx512<JB, 2>(yi, xi, W, k, m, pf); break;
        case 1: if constexpr (IB > 1) rows_tile_avx512<JB, 1>(yi, xi, W, k, m, pf); break;
        default: break;
    }
}

constexpr int kRowsJb512 = 4;  // W rows per block
constexpr int kRowsIb512 = 6;  // x rows per tile: 4 x 6 = 24 of the 32 zmm registers accumulate

template <class WT>
SPECDEC_TARGET_AVX512 void rows_avx512(float* y, const float* x, const WT* W, int n, int k, int m, int j0,
                                       int j1) {
    constexpr int JB = kRowsJb512, IB = kRowsIb512;
    // Measured on a 2-vCPU EPYC with weights from DRAM, n = 16, one decode step: prefetching the next block
    // cuts bf16 from ~25 to ~18 ms but slows f32 from ~36 to ~42 ms (a 12 KiB f32 block plus its
    // successor crowd the x tiles out of L1), so f32 leaves it to the hardware prefetcher.
    constexpr bool kPrefetchNext = sizeof(WT) == 2;
    int j = j0;
    for (; j + JB <= j1; j += JB) {
        const int next_rows = kPrefetchNext ? std::max(0, std::min(JB, j1 - j - JB)) : 0;  // within this slice
        rows_block_avx512<JB, IB>(y + j, x, W + offset(j, k), n, k, m, offset(next_rows, k) * std::ptrdiff_t{sizeof(WT)});
    }
    switch (j1 - j) {
        case 3: rows_block_avx512<3, IB>(y + j, x, W + offset(j, k), n, k, m, 0); break;
        case 2: rows_block_avx512<2, IB>(y + j, x, W + offset(j, k), n, k, m, 0); break;
        case 1: rows_block_avx512<1, IB>(y + j, x, W + offset(j, k), n, k, m, 0); break;
        default: break;
    }
}

// Packed micro-kernel: MR x NR tile of y, NR = 16 * NV. Per k step it loads NV vectors of packed W
// (L1-resident panel) and broadcasts MR values of packed x: MR * NV FMAs for MR + NV loads.
constexpr int kPackedMr512 = 6;
constexpr int kPackedNv512 = 4;
constexpr int kPackedKc512 = 128;  // W panel NR x KC = 32 KiB, in L1 (48 KiB on Zen 4/5)

template <int MR, int NV>
SPECDEC_TARGET_AVX512 inline void packed_kernel_avx512(int kc, const float* xp, const float* wp, float* c,
                                                       int ldc, bool accumulate) {
    constexpr int NR = 16 * NV;
    __m512 acc[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
    for (int p = 0; p < kc; ++p) {
        __m512 w[NV];
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) w[v] = _mm512_load_ps(wp + p * NR + 16 * v);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
            const __m512 xb = _mm512_set1_ps(xp[p * MR + r]);
#pragma GCC unroll 8
            for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(xb, w[v], acc[r][v]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) {
            float* cv = c + offset(r, ldc) + 16 * v;
            _mm512_storeu_ps(cv, accumulate ? _mm512_add_ps(_mm512_loadu_ps(cv), acc[r][v]) : acc[r][v]);
        }
}

// ---------------------------------------------------------------------------------------------------
// AVX2 + FMA kernels

SPECDEC_TARGET_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
SPECDEC_TARGET_AVX2 inline __m256 load8(const bf16* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

template <int JB, int IB, class WT>
SPECDEC_TARGET_AVX2 inline void rows_tile_avx2(float* y, const float* x, const WT* W, int k, int m) {
    __m256 acc[JB][IB];
#pragma GCC unroll 8
    for (int j = 0; j < JB; ++j)
#pragma GCC unroll 8
        for (int i = 0; i < IB; ++i) acc[j][i] = _mm256_setzero_ps();
    int p = 0;
    for (; p + 8 <= k; p += 8) {
        __m256 xv[IB];
#pragma GCC unroll 8
        for (int i = 0; i < IB; ++i) xv[i] = _mm256_loadu_ps(x + offset(i, k) + p);
#pragma GCC unroll 8
        for (int j = 0; j < JB; ++j) {
            const __m256 w = load8(W + offset(j, k) + p);
#pragma GCC unroll 8
            for (int i = 0; i < IB; ++i) acc[j][i] = _mm256_fmadd_ps(w, xv[i], acc[j][i]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < JB; ++j)
#pragma GCC unroll 8
        for (int i = 0; i < IB; ++i) {
            float s = reduce_add8(acc[j][i]);
            const float* xi = x + offset(i, k);
            const WT* wj = W + offset(j, k);
            for (int q = p; q < k; ++q) s += xi[q] * widen(wj[q]);
            y[offset(i, m) + j] = s;
        }
}

template <int JB, int IB, class WT>
SPECDEC_TARGET_AVX2 inline void rows_block_avx2(float* y, const float* x, const WT* W, int n, int k, int m) {
    int i = 0;
    for (; i + IB <= n; i += IB) rows_tile_avx2<JB, IB>(y + offset(i, m), x + offset(i, k), W, k, m);
    float* yi = y + offset(i, m);
    const float* xi = x + offset(i, k);
    switch (n - i) {
        case 2: if constexpr (IB > 2) rows_tile_avx2<JB, 2>(yi, xi, W, k, m); break;
        case 1: if constexpr (IB > 1) rows_tile_avx2<JB, 1>(yi, xi, W, k, m); break;
        default: break;
    }
}

constexpr int kRowsJb256 = 4;  // 4 x 3 = 12 of the 16 ymm registers accumulate
constexpr int kRowsIb256 = 3;

template <class WT>
SPECDEC_TARGET_AVX2 void rows_avx2(float* y, const float* x, const WT* W, int n, int k, int m, int j0, int j1) {
    constexpr int JB = kRowsJb256, IB = kRowsIb256;
    int j = j0;
    for (; j + JB <= j1; j += JB) rows_block_avx2<JB, IB>(y + j, x, W + offset(j, k), n, k, m);
    switch (j1 - j) {
        case 3: rows_block_avx2<3, IB>(y + j, x, W + offset(j, k), n, k, m); break;
        case 2: rows_block_avx2<2, IB>(y + j, x, W + offset(j, k), n, k, m); break;
        case 1: rows_block_avx2<1, IB>(y + j, x, W + offset(j, k), n, k, m); break;
        default: break;
    }
}

constexpr int kPackedMr256 = 6;
constexpr int kPackedNv256 = 2;
constexpr int kPackedKc256 = 256;  // W panel 16 x 256 = 16 KiB

template <int MR, int NV>
SPECDEC_TARGET_AVX2 inline void packed_kernel_avx2(int kc, const float* xp, const float* wp, float* c, int ldc,
                                                   bool accumulate) {
    constexpr int NR = 8 * NV;
    __m256 acc[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
    for (int p = 0; p < kc; ++p) {
        __m256 w[NV];
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) w[v] = _mm256_load_ps(wp + p * NR + 8 * v);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
            const __m256 xb = _mm256_broadcast_ss(xp + p * MR + r);
#pragma GCC unroll 8
            for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(xb, w[v], acc[r][v]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) {
            float* cv = c + offset(r, ldc) + 8 * v;
            _mm256_storeu_ps(cv, accumulate ? _mm256_add_ps(_mm256_loadu_ps(cv), acc[r][v]) : acc[r][v]);
        }
}

SPECDEC_INTRINSICS_END
#endif  // __x86_64__

// ---------------------------------------------------------------------------------------------------
// Packed driver (shared by the ISAs; only the micro-kernel differs)

/// Geometry of a packed product: x is packed once into MR-row panels for every KC block of k,
/// laid out [k block][panel][p][MR], so a block's panels (n x KC floats) stay in L2.
struct PackedShape {
    int mr, nr, kc;
    int n, k, m;
    int n_panels() const { return (n + mr - 1) / mr; }
    int m_panels() const { return (m + nr - 1) / nr; }
    int n_padded() const { return n_panels() * mr; }
};

/// Copies x rows [i0, i0 + MR) into their panel of every k block, zero-padding rows past n.
inline void pack_x_panel(float* xp, const float* x, const PackedShape& s, int panel) {
    const int i0 = panel * s.mr;
    for (int k0 = 0; k0 < s.k; k0 += s.kc) {
        const int kc = std::min(s.kc, s.k - k0);
        float* dst = xp + offset(k0, s.n_padded()) + offset(panel, s.mr * kc);
        for (int r = 0; r < s.mr; ++r) {
            if (i0 + r < s.n) {
                const float* src = x + offset(i0 + r, s.k) + k0;
                for (int p = 0; p < kc; ++p) dst[p * s.mr + r] = src[p];
            } else {
                for (int p = 0; p < kc; ++p) dst[p * s.mr + r] = 0.0f;
            }
        }
    }
}

/// Copies (and widens) W rows [j0, j0 + NR) x [k0, k0 + kc) into a k-major panel, zero-padding rows past m.
template <class WT>
void pack_w_panel(float* wp, const WT* W, const PackedShape& s, int j0, int k0, int kc) {
    for (int r = 0; r < s.nr; ++r) {
        if (j0 + r < s.m) {
            const WT* src = W + offset(j0 + r, s.k) + k0;
            for (int p = 0; p < kc; ++p) wp[p * s.nr + r] = widen(src[p]);
        } else {
            for (int p = 0; p < kc; ++p) wp[p * s.nr + r] = 0.0f;
        }
    }
}

/// One NR-column strip of y (all n rows): for each k block, pack the W panel once (L1), then run
/// the micro-kernel down the x panels. The strip accumulates in a contiguous scratch `c` (n_padded x
/// NR, in L2) and is copied out once at the end: accumulating in y itself, whose rows are m floats
/// apart, maps a strip onto few cache sets when m is a multiple of a large power of two (2048).
template <class WT, class Kernel>
void packed_strip(float* y, const float* xp, const WT* W, const PackedShape& s, int strip, float* wp, float* c,
                  Kernel kernel) {
    const int j0 = strip * s.nr;
    for (int k0 = 0; k0 < s.k; k0 += s.kc) {
        const int kc = std::min(s.kc, s.k - k0);
        pack_w_panel(wp, W, s, j0, k0, kc);
        const float* xblock = xp + offset(k0, s.n_padded());
        for (int panel = 0; panel < s.n_panels(); ++panel)
            kernel(kc, xblock + offset(panel, s.mr * kc), wp, c + offset(panel * s.mr, s.nr), s.nr, k0 > 0);
    }
    const int nr_valid = std::min(s.nr, s.m - j0);
    for (int i = 0; i < s.n; ++i) std::copy_n(c + offset(i, s.nr), nr_valid, y + offset(i, s.m) + j0);
}

template <class WT, class Kernel>
void packed_product(ThreadPool& pool, float* y, const float* x, const WT* W, PackedShape s, Kernel kernel) {
    float* xpacked = thread_scratch(0, static_cast<std::size_t>(s.n_padded()) * static_cast<std::size_t>(s.k));
    pool.parallel_for(s.n_panels(), [&](int panel) { pack_x_panel(xpacked, x, s, panel); });
    pool.parallel_for(s.m_panels(), [&](int strip) {
        // Per task: the W panel and the strip of y, in the thread's reused scratch (heap, not stack:
        // worker stacks may be small).
        const std::size_t w_size = static_cast<std::size_t>(s.nr) * static_cast<std::size_t>(s.kc);
        float* scratch = thread_scratch(1, w_size + static_cast<std::size_t>(s.n_padded()) * static_cast<std::size_t>(s.nr));
        packed_strip(y, xpacked, W, s, strip, scratch, scratch + w_size, kernel);
    });
}

// ---------------------------------------------------------------------------------------------------
// Dispatch

/// Below this n the rows kernel wins: W is streamed once and the product is bandwidth-bound.
constexpr int kPackedMinN = 96;

/// Splits [0, m) into chunks of whole `align` rows for dynamic claiming: a few per thread, so a
/// thread slowed by a neighbour does not hold the others up, but each chunk streams a long run of W.
inline int rows_chunk(int n, int k, int m, int threads, int align) {
    const double flops = 2.0 * n * static_cast<double>(k) * m;
    if (threads <= 1 || flops < 2e5) return m;  // below ~10 us a wake-up costs more than it saves
    int chunk = (m + 4 * threads - 1) / (4 * threads);
    chunk = std::max(chunk, 16);
    return (chunk + align - 1) / align * align;
}

template <class WT>
void check_matmul_args(const float* y, const float* x, const WT* W, int n, int k, int m) {
    auto bad = [](const char* name, int v) { return std::string(name) + " = " + std::to_string(v) + ", expected >= 0"; };
    if (n < 0) fail("matmul", bad("n", n));
    if (k < 0) fail("matmul", bad("k", k));
    if (m < 0) fail("matmul", bad("m", m));
    if (n > 0 && m > 0 && (y == nullptr || (k > 0 && (x == nullptr || W == nullptr))))
        fail("matmul", "null pointer for a non-empty product (n = " + std::to_string(n) + ", k = " +
                           std::to_string(k) + ", m = " + std::to_string(m) + ")");
}

template <class WT>
void matmul_path(MatmulPath path, ThreadPool& pool, float* y, const float* x, const WT* W, int n, int k, int m) {
    check_matmul_args(y, x, W, n, k, m);
    if (n == 0 || m == 0) return;
    if (k == 0) {
        std::fill_n(y, offset(n, m), 0.0f);
        return;
    }
    MatmulIsa isa = path.isa == MatmulIsa::kAuto ? best_isa() : path.isa;
    if (!isa_available(isa))
        fail("matmul", std::string("path '") + isa_name(isa) + "' requested, but this CPU lacks it");
    MatmulKernel kernel = path.kernel;
    if (kernel == MatmulKernel::kAuto) kernel = n >= kPackedMinN ? MatmulKernel::kPacked : MatmulKernel::kRows;
    if (isa == MatmulIsa::kScalar) kernel = MatmulKernel::kRows;  // plain loops only: the portable path

#if defined(__x86_64__)
    if (kernel == MatmulKernel::kPacked) {
        if (isa == MatmulIsa::kAvx512) {
            constexpr int MR = kPackedMr512, NV = kPackedNv512;
            packed_product(pool, y, x, W, PackedShape{MR, 16 * NV, kPackedKc512, n, k, m},
                           [](int kc, const float* xp, const float* wp, float* c, int ldc, bool acc) {
                               packed_kernel_avx512<MR, NV>(kc, xp, wp, c, ldc, acc);
                           });
        } else {
            constexpr int MR = kPackedMr256, NV = kPackedNv256;
            packed_product(pool, y, x, W, PackedShape{MR, 8 * NV, kPackedKc256, n, k, m},
                           [](int kc, const float* xp, const float* wp, float* c, int ldc, bool acc) {
                               packed_kernel_avx2<MR, NV>(kc, xp, wp, c, ldc, acc);
                           });
        }
        return;
    }
#endif
    const int align = 4;
    const int chunk = rows_chunk(n, k, m, pool.size(), align);
    const int n_chunks = (m + chunk - 1) / chunk;
    pool.parallel_for(n_chunks, [&](int c) {
        const int j0 = c * chunk, j1 = std::min(m, j0 + chunk);
        switch (isa) {
#if defined(__x86_64__)
            case MatmulIsa::kAvx512: rows_avx512(y, x, W, n, k, m, j0, j1); break;
            case MatmulIsa::kAvx2: rows_avx2(y, x, W, n, k, m, j0, j1); break;
#endif
            default: rows_scalar(y, x, W, n, k, m, j0, j1); break;
        }
    });
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------------
// Public entry points

/// y (n, m) = x (n, k) · W (m, k)ᵀ on the pool, with the fastest path this CPU has. y must not
/// overlap x or W. Differs from `matmul_reference` only by f32 summation order.
inline void matmul(ThreadPool& pool, float* y, const float* x, const float* W, int n, int k, int m) {
    detail::matmul_path(detail::MatmulPath{}, pool, y, x, W, n, k, m);
}

/// Same with bf16 weights, widened exactly to f32 (activations are not rounded).
inline void matmul(ThreadPool& pool, float* y, const float* x, const bf16* W, int n, int k, int m) {
    detail::matmul_path(detail::MatmulPath{}, pool, y, x, W, n, k, m);
}

// ---------------------------------------------------------------------------------------------------
// Vector helpers for the rest of the model (attention scores, weighted sums of values)

namespace detail {

#if defined(__x86_64__)
SPECDEC_INTRINSICS_BEGIN
SPECDEC_TARGET_AVX512 inline float dot_avx512(const float* a, const float* b, int k) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int p = 0;
    for (; p + 32 <= k; p += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + p), _mm512_loadu_ps(b + p), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + p + 16), _mm512_loadu_ps(b + p + 16), s1);
    }
    for (; p < k; p += 16) {
        const __mmask16 mask = k - p >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (k - p)) - 1u);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, a + p), _mm512_maskz_loadu_ps(mask, b + p), s0);
    }
    return reduce_add16(_mm512_add_ps(s0, s1));
}

SPECDEC_TARGET_AVX512 inline void axpy_avx512(float* y, float alpha, const float* x, int k) {
    const __m512 a = _mm512_set1_ps(alpha);
    for (int p = 0; p < k; p += 16) {
        const __mmask16 mask = k - p >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (k - p)) - 1u);
        _mm512_mask_storeu_ps(y + p, mask,
                              _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(mask, x + p), _mm512_maskz_loadu_ps(mask, y + p)));
    }
}

SPECDEC_TARGET_AVX2 inline float dot_avx2(const float* a, const float* b, int k) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int p = 0;
    for (; p + 16 <= k; p += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p), _mm256_loadu_ps(b + p), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 8), _mm256_loadu_ps(b + p + 8), s1);
    }
    float s = reduce_add8(_mm256_add_ps(s0, s1));
    for (; p < k; ++p) s += a[p] * b[p];
    return s;
}

SPECDEC_TARGET_AVX2 inline void axpy_avx2(float* y, float alpha, const float* x, int k) {
    const __m256 a = _mm256_set1_ps(alpha);
    int p = 0;
    for (; p + 8 <= k; p += 8) _mm256_storeu_ps(y + p, _mm256_fmadd_ps(a, _mm256_loadu_ps(x + p), _mm256_loadu_ps(y + p)));
    for (; p < k; ++p) y[p] += alpha * x[p];
}
SPECDEC_INTRINSICS_END
#endif

}  // namespace detail

/// a · b over k floats.
inline float dot(const float* a, const float* b, int k) {
#if defined(__x86_64__)
    switch (detail::best_isa()) {
        case detail::MatmulIsa::kAvx512: return detail::dot_avx512(a, b, k);
        case detail::MatmulIsa::kAvx2: return detail::dot_avx2(a, b, k);
        default: break;
    }
#endif
    float s = 0.0f;
    for (int p = 0; p < k; ++p) s += a[p] * b[p];
    return s;
}

/// y += alpha · x over k floats.
inline void axpy(float* y, float alpha, const float* x, int k) {
#if defined(__x86_64__)
    switch (detail::best_isa()) {
        case detail::MatmulIsa::kAvx512: return detail::axpy_avx512(y, alpha, x, k);
        case detail::MatmulIsa::kAvx2: return detail::axpy_avx2(y, alpha, x, k);
        default: break;
    }
#endif
    for (int p = 0; p < k; ++p) y[p] += alpha * x[p];
}

namespace detail {

/// Σ x² over n values, in double, as 8 interleaved partial sums: one running sum is a chain of
/// dependent adds (~1 µs for a 768-float row, and a 16-node tree forward has 400 such rows). The
/// RMSNorm of the models and of training share it, so both compute the same numbers.
template <class T>
double sum_squares(const T* x, int n) {
    double part[8] = {};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) part[j] += double(x[i + j]) * x[i + j];
    for (; i < n; ++i) part[i % 8] += double(x[i]) * x[i];
    return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

}  // namespace detail

}  // namespace specdec
