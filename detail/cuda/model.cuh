// specdec/detail/cuda/model.cuh — the CUDA Llama: bf16 weights and KV cache, one forward verifies a token tree.
// SPDX-License-Identifier: MIT
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../kernels.cuh"
#include "../core/concepts.hpp"
#include "../model/config.hpp"
#include "../model/kv_cache.hpp"
#include "context.cuh"
#include "gemm.cuh"
#include "weights.cuh"
#include "../core/error.hpp"
#include "../core/tree.hpp"
#include "../core/tree_mask.hpp"
#include "../core/views.hpp"
#include "../model/weights.hpp"

namespace specdec {

/// Whether forward() replays CUDA graphs. One graph per tree size n is captured the first time that
/// size runs (after an eager run that also builds the GEMM plans) and replayed afterwards: it removes
/// the ~10 launches per layer of host overhead, which matters for small models at N = 1. Whether it
/// pays on a given GPU is measured by examples/bench/bench_cuda.cu, so it is off by default.
enum class CudaGraphs { kOff, kOn };

struct CudaModelOptions {
    int max_tree_nodes = 256;              // N per forward at most (KV scratch rows, staging, mask width)
    int max_context = 0;                   // positions the KV cache holds, allocated up front (graphs capture
                                           // its address); 0 = the checkpoint's max_position_embeddings.
                                           // Real checkpoints declare 131072: cap it at what generations need
    CudaGraphs graphs = CudaGraphs::kOff;  // replay captured graphs per tree size
    GemmOptions gemm{};                    // how the matrix products run (cuda/gemm.cuh)
};

namespace detail {

/// The positions a CUDA model holds: its config's, or fewer where the options cap them (a CUDA model
/// allocates its KV cache once, unlike CpuModel's, which grows).
inline int capped_context(int declared, int max_context, std::string_view who) {
    require(max_context >= 0, who, [&] { return "max_context must be >= 0 (0: the config's), got " + std::to_string(max_context); });
    return max_context == 0 ? declared : std::min(declared, max_context);
}

/// Checks that a KV cache of `rows` rows per layer (2 x layers x rows x kvd bf16 values) fits the GPU's
/// free memory before allocating it, naming the bytes.
inline void require_kv_fits(int layers, std::int64_t rows, int kvd, std::string_view who) {
    const std::int64_t bytes = mul_sat(mul_sat(2 * std::int64_t{layers}, rows), mul_sat(kvd, 2));
    std::size_t free = 0, total = 0;
    SPECDEC_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    require(bytes <= static_cast<std::int64_t>(free), who, [&] {
        return "the KV cache for " + std::to_string(rows) + " positions needs " + std::to_string(bytes) +
               " bytes (keys and values: " + std::to_string(layers) + " layers x " + std::to_string(rows) + " rows x " +
               std::to_string(kvd) + " bf16 values), the GPU has " + std::to_string(free) +
               " free; hint: set max_context in the options to the positions a generation needs";
    });
}

}  // namespace detail

/// Read access to one layer's committed keys and values on the device, for drafters that run there
/// (GLIDE's cross-attention). Rows 0..len-1 of (C, Hkv*hd) bf16, RoPE applied to k.
struct DeviceKv {
    const __nv_bfloat16* k = nullptr;  // (len, Hkv*hd), row stride Hkv*hd
    const __nv_bfloat16* v = nullptr;  // (len, Hkv*hd)
    int len = 0;
    int n_kv_heads = 0;
    int head_dim = 0;
};

/// The Llama forward on one GPU, with CpuModel's interface and semantics (RMSNorm, rotate-half RoPE at
/// position cache_len + depth, GQA tree attention over the committed cache plus each node's ancestors
/// and itself, SwiGLU). Numerics: bf16 weights, KV cache and GEMM inputs; fp32 residual stream,
/// accumulation and logits. KV cache per layer (C, Hkv*hd) with C = context_size() (max_position_embeddings,
/// or CudaModelOptions::max_context) + max_tree_nodes, allocated up front; rows [0, T) committed, rows
/// T + i hold tree node i of the current tree.
///
/// forward() returns host logits: it copies (n, V) floats back and waits for the GPU, because the
/// acceptors run on the host. Device-side acceptance (kernels.cuh has argmax, processed
/// probabilities and sampling with the host's Philox) is future work; until then the copy costs
/// n·V·4 bytes per forward (128 KB at N = 1, V = 32000).
class CudaModel {
public:
    CudaModel(Config config, const Weights& weights, CudaContext& ctx, CudaModelOptions options = {})
        : CudaModel(config, upload_weights(config, weights), ctx, options) {}

