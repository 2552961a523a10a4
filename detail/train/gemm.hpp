// specdec/detail/train/gemm.hpp — the three products of a linear layer in training (y = x·Wᵀ,
// dx = dy·W, dW += dyᵀ·x) on one AVX-512 micro-kernel, with the plain loops beside them.
// SPDX-License-Identifier: MIT
#pragma once

// matmul (model/matmul.hpp) computes y = x·Wᵀ only; a backward pass also needs dy·W and dyᵀ·x.
// Running those through matmul means transposing W, dy and x into scratch first and adding the
// product into the gradient afterwards: three passes over memory per product, which took a fifth of
// a training step at the demo target's shape (profiled, 2 threads), on top of the products.
// Here one GotoBLAS-style micro-kernel (Goto & van de Geijn 2008) serves all three layouts and adds
// into C itself. Only the operand read along vectors (B) is packed per call: k-major panels of 64
// columns, 256 k steps per block, transposed while packing where B is stored (m, k). The operand
// that is broadcast (A) is read in place, row-major or transposed: a tile's 6 rows of A stay in L1
// or L2 while it meets the panels. (Packing a transposed A per task, 6 rows per k step, cost more
// than it saved: the weight gradients at the demo target's shape went from 79-90% of one core's
// FMA peak to 68-76%, CPU time, one thread.)
//
// Each element of C is one FMA chain per block of k in k order, the blocks added in order, whatever
// the thread count or the claiming order of the tasks: training runs are bit-reproducible.
//
// Shapes: C (n, m) row-major; k the summed dimension.
//   kNT: C = A (n, k) · B (m, k)ᵀ   a forward product, y = x·Wᵀ
//   kNN: C = A (n, k) · B (k, m)    an input gradient, dx = dy·W
//   kTN: C = A (k, n)ᵀ · B (k, m)   a weight gradient, dW = dyᵀ·x

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../model/matmul.hpp"
#include "../model/thread_pool.hpp"

namespace specdec::detail {

enum class GemmOp { kNT, kNN, kTN };

/// C (n, m) = op(A)·op(B), or += when `accumulate`, with plain loops: the oracle of `gemm`.
inline void gemm_reference(GemmOp op, float* C, const float* A, const float* B, int n, int k, int m, bool accumulate) {
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < m; ++j) {
            float s = 0.0f;
            for (int p = 0; p < k; ++p) {
                const float a = op == GemmOp::kTN ? A[offset(p, n) + i] : A[offset(i, k) + p];
                const float b = op == GemmOp::kNT ? B[offset(j, k) + p] : B[offset(p, m) + j];
                s += a * b;
            }
            C[offset(i, m) + j] = accumulate ? C[offset(i, m) + j] + s : s;
        }
}

/// Grow-only scratch of the calling thread for one product (kept between calls: no page faults).
inline float* gemm_scratch(int slot, std::size_t count) {
    thread_local std::vector<float> buffers[2];  // packed B; the fallback's transposes
    std::vector<float>& b = buffers[slot];
    if (b.size() < count) b.resize(std::max(count, b.size() + b.size() / 2));
    return b.data();
}

/// Without AVX-512: op(A) and op(B) transposed into scratch as matmul wants them, matmul, then the
/// product added into C when accumulating.
inline void gemm_via_matmul(ThreadPool& pool, GemmOp op, float* C, const float* A, const float* B, int n, int k, int m,
                            bool accumulate) {
    const auto transposed = [&](int slot, const float* src, int rows, int cols) {
        float* t = gemm_scratch(slot, static_cast<std::size_t>(rows) * cols);
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) t[offset(c, rows) + r] = src[offset(r, cols) + c];
        return t;
    };
    const float* a = op == GemmOp::kTN ? transposed(0, A, k, n) : A;  // (n, k)
    const float* b = op == GemmOp::kNT ? B : transposed(1, B, k, m);  // (m, k)
    if (!accumulate) return matmul(pool, C, a, b, n, k, m);
    std::vector<float> product(static_cast<std::size_t>(n) * m);
    matmul(pool, product.data(), a, b, n, k, m);
    for (std::size_t i = 0; i < product.size(); ++i) C[i] += product[i];
}

constexpr int kGemmMr = 6;     // rows of C per tile: 6 x 4 = 24 of the 32 zmm registers accumulate
constexpr int kGemmNr = 64;    // columns of C per tile: four vectors
constexpr int kGemmKc = 256;   // k steps per block: a packed panel of B is 64 KiB, streamed from L2

