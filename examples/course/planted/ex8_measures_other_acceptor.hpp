// examples/course/planted/ex8_measures_other_acceptor.hpp — a planted wrong solution of exercise 8 (the suite proves the checker
// fails it): measure_loss measures another acceptor (one that keeps every draft), not TypicalAcceptance{}.
#pragma once

#include <specdec.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace course {

using namespace specdec;

/// Typical acceptance (Medusa, Cai et al. 2024): p(x) > min(epsilon, delta * exp(-H(p))).
struct TypicalAcceptance {
    float epsilon = 0.3f;
    float delta = 0.09f;

    AcceptResult accept(const Tree& tree, Rows logits, const StepContext& ctx) const {
        if (ctx.sampling.greedy()) return greedy_walk(tree, logits);
        std::vector<float> p(logits.cols);
        AcceptResult r{{0}, 0};
        for (int node = 0;;) {
            processed_probs(logits.row(node), ctx.sampling, p);
            const std::vector<int> kids = tree.children(node);
            if (kids.empty()) break;
            double h = 0.0;  // entropy in nats
            for (float v : p)
                if (v > 0.0f) h -= v * std::log(double(v));
            const double threshold = std::min(double(epsilon), delta * std::exp(-h));
            if (p[tree[kids[0]].token] <= threshold) break;  // not typical: stop here
            r.path.push_back(node = kids[0]);
        }
        r.bonus = sample_index(p, ctx.rng.uniform(static_cast<std::uint32_t>(r.path.back()), kBonusCoin));
        return r;
    }
};

inline check::Report measure_loss(CpuModel& target, CpuModel& draft, const std::vector<std::vector<int>>& prompts) {
    // PLANTED BUG: measures a different acceptor (keeps every draft), not typical acceptance
    struct KeepAll { AcceptResult accept(const Tree& t, Rows l, const StepContext& c) const { return TypicalAcceptance{.epsilon = 0.0f, .delta = 0.0f}.accept(t, l, c); } };
    const auto make = [&] { return check::Composition{ModelProposer(draft), Chain{.gamma = 3}, KeepAll{}}; };
    return check::check_lossless(target, make, prompts, Sampling{.temperature = 1.0f}, 2000);
}

}  // namespace course
