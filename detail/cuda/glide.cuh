// specdec/detail/cuda/glide.cuh — GLIDE's drafter on the GPU, reading a CudaModel target's KV cache in place.
// SPDX-License-Identifier: MIT
#pragma once

// GlideModel's semantics (detail/methods/glide_cape/glide.hpp, glide-cape.txt §4.1) with CudaModel's numerics. Drafter
// layer m is three pre-norm residual sub-layers over the tree's nodes:
//   x += SelfAttention(RMSNorm(x))    CudaModel's kernels over the drafter's own bf16 KV cache
//   x += CrossAttention(RMSNorm(x))   one query head per target head, RoPE with the target's head_dim and
//                                     base at the query's position, over target layer N_T - N_D + m read
//                                     through CudaModel::device_kv (bf16, RoPE applied to k)
//   x += SwiGLU(RMSNorm(x))
// The KV delay (§4.1): the node at position j sees target rows [0, min(j, target.cache_len())), none of
// the target's pending tree rows; a node that sees no row gets a zero cross-attention output. Those row
// limits are computed on the host with the positions and uploaded with them; the chunked attention
// kernels of the self-attention run the cross-attention too (kernels::PrefixAttention).

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../../kernels.cuh"
#include "../core/concepts.hpp"
#include "../model/config.hpp"
#include "context.cuh"
#include "gemm.cuh"
#include "model.cuh"
#include "weights.cuh"
#include "../core/error.hpp"
#include "../methods/glide_cape/glide.hpp"
#include "../policies/proposers.hpp"
#include "../core/tree.hpp"
#include "../core/tree_mask.hpp"
#include "../core/views.hpp"

namespace specdec {

struct CudaGlideOptions {
    int max_tree_nodes = 256;  // N per forward at most (KV scratch rows, staging, mask width)
    int max_context = 0;       // positions the KV cache holds, allocated up front; 0 = max_position_embeddings
};

/// A GLIDE drafter next to its CudaModel target, with GlideModel's interface and semantics (tree
/// forward, commit, truncate), so ModelProposer drives it unchanged. Numerics as CudaModel: bf16
/// weights, KV cache and GEMM inputs; fp32 residual stream, accumulation and logits. KV cache per layer
/// (C, Hkv*hd), C = context_size() + max_tree_nodes (allocated up front); rows [0, T) committed, T + i tree
/// node i.
///
/// The target is read, never written, and must outlive the drafter and share its CudaContext: the one
/// stream orders the target's commits before the drafter's reads of its cache. forward() returns host
/// logits like CudaModel::forward (a copy of n·V floats and a synchronisation). No CUDA graphs yet.
class CudaGlideModel {
public:
    CudaGlideModel(GlideConfig config, const GlideWeights& weights, const CudaModel& target, CudaContext& ctx,
                   CudaGlideOptions options = {})
        : CudaGlideModel(config, upload_glide_weights(config, weights), target, ctx, options) {}

    CudaGlideModel(GlideConfig config, DeviceGlideWeights weights, const CudaModel& target, CudaContext& ctx,
                   CudaGlideOptions options = {})
        : cfg_(std::move(config)), w_(std::move(weights)), target_(&target), ctx_(&ctx), opt_(options), gemm_(ctx) {
        cfg_.validate();
        context_ = detail::capped_context(cfg_.draft.max_position_embeddings, opt_.max_context, "cuda.glide");
        const int layers = cfg_.draft.num_hidden_layers;
        detail::require(static_cast<int>(w_.llama.layers.size()) == layers &&
                            static_cast<int>(w_.cross.size()) == (cfg_.glide_cross_attention ? layers : 0),
                        "cuda.glide", [&] {
                            return "config has " + std::to_string(layers) + " layers (cross-attention " +
                                   (cfg_.glide_cross_attention ? "on" : "off") + "), the device weights " +
                                   std::to_string(w_.llama.layers.size()) + " layers and " +
                                   std::to_string(w_.cross.size()) + " cross-attentions";
                        });
        check_target();
        detail::require(opt_.max_tree_nodes > 0, "cuda.glide", [&] {
            return "max_tree_nodes must be > 0, got " + std::to_string(opt_.max_tree_nodes);
        });
        detail::require(cfg_.draft.head_dim() <= kernels::kAttnMaxHeadDim, "cuda.glide", [&] {
            return "head_dim " + std::to_string(cfg_.draft.head_dim()) + " exceeds the " +
                   std::to_string(kernels::kAttnMaxHeadDim) + " the attention kernel supports";
        });
        allocate();
    }