    CudaModel(Config config, DeviceWeights weights, CudaContext& ctx, CudaModelOptions options = {})
        : cfg_(config), w_(std::move(weights)), ctx_(&ctx), opt_(options), gemm_(ctx, options.gemm) {
        cfg_.validate();
        detail::require_llama_block(cfg_, "cuda.model", "CudaModel");
        context_ = detail::capped_context(cfg_.max_position_embeddings, opt_.max_context, "cuda.model");
        detail::require(static_cast<int>(w_.layers.size()) == cfg_.num_hidden_layers, "cuda.model", [&] {
            return "config has " + std::to_string(cfg_.num_hidden_layers) + " layers, the device weights " +
                   std::to_string(w_.layers.size());
        });
        detail::require(opt_.max_tree_nodes > 0, "cuda.model", [&] {
            return "max_tree_nodes must be > 0, got " + std::to_string(opt_.max_tree_nodes);
        });
        detail::require(cfg_.head_dim() <= kernels::kAttnMaxHeadDim, "cuda.model", [&] {
            return "head_dim " + std::to_string(cfg_.head_dim()) + " exceeds the " +
                   std::to_string(kernels::kAttnMaxHeadDim) + " the attention kernel supports";
        });
        allocate();
    }

    CudaModel(CudaModel&&) = default;
    CudaModel& operator=(CudaModel&&) = default;

    const Config& config() const { return cfg_; }
    const DeviceWeights& device_weights() const { return w_; }
    CudaContext& context() const { return *ctx_; }
    int vocab_size() const { return cfg_.vocab_size; }
    int cache_len() const { return cache_len_; }
    int context_size() const { return context_; }
    /// The most nodes one forward takes (CudaModelOptions::max_tree_nodes).
    int max_tree_nodes() const { return opt_.max_tree_nodes; }

    /// Logits (N - first, V) for tree nodes first..N-1, as CpuModel::forward. The view points into
    /// pinned host memory and lives until the next forward.
    Rows forward(const Tree& tree, int first = 0) { return run_forward(tree, first, Inputs::kTokens, nullptr); }

    /// As forward, with the rows' inputs supplied instead of the token embeddings: (N - first, D) floats
    /// on the host (CpuModel::forward_embeddings), or on the device. A drafter fed by a connector (EAGLE,
    /// FSPAD) or by the target's states (EDD) runs this way; the tokens still set the tree's shape.
    Rows forward_embeddings(const Tree& tree, int first, Rows inputs) {
        const int n = tree.size() - first;
        check_inputs(n, inputs.rows(), inputs.cols, inputs.data.size());
        return run_forward(tree, first, Inputs::kHost, inputs.data.data());
    }
    Rows forward_embeddings(const Tree& tree, int first, const float* device_inputs) {
        return run_forward(tree, first, Inputs::kDevice, device_inputs);
    }

private:
    enum class Inputs { kTokens, kHost, kDevice };

    void check_inputs(int n, int rows, int cols, std::size_t size) const {
        detail::require(cols == cfg_.hidden_size && rows == n &&
                            size == static_cast<std::size_t>(std::max(n, 0)) * cfg_.hidden_size,
                        "cuda.model", [&] {
                            return "forward_embeddings: inputs are (" + std::to_string(rows) + ", " + std::to_string(cols) +
                                   "), expected (N - first, hidden_size) = (" + std::to_string(n) + ", " +
                                   std::to_string(cfg_.hidden_size) + ")";
                        });
    }

    PinnedBuffer<float>& supplied_host() {
        if (supplied_host_.get() == nullptr)
            supplied_host_ = PinnedBuffer<float>(static_cast<std::size_t>(opt_.max_tree_nodes) * cfg_.hidden_size);
        return supplied_host_;
    }

    /// `supplied`: the rows' inputs, on the host or the device as `inputs` says; unused for kTokens.
    Rows run_forward(const Tree& tree, int first, Inputs inputs, const float* supplied) {
        const int N = tree.size(), n = N - first, V = cfg_.vocab_size;
        detail::require(first >= 0 && first <= n_computed_ && first <= N, "cuda.model", [&] {
            return "forward from node " + std::to_string(first) + ", but only " + std::to_string(n_computed_) +
                   " nodes of this tree were computed before (pass 0 for a new tree)";
        });
        tree.validate(V);
        detail::require(N <= opt_.max_tree_nodes && cache_len_ + N <= capacity_, "cuda.model", [&] {
            return "tree of " + std::to_string(N) + " nodes does not fit: max_tree_nodes is " +
                   std::to_string(opt_.max_tree_nodes) + ", the cache holds " + std::to_string(cache_len_) +
                   " tokens of capacity " + std::to_string(capacity_) + " (hint: raise CudaModelOptions::max_tree_nodes)";
        });
        n_computed_ = N;
        n_last_ = n;
        hidden_in_last_ = static_cast<int>(hidden_layers_.size());
        if (n == 0) return Rows{{}, V};
        stage_inputs(tree, first);
        cudaStream_t s = ctx_->stream();
        const std::size_t input_bytes = static_cast<std::size_t>(n) * cfg_.hidden_size * sizeof(float);
        if (inputs == Inputs::kHost) {  // staged in pinned memory so the copy is asynchronous
            std::copy_n(supplied, static_cast<std::size_t>(n) * cfg_.hidden_size, supplied_host().get());
            SPECDEC_CUDA_CHECK(cudaMemcpyAsync(x_.get(), supplied_host_.get(), input_bytes, cudaMemcpyHostToDevice, s));
        }
        if (inputs == Inputs::kDevice)
            SPECDEC_CUDA_CHECK(cudaMemcpyAsync(x_.get(), supplied, input_bytes, cudaMemcpyDeviceToDevice, s));
        const bool embed = inputs == Inputs::kTokens;
        const bool graphs = opt_.graphs == CudaGraphs::kOn;
        const int key = 2 * n + (embed ? 0 : 1);
        const auto graph = graphs_.find(key);
        if (graph != graphs_.end()) SPECDEC_CUDA_CHECK(cudaGraphLaunch(graph->second.exec, s));
        else enqueue_forward(n, exact_splits(N), !embed);
        keep_tree_hidden(first, n);
        ctx_->synchronize();
        if (graphs && graph == graphs_.end()) graphs_.emplace(key, capture(n, !embed));
        return Rows{std::span<const float>(logits_host_.get(), static_cast<std::size_t>(n) * V), V};
    }

public:

