// examples/course/planted/ex1_top_p_ignored.hpp — a planted wrong solution of exercise 1 (the suite proves the checker
// fails it): computes the target's law by hand (softmax(logits / T), then the top-k) and forgets top-p.
#pragma once

#include <specdec.hpp>

#include <algorithm>
#include <functional>
#include <cstdint>
#include <span>
#include <vector>

namespace course {

using namespace specdec;

/// PLANTED BUG: the target's law by hand: softmax(logits / T), then the top-k, renormalised -- top-p forgotten.
inline void my_probs(std::span<const float> logits, const Sampling& s, std::span<float> p) {
    std::copy(logits.begin(), logits.end(), p.begin());
    softmax(p, s.temperature);
    if (s.top_k > 0 && s.top_k < static_cast<int>(p.size())) {
        std::vector<float> sorted(p.begin(), p.end());
        std::sort(sorted.begin(), sorted.end(), std::greater<float>());
        const float cut = sorted[static_cast<std::size_t>(s.top_k - 1)];
        int kept = 0;
        double sum = 0.0;
        for (float& v : p) {
            if (v >= cut && kept < s.top_k) { ++kept; sum += v; } else v = 0.0f;
        }
        for (float& v : p) v = static_cast<float>(v / sum);
    }
}

/// Speculative sampling for a chain of drafts (Leviathan et al. 2023, Alg. 1).
struct ChainSampling {
    AcceptResult accept(const Tree& tree, Rows logits, const StepContext& ctx) const {
        if (ctx.sampling.greedy()) return greedy_walk(tree, logits);  // p is one-hot at temperature 0
        std::vector<float> p(logits.cols);
        AcceptResult r{{0}, 0};
        for (int node = 0;;) {
            my_probs(logits.row(node), ctx.sampling, p);  // the target's law after `node`
            const std::vector<int> kids = tree.children(node);
            if (kids.empty()) break;  // every draft kept: the bonus comes from p
            require(kids.size() == 1 && tree.has_child_dist(node), "acceptor",
                    [] { return std::string("ChainSampling needs a chain of drafts sampled from a recorded q"); });
            const int x = tree[kids[0]].token;
            const std::span<const float> q = tree.child_dist(node);
            // u < p/q written without the division: q(x) > 0 for a drawn x, but stay safe.
            if (ctx.rng.uniform(static_cast<std::uint32_t>(node), 0) * q[x] < p[x]) {
                r.path.push_back(node = kids[0]);
                continue;
            }
            for (int t = 0; t < logits.cols; ++t) p[t] = std::max(0.0f, p[t] - q[t]);  // the residual
            break;
        }
        // sample_index normalises: p need not sum to 1.
        r.bonus = sample_index(p, ctx.rng.uniform(static_cast<std::uint32_t>(r.path.back()), kBonusCoin));
        return r;
    }
};

}  // namespace course
