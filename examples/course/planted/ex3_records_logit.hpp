// examples/course/planted/ex3_records_logit.hpp — a planted wrong solution of exercise 3 (the suite proves the checker
// fails it): records the logit instead of q[token] as draft_prob.
#pragma once

#include <specdec.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

namespace course {

using namespace specdec;

/// A k-ary token tree: k_config[d] top-k children for every node at depth d.
struct TopKTree {
    std::vector<int> k_config;

    template <ScoresNodes P>
    Tree build(P& proposer, int root_token, const StepContext& ctx) {
        Tree tree;
        std::vector<int> frontier{tree.add_root(root_token)};
        std::vector<float> q(proposer.vocab_size());
        const int depth = std::min(static_cast<int>(k_config.size()), std::max(ctx.room, 0));
        for (int d = 0; d < depth; ++d) {
            const Rows logits = proposer.propose(tree, frontier);  // one draft forward for the whole depth
            std::vector<int> next;
            for (int j = 0; j < static_cast<int>(frontier.size()); ++j) {
                draft_probs(logits.row(j), ctx.sampling, q);  // row j belongs to frontier[j]
                for (int t : most_likely(q, k_config[d]))
                    next.push_back(tree.add(t, frontier[j], logits.row(j)[t], Draw::kTopK));  // PLANTED BUG: records the logit, not q[token]
            }
            frontier = std::move(next);
        }
        return tree;
    }

    /// The `k` most likely tokens of q, most likely first; ties go to the lower token id (as argmax does).
    static std::vector<int> most_likely(const std::vector<float>& q, int k) {
        std::vector<int> order(q.size());
        std::iota(order.begin(), order.end(), 0);
        k = std::clamp(k, 0, static_cast<int>(q.size()));
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [&](int a, int b) { return q[a] > q[b] || (q[a] == q[b] && a < b); });
        order.resize(static_cast<std::size_t>(k));
        return order;
    }
};

}  // namespace course