    /// Keeps the KV rows of `path` (root first, each the parent of the next) as the next committed
    /// tokens, on the device; drops every other tree row. Enqueued only: the next forward orders after it.
    void commit(std::span<const int> path) {
        const int P = static_cast<int>(path.size());
        validate_commit(path, n_computed_, cache_len_, context_, "cuda.model");
        const std::size_t layer_stride = static_cast<std::size_t>(capacity_) * cfg_.kv_dim();
        for (int at = 0; at < P; at += kernels::kCommitChunk) {
            kernels::PathChunk chunk;
            chunk.first_entry = at;
            chunk.count = std::min(kernels::kCommitChunk, P - at);
            std::copy_n(path.begin() + at, chunk.count, chunk.node);
            kernels::launch_gather_kv_rows(ctx_->stream(), k_cache_.get(), v_cache_.get(), layer_stride,
                                           cfg_.num_hidden_layers, cfg_.kv_dim(), cache_len_, chunk);
        }
        // The captured states move with their KV rows (CpuModel's RowCache). Along a path node indices
        // grow, so row cache_len + i is never a later entry's source: in-order copies are safe.
        const std::size_t row_bytes = static_cast<std::size_t>(cfg_.hidden_size) * sizeof(float);
        for (std::size_t c = 0; c < hidden_layers_.size(); ++c)
            for (int i = 0; i < P; ++i)
                if (path[static_cast<std::size_t>(i)] != i)
                    SPECDEC_CUDA_CHECK(cudaMemcpyAsync(committed_row(c, cache_len_ + i),
                                                       committed_row(c, cache_len_ + path[static_cast<std::size_t>(i)]),
                                                       row_bytes, cudaMemcpyDeviceToDevice, ctx_->stream()));
        cache_len_ += P;
        n_computed_ = 0;
    }

    /// Forgets committed tokens beyond the first n.
    void truncate(int n) {
        detail::require(n >= 0 && n <= cache_len_, "cuda.model", [&] {
            return "truncate to " + std::to_string(n) + " tokens, but the cache holds " + std::to_string(cache_len_);
        });
        cache_len_ = n;
        n_computed_ = 0;
        for (int& from : hidden_from_) from = std::min(from, n);
        for (int& valid : host_valid_) valid = std::min(valid, n);
    }
    void reset() { truncate(0); }

    /// Row `token` of the embedding table on the host, widened to float: a model fed input vectors
    /// embeds its own tokens (EDD's tree nodes). The bf16 table is copied to the host on the first call
    /// (V·D·2 bytes); the view lives until the next call.
    std::span<const float> embedding(int token) const {
        const int D = cfg_.hidden_size;
        detail::require(token >= 0 && token < cfg_.vocab_size, "cuda.model", [&] {
            return "embedding: token " + std::to_string(token) + " is outside the vocabulary of " + std::to_string(cfg_.vocab_size);
        });
        if (embed_host_.empty()) {
            embed_host_.resize(static_cast<std::size_t>(cfg_.vocab_size) * D);
            SPECDEC_CUDA_CHECK(cudaMemcpy(embed_host_.data(), w_.embed.get(), embed_host_.size() * sizeof(bf16), cudaMemcpyDeviceToHost));
        }
        embed_row_.resize(static_cast<std::size_t>(D));
        const bf16* row = embed_host_.data() + static_cast<std::size_t>(token) * D;
        std::transform(row, row + D, embed_row_.begin(), [](bf16 b) { return to_float(b); });
        return embed_row_;
    }

    // ---- ExposesKV --------------------------------------------------------------------------------
    int num_layers() const { return cfg_.num_hidden_layers; }