    /// The drafter keeps a pointer to the target: a temporary would dangle.
    CudaGlideModel(GlideConfig, const GlideWeights&, const CudaModel&&, CudaContext&, CudaGlideOptions = {}) = delete;
    CudaGlideModel(GlideConfig, DeviceGlideWeights, const CudaModel&&, CudaContext&, CudaGlideOptions = {}) = delete;

    CudaGlideModel(CudaGlideModel&&) = default;
    CudaGlideModel& operator=(CudaGlideModel&&) = default;

    const GlideConfig& config() const { return cfg_; }
    const DeviceGlideWeights& device_weights() const { return w_; }
    CudaContext& context() const { return *ctx_; }
    int vocab_size() const { return cfg_.draft.vocab_size; }
    int cache_len() const { return cache_len_; }
    int context_size() const { return context_; }

    /// Logits (N - first, V) for tree nodes first..N-1, as GlideModel::forward; the cross-attention of
    /// a node at position j reads target rows [0, min(j, target.cache_len())). The view points into
    /// pinned host memory and lives until the next forward.
    Rows forward(const Tree& tree, int first = 0) {
        const int N = tree.size(), n = N - first, V = cfg_.draft.vocab_size;
        detail::require(first >= 0 && first <= n_computed_ && first <= N, "cuda.glide", [&] {
            return "forward from node " + std::to_string(first) + ", but only " + std::to_string(n_computed_) +
                   " nodes of this tree were computed before (pass 0 for a new tree)";
        });
        tree.validate(V);
        detail::require(N <= opt_.max_tree_nodes && cache_len_ + N <= capacity_, "cuda.glide", [&] {
            return "tree of " + std::to_string(N) + " nodes does not fit: max_tree_nodes is " +
                   std::to_string(opt_.max_tree_nodes) + ", the cache holds " + std::to_string(cache_len_) +
                   " tokens of capacity " + std::to_string(capacity_) + " (hint: raise CudaGlideOptions::max_tree_nodes)";
        });
        n_computed_ = N;
        if (n == 0) return Rows{{}, V};
        const int cross_rows = stage_inputs(tree, first);
        enqueue_forward(n, N, cross_rows);
        ctx_->synchronize();
        return Rows{std::span<const float>(logits_host_.get(), static_cast<std::size_t>(n) * V), V};
    }

    /// Keeps the KV rows of `path` (root first, each the parent of the next) as the next committed
    /// tokens, on the device; drops every other tree row. Enqueued only, as CudaModel::commit.
    void commit(std::span<const int> path) {
        const int P = static_cast<int>(path.size());
        validate_commit(path, n_computed_, cache_len_, context_, "cuda.glide");
        const std::size_t layer_stride = static_cast<std::size_t>(capacity_) * cfg_.draft.kv_dim();
        for (int at = 0; at < P; at += kernels::kCommitChunk) {
            kernels::PathChunk chunk;
            chunk.first_entry = at;
            chunk.count = std::min(kernels::kCommitChunk, P - at);
            std::copy_n(path.begin() + at, chunk.count, chunk.node);
            kernels::launch_gather_kv_rows(ctx_->stream(), k_cache_.get(), v_cache_.get(), layer_stride,
                                           cfg_.draft.num_hidden_layers, cfg_.draft.kv_dim(), cache_len_, chunk);
        }
        cache_len_ += P;
        n_computed_ = 0;
    }

