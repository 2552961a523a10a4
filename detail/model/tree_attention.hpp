// specdec/detail/model/tree_attention.hpp — the CPU model's attention over the KV cache, read in place,
// for any number of tree nodes, with every node's result bit-identical to its own decode step's.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "matmul.hpp"
#include "softmax.hpp"
#include "thread_pool.hpp"

// Why not matrix products. A tree of 16 nodes has 16 query rows per head against a few hundred keys:
// as matmul calls (CpuModel::attend_blocked) each head's keys are first copied out of the cache and
// its values transposed, the products are too small for the packed kernels, and on the ~110M shape
// the attention took ~3 ms of a 20 ms (f32) forward. Here the queries are the vector lanes instead:
// a key row is read once from the cache, one element at a time broadcast against 16 queries, so any
// number of keys, any head size and the cache's row stride cost nothing extra, and the softmax runs
// down the lanes (16 queries at once) with no transposes.
//
// Why bit-identical. Greedy speculative decoding is lossless only if the target's argmax for a node
// of a verified tree is the one plain decoding computes, and near-ties make "equal up to rounding"
// not enough (the demo's greedy output differed from plain decoding on 1 of 8 prompts). So each
// query's arithmetic here is fixed whatever else is in the forward: its score with each key row is
// two FMA chains over d (even, odd) then their sum; one max over all rows (exact); exp16 of the same
// differences; the sum of numerators and the weighted values accumulated in key-row order, masked rows
// adding exact zeros (so a tree's interleaved siblings change nothing); one division. No split of
// the key rows into chunks (a merge would round differently for different splits), and a single
// query (a decode step) runs the same operations with the key rows in the lanes instead.