    /// Host copy of one layer's committed rows, widened to float. Costs a device-to-host copy of
    /// 2·T·Hkv·hd bf16 values and a synchronisation per call; device drafters use device_kv().
    KvView kv(int layer) const {
        const DeviceKv d = device_kv(layer);
        const std::size_t count = static_cast<std::size_t>(d.len) * cfg_.kv_dim();
        std::vector<bf16> raw(2 * count);
        if (count > 0) {
            SPECDEC_CUDA_CHECK(cudaMemcpyAsync(raw.data(), d.k, count * sizeof(bf16), cudaMemcpyDeviceToHost, ctx_->stream()));
            SPECDEC_CUDA_CHECK(cudaMemcpyAsync(raw.data() + count, d.v, count * sizeof(bf16), cudaMemcpyDeviceToHost,
                                               ctx_->stream()));
            ctx_->synchronize();
        }
        kv_host_.resize(2 * count);
        std::transform(raw.begin(), raw.end(), kv_host_.begin(), [](bf16 b) { return to_float(b); });
        return {std::span<const float>(kv_host_).first(count), std::span<const float>(kv_host_).subspan(count), d.len,
                cfg_.num_key_value_heads, cfg_.head_dim()};
    }

    /// One layer's committed keys and values on the device, valid until the next commit or truncate.
    DeviceKv device_kv(int layer) const {
        detail::require(layer >= 0 && layer < cfg_.num_hidden_layers, "cuda.model", [&] {
            return "kv(" + std::to_string(layer) + "): the model has " + std::to_string(cfg_.num_hidden_layers) + " layers";
        });
        const std::size_t off = static_cast<std::size_t>(layer) * capacity_ * cfg_.kv_dim();
        return {k_cache_.get() + off, v_cache_.get() + off, cache_len_, cfg_.num_key_value_heads, cfg_.head_dim()};
    }

    // ---- ExposesHidden ----------------------------------------------------------------------------
    /// Chooses which hidden states the next forwards keep, HF numbering as CpuModel: 0 = embeddings,
    /// l = output of layer l, L = the final normed state. Drops captured CUDA graphs (they copy the
    /// chosen layers).
    void capture_hidden(std::vector<int> layers) {
        for (int l : layers)
            detail::require(l >= 0 && l <= cfg_.num_hidden_layers, "cuda.model", [&] {
                return "capture_hidden: layer " + std::to_string(l) + " is outside [0, " +
                       std::to_string(cfg_.num_hidden_layers) + "]";
            });
        if (layers == hidden_layers_) return;  // the same layers: the committed states stay valid
        ctx_->synchronize();  // a queued commit may still copy into the buffers replaced here
        hidden_layers_ = std::move(layers);
        hidden_dev_ = DeviceBuffer<float>(hidden_layers_.size() * static_cast<std::size_t>(opt_.max_tree_nodes) *
                                          cfg_.hidden_size);
        committed_dev_ = DeviceBuffer<float>(hidden_layers_.size() * static_cast<std::size_t>(capacity_) * cfg_.hidden_size);
        committed_host_.assign(hidden_layers_.size(), {});
        host_valid_.assign(hidden_layers_.size(), 0);
        hidden_from_.assign(hidden_layers_.size(), cache_len_);
        graphs_.clear();
        n_last_ = 0;
        hidden_in_last_ = 0;
    }

    /// Adds `layer` to the captured set, keeping the layers there and their states, and returns its
    /// index, as CpuModel::add_hidden_layer (EDD reads L-3, EAGLE/FSPAD read L).
    int add_hidden_layer(int layer) {
        for (std::size_t i = 0; i < hidden_layers_.size(); ++i)
            if (hidden_layers_[i] == layer) return static_cast<int>(i);
        detail::require(layer >= 0 && layer <= cfg_.num_hidden_layers, "cuda.model", [&] {
            return "add_hidden_layer: layer " + std::to_string(layer) + " is outside [0, " +
                   std::to_string(cfg_.num_hidden_layers) + "]";
        });
        const std::size_t n_old = hidden_layers_.size(), D = static_cast<std::size_t>(cfg_.hidden_size);
        const std::size_t slot = static_cast<std::size_t>(opt_.max_tree_nodes) * D, rows = static_cast<std::size_t>(capacity_) * D;
        DeviceBuffer<float> hidden((n_old + 1) * slot), committed((n_old + 1) * rows);
        cudaStream_t s = ctx_->stream();
        if (n_old > 0) {
            SPECDEC_CUDA_CHECK(cudaMemcpyAsync(hidden.get(), hidden_dev_.get(), n_old * slot * sizeof(float),
                                               cudaMemcpyDeviceToDevice, s));
            SPECDEC_CUDA_CHECK(cudaMemcpyAsync(committed.get(), committed_dev_.get(), n_old * rows * sizeof(float),
                                               cudaMemcpyDeviceToDevice, s));
            ctx_->synchronize();  // the old buffers are freed below
        }
        hidden_dev_ = std::move(hidden);
        committed_dev_ = std::move(committed);
        hidden_layers_.push_back(layer);
        committed_host_.emplace_back();
        host_valid_.push_back(0);
        hidden_from_.push_back(cache_len_);
        graphs_.clear();  // they copy into the old buffers
        return static_cast<int>(n_old);
    }

