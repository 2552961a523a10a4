// examples/course/ex4_ngram_drafter.hpp — exercise 4, your file: an n-gram drafter that keeps its own text.
// The statement is ex4_ngram_drafter.md; grade it with `ctest -L course -R ex4` in a build configured with
// -DSPECDEC_COURSE_GRADE=ON (README.md here).
#pragma once

#include <specdec.hpp>

#include <span>
#include <vector>

namespace course {

using namespace specdec;

/// Prompt lookup with state (Saxena 2023; examples/prompt_lookup.hpp reads ctx.tokens instead): the
/// drafter keeps the committed text itself, as a drafter with a KV cache keeps its rows, and proposes
/// what followed the latest earlier occurrence of the text's last max_ngram (else fewer) tokens.
struct NGramDrafter {
    int vocab = 0;         // the target's vocabulary size
    int max_ngram = 3;     // match the last 3 tokens, else the last 2, else the last 1
    int max_draft = 8;     // tokens proposed per call
    std::vector<int> text{}; // the committed text, ending with the pending root (the checker reads it)

    int vocab_size() const { return vocab; }

    /// A new text: the prompt, whose last token is the pending root.
    void start(std::span<const int> prompt) { text.assign(prompt.begin(), prompt.end()); }

    /// The target's verdict on a step: bring `text` up to date (it must equal ctx.tokens at the next draft).
    void observe(const StepOutcome& outcome) {
        (void)outcome;
        fail("course", "NGramDrafter::observe is not implemented yet: write it in examples/course/ex4_ngram_drafter.hpp");
    }

    /// Continues `text` followed by `after` (this step's drafts so far) by at most min(limit, max_draft)
    /// tokens, each with the law it came from; none when nothing matches.
    Draft draft(std::span<const int> after, int limit, const StepContext& ctx) const {
        (void)after, (void)limit, (void)ctx;
        fail("course", "NGramDrafter::draft is not implemented yet: write it in examples/course/ex4_ngram_drafter.hpp");
    }
};

}  // namespace course
