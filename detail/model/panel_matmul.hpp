// specdec/detail/model/panel_matmul.hpp — model weights repacked once, when the model is built, and the
// product over them: the fast path for decode steps and tree verification.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "bf16.hpp"
#include "deferred_matrices.hpp"
#include "../core/error.hpp"
#include "huge_pages.hpp"
#include "matmul.hpp"
#include "thread_pool.hpp"

// Why a second layout. matmul's rows kernel reads W (m, k) as stored, so each output is a dot
// product that ends in a horizontal sum, and for 8..64 tree nodes it re-reads x rows that L1 cannot
// hold (16 rows of k = 2048 floats are 8 KiB apart: one L1 set). Measured on the ~110M shape it
// reached 30-35% of the FMA peak at n = 16. Packing W once into the layout of a GotoBLAS
// micro-kernel (Goto & van de Geijn 2008, §5) removes both: a tile of y accumulates as vectors of
// 16 outputs from broadcasts of x, W streams through one pointer per group of rows, and a call packs
// nothing but x (n·k floats, small beside W). The rows kernel stays for W that changes between calls
// (attention, training) and for CPUs without AVX-512.
//
// Layout: groups of kPanelGroupRows = 48 output rows (three 16-float vectors); m is padded with zero
// rows to a multiple of 48 (at most 47 rows: 0.05% of a 32000-row head), so every group has one
// shape and one micro-kernel per tile height serves them all. Group g holds rows [48g, 48g + 48),
// k-major: element (j, p) at 48g·kp + 48p + (j - 48g). bf16 stores k in pairs, (j, p) at 48g·kp +
// 96(p/2) + 2(j - 48g) + p%2 with kp = k rounded up to even (a zero step pads): one 512-bit load
// holds two k steps of 16 rows, widened by a shift (even p) and a mask (odd p), both exact.

namespace specdec {

constexpr int kPanelGroupRows = 48;  // output rows per group: three zmm vectors
constexpr int kPanelMaxTileRows = 9;  // x rows per tile: 9 x 3 = 27 of 32 zmm registers accumulate

/// Whether this CPU runs the panel product (it needs AVX-512; without it the model keeps W as stored
/// and multiplies with `matmul`).
inline bool panels_available() {
#if defined(__x86_64__)
    return detail::isa_available(detail::MatmulIsa::kAvx512);
#else
    return false;
#endif
}

/// How a panel product takes x. kFloat32: as given. kBf16: each element rounded to bfloat16 (nearest
/// even) where it enters the product, as the CUDA backend and llama.cpp's bf16 path do; with bf16
/// panels on a CPU with AVX512-BF16 the product then runs on vdpbf16ps, one instruction per 16 rows x
/// 2 k steps where widening W takes two FMAs, a shift and a mask. Elsewhere x is rounded the same way
/// and multiplied by widened W: the numbers do not depend on the CPU, only the speed does.
enum class PanelInput { kFloat32, kBf16 };

/// Whether the bf16 x bf16 panel path (vdpbf16ps) runs on this CPU.
inline bool bf16_dot_available() {
#if defined(__x86_64__)
    return cpu_features().avx512_bf16;
#else
    return false;
#endif
}

/// W (m, k), given row-major, repacked into the panel layout above. WT = float or bf16 (rounded to
/// nearest even from float32 rows, copied from bf16 ones).
template <class WT>
class PanelMatrix {
    static_assert(std::is_same_v<WT, float> || std::is_same_v<WT, bf16>);

public:
    static constexpr int kStep = std::is_same_v<WT, bf16> ? 2 : 1;  // k steps per stored row of a group

    PanelMatrix() = default;

    /// `row(j)` gives row j of W (k values), for j in [0, m): a `const float*`, a `const bf16*`, or a
    /// RowRef (a loader's row: either). One thread.
    template <class RowOf>
    PanelMatrix(int m, int k, RowOf&& row) : PanelMatrix(nullptr, m, k, std::forward<RowOf>(row)) {}