namespace specdec::detail {

/// What tree_attention computes: the queries of tree nodes first..first+n-1 (rows of q, (n, H*hd),
/// RoPE applied), attending to the T committed cache rows and to the tree rows their mask shows.
/// The cache holds key and value rows of kvd = Hkv*hd floats; tree node j's are rows T + j.
struct TreeAttentionShape {
    int n = 0, first = 0, T = 0;  // query nodes, the first one's index, committed rows
    int H = 0, Hkv = 0, hd = 0;
    float scale = 1.0f;           // 1 / sqrt(hd)
    int N() const { return first + n; }
    int rows() const { return T + first + n; }  // key rows any query may see
    int group() const { return H / Hkv; }
    int lanes() const { return (group() * n + 15) / 16 * 16; }  // query rows per kv head, padded
};

/// Whether this CPU runs tree_attention (AVX-512).
inline bool tree_attention_available() {
#if defined(__x86_64__)
    return best_isa() == MatmulIsa::kAvx512;
#else
    return false;
#endif
}

#if defined(__x86_64__)
/// Key and value rows of one head are a whole cache row (kvd floats) apart, which defeats the hardware
/// prefetcher, and after a forward's weights have streamed through they come from memory. So the
/// kernels prefetch them, one line per load or per k step rather than a block's worth at once: issued
/// 64 at a time most of them were lost (2-vCPU AMD EPYC, ~110M shape, a layer's attention with a cold
/// cache, 2 threads, in-process A/B: one query 62-77 -> 37-47 us, 16 queries 123-135 -> 78-93 us;
/// in the forward 0.78 -> 0.47 ms and 1.55 -> 1.0 ms of 12 layers).
inline void prefetch_line(const float* at, bool l1) {
    if (l1) _mm_prefetch(reinterpret_cast<const char*>(at), _MM_HINT_T0);
    else _mm_prefetch(reinterpret_cast<const char*>(at), _MM_HINT_T1);
}
/// The first hd floats of rows [r_begin, min(r_end, rows)), ld apart, to L1 or to L2 (a kernel's
/// first blocks, and its values while it reads the keys).
inline void prefetch_rows(const float* base, std::ptrdiff_t ld, int r_begin, int r_end, int rows, int hd, bool l1) {
    for (int r = r_begin; r < std::min(r_end, rows); ++r)
        for (int d = 0; d < hd; d += 16) prefetch_line(base + r * ld + d, l1);
}
#endif

#if defined(__x86_64__)
SPECDEC_INTRINSICS_BEGIN

/// Scores of RB key rows against 16 query lanes: s[j][lane] = k_j · q_lane over hd, where qt holds
/// the queries transposed (hd rows, ldq apart) and k_j = k + j * ldk. Masked lanes get -inf.
/// Meanwhile the first pk_rows rows at pk go to L1 and pv_rows at pv to L2, a line per k step.
template <int RB>
SPECDEC_TARGET_AVX512 inline void tree_scores(float* s, int lds, const float* qt, int ldq, const float* k,
                                             std::ptrdiff_t ldk, int hd, const __mmask16* visible,
                                             const float* pk = nullptr, int pk_rows = 0, const float* pv = nullptr,
                                             int pv_rows = 0) {
    // Even and odd d into separate accumulators: 2 RB independent FMA chains (8 would just cover the
    // latency of two FMA pipes, with no slack).
    __m512 acc[2][RB];
#pragma GCC unroll 8
    for (int j = 0; j < RB; ++j) acc[0][j] = acc[1][j] = _mm512_setzero_ps();
    const int lines = (hd + 15) / 16;  // per row
    int line = 0, pf_row = 0;
    const auto prefetch_next = [&] {
        if (pf_row < pk_rows) prefetch_line(pk + pf_row * ldk + 16 * line, true);
        if (pf_row < pv_rows) prefetch_line(pv + pf_row * ldk + 16 * line, false);
        if (++line == lines) line = 0, ++pf_row;
    };
    int d = 0;
    for (; d + 2 <= hd; d += 2) {
        prefetch_next();
#pragma GCC unroll 2
        for (int u = 0; u < 2; ++u) {
            const __m512 q = _mm512_loadu_ps(qt + static_cast<std::ptrdiff_t>(d + u) * ldq);
#pragma GCC unroll 8
            for (int j = 0; j < RB; ++j) acc[u][j] = _mm512_fmadd_ps(_mm512_set1_ps(k[j * ldk + d + u]), q, acc[u][j]);
        }
    }
    while (pf_row < std::max(pk_rows, pv_rows)) prefetch_next();
    if (d < hd) {
        const __m512 q = _mm512_loadu_ps(qt + static_cast<std::ptrdiff_t>(d) * ldq);
#pragma GCC unroll 8
        for (int j = 0; j < RB; ++j) acc[0][j] = _mm512_fmadd_ps(_mm512_set1_ps(k[j * ldk + d]), q, acc[0][j]);
    }
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 8
    for (int j = 0; j < RB; ++j)
        _mm512_storeu_ps(s + j * lds, _mm512_mask_blend_ps(visible[j], ninf, _mm512_add_ps(acc[0][j], acc[1][j])));
}

/// Weighted values, transposed like the queries: ot[e][lane] = sum over `rows` key rows r of
/// v_r[e] p[r][lane], for e < DB (a block of hd) and 16 lanes, with probabilities p (rows, ldp) and
/// value rows v_r = v + r * ldv. Each value element is read once, as a broadcast.
template <int DB>
SPECDEC_TARGET_AVX512 inline void tree_values(float* ot, int ldo, const float* p, int ldp, const float* v,
                                             std::ptrdiff_t ldv, int rows) {
    __m512 acc[DB];
#pragma GCC unroll 16
    for (int e = 0; e < DB; ++e) acc[e] = _mm512_setzero_ps();
    for (int r = 0; r < rows; ++r) {
        const float* vr = v + r * ldv;
        _mm_prefetch(reinterpret_cast<const char*>(vr + 8 * ldv), _MM_HINT_T0);  // from L2 (see TreeAttention::run)
        const __m512 pr = _mm512_loadu_ps(p + static_cast<std::ptrdiff_t>(r) * ldp);
#pragma GCC unroll 16
        for (int e = 0; e < DB; ++e) acc[e] = _mm512_fmadd_ps(_mm512_set1_ps(vr[e]), pr, acc[e]);
    }
#pragma GCC unroll 16
    for (int e = 0; e < DB; ++e) _mm512_storeu_ps(ot + static_cast<std::ptrdiff_t>(e) * ldo, acc[e]);
}

/// tree_values<DB> for DB in [1, 16] chosen at run time (the last block of a head size that is not a
/// multiple of 16).
template <int DB = 16>
SPECDEC_TARGET_AVX512 inline void tree_values_dispatch(int db, float* ot, int ldo, const float* p, int ldp,
                                                      const float* v, std::ptrdiff_t ldv, int rows) {
    if constexpr (DB >= 1) {
        if (db != DB) return tree_values_dispatch<DB - 1>(db, ot, ldo, p, ldp, v, ldv, rows);
        tree_values<DB>(ot, ldo, p, ldp, v, ldv, rows);
    }
}

/// Softmax numerators down the lanes of s (rows, 16 lanes, lds apart), in place: exp(scale (s - max))
/// per lane; stores each lane's sum of numerators.
SPECDEC_TARGET_AVX512 inline void tree_softmax(float* s, int lds, int rows, float scale, float* sum_out) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int r = 0; r < rows; ++r) mx = _mm512_max_ps(mx, _mm512_loadu_ps(s + static_cast<std::ptrdiff_t>(r) * lds));
    // A lane that sees no key (a padding lane over an empty cache) shifts by 0, so that its -inf
    // scores give exp(-inf) = 0 rather than NaN; it is never written out.
    const __mmask16 seen = _mm512_cmp_ps_mask(mx, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
    const __m512 shift = _mm512_maskz_mov_ps(seen, mx), sc = _mm512_set1_ps(scale);
    __m512 sum = _mm512_setzero_ps();
    for (int r = 0; r < rows; ++r) {
        float* row = s + static_cast<std::ptrdiff_t>(r) * lds;
        const __m512 e = exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(row), shift), sc));
        _mm512_storeu_ps(row, e);
        sum = _mm512_add_ps(sum, e);
    }
    _mm512_storeu_ps(sum_out, sum);
}

