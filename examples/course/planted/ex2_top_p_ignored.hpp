// examples/course/planted/ex2_top_p_ignored.hpp — a planted wrong solution of exercise 2 (the suite proves the checker
// fails it): computes the target's law by hand (softmax(logits / T), then the top-k) and forgets top-p.
#pragma once

#include <specdec.hpp>

#include <algorithm>
#include <functional>
#include <cstdint>
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

/// Multi-draft speculative sampling (SpecInfer; without replacement: the improved MCSD paper, §2.2).
struct MultiDraft {
    AcceptResult accept(const Tree& tree, Rows logits, const StepContext& ctx) const {
        if (ctx.sampling.greedy()) return greedy_walk(tree, logits);
        const int V = logits.cols;
        std::vector<float> p(V), q(V);
        AcceptResult r{{0}, 0};
        for (int node = 0;;) {
            my_probs(logits.row(node), ctx.sampling, p);
            const std::vector<int> kids = tree.children(node);
            if (kids.empty()) break;
            require(tree.has_child_dist(node), "acceptor", [] { return std::string("MultiDraft needs siblings sampled from a recorded q"); });
            const auto qs = tree.child_dist(node);
            q.assign(qs.begin(), qs.end());
            const bool without = tree[kids[0]].draw == Draw::kSampledWithoutReplacement;
            int accepted = -1;
            for (std::size_t i = 0; i < kids.size() && accepted < 0; ++i) {
                const int x = tree[kids[i]].token;
                if (ctx.rng.uniform(static_cast<std::uint32_t>(node), static_cast<std::uint32_t>(i)) * q[x] < p[x]) {
                    accepted = kids[i];
                    break;
                }
                normalised_residual(p, q);  // the next sibling is tested against what p has left
                if (without) {              // the next sibling was drawn from q with x removed
                    q[x] = 0.0f;
                    normalise(q);
                }
            }
            if (accepted < 0) break;  // every sibling rejected: the next token comes from the residual p
            r.path.push_back(node = accepted);
        }
        r.bonus = sample_index(p, ctx.rng.uniform(static_cast<std::uint32_t>(r.path.back()), kBonusCoin));
        return r;
    }

private:
    static void normalise(std::vector<float>& v) {
        double s = 0.0;
        for (float x : v) s += x;
        if (s <= 0.0) return;
        for (float& x : v) x = static_cast<float>(x / s);
    }
    /// p <- norm(max(0, p - q)); kept as it is when nothing is left (p == q: a rejection had probability 0).
    static void normalised_residual(std::vector<float>& p, const std::vector<float>& q) {
        std::vector<float> r(p.size());
        double s = 0.0;
        for (std::size_t i = 0; i < p.size(); ++i) s += (r[i] = std::max(0.0f, p[i] - q[i]));
        if (s <= 0.0) return;
        for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<float>(r[i] / s);
    }
};

}  // namespace course