    /// As above, groups packed in parallel on `pool` (`row` is then called from its threads): each
    /// thread writes, and so first touches, the pages of its own groups.
    template <class RowOf>
    PanelMatrix(ThreadPool* pool, int m, int k, RowOf&& row) : m_(m), k_(k), kp_((k + kStep - 1) / kStep * kStep) {
        detail::require(m >= 0 && k >= 0, "panel_matmul", [&] {
            return "matrix of " + std::to_string(m) + " x " + std::to_string(k) + " rows x columns";
        });
        data_.resize(static_cast<std::size_t>(groups()) * kPanelGroupRows * kp_);  // not zeroed: pack_group writes all
        const auto pack = [&](int g) { pack_group(g, row); };
        if (pool != nullptr) pool->parallel_for(groups(), pack);
        else
            for (int g = 0; g < groups(); ++g) pack(g);
    }

    int rows() const { return m_; }
    int cols() const { return k_; }
    bool empty() const { return data_.empty(); }
    /// Columns as stored: k rounded up to kStep.
    int padded_cols() const { return kp_; }
    const WT* data() const { return data_.data(); }
    /// Element (j, p) as stored (tests read the layout back through it).
    WT at(int j, int p) const { return data_[index(j, p)]; }

    /// Where element (j, p) lives: the layout, in one place.
    std::size_t index(int j, int p) const {
        const int g = j / kPanelGroupRows, w = kPanelGroupRows, r = j - g * kPanelGroupRows;
        return static_cast<std::size_t>(g) * kPanelGroupRows * kp_ + static_cast<std::size_t>(p / kStep) * kStep * w +
               static_cast<std::size_t>(r) * kStep + p % kStep;
    }
    int groups() const { return (m_ + kPanelGroupRows - 1) / kPanelGroupRows; }

private:
    static WT narrow(float v) {
        if constexpr (std::is_same_v<WT, bf16>) return to_bf16(v);
        else return v;
    }
    static WT narrow(bf16 v) {
        if constexpr (std::is_same_v<WT, bf16>) return v;
        else return to_float(v);
    }

    /// Rows [48g, 48g + 48) of W into group g, zero rows past m and a zero k step past k (bf16, odd k).
    /// bf16 rows into bf16 panels go 16 at a time through pack16 where AVX-512 runs.
    template <class RowOf>
    void pack_group(int g, RowOf& row_of) {
        WT* base = data_.data() + static_cast<std::size_t>(g) * kPanelGroupRows * kp_;
        const bool by16 = std::is_same_v<WT, bf16> && k_ % 2 == 0 && panels_available();
        for (int r0 = 0; r0 < kPanelGroupRows; r0 += 16) {
            const bf16* block[16] = {};  // bf16 rows kept for pack16
            int held = 0;
            for (int r = r0; r < r0 + 16; ++r) {
                const int j = g * kPanelGroupRows + r;
                if (j >= m_) {
                    for (int p = 0; p < kp_; ++p) base[index(r, p)] = WT{};
                    continue;
                }
                const auto src = row_of(j);
                using Src = std::decay_t<decltype(src)>;
                const bf16* bf = nullptr;
                if constexpr (std::is_same_v<Src, RowRef>) {
                    if (src.bf == nullptr) pack_row(base, r, src.f32);  // now: a converted row's buffer is reused
                    bf = src.bf;
                } else if constexpr (std::is_same_v<Src, const bf16*> || std::is_same_v<Src, bf16*>) {
                    bf = src;
                } else {
                    pack_row(base, r, src);
                }
                if (bf != nullptr && by16) block[r - r0] = bf, ++held;
                else if (bf != nullptr) pack_row(base, r, bf);
            }
            if (held == 16) {
                pack16(base, r0, block);
            } else {
                for (int r = r0; r < r0 + 16; ++r)
                    if (block[r - r0] != nullptr) pack_row(base, r, block[r - r0]);
            }
        }
    }

