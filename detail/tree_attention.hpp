// specdec/detail/tree_attention.hpp — attention of a few tree nodes over the KV cache, read in place:
// the CPU model's fast path for verifying a tree (2..64 query rows per kv head).
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
// down the lanes (16 queries at once) with no transposes. The key rows are split into chunks merged
// as in flash-decoding (Dao et al., "Flash-Decoding for long-context inference", 2023), so that a
// model with few kv heads still gives every thread work.

namespace specdec::detail {

/// Query rows per kv head (nodes x the heads of a GQA group) up to which the fast model takes
/// tree_attention; from there on the blocked matrix-product attention, which a prefill needs anyway
/// (it skips the masked upper triangle block by block).
constexpr int kTreeAttentionMaxRows = 64;

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

/// Whether this CPU and shape take tree_attention (AVX-512, at most kTreeAttentionMaxRows rows).
inline bool tree_attention_available(const TreeAttentionShape& s) {
#if defined(__x86_64__)
    return best_isa() == MatmulIsa::kAvx512 && s.n >= 1 && s.group() * s.n <= kTreeAttentionMaxRows;
#else
    (void)s;
    return false;
#endif
}

#if defined(__x86_64__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 intrinsics, as in matmul.hpp
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

/// Scores of RB key rows against 16 query lanes: s[j][lane] = k_j · q_lane over hd, where qt holds
/// the queries transposed (hd rows, ldq apart) and k_j = k + j * ldk. Masked lanes get -inf.
template <int RB>
SPECDEC_TARGET_AVX512 inline void tree_scores(float* s, int lds, const float* qt, int ldq, const float* k,
                                             std::ptrdiff_t ldk, int hd, const __mmask16* visible) {
    // Even and odd d into separate accumulators: 2 RB independent FMA chains (8 would just cover the
    // latency of two FMA pipes, with no slack).
    __m512 acc[2][RB];
#pragma GCC unroll 8
    for (int j = 0; j < RB; ++j) acc[0][j] = acc[1][j] = _mm512_setzero_ps();
    int d = 0;
    for (; d + 2 <= hd; d += 2)
#pragma GCC unroll 2
        for (int u = 0; u < 2; ++u) {
            const __m512 q = _mm512_loadu_ps(qt + static_cast<std::ptrdiff_t>(d + u) * ldq);
#pragma GCC unroll 8
            for (int j = 0; j < RB; ++j) acc[u][j] = _mm512_fmadd_ps(_mm512_set1_ps(k[j * ldk + d + u]), q, acc[u][j]);
        }
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
/// per lane; stores each lane's max (-inf where a lane saw no key) and sum of numerators.
SPECDEC_TARGET_AVX512 inline void tree_softmax(float* s, int lds, int rows, float scale, float* max_out,
                                              float* sum_out) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int r = 0; r < rows; ++r) mx = _mm512_max_ps(mx, _mm512_loadu_ps(s + static_cast<std::ptrdiff_t>(r) * lds));
    // A lane with no visible key here keeps max -inf (its chunk weighs 0 in the merge) and shifts by
    // 0, so that its -inf scores give exp(-inf) = 0 rather than NaN.
    const __mmask16 seen = _mm512_cmp_ps_mask(mx, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
    const __m512 shift = _mm512_maskz_mov_ps(seen, mx), sc = _mm512_set1_ps(scale);
    __m512 sum = _mm512_setzero_ps();
    for (int r = 0; r < rows; ++r) {
        float* row = s + static_cast<std::ptrdiff_t>(r) * lds;
        const __m512 e = exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(row), shift), sc));
        _mm512_storeu_ps(row, e);
        sum = _mm512_add_ps(sum, e);
    }
    _mm512_storeu_ps(max_out, mx);
    _mm512_storeu_ps(sum_out, sum);
}

