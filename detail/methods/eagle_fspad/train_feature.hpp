// specdec/detail/methods/eagle_fspad/train_feature.hpp — training EAGLE's and FSPAD's feature drafters against a frozen target.
// SPDX-License-Identifier: MIT
#pragma once

// fspad.txt, "Training of FSPAD" (Eqs. 1-4) and EAGLE §4.2: teacher forcing over windows of T tokens
// with the frozen target's features f_0..f_{T-1} (state L, after the final norm) and next-token laws.
// Drafter row t (0 <= t <= T-2) reads η_t = connector(e(x_{t+1}), f_t) at position t (feature_drafter.hpp's
// numbering) and is trained towards the target at t + 1:
//   L_t = soft cross-entropy of the drafter's logits (from f̃ under PAD) against the target's law of
//         x_{t+2} (Eq. 3, p̂ = LMhead(f̂));
//   L_f = SmoothL1(drafter feature, f_{t+1}) (Eq. 4; under PAD the feature branch f);
//   L = w·L_t + L_f with w = 0.1 (EAGLE-2's weight, which FSPAD keeps).
// ShiftMask's prompt masking: rows whose predicted token lies in the prompt (t + 2 <= prompt_len) carry
// no loss. Our corpus is plain text, so training uses prompt_len 0; the mask is tested.
// The layer is a TrainableLlama fed the connector's output as input embeddings; the connector's
// gradient comes back through input_embeddings_grad().

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../../core/error.hpp"
#include "../../model/weights.hpp"
#include "../../train/dataset.hpp"
#include "../../train/layers.hpp"
#include "../../train/optimizer.hpp"
#include "../../train/trainable_llama.hpp"
#include "feature_drafter.hpp"

namespace specdec::train {

/// One batch for the drafter: B windows of R = T - 1 rows.
struct FeatureBatch {
    int B = 0, R = 0, D = 0, V = 0;
    std::vector<int> tokens;            // (B, R) all kEmbeddingInput: every row reads the connector's output
    std::vector<float> e;               // (B, R, D) embedding of x_{t+1}
    std::vector<float> f;               // (B, R, D) the target's feature f_t
    std::vector<float> target_f;        // (B, R, D) the target's feature f_{t+1}
    std::vector<float> probs;           // (B, R, V) the target's law of x_{t+2}
    std::vector<std::uint8_t> counted;  // (B, R) 1 where the row carries loss (ShiftMask)
    int rows() const { return B * R; }
};

/// The batch of windows `w` with the teacher's features (state L) and laws; `embedding` is the target's
/// (V, D) embedding matrix; rows predicting a token inside the first `prompt_len` are masked.
inline FeatureBatch feature_batch(const WindowBatch& w, const HiddenTeacher& t, std::span<const float> embedding,
                                  int prompt_len = 0) {
    detail::require(w.T >= 2 && t.T == w.T && t.B == w.B, "eagle", [&] {
        return "feature_batch: windows of T = " + std::to_string(w.T) + " tokens (need >= 2) and a teacher of " +
               std::to_string(t.B) + " x " + std::to_string(t.T);
    });
    const int R = w.T - 1, D = t.D, V = t.V;
    detail::require(embedding.size() == static_cast<std::size_t>(V) * D, "eagle", [&] {
        return "feature_batch: the embedding has " + std::to_string(embedding.size()) + " floats, expected V x D = " +
               std::to_string(static_cast<std::size_t>(V) * D);
    });
    FeatureBatch b{w.B, R, D, V, {}, {}, {}, {}, {}, {}};
    const std::size_t N = static_cast<std::size_t>(w.B) * R;
    b.tokens.assign(N, kEmbeddingInput);
    b.e.resize(N * D);
    b.f.resize(N * D);
    b.target_f.resize(N * D);
    b.probs.resize(N * V);
    b.counted.resize(N);
    for (int s = 0; s < w.B; ++s)
        for (int r = 0; r < R; ++r) {
            const std::size_t row = static_cast<std::size_t>(s) * R + r, src = static_cast<std::size_t>(s) * w.T + r;
            const int next = w.inputs[src + 1];
            std::copy_n(embedding.data() + static_cast<std::size_t>(next) * D, D, b.e.data() + row * D);
            std::copy_n(t.states.data() + src * D, D, b.f.data() + row * D);
            std::copy_n(t.states.data() + (src + 1) * D, D, b.target_f.data() + row * D);
            std::copy_n(t.probs.data() + (src + 1) * V, V, b.probs.data() + row * V);
            b.counted[row] = r + 2 > prompt_len ? 1 : 0;
        }
    return b;
}

/// L = w·L_t + L_f and its parts (means over counted rows).
struct FeatureLoss {
    double total = 0.0, token = 0.0, feature = 0.0;
};

/// Adds the loss's gradient into dlogits (N, V) and dfeature (N, D) and returns its value: L_t = soft
/// cross-entropy of softmax(logits) against probs, L_f = SmoothL1 (β = 1, mean over D) of feature
/// against target_f, both averaged over counted rows, L = token_weight·L_t + L_f.
inline FeatureLoss feature_loss(ThreadPool& pool, float* dlogits, const float* logits, const float* probs, float* dfeature,
                                const float* feature, const float* target_f, int N, int V, int D,
                                const std::uint8_t* counted, double token_weight = 0.1) {
    FeatureLoss l;
    l.token = soft_cross_entropy(pool, dlogits, logits, probs, N, V, token_weight, counted);
    l.feature = smooth_l1(pool, dfeature, feature, target_f, N, D, 1.0, 1.0, counted);
    l.total = token_weight * l.token + l.feature;
    return l;
}

/// The trainable drafter: the connector (its own parameters and gradients) in front of a one-layer
/// TrainableLlama whose captured state 1 is the predicted feature.
class TrainableFeatureDrafter {
public:
    TrainableFeatureDrafter(const FeatureCheckpoint& init, ThreadPool& pool, TrainOptions options = {})
        : layer_(init.config, init.weights, pool, options),
          shape_{init.connector, init.config.hidden_size, init.sampler_size},
          params_(init.connector_weights),
          grads_(init.connector_weights),
          pool_(&pool),
          fast_(!options.reference),
          target_hash_(init.target_hash) {
        layer_.capture_hidden({1});
        zero_grad();
    }

