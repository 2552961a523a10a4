// examples/course/ex5_cascade_level.hpp — exercise 5, your file: a level of CS Drafting's vertical cascade.
// The statement is ex5_cascade_level.md; grade it with `ctest -L course -R ex5` in a build configured with
// -DSPECDEC_COURSE_GRADE=ON (README.md here).
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

    /// One review (the statement, ex5_cascade_level.md): at most min(budget, limit, ctx.room - after.size())
    /// tokens of Max-Gram continuing ctx.tokens + after, one forward of the reviewer over them (score()),
    /// then the reviewer's greedy verdict: each proposed token it agrees with (its argmax), then one token
    /// of its own (its correction, or its bonus after agreeing with all); each emitted token recorded with
    /// the reviewer's softmax p as q and sampled = false.
    Draft draft(std::span<const int> after, int limit, const StepContext& ctx) {
        (void)after, (void)limit, (void)ctx;
        fail("course", "CascadeLevel::draft is not implemented yet: write it in examples/course/ex5_cascade_level.hpp");
    }

private:
    /// Given: the reviewer's logits for text[from..] (row i predicts the token after text[from + i]), in one
    /// forward; it keeps the reviewer's KV cache for the prefix shared with the text it scored last.
    Rows score(std::span<const int> text, std::size_t from) { return scorer_.score(text, from); }

    detail::PrefixScorer<CpuModel> scorer_;
    MaxGram* below_;
    int budget_;
};

}  // namespace course