    /// Forgets committed tokens beyond the first n.
    void truncate(int n) {
        detail::require(n >= 0 && n <= cache_len_, "cuda.glide", [&] {
            return "truncate to " + std::to_string(n) + " tokens, but the cache holds " + std::to_string(cache_len_);
        });
        cache_len_ = n;
        n_computed_ = 0;
    }
    void reset() { truncate(0); }

private:
    /// GlideModel::check_target's rules, against the target's Config, plus the shared context.
    void check_target() const {
        detail::require(&target_->context() == ctx_, "cuda.glide", [] {
            return std::string("the drafter and its target run on different CudaContexts; pass the target's: its "
                               "stream orders the target's commits before the drafter reads its KV cache");
        });
        const Config& tc = target_->config();
        const auto mismatch = [](const char* field, long ours, const char* target_field, long theirs) {
            detail::require(ours == theirs, "cuda.glide", [&] {
                return std::string(field) + " is " + std::to_string(ours) + ", but the target has " + target_field +
                       " " + std::to_string(theirs);
            });
        };
        mismatch("vocab_size", cfg_.draft.vocab_size, "vocab_size", tc.vocab_size);
        if (!cfg_.glide_cross_attention) return;
        mismatch("glide_target_layers", cfg_.glide_target_layers, "num_hidden_layers", tc.num_hidden_layers);
        mismatch("glide_target_kv_heads", cfg_.glide_target_kv_heads, "num_key_value_heads", tc.num_key_value_heads);
        mismatch("glide_cross_head_dim", cfg_.glide_cross_head_dim, "head_dim", tc.head_dim());
        mismatch("glide_cross_heads", cfg_.glide_cross_heads, "num_attention_heads", tc.num_attention_heads);
        detail::require(tc.rope_theta == cfg_.glide_target_rope_theta, "cuda.glide", [&] {
            return "glide_target_rope_theta is " + std::to_string(cfg_.glide_target_rope_theta) +
                   ", but the target has rope_theta " + std::to_string(tc.rope_theta);
        });
        // The cross queries turn by the scaling the drafter was trained with (GlideModel's check).
        detail::require(detail::same_rope_scaling(tc.rope_scaling, cfg_.glide_target_rope_scaling), "cuda.glide", [&] {
            return "glide_target_rope_scaling is " + detail::rope_scaling_string(cfg_.glide_target_rope_scaling) +
                   ", but the target has rope_scaling " + detail::rope_scaling_string(tc.rope_scaling);
        });
    }

    void allocate() {
        const Config& c = cfg_.draft;
        const int Nmax = opt_.max_tree_nodes, D = c.hidden_size, H = c.num_attention_heads, hd = c.head_dim();
        const int kvd = c.kv_dim(), F = c.intermediate_size, V = c.vocab_size;
        const int Hc = cfg_.glide_cross_heads, hdc = cfg_.glide_cross_head_dim;
        const std::size_t rows = static_cast<std::size_t>(Nmax);
        // Chunks as CudaModel's. The cross-attention's keys are the target's committed rows, at most
        // its context_size().
        const auto chunk_keys = kernels::attention_split_keys;
        capacity_ = static_cast<int>(detail::kv_rows(context_, Nmax, "cuda.glide"));
        detail::require_kv_fits(c.num_hidden_layers, capacity_, kvd, "cuda.glide");
        split_keys_ = chunk_keys(capacity_);
        max_splits_ = (capacity_ + split_keys_ - 1) / split_keys_;
        const int target_rows = target_->context_size();
        cross_split_keys_ = chunk_keys(target_rows);
        cross_max_splits_ = (target_rows + cross_split_keys_ - 1) / cross_split_keys_;
        mask_words_ = detail::mask_words(Nmax);

        const std::size_t cache = static_cast<std::size_t>(c.num_hidden_layers) * capacity_ * kvd;
        k_cache_ = DeviceBuffer<__nv_bfloat16>(cache);
        v_cache_ = DeviceBuffer<__nv_bfloat16>(cache);
        x_ = DeviceBuffer<float>(rows * D);
        xb_ = DeviceBuffer<__nv_bfloat16>(rows * D);
        qkv_ = DeviceBuffer<float>(rows * (H * hd + 2 * kvd));
        att_ = DeviceBuffer<__nv_bfloat16>(rows * H * hd);
        gate_up_ = DeviceBuffer<float>(rows * 2 * F);
        act_ = DeviceBuffer<__nv_bfloat16>(rows * F);
        logits_ = DeviceBuffer<float>(rows * V);
        logits_host_ = PinnedBuffer<float>(rows * V);
        // One set of partial buffers serves both attentions: they run one after the other on the stream.
        std::size_t heads_splits = static_cast<std::size_t>(H) * max_splits_, acc = heads_splits * hd;
        if (cfg_.glide_cross_attention) {
            heads_splits = std::max(heads_splits, static_cast<std::size_t>(Hc) * cross_max_splits_);
            acc = std::max(acc, static_cast<std::size_t>(Hc) * cross_max_splits_ * hdc);
        }
        part_acc_ = DeviceBuffer<float>(rows * acc);
        part_ml_ = DeviceBuffer<float>(rows * heads_splits * 2);
        rope_cs_ = DeviceBuffer<float>(rows * hd);
        inv_freq_ = to_device<double>(rope_inverse_frequencies(c));
        if (cfg_.glide_cross_attention) {
            cross_q_ = DeviceBuffer<float>(rows * Hc * hdc);
            cross_att_ = DeviceBuffer<__nv_bfloat16>(rows * Hc * hdc);
            cross_cs_ = DeviceBuffer<float>(rows * hdc);
            // The cross queries rotate like the target's keys: its head_dim, RoPE base and scaling
            // (YaRN's attention factor on cos and sin included).
            cross_inv_freq_ = to_device<double>(rope_inverse_frequencies(cfg_.cross_rope()));
        }
        const std::size_t inputs = kHeadInts + 3 * rows + rows * mask_words_;
        inputs_ = DeviceBuffer<std::int32_t>(inputs);
        staging_ = PinnedBuffer<std::int32_t>(inputs);
    }