    /// The index of a captured layer; throws naming the layer and the captured set otherwise.
    int hidden_index(int layer) const {
        for (std::size_t i = 0; i < hidden_layers_.size(); ++i)
            if (hidden_layers_[i] == layer) return static_cast<int>(i);
        std::string captured;
        for (int l : hidden_layers_) captured += (captured.empty() ? "" : ", ") + std::to_string(l);
        detail::fail("cuda.model", "hidden_index: layer " + std::to_string(layer) + " is not captured (captured: {" +
                                       captured + "}); was the set replaced by capture_hidden after a reader added its "
                                       "layer with add_hidden_layer?");
    }

    /// (cache_len, D) states of every committed token for the i-th captured layer, on the host, as
    /// CpuModel::committed_hidden. The rows live on the device and move with commit; a call copies the
    /// rows committed since the last call (a few per step) and waits for the GPU.
    Rows committed_hidden(int i) const {
        detail::require(i >= 0 && i < static_cast<int>(hidden_layers_.size()), "cuda.model", [&] {
            return "committed_hidden(" + std::to_string(i) + "): " + std::to_string(hidden_layers_.size()) +
                   " layers are captured (see capture_hidden)";
        });
        const std::size_t c = static_cast<std::size_t>(i), D = static_cast<std::size_t>(cfg_.hidden_size);
        detail::require(hidden_from_[c] == 0, "cuda.model", [&] {
            return "committed_hidden: capture_hidden was called after " + std::to_string(hidden_from_[c]) +
                   " tokens were committed, whose states of layer " + std::to_string(hidden_layers_[c]) +
                   " were not kept; call it (or add_hidden_layer) before the text is forwarded (or reset the model)";
        });
        std::vector<float>& host = committed_host_[c];
        if (host.size() < static_cast<std::size_t>(cache_len_) * D)
            host.resize(std::max(static_cast<std::size_t>(cache_len_), 2 * host.size() / D) * D);
        if (host_valid_[c] < cache_len_) {
            const std::size_t from = static_cast<std::size_t>(host_valid_[c]);
            SPECDEC_CUDA_CHECK(cudaMemcpyAsync(host.data() + from * D, committed_row(c, host_valid_[c]),
                                               (static_cast<std::size_t>(cache_len_) - from) * D * sizeof(float),
                                               cudaMemcpyDeviceToHost, ctx_->stream()));
            ctx_->synchronize();
            host_valid_[c] = cache_len_;
        }
        return Rows{std::span<const float>(host.data(), static_cast<std::size_t>(cache_len_) * D), cfg_.hidden_size};
    }

    /// (N - first, D) hidden states of the last forward for the i-th captured layer: a device-to-host
    /// copy of n·D floats and a synchronisation per call; device drafters use device_hidden().
    Rows hidden(int i) const {
        const float* d = device_hidden(i);
        const std::size_t count = static_cast<std::size_t>(n_last_) * cfg_.hidden_size;
        hidden_host_.resize(count);
        if (count > 0) {
            SPECDEC_CUDA_CHECK(cudaMemcpyAsync(hidden_host_.data(), d, count * sizeof(float), cudaMemcpyDeviceToHost,
                                               ctx_->stream()));
            ctx_->synchronize();
        }
        return Rows{hidden_host_, cfg_.hidden_size};
    }

    /// (N - first, D) fp32 on the device, valid until the next forward.
    const float* device_hidden(int i) const {
        // A layer added since the last forward has no rows of it yet, as on CpuModel.
        detail::require(i >= 0 && i < hidden_in_last_, "cuda.model", [&] {
            return "hidden(" + std::to_string(i) + "): " + std::to_string(hidden_in_last_) +
                   " layers captured in the last forward (see capture_hidden)";
        });
        return hidden_dev_.get() + static_cast<std::size_t>(i) * opt_.max_tree_nodes * cfg_.hidden_size;
    }

private:
    /// Row r of the committed states of captured layer c, on the device: (captured, C, D).
    std::size_t committed_offset(std::size_t c, int r) const {
        return (c * capacity_ + static_cast<std::size_t>(r)) * cfg_.hidden_size;
    }
    float* committed_row(std::size_t c, int r) { return committed_dev_.get() + committed_offset(c, r); }
    const float* committed_row(std::size_t c, int r) const { return committed_dev_.get() + committed_offset(c, r); }

