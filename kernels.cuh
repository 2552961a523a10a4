// specdec/kernels.cuh — the CUDA kernels of the Llama forward, the KV commit, and sampling.
// SPDX-License-Identifier: MIT
//
// Each kernel mirrors a piece of the float32 CPU reference (detail/model/cpu_model.hpp, detail/methods/glide_cape/glide.hpp,
// detail/core/sampling.hpp) and is tested against it in tests/cuda/test_cuda.cu. Each comes with a host
// launcher `launch_*` that picks the grid and checks the launch; the models (detail/cuda/model.cuh,
// detail/cuda/glide.cuh) only call launchers.
//
// Shapes: D width, H heads, Hkv kv-heads, hd head dim, F SwiGLU width, V vocab, C cache rows,
// n rows computed in this forward, N nodes of the tree, T committed tokens, W mask words per node.
// Dtypes: the residual stream, q, GEMM outputs and logits are fp32; the KV cache, the weights and
// every GEMM input (normed activations, attention output, SwiGLU output) are bf16.
//
// Values that change from one forward to the next (T, N, first) are read from device memory
// (StepParams), never passed as kernel arguments, so a captured CUDA graph replays with new values.
//
// Kernels are `static __global__` or templates (whose host stubs nvcc makes static): this header
// defines them in every translation unit that includes it, and nvcc rejects `inline __global__`.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdint>
#include <string>

#include "detail/cuda/context.cuh"
#include "detail/core/error.hpp"
#include "detail/core/philox.hpp"

namespace specdec::kernels {

/// Per-forward values, uploaded with the tokens before the first kernel.
struct StepParams {
    int cache_len = 0;  // T: committed rows of the cache
    int n_tree = 0;     // N: nodes of the tree; rows T..T+N-1 of the cache hold them after this forward
    int first = 0;      // nodes before `first` were computed by an earlier forward of the same tree
};

// ---------------------------------------------------------------------------------------------------
// Block-wide reductions (llm.c's blockReduce): every thread gets the result. blockDim.x is a multiple
// of 32 and at most 1024.

struct Sum {
    template <class T>
    __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
    template <class T>
    __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct Min {
    template <class T>
    __device__ T operator()(T a, T b) const { return a < b ? a : b; }
};

template <class T, class Op>
__device__ T warp_reduce(T v, Op op) {
    for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity) {
    __shared__ T partial[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_reduce(v, op);
    __syncthreads();  // a previous call may still be reading `partial`
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : identity;
    return warp_reduce(v, op);
}

/// Σ term(j) for j in [0, count), each thread striding over j, reduced over the block.
template <class T, class Term>
__device__ T block_sum_over(int count, Term term) {
    T s = 0;
    for (int j = threadIdx.x; j < count; j += blockDim.x) s += term(j);
    return block_reduce(s, Sum{}, T(0));
}

__device__ inline void store(float* p, float v) { *p = v; }
__device__ inline void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

inline void check_launch() { SPECDEC_CUDA_CHECK(cudaGetLastError()); }

// ---------------------------------------------------------------------------------------------------
// Embedding gather

/// x (n, D) fp32 = embed (V, D) bf16 rows of tokens (n). Widening bf16 is exact.
static __global__ void embed_rows(float* x, const __nv_bfloat16* embed, const int* tokens, int D) {
    const int i = blockIdx.x;
    const __nv_bfloat16* row = embed + static_cast<std::size_t>(tokens[i]) * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) x[static_cast<std::size_t>(i) * D + d] = __bfloat162float(row[d]);
}

inline void launch_embed_rows(cudaStream_t s, float* x, const __nv_bfloat16* embed, const int* tokens, int n, int D) {
    embed_rows<<<n, 256, 0, s>>>(x, embed, tokens, D);
    check_launch();
}

// ---------------------------------------------------------------------------------------------------
// A feature drafter's input (detail/cuda/feature_drafter.cuh, EAGLE §4.1)

/// cat (n, 2D) bf16 = [embed[tokens[i]] | f_i]: the (token, feature) pair EAGLE's FC connector reads
/// (embedding first, as cnets.py concatenates). The embedding row is bf16 already; f is rounded as
/// every GEMM input is.
static __global__ void embed_concat(__nv_bfloat16* cat, const __nv_bfloat16* embed, const int* tokens, const float* f,
                                    int D) {
    const int i = blockIdx.x;
    const __nv_bfloat16* e = embed + static_cast<std::size_t>(tokens[i]) * D;
    const float* fi = f + static_cast<std::size_t>(i) * D;
    __nv_bfloat16* out = cat + static_cast<std::size_t>(i) * 2 * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        out[d] = e[d];
        out[D + d] = __float2bfloat16(fi[d]);
    }
}

inline void launch_embed_concat(cudaStream_t s, __nv_bfloat16* cat, const __nv_bfloat16* embed, const int* tokens,
                                const float* f, int n, int D) {
    if (n <= 0) return;
    embed_concat<<<n, 256, 0, s>>>(cat, embed, tokens, f, D);
    check_launch();
}

/// x (n, D) += b (D) on every row: the FC connector's bias.
static __global__ void add_row_bias(float* x, const float* b, int D) {
    float* row = x + static_cast<std::size_t>(blockIdx.x) * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) row[d] += b[d];
}

inline void launch_add_row_bias(cudaStream_t s, float* x, const float* b, int n, int D) {
    if (n <= 0) return;
    add_row_bias<<<n, 256, 0, s>>>(x, b, D);
    check_launch();
}

