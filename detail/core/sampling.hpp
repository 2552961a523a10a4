// specdec/detail/core/sampling.hpp — temperature / top-k / top-p processing, argmax, top indices and inverse-CDF sampling.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "error.hpp"

namespace specdec {

/// How a row of logits becomes the distribution we sample from. Applied identically to target and
/// draft rows; losslessness is always stated against the *processed* target distribution.
struct Sampling {
    float temperature = 0.0f;  // 0 = greedy (argmax); > 0 divides the logits
    int top_k = 0;             // keep the k most likely tokens; 0 = all
    float top_p = 1.0f;        // keep the smallest set whose mass reaches top_p; 1 = all

    bool greedy() const { return temperature == 0.0f; }

    /// Throws naming the field and value; called once by the decoding loop.
    void validate() const {
        detail::require(std::isfinite(temperature) && temperature >= 0.0f, "sampling", [&] {
            return "temperature must be a finite number >= 0 (0 = greedy), got " + std::to_string(temperature);
        });
        detail::require(top_k >= 0, "sampling", [&] { return "top_k must be >= 0 (0 = off), got " + std::to_string(top_k); });
        detail::require(top_p > 0.0f && top_p <= 1.0f, "sampling",
                        [&] { return "top_p must be in (0, 1], got " + std::to_string(top_p); });
    }
};

/// Index of the largest value; ties go to the lowest index (so every backend agrees).
inline int argmax(std::span<const float> row) {
    return static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
}

namespace detail {

/// Indices of the `n` largest of `values` (a vector or span of numbers), largest first; ties go to the
/// lower index, as in argmax, so every tree builder ranks alike (the drafter's top-k children, the most
/// probable nodes of a depth). `n` is clipped to [0, size].
template <class Values>
std::vector<int> top_indices(const Values& values, int n) {
    std::vector<int> order(std::size(values));
    std::iota(order.begin(), order.end(), 0);
    n = std::clamp(n, 0, static_cast<int>(order.size()));
    std::partial_sort(order.begin(), order.begin() + n, order.end(),
                      [&](int a, int b) { return values[a] > values[b] || (values[a] == values[b] && a < b); });
    order.resize(static_cast<std::size_t>(n));
    return order;
}

}  // namespace detail

/// In-place softmax of `row` scaled by 1/temperature.
inline void softmax(std::span<float> row, float temperature = 1.0f) {
    const float mx = *std::max_element(row.begin(), row.end());
    double sum = 0.0;
    for (float& v : row) {
        v = std::exp((v - mx) / temperature);
        sum += v;
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (float& v : row) v *= inv;
}

/// The processed target distribution: one-hot argmax when greedy, else softmax(logits / T) restricted
/// to top-k and then to the top-p nucleus, renormalised.
inline void processed_probs(std::span<const float> logits, const Sampling& s, std::span<float> out) {
    std::copy(logits.begin(), logits.end(), out.begin());
    if (s.greedy()) {
        const int best = argmax(logits);
        std::fill(out.begin(), out.end(), 0.0f);
        out[best] = 1.0f;
        return;
    }
    softmax(out, s.temperature);
    const int n = static_cast<int>(out.size());
    const bool cut_k = s.top_k > 0 && s.top_k < n;
    if (!cut_k && s.top_p >= 1.0f) return;
    // Rank tokens once; ties by index so the kept set is deterministic.
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    const auto by_prob = [&](int a, int b) { return out[a] > out[b] || (out[a] == out[b] && a < b); };
    std::sort(order.begin(), order.end(), by_prob);
    int keep = cut_k ? s.top_k : n;
    if (s.top_p < 1.0f) {
        double mass = 0.0;  // mass of the top-k set, so top-p is relative to what top-k kept
        for (int i = 0; i < keep; ++i) mass += out[order[i]];
        double acc = 0.0;
        for (int i = 0; i < keep; ++i) {
            acc += out[order[i]];
            if (acc >= s.top_p * mass) { keep = i + 1; break; }
        }
    }
    double kept = 0.0;
    for (int i = 0; i < keep; ++i) kept += out[order[i]];
    for (int i = keep; i < n; ++i) out[order[i]] = 0.0f;
    const float inv = static_cast<float>(1.0 / kept);
    for (int i = 0; i < keep; ++i) out[order[i]] *= inv;
}

/// What a tree builder ranks and samples draft tokens by. Under sampling it is the processed draft
/// distribution q; under greedy decoding it is softmax at T = 1, so builders still see the drafter's
/// confidence (CAPE, PCT need it) — any draw is lossless when the acceptor matches the target argmax.
inline void draft_probs(std::span<const float> logits, const Sampling& s, std::span<float> out) {
    if (s.greedy()) {
        std::copy(logits.begin(), logits.end(), out.begin());
        softmax(out);
    } else {
        processed_probs(logits, s, out);
    }
}

/// Inverse-CDF draw from `probs` (need not be normalised) with a uniform u in [0, 1). Never returns a
/// zero-probability token.
inline int sample_index(std::span<const float> probs, float u) {
    double total = 0.0;
    for (float p : probs) total += p;
    detail::require(total > 0.0, "sampling", [] { return std::string("cannot sample from an all-zero distribution"); });
    const double target = u * total;
    double acc = 0.0;
    int last_nonzero = 0;
    for (int i = 0; i < static_cast<int>(probs.size()); ++i) {
        if (probs[i] <= 0.0f) continue;
        acc += probs[i];
        last_nonzero = i;
        if (target < acc) return i;
    }
    return last_nonzero;  // u * total rounded up to the full mass
}

}  // namespace specdec