    /// After a forward (eager or replayed): the captured states of its n rows go to their committed-state
    /// rows cache_len + first + i, beside their KV rows, where commit finds them. Outside the graphs,
    /// whose addresses are fixed at capture.
    void keep_tree_hidden(int first, int n) {
        for (std::size_t c = 0; c < hidden_layers_.size(); ++c)
            SPECDEC_CUDA_CHECK(cudaMemcpyAsync(committed_row(c, cache_len_ + first), hidden_slot(c),
                                               static_cast<std::size_t>(n) * cfg_.hidden_size * sizeof(float),
                                               cudaMemcpyDeviceToDevice, ctx_->stream()));
    }

    /// An instantiated graph; destroyed with the model.
    struct Graph {
        cudaGraphExec_t exec = nullptr;
        explicit Graph(cudaGraphExec_t e) : exec(e) {}
        Graph(Graph&& o) noexcept : exec(std::exchange(o.exec, nullptr)) {}
        Graph& operator=(Graph&& o) noexcept {
            std::swap(exec, o.exec);
            return *this;
        }
        ~Graph() {
            if (exec != nullptr) cudaGraphExecDestroy(exec);
        }
    };

    void allocate() {
        const int Nmax = opt_.max_tree_nodes, D = cfg_.hidden_size, H = cfg_.num_attention_heads, hd = cfg_.head_dim();
        const int kvd = cfg_.kv_dim(), F = cfg_.intermediate_size, V = cfg_.vocab_size;
        const std::size_t rows = static_cast<std::size_t>(Nmax);
        capacity_ = static_cast<int>(detail::kv_rows(context_, Nmax, "cuda.model"));
        detail::require_kv_fits(cfg_.num_hidden_layers, capacity_, kvd, "cuda.model");
        split_keys_ = kernels::attention_split_keys(capacity_);
        max_splits_ = (capacity_ + split_keys_ - 1) / split_keys_;
        mask_words_ = detail::mask_words(Nmax);

        const std::size_t cache = static_cast<std::size_t>(cfg_.num_hidden_layers) * capacity_ * kvd;
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
        part_acc_ = DeviceBuffer<float>(rows * H * max_splits_ * hd);
        part_ml_ = DeviceBuffer<float>(rows * H * max_splits_ * 2);
        rope_cs_ = DeviceBuffer<float>(rows * hd);
        if (cfg_.partial_alignment) {
            pad_out_ = DeviceBuffer<float>(rows * 2 * D);
            feature_ = DeviceBuffer<float>(rows * D);
        }
        inv_freq_ = to_device<double>(rope_inverse_frequencies(cfg_));  // as CpuModel, rope_scaling applied
        const std::size_t inputs = 4 + 2 * rows + rows * mask_words_;
        inputs_ = DeviceBuffer<std::int32_t>(inputs);
        staging_ = PinnedBuffer<std::int32_t>(inputs);
    }

    // One upload per forward: StepParams | tokens (Nmax) | positions (Nmax) | masks (Nmax, W).
    static constexpr int kParamsInts = 4;
    int* tokens_at(std::int32_t* base) const { return base + kParamsInts; }
    int* positions_at(std::int32_t* base) const { return base + kParamsInts + opt_.max_tree_nodes; }
    std::uint32_t* masks_at(std::int32_t* base) const {
        return reinterpret_cast<std::uint32_t*>(base + kParamsInts + 2 * opt_.max_tree_nodes);
    }
    const kernels::StepParams* params() const { return reinterpret_cast<const kernels::StepParams*>(inputs_.get()); }

    void stage_inputs(const Tree& tree, int first) {
        static_assert(sizeof(kernels::StepParams) <= kParamsInts * sizeof(std::int32_t));
        const int N = tree.size(), n = N - first;
        std::int32_t* s = staging_.get();
        *reinterpret_cast<kernels::StepParams*>(s) = {cache_len_, N, first};
        for (int i = 0; i < n; ++i) {
            tokens_at(s)[i] = tree[first + i].token;
            positions_at(s)[i] = cache_len_ + tree[first + i].depth;
        }
        detail::ancestor_masks(tree, first, mask_words_,
                               std::span<std::uint32_t>(masks_at(s), static_cast<std::size_t>(n) * mask_words_));
    }

    int exact_splits(int N) const { return (cache_len_ + N + split_keys_ - 1) / split_keys_; }

