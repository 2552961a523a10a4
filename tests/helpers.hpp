// Small models and statistics shared by the tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "specdec.hpp"

namespace test {

/// A tiny Llama; `gqa` halves the kv heads.
inline specdec::Config tiny_config(bool gqa = true, int vocab = 64) {
    return specdec::Config{.hidden_size = 32,
                           .intermediate_size = 48,
                           .num_hidden_layers = 2,
                           .num_attention_heads = 4,
                           .num_key_value_heads = gqa ? 2 : 4,
                           .vocab_size = vocab,
                           .max_position_embeddings = 128};
}

/// Upper critical value of the chi-square distribution (Wilson–Hilferty), for z standard deviations.
inline double chi_square_critical(int dof, double z = 3.09 /* p = 0.001 */) {
    const double a = 2.0 / (9.0 * dof);
    return dof * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

/// Pearson's statistic of observed counts against expected probabilities, pooling cells whose expected
/// count is below 5 into one (the usual validity rule). Returns {statistic, degrees of freedom}.
struct ChiSquare {
    double statistic = 0;
    int dof = 0;
};
template <class Key>
ChiSquare chi_square(const std::map<Key, int>& observed, const std::map<Key, double>& expected, int n) {
    ChiSquare r;
    double pooled_obs = 0, pooled_exp = 0;
    int cells = 0;
    for (const auto& [key, p] : expected) {
        const auto it = observed.find(key);
        const double o = it == observed.end() ? 0.0 : it->second, e = p * n;
        if (e < 5.0) {
            pooled_obs += o;
            pooled_exp += e;
            continue;
        }
        r.statistic += (o - e) * (o - e) / e;
        ++cells;
    }
    // Outcomes the target gives probability ~0 but that were observed land in the pool too.
    for (const auto& [key, o] : observed)
        if (!expected.count(key)) pooled_obs += o;
    if (pooled_exp > 0) {
        r.statistic += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / std::max(pooled_exp, 1.0);
        ++cells;
    }
    r.dof = cells - 1;
    return r;
}

/// Exact P(t1, t2 | prompt) of `target` under `s`: one forward over the root and each first token.
template <class Model>
std::map<std::pair<int, int>, double> exact_two_tokens(Model& target, const std::vector<int>& prompt,
                                                       const specdec::Sampling& s) {
    const int V = target.vocab_size();
    std::map<std::pair<int, int>, double> out;
    std::vector<float> p1(V), p2(V);
    target.reset();
    specdec::prefill(target, std::span<const int>(prompt).first(prompt.size() - 1));
    specdec::Tree t;
    t.add_root(prompt.back());
    for (int a = 0; a < V; ++a) t.add(a, 0);
    const specdec::Rows r = target.forward(t, 0);
    specdec::processed_probs(r.row(0), s, p1);
    for (int a = 0; a < V; ++a) {
        specdec::processed_probs(r.row(1 + a), s, p2);
        for (int b = 0; b < V; ++b)
            if (p1[a] * p2[b] > 0) out[{a, b}] = double(p1[a]) * p2[b];
    }
    return out;
}

/// How deep a builder drafts when nothing limits it (Chain, ExpandedChain: gamma; KAryTree: its levels;
/// a fork: max_depth).
template <class Builder>
int draft_depth(const Builder& b) {
    if constexpr (requires { b.gamma; }) return b.gamma;
    else if constexpr (requires { b.k_config.size(); }) return static_cast<int>(b.k_config.size());
    else if constexpr (requires { b.max_depth; b.stop; }) return b.max_depth;  // MCSD's forks (DynamicFork, TargetInitialisedFork)
    else return 0;
}

/// How often each pair of first two tokens came out of `runs` generations (seeds 0..runs-1), each just
/// long enough (at least two tokens) that the loop lets the first step draft as deep as the builder does:
/// the room left is max_new_tokens - 1.
template <class Model, class P, class Builder, class Acc>
std::map<std::pair<int, int>, int> sampled_two_tokens(Model& target, P& proposer, Builder builder, Acc acceptor,
                                                      const std::vector<int>& prompt, const specdec::Sampling& s, int runs) {
    const int max_new_tokens = std::max(2, draft_depth(builder) + 1);
    std::map<std::pair<int, int>, int> counts;
    specdec::TreeVerifier verifier;
    for (int seed = 0; seed < runs; ++seed) {
        const specdec::Generation g = specdec::speculative_generate(
            target, proposer, builder, verifier, acceptor, prompt,
            specdec::GenerateOptions{.max_new_tokens = max_new_tokens, .sampling = s, .seed = static_cast<std::uint64_t>(seed)});
        ++counts[{g.tokens[0], g.tokens[1]}];
    }
    return counts;
}

/// A drafter whose next-token law depends only on the node's token: a few listed probabilities, the
/// rest of the mass spread evenly over the other tokens; tokens without a row are uniform (1/vocab).
/// It records the nodes each propose() asked about, and their tokens: the expanded nodes, depth by depth.
struct MarkovDrafter {
    std::map<int, std::map<int, float>> table;
    int vocab = 16;
    std::vector<std::vector<int>> asked{};
    std::vector<std::vector<int>> asked_tokens{};
    std::vector<float> out{};

    int vocab_size() const { return vocab; }
    void start(std::span<const int>) {}
    void observe(const specdec::StepOutcome&) {}
    std::vector<float> law(int token) const {
        std::vector<float> p(vocab, 1.0f / vocab);
        const auto row = table.find(token);
        if (row == table.end()) return p;
        float listed = 0.0f;
        for (const auto& [t, v] : row->second) listed += v;
        const float rest = (1.0f - listed) / static_cast<float>(vocab - static_cast<int>(row->second.size()));
        for (int t = 0; t < vocab; ++t) p[t] = row->second.count(t) ? row->second.at(t) : rest;
        return p;
    }
    specdec::Rows propose(const specdec::Tree& tree, std::span<const int> nodes) {
        asked.emplace_back(nodes.begin(), nodes.end());
        asked_tokens.emplace_back();
        out.clear();
        for (int n : nodes) {
            asked_tokens.back().push_back(tree[n].token);
            for (float p : law(tree[n].token)) out.push_back(std::log(p));  // softmax(log p) = p
        }
        return specdec::Rows{out, vocab};
    }
};

/// A deterministic token drafter with no law (like Max-Gram): after token t it proposes (5t + 1) mod V,
/// three tokens per call. Cheap, often wrong, sometimes right: acceptance is partial.
struct Stepper {
    int vocab = 64;
    int per_call = 3;
    int vocab_size() const { return vocab; }
    void start(std::span<const int>) {}
    void observe(const specdec::StepOutcome&) {}
    specdec::Draft draft(std::span<const int> after, int limit, const specdec::StepContext& ctx) {
        int last = after.empty() ? ctx.tokens.back() : after.back();
        specdec::Draft d;
        for (int i = 0; i < std::min(limit, per_call); ++i) d.push_back({last = (5 * last + 1) % vocab, {}, false});
        return d;
    }
};

/// One expected node of a top-k draft tree: its token, its parent and the drafter's probability of it.
struct ExpectNode {
    int token, parent;
    float prob;
};

/// A top-k tree (PCT, EAGLE-2) holds exactly these nodes, in this order.
inline void check_topk_tree(const specdec::Tree& t, const std::vector<ExpectNode>& want) {
    REQUIRE(t.size() == static_cast<int>(want.size()));
    for (int i = 0; i < t.size(); ++i) {
        CAPTURE(i);
        CHECK(t[i].token == want[i].token);
        CHECK(t[i].parent == want[i].parent);
        if (i > 0) CHECK_THAT(t[i].draft_prob, Catch::WithinRel(want[i].prob, 1e-5f));
        if (i > 0) CHECK(t[i].draw == specdec::Draw::kTopK);
    }
}

/// Whether two models' tensors (visited by for_each_tensor) are equal bit for bit.
inline bool same_bits(const specdec::Weights& a, const specdec::Weights& b, const specdec::Config& c) {
    std::vector<const std::vector<float>*> xs, ys;
    specdec::for_each_tensor(a, c, [&](const std::string&, const std::vector<float>& t, std::size_t) { xs.push_back(&t); });
    specdec::for_each_tensor(b, c, [&](const std::string&, const std::vector<float>& t, std::size_t) { ys.push_back(&t); });
    if (xs.size() != ys.size()) return false;
    for (std::size_t i = 0; i < xs.size(); ++i)
        if (xs[i]->size() != ys[i]->size() || std::memcmp(xs[i]->data(), ys[i]->data(), xs[i]->size() * 4) != 0) return false;
    return true;
}

}  // namespace test