/// FSPAD's partial alignment (fspad.txt, Fig. 5): the doubled down_proj's output o (n, 2D) splits into
/// the token branch, added to the residual x, and the feature branch, feature = x + o[:, D:] on the
/// residual before that add (CpuModel's order).
static __global__ void pad_split(float* x, float* feature, const float* o, int D) {
    const std::size_t i = blockIdx.x;
    float* xi = x + i * D;
    float* fi = feature + i * D;
    const float* oi = o + i * 2 * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        fi[d] = xi[d] + oi[D + d];
        xi[d] += oi[d];
    }
}

inline void launch_pad_split(cudaStream_t s, float* x, float* feature, const float* o, int n, int D) {
    if (n <= 0) return;
    pad_split<<<n, 256, 0, s>>>(x, feature, o, D);
    check_launch();
}

// ---------------------------------------------------------------------------------------------------
// RMSNorm

/// out (n, D) = x · rsqrt(mean(x²) + eps) · weight, one block per row. Out is fp32 (a captured hidden
/// state) or bf16 (the input of the next product).
template <class Out>
__global__ void rmsnorm_rows(Out* out, const float* x, const float* weight, int D, float eps) {
    const float* xr = x + static_cast<std::size_t>(blockIdx.x) * D;
    const float ss = block_sum_over<float>(D, [&](int d) { return xr[d] * xr[d]; });
    const float inv = 1.0f / sqrtf(ss / D + eps);
    Out* o = out + static_cast<std::size_t>(blockIdx.x) * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) store(o + d, xr[d] * inv * weight[d]);
}

/// About four elements per thread: a decode step normalises one row, so the block's loads in flight,
/// not its arithmetic, set the time (7 us for D = 4096 at 256 threads on an H100).
template <class Out>
void launch_rmsnorm(cudaStream_t s, Out* out, const float* x, const float* weight, int n, int D, float eps) {
    const int threads = std::min(1024, std::max(128, (D / 4 + 31) / 32 * 32));
    rmsnorm_rows<Out><<<n, threads, 0, s>>>(out, x, weight, D, eps);
    check_launch();
}

// ---------------------------------------------------------------------------------------------------
// RoPE (HF's rotate-half: dimension j pairs with j + hd/2)

/// cs (n, hd/2, 2) = (cos, sin) of positions (n) · inv_freq (hd/2) times `scale` (YaRN's attention
/// factor, else 1), in double like the CPU reference, once per forward: every layer and head reuses it.
static __global__ void rope_table(float* cs, const int* positions, const double* inv_freq, int half, double scale) {
    const int i = blockIdx.x;
    for (int j = threadIdx.x; j < half; j += blockDim.x) {
        const double a = positions[i] * inv_freq[j];
        cs[(static_cast<std::size_t>(i) * half + j) * 2] = static_cast<float>(cos(a) * scale);
        cs[(static_cast<std::size_t>(i) * half + j) * 2 + 1] = static_cast<float>(sin(a) * scale);
    }
}

inline void launch_rope_table(cudaStream_t s, float* cs, const int* positions, const double* inv_freq, int n, int hd,
                              double scale) {
    rope_table<<<n, 64, 0, s>>>(cs, positions, inv_freq, hd / 2, scale);
    check_launch();
}

/// Rotates q in place in qkv (n, (H + 2·Hkv)·hd) = [q | k | v] per row, and writes rotated k and plain
/// v as bf16 into cache row T + first + i of k_cache, v_cache (C, Hkv·hd). With Hkv = 0 it rotates the
/// queries (n, H·hd) only and touches no cache: GLIDE's cross queries (detail/cuda/glide.cuh).
/// One block per (node, head): blocks 0..H-1 rotate q, H..H+Hkv-1 rotate k into the cache, the last
/// Hkv copy v. (One block per node left a decode step waiting on one block's serial loads: 15 us for
/// a 7B layer on an H100.)
static __global__ void rope_store_kv(float* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache, const float* cs,
                              const StepParams* params, int H, int Hkv, int hd) {
    const int i = blockIdx.x, h = blockIdx.y, half = hd / 2, kvd = Hkv * hd;
    float* row = qkv + static_cast<std::size_t>(i) * (H + 2 * Hkv) * hd;
    const float* c = cs + static_cast<std::size_t>(i) * hd;
    const std::size_t cache_row = static_cast<std::size_t>(params->cache_len + params->first + i) * kvd;
    if (h >= H + Hkv) {
        const int head = h - H - Hkv;
        for (int d = threadIdx.x; d < hd; d += blockDim.x)
            v_cache[cache_row + head * hd + d] = __float2bfloat16(row[(H + Hkv + head) * hd + d]);
        return;
    }
    for (int j = threadIdx.x; j < half; j += blockDim.x) {
        const float x0 = row[h * hd + j], x1 = row[h * hd + j + half], cj = c[2 * j], sj = c[2 * j + 1];
        const float y0 = x0 * cj - x1 * sj, y1 = x1 * cj + x0 * sj;
        if (h < H) {
            row[h * hd + j] = y0;
            row[h * hd + j + half] = y1;
        } else {
            k_cache[cache_row + (h - H) * hd + j] = __float2bfloat16(y0);
            k_cache[cache_row + (h - H) * hd + j + half] = __float2bfloat16(y1);
        }
    }
}

inline void launch_rope_store_kv(cudaStream_t s, float* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
                                 const float* cs, const StepParams* params, int n, int H, int Hkv, int hd) {
    if (n == 0) return;
    rope_store_kv<<<dim3(n, H + 2 * Hkv), 64, 0, s>>>(qkv, k_cache, v_cache, cs, params, H, Hkv, hd);
    check_launch();
}