/// ot (hd, 16 lanes) divided by each lane's softmax sum (one IEEE division per lane, then products).
SPECDEC_TARGET_AVX512 inline void tree_normalize(float* ot, int hd, const float* sum) {
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_loadu_ps(sum));
    for (int d = 0; d < hd; ++d) _mm512_storeu_ps(ot + 16 * d, _mm512_mul_ps(inv, _mm512_loadu_ps(ot + 16 * d)));
}

/// A single query against `rows` key rows with the rows in the lanes instead: out (hd) =
/// softmax(q·kᵀ·scale)·v with, per key row, the very operations and order that tree_scores,
/// tree_softmax, tree_values and tree_normalize apply to each lane (see the top of this file), so a
/// decode step's result is bit-identical to the same node's in a verified tree. Key and value row r
/// at k + r*ld and v + r*ld; seen(r) false masks row r. sc: work space of rows rounded up to 16.
template <class Seen>
SPECDEC_TARGET_AVX512 void single_query(float* out, const float* q, const float* k, const float* v, std::ptrdiff_t ld,
                                        int rows, int hd, float scale, float* sc, Seen&& seen) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    // Keys two blocks ahead to L1, one line with each load; the block's values to L2 (prefetch_line).
    const auto prefetch = [&](const float* base, int r_begin, int r_end, bool l1) {
        prefetch_rows(base, ld, r_begin, r_end, rows, hd, l1);
    };
    prefetch(k, 0, 32, true);
    __m512 mx = ninf;
    for (int r0 = 0; r0 < rows; r0 += 16) {
        const int nr = std::min(16, rows - r0);
        prefetch(v, r0, r0 + 16, false);
        __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};  // even and odd d, as in tree_scores
        for (int d0 = 0; d0 < hd; d0 += 16) {
            const int left = std::min(16, hd - d0);
            const auto dmask = static_cast<__mmask16>((1u << left) - 1u);
            __m512 kt[16];
#pragma GCC unroll 16
            for (int j = 0; j < 16; ++j) {
                prefetch_line(k + std::min(r0 + 32 + j, rows - 1) * ld + d0, true);
                kt[j] = j < nr ? _mm512_maskz_loadu_ps(dmask, k + (r0 + j) * ld + d0) : _mm512_setzero_ps();
            }
            transpose16(kt);  // kt[e]: element d0 + e of rows r0 .. r0 + 15
            if (left == 16) {
#pragma GCC unroll 16
                for (int e = 0; e < 16; ++e) acc[e % 2] = _mm512_fmadd_ps(kt[e], _mm512_set1_ps(q[d0 + e]), acc[e % 2]);
            } else {
                for (int e = 0; e < left; ++e) acc[e % 2] = _mm512_fmadd_ps(kt[e], _mm512_set1_ps(q[d0 + e]), acc[e % 2]);
            }
        }
        __mmask16 visible = 0;
        for (int j = 0; j < nr; ++j)
            if (seen(r0 + j)) visible = static_cast<__mmask16>(visible | (1u << j));
        const __m512 s = _mm512_mask_blend_ps(visible, ninf, _mm512_add_ps(acc[0], acc[1]));
        _mm512_storeu_ps(sc + r0, s);
        mx = _mm512_max_ps(mx, s);
    }
    const float m = _mm512_reduce_max_ps(mx);
    const __m512 shift = _mm512_set1_ps(m == -INFINITY ? 0.0f : m), scv = _mm512_set1_ps(scale);
    float sum = 0.0f;  // in key-row order, as the lanes' running sums
    for (int r0 = 0; r0 < rows; r0 += 16) {
        _mm512_storeu_ps(sc + r0, exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(sc + r0), shift), scv)));
        for (int j = 0; j < std::min(16, rows - r0); ++j) sum += sc[r0 + j];
    }
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_set1_ps(sum));
    for (int d0 = 0; d0 < hd; d0 += 64) {  // up to 4 vectors of hd at a time
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        const int vectors = std::min(4, (hd - d0 + 15) / 16);
        const auto dmask = [&](int e) {
            const int left = std::min(16, hd - d0 - 16 * e);
            return static_cast<__mmask16>((1u << left) - 1u);
        };
        for (int r = 0; r < rows; ++r) {
            const __m512 p = _mm512_set1_ps(sc[r]);
            const float* vr = v + r * ld + d0;
            _mm_prefetch(reinterpret_cast<const char*>(vr + 8 * ld), _MM_HINT_T0);
#pragma GCC unroll 4
            for (int e = 0; e < 4; ++e)
                if (e < vectors) acc[e] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(dmask(e), vr + 16 * e), p, acc[e]);
        }