/// 16 lanes of one kv head's partials over n_chunks chunks (chunk c's at part + c * stride: max (L),
/// sum (L), values (hd, L); lanes from w16) merged as in flash-decoding: o (hd, 16) = sum_c e_c ot_c /
/// sum_c e_c l_c with e_c = exp(scale (m_c - max m)). A chunk whose max is -inf (no key it holds is
/// visible to the lane) weighs 0.
SPECDEC_TARGET_AVX512 inline void tree_merge(float* o, const float* part, std::size_t stride, int n_chunks, int L, int hd,
                                            int w16, float scale) {
    __m512 M = _mm512_set1_ps(-INFINITY), sum = _mm512_setzero_ps();
    for (int c = 0; c < n_chunks; ++c) M = _mm512_max_ps(M, _mm512_loadu_ps(part + c * stride + w16));
    for (int c = 0; c < n_chunks; ++c) {
        const float* pc = part + c * stride;
        const __m512 e = exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(pc + w16), M), _mm512_set1_ps(scale)));
        sum = _mm512_fmadd_ps(e, _mm512_loadu_ps(pc + L + w16), sum);
        const float* ot = pc + 2 * L + w16;
        for (int d = 0; d < hd; ++d) {
            const __m512 t = _mm512_mul_ps(e, _mm512_loadu_ps(ot + static_cast<std::ptrdiff_t>(d) * L));
            _mm512_storeu_ps(o + 16 * d, c == 0 ? t : _mm512_add_ps(t, _mm512_loadu_ps(o + 16 * d)));
        }
    }
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), sum);
    for (int d = 0; d < hd; ++d) _mm512_storeu_ps(o + 16 * d, _mm512_mul_ps(inv, _mm512_loadu_ps(o + 16 * d)));
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

#pragma GCC diagnostic pop
#endif  // __x86_64__