// ---------------------------------------------------------------------------------------------------
// Tree attention, flash-decoding style (Dao et al. 2023, "Flash-Decoding for long-context inference"):
// the keys 0..T+N-1 (committed rows, then the tree's rows) are split into chunks of `split_keys`; one
// block per (kv head, chunk, 16 query rows) computes an unnormalised partial softmax·V with its running
// max and sum, and a second kernel merges the chunks. Query rows are (node, head) pairs of one GQA
// group, so a K/V tile in shared memory serves every head that reads it and every tree node at once:
// N = 1 decode and N = 64 verification run the same kernel, the latter re-reading the cache N·G/16
// times from L2 rather than N·G times.
// Mask: tree row T + j is visible to node i iff bit j of mask row i is set (its ancestors and itself,
// derived from parents on the host: detail/core/tree_mask.hpp); committed rows are visible to all.
// The same two kernels run GLIDE's cross-attention (PrefixAttention below): they are templates over the
// problem, which says through keys() how many keys to split and which of them a query row sees.

/// Keys 0..T+N-1 of a tree forward: the committed rows [0, T), then tree row T + j, visible to a node
/// iff bit j of its mask row is set.
struct TreeKeys {
    int T = 0;
    int count = 0;  // T + N
    const std::uint32_t* mask = nullptr;  // (n, mask_words)
    int mask_words = 0;
    __device__ bool visible(int node, int key) const {
        const std::uint32_t* row = mask + static_cast<std::size_t>(node) * mask_words;
        return key < T || ((row[(key - T) / 32] >> ((key - T) % 32)) & 1u);
    }
};

/// Keys 0..count-1 of another model's committed cache, query node i seeing rows [0, rows[i]): GLIDE's KV
/// delay (glide-cape.txt §4.1), no tree part. rows[i] may be 0 (nothing visible).
struct PrefixKeys {
    int count = 0;  // max of rows[i]
    const int* rows = nullptr;  // (n)
    __device__ bool visible(int node, int key) const { return key < rows[node]; }
};

struct TreeAttention {
    __nv_bfloat16* out = nullptr;          // (n, H·hd) normalised attention output
    float* part_acc = nullptr;             // (n·H, max_splits, hd) Σ exp(s - m)·v per chunk
    float* part_ml = nullptr;              // (n·H, max_splits, 2) running max m and Σ exp(s - m) per chunk
    const float* qkv = nullptr;            // (n, (H + 2·Hkv)·hd): q with RoPE at columns h·hd
    const __nv_bfloat16* k_cache = nullptr;  // (C, Hkv·hd) one layer, RoPE applied
    const __nv_bfloat16* v_cache = nullptr;  // (C, Hkv·hd)
    const std::uint32_t* mask = nullptr;   // (n, mask_words)
    const StepParams* params = nullptr;
    int n = 0, H = 0, Hkv = 0, hd = 0;
    int mask_words = 0;  // W
    int split_keys = 0;  // keys per chunk, a multiple of kAttnTile
    int max_splits = 0;  // chunks the partial buffers hold: ceil(C / split_keys)

    __device__ TreeKeys keys() const {
        return {params->cache_len, params->cache_len + params->n_tree, mask, mask_words};
    }
    __device__ const float* query(int i) const { return qkv + static_cast<std::size_t>(i) * (H + 2 * Hkv) * hd; }
};

/// GLIDE's cross-attention (glide-cape.txt §4.1): this model's queries over a prefix of another model's
/// committed cache (the target's, read in place), query i seeing rows [0, visible_rows[i]). H query heads
/// share Hkv kv heads as in the tree (GQA). A query that sees no row gets a zero output.
struct PrefixAttention {
    __nv_bfloat16* out = nullptr;            // (n, H·hd) normalised attention output
    float* part_acc = nullptr;               // (n·H, max_splits, hd) as TreeAttention's
    float* part_ml = nullptr;                // (n·H, max_splits, 2)
    const float* q = nullptr;                // (n, H·hd) RoPE applied
    const __nv_bfloat16* k_cache = nullptr;  // (rows, Hkv·hd) RoPE applied
    const __nv_bfloat16* v_cache = nullptr;  // (rows, Hkv·hd)
    const int* visible_rows = nullptr;       // (n) each at most the rows the cache holds
    const int* key_count = nullptr;          // (1) max of visible_rows: the keys split into chunks
    int n = 0, H = 0, Hkv = 0, hd = 0;
    int split_keys = 0;  // keys per chunk, a multiple of kAttnTile
    int max_splits = 0;  // chunks the partial buffers hold: ceil(rows / split_keys)

    __device__ PrefixKeys keys() const { return {*key_count, visible_rows}; }
    __device__ const float* query(int i) const { return q + static_cast<std::size_t>(i) * H * hd; }
};

constexpr int kAttnWarps = 4;
constexpr int kAttnRowsPerWarp = 4;
constexpr int kAttnRows = kAttnWarps * kAttnRowsPerWarp;  // (node, head) query rows per block
constexpr int kAttnTile = 32;                              // keys per shared-memory tile: one per lane
constexpr int kAttnMaxHeadDim = 128;

/// Keys per chunk for a cache of `capacity` rows: one tile (32 keys) or more, at most about 64 chunks,
/// so partial buffers stay bounded for long contexts while a short one still spreads over
/// kv heads x chunks blocks. A decode step's attention waits on each block's serial tiles: chunks of
/// 128 keys took 17 us per 7B layer over 128 rows on an H100 (bench_cuda's pieces table).
constexpr int attention_split_keys(int capacity) {
    return std::max(kAttnTile, (capacity / 64 + kAttnTile - 1) / kAttnTile * kAttnTile);
}

/// Shared memory of one block: q rows (pre-scaled), a K tile padded to hd + 1 floats per key so lane
/// j's dot product reads bank (j + d) mod 32, and a V tile.
inline std::size_t tree_attention_smem(int hd) {
    return sizeof(float) * (static_cast<std::size_t>(kAttnRows) * hd + kAttnTile * (hd + 1) + kAttnTile * hd);
}