    /// Rows [r0, r0 + 16) of a bf16 group from 16 bf16 rows of even k. In both layouts a k pair is one
    /// 32-bit word, so the panel block is the 16 x (k/2) word matrix transposed: 16 x 16 tiles transposed
    /// in registers (transpose16 moves lanes, any 32-bit data), each store one stored row's 16 lanes,
    /// where the row-at-a-time copy scatters one 4-byte word per pair.
    void pack16(WT* base, int r0, const bf16* const (&src)[16]) const {
#if defined(__x86_64__)
        if constexpr (std::is_same_v<WT, bf16>) {
            pack16_avx512(reinterpret_cast<float*>(base), r0, src, k_ / 2);
        } else
#endif
        {
            for (int r = r0; r < r0 + 16; ++r) pack_row(base, r, src[r - r0]);
        }
    }

#if defined(__x86_64__)
SPECDEC_INTRINSICS_BEGIN
    /// pack16 on words: base holds (pairs, 48) words, row i of the block starts at src[i].
    SPECDEC_TARGET_AVX512 static void pack16_avx512(float* base, int r0, const bf16* const (&src)[16], int pairs) {
        int q = 0;
        for (; q + 16 <= pairs; q += 16) {
            __m512 v[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; ++i) v[i] = _mm512_loadu_ps(reinterpret_cast<const float*>(src[i] + 2 * q));
            detail::transpose16(v);  // v[t]: pair q + t of the 16 rows
#pragma GCC unroll 16
            for (int t = 0; t < 16; ++t) _mm512_storeu_ps(base + static_cast<std::size_t>(q + t) * kPanelGroupRows + r0, v[t]);
        }
        for (; q < pairs; ++q)
            for (int i = 0; i < 16; ++i) std::memcpy(base + static_cast<std::size_t>(q) * kPanelGroupRows + r0 + i, src[i] + 2 * q, 4);
    }
SPECDEC_INTRINSICS_END
#endif

    /// Row r of a group from `src` (k values): within a group, (r, p) is at index(r, p) (g = 0).
    template <class T>
    void pack_row(WT* base, int r, const T* src) const {
        constexpr std::size_t w = static_cast<std::size_t>(kPanelGroupRows) * kStep;  // stored row of a group
        WT* out = base + static_cast<std::size_t>(r) * kStep;
        int p = 0;
        if constexpr (std::is_same_v<T, bf16> && std::is_same_v<WT, bf16>)  // a pair is one 32-bit word in both
            for (; p + 2 <= k_; p += 2, out += w) std::memcpy(out, src + p, 4);
        for (; p + kStep <= k_; p += kStep, out += w) {
            out[0] = narrow(src[p]);
            if constexpr (kStep == 2) out[1] = narrow(src[p + 1]);
        }
        if constexpr (kStep == 2)
            if (p < k_) {  // odd k: the last value and its zero partner
                out[0] = narrow(src[p]);
                out[1] = WT{};
            }
    }

    int m_ = 0, k_ = 0, kp_ = 0;
    UninitializedHugeVector<WT> data_;  // streamed whole every step: on huge pages (huge_pages.hpp)
};

namespace detail {

/// How panel_matmul packs x: as given, rounded to bf16 (kept as float), or rounded and paired for
/// vdpbf16ps (k steps 2q and 2q + 1 of a row in one 32-bit word, 2q in the low half).
enum class PackX { kCopy, kRound, kPairs };

#if defined(__x86_64__)
SPECDEC_INTRINSICS_BEGIN

/// The two k steps of 16 rows in one 512-bit load of bf16 pairs, as float32.
SPECDEC_TARGET_AVX512 inline void widen_pair(__m512i v, __m512& even, __m512& odd) {
    even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// Every kernel below is compiled for AVX512-BF16 so that one template serves both kinds of x, but
// only the XT = uint32 steps use a BF16 instruction (vdpbf16ps, through its intrinsic), and those run
// only where bf16_dot_available(); the others are AVX-512F code, which is what the compiler emits for
// float arithmetic whatever the target allows (no __bf16 values appear here).

/// One stored row of a group (S = 1 k step of f32, 2 of bf16) into the tile's accumulators. XT = float:
/// x packed as floats, [kc][MR]; XT = uint32: x packed as bf16 pairs (k step p in the low half, p + 1
/// in the high), [kc / 2][MR], multiplied with vdpbf16ps.
template <int MR, int NV, class WT, class XT>
SPECDEC_TARGET_AVX512_BF16 inline void panel_step(__m512 (&acc)[MR][NV], const XT* xp, const WT* Wg, int p) {
    constexpr int W = 16 * NV;  // group width in rows
    if constexpr (std::is_same_v<XT, std::uint32_t>) {
        static_assert(std::is_same_v<WT, bf16>);
        __m512i w[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) w[v] = _mm512_loadu_si512(Wg + static_cast<std::ptrdiff_t>(p) * W + 32 * v);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
            const __m512i xb = _mm512_set1_epi32(static_cast<int>(xp[static_cast<std::ptrdiff_t>(p / 2) * MR + i]));
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], (__m512bh)w[v], (__m512bh)xb);
        }
    } else if constexpr (std::is_same_v<WT, float>) {
        __m512 w[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) w[v] = _mm512_loadu_ps(Wg + static_cast<std::ptrdiff_t>(p) * W + 16 * v);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
            const __m512 xb = _mm512_set1_ps(xp[static_cast<std::ptrdiff_t>(p) * MR + i]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(w[v], xb, acc[i][v]);
        }
    } else {
        __m512 w0[NV], w1[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v)
            widen_pair(_mm512_loadu_si512(Wg + static_cast<std::ptrdiff_t>(p) * W + 32 * v), w0[v], w1[v]);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
            const __m512 x0 = _mm512_set1_ps(xp[static_cast<std::ptrdiff_t>(p) * MR + i]);
            const __m512 x1 = _mm512_set1_ps(xp[static_cast<std::ptrdiff_t>(p + 1) * MR + i]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(w1[v], x1, _mm512_fmadd_ps(w0[v], x0, acc[i][v]));
        }
    }
}

