// examples/course/planted/ex4_max_draft_ignored.hpp — a planted wrong solution of exercise 4 (the suite proves the checker
// fails it): ignores max_draft: drafts up to the caller's limit.
#pragma once

#include <specdec.hpp>

#include <algorithm>
#include <span>
#include <vector>

namespace course {

using namespace specdec;

/// Prompt lookup with state: the drafter keeps the committed text itself.
struct NGramDrafter {
    int vocab = 0;
    int max_ngram = 3;
    int max_draft = 8;
    std::vector<int> text{};  // the committed text, ending with the pending root

    int vocab_size() const { return vocab; }
    void start(std::span<const int> prompt) { text.assign(prompt.begin(), prompt.end()); }

    /// path[0] is the old root, already in `text`; the accepted drafts follow it, then the new root.
    void observe(const StepOutcome& outcome) {
        for (std::size_t i = 1; i < outcome.path.size(); ++i) text.push_back(outcome.tree[outcome.path[i]].token);
        if (outcome.next_root >= 0) text.push_back(outcome.next_root);
    }

    Draft draft(std::span<const int> after, int limit, const StepContext&) const {
        std::vector<int> t = text;
        t.insert(t.end(), after.begin(), after.end());
        const int L = static_cast<int>(t.size()), n_out = limit;  // PLANTED BUG: max_draft ignored
        for (int n = std::min(max_ngram, L - 1); n >= 1; --n)
            for (int at = L - n - 1; at >= 0; --at) {  // the latest earlier occurrence with a token after it
                if (!std::equal(t.begin() + at, t.begin() + at + n, t.end() - n)) continue;
                Draft out;
                for (int i = at + n; i < L && static_cast<int>(out.size()) < n_out; ++i)
                    out.push_back({.token = t[i], .q = {}, .sampled = false});  // chosen, not drawn: no law
                return out;
            }
        return {};
    }
};

}  // namespace course
