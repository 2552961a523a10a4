// specdec/detail/methods/mcsd/train_decision.hpp — logging drafting steps and training improved MCSD's decision models on them.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "../../core/concepts.hpp"
#include "../../core/rng.hpp"
#include "../../core/sampling.hpp"
#include "../../core/tree.hpp"
#include "../../model/thread_pool.hpp"
#include "../../train/optimizer.hpp"
#include "decision_model.hpp"

namespace specdec {

/// One logged drafting step: a token x drawn from the drafter's law q at a position of a text, and the
/// target's verdict. Both decision models' inputs and labels (improved MCSD §3.3).
struct DecisionSample {
    std::vector<float> hidden;       // (D) the drafter's last hidden state where q was computed (Type 1's input)
    std::vector<float> law;          // (1 + top_k) law_features(q) (Type 2's input)
    float acceptance = 0.0f;         // Type 1's label: min(1, p(x)/q(x))
    float accepted = 0.0f;           // Type 2's label: 1 if speculative sampling kept x (u < p/q), else 0
};

/// Logs one drafting step per position of each text: the drafter and the target each read the text once
/// (a chain forward, in chunks), the drafter's law q draws x, and the target's law p judges it. The
/// drafter must capture its last layer (capture_hidden({num_layers})) for Type 1's input.
template <LanguageModel Target, ExposesHidden Drafter>
std::vector<DecisionSample> log_drafting_steps(Target& target, Drafter& drafter, const std::vector<std::vector<int>>& texts,
                                               const Sampling& sampling, int top_k, std::uint64_t seed) {
    std::vector<DecisionSample> out;
    const int V = target.vocab_size();
    std::vector<float> p(V), q(V);
    const StepRng rng{seed, 0, RngStream::kUser};
    for (std::size_t t = 0; t < texts.size(); ++t) {
        const std::vector<int>& text = texts[t];
        target.reset();
        drafter.reset();
        for (std::size_t at = 0; at < text.size(); at += 32) {
            const std::size_t n = std::min<std::size_t>(32, text.size() - at);
            const Tree chunk = Tree::chain(std::span<const int>(text).subspan(at, n));
            const Rows pl = target.forward(chunk, 0);
            const Rows ql = drafter.forward(chunk, 0);
            const Rows h = drafter.hidden(0);
            for (std::size_t i = 0; i < n; ++i) {
                const int row = static_cast<int>(i);
                processed_probs(pl.row(row), sampling, p);
                draft_probs(ql.row(row), sampling, q);
                const std::uint32_t node = static_cast<std::uint32_t>(at + i);
                const int x = sample_index(q, rng.uniform(static_cast<std::uint32_t>(t), 2 * node));
                const float ratio = std::min(1.0f, p[x] / q[x]);
                DecisionSample s;
                s.hidden.assign(h.row(row).begin(), h.row(row).end());
                s.law = law_features(q, top_k);
                s.acceptance = ratio;
                s.accepted = rng.uniform(static_cast<std::uint32_t>(t), 2 * node + 1) < ratio ? 1.0f : 0.0f;
                out.push_back(std::move(s));
            }
            std::vector<int> all(n);
            std::iota(all.begin(), all.end(), 0);
            target.commit(all);
            drafter.commit(all);
        }
    }
    target.reset();
    drafter.reset();
    return out;
}

namespace train {

struct DecisionTraining {
    int epochs = 20;
    int batch = 64;
    float lr = 3e-3f;
    std::uint64_t seed = 1;  // shuffles the samples
};

/// Mean binary cross-entropy of the model on samples (soft labels allowed: Type 1's min(1, p/q)).
inline double decision_loss(const DecisionModel& m, const std::vector<DecisionSample>& data) {
    double loss = 0.0;
    for (const DecisionSample& s : data) {
        const bool hidden = m.config().input == DecisionInput::kDraftHidden;
        const float y = hidden ? s.acceptance : s.accepted;
        const double z = m.logit(hidden ? s.hidden : s.law);
        // BCE with logits, stable: max(z, 0) - z y + log(1 + exp(-|z|)).
        loss += std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));
    }
    return data.empty() ? 0.0 : loss / static_cast<double>(data.size());
}

/// Trains a decision model by AdamW (train::AdamW, no weight decay) on binary cross-entropy against its
/// type's label; returns the loss over `data` before training and after each epoch. The MLP is a few
/// thousand weights, so its backward is plain loops.
inline std::vector<double> train_decision_model(DecisionModel& m, const std::vector<DecisionSample>& data,
                                                const DecisionTraining& opt) {
    ThreadPool pool(1);
    AdamW<DecisionModelConfig, DecisionWeights> adam(m.config(), m.weights(), AdamWOptions{.weight_decay = 0.0f});
    std::vector<double> curve{decision_loss(m, data)};
    std::vector<int> order(data.size());
    std::iota(order.begin(), order.end(), 0);
    const StepRng rng{opt.seed, 0, RngStream::kUser};
    const bool hidden = m.config().input == DecisionInput::kDraftHidden;
    const int L = m.config().n_layers;
    for (int e = 0; e < opt.epochs; ++e) {
        for (std::size_t i = order.size(); i > 1; --i)  // Fisher-Yates, counter-based coins
            std::swap(order[i - 1], order[static_cast<std::size_t>(rng.uniform(static_cast<std::uint32_t>(e),
                                                                               static_cast<std::uint32_t>(i)) * i)]);
        for (std::size_t b0 = 0; b0 < order.size(); b0 += opt.batch) {
            const std::size_t b1 = std::min(order.size(), b0 + opt.batch);
            DecisionWeights grads = m.weights();
            for (auto& w : grads.w) std::fill(w.begin(), w.end(), 0.0f);
            for (auto& b : grads.b) std::fill(b.begin(), b.end(), 0.0f);
            for (std::size_t s = b0; s < b1; ++s) {
                const DecisionSample& ex = data[order[s]];
                const std::vector<float>& x = hidden ? ex.hidden : ex.law;
                std::vector<std::vector<float>> acts;
                const float z = m.logit(x, &acts);
                const float y = hidden ? ex.acceptance : ex.accepted;
                std::vector<float> dy{(1.0f / (1.0f + std::exp(-z)) - y) / static_cast<float>(b1 - b0)};  // dBCE/dz
                for (int l = L - 1; l >= 0; --l) {
                    const std::vector<float>& in = l == 0 ? x : acts[l - 1];
                    const int n_in = static_cast<int>(in.size()), n_out = static_cast<int>(dy.size());
                    std::vector<float> dx(n_in, 0.0f);
                    for (int o = 0; o < n_out; ++o) {
                        grads.b[l][o] += dy[o];
                        for (int i = 0; i < n_in; ++i) {
                            grads.w[l][static_cast<std::size_t>(o) * n_in + i] += dy[o] * in[i];
                            dx[i] += dy[o] * m.weights().w[l][static_cast<std::size_t>(o) * n_in + i];
                        }
                    }
                    if (l > 0)
                        for (int i = 0; i < n_in; ++i)
                            if (acts[l - 1][i] <= 0.0f) dx[i] = 0.0f;  // ReLU
                    dy.swap(dx);
                }
            }
            adam.step(pool, m.weights(), grads, opt.lr);
        }
        curve.push_back(decision_loss(m, data));
    }
    return curve;
}

}  // namespace train

}  // namespace specdec
