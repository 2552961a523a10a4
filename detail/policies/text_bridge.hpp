// specdec/detail/policies/text_bridge.hpp — a drafter with a tokenizer of its own, drafting through the text.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../core/concepts.hpp"
#include "../core/error.hpp"
#include "../core/sampling.hpp"
#include "../core/text_codec.hpp"
#include "../core/tree.hpp"
#include "next_token.hpp"
#include "proposers.hpp"

namespace specdec {

/// A drafter whose tokenizer is not the target's (another family's small model): it drafts as text.
/// Each call decodes the target's tokens to text, encodes that text with the drafter's tokenizer, lets
/// the drafter continue it greedily, and encodes the new text with the target's tokenizer: those target
/// tokens are the drafts. This is the string-level exact match of Timor et al., "Accelerating LLM
/// Inference with Lossless Speculative Decoding Algorithms for Heterogeneous Vocabularies" (ICML 2025,
/// SLEM), as transformers' assisted generation runs it with an assistant_tokenizer.
///
/// Lossless: the drafts are chosen deterministically (`sampled = false`, q one-hot), so GreedyMatch
/// keeps the target's greedy text and SpeculativeSampling its law at any temperature; a poor mapping
/// costs acceptance, never correctness.
///
/// Where the target's tokens split differently from the re-encoded text (a word cut mid-way), the new
/// text is aligned on the last few tokens, then on the whole text, then encoded alone. The drafter's
/// cache is kept: each call re-encodes the text (linear in its length: the short contexts of speculative
/// decoding) and feeds the drafter only what changed since its last call.
template <LanguageModel Drafter>
class TextBridgeProposer {
public:
    /// `target`: the target's codec; `drafter_text`: the drafter's, whose encode gives the ids the drafter
    /// reads from the start of a text (its BOS first: text_codec(tokenizer, true)). `target_vocab`: the
    /// target model's vocabulary size. `max_draft`: drafter tokens generated per call.
    TextBridgeProposer(Drafter& drafter, TextCodec target, TextCodec drafter_text, int target_vocab, int max_draft = 8)
        : drafter_(&drafter), target_(std::move(target)), text_(std::move(drafter_text)), V_(target_vocab), max_draft_(max_draft) {
        detail::require(target_.decode && target_.encode && target_.special && text_.decode && text_.encode && text_.special,
                        "proposer", [] { return std::string("TextBridgeProposer: a TextCodec with an empty function"); });
        detail::require(V_ > 0 && max_draft_ > 0, "proposer", [&] {
            return "TextBridgeProposer: target_vocab " + std::to_string(V_) + " and max_draft " + std::to_string(max_draft_) +
                   " must be > 0";
        });
    }

    int vocab_size() const { return V_; }
    long n_calls() const { return n_calls_; }
    std::vector<DrafterUsage> usage() const { return {{drafter_, n_calls_, seconds_}}; }

    void start(std::span<const int>) {
        drafter_->reset();
        cached_.clear();
        primed_ = false;
    }
    void observe(const StepOutcome&) {}  // the next call reads the accepted text from ctx.tokens

    /// Continues ctx.tokens + `after` by at most `limit` target tokens (none where the drafter has no
    /// room or its text does not map onto new target tokens).
    Draft draft(std::span<const int> after, int limit, const StepContext& ctx) {
        const int want = std::min({limit, ctx.room - static_cast<int>(after.size()), max_draft_});
        if (want <= 0) return {};
        std::vector<int> ids;  // the target's text as ids, special tokens left out
        for (const int id : ctx.tokens)
            if (!target_.special(id)) ids.push_back(id);
        for (const int id : after)
            if (!target_.special(id)) ids.push_back(id);
        const std::string text = target_.decode(ids);
        const std::vector<int> d = text_.encode(text);
        const int room = drafter_->context_size() - static_cast<int>(d.size());
        if (d.empty() || room < 1) return {};
        const std::vector<int> gen = continue_greedily(d, std::min(max_draft_, room));

        std::vector<int> all = d;
        all.insert(all.end(), gen.begin(), gen.end());
        const std::string before = text_.decode(d), now = text_.decode(all);
        if (now.size() <= before.size() || now.compare(0, before.size(), before) != 0) return {};
        const std::vector<int> next = align(ids, text, now.substr(before.size()));
        Draft out;
        for (const int t : next) {
            if (static_cast<int>(out.size()) == want || t < 0 || t >= V_ || target_.special(t)) break;
            out.push_back({.token = t, .q = {}, .sampled = false});
        }
        return out;
    }

private:
    /// The drafter's cache made to hold d[0, n-1), then n tokens chosen greedily after d.
    std::vector<int> continue_greedily(const std::vector<int>& d, int n) {
        auto t0 = std::chrono::steady_clock::now();
        const std::size_t fed = d.size() - 1;
        std::size_t keep = 0;
        while (keep < cached_.size() && keep < fed && cached_[keep] == d[keep]) ++keep;
        drafter_->truncate(static_cast<int>(keep));
        cached_.resize(keep);
        const std::span<const int> missing = std::span<const int>(d).subspan(keep, fed - keep);
        prefill(*drafter_, missing);
        // The prompt's prefill (the first call's) is left out of the counts, as ModelProposer's start()
        // is; later catch-ups are drafting work, one forward per chunk of 32.
        if (primed_) n_calls_ += static_cast<long>((missing.size() + 31) / 32);
        else t0 = std::chrono::steady_clock::now();
        primed_ = true;
        cached_.insert(cached_.end(), missing.begin(), missing.end());
        std::vector<int> gen;
        int x = d.back();
        for (int i = 0; i < n; ++i) {
            const Rows r = drafter_->forward(Tree::chain(std::span<const int>(&x, 1)), 0);
            ++n_calls_;
            const int y = argmax(r.row(0));
            drafter_->commit(std::vector<int>{0});
            cached_.push_back(x);
            if (text_.special(y)) break;  // the drafter ended its text
            gen.push_back(y);
            x = y;
        }
        seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return gen;
    }

    /// The target tokens that continue `ids` (whose text is `text`) by the text `more`: the last kWindow
    /// tokens' text re-encoded with it (cheap, and exact for byte-level BPE), else the whole text (for
    /// encoders that prepend a space to what they encode, as SentencePiece's), else `more` alone.
    std::vector<int> align(std::span<const int> ids, const std::string& text, const std::string& more) const {
        constexpr std::size_t kWindow = 8;
        const std::size_t n = ids.size();
        for (const std::size_t w : {std::min(kWindow, n), n}) {
            const std::string head = target_.decode(ids.first(n - w));
            if (text.compare(0, head.size(), head) != 0) continue;
            const std::vector<int> e = target_.encode(text.substr(head.size()) + more);
            const std::span<const int> tail = ids.subspan(n - w);
            if (e.size() > tail.size() && std::equal(tail.begin(), tail.end(), e.begin()))
                return {e.begin() + static_cast<std::ptrdiff_t>(tail.size()), e.end()};
        }
        return target_.encode(more);
    }

    Drafter* drafter_;
    TextCodec target_, text_;
    int V_, max_draft_;
    std::vector<int> cached_;  // the drafter's committed tokens
    bool primed_ = false;      // the prompt is in the drafter's cache (its prefill is not counted)
    long n_calls_ = 0;
    double seconds_ = 0.0;
};

}  // namespace specdec