/// kDimsPerLane = ceil(hd / 32): each lane accumulates output dimensions lane, lane + 32, ...
/// Attention: TreeAttention or PrefixAttention.
template <int kDimsPerLane, class Attention>
__global__ void __launch_bounds__(kAttnWarps * 32) attention_partial(Attention a) {
    extern __shared__ float smem[];
    const auto keys = a.keys();
    const int G = a.H / a.Hkv, g = blockIdx.x, split = blockIdx.y;
    const int key_begin = split * a.split_keys, key_end = min(key_begin + a.split_keys, keys.count);
    const int row0 = blockIdx.z * kAttnRows, rows = min(kAttnRows, a.n * G - row0);
    if (key_begin >= key_end || rows <= 0) return;  // graph replays launch chunks for the whole capacity

    const int hd = a.hd, kvd = a.Hkv * hd;
    float* q_s = smem;                        // (kAttnRows, hd)
    float* k_s = q_s + kAttnRows * hd;        // (kAttnTile, hd + 1)
    float* v_s = k_s + kAttnTile * (hd + 1);  // (kAttnTile, hd)
    const float scale = 1.0f / sqrtf(static_cast<float>(hd));
    for (int e = threadIdx.x; e < rows * hd; e += blockDim.x) {
        const int r = e / hd, d = e % hd, flat = row0 + r, i = flat / G, h = g * G + flat % G;
        q_s[e] = a.query(i)[h * hd + d] * scale;
    }

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float m[kAttnRowsPerWarp], l[kAttnRowsPerWarp], acc[kAttnRowsPerWarp][kDimsPerLane];
#pragma unroll
    for (int j = 0; j < kAttnRowsPerWarp; ++j) {
        m[j] = -INFINITY;
        l[j] = 0.0f;
#pragma unroll
        for (int t = 0; t < kDimsPerLane; ++t) acc[j][t] = 0.0f;
    }

    for (int t0 = key_begin; t0 < key_end; t0 += kAttnTile) {
        __syncthreads();  // q_s is written (first tile) and the previous tile is consumed
        if (hd % 8 == 0) {
            // 16-byte loads, all of a thread's issued before the first is used: a decode step has few
            // blocks, so the latency of the tile's loads, not bandwidth, sets its time (bench_cuda's
            // pieces table: 43 us per 7B layer with one 2-byte load in flight per thread).
            constexpr int kVecs = kAttnTile * kAttnMaxHeadDim / 8 / (kAttnWarps * 32);
            const int per_key = hd / 8;
            uint4 kv[kVecs], vv[kVecs];
#pragma unroll
            for (int u = 0; u < kVecs; ++u) {
                const int e = threadIdx.x + u * kAttnWarps * 32, key = t0 + e / per_key;
                kv[u] = vv[u] = make_uint4(0, 0, 0, 0);
                if (e < kAttnTile * per_key && key < key_end) {
                    const std::size_t at = static_cast<std::size_t>(key) * kvd + g * hd + e % per_key * 8;
                    kv[u] = *reinterpret_cast<const uint4*>(a.k_cache + at);
                    vv[u] = *reinterpret_cast<const uint4*>(a.v_cache + at);
                }
            }
#pragma unroll
            for (int u = 0; u < kVecs; ++u) {
                const int e = threadIdx.x + u * kAttnWarps * 32, kk = e / per_key, d0 = e % per_key * 8;
                if (e >= kAttnTile * per_key) break;
                const auto* k8 = reinterpret_cast<const __nv_bfloat16*>(&kv[u]);
                const auto* v8 = reinterpret_cast<const __nv_bfloat16*>(&vv[u]);
#pragma unroll
                for (int t = 0; t < 8; ++t) {
                    k_s[kk * (hd + 1) + d0 + t] = __bfloat162float(k8[t]);
                    v_s[kk * hd + d0 + t] = __bfloat162float(v8[t]);
                }
            }
        } else {
            for (int e = threadIdx.x; e < kAttnTile * hd; e += blockDim.x) {
                const int kk = e / hd, d = e % hd, key = t0 + kk;
                const bool in = key < key_end;
                const std::size_t at = static_cast<std::size_t>(key) * kvd + g * hd + d;
                k_s[kk * (hd + 1) + d] = in ? __bfloat162float(a.k_cache[at]) : 0.0f;
                v_s[kk * hd + d] = in ? __bfloat162float(a.v_cache[at]) : 0.0f;
            }
        }
        __syncthreads();
        const int key = t0 + lane;
#pragma unroll
        for (int j = 0; j < kAttnRowsPerWarp; ++j) {
            const int r = warp * kAttnRowsPerWarp + j;
            if (r >= rows) break;  // uniform across the warp
            const bool visible = key < key_end && keys.visible((row0 + r) / G, key);
            float s = -INFINITY;
            if (visible) {
                s = 0.0f;
                for (int d = 0; d < hd; ++d) s += q_s[r * hd + d] * k_s[lane * (hd + 1) + d];
            }
            const float m_new = fmaxf(m[j], warp_reduce(s, Max{}));
            if (m_new == -INFINITY) continue;  // nothing visible to this row yet
            const float correction = expf(m[j] - m_new), p = visible ? expf(s - m_new) : 0.0f;
            l[j] = l[j] * correction + warp_reduce(p, Sum{});
#pragma unroll
            for (int t = 0; t < kDimsPerLane; ++t) acc[j][t] *= correction;
            for (int kk = 0; kk < kAttnTile; ++kk) {
                const float pk = __shfl_sync(0xffffffffu, p, kk);
#pragma unroll
                for (int t = 0; t < kDimsPerLane; ++t)
                    if (lane + 32 * t < hd) acc[j][t] += pk * v_s[kk * hd + lane + 32 * t];
            }
            m[j] = m_new;
        }
    }

#pragma unroll
    for (int j = 0; j < kAttnRowsPerWarp; ++j) {
        const int r = warp * kAttnRowsPerWarp + j;
        if (r >= rows) break;
        const int flat = row0 + r, i = flat / G, h = g * G + flat % G;
        const std::size_t slot = (static_cast<std::size_t>(i) * a.H + h) * a.max_splits + split;
        if (lane == 0) {
            a.part_ml[slot * 2] = m[j];
            a.part_ml[slot * 2 + 1] = l[j];
        }
#pragma unroll
        for (int t = 0; t < kDimsPerLane; ++t)
            if (lane + 32 * t < hd) a.part_acc[slot * hd + lane + 32 * t] = acc[j][t];
    }
}

