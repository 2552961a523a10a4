// specdec/detail/cuda/feature_drafter.cuh — EAGLE's and FSPAD's drafter on the GPU: the connector and one CudaModel layer.
// SPDX-License-Identifier: MIT
#pragma once

// FeatureDrafter's semantics (detail/methods/eagle_fspad/feature_drafter.hpp; EAGLE, Li et al. 2024b,
// §4.1; FSPAD, fspad.txt Fig. 5) with CudaModel's numerics, so FeatureProposer drives it unchanged:
//   η = connector(e, f)   FC: one product over concat(e, f) (n, 2D), plus the bias where the checkpoint
//                         has one; Feature Sampler: Gate(e) and Up(f) as one product over concat(e, f)
//                         with the block-diagonal (2I, 2D) matrix [Gate 0; 0 Up] (its zero blocks add
//                         exact zeros; they double the sampler's first product), SwiGLU, Down
//   the layer             CudaModel::forward_embeddings: the drafter's own bf16 KV cache, tree attention,
//                         EAGLE's layer without its end norms (identity_end_norms) or PAD's split
//                         (partial_alignment), the target's frozen head
// The embedding e is the drafter's copy of the target's table, gathered on the device. The features f
// come from the host (FeatureProposer keeps them there: the target's committed ones via
// committed_hidden, the drafter's predictions via features()), n·D floats up per forward and n·D down.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../../kernels.cuh"
#include "../core/error.hpp"
#include "../core/tree.hpp"
#include "../core/views.hpp"
#include "../methods/eagle_fspad/feature_drafter.hpp"
#include "context.cuh"
#include "gemm.cuh"
#include "model.cuh"
#include "weights.cuh"

namespace specdec {

class CudaFeatureDrafter {
public:
    /// The drafter on `ctx`, the target's context (one stream orders everything). `options` are the
    /// layer's CudaModel options; max_tree_nodes bounds the nodes scored per forward.
    CudaFeatureDrafter(FeatureCheckpoint ck, CudaContext& ctx, CudaModelOptions options = {})
        : model(ck.config, ck.weights, ctx, options),
          kind(ck.connector),
          target_hash(std::move(ck.target_hash)),
          ctx_(&ctx),
          gemm_(ctx, options.gemm),
          rows_(options.max_tree_nodes),
          I_(ck.sampler_size) {
        const int D = ck.config.hidden_size;
        const std::size_t rows = static_cast<std::size_t>(rows_);
        for_each_connector_tensor(ck.connector_weights, kind, D, I_, [&](const std::string& name, const std::vector<float>& t,
                                                                          const std::vector<std::int64_t>& s) {
            std::int64_t n = 1;
            for (std::int64_t extent : s) n *= extent;
            detail::require(t.size() == static_cast<std::size_t>(n), "cuda.eagle", [&] {
                return "connector tensor '" + name + "': expected " + std::to_string(n) + " floats, got " +
                       std::to_string(t.size());
            });
        });
        const ConnectorWeights& w = ck.connector_weights;
        if (kind == Connector::kFc) {
            fc_ = detail::upload_bf16({&w.fc});
            if (!w.fc_bias.empty()) fc_bias_ = to_device<float>(w.fc_bias);
        } else {
            // [Gate 0; 0 Up]: row i < I reads e (columns 0..D), row I + i reads f (columns D..2D).
            std::vector<float> gate_up(static_cast<std::size_t>(2) * I_ * 2 * D, 0.0f);
            for (std::size_t i = 0; i < static_cast<std::size_t>(I_); ++i) {
                std::copy_n(w.gate.begin() + static_cast<std::ptrdiff_t>(i * D), D, gate_up.begin() + static_cast<std::ptrdiff_t>(i * 2 * D));
                std::copy_n(w.up.begin() + static_cast<std::ptrdiff_t>(i * D), D,
                            gate_up.begin() + static_cast<std::ptrdiff_t>((I_ + i) * 2 * D + D));
            }
            sampler_gate_up_ = detail::upload_bf16({&gate_up});
            sampler_down_ = detail::upload_bf16({&w.down});
            gu_ = DeviceBuffer<float>(rows * 2 * I_);
            act_ = DeviceBuffer<__nv_bfloat16>(rows * I_);
        }
        tokens_host_ = PinnedBuffer<std::int32_t>(rows);
        tokens_dev_ = DeviceBuffer<std::int32_t>(rows);
        f_host_ = PinnedBuffer<float>(rows * D);
        f_dev_ = DeviceBuffer<float>(rows * D);
        cat_ = DeviceBuffer<__nv_bfloat16>(rows * 2 * D);
        eta_ = DeviceBuffer<float>(rows * D);
        model.capture_hidden({1});  // the predicted feature: the layer's final state (PAD: its feature branch)
    }

    CudaModel model;
    Connector kind;
    std::string target_hash;

    const Config& config() const { return model.config(); }
    int context_size() const { return model.context_size(); }
    void reset() { model.reset(); }
    void truncate(int n) { model.truncate(n); }