#if defined(__x86_64__)
SPECDEC_INTRINSICS_BEGIN

/// C tile (MR rows, up to 64 columns: `cols` masks the four vectors) = or += Σ_p A(r, p) · Bp[p].
/// A(r, p) is a[r * lda + p] when A is row-major, a[p * lda + r] when it is stored transposed.
template <int MR, bool kRowMajorA>
SPECDEC_TARGET_AVX512 void gemm_tile(int kc, const float* a, std::ptrdiff_t lda, const float* bp, float* c,
                                     std::ptrdiff_t ldc, const __mmask16 (&cols)[4], bool accumulate) {
    __m512 acc[MR][4];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_setzero_ps();
    const float* rows[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) rows[r] = a + (kRowMajorA ? r * lda : r);
    const std::ptrdiff_t step = kRowMajorA ? 1 : lda;
    for (int p = 0; p < kc; ++p) {
        __m512 b[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) b[v] = _mm512_load_ps(bp + p * kGemmNr + 16 * v);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
            const __m512 x = _mm512_set1_ps(rows[r][p * step]);
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_fmadd_ps(x, b[v], acc[r][v]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
            float* cv = c + r * ldc + 16 * v;
            const __m512 sum = accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(cols[v], cv), acc[r][v]) : acc[r][v];
            _mm512_mask_storeu_ps(cv, cols[v], sum);
        }
}

template <bool kRowMajorA>
using GemmTileFn = void (*)(int, const float*, std::ptrdiff_t, const float*, float*, std::ptrdiff_t,
                            const __mmask16 (&)[4], bool);

template <bool kRowMajorA, int MR = 1>
GemmTileFn<kRowMajorA> gemm_tile_for(int rows) {
    if constexpr (MR <= kGemmMr) {
        if (rows != MR) return gemm_tile_for<kRowMajorA, MR + 1>(rows);
        return &gemm_tile<MR, kRowMajorA>;
    }
    return nullptr;
}

/// Panel `jp` (columns [64 jp, 64 jp + 64)) of B for k steps [k0, k0 + kc), k-major: dst[p * 64 + c].
/// B (m, k) (kNT) goes through 16 x 16 register transposes; B (k, m) is copied row by row. Columns
/// past m are zero.
SPECDEC_TARGET_AVX512 inline void gemm_pack_b(float* dst, GemmOp op, const float* B, int k, int m, int jp, int k0,
                                              int kc) {
    const int j0 = jp * kGemmNr;
    if (op != GemmOp::kNT) {
        for (int p = 0; p < kc; ++p) {
            const float* src = B + offset(k0 + p, m) + j0;
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v) {
                const int left = std::clamp(m - j0 - 16 * v, 0, 16);
                const auto mask = static_cast<__mmask16>((1u << left) - 1u);
                _mm512_store_ps(dst + p * kGemmNr + 16 * v, _mm512_maskz_loadu_ps(mask, src + 16 * v));
            }
        }
        return;
    }
    for (int g = 0; g < 4; ++g) {  // 16 rows of B (columns of the panel) at a time
        const int rows = std::clamp(m - j0 - 16 * g, 0, 16);
        for (int p0 = 0; p0 < kc; p0 += 16) {
            const int steps = std::min(16, kc - p0);
            const auto mask = static_cast<__mmask16>((1u << steps) - 1u);
            __m512 v[16];
#pragma GCC unroll 16
            for (int r = 0; r < 16; ++r)
                v[r] = r < rows ? _mm512_maskz_loadu_ps(mask, B + offset(j0 + 16 * g + r, k) + k0 + p0) : _mm512_setzero_ps();
            transpose16(v);
            for (int s = 0; s < steps; ++s) _mm512_store_ps(dst + (p0 + s) * kGemmNr + 16 * g, v[s]);
        }
    }
}

SPECDEC_INTRINSICS_END

