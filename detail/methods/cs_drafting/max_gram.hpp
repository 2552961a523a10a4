// specdec/detail/methods/cs_drafting/max_gram.hpp — Max-Gram (MaG), the free statistical drafter at the bottom of CS Drafting's cascade.
// SPDX-License-Identifier: MIT
#pragma once

// CS Drafting (Chen et al. 2023), §3.3 and App. A: generated text often repeats phrases of the input,
// so MaG copies what followed the longest earlier occurrence of the context's suffix, and falls back
// to a bigram table (one next token per token: "parameters equal to the tokenizer size") where the
// copy runs out. It costs no model forward; the paper lets it propose 10 tokens per call (App. B).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../../io/checkpoint.hpp"
#include "../../train/dataset.hpp"
#include "../../core/error.hpp"
#include "../../io/json.hpp"

namespace specdec {

// ---------------------------------------------------------------------------------------------------
// The bigram table: each token's most frequent successor

/// A greedy bigram model (the authors' `bigram[token]`, built from Wikipedia; ours from the training
/// corpus). Saved as the JSON file {"vocab_size": V, "next": [V ids]}.
struct Bigram {
    int vocab_size = 0;
    std::vector<int> next;  // (V,) next[t] = the most frequent successor of t (ties: the smallest id); -1: none seen

    /// Counts every adjacent pair (corpus[i], corpus[i+1]). Throws naming the first id outside [0, V).
    static Bigram build(std::span<const int> corpus, int vocab_size) {
        detail::require(vocab_size > 0, "bigram", [&] {
            return std::string("build: vocab_size = ") + std::to_string(vocab_size) + ", expected at least 1";
        });
        for (std::size_t i = 0; i < corpus.size(); ++i)
            detail::require(corpus[i] >= 0 && corpus[i] < vocab_size, "bigram", [&] {
                return std::string("build: corpus token ") + std::to_string(corpus[i]) + " at position " +
                       std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")";
            });
        // Sorting the pairs groups equal pairs together and orders each token's successors by id, so
        // one pass finds the most frequent successor and, on a tie, keeps the smallest id.
        std::vector<std::pair<int, int>> pairs;  // (N-1,) (token, successor)
        for (std::size_t i = 0; i + 1 < corpus.size(); ++i) pairs.emplace_back(corpus[i], corpus[i + 1]);
        std::sort(pairs.begin(), pairs.end());
        Bigram b{.vocab_size = vocab_size, .next = std::vector<int>(static_cast<std::size_t>(vocab_size), -1)};
        std::vector<std::size_t> best_count(static_cast<std::size_t>(vocab_size), 0);  // (V,)
        for (std::size_t i = 0; i < pairs.size();) {
            std::size_t end = i;
            while (end < pairs.size() && pairs[end] == pairs[i]) ++end;
            const auto [token, successor] = pairs[i];
            const auto t = static_cast<std::size_t>(token);
            if (end - i > best_count[t]) {  // strictly more: an equal count later has a larger id
                best_count[t] = end - i;
                b.next[t] = successor;
            }
            i = end;
        }
        return b;
    }

    /// The same from a training token file (build/data/train.bin).
    static Bigram build(const train::TokenFile& corpus, int vocab_size) {
        std::vector<int> tokens(corpus.size());
        for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = corpus[i];
        return build(tokens, vocab_size);
    }

    void save(const std::filesystem::path& path) const {
        json::Array ids(next.begin(), next.end());
        json::Object root;
        root.insert("vocab_size", vocab_size);
        root.insert("next", json::Value(std::move(ids)));
        const std::string text = json::dump(json::Value(std::move(root)));
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        detail::require(static_cast<bool>(out), "bigram", [&] { return path.string() + ": cannot create file"; });
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        detail::require(static_cast<bool>(out.flush()), "bigram", [&] { return path.string() + ": write failed"; });
    }

