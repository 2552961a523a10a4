// examples/course/planted/ex6_log_of_softmax.hpp — a planted wrong solution of exercise 6 (the suite proves the checker
// fails it): takes log q_j as the log of the float softmax: -inf for a logit far below the maximum.
#pragma once

#include <specdec.hpp>

#include <algorithm>
#include <cmath>
#include <span>

namespace course {

using namespace specdec;

/// Forward KL, the distillation loss (EDD, "Effective Draft Decoder with Pruned Candidate Tree", Eq. 4):
/// the mean over N rows of KL(p_r || q_r) = Σ_j p_rj (log p_rj - log q_rj), q_r = softmax(logits_r), p_r
/// a target distribution (rows of V). Adds weight · d(mean)/d(logits) to dlogits and returns the mean. Shapes: (N, V) each.
inline double forward_kl(std::span<const float> target_probs, std::span<const float> logits, std::span<float> dlogits,
                         int N, int V, double weight = 1.0) {
    double total = 0.0;
    for (int r = 0; r < N; ++r) {
        const float* z = logits.data() + static_cast<std::size_t>(r) * V;
        const float* p = target_probs.data() + static_cast<std::size_t>(r) * V;
        float* dz = dlogits.data() + static_cast<std::size_t>(r) * V;
        double m = z[0], sum = 0.0;
        for (int j = 1; j < V; ++j) m = std::max<double>(m, z[j]);
        for (int j = 0; j < V; ++j) sum += std::exp(z[j] - m);
        const double lse = m + std::log(sum);  // log Σ exp(z): log q_j = z_j - lse
        for (int j = 0; j < V; ++j) {
            const float qj = static_cast<float>(std::exp(z[j] - lse));  // PLANTED BUG: log q_j taken as log(softmax), in float
            if (p[j] > 0) total += p[j] * (std::log(double(p[j])) - std::log(qj));  // 0 log 0 = 0
            // d KL / d z_j = q_j - p_j (the softmax Jacobian folded in), for the mean over N rows
            dz[j] += static_cast<float>(weight / N * (std::exp(z[j] - lse) - p[j]));
        }
    }
    return total / N;
}

}  // namespace course