/// Merges the chunks of one (node, head): out = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s.
/// In a tree M is finite (every node sees itself); a cross-attention query that sees no row has
/// M = -inf and gets zeros, as the CPU reference (detail/methods/glide_cape/glide.hpp).
template <class Attention>
__global__ void attention_merge(Attention a) {
    const int row = blockIdx.x;  // i·H + h
    const int splits = (a.keys().count + a.split_keys - 1) / a.split_keys;
    const float* ml = a.part_ml + static_cast<std::size_t>(row) * a.max_splits * 2;
    const float* acc = a.part_acc + static_cast<std::size_t>(row) * a.max_splits * a.hd;
    float M = -INFINITY;
    for (int s = 0; s < splits; ++s) M = fmaxf(M, ml[2 * s]);
    if (M == -INFINITY) {
        for (int d = threadIdx.x; d < a.hd; d += blockDim.x)
            a.out[static_cast<std::size_t>(row) * a.hd + d] = __float2bfloat16(0.0f);
        return;
    }
    float L = 0.0f;
    for (int s = 0; s < splits; ++s) L += expf(ml[2 * s] - M) * ml[2 * s + 1];
    for (int d = threadIdx.x; d < a.hd; d += blockDim.x) {
        float o = 0.0f;
        for (int s = 0; s < splits; ++s) o += expf(ml[2 * s] - M) * acc[static_cast<std::size_t>(s) * a.hd + d];
        a.out[static_cast<std::size_t>(row) * a.hd + d] = __float2bfloat16(o / L);
    }
}

/// Both attention kernels for one problem, `splits` chunks wide.
template <class Attention>
void launch_attention(cudaStream_t s, const Attention& a, int splits) {
    detail::require(a.hd <= kAttnMaxHeadDim && a.hd % 2 == 0, "cuda.attention", [&] {
        return "head_dim " + std::to_string(a.hd) + " is not supported (even values up to " +
               std::to_string(kAttnMaxHeadDim) + ")";
    });
    detail::require(a.split_keys > 0 && a.split_keys % kAttnTile == 0 && splits >= 1 && splits <= a.max_splits,
                    "cuda.attention", [&] {
                        return "split_keys " + std::to_string(a.split_keys) + " must be a positive multiple of " +
                               std::to_string(kAttnTile) + " and splits " + std::to_string(splits) + " within [1, " +
                               std::to_string(a.max_splits) + "]";
                    });
    const int G = a.H / a.Hkv;
    const dim3 grid(a.Hkv, splits, (a.n * G + kAttnRows - 1) / kAttnRows);
    const std::size_t smem = tree_attention_smem(a.hd);
    if (a.hd <= 32) attention_partial<1><<<grid, kAttnWarps * 32, smem, s>>>(a);
    else if (a.hd <= 64) attention_partial<2><<<grid, kAttnWarps * 32, smem, s>>>(a);
    else attention_partial<4><<<grid, kAttnWarps * 32, smem, s>>>(a);
    check_launch();
    attention_merge<<<a.n * a.H, 64, 0, s>>>(a);
    check_launch();
}

/// `splits` chunks are launched: ceil((T + N) / split_keys) when T is known on the host, max_splits
/// inside a CUDA graph (the extra blocks return at once).
inline void launch_tree_attention(cudaStream_t s, const TreeAttention& a, int splits) {
    launch_attention(s, a, splits);
}

/// `splits`: ceil(key_count / split_keys), at least 1, or max_splits (the extra blocks return at once).
inline void launch_prefix_attention(cudaStream_t s, const PrefixAttention& a, int splits) {
    launch_attention(s, a, splits);
}

// ---------------------------------------------------------------------------------------------------
// The skinny product: y (n, m) = x (n, k) · Wᵀ (+ y) for a decode step or a small tree (n ≤ 8)

/// Rows of x the skinny product takes; larger n goes to cuBLASLt's tensor-core kernels.
constexpr int kSkinnyMaxN = 8;
constexpr int kSkinnyWarps = 4;    // warps per block
constexpr int kSkinnyRows = 2;     // rows of W per warp: each x load feeds two rows
constexpr int kSkinnyUnroll = 4;   // 16-byte loads of each row in flight per lane before the FMAs

/// Σ over 8 bf16 pairs of a·b, in fp32.
__device__ inline float dot8(uint4 a, uint4 b) {
    const auto* pa = reinterpret_cast<const __nv_bfloat162*>(&a);
    const auto* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 fa = __bfloat1622float2(pa[i]), fb = __bfloat1622float2(pb[i]);
        s = fmaf(fa.x, fb.x, fmaf(fa.y, fb.y, s));
    }
    return s;
}