    TrainableLlama& layer() { return layer_; }
    const TrainableLlama& layer() const { return layer_; }
    const ConnectorShape& connector_shape() const { return shape_; }
    ConnectorWeights& connector_params() { return params_; }
    ConnectorWeights& connector_grads() { return grads_; }

    void zero_grad() {
        layer_.zero_grad();
        for_each_tensor(grads_, shape_, [](const std::string&, std::vector<float>& t, std::size_t) {
            std::fill(t.begin(), t.end(), 0.0f);
        });
    }

    /// Runs connector and layer over the batch, computes the loss (gradients into dlogits/dhidden) and,
    /// with `backward`, adds every parameter's gradient.
    FeatureLoss forward_loss(const FeatureBatch& b, double token_weight, bool backward) {
        connector_forward(b);
        layer_.forward(ModelInput{.B = b.B, .T = b.R, .tokens = b.tokens, .input_embeddings = eta_});
        const FeatureLoss l = feature_loss(*pool_, layer_.dlogits().data(), layer_.logits().data(), b.probs.data(),
                                           layer_.dhidden(0).data(), layer_.hidden(0).data(), b.target_f.data(), b.rows(),
                                           b.V, b.D, b.counted.data(), token_weight);
        if (backward) {
            layer_.backward();
            connector_backward(b);
        }
        return l;
    }

    /// After forward_loss: how often the drafter's argmax is the target's over counted rows.
    double top1_agreement(const FeatureBatch& b) const {
        long hits = 0, rows = 0;
        const std::span<const float> z = layer_.logits();
        for (int r = 0; r < b.rows(); ++r) {
            if (!b.counted[r]) continue;
            const float* zr = z.data() + static_cast<std::size_t>(r) * b.V;
            const float* p = b.probs.data() + static_cast<std::size_t>(r) * b.V;
            hits += std::max_element(zr, zr + b.V) - zr == std::max_element(p, p + b.V) - p;
            ++rows;
        }
        return rows == 0 ? 0.0 : double(hits) / rows;
    }

    /// Clips the gradient of layer and connector together to global norm `max_norm`; returns the norm before.
    double clip_gradients(double max_norm) {
        const double a = grad_norm(*pool_, layer_.grads(), layer_.config());
        const double c = grad_norm(*pool_, grads_, shape_);
        const double norm = std::sqrt(a * a + c * c);
        if (norm > max_norm) {
            const float scale = static_cast<float>(max_norm / (norm + 1e-6));
            const auto scale_all = [&](const std::string&, std::vector<float>& t, std::size_t) {
                for (float& v : t) v *= scale;
            };
            for_each_tensor(layer_.grads(), layer_.config(), scale_all);
            for_each_tensor(grads_, shape_, scale_all);
        }
        return norm;
    }

