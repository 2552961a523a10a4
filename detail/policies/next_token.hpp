// specdec/detail/policies/next_token.hpp — a model and a text: prefill, and the exact next-token distribution.
// SPDX-License-Identifier: MIT
#pragma once

// Every statistical check of an acceptance rule starts from the law the target gives the token after a
// text, under the Sampling the loop applies; drafters start from a cache that holds the prompt. Both are
// a few lines over the LanguageModel concept, here once.

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "../core/concepts.hpp"
#include "../core/error.hpp"
#include "../core/sampling.hpp"
#include "../core/tree.hpp"

namespace specdec {

/// Appends `tokens` to the model's KV cache: a forward over them as a chain, then a commit, `chunk`
/// tokens at a time (a long text need not fit in one forward's scratch rows). The cache is not reset
/// first; call model.reset() for a new text.
template <LanguageModel M>
void prefill(M& model, std::span<const int> tokens, int chunk = 32) {
    detail::require(chunk >= 1, "prefill", [&] { return "chunk must be >= 1 token, got " + std::to_string(chunk); });
    for (std::size_t at = 0; at < tokens.size(); at += chunk) {
        const auto part = tokens.subspan(at, std::min<std::size_t>(chunk, tokens.size() - at));
        const Tree t = Tree::chain(part);
        model.forward(t, 0);
        std::vector<int> all(part.size());
        for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
        model.commit(all);
    }
}

/// The model's logits (V) for the token after `text`, as the decoding loop computes them: the cache is
/// reset and holds text[0..n-2] afterwards, and the last token is scored as the root of a one-node tree
/// (the pending token of the loop's first step).
template <LanguageModel M>
std::vector<float> next_token_logits(M& model, std::span<const int> text) {
    detail::require(!text.empty(), "next_token", [] { return std::string("the text is empty (it needs at least one token)"); });
    model.reset();
    prefill(model, text.first(text.size() - 1));
    Tree root;
    root.add_root(text.back());
    const Rows rows = model.forward(root, 0);
    const std::span<const float> row = rows.row(0);
    return {row.begin(), row.end()};
}

/// The exact law (V, sums to 1) the decoding loop draws the token after `text` from under `sampling`:
/// processed_probs of the model's logits, a one-hot argmax when greedy. This is what a lossless
/// composition's output must follow (tests/loop/test_lossless_sampling.cpp).
template <LanguageModel M>
std::vector<float> next_token_distribution(M& model, std::span<const int> text, const Sampling& sampling) {
    sampling.validate();
    const std::vector<float> logits = next_token_logits(model, text);
    std::vector<float> p(logits.size());
    processed_probs(logits, sampling, p);
    return p;
}

}  // namespace specdec