/// A decode step reads every weight once and does 2 flops per byte pair: memory-bound, so the kernel
/// is a stream over W (llama.cpp's and gpt-fast's GEMV idea): each warp owns kSkinnyRows rows, its
/// lanes read 16-byte chunks of them with loads that skip L1 (W is read once), x comes from L1/L2
/// (it is tiny and every warp reads it), and a warp shuffle sums each row's lanes. Needs k % 8 == 0
/// and 16-byte aligned rows (the caller checks).
template <int N>
__global__ void __launch_bounds__(kSkinnyWarps * 32)
    skinny_product(float* y, const __nv_bfloat16* x, const __nv_bfloat16* W, int k, int m, float beta) {
    const int lane = threadIdx.x % 32;
    const int row0 = (blockIdx.x * kSkinnyWarps + static_cast<int>(threadIdx.x) / 32) * kSkinnyRows;
    if (row0 >= m) return;
    const int chunks = k / 8;
    const uint4* w[kSkinnyRows];
#pragma unroll
    for (int r = 0; r < kSkinnyRows; ++r)  // a row past m re-reads the last one; its sum is not stored
        w[r] = reinterpret_cast<const uint4*>(W + static_cast<std::size_t>(min(row0 + r, m - 1)) * k);
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    float acc[kSkinnyRows][N] = {};
    const auto fma_chunk = [&](const uint4 (&wv)[kSkinnyRows], int c) {
#pragma unroll
        for (int j = 0; j < N; ++j) {
            const uint4 xj = __ldg(xv + static_cast<std::size_t>(j) * chunks + c);
#pragma unroll
            for (int r = 0; r < kSkinnyRows; ++r) acc[r][j] += dot8(wv[r], xj);
        }
    };
    int c = lane;
    for (; c + 32 * (kSkinnyUnroll - 1) < chunks; c += 32 * kSkinnyUnroll) {
        uint4 wv[kSkinnyUnroll][kSkinnyRows];
#pragma unroll
        for (int u = 0; u < kSkinnyUnroll; ++u)
#pragma unroll
            for (int r = 0; r < kSkinnyRows; ++r) wv[u][r] = __ldcs(w[r] + c + 32 * u);
#pragma unroll
        for (int u = 0; u < kSkinnyUnroll; ++u) fma_chunk(wv[u], c + 32 * u);
    }
    for (; c < chunks; c += 32) {
        uint4 wv[kSkinnyRows];
#pragma unroll
        for (int r = 0; r < kSkinnyRows; ++r) wv[r] = __ldcs(w[r] + c);
        fma_chunk(wv, c);
    }
#pragma unroll
    for (int r = 0; r < kSkinnyRows; ++r)
#pragma unroll
        for (int j = 0; j < N; ++j) {
            const float v = warp_reduce(acc[r][j], Sum{});
            if (lane == 0 && row0 + r < m) {
                float* out = y + static_cast<std::size_t>(j) * m + row0 + r;
                *out = beta == 0.0f ? v : v + beta * *out;
            }
        }
}

template <int N>
void launch_skinny_n(cudaStream_t s, float* y, const __nv_bfloat16* x, const __nv_bfloat16* W, int k, int m, float beta) {
    const int rows_per_block = kSkinnyWarps * kSkinnyRows;
    skinny_product<N><<<(m + rows_per_block - 1) / rows_per_block, kSkinnyWarps * 32, 0, s>>>(y, x, W, k, m, beta);
}

/// y (n, m) = x (n, k) · Wᵀ + beta · y for 1 ≤ n ≤ kSkinnyMaxN, k % 8 == 0, 16-byte aligned x and W.
inline void launch_skinny_product(cudaStream_t s, float* y, const __nv_bfloat16* x, const __nv_bfloat16* W, int n,
                                  int k, int m, float beta) {
    switch (n) {
        case 1: launch_skinny_n<1>(s, y, x, W, k, m, beta); break;
        case 2: launch_skinny_n<2>(s, y, x, W, k, m, beta); break;
        case 3: launch_skinny_n<3>(s, y, x, W, k, m, beta); break;
        case 4: launch_skinny_n<4>(s, y, x, W, k, m, beta); break;
        case 5: launch_skinny_n<5>(s, y, x, W, k, m, beta); break;
        case 6: launch_skinny_n<6>(s, y, x, W, k, m, beta); break;
        case 7: launch_skinny_n<7>(s, y, x, W, k, m, beta); break;
        case 8: launch_skinny_n<8>(s, y, x, W, k, m, beta); break;
        default: detail::fail("cuda.kernels", "skinny product for n = " + std::to_string(n) + " (1.." +
                                                 std::to_string(kSkinnyMaxN) + " only)");
    }
    check_launch();
}

// ---------------------------------------------------------------------------------------------------
// SwiGLU

/// act (n, F) bf16 = silu(gate) · up, with gate_up (n, 2F) = [gate | up] per row.
static __global__ void swiglu(__nv_bfloat16* act, const float* gate_up, int n, int F) {
    const std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= static_cast<std::size_t>(n) * F) return;
    const std::size_t i = e / F, j = e % F;
    const float g = gate_up[i * 2 * F + j], u = gate_up[i * 2 * F + F + j];
    act[e] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
}

inline void launch_swiglu(cudaStream_t s, __nv_bfloat16* act, const float* gate_up, int n, int F) {
    const std::size_t count = static_cast<std::size_t>(n) * F;
    swiglu<<<static_cast<unsigned>((count + 255) / 256), 256, 0, s>>>(act, gate_up, n, F);
    check_launch();
}

// ---------------------------------------------------------------------------------------------------
// KV gather for commit(path)

constexpr int kCommitChunk = 64;  // path entries per launch: they travel as a kernel argument

/// Entries [first_entry, first_entry + count) of an accepted path.
struct PathChunk {
    int first_entry = 0;
    int count = 0;
    int node[kCommitChunk] = {};  // tree node of each entry
};