    /// The whole forward for n new nodes, enqueued on the stream: upload, layers, logits download.
    /// Everything that varies between calls with the same n is read from the staged inputs.
    /// `supplied`: x already holds the inputs (forward_embeddings), no embedding gather.
    void enqueue_forward(int n, int splits, bool supplied) {
        cudaStream_t s = ctx_->stream();
        const int D = cfg_.hidden_size, H = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads;
        const int hd = cfg_.head_dim(), kvd = cfg_.kv_dim(), F = cfg_.intermediate_size, V = cfg_.vocab_size;
        const float eps = cfg_.rms_norm_eps;
        SPECDEC_CUDA_CHECK(cudaMemcpyAsync(inputs_.get(), staging_.get(), inputs_.bytes(), cudaMemcpyHostToDevice, s));
        if (!supplied) kernels::launch_embed_rows(s, x_.get(), w_.embed.get(), tokens_at(inputs_.get()), n, D);
        kernels::launch_rope_table(s, rope_cs_.get(), positions_at(inputs_.get()), inv_freq_.get(), n, hd,
                                   rope_attention_factor(cfg_));
        copy_hidden(0, n);
        kernels::TreeAttention att{.out = att_.get(), .part_acc = part_acc_.get(), .part_ml = part_ml_.get(),
                                   .qkv = qkv_.get(), .mask = masks_at(inputs_.get()), .params = params(), .n = n,
                                   .H = H, .Hkv = Hkv, .hd = hd, .mask_words = mask_words_,
                                   .split_keys = split_keys_, .max_splits = max_splits_};
        for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
            const DeviceLayer& lw = w_.layers[l];
            __nv_bfloat16* kc = k_cache_.get() + static_cast<std::size_t>(l) * capacity_ * kvd;
            __nv_bfloat16* vc = v_cache_.get() + static_cast<std::size_t>(l) * capacity_ * kvd;
            if (l == 0 && cfg_.identity_end_norms)  // EAGLE's layer: no input_layernorm
                kernels::launch_to_bf16(s, xb_.get(), x_.get(), static_cast<std::int64_t>(n) * D);
            else
                kernels::launch_rmsnorm(s, xb_.get(), x_.get(), lw.attn_norm.get(), n, D, eps);
            gemm_(qkv_.get(), xb_.get(), lw.wqkv.get(), n, D, H * hd + 2 * kvd);
            kernels::launch_rope_store_kv(s, qkv_.get(), kc, vc, rope_cs_.get(), params(), n, H, Hkv, hd);
            att.k_cache = kc;
            att.v_cache = vc;
            kernels::launch_tree_attention(s, att, splits);
            gemm_(x_.get(), att_.get(), lw.wo.get(), n, H * hd, D, GemmMode::kAccumulate);
            kernels::launch_rmsnorm(s, xb_.get(), x_.get(), lw.mlp_norm.get(), n, D, eps);
            gemm_(gate_up_.get(), xb_.get(), lw.w_gate_up.get(), n, D, 2 * F);
            kernels::launch_swiglu(s, act_.get(), gate_up_.get(), n, F);
            if (l + 1 == cfg_.num_hidden_layers && cfg_.partial_alignment) {
                // FSPAD's PAD: the (2D, F) down_proj's second half on the shared residual is the feature
                // (state L, through the final norm); the first half goes on to the head.
                gemm_(pad_out_.get(), act_.get(), lw.w_down.get(), n, F, 2 * D);
                kernels::launch_pad_split(s, x_.get(), feature_.get(), pad_out_.get(), n, D);
            } else {
                gemm_(x_.get(), act_.get(), lw.w_down.get(), n, F, D, GemmMode::kAccumulate);
            }
            if (l + 1 < cfg_.num_hidden_layers) copy_hidden(l + 1, n);
        }
        // HF's last hidden state is the normed one (under PAD the feature branch's; EAGLE's layer has no
        // final norm: the residual stream is both the state and the head's input).
        const float* last = cfg_.partial_alignment ? feature_.get() : x_.get();
        for (std::size_t c = 0; c < hidden_layers_.size(); ++c)
            if (hidden_layers_[c] == cfg_.num_hidden_layers) {
                if (cfg_.identity_end_norms)
                    SPECDEC_CUDA_CHECK(cudaMemcpyAsync(hidden_slot(c), x_.get(), static_cast<std::size_t>(n) * D * sizeof(float),
                                                       cudaMemcpyDeviceToDevice, s));
                else
                    kernels::launch_rmsnorm(s, hidden_slot(c), last, w_.norm.get(), n, D, eps);
            }
        if (cfg_.identity_end_norms) kernels::launch_to_bf16(s, xb_.get(), x_.get(), static_cast<std::int64_t>(n) * D);
        else kernels::launch_rmsnorm(s, xb_.get(), x_.get(), w_.norm.get(), n, D, eps);
        gemm_(logits_.get(), xb_.get(), w_.output_matrix(), n, D, V);
        SPECDEC_CUDA_CHECK(cudaMemcpyAsync(logits_host_.get(), logits_.get(), static_cast<std::size_t>(n) * V * sizeof(float),
                                           cudaMemcpyDeviceToHost, s));
    }

    /// Capture slot c of hidden_dev_: (Nmax, D).
    float* hidden_slot(std::size_t c) { return hidden_dev_.get() + c * opt_.max_tree_nodes * cfg_.hidden_size; }

