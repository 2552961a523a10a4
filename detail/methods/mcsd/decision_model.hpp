// specdec/detail/methods/mcsd/decision_model.hpp — improved MCSD's early-stop decision models: an MLP predicting a draft token's acceptance.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "../../core/error.hpp"
#include "../../core/rng.hpp"

namespace specdec {

/// What a decision model reads (improved MCSD §3.3).
enum class DecisionInput {
    kDraftHidden,  // Type 1: the drafter's last hidden state at the node whose law q the token is drawn from
    kDraftLaw,     // Type 2 (after Tandem transformers): the entropy and top-k probabilities of q
};

struct DecisionModelConfig {
    DecisionInput input = DecisionInput::kDraftLaw;
    int n_in = 5;        // features: the drafter's hidden size (Type 1), or 1 + top_k (Type 2)
    int hidden = 32;     // width of the hidden layers
    int n_layers = 2;    // linear layers: 3 for Type 1, 2 for Type 2 (§3.3)
    int top_k = 4;       // Type 2: how many of q's largest probabilities (the paper does not give k)
};

/// The MLP's parameters: layer l maps (out_l, in_l) with a bias; ReLU between layers, a sigmoid last.
struct DecisionWeights {
    std::vector<std::vector<float>> w;  // per layer (out, in)
    std::vector<std::vector<float>> b;  // per layer (out)
};

/// Calls f(name, tensor, shape) for every parameter (AdamW walks them so).
template <class P, class F>
    requires std::is_same_v<std::remove_const_t<P>, DecisionWeights>
void for_each_tensor(P& p, const DecisionModelConfig&, F&& f) {
    for (std::size_t l = 0; l < p.w.size(); ++l) {
        const std::int64_t out = static_cast<std::int64_t>(p.b[l].size());
        const std::int64_t in = out == 0 ? 0 : static_cast<std::int64_t>(p.w[l].size()) / out;
        f("layers." + std::to_string(l) + ".weight", p.w[l], std::vector<std::int64_t>{out, in});
        f("layers." + std::to_string(l) + ".bias", p.b[l], std::vector<std::int64_t>{out});
    }
}

/// Type 2's input: [entropy of q (nats), its top_k probabilities, largest first].
inline std::vector<float> law_features(std::span<const float> q, int top_k) {
    std::vector<float> out{0.0f};
    double h = 0.0;
    for (float v : q)
        if (v > 0.0f) h -= v * std::log(static_cast<double>(v));
    out[0] = static_cast<float>(h);
    std::vector<float> sorted(q.begin(), q.end());
    const int k = std::min<int>(top_k, static_cast<int>(sorted.size()));
    std::partial_sort(sorted.begin(), sorted.begin() + k, sorted.end(), std::greater<float>());
    out.insert(out.end(), sorted.begin(), sorted.begin() + k);
    out.resize(1 + top_k, 0.0f);
    return out;
}

/// A decision model: predict(x) is the predicted probability that the draft token the features describe
/// is accepted. Trained by train::train_decision_model (train_decision.hpp) on logged drafting steps.
class DecisionModel {
public:
    DecisionModel(DecisionModelConfig cfg, std::uint64_t seed) : cfg_(cfg) {
        detail::require(cfg.n_in >= 1 && cfg.hidden >= 1 && cfg.n_layers >= 1, "mcsd", [&] {
            return "DecisionModel: n_in " + std::to_string(cfg.n_in) + ", hidden " + std::to_string(cfg.hidden) +
                   ", n_layers " + std::to_string(cfg.n_layers) + " (each must be >= 1)";
        });
        const StepRng rng{seed, 0, RngStream::kUser};
        for (int l = 0; l < cfg.n_layers; ++l) {
            const int in = l == 0 ? cfg.n_in : cfg.hidden, out = l + 1 == cfg.n_layers ? 1 : cfg.hidden;
            // He-uniform initialisation for the ReLU layers.
            const float bound = std::sqrt(6.0f / static_cast<float>(in));
            std::vector<float> w(static_cast<std::size_t>(out) * in);
            for (std::size_t i = 0; i < w.size(); ++i)
                w[i] = bound * (2.0f * rng.uniform(static_cast<std::uint32_t>(l), static_cast<std::uint32_t>(i)) - 1.0f);
            weights_.w.push_back(std::move(w));
            weights_.b.emplace_back(out, 0.0f);
        }
    }

    const DecisionModelConfig& config() const { return cfg_; }
    DecisionWeights& weights() { return weights_; }
    const DecisionWeights& weights() const { return weights_; }

    /// The logit before the sigmoid, and every layer's output after its ReLU (acts[l], the backward's input).
    float logit(std::span<const float> x, std::vector<std::vector<float>>* acts = nullptr) const {
        detail::require(static_cast<int>(x.size()) == cfg_.n_in, "mcsd", [&] {
            return "DecisionModel: " + std::to_string(x.size()) + " features, the model reads " + std::to_string(cfg_.n_in);
        });
        std::vector<float> a(x.begin(), x.end()), next;
        for (int l = 0; l < cfg_.n_layers; ++l) {
            const int in = static_cast<int>(a.size()), out = static_cast<int>(weights_.b[l].size());
            next.assign(weights_.b[l].begin(), weights_.b[l].end());
            for (int o = 0; o < out; ++o)
                for (int i = 0; i < in; ++i) next[o] += weights_.w[l][static_cast<std::size_t>(o) * in + i] * a[i];
            if (l + 1 < cfg_.n_layers)
                for (float& v : next) v = std::max(v, 0.0f);
            if (acts != nullptr) acts->push_back(next);
            a.swap(next);
        }
        return a[0];
    }

    float predict(std::span<const float> x) const { return 1.0f / (1.0f + std::exp(-logit(x))); }

private:
    DecisionModelConfig cfg_;
    DecisionWeights weights_;
};

/// Improved MCSD's stopping rule (§3.3): stop drafting when every candidate's predicted acceptance is
/// below the threshold (0.4 for both model types).
inline bool stop_drafting(std::span<const float> predicted, float threshold = 0.4f) {
    return !predicted.empty() && std::all_of(predicted.begin(), predicted.end(), [&](float p) { return p < threshold; });
}

}  // namespace specdec
