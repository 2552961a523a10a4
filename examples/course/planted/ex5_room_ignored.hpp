// examples/course/planted/ex5_room_ignored.hpp — a planted wrong solution of exercise 5 (the suite proves the checker
// fails it): ignores the room: drafts min(budget, limit) tokens however little ctx.room - after.size() is left.
#pragma once

#include <specdec.hpp>

#include <algorithm>
#include <span>
#include <vector>

namespace course {

using namespace specdec;

/// One level of CS Drafting's vertical cascade (Chen et al. 2024, §3.1, Algorithm 1): a draft model (the
/// reviewer) reviews Max-Gram's proposals with one forward, as the target reviews drafts, and the level
/// is itself a drafter (DraftsTokens) that the target then verifies. Review is exact (lenience off, l = 1)
/// and greedy whatever the sampling: the level chooses its tokens, it does not draw them.
class CascadeLevel {
public:
    CascadeLevel(CpuModel& reviewer, MaxGram& below, int budget = 10) : scorer_(reviewer), below_(&below), budget_(budget) {}

    int vocab_size() const { return scorer_.model().vocab_size(); }
    void start(std::span<const int> prompt) {
        scorer_.reset();
        below_->start(prompt);
    }
    void observe(const StepOutcome& outcome) { below_->observe(outcome); }

    Draft draft(std::span<const int> after, int limit, const StepContext& ctx) {
        // PLANTED BUG: the room (ctx.room - after.size()) is never applied: only the caller's limit
        if (limit <= 0) return {};
        const std::size_t n = static_cast<std::size_t>(std::min(budget_, limit));
        std::vector<int> text(ctx.tokens.begin(), ctx.tokens.end());
        text.insert(text.end(), after.begin(), after.end());
        const std::size_t from = text.size() - 1;  // row 0 predicts the first proposed token
        // 1. Max-Gram's proposal of n tokens, each call continuing the text so far.
        Draft proposal;
        while (proposal.size() < n) {
            const std::span<const int> so_far(text.data() + ctx.tokens.size(), text.size() - ctx.tokens.size());
            const Draft more = below_->draft(so_far, static_cast<int>(n - proposal.size()), ctx);
            if (more.empty()) break;
            for (const DraftToken& t : more) {
                if (proposal.size() == n) break;
                text.push_back(t.token);
                proposal.push_back(t);
            }
        }
        // 2. One forward of the reviewer, 3. the greedy review: accepted tokens, then its own.
        const Rows rows = score(text, from);
        Draft out;
        std::vector<float> p(static_cast<std::size_t>(vocab_size()));
        for (std::size_t i = 0; i <= proposal.size() && static_cast<int>(out.size()) < limit; ++i) {
            draft_probs(rows.row(static_cast<int>(i)), Sampling{}, p);
            const int best = argmax(p);
            out.push_back({best, p, false});
            if (i == proposal.size() || best != proposal[i].token) break;
        }
        return out;
    }

private:
    Rows score(std::span<const int> text, std::size_t from) { return scorer_.score(text, from); }

    detail::PrefixScorer<CpuModel> scorer_;
    MaxGram* below_;
    int budget_;
};

}  // namespace course