    /// Copies the residual stream x (n, D) to every capture slot that asked for `layer`.
    void copy_hidden(int layer, int n) {
        for (std::size_t c = 0; c < hidden_layers_.size(); ++c)
            if (hidden_layers_[c] == layer)
                SPECDEC_CUDA_CHECK(cudaMemcpyAsync(hidden_slot(c), x_.get(),
                                                   static_cast<std::size_t>(n) * cfg_.hidden_size * sizeof(float),
                                                   cudaMemcpyDeviceToDevice, ctx_->stream()));
    }

    /// Records the forward for n nodes with attention chunks for the whole capacity (T is unknown at
    /// capture time), then instantiates it. GEMM plans for n exist already (built by an eager run), so
    /// nothing but enqueueing happens while the stream captures.
    Graph capture(int n, bool supplied) {
        cudaStream_t s = ctx_->stream();
        cudaGraph_t graph = nullptr;
        SPECDEC_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        try {
            enqueue_forward(n, max_splits_, supplied);
        } catch (...) {
            cudaStreamEndCapture(s, &graph);
            if (graph != nullptr) cudaGraphDestroy(graph);
            throw;
        }
        SPECDEC_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
        cudaGraphExec_t exec = nullptr;
        const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
        SPECDEC_CUDA_CHECK(status);
        return Graph(exec);
    }

    Config cfg_;
    DeviceWeights w_;
    CudaContext* ctx_;
    CudaModelOptions opt_;
    Gemm gemm_;
    int context_ = 0;     // positions held: max_position_embeddings, or max_context
    int capacity_ = 0;    // C
    int cache_len_ = 0;   // T
    int n_computed_ = 0;  // nodes of the current tree whose KV rows sit after the committed ones
    int n_last_ = 0;      // rows the last forward computed (what hidden() returns)
    int hidden_in_last_ = 0;  // captured layers the last forward wrote (add_hidden_layer adds one it did not)
    int split_keys_ = 0, max_splits_ = 0, mask_words_ = 0;

    DeviceBuffer<__nv_bfloat16> k_cache_, v_cache_;  // (L, C, Hkv*hd)
    DeviceBuffer<float> x_;                          // (Nmax, D) residual stream
    DeviceBuffer<__nv_bfloat16> xb_;                 // (Nmax, D) normed, a GEMM input
    DeviceBuffer<float> qkv_;                        // (Nmax, H*hd + 2*Hkv*hd)
    DeviceBuffer<__nv_bfloat16> att_;                // (Nmax, H*hd)
    DeviceBuffer<float> gate_up_;                    // (Nmax, 2F)
    DeviceBuffer<__nv_bfloat16> act_;                // (Nmax, F)
    DeviceBuffer<float> logits_;                     // (Nmax, V)
    PinnedBuffer<float> logits_host_;                // (Nmax, V) what forward() returns
    DeviceBuffer<float> part_acc_;                   // (Nmax*H, max_splits, hd) attention chunks
    DeviceBuffer<float> part_ml_;                    // (Nmax*H, max_splits, 2)
    DeviceBuffer<float> rope_cs_;                    // (Nmax, hd/2, 2) cos, sin per node
    DeviceBuffer<double> inv_freq_;                  // (hd/2)
    DeviceBuffer<float> pad_out_;                    // (Nmax, 2D) PAD's down_proj output (partial_alignment)
    DeviceBuffer<float> feature_;                    // (Nmax, D) PAD's feature branch before the final norm
    PinnedBuffer<float> supplied_host_;              // (Nmax, D) forward_embeddings' host inputs, staged
    DeviceBuffer<std::int32_t> inputs_;              // StepParams | tokens | positions | masks, see stage_inputs
    PinnedBuffer<std::int32_t> staging_;             // the same layout on the host
    std::vector<int> hidden_layers_;
    DeviceBuffer<float> hidden_dev_;                 // (captured, Nmax, D) the last forward's states
    DeviceBuffer<float> committed_dev_;              // (captured, C, D) rows as the KV rows: committed, then tree
    std::vector<int> hidden_from_;                   // per captured layer: committed rows before its capture began
    mutable std::vector<std::vector<float>> committed_host_;  // per captured layer: what committed_hidden returns
    mutable std::vector<int> host_valid_;            // per captured layer: its host rows that equal the device's
    std::map<int, Graph> graphs_;                    // 2n + (inputs supplied) -> graph
    mutable std::vector<float> kv_host_;             // (2, T, Hkv*hd) what kv() returns
    mutable std::vector<float> hidden_host_;         // (n, D) what hidden() returns
    mutable std::vector<bf16> embed_host_;           // (V, D) the table, fetched by the first embedding()
    mutable std::vector<float> embed_row_;           // (D) what embedding() returns
};

static_assert(LanguageModel<CudaModel>);
static_assert(ExposesKV<CudaModel>);
static_assert(ExposesHidden<CudaModel>);
static_assert(ExposesCommittedHidden<CudaModel>);

}  // namespace specdec
