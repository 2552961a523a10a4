// specdec/detail/cuda/weights.cuh — a Llama's (or GLIDE drafter's) parameters on the device: bf16 matrices, fp32 norms.
// SPDX-License-Identifier: MIT
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../model/bf16.hpp"
#include "../model/config.hpp"
#include "context.cuh"
#include "../methods/glide_cape/glide.hpp"
#include "../core/philox.hpp"
#include "../model/weights.hpp"

namespace specdec {

/// One decoder layer on the device. The CPU's q/k/v and gate/up matrices are stacked by rows so each
/// pair or triple is one product (one pass over x, one launch).
struct DeviceLayer {
    DeviceBuffer<float> attn_norm;             // (D)
    DeviceBuffer<__nv_bfloat16> wqkv;          // (H*hd + 2*Hkv*hd, D): q_proj | k_proj | v_proj rows
    DeviceBuffer<__nv_bfloat16> wo;            // (D, H*hd)
    DeviceBuffer<float> mlp_norm;              // (D)
    DeviceBuffer<__nv_bfloat16> w_gate_up;     // (2F, D): gate_proj | up_proj rows
    DeviceBuffer<__nv_bfloat16> w_down;        // (D, F)
};

/// Matrices are bf16 (round to nearest even, as to_bf16 and PyTorch do); the norm vectors stay fp32:
/// they are D floats per layer, and rounding them would add error for no bandwidth.
struct DeviceWeights {
    DeviceBuffer<__nv_bfloat16> embed;    // (V, D)
    std::vector<DeviceLayer> layers;      // L
    DeviceBuffer<float> norm;             // (D)
    DeviceBuffer<__nv_bfloat16> lm_head;  // (V, D); empty when tie_word_embeddings

    const __nv_bfloat16* output_matrix() const { return lm_head.empty() ? embed.get() : lm_head.get(); }