/// y rows [0, MR) x columns [j0, j0 + valid) of one group (NV vectors wide) over k steps [p0, p1)
/// of its kc: xp is the tile's packed x ([kc][MR]), Wg the group. Meanwhile [pf, pf_end) is
/// prefetched to L2, a little per step. A tile that stops before kc leaves its sums in `carry`
/// (MR * NV * 16 floats), and one that starts after 0 takes them up from there, so that a group's k
/// steps can be split into blocks (see panel_matmul). Each output is one chain of FMAs in k order
/// whatever the tile height or blocking, so a row of y is bit-identical whether x has 1 row or 64 —
/// what lets a verified tree's logits equal plain decoding's (tree_attention.hpp). (Alternate k
/// steps into two sets of accumulators, summed at the end, once hid the FMA latency for 1-2 rows; a
/// single row streams W from memory anyway.)
template <int MR, int NV, class WT, class XT>
SPECDEC_TARGET_AVX512_BF16 void panel_tile(float* y, int ldy, const XT* xp, const WT* Wg, int kc, int valid,
                                           const char* pf, const char* pf_end, int p0, int p1, float* carry) {
    constexpr int S = PanelMatrix<WT>::kStep;
    __m512 acc[MR][NV];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = p0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(carry + (i * NV + v) * 16);
    auto mask_of = [valid](int v) {
        const int left = std::clamp(valid - 16 * v, 0, 16);
        return static_cast<__mmask16>((1u << left) - 1u);
    };

    const int steps = (p1 - p0 + S - 1) / S;
    const std::ptrdiff_t pf_stride = std::max<std::ptrdiff_t>(64, (pf_end - pf + steps - 1) / steps);
    for (int p = p0; p < p1; p += S) {  // kc is a whole number of stored rows (k padded to kStep)
        for (const char* end = std::min(pf_end, pf + pf_stride); pf < end; pf += 64) _mm_prefetch(pf, _MM_HINT_T1);
        panel_step<MR, NV, WT, XT>(acc, xp, Wg, p);
    }
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
            if (p1 < kc) _mm512_storeu_ps(carry + (i * NV + v) * 16, acc[i][v]);
            else _mm512_mask_storeu_ps(y + static_cast<std::ptrdiff_t>(i) * ldy + 16 * v, mask_of(v), acc[i][v]);
        }
}

template <class WT, class XT>
using PanelTileFn = void (*)(float*, int, const XT*, const WT*, int, int, const char*, const char*, int, int, float*);

