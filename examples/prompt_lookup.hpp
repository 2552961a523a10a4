// A Proposer of your own: prompt lookup, the drafter of lesson 08 (examples/08_prompt_lookup.cpp).
//
// Prompt lookup decoding (A. Saxena, 2023; llama.cpp's `lookup` example; `prompt_lookup_num_tokens` in
// HF transformers): a continuation often repeats spans of its text — names, quotes, code, a loop the
// model has fallen into. So find the last few tokens earlier in the text and propose what followed them.
// No model and no forward: a draft costs one scan of the text, and the target still verifies every token.
//
// The drafter chooses its tokens itself, so it is a DraftsTokens proposer (detail/core/concepts.hpp):
// vocab_size, start, observe and draft. It is deterministic: each DraftToken says `sampled = false`
// and records no law, the loop records q = one-hot, and SpeculativeSampling stays exact at any
// temperature (docs/writing_a_policy.md). tests/policies/test_prompt_lookup.cpp tests this very file.
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "specdec.hpp"

namespace example {

struct PromptLookup {
    int vocab = 0;      // the target's vocabulary size: a proposer must share the target's tokenizer
    int max_ngram = 3;  // match the text's last 3 tokens, else its last 2, else its last 1
    int max_draft = 8;  // tokens proposed per call

    int vocab_size() const { return vocab; }
    void start(std::span<const int>) {}             // no state: each call reads the whole text
    void observe(const specdec::StepOutcome&) {}    // the verdict is in the next call's text already

    /// Continues ctx.tokens (the prompt and everything committed, ending with the pending root) followed
    /// by `after` (this step's drafts so far) by at most `limit` tokens; none when nothing matches.
    /// Chain calls again with the longer `after` while a call yields, so a short copy grows to gamma.
    specdec::Draft draft(std::span<const int> after, int limit, const specdec::StepContext& ctx) const {
        std::vector<int> text(ctx.tokens.begin(), ctx.tokens.end());
        text.insert(text.end(), after.begin(), after.end());
        const int L = static_cast<int>(text.size()), n_out = std::min(limit, max_draft);
        for (int n = std::min(max_ngram, L - 1); n >= 1; --n) {
            // the latest earlier occurrence of the last n tokens that has a token after it
            for (int at = L - n - 1; at >= 0; --at) {
                if (!std::equal(text.begin() + at, text.begin() + at + n, text.end() - n)) continue;
                specdec::Draft out;
                for (int i = at + n; i < L && static_cast<int>(out.size()) < n_out; ++i)
                    out.push_back({.token = text[i], .q = {}, .sampled = false});
                return out;
            }
        }
        return {};
    }
};

static_assert(specdec::check_proposer<PromptLookup>());   // one readable error per missing member
static_assert(specdec::DraftsTokens<PromptLookup>);

}  // namespace example