#pragma GCC unroll 4
        for (int e = 0; e < 4; ++e)
            if (e < vectors) _mm512_mask_storeu_ps(out + d0 + 16 * e, dmask(e), _mm512_mul_ps(inv, acc[e]));
    }
}

/// Row-major rows (one per lane, `rows` of them, row(r) giving each) and the transposed (hd, 16 lanes)
/// block layout of the kernels above, converted by 16 x 16 register transposes. The mask cuts hd's
/// last partial block of 16; lanes past `rows` read as zero and are not written.
template <class RowOf>
SPECDEC_TARGET_AVX512 inline void lanes_from_rows(float* t, int ldt, RowOf&& row, int rows, int hd) {
    for (int d0 = 0; d0 < hd; d0 += 16) {
        const int left = std::min(16, hd - d0);
        const auto dmask = static_cast<__mmask16>((1u << left) - 1u);
        __m512 v[16];
#pragma GCC unroll 16
        for (int r = 0; r < 16; ++r) v[r] = r < rows ? _mm512_maskz_loadu_ps(dmask, row(r) + d0) : _mm512_setzero_ps();
        transpose16(v);
        for (int j = 0; j < left; ++j) _mm512_storeu_ps(t + static_cast<std::ptrdiff_t>(d0 + j) * ldt, v[j]);
    }
}
template <class RowOf>
SPECDEC_TARGET_AVX512 inline void rows_from_lanes(RowOf&& row, int rows, const float* t, int ldt, int hd) {
    for (int d0 = 0; d0 < hd; d0 += 16) {
        const int left = std::min(16, hd - d0);
        const auto dmask = static_cast<__mmask16>((1u << left) - 1u);
        __m512 v[16];
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) v[j] = j < left ? _mm512_loadu_ps(t + static_cast<std::ptrdiff_t>(d0 + j) * ldt) : _mm512_setzero_ps();
        transpose16(v);
        for (int r = 0; r < rows; ++r) _mm512_mask_storeu_ps(row(r) + d0, dmask, v[r]);
    }
}

SPECDEC_INTRINSICS_END
#endif  // __x86_64__

