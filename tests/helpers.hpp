// Small models and statistics shared by the tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "specdec.hpp"

namespace test {

/// A JSON file of the test data, parsed (errors name the file).
inline specdec::json::Value read_json(const std::filesystem::path& file) {
    return specdec::json::parse(specdec::detail::read_text_file(file, "test"), file.string());
}

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

/// The attention blocks a Config can have: Llama's, Qwen2's (q/k/v biases), Qwen3's (per-head q/k norms).
enum class Block { kLlama, kQwen2, kQwen3 };

/// tiny_config(gqa, vocab) with the block `b`; Qwen3's gets head_dim 16 (not hidden / heads = 8), as
/// Qwen3's configs set head_dim apart from the width.
inline specdec::Config tiny_block_config(Block b, bool gqa = true, int vocab = 64) {
    specdec::Config c = tiny_config(gqa, vocab);
    c.qkv_bias = b == Block::kQwen2;
    c.qk_norm = b == Block::kQwen3;
    if (b == Block::kQwen3) c.attention_head_dim = 16;
    return c;
}

/// random_weights(c, seed, std_dev) whose q/k norm gains are 1 + N(0, 0.2) and biases N(0, 0.5): every
/// tensor of a Qwen block changes the logits. A Llama's are random_weights' exactly.
inline specdec::Weights random_block_weights(const specdec::Config& c, std::uint64_t seed, float std_dev) {
    specdec::Weights w = specdec::random_weights(c, seed, std_dev);
    specdec::detail::NormalStream normal{seed + 1000};
    specdec::for_each_tensor(w, c, [&](const std::string& name, std::vector<float>& t, std::size_t) {
        if (name.ends_with("q_norm.weight") || name.ends_with("k_norm.weight"))
            for (float& v : t) v = 1.0f + 0.2f * normal.next();
        else if (name.ends_with(".bias"))
            for (float& v : t) v = 0.5f * normal.next();
    });
    return w;
}

// The statistics and laws of the losslessness checks are the library's (specdec::check,
// detail/check/lossless.hpp); these names forward to them.
using specdec::check::ChiSquare;
using specdec::check::chi_square;
using specdec::check::chi_square_critical;

/// Exact P(t1, t2 | prompt) of `target` under `s` (check::exact_two_token_law).
template <class Model>
specdec::check::Law exact_two_tokens(Model& target, const std::vector<int>& prompt, const specdec::Sampling& s) {
    return specdec::check::exact_two_token_law(target, prompt, s);
}

/// How deep a builder drafts when nothing limits it (Chain, ExpandedChain: gamma; KAryTree: its levels;
/// a fork: max_depth); 0 otherwise. check::draft_depth also reads PCT's max_depth and EAGLE-2's depth.
template <class Builder>
int draft_depth(const Builder& b) {
    if constexpr (requires { b.gamma; }) return b.gamma;
    else if constexpr (requires { b.k_config.size(); }) return static_cast<int>(b.k_config.size());
    else if constexpr (requires { b.max_depth; b.stop; }) return b.max_depth;  // MCSD's forks (DynamicFork, TargetInitialisedFork)
    else return 0;
}

/// How often each pair of first two tokens came out of `runs` generations (seeds 0..runs-1), each
/// max(2, draft_depth + 1) tokens long (check::sampled_two_token_law).
template <class Model, class P, class Builder, class Acc>
specdec::check::Counts sampled_two_tokens(Model& target, P& proposer, Builder builder, Acc acceptor,
                                          const std::vector<int>& prompt, const specdec::Sampling& s, int runs) {
    specdec::TreeVerifier verifier;
    return specdec::check::sampled_two_token_law(target, proposer, builder, verifier, acceptor, prompt, s, runs,
                                                 std::max(2, draft_depth(builder) + 1));
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