    // One upload per forward: StepParams | cross_rows | tokens (Nmax) | positions (Nmax) |
    // visible target rows (Nmax) | masks (Nmax, W).
    static constexpr int kStepInts = static_cast<int>(sizeof(kernels::StepParams) / sizeof(std::int32_t));
    static constexpr int kHeadInts = kStepInts + 1;
    static_assert(sizeof(kernels::StepParams) % sizeof(std::int32_t) == 0);
    int* cross_rows_at(std::int32_t* base) const { return base + kStepInts; }
    int* tokens_at(std::int32_t* base) const { return base + kHeadInts; }
    int* positions_at(std::int32_t* base) const { return base + kHeadInts + opt_.max_tree_nodes; }
    int* visible_at(std::int32_t* base) const { return base + kHeadInts + 2 * opt_.max_tree_nodes; }
    std::uint32_t* masks_at(std::int32_t* base) const {
        return reinterpret_cast<std::uint32_t*>(base + kHeadInts + 3 * opt_.max_tree_nodes);
    }
    const kernels::StepParams* params() const { return reinterpret_cast<const kernels::StepParams*>(inputs_.get()); }

    /// Fills the staging buffer; returns the cross-attention's key count (the most target rows any node sees).
    int stage_inputs(const Tree& tree, int first) {
        const int N = tree.size(), n = N - first;
        const int target_len = cfg_.glide_cross_attention ? target_->cache_len() : 0;
        std::int32_t* s = staging_.get();
        *reinterpret_cast<kernels::StepParams*>(s) = {cache_len_, N, first};
        int cross_rows = 0;
        for (int i = 0; i < n; ++i) {
            const int position = cache_len_ + tree[first + i].depth;
            tokens_at(s)[i] = tree[first + i].token;
            positions_at(s)[i] = position;
            visible_at(s)[i] = std::min(position, target_len);  // GLIDE's KV delay, §4.1
            cross_rows = std::max(cross_rows, visible_at(s)[i]);
        }
        *cross_rows_at(s) = cross_rows;
        detail::ancestor_masks(tree, first, mask_words_,
                               std::span<std::uint32_t>(masks_at(s), static_cast<std::size_t>(n) * mask_words_));
        return cross_rows;
    }