/// The AVX-512 product. B is packed once, all panels of every k block, in parallel; then tasks of
/// (row block) x (column block) of C are claimed from the pool, each going over the k blocks in
/// order, its rows 6 at a time against its column panels.
inline void gemm_avx512(ThreadPool& pool, GemmOp op, float* C, const float* A, const float* B, int n, int k, int m,
                        bool accumulate) {
    const int panels = (m + kGemmNr - 1) / kGemmNr, blocks = (k + kGemmKc - 1) / kGemmKc;
    float* packed = gemm_scratch(0, static_cast<std::size_t>(k) * panels * kGemmNr + 16);
    packed += (64 - reinterpret_cast<std::uintptr_t>(packed) % 64) % 64 / sizeof(float);  // aligned loads
    const auto panel_at = [&](int block, int jp) {
        const int k0 = block * kGemmKc, kc = std::min(kGemmKc, k - k0);
        return packed + offset(k0, panels * kGemmNr) + offset(jp, kc * kGemmNr);
    };
    pool.parallel_for(blocks * panels, [&](int t) {
        const int block = t / panels, jp = t % panels, k0 = block * kGemmKc;
        gemm_pack_b(panel_at(block, jp), op, B, k, m, jp, k0, std::min(kGemmKc, k - k0));
    });

    // Column blocks of up to 4 panels (a block of B, 256 KiB, stays in L2 while the rows go by); row
    // blocks sized for ~8 tasks per thread, so that a thread slowed by a neighbour does not hold the
    // others up, within [6, 96] rows.
    const int col_panels = std::min(panels, 4), col_blocks = (panels + col_panels - 1) / col_panels;
    const int want_rows = (n * col_blocks + 8 * pool.size() - 1) / (8 * pool.size());
    const int block_rows = std::clamp((want_rows + kGemmMr - 1) / kGemmMr * kGemmMr, kGemmMr, 16 * kGemmMr);
    const int row_blocks = (n + block_rows - 1) / block_rows;
    const bool row_major_a = op != GemmOp::kTN;
    pool.parallel_for(row_blocks * col_blocks, [&](int task) {
        const int i0 = task / col_blocks * block_rows, rows = std::min(block_rows, n - i0);
        const int jp0 = task % col_blocks * col_panels, jp1 = std::min(panels, jp0 + col_panels);
        const GemmTileFn<true> full_rm = gemm_tile_for<true>(kGemmMr);
        const GemmTileFn<false> full_t = gemm_tile_for<false>(kGemmMr);
        for (int block = 0; block < blocks; ++block) {
            const int k0 = block * kGemmKc, kc = std::min(kGemmKc, k - k0);
            for (int r0 = 0; r0 < rows; r0 += kGemmMr) {
                const int r = std::min(kGemmMr, rows - r0);
                const auto tile_rm = r == kGemmMr ? full_rm : gemm_tile_for<true>(r);
                const auto tile_t = r == kGemmMr ? full_t : gemm_tile_for<false>(r);
                for (int jp = jp0; jp < jp1; ++jp) {
                    __mmask16 cols[4];
                    for (int v = 0; v < 4; ++v)
                        cols[v] = static_cast<__mmask16>((1u << std::clamp(m - jp * kGemmNr - 16 * v, 0, 16)) - 1u);
                    float* c = C + offset(i0 + r0, m) + jp * kGemmNr;
                    const bool add = accumulate || block > 0;
                    if (row_major_a) tile_rm(kc, A + offset(i0 + r0, k) + k0, k, panel_at(block, jp), c, m, cols, add);
                    else tile_t(kc, A + offset(k0, n) + i0 + r0, n, panel_at(block, jp), c, m, cols, add);
                }
            }
        }
    });
}
#endif  // __x86_64__

/// C (n, m) = op(A)·op(B), or C += op(A)·op(B) when `accumulate` (see the layouts above). C must not
/// overlap A or B. Differs from gemm_reference by f32 summation order only (one FMA chain per block of
/// 256 k steps).
inline void gemm(ThreadPool& pool, GemmOp op, float* C, const float* A, const float* B, int n, int k, int m,
                 bool accumulate) {
    require(n >= 0 && k >= 0 && m >= 0, "gemm", [&] {
        return "n = " + std::to_string(n) + ", k = " + std::to_string(k) + ", m = " + std::to_string(m) +
               ", expected >= 0";
    });
    if (n == 0 || m == 0) return;
    if (k == 0) {
        if (!accumulate) std::fill_n(C, offset(n, m), 0.0f);
        return;
    }
#if defined(__x86_64__)
    if (best_isa() == MatmulIsa::kAvx512) return gemm_avx512(pool, op, C, A, B, n, k, m, accumulate);
#endif
    gemm_via_matmul(pool, op, C, A, B, n, k, m, accumulate);
}

}  // namespace specdec::detail