    /// Reads a file written by save() for a model with `vocab_size` tokens. Errors name the file and
    /// the field: not JSON, another vocabulary, a wrong length, an id outside [-1, V).
    static Bigram load(const std::filesystem::path& path, int vocab_size) {
        const std::string file = path.string();
        const json::Value root = json::parse(detail::read_text_file(path, "bigram"), file);
        detail::require(root.is_object(), "bigram", [&] {
            return file + ": expected a JSON object {\"vocab_size\": V, \"next\": [...]}, found " +
                   detail::json_preview(root);
        });
        const std::int64_t file_vocab = root.at("vocab_size").as_int();
        detail::require(file_vocab == vocab_size, "bigram", [&] {
            return file + ": field 'vocab_size' = " + std::to_string(file_vocab) + ", but the model's vocabulary has " +
                   std::to_string(vocab_size) + " tokens (a bigram table built for another tokenizer?)";
        });
        const json::Array& ids = root.at("next").as_array();
        detail::require(ids.size() == static_cast<std::size_t>(vocab_size), "bigram", [&] {
            return file + ": field 'next' has " + std::to_string(ids.size()) + " entries, expected vocab_size = " +
                   std::to_string(vocab_size);
        });
        Bigram b{.vocab_size = vocab_size, .next = std::vector<int>(ids.size())};
        for (std::size_t t = 0; t < ids.size(); ++t) {
            const std::int64_t id = ids[t].as_int();
            detail::require(id >= -1 && id < vocab_size, "bigram", [&] {
                return file + ": field 'next'[" + std::to_string(t) + "] = " + std::to_string(id) +
                       " is outside [-1, " + std::to_string(vocab_size) + ")";
            });
            b.next[t] = static_cast<int>(id);
        }
        return b;
    }
};

// ---------------------------------------------------------------------------------------------------
// Max-Gram

/// An earlier occurrence of the context's suffix: context[start, start + length) equals the last
/// `length` tokens, and ends before the last token, so context[start + length] is its known successor.
struct MaxGramMatch {
    std::size_t start = 0;
    std::size_t length = 0;  // 0: the last token never occurred before
};

/// The leftmost occurrence of the longest suffix of `context` that occurs earlier (App. A's listing).
/// For each end position e <= L-1 of a candidate occurrence, walk backwards while context[e-1-s] ==
/// context[L-1-s]; the longest walk wins, the first (leftmost) on a tie. O(L * match length).
inline MaxGramMatch longest_earlier_suffix(std::span<const int> context) {
    const std::size_t L = context.size();
    MaxGramMatch best;
    for (std::size_t end = 1; end + 1 <= L; ++end) {  // occurrence = context[end - length, end)
        std::size_t length = 0;
        while (length < end && context[end - 1 - length] == context[L - 1 - length]) ++length;
        if (length > best.length) best = MaxGramMatch{.start = end - length, .length = length};
    }
    return best;
}

/// Max-Gram (CS Drafting §3.3, App. A; the authors' `mag.py`): up to n draft tokens that continue
/// `context` = the prompt (its first `prompt_len` tokens) followed by everything generated so far.
///
///   1. Find the longest suffix (length m >= 1) of the context that occurs earlier in it: at some j
///      with j + m <= L-1, so at least one known token follows the occurrence (it may overlap the
///      suffix). Among occurrences of that length take the leftmost. Prompt and generation are
///      searched in one pass, as the authors match against concat(prompt, generation[:-1]): the prompt
///      comes first, so it wins ties, but a longer occurrence in (or running into) the generation
///      beats a shorter one in the prompt, and when the last token is not in the prompt the generation
///      is where it is found. `prompt_len` therefore only has to be <= L; it does not change the result.
///   2. Propose the n tokens that follow the occurrence; they may run past the prompt's end and up to
///      the end of the context, and past it the copy continues from its own start (the text between
///      the occurrence and the end is taken to repeat: mag.py searches again from the end of a short
///      copy, which on repeating text finds the same thing).
///   3. When the last token never occurred before: next = bigram->next[last proposed, or the context's
///      last token], repeatedly; stop at -1 or when there is no bigram table.
/// Returns at most n tokens, possibly none. An empty context has nothing to continue: none.
inline std::vector<int> max_gram(std::span<const int> context, std::size_t prompt_len, int n, const Bigram* bigram) {
    detail::require(prompt_len <= context.size(), "max_gram", [&] {
        return std::string("prompt_len = ") + std::to_string(prompt_len) + " exceeds the context's " +
               std::to_string(context.size()) + " tokens (the context is the prompt followed by the generation)";
    });
    detail::require(n >= 0, "max_gram", [&] { return std::string("n = ") + std::to_string(n) + " is negative"; });
    std::vector<int> draft;
    if (context.empty() || n == 0) return draft;

    const MaxGramMatch match = longest_earlier_suffix(context);
    if (match.length > 0) {
        // Copy what followed the occurrence. Past the context's end the copy reads its own output: what
        // followed the occurrence ends with the suffix again, so the text is taken to repeat from there
        // (looping text keeps looping, as it does under a small greedy model).
        const std::size_t L = context.size();
        for (std::size_t i = match.start + match.length; static_cast<int>(draft.size()) < n; ++i)
            draft.push_back(i < L ? context[i] : draft[i - L]);
    }

    if (bigram == nullptr) return draft;
    int token = draft.empty() ? context.back() : draft.back();
    while (static_cast<int>(draft.size()) < n) {
        detail::require(token >= 0 && static_cast<std::size_t>(token) < bigram->next.size(), "max_gram", [&] {
            return std::string("token ") + std::to_string(token) + " is outside the bigram table's vocabulary [0, " +
                   std::to_string(bigram->next.size()) + ")";
        });
        token = bigram->next[static_cast<std::size_t>(token)];
        if (token < 0) break;  // this token was never followed by anything in the corpus
        draft.push_back(token);
    }
    return draft;
}

}  // namespace specdec