    /// Bytes of weights one decode step reads: every layer matrix and the output matrix (the embedding
    /// table contributes one row per token). The floor of a bandwidth-bound step.
    std::size_t bytes_read_per_step() const {
        std::size_t b = output_matrix() == embed.get() ? embed.bytes() : lm_head.bytes();
        for (const DeviceLayer& l : layers)
            b += l.wqkv.bytes() + l.wo.bytes() + l.w_gate_up.bytes() + l.w_down.bytes() + l.attn_norm.bytes() +
                 l.mlp_norm.bytes();
        return b + norm.bytes();
    }
};

/// GLIDE's cross-attention sub-layer of one drafter layer (glide-cape.txt §4.1), h = the target's heads,
/// d_k = its head_dim.
struct DeviceCrossAttention {
    DeviceBuffer<float> norm;          // (D) cross_attn_layernorm
    DeviceBuffer<__nv_bfloat16> wq;    // (h*d_k, D) W_1..W_h stacked by head
    DeviceBuffer<__nv_bfloat16> wo;    // (D, h*d_k) W^O
};

/// A GLIDE drafter on the device: its Llama part exactly as CudaModel holds one, plus one cross-attention
/// per layer (none for the vanilla drafter).
struct DeviceGlideWeights {
    DeviceWeights llama;                      // N_D layers
    std::vector<DeviceCrossAttention> cross;  // (N_D), or empty when glide_cross_attention is false
};

namespace detail {

/// Stacks float32 matrices by rows and rounds them to bf16 on the host, then uploads.
inline DeviceBuffer<__nv_bfloat16> upload_bf16(std::initializer_list<const std::vector<float>*> parts) {
    static_assert(sizeof(bf16) == sizeof(__nv_bfloat16), "specdec::bf16 and __nv_bfloat16 are both 16-bit words");
    std::vector<bf16> host;
    for (const std::vector<float>* p : parts)
        for (float v : *p) host.push_back(to_bf16(v));
    DeviceBuffer<__nv_bfloat16> d(host.size());
    if (!host.empty()) {
        SPECDEC_CUDA_CHECK(cudaMemcpy(d.get(), host.data(), d.bytes(), cudaMemcpyHostToDevice));
        SPECDEC_CUDA_CHECK(cudaDeviceSynchronize());  // the DMA lands before a kernel on a non-blocking stream reads it (to_device)
    }
    return d;
}

/// p (count) = std_dev · N(0, 1) in bf16, Box-Muller over Philox keyed by (seed, tensor, index).
static __global__ void fill_normal_bf16(__nv_bfloat16* p, std::size_t count, std::uint64_t seed, std::uint32_t tensor,
                                 float std_dev) {
    const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const PhiloxWords r = philox4x32_10({{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i >> 32), tensor, 0u}},
                                        static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
    const float u1 = static_cast<float>(r.w[0] >> 8) * 0x1p-24f, u2 = static_cast<float>(r.w[1] >> 8) * 0x1p-24f;
    p[i] = __float2bfloat16(std_dev * sqrtf(-2.0f * logf(1.0f - u1)) * cospif(2.0f * u2));
}

inline DeviceBuffer<__nv_bfloat16> random_bf16(std::size_t count, std::uint64_t seed, std::uint32_t tensor,
                                               float std_dev) {
    DeviceBuffer<__nv_bfloat16> d(count);
    fill_normal_bf16<<<static_cast<unsigned>((count + 255) / 256), 256>>>(d.get(), count, seed, tensor, std_dev);
    SPECDEC_CUDA_CHECK(cudaGetLastError());
    return d;
}

inline DeviceBuffer<float> ones(std::size_t count) {
    const std::vector<float> host(count, 1.0f);
    return to_device<float>(host);
}

/// The Llama sub-layers of one layer; LayerWeights and GlideLayer<float> name their tensors alike.
template <class Layer>
DeviceLayer upload_layer(const Layer& l) {
    DeviceLayer dl;
    dl.attn_norm = to_device<float>(l.attn_norm);
    dl.wqkv = upload_bf16({&l.wq, &l.wk, &l.wv});
    dl.wo = upload_bf16({&l.wo});
    dl.mlp_norm = to_device<float>(l.mlp_norm);
    dl.w_gate_up = upload_bf16({&l.w_gate, &l.w_up});
    dl.w_down = upload_bf16({&l.w_down});
    return dl;
}

}  // namespace detail

/// The float32 host weights of a checkpoint, on the device (validated against `c` first).
namespace detail {

/// t (m, k) = the rows of a deferred matrix, over every hardware thread (MatrixRows::row may be called
/// from several at once); the first error a row throws is rethrown.
inline void fill_from_rows(std::vector<float>& t, const MatrixRows& rows) {
    t.resize(static_cast<std::size_t>(rows.m) * rows.k);
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> workers;
    std::exception_ptr failure;
    std::mutex failure_mutex;
    for (int w = 0; w < threads; ++w)
        workers.emplace_back([&, w] {
            try {
                for (int j = w; j < rows.m; j += threads) {
                    const RowRef r = rows.row(j);
                    float* out = t.data() + static_cast<std::size_t>(j) * rows.k;
                    for (int p = 0; p < rows.k; ++p) out[p] = r.bf != nullptr ? to_float(r.bf[p]) : r.f32[p];
                }
            } catch (...) {
                const std::lock_guard<std::mutex> lock(failure_mutex);
                if (!failure) failure = std::current_exception();
            }
        });
    for (std::thread& t : workers) t.join();
    if (failure) std::rethrow_exception(failure);
}

/// Layer l with its deferred matrices (a widened model's, a deferred loader's) read into memory.
inline LayerWeights resolved_layer(const Weights& w, int l) {
    LayerWeights x = w.layers[static_cast<std::size_t>(l)];
    if (!w.deferred) return x;
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::pair<const char*, std::vector<float>*> matrices[] = {
        {"self_attn.q_proj.weight", &x.wq}, {"self_attn.k_proj.weight", &x.wk}, {"self_attn.v_proj.weight", &x.wv},
        {"self_attn.o_proj.weight", &x.wo}, {"mlp.gate_proj.weight", &x.w_gate}, {"mlp.up_proj.weight", &x.w_up},
        {"mlp.down_proj.weight", &x.w_down}};
    for (const auto& [name, t] : matrices)
        if (t->empty())
            if (const MatrixRows* rows = w.deferred->find(p + name)) fill_from_rows(*t, *rows);
    return x;
}

}  // namespace detail

/// The model on the device. Deferred matrices (Weights::deferred: a widened model's generated rows, a
/// deferred loader's mapped file) are read one layer at a time, so a 7B-shaped model never exists as a
/// float32 copy in host memory (one layer's, about 0.8 GB, at a time).
inline DeviceWeights upload_weights(const Config& c, const Weights& w) {
    c.validate();
    detail::require_llama_block(c, "cuda.model", "CudaModel");  // before any upload
    validate(w, c, /*allow_deferred=*/true);
    DeviceWeights d;
    d.embed = detail::upload_bf16({&w.embed});
    for (int l = 0; l < c.num_hidden_layers; ++l) d.layers.push_back(detail::upload_layer(detail::resolved_layer(w, l)));
    d.norm = to_device<float>(w.norm);
    if (!c.tie_word_embeddings) {
        std::vector<float> head = w.lm_head;
        if (head.empty() && w.deferred)
            if (const MatrixRows* rows = w.deferred->find("lm_head.weight")) detail::fill_from_rows(head, *rows);
        d.lm_head = detail::upload_bf16({&head});
    }
    return d;
}

/// The float32 host weights of a GLIDE drafter (load_glide_checkpoint's), on the device, validated
/// against `c` first. Rounded to bf16 like upload_weights; the cross-attention norms stay fp32.
inline DeviceGlideWeights upload_glide_weights(const GlideConfig& c, const GlideWeights& w) {
    c.validate();
    validate(w, c);
    DeviceGlideWeights d;
    d.llama.embed = detail::upload_bf16({&w.embed});
    for (const GlideLayer<float>& l : w.layers) {
        d.llama.layers.push_back(detail::upload_layer(l));
        if (c.glide_cross_attention)
            d.cross.push_back({to_device<float>(l.cross_norm), detail::upload_bf16({&l.cross_wq}),
                               detail::upload_bf16({&l.cross_wo})});
    }
    d.llama.norm = to_device<float>(w.norm);
    if (!c.draft.tie_word_embeddings) d.llama.lm_head = detail::upload_bf16({&w.lm_head});
    return d;
}

/// Random N(0, std_dev) bf16 matrices and unit norms drawn on the device: for benchmarks of shapes
/// whose float32 host copy would not fit or would take minutes to draw (7B). Not the numbers
/// random_weights draws on the host.
inline DeviceWeights random_device_weights(const Config& c, std::uint64_t seed, float std_dev = 0.02f) {
    c.validate();
    detail::require_llama_block(c, "cuda.model", "CudaModel");
    const std::size_t D = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
    const std::size_t q = static_cast<std::size_t>(c.num_attention_heads) * c.head_dim(), kv = c.kv_dim();
    std::uint32_t tensor = 0;
    DeviceWeights d;
    d.embed = detail::random_bf16(V * D, seed, tensor++, std_dev);
    for (int i = 0; i < c.num_hidden_layers; ++i) {
        DeviceLayer dl;
        dl.attn_norm = detail::ones(D);
        dl.wqkv = detail::random_bf16((q + 2 * kv) * D, seed, tensor++, std_dev);
        dl.wo = detail::random_bf16(D * q, seed, tensor++, std_dev);
        dl.mlp_norm = detail::ones(D);
        dl.w_gate_up = detail::random_bf16(2 * F * D, seed, tensor++, std_dev);
        dl.w_down = detail::random_bf16(D * F, seed, tensor++, std_dev);
        d.layers.push_back(std::move(dl));
    }
    d.norm = detail::ones(D);
    if (!c.tie_word_embeddings) d.lm_head = detail::random_bf16(V * D, seed, tensor++, std_dev);
    SPECDEC_CUDA_CHECK(cudaDeviceSynchronize());
    return d;
}

}  // namespace specdec