    /// The drafter as it stands, for saving.
    FeatureCheckpoint checkpoint() const {
        return FeatureCheckpoint{layer_.config(), layer_.params(), shape_.kind, shape_.I, params_, target_hash_};
    }

private:
    void connector_forward(const FeatureBatch& b) {
        const int N = b.rows(), D = shape_.D, I = shape_.I;
        detail::require(b.D == D, "eagle", [&] {
            return "the batch's feature size " + std::to_string(b.D) + " differs from the drafter's " + std::to_string(D);
        });
        eta_.resize(static_cast<std::size_t>(N) * D);
        if (shape_.kind == Connector::kFc) {
            cat_.resize(static_cast<std::size_t>(N) * 2 * D);
            for (std::size_t r = 0; r < static_cast<std::size_t>(N); ++r) {
                std::copy_n(b.e.data() + r * D, D, cat_.data() + r * 2 * D);
                std::copy_n(b.f.data() + r * D, D, cat_.data() + r * 2 * D + D);
            }
            linear_forward(*pool_, eta_.data(), cat_.data(), params_.fc.data(), N, 2 * D, D, fast_);
            if (!params_.fc_bias.empty())
                for (std::size_t r = 0; r < static_cast<std::size_t>(N); ++r)
                    for (int d = 0; d < D; ++d) eta_[r * D + d] += params_.fc_bias[static_cast<std::size_t>(d)];
            return;
        }
        g_.resize(static_cast<std::size_t>(N) * I);
        u_.resize(g_.size());
        h_.resize(g_.size());
        linear_forward(*pool_, g_.data(), b.e.data(), params_.gate.data(), N, D, I, fast_);
        linear_forward(*pool_, u_.data(), b.f.data(), params_.up.data(), N, D, I, fast_);
        swiglu_forward(*pool_, h_.data(), g_.data(), u_.data(), N, I, fast_);
        linear_forward(*pool_, eta_.data(), h_.data(), params_.down.data(), N, I, D, fast_);
    }

    void connector_backward(const FeatureBatch& b) {
        const int N = b.rows(), D = shape_.D, I = shape_.I;
        const float* deta = layer_.input_embeddings_grad().data();
        if (shape_.kind == Connector::kFc) {
            linear_backward(*pool_, static_cast<float*>(nullptr), grads_.fc.data(), deta, cat_.data(), params_.fc.data(), N,
                            2 * D, D, scratch_, fast_);
            if (!grads_.fc_bias.empty())  // rows in order: the same sum on any number of threads
                for (std::size_t r = 0; r < static_cast<std::size_t>(N); ++r)
                    for (int d = 0; d < D; ++d) grads_.fc_bias[static_cast<std::size_t>(d)] += deta[r * D + d];
            return;
        }
        dh_.assign(h_.size(), 0.0f);
        linear_backward(*pool_, dh_.data(), grads_.down.data(), deta, h_.data(), params_.down.data(), N, I, D, scratch_, fast_);
        dg_.assign(h_.size(), 0.0f);
        du_.assign(h_.size(), 0.0f);
        swiglu_backward(*pool_, dg_.data(), du_.data(), dh_.data(), g_.data(), u_.data(), N, I, fast_);
        linear_backward(*pool_, static_cast<float*>(nullptr), grads_.gate.data(), dg_.data(), b.e.data(),
                        params_.gate.data(), N, D, I, scratch_, fast_);
        linear_backward(*pool_, static_cast<float*>(nullptr), grads_.up.data(), du_.data(), b.f.data(), params_.up.data(),
                        N, D, I, scratch_, fast_);
    }

    TrainableLlama layer_;
    ConnectorShape shape_;
    ConnectorWeights params_, grads_;
    ThreadPool* pool_;
    bool fast_ = true;
    std::string target_hash_;
    std::vector<float> eta_;             // (N, D) the layer's input
    std::vector<float> cat_;             // (N, 2D) FC: concat(e, f)
    std::vector<float> g_, u_, h_;       // (N, I) sampler: Gate(e), Up(f), SiLU(g) ⊙ u
    std::vector<float> dh_, dg_, du_;    // (N, I)
    LinearScratch<float> scratch_;
};

}  // namespace specdec::train