/// panel_tile<MR, 3> (a whole group) for MR in [1, kPanelMaxTileRows] chosen at run time, looked up
/// once per product (a tile's blocks call it every 32 stored rows).
template <class WT, class XT, int MR = 1>
PanelTileFn<WT, XT> panel_tile_for(int mr) {
    if constexpr (MR <= kPanelMaxTileRows) {
        if (mr != MR) return panel_tile_for<WT, XT, MR + 1>(mr);
        return &panel_tile<MR, kPanelGroupRows / 16, WT, XT>;
    }
    return nullptr;
}

/// x rounded to bf16 (to_bf16's nearest-even, NaN kept quiet), still in the high half of each lane.
SPECDEC_TARGET_AVX512 inline __m512i round_bf16_high(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));  // ties to even
    const __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), odd));
    const __mmask16 nan =
        _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
    return _mm512_and_si512(_mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(u, _mm512_set1_epi32(0x400000))),
                            _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)));
}

/// Units [0, 16 * blocks) of a tile's packing (see pack_x_tile) by 16 x 16 register transposes:
/// 16 units of each row side by side, transposed, and mr lanes stored per unit.
SPECDEC_TARGET_AVX512 inline void pack_x_blocks(float* dst, const float* x, int k, int mr, int blocks, PackX how) {
    // For kPairs: 16-bit element e of the result is the high half of 32-bit lane e of (lo, hi).
    alignas(64) static constexpr std::uint16_t kHighHalves[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21,
                                                                  23, 25, 27, 29, 31, 33, 35, 37, 39, 41, 43,
                                                                  45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
    const __m512i high_halves = _mm512_load_si512(kHighHalves);
    const auto rows = static_cast<__mmask16>((1u << mr) - 1u);
    for (int b = 0; b < blocks; ++b) {
        __m512 v[16];
#pragma GCC unroll 16
        for (int r = 0; r < 16; ++r) {
            if (r >= mr) {
                v[r] = _mm512_setzero_ps();
                continue;
            }
            const float* src = x + static_cast<std::ptrdiff_t>(r) * k;
            if (how == PackX::kPairs) {
                const __m512i lo = round_bf16_high(_mm512_loadu_ps(src + 32 * b));
                const __m512i hi = round_bf16_high(_mm512_loadu_ps(src + 32 * b + 16));
                v[r] = _mm512_castsi512_ps(_mm512_permutex2var_epi16(lo, high_halves, hi));
            } else if (how == PackX::kRound) {
                v[r] = _mm512_castsi512_ps(round_bf16_high(_mm512_loadu_ps(src + 16 * b)));
            } else {
                v[r] = _mm512_loadu_ps(src + 16 * b);
            }
        }
        transpose16(v);
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) _mm512_mask_storeu_ps(dst + static_cast<std::ptrdiff_t>(16 * b + j) * mr, rows, v[j]);
    }
}

SPECDEC_INTRINSICS_END
#endif  // __x86_64__

/// A tile of x, rows [0, mr) of k floats (k apart), packed k-major: dst[u * mr + r] is unit u of row
/// r, a float (kCopy; kRound: rounded to bf16) or a pair of k steps (kPairs, the odd k's last pair
/// with a zero); units up to kp (floats) or kp / 2 (pairs) past k are zero. Vectorised where AVX-512
/// runs: element by element it took ~3% of a 16-node tree forward (110M shape).
inline void pack_x_tile(float* dst, const float* x, int k, int kp, int mr, PackX how) {
    const int units = how == PackX::kPairs ? k / 2 : k;
    int done = 0;
#if defined(__x86_64__)
    if (best_isa() == MatmulIsa::kAvx512) {
        pack_x_blocks(dst, x, k, mr, units / 16, how);
        done = units / 16 * 16;
    }
#endif
    const auto pair = [](float lo, float hi) {
        return std::bit_cast<float>(static_cast<std::uint32_t>(to_bf16(lo).bits | std::uint32_t{to_bf16(hi).bits} << 16));
    };
    for (int r = 0; r < mr; ++r) {
        const float* src = x + static_cast<std::size_t>(r) * k;
        float* d = dst + r;
        if (how == PackX::kPairs) {
            for (int q = done; q < units; ++q) d[static_cast<std::ptrdiff_t>(q) * mr] = pair(src[2 * q], src[2 * q + 1]);
            if (k % 2 != 0) d[static_cast<std::ptrdiff_t>(units) * mr] = pair(src[k - 1], 0.0f);
        } else {
            if (how == PackX::kRound)
                for (int p = done; p < k; ++p) d[static_cast<std::ptrdiff_t>(p) * mr] = to_float(to_bf16(src[p]));
            else
                for (int p = done; p < k; ++p) d[static_cast<std::ptrdiff_t>(p) * mr] = src[p];
            for (int p = k; p < kp; ++p) d[static_cast<std::ptrdiff_t>(p) * mr] = 0.0f;
        }
    }
}