/// The attention itself, with its work space (reused across calls). Needs tree_attention_available.
class TreeAttention {
public:
    /// att (n, H*hd) = softmax(q·kᵀ·scale)·v per node and head; `mask` (n, N): 1 where node first + i
    /// sees tree node j (its ancestors and itself). Differs from the per-(node, head) loop only by
    /// float32 summation order and exp16's few ulp.
    void run(ThreadPool& pool, float* att, const float* q, const float* kc, const float* vc, const std::uint8_t* mask,
             const TreeAttentionShape& s) {
#if defined(__x86_64__)
        const int G = s.group(), L = s.lanes(), nv = L / 16, kvd = s.Hkv * s.hd, qd = s.H * s.hd;
        const int R = s.rows(), N = s.N();
        // Chunks of key rows: enough tasks (kv heads x chunks) for every thread, and a chunk's
        // scores (rows x lanes) small enough to stay in L2. A single chunk is finished in its task:
        // a second pass would read every partial back from the core that wrote it.
        const int n_chunks = std::clamp(std::max((2 * pool.size() + s.Hkv - 1) / s.Hkv, R * L / 65536 + 1), 1, R);
        const int chunk = (R + n_chunks - 1) / n_chunks;
        const std::size_t part = static_cast<std::size_t>(2 + s.hd) * L;  // per (chunk, kv head): max, sum, values

        // Which lanes see tree row j, per vector of 16 lanes: (N, nv).
        visible_.assign(static_cast<std::size_t>(N) * nv, 0);
        for (int j = 0; j < N; ++j)
            for (int lane = 0; lane < G * s.n; ++lane)
                if (mask[static_cast<std::size_t>(lane / G) * N + j])
                    visible_[static_cast<std::size_t>(j) * nv + lane / 16] |= static_cast<__mmask16>(1u << (lane % 16));
        partials_.resize(static_cast<std::size_t>(n_chunks) * s.Hkv * part);

        // Lane `lane` of kv head kvh (node lane / G, query head kvh * G + lane % G) as a row of q or att.
        const auto row_of = [&](auto* base, int kvh, int lane) {
            return base + static_cast<std::size_t>(lane / G) * qd + static_cast<std::size_t>(kvh * G + lane % G) * s.hd;
        };
        // att rows of kv head kvh's query heads: the chunks merged per lane (flash-decoding), divided
        // by the softmax sums and transposed back to (node, head, hd).
        const auto finish = [&](int kvh) {
            float* o = thread_scratch(2, static_cast<std::size_t>(s.hd) * 16);  // (hd, 16 lanes)
            for (int w = 0; w < nv; ++w) {
                tree_merge(o, &partials_[static_cast<std::size_t>(kvh) * part], s.Hkv * part, n_chunks, L, s.hd, 16 * w, s.scale);
                rows_from_lanes([&](int r) { return row_of(att, kvh, 16 * w + r); }, std::min(16, G * s.n - 16 * w), o, 16, s.hd);
            }
        };
        pool.parallel_for(n_chunks * s.Hkv, [&](int task) {
            const int c = task / s.Hkv, kvh = task % s.Hkv;  // neighbouring tasks: neighbouring heads of one row
            const int r0 = c * chunk, rows = std::min(R, r0 + chunk) - r0;
            float* part_max = &partials_[(static_cast<std::size_t>(c) * s.Hkv + kvh) * part];
            float* part_sum = part_max + L;
            float* part_out = part_sum + L;  // (hd, L)
            float* qh = thread_scratch(1, static_cast<std::size_t>(s.hd + chunk) * L);  // (hd, L) queries, transposed
            float* sc = qh + static_cast<std::size_t>(s.hd) * L;                      // (rows, L) scores
            const float* k = kc + static_cast<std::size_t>(r0) * kvd + static_cast<std::size_t>(kvh) * s.hd;
            const float* v = vc + static_cast<std::size_t>(r0) * kvd + static_cast<std::size_t>(kvh) * s.hd;
            // The head group's queries, lane = node * G + g; padding lanes are zero.
            for (int w = 0; w < nv; ++w)
                lanes_from_rows(qh + 16 * w, L, [&](int r) { return row_of(q, kvh, 16 * w + r); }, std::min(16, G * s.n - 16 * w), s.hd);
            // Key and value rows are ldk apart, which defeats the hardware prefetcher, and after a
            // forward's weights have streamed through they come from memory: each block of scores
            // pulls the keys two blocks ahead to L1 and its own rows' values to L2.
            const auto prefetch = [&](const float* rows_at, int r_begin, int r_end, int hint) {
                for (int r = r_begin; r < std::min(r_end, rows); ++r)
                    for (int d = 0; d < s.hd; d += 16) {
                        const char* line = reinterpret_cast<const char*>(rows_at + static_cast<std::size_t>(r) * kvd + d);
                        if (hint == 0) _mm_prefetch(line, _MM_HINT_T0);
                        else _mm_prefetch(line, _MM_HINT_T1);
                    }
            };
            prefetch(k, 0, 16, 0);

            // Scores, 8 key rows at a time (8 accumulators hide the FMA latency), then per vector of
            // 16 lanes its softmax numerators and weighted values (hd, 16), transposed.
            __mmask16 vis[8];
            for (int w = 0; w < nv; ++w) {
                const auto lanes_of = [&](int r) {  // key row r0 + r
                    const int j = r0 + r - s.T;
                    return j < 0 ? __mmask16(0xFFFF) : visible_[static_cast<std::size_t>(j) * nv + w];
                };
                const auto row = [&](int r) { return k + static_cast<std::size_t>(r) * kvd; };
                int r = 0;
                for (; r + 8 <= rows; r += 8) {
                    if (w == 0) {
                        prefetch(k, r + 16, r + 24, 0);
                        prefetch(v, r, r + 8, 1);
                    }
                    for (int j = 0; j < 8; ++j) vis[j] = lanes_of(r + j);
                    tree_scores<8>(sc + static_cast<std::size_t>(r) * L + 16 * w, L, qh + 16 * w, L, row(r), kvd, s.hd, vis);
                }
                if (w == 0) prefetch(v, r, rows, 1);
                for (; r < rows; ++r) {
                    vis[0] = lanes_of(r);
                    tree_scores<1>(sc + static_cast<std::size_t>(r) * L + 16 * w, L, qh + 16 * w, L, row(r), kvd, s.hd, vis);
                }
                tree_softmax(sc + 16 * w, L, rows, s.scale, part_max + 16 * w, part_sum + 16 * w);
                for (int d0 = 0; d0 < s.hd; d0 += 16)
                    tree_values_dispatch(std::min(16, s.hd - d0), part_out + static_cast<std::size_t>(d0) * L + 16 * w, L,
                                         sc + 16 * w, L, v + d0, kvd, rows);
            }
            if (n_chunks == 1) finish(kvh);
        });

        if (n_chunks > 1) pool.parallel_for(s.Hkv, finish);
#else
        (void)pool, (void)att, (void)q, (void)kc, (void)vc, (void)mask, (void)s;
#endif
    }

private:
    std::vector<std::uint16_t> visible_;   // (N, L / 16) lanes that see tree row j
    std::vector<float> partials_;          // (chunks, Hkv, 2 + hd, L): max, sum, weighted values (hd, L)
};

}  // namespace specdec::detail