/// For every layer, K and V: cache row T + entry ← row T + node, in entry order. One thread per
/// column walks the entries in order, which is the CPU's in-order move: sources never precede their
/// destinations (node ≥ entry, increasing), so no row is overwritten before it is read.
static __global__ void gather_kv_rows(__nv_bfloat16* k_cache, __nv_bfloat16* v_cache, std::size_t layer_stride, int layers,
                               int kvd, int cache_len, PathChunk chunk) {
    const std::size_t e = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e >= static_cast<std::size_t>(layers) * 2 * kvd) return;
    const std::size_t col = e % kvd, layer = e / kvd / 2;
    __nv_bfloat16* cache = ((e / kvd) % 2 == 0 ? k_cache : v_cache) + layer * layer_stride + col;
    for (int j = 0; j < chunk.count; ++j) {
        const int dst = chunk.first_entry + j, src = chunk.node[j];
        if (src != dst)
            cache[static_cast<std::size_t>(cache_len + dst) * kvd] = cache[static_cast<std::size_t>(cache_len + src) * kvd];
    }
}

inline void launch_gather_kv_rows(cudaStream_t s, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
                                  std::size_t layer_stride, int layers, int kvd, int cache_len, const PathChunk& chunk) {
    const std::size_t threads = static_cast<std::size_t>(layers) * 2 * kvd;
    gather_kv_rows<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, s>>>(k_cache, v_cache, layer_stride, layers,
                                                                                 kvd, cache_len, chunk);
    check_launch();
}

// ---------------------------------------------------------------------------------------------------
// Sampling: argmax, processed probabilities (temperature, top-k, top-p), inverse-CDF draws.
// One block per row. These are not yet on the decode path (acceptance runs on the host); they exist so
// device-side acceptance can follow, and are checked against detail/core/sampling.hpp.

constexpr int kRowThreads = 1024;

/// Index of the largest value; ties to the lowest index (detail/core/sampling.hpp's argmax).
__device__ inline int block_argmax(const float* row, int V) {
    float best = -INFINITY;
    int at = INT_MAX;
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        if (row[j] > best || (row[j] == best && j < at)) {
            best = row[j];
            at = j;
        }
    const float top = block_reduce(best, Max{}, -INFINITY);
    const int index = block_reduce(best == top ? at : INT_MAX, Min{}, INT_MAX);
    return index == INT_MAX ? 0 : index;
}

/// out (n) = argmax of each logits row (n, V).
static __global__ void argmax_rows(int* out, const float* logits, int V) {
    const int index = block_argmax(logits + static_cast<std::size_t>(blockIdx.x) * V, V);
    if (threadIdx.x == 0) out[blockIdx.x] = index;
}

inline void launch_argmax_rows(cudaStream_t s, int* out, const float* logits, int n, int V) {
    argmax_rows<<<n, kRowThreads, 0, s>>>(out, logits, V);
    check_launch();
}

/// A prefix of the ranking by (probability desc, index asc): token j is in it iff its probability's
/// bits exceed `bits`, or equal them with j ≤ `index`. Probabilities are ≥ 0, so their IEEE bit
/// patterns order like the values and ties are broken exactly as the CPU's stable rank breaks them.
struct RankPrefix {
    unsigned bits = 0;
    int index = INT_MAX;  // {0, INT_MAX}: every token
    __device__ bool contains(float p, int j) const {
        const unsigned b = __float_as_uint(p);
        return b > bits || (b == bits && j <= index);
    }
};

/// The shortest prefix of `within` whose weight reaches `goal`: weight(j) = 1 gives top-k (goal k),
/// weight(j) = p_j gives top-p (goal top_p · mass). Found by fixing the threshold's bits from the top
/// (32 block sums), then the tie index by bisection (log2 V sums): a radix select that needs no sort.
template <class T, class Weight>
__device__ inline RankPrefix shortest_prefix(const float* p, int V, RankPrefix within, Weight weight, T goal) {
    unsigned t = 0;  // invariant: weight(within ∧ bits ≥ t) ≥ goal
    for (int b = 31; b >= 0; --b) {
        const unsigned c = t | (1u << b);
        const T s = block_sum_over<T>(V, [&](int j) {
            return within.contains(p[j], j) && __float_as_uint(p[j]) >= c ? weight(j) : T(0);
        });
        if (s >= goal) t = c;
    }
    const T above = block_sum_over<T>(V, [&](int j) {
        return within.contains(p[j], j) && __float_as_uint(p[j]) > t ? weight(j) : T(0);
    });
    int lo = 0, hi = V - 1;  // the smallest tie index that reaches the goal
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        const T s = above + block_sum_over<T>(V, [&](int j) {
            return within.contains(p[j], j) && __float_as_uint(p[j]) == t && j <= mid ? weight(j) : T(0);
        });
        if (s >= goal) hi = mid;
        else lo = mid + 1;
    }
    return {t, lo};
}