/// The n rows of x as tiles of at most kPanelMaxTileRows, as even as possible (16 = 8 + 8, not
/// 9 + 7: the same work per tile, and no tile left with one row to carry a whole group of W).
struct PanelTiles {
    int count, base, extra;  // `extra` tiles have base + 1 rows, the rest base
    explicit PanelTiles(int n)
        : count((n + kPanelMaxTileRows - 1) / kPanelMaxTileRows), base(n / count), extra(n % count) {}
    int first_row(int t) const { return t * base + std::min(t, extra); }
    int rows(int t) const { return base + (t < extra ? 1 : 0); }
};

}  // namespace detail

/// y (n, m) = x (n, k) · Wᵀ with W packed as panels. Needs AVX-512 (`panels_available()`). Differs
/// from `matmul_reference` over the same (rounded) W, and x rounded as `input` says, only by f32
/// summation order. `dot` (tests only) picks the bf16 x bf16 kernel or the widening one for kBf16
/// input; by default the first where the CPU has it.
template <class WT>
void panel_matmul(ThreadPool& pool, float* y, const float* x, const PanelMatrix<WT>& W, int n,
                  PanelInput input = PanelInput::kFloat32, bool dot = true) {
    const int m = W.rows(), k = W.cols(), kp = W.padded_cols();
    detail::require(n >= 0, "panel_matmul", [&] { return "n = " + std::to_string(n) + ", expected >= 0"; });
    detail::require(panels_available(), "panel_matmul", [] {
        return std::string("this CPU lacks AVX-512; multiply W as stored with matmul instead");
    });
    if (n == 0 || m == 0) return;
    detail::require(y != nullptr && (x != nullptr || k == 0), "panel_matmul", [&] {
        return "null pointer for a non-empty product (n = " + std::to_string(n) + ", m = " + std::to_string(m) + ")";
    });
    if (k == 0) {
        std::fill_n(y, static_cast<std::size_t>(n) * m, 0.0f);
        return;
    }
#if defined(__x86_64__)
    // x as tiles, each k-major ([kp][rows]) so that a k step's broadcasts share one cache line;
    // a padding step (odd k, bf16) multiplies zero weights by zero. For vdpbf16ps a k step pair of a
    // row is one 32-bit word ([kp / 2][rows]).
    const bool round = input == PanelInput::kBf16;
    const bool pairs = std::is_same_v<WT, bf16> && round && dot && bf16_dot_available();
    const detail::PanelTiles tiles(n);
    const auto packing = pairs ? detail::PackX::kPairs : round ? detail::PackX::kRound : detail::PackX::kCopy;
    // Every task packs x for itself, into its own thread's scratch: packed once by the caller, each
    // call's stores first had to take the lines back from the other core, which had read them the
    // call before, and that core then fetched them again (~4 us of a 10 us product at n = 16, m = 96).
    const auto pack_x = [&] {
        float* xp = detail::thread_scratch(0, static_cast<std::size_t>(n) * kp);
        for (int t = 0; t < tiles.count; ++t) {
            const int i0 = tiles.first_row(t);
            const std::size_t at = static_cast<std::size_t>(i0) * (pairs ? kp / 2 : kp);  // where the kernels read it
            detail::pack_x_tile(xp + at, x + static_cast<std::size_t>(i0) * k, k, kp, tiles.rows(t), packing);
        }
        return xp;
    };
    // Two tasks per run of whole groups, one from each end, claiming groups until they meet: each
    // task's W is one sequential stream whose next group is pulled towards L2 while it works, and the
    // work balances itself when one core runs slower (a shared machine: with a fixed half each, one
    // thread spun for ~10% of an n = 16 forward; both ends, in-process A/B on the ~110M shape, bf16:
    // n = 16 10.55 -> 9.99 ms, n = 1 4.42 -> 4.24 ms, medians of 10 and 8).
    // Within a group, two or three x tiles go block by block over k, others one after the other (see
    // below). Measured on the ~110M shape, 2 threads: prefetching at all, f32 n = 32 19.7 -> 17.3 ms
    // (products alone, alternating runs); one stream per thread instead of four tasks each, bf16
    // n = 1 3.65 -> 3.33 ms and n = 16 7.4 -> 6.8 ms (same); blocks of 32 stored rows for two or
    // three tiles (whole forwards, in-process A/B, medians of 4-8): f32 n = 16 18.8 -> 16.2 ms,
    // n = 24 24.8 -> 20.9 ms, bf16 n = 16 9.6 -> 9.0 ms, n = 24 13.7 -> 12.9 ms. Blocks of 256 rows,
    // and blocks for four tiles (f32 n = 32 24.1 -> 25.1 ms), were slower.
    const int groups = W.groups();
    const int parts = detail::rows_chunk(n, k, m, pool.size(), kPanelGroupRows) >= m ? 1 : pool.size();
    // k steps per block when the tiles go block by block: 32 stored rows of a group, 6 KiB of W (16
    // rows were slower; 64 no better for f32), and the sums a tile carries between blocks.
    constexpr int kBlockSteps = 32 * PanelMatrix<WT>::kStep, kCarry = kPanelMaxTileRows * kPanelGroupRows;
    const bool blocked = tiles.count == 2 || tiles.count == 3;
    // Whether a task prefetches its next group: not for a lone f32 tile (measured below).
    const bool prefetch_next = !(tiles.count == 1 && std::is_same_v<WT, float>);
    const int runs = (parts + 1) / 2;
    const auto run_start = [&](int r) { return static_cast<int>(std::int64_t{groups} * std::min(2 * r, parts) / parts); };
    struct alignas(64) Claimed {
        std::atomic<int> groups{0};
    };
    std::vector<Claimed> claimed(static_cast<std::size_t>(runs));
    // The kernels for the two tile heights (base rows, and base + 1).
    const detail::PanelTileFn<WT, float> tile_floats[2] = {detail::panel_tile_for<WT, float>(tiles.base),
                                                           detail::panel_tile_for<WT, float>(tiles.base + 1)};
    detail::PanelTileFn<WT, std::uint32_t> tile_pairs[2] = {nullptr, nullptr};  // bf16 x bf16 only
    if constexpr (std::is_same_v<WT, bf16>)
        for (int h = 0; h < 2; ++h) tile_pairs[h] = detail::panel_tile_for<WT, std::uint32_t>(tiles.base + h);
    pool.parallel_for(parts, [&](int task) {
        const int run = task / 2, g_begin = run_start(run), g_end = run_start(run + 1);  // a lone task: half a run
        const bool backward = task % 2 == 1;
        std::atomic<int>& taken = claimed[static_cast<std::size_t>(run)].groups;
        float* xp = pack_x();
        auto* xp32 = reinterpret_cast<std::uint32_t*>(xp);  // the same scratch, when x goes in bf16 pairs
        float* carry = blocked ? detail::thread_scratch(1, static_cast<std::size_t>(tiles.count) * kCarry) : nullptr;
        // Claims of an eighth of what was left at the last claim (at least one group): the two ends
        // share the counter's cache line, and a claim per group took ~2% of a 16-node forward.
        const int total = g_end - g_begin;
        for (int i = 0, have = 0, seen = 0;; ++i, --have) {
            if (have == 0) {
                const int want = std::max(1, (total - seen) / 8);
                const int at = taken.fetch_add(want, std::memory_order_relaxed);
                if (at >= total) break;
                have = std::min(want, total - at);
                seen = at + have;
            }
            const int g = backward ? g_end - 1 - i : g_begin + i;
            const int j0 = g * kPanelGroupRows;
            const WT* Wg = W.data() + static_cast<std::size_t>(j0) * kp;
            const std::ptrdiff_t group_bytes = std::ptrdiff_t{kPanelGroupRows} * kp * std::ptrdiff_t{sizeof(WT)};
            const int g_next = backward ? g - 1 : g + 1;  // this stream's next group, if in its run
            const bool has_next = g_next >= g_begin && g_next < g_end;
            const WT* Wnext = has_next ? W.data() + static_cast<std::size_t>(g_next) * kPanelGroupRows * kp : Wg;
            const char* next = reinterpret_cast<const char*>(Wnext);
            const std::ptrdiff_t next_bytes = has_next && prefetch_next ? group_bytes : 0;
            // One tile of this group's k steps [p0, p1): pf..pf_end prefetched meanwhile, sums carried
            // in `carry` between blocks.
            const auto tile = [&](int t, int p0, int p1, const char* pf, const char* pf_end, float* carry) {
                const int i0 = tiles.first_row(t);
                float* yt = y + static_cast<std::size_t>(i0) * m + j0;
                if constexpr (std::is_same_v<WT, bf16>) {
                    if (pairs) {
                        const auto* xt = xp32 + static_cast<std::size_t>(i0) * (kp / 2);
                        return tile_pairs[tiles.rows(t) - tiles.base](yt, m, xt, Wg, kp, m - j0, pf, pf_end, p0, p1, carry);
                    }
                }
                tile_floats[tiles.rows(t) - tiles.base](yt, m, xp + static_cast<std::size_t>(i0) * kp, Wg, kp, m - j0, pf, pf_end,
                                                        p0, p1, carry);
            };
            if (blocked) {
                // Two or three tiles: all of them over one block of k steps while it is in L1, then the
                // next, the first tile pulling the block after it (this group's, or the next group's
                // first) towards L2. Memory then sees one steady stream instead of a burst per group
                // while the first tile runs; the sums wait in `carry` between blocks.
                const std::ptrdiff_t row_bytes = std::ptrdiff_t{kPanelGroupRows} * std::ptrdiff_t{sizeof(WT)};
                for (int p0 = 0; p0 < kp; p0 += kBlockSteps) {
                    const int p1 = std::min(kp, p0 + kBlockSteps);
                    const char* pf = reinterpret_cast<const char*>(Wg) + p1 * row_bytes;
                    const char* pf_end = reinterpret_cast<const char*>(Wg) + std::min(kp, p1 + kBlockSteps) * row_bytes;
                    if (p1 == kp) {
                        pf = next;
                        pf_end = next + std::min<std::ptrdiff_t>(next_bytes, kBlockSteps * row_bytes);
                    }
                    for (int t = 0; t < tiles.count; ++t)  // the later tiles prefetch nothing: an empty range
                        tile(t, p0, p1, t == 0 ? pf : pf_end, pf_end, carry + t * kCarry);
                }
                continue;
            }
            // Otherwise the tiles one after the other over the whole group. The first streams its W
            // from memory; the later ones find it in L2 and are compute-bound, so they prefetch the
            // next group, each a share (a lone bf16 tile prefetches all of it). With four tiles the
            // first joining was slower (n = 32, +15%). A lone f32 tile (1-9 rows) prefetches nothing:
            // the hardware prefetcher alone kept up better with its 144 KiB groups (~110M shape,
            // whole forwards, in-process A/B, medians of 6-8: n = 1 10.0 -> 7.1 ms, n = 2 9.6 -> 8.2,
            // n = 8 15.0 -> 14.3, n = 9 13.2 -> 10.8, every round; n = 4 even). A lone bf16 tile still
            // gains from it (n = 8 6.2 -> 5.6 ms; n = 1 even): see prefetch_next above.
            const int sharers = std::max(1, tiles.count - 1);
            const std::ptrdiff_t share = (next_bytes / sharers + 63) / 64 * 64;
            for (int t = 0; t < tiles.count; ++t) {
                const int s = tiles.count == 1 ? 0 : t - 1;
                const char* pf = next + (s < 0 ? next_bytes : std::min(next_bytes, share * s));
                const char* pf_end = next + (s < 0 ? next_bytes : std::min(next_bytes, share * (s + 1)));
                tile(t, 0, kp, pf, pf_end, nullptr);
            }
        }
    });
#endif
}

}  // namespace specdec
