// specdec/detail/methods/mcsd/quality_loss.hpp — what a lossy method costs: distances between laws, and the target's likelihood of a text.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <map>
#include <span>
#include <vector>

#include "../../core/concepts.hpp"
#include "../../core/sampling.hpp"
#include "../../core/tree.hpp"
#include "../../check/lossless.hpp"
#include "../../policies/next_token.hpp"

namespace specdec {

/// Total-variation distance between an empirical law and exact probabilities: the checker's
/// (detail/check/lossless.hpp), one implementation.
using check::total_variation;

/// KL(empirical || exact) in nats; an observed outcome the exact law gives 0 makes it infinite.
template <class Key>
double kl_divergence(const std::map<Key, int>& counts, const std::map<Key, double>& exact, int n) {
    double d = 0.0;
    for (const auto& [k, c] : counts) {
        const auto it = exact.find(k);
        const double e = double(c) / n;
        if (it == exact.end() || it->second <= 0.0) return INFINITY;
        d += e * std::log(e / it->second);
    }
    return d;
}

/// Sum of log p(continuation[i] | prompt, continuation[..i]) under `model`'s processed law (`sampling`,
/// temperature > 0) — one forward over the continuation as a chain. How likely the target finds a
/// text; lossy decoding shifts it (improved MCSD reports MT-Bench instead, Table 1).
template <LanguageModel M>
double log_likelihood(M& model, std::span<const int> prompt, std::span<const int> continuation, const Sampling& sampling) {
    model.reset();
    prefill(model, prompt.first(prompt.size() - 1));
    std::vector<int> chain{prompt.back()};
    chain.insert(chain.end(), continuation.begin(), continuation.end() - (continuation.empty() ? 0 : 1));
    const Rows logits = model.forward(Tree::chain(chain), 0);
    std::vector<float> p(logits.cols);
    double ll = 0.0;
    for (std::size_t i = 0; i < continuation.size(); ++i) {
        processed_probs(logits.row(static_cast<int>(i)), sampling, p);
        ll += std::log(std::max(p[continuation[i]], 1e-30f));
    }
    model.reset();
    return ll;
}

}  // namespace specdec