/// probs (n, V) = detail::processed_probs of logits (n, V): one-hot argmax when temperature is 0,
/// else softmax(logits / temperature) cut to top-k, then to the top-p nucleus of what top-k kept,
/// renormalised. Sums are in double like the CPU's. Cost: about 100 passes over the row when cutting.
static __global__ void processed_probs_rows(float* probs, const float* logits, int V, float temperature, int top_k, float top_p) {
    const float* in = logits + static_cast<std::size_t>(blockIdx.x) * V;
    float* p = probs + static_cast<std::size_t>(blockIdx.x) * V;
    if (temperature == 0.0f) {
        const int best = block_argmax(in, V);
        for (int j = threadIdx.x; j < V; j += blockDim.x) p[j] = j == best ? 1.0f : 0.0f;
        return;
    }
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, in[j]);
    mx = block_reduce(mx, Max{}, -INFINITY);
    for (int j = threadIdx.x; j < V; j += blockDim.x) p[j] = expf((in[j] - mx) / temperature);
    __syncthreads();
    const float inv = static_cast<float>(1.0 / block_sum_over<double>(V, [&](int j) { return double(p[j]); }));
    for (int j = threadIdx.x; j < V; j += blockDim.x) p[j] *= inv;
    __syncthreads();
    const bool cut_k = top_k > 0 && top_k < V;
    if (!cut_k && top_p >= 1.0f) return;

    RankPrefix keep;
    if (cut_k) keep = shortest_prefix<int>(p, V, keep, [](int) { return 1; }, top_k);
    if (top_p < 1.0f) {
        const double mass = block_sum_over<double>(V, [&](int j) { return keep.contains(p[j], j) ? double(p[j]) : 0.0; });
        const RankPrefix nucleus = shortest_prefix<double>(p, V, keep, [&](int j) { return double(p[j]); },
                                                           double(top_p) * mass);
        keep = nucleus;  // a prefix of a prefix: the shorter one
    }
    const double kept = block_sum_over<double>(V, [&](int j) { return keep.contains(p[j], j) ? double(p[j]) : 0.0; });
    const float scale = static_cast<float>(1.0 / kept);
    __syncthreads();  // every thread has read p for the sums above
    for (int j = threadIdx.x; j < V; j += blockDim.x) p[j] = keep.contains(p[j], j) ? p[j] * scale : 0.0f;
}

inline void launch_processed_probs(cudaStream_t s, float* probs, const float* logits, int n, int V, float temperature,
                                   int top_k, float top_p) {
    processed_probs_rows<<<n, kRowThreads, 0, s>>>(probs, logits, V, temperature, top_k, top_p);
    check_launch();
}

/// Inclusive prefix sum over the block in thread order; `total` receives the block's sum.
__device__ inline double block_inclusive_scan(double v, double* total) {
    __shared__ double warp_sums[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int offset = 1; offset < 32; offset *= 2) {
        const double y = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset) v += y;
    }
    __syncthreads();  // a previous call may still be reading warp_sums
    if (lane == 31) warp_sums[warp] = v;
    __syncthreads();
    double before = 0.0, all = 0.0;
    for (int w = 0; w < warps; ++w) {
        if (w < warp) before += warp_sums[w];
        all += warp_sums[w];
    }
    *total = all;
    return before + v;
}

/// Which uniform a row draws: StepRng{seed, step, stream}.uniform(first_node + row, coin).
struct Coins {
    std::uint64_t seed = 0;
    std::uint32_t step = 0;
    std::uint32_t stream = 0;  // an RngStream value
    std::uint32_t first_node = 0;
    std::uint32_t coin = 0;
};

/// out (n) = detail::sample_index of each probs row (n, V) with the row's uniform u: the first
/// nonzero token whose cumulative mass exceeds u · total (walked in index order, in double), else the
/// last nonzero one; -1 for an all-zero row (where the CPU throws).
static __global__ void sample_rows(int* out, const float* probs, int V, Coins coins) {
    const float* p = probs + static_cast<std::size_t>(blockIdx.x) * V;
    const double total = block_sum_over<double>(V, [&](int j) { return double(p[j]); });
    if (!(total > 0.0)) {
        if (threadIdx.x == 0) out[blockIdx.x] = -1;
        return;
    }
    const float u = detail::philox_uniform(coins.seed, coins.step, coins.stream, coins.first_node + blockIdx.x, coins.coin);
    const double target = u * total;
    double carry = 0.0;
    for (int base = 0; base < V; base += blockDim.x) {
        const int j = base + threadIdx.x;
        const double pj = j < V && p[j] > 0.0f ? double(p[j]) : 0.0;
        double chunk = 0.0;
        const double cum = carry + block_inclusive_scan(pj, &chunk);
        const int hit = block_reduce(pj > 0.0 && target < cum ? j : INT_MAX, Min{}, INT_MAX);
        if (hit != INT_MAX) {
            if (threadIdx.x == 0) out[blockIdx.x] = hit;
            return;
        }
        carry += chunk;
    }
    int last = -1;  // u · total rounded up to the full mass
    for (int j = threadIdx.x; j < V; j += blockDim.x)
        if (p[j] > 0.0f) last = j;
    last = block_reduce(last, Max{}, -1);
    if (threadIdx.x == 0) out[blockIdx.x] = last;
}

inline void launch_sample_rows(cudaStream_t s, int* out, const float* probs, int n, int V, const Coins& coins) {
    sample_rows<<<n, kRowThreads, 0, s>>>(out, probs, V, coins);
    check_launch();
}

// ---------------------------------------------------------------------------------------------------
// Training (detail/cuda/train_device.cuh): the device trainer's pieces and the bf16 copies its products read

/// op(i) for every i in [0, n): one thread per piece of a device_ops.hpp functor.
template <class Op>
__global__ void run_pieces(std::int64_t n, Op op) {
    const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) op(i);
}

template <class Op>
void launch_pieces(cudaStream_t s, std::int64_t n, const Op& op) {
    if (n <= 0) return;
    constexpr int kThreads = 256;
    run_pieces<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, s>>>(n, op);
    check_launch();
}

/// out (n) bf16 = x (n) fp32, round to nearest even: what cuBLASLt reads of an fp32 operand.
static __global__ void to_bf16(__nv_bfloat16* out, const float* x, std::int64_t n) {
    const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2bfloat16(x[i]);
}

inline void launch_to_bf16(cudaStream_t s, __nv_bfloat16* out, const float* x, std::int64_t n) {
    if (n <= 0) return;
    to_bf16<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(out, x, n);
    check_launch();
}

}  // namespace specdec::kernels