/// The attention itself, with its work space (reused across calls). Needs tree_attention_available().
class TreeAttention {
public:
    /// att (n, H*hd) = softmax(q·kᵀ·scale)·v per node and head; `mask` (n, N): 1 where node first + i
    /// sees tree node j (its ancestors and itself). Differs from the per-(node, head) loop only by
    /// float32 summation order and exp16's few ulp; a node's result does not depend on the other
    /// nodes of the forward, on the tree's layout, or on the number of threads.
    void run(ThreadPool& pool, float* att, const float* q, const float* kc, const float* vc, const std::uint8_t* mask,
             const TreeAttentionShape& s) {
#if defined(__x86_64__)
        const int G = s.group(), L = s.lanes(), nv = L / 16, kvd = s.Hkv * s.hd, qd = s.H * s.hd;
        const int R = s.rows(), N = s.N();
        const std::size_t R16 = static_cast<std::size_t>(R + 15) / 16 * 16;
        const auto seen_by = [&](int i, int r) { return r < s.T || mask[static_cast<std::size_t>(i) * N + (r - s.T)] != 0; };
        if (s.n == 1) {  // a decode step (or one node added to a tree): one task per query head
            pool.parallel_for(s.H, [&](int h) {
                const std::size_t kv_at = static_cast<std::size_t>(h / G) * s.hd;
                single_query(att + static_cast<std::size_t>(h) * s.hd, q + static_cast<std::size_t>(h) * s.hd, kc + kv_at,
                             vc + kv_at, kvd, R, s.hd, s.scale, thread_scratch(1, R16), [&](int r) { return seen_by(0, r); });
            });
            return;
        }
        // Which lanes see tree row j, per vector of 16 lanes: (N, nv).
        visible_.assign(static_cast<std::size_t>(N) * nv, 0);
        for (int j = 0; j < N; ++j)
            for (int lane = 0; lane < G * s.n; ++lane)
                if (seen_by(lane / G, s.T + j))
                    visible_[static_cast<std::size_t>(j) * nv + lane / 16] |= static_cast<__mmask16>(1u << (lane % 16));
        // Lane `lane` of kv head kvh (node lane / G, query head kvh * G + lane % G) as a row of q or att.
        const auto row_of = [&](auto* base, int kvh, int lane) {
            return base + static_cast<std::size_t>(lane / G) * qd + static_cast<std::size_t>(kvh * G + lane % G) * s.hd;
        };

        // One task per (kv head, vector of 16 lanes); neighbouring tasks take neighbouring heads, so
        // the threads read neighbouring parts of the same cache rows.
        pool.parallel_for(s.Hkv * nv, [&](int task) {
            const int w = nv - 1 - task / s.Hkv, kvh = task % s.Hkv, lanes = std::min(16, G * s.n - 16 * w);  // longest first
            // Rows after the vector's last node are masked for all its lanes (children follow their
            // parents): skipping them skips only exact zeros, and a prefill computes the lower
            // triangle of its scores, not the square.
            const int rows = s.T + s.first + (16 * w + lanes - 1) / G + 1;
            float* qh = thread_scratch(1, static_cast<std::size_t>(2 * s.hd + 1) * 16 + R16 * 16);
            float* ot = qh + static_cast<std::size_t>(s.hd) * 16;   // (hd, 16) weighted values, transposed
            float* sum = ot + static_cast<std::size_t>(s.hd) * 16;  // (16) sum of numerators per lane
            float* sc = sum + 16;                                    // (rows, 16) scores, then numerators
            const float* k = kc + static_cast<std::size_t>(kvh) * s.hd;
            const float* v = vc + static_cast<std::size_t>(kvh) * s.hd;
            lanes_from_rows(qh, 16, [&](int r) { return row_of(q, kvh, 16 * w + r); }, lanes, s.hd);

            // Each block of scores pulls the keys two blocks ahead to L1 and its own rows' values to
            // L2, a line per k step (prefetch_line).
            const auto prefetch = [&](const float* base, int r_begin, int r_end, int hint) {
                prefetch_rows(base, kvd, r_begin, r_end, rows, s.hd, hint == 0);
            };
            const auto lanes_of = [&](int r) {
                return r < s.T ? __mmask16(0xFFFF) : visible_[static_cast<std::size_t>(r - s.T) * nv + w];
            };
            const auto row = [&](int r) { return k + static_cast<std::size_t>(r) * kvd; };
            prefetch(k, 0, 16, 0);
            __mmask16 vis[8];
            int r = 0;
            for (; r + 8 <= rows; r += 8) {  // 8 key rows at a time: 16 accumulators hide the FMA latency
                for (int j = 0; j < 8; ++j) vis[j] = lanes_of(r + j);
                const int ahead = std::clamp(rows - (r + 16), 0, 8);  // key rows two blocks on
                tree_scores<8>(sc + static_cast<std::size_t>(r) * 16, 16, qh, 16, row(r), kvd, s.hd, vis,
                               row(ahead > 0 ? r + 16 : r), ahead, v + static_cast<std::size_t>(r) * kvd, 8);
            }
            prefetch(v, r, rows, 1);
            for (; r < rows; ++r) {
                vis[0] = lanes_of(r);
                tree_scores<1>(sc + static_cast<std::size_t>(r) * 16, 16, qh, 16, row(r), kvd, s.hd, vis);
            }
            tree_softmax(sc, 16, rows, s.scale, sum);
            for (int d0 = 0; d0 < s.hd; d0 += 16)
                tree_values_dispatch(std::min(16, s.hd - d0), ot + static_cast<std::size_t>(d0) * 16, 16, sc, 16, v + d0, kvd, rows);
            tree_normalize(ot, s.hd, sum);
            rows_from_lanes([&](int lane) { return row_of(att, kvh, 16 * w + lane); }, lanes, ot, 16, s.hd);
        });
#else
        (void)pool, (void)att, (void)q, (void)kc, (void)vc, (void)mask, (void)s;
#endif
    }

private:
    std::vector<std::uint16_t> visible_;   // (N, L / 16) lanes that see tree row j
};

}  // namespace specdec::detail