    /// The whole forward for n new nodes of an N-node tree, enqueued on the stream.
    void enqueue_forward(int n, int N, int cross_rows) {
        cudaStream_t s = ctx_->stream();
        const Config& c = cfg_.draft;
        const int D = c.hidden_size, V = c.vocab_size;
        SPECDEC_CUDA_CHECK(cudaMemcpyAsync(inputs_.get(), staging_.get(), inputs_.bytes(), cudaMemcpyHostToDevice, s));
        kernels::launch_embed_rows(s, x_.get(), w_.llama.embed.get(), tokens_at(inputs_.get()), n, D);
        kernels::launch_rope_table(s, rope_cs_.get(), positions_at(inputs_.get()), inv_freq_.get(), n, c.head_dim(),
                                   rope_attention_factor(c));
        if (cfg_.glide_cross_attention)
            kernels::launch_rope_table(s, cross_cs_.get(), positions_at(inputs_.get()), cross_inv_freq_.get(), n,
                                       cfg_.glide_cross_head_dim, rope_attention_factor(cfg_.cross_rope()));
        const int self_splits = (cache_len_ + N + split_keys_ - 1) / split_keys_;
        const int cross_splits = std::max(1, (cross_rows + cross_split_keys_ - 1) / cross_split_keys_);
        for (int m = 0; m < c.num_hidden_layers; ++m) {
            self_attention(m, n, self_splits);
            if (cfg_.glide_cross_attention) cross_attention(m, n, cross_splits);  // GLIDE §4.1: before the FFN
            feed_forward(m, n);
        }
        kernels::launch_rmsnorm(s, xb_.get(), x_.get(), w_.llama.norm.get(), n, D, c.rms_norm_eps);
        gemm_(logits_.get(), xb_.get(), w_.llama.output_matrix(), n, D, V);
        SPECDEC_CUDA_CHECK(cudaMemcpyAsync(logits_host_.get(), logits_.get(), static_cast<std::size_t>(n) * V * sizeof(float),
                                           cudaMemcpyDeviceToHost, s));
    }

    // ---- the three sub-layers of drafter layer m, each x += f(RMSNorm(x)) over the n nodes ----------

    /// CudaModel's self-attention: q, k, v in one product, k and v stored into cache rows T + first + i.
    void self_attention(int m, int n, int splits) {
        cudaStream_t s = ctx_->stream();
        const Config& c = cfg_.draft;
        const int D = c.hidden_size, H = c.num_attention_heads, Hkv = c.num_key_value_heads, hd = c.head_dim();
        const int kvd = c.kv_dim();
        const DeviceLayer& lw = w_.llama.layers[m];
        __nv_bfloat16* kc = k_cache_.get() + static_cast<std::size_t>(m) * capacity_ * kvd;
        __nv_bfloat16* vc = v_cache_.get() + static_cast<std::size_t>(m) * capacity_ * kvd;
        kernels::launch_rmsnorm(s, xb_.get(), x_.get(), lw.attn_norm.get(), n, D, c.rms_norm_eps);
        gemm_(qkv_.get(), xb_.get(), lw.wqkv.get(), n, D, H * hd + 2 * kvd);
        kernels::launch_rope_store_kv(s, qkv_.get(), kc, vc, rope_cs_.get(), params(), n, H, Hkv, hd);
        const kernels::TreeAttention att{.out = att_.get(), .part_acc = part_acc_.get(), .part_ml = part_ml_.get(),
                                         .qkv = qkv_.get(), .k_cache = kc, .v_cache = vc,
                                         .mask = masks_at(inputs_.get()), .params = params(), .n = n, .H = H,
                                         .Hkv = Hkv, .hd = hd, .mask_words = mask_words_, .split_keys = split_keys_,
                                         .max_splits = max_splits_};
        kernels::launch_tree_attention(s, att, splits);
        gemm_(x_.get(), att_.get(), lw.wo.get(), n, H * hd, D, GemmMode::kAccumulate);
    }

    /// GLIDE's cross-attention (§4.1) over target layer N_T - N_D + m, read in place.
    void cross_attention(int m, int n, int splits) {
        cudaStream_t s = ctx_->stream();
        const Config& c = cfg_.draft;
        const int D = c.hidden_size, Hc = cfg_.glide_cross_heads, hdc = cfg_.glide_cross_head_dim, cq = cfg_.cross_dim();
        const DeviceCrossAttention& cw = w_.cross[m];
        const DeviceKv kv = target_->device_kv(cfg_.target_layer(m));
        kernels::launch_rmsnorm(s, xb_.get(), x_.get(), cw.norm.get(), n, D, c.rms_norm_eps);
        gemm_(cross_q_.get(), xb_.get(), cw.wq.get(), n, D, cq);
        // No k or v of its own (Hkv = 0): the queries rotate at their positions like the target's keys.
        kernels::launch_rope_store_kv(s, cross_q_.get(), nullptr, nullptr, cross_cs_.get(), params(), n, Hc, 0, hdc);
        const kernels::PrefixAttention att{.out = cross_att_.get(), .part_acc = part_acc_.get(),
                                           .part_ml = part_ml_.get(), .q = cross_q_.get(), .k_cache = kv.k,
                                           .v_cache = kv.v, .visible_rows = visible_at(inputs_.get()),
                                           .key_count = cross_rows_at(inputs_.get()), .n = n, .H = Hc,
                                           .Hkv = kv.n_kv_heads, .hd = hdc, .split_keys = cross_split_keys_,
                                           .max_splits = cross_max_splits_};
        kernels::launch_prefix_attention(s, att, splits);
        gemm_(x_.get(), cross_att_.get(), cw.wo.get(), n, cq, D, GemmMode::kAccumulate);
    }