    /// Logits (N - first, V) of tree nodes first..N-1, node first + i fed η = connector(e(token), f_i).
    Rows score(const Tree& tree, int first, std::span<const float> f) {
        const int n = tree.size() - first;
        detail::require(n >= 0 && n <= rows_, "cuda.eagle", [&] {
            return "score: " + std::to_string(n) + " nodes, but the drafter scores at most max_tree_nodes = " +
                   std::to_string(rows_) + " per forward";
        });
        std::vector<int> tokens(static_cast<std::size_t>(n));
        for (int i = 0; i < n; ++i) tokens[static_cast<std::size_t>(i)] = tree[first + i].token;
        connect(tokens, f);
        return model.forward_embeddings(tree, first, eta_.get());
    }

    /// The features the last score predicted, (N - first, D), on the host.
    Rows features() const { return model.hidden(0); }

    /// Forwards and commits one row per token, fed η = connector(e(tokens_i), f_i); in chunks of
    /// max_tree_nodes rows (a prompt's catch-up is longer than a tree).
    void append(std::span<const int> tokens, std::span<const float> f) {
        const std::size_t D = static_cast<std::size_t>(config().hidden_size);
        detail::require(f.size() == tokens.size() * D, "cuda.eagle", [&] {
            return "append: " + std::to_string(f.size()) + " feature values for " + std::to_string(tokens.size()) +
                   " rows of " + std::to_string(D);
        });
        for (std::size_t at = 0; at < tokens.size(); at += static_cast<std::size_t>(rows_)) {
            const std::size_t m = std::min(tokens.size() - at, static_cast<std::size_t>(rows_));
            connect(tokens.subspan(at, m), f.subspan(at * D, m * D));
            std::vector<int> zeros(m, 0), path(m);
            for (std::size_t i = 0; i < m; ++i) path[i] = static_cast<int>(i);
            model.forward_embeddings(Tree::chain(zeros), 0, eta_.get());
            model.commit(path);
        }
    }

private:
    /// eta (n, D) on the device = connector(e(tokens), f), enqueued on the stream.
    void connect(std::span<const int> tokens, std::span<const float> f) {
        const int n = static_cast<int>(tokens.size()), D = config().hidden_size, V = config().vocab_size;
        detail::require(f.size() == static_cast<std::size_t>(n) * D, "cuda.eagle", [&] {
            return "feature drafter: " + std::to_string(f.size()) + " feature values for " + std::to_string(n) +
                   " rows of " + std::to_string(D);
        });
        if (n == 0) return;
        for (int i = 0; i < n; ++i) {
            const int t = tokens[static_cast<std::size_t>(i)];
            detail::require(t >= 0 && t < V, "cuda.eagle", [&] {
                return "token " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(V);
            });
            tokens_host_.get()[i] = t;
        }
        std::copy(f.begin(), f.end(), f_host_.get());
        cudaStream_t s = ctx_->stream();
        SPECDEC_CUDA_CHECK(cudaMemcpyAsync(tokens_dev_.get(), tokens_host_.get(), static_cast<std::size_t>(n) * sizeof(std::int32_t),
                                           cudaMemcpyHostToDevice, s));
        SPECDEC_CUDA_CHECK(cudaMemcpyAsync(f_dev_.get(), f_host_.get(), f.size() * sizeof(float), cudaMemcpyHostToDevice, s));
        kernels::launch_embed_concat(s, cat_.get(), model.device_weights().embed.get(), tokens_dev_.get(), f_dev_.get(), n, D);
        if (kind == Connector::kFc) {
            gemm_(eta_.get(), cat_.get(), fc_.get(), n, 2 * D, D);
            if (!fc_bias_.empty()) kernels::launch_add_row_bias(s, eta_.get(), fc_bias_.get(), n, D);
            return;
        }
        gemm_(gu_.get(), cat_.get(), sampler_gate_up_.get(), n, 2 * D, 2 * I_);
        kernels::launch_swiglu(s, act_.get(), gu_.get(), n, I_);
        gemm_(eta_.get(), act_.get(), sampler_down_.get(), n, I_, D);
    }

    CudaContext* ctx_;
    Gemm gemm_;
    int rows_ = 0;  // max_tree_nodes: rows per forward
    int I_ = 0;     // the Feature Sampler's width
    DeviceBuffer<__nv_bfloat16> fc_;               // (D, 2D)
    DeviceBuffer<float> fc_bias_;                  // (D) or empty
    DeviceBuffer<__nv_bfloat16> sampler_gate_up_;  // (2I, 2D) [Gate 0; 0 Up]
    DeviceBuffer<__nv_bfloat16> sampler_down_;     // (D, I)
    PinnedBuffer<std::int32_t> tokens_host_;       // (rows) staged tokens
    DeviceBuffer<std::int32_t> tokens_dev_;
    PinnedBuffer<float> f_host_;                   // (rows, D) staged features
    DeviceBuffer<float> f_dev_;
    DeviceBuffer<__nv_bfloat16> cat_;              // (rows, 2D) concat(e, f)
    DeviceBuffer<float> gu_;                       // (rows, 2I) the sampler's [gate | up]
    DeviceBuffer<__nv_bfloat16> act_;              // (rows, I)
    DeviceBuffer<float> eta_;                      // (rows, D) the layer's input
};

static_assert(FeatureDrafterLike<CudaFeatureDrafter>);
static_assert(ScoresNodes<FeatureProposer<CudaModel, CudaFeatureDrafter>>);

}  // namespace specdec
