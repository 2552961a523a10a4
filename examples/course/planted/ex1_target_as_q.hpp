// examples/course/planted/ex1_target_as_q.hpp — a planted wrong solution of exercise 1 (the suite proves the checker
// fails it): uses the target's law p where the draft's law q belongs.
#pragma once

#include <specdec.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace course {

using namespace specdec;

/// Speculative sampling for a chain of drafts (Leviathan et al. 2023, Alg. 1).
struct ChainSampling {
    AcceptResult accept(const Tree& tree, Rows logits, const StepContext& ctx) const {
        if (ctx.sampling.greedy()) return greedy_walk(tree, logits);  // p is one-hot at temperature 0
        std::vector<float> p(logits.cols);
        AcceptResult r{{0}, 0};
        for (int node = 0;;) {
            processed_probs(logits.row(node), ctx.sampling, p);  // the target's law after `node`
            const std::vector<int> kids = tree.children(node);
            if (kids.empty()) break;  // every draft kept: the bonus comes from p
            require(kids.size() == 1 && tree.has_child_dist(node), "acceptor",
                    [] { return std::string("ChainSampling needs a chain of drafts sampled from a recorded q"); });
            const int x = tree[kids[0]].token;
            const std::vector<float> q = p;  // PLANTED BUG: the target's law used as q
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