    /// SwiGLU over the fused (2F, D) gate|up matrix.
    void feed_forward(int m, int n) {
        cudaStream_t s = ctx_->stream();
        const Config& c = cfg_.draft;
        const int D = c.hidden_size, F = c.intermediate_size;
        const DeviceLayer& lw = w_.llama.layers[m];
        kernels::launch_rmsnorm(s, xb_.get(), x_.get(), lw.mlp_norm.get(), n, D, c.rms_norm_eps);
        gemm_(gate_up_.get(), xb_.get(), lw.w_gate_up.get(), n, D, 2 * F);
        kernels::launch_swiglu(s, act_.get(), gate_up_.get(), n, F);
        gemm_(x_.get(), act_.get(), lw.w_down.get(), n, F, D, GemmMode::kAccumulate);
    }

    GlideConfig cfg_;
    DeviceGlideWeights w_;
    const CudaModel* target_;
    CudaContext* ctx_;
    CudaGlideOptions opt_;
    Gemm gemm_;
    int context_ = 0;     // positions held: max_position_embeddings, or max_context
    int capacity_ = 0;    // C
    int cache_len_ = 0;   // T
    int n_computed_ = 0;  // nodes of the current tree whose KV rows sit after the committed ones
    int split_keys_ = 0, max_splits_ = 0, mask_words_ = 0;
    int cross_split_keys_ = 0, cross_max_splits_ = 0;

    DeviceBuffer<__nv_bfloat16> k_cache_, v_cache_;  // (N_D, C, Hkv*hd)
    DeviceBuffer<float> x_;                          // (Nmax, D) residual stream
    DeviceBuffer<__nv_bfloat16> xb_;                 // (Nmax, D) normed, a GEMM input
    DeviceBuffer<float> qkv_;                        // (Nmax, H*hd + 2*Hkv*hd)
    DeviceBuffer<__nv_bfloat16> att_;                // (Nmax, H*hd)
    DeviceBuffer<float> cross_q_;                    // (Nmax, h*d_k) cross queries, rotated in place
    DeviceBuffer<__nv_bfloat16> cross_att_;          // (Nmax, h*d_k)
    DeviceBuffer<float> gate_up_;                    // (Nmax, 2F)
    DeviceBuffer<__nv_bfloat16> act_;                // (Nmax, F)
    DeviceBuffer<float> logits_;                     // (Nmax, V)
    PinnedBuffer<float> logits_host_;                // (Nmax, V) what forward() returns
    DeviceBuffer<float> part_acc_;                   // (Nmax * heads, splits, head_dim) either attention's chunks
    DeviceBuffer<float> part_ml_;                    // (Nmax * heads, splits, 2)
    DeviceBuffer<float> rope_cs_;                    // (Nmax, hd/2, 2) the drafter's cos, sin per node
    DeviceBuffer<float> cross_cs_;                   // (Nmax, d_k/2, 2) the target's
    DeviceBuffer<double> inv_freq_;                  // (hd/2)
    DeviceBuffer<double> cross_inv_freq_;            // (d_k/2)
    DeviceBuffer<std::int32_t> inputs_;              // see stage_inputs
    PinnedBuffer<std::int32_t> staging_;             // the same layout on the host
};

static_assert(LanguageModel<CudaGlideModel>);
static_assert(Proposer<ModelProposer<CudaGlideModel>>);

}  // namespace specdec
