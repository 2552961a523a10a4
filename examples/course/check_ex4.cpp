// examples/course/check_ex4.cpp — the checker of exercise 4 (ex4_ngram_drafter.md): compiled with the
// student's file as COURSE_FILE, it grades course::NGramDrafter: its own text in step with the committed
// one, its drafts those of prompt lookup (with several max_ngram and max_draft, gamma above max_draft, two
// vocabularies), greedy identity, a valid recorded law, and tau on a repetitive text.
// SPDX-License-Identifier: MIT
#include "grading.hpp"

#include "../prompt_lookup.hpp"

#include COURSE_FILE

#include <string>
#include <vector>

using namespace specdec;

static_assert(DraftsTokens<course::NGramDrafter>, "NGramDrafter needs vocab_size, start, observe and draft");

/// The student's drafter, watched: at every draft call its text must be the committed text (ctx.tokens),
/// and its drafts those prompt lookup (examples/prompt_lookup.hpp) makes from that text.
struct Watched {
    course::NGramDrafter inner;
    std::string* problem;  // the first problem seen; empty: none
    int step = 0;

    int vocab_size() const { return inner.vocab_size(); }
    void start(std::span<const int> prompt) { inner.start(prompt); }
    void observe(const StepOutcome& outcome) {
        inner.observe(outcome);
        ++step;
    }
    Draft draft(std::span<const int> after, int limit, const StepContext& ctx) {
        const auto show = [](std::span<const int> t) {
            std::string s = "[";
            for (std::size_t i = 0; i < t.size(); ++i) s += (i ? " " : "") + std::to_string(t[i]);
            return s + "]";
        };
        if (problem->empty() && !std::equal(inner.text.begin(), inner.text.end(), ctx.tokens.begin(), ctx.tokens.end()))
            *problem = "after " + std::to_string(step) + " step(s) your text is " + show(inner.text) + " but the committed text is " +
                       show(ctx.tokens) + ": observe() must append the accepted drafts (path[1..]) and the new root (next_root)";
        Draft mine = inner.draft(after, limit, ctx);
        const Draft want = example::PromptLookup{.vocab = inner.vocab, .max_ngram = inner.max_ngram, .max_draft = inner.max_draft}
                               .draft(after, limit, ctx);
        std::vector<int> a, b;
        for (const DraftToken& t : mine) a.push_back(t.token);
        for (const DraftToken& t : want) b.push_back(t.token);
        if (problem->empty() && a != b)
            *problem = "on the text " + show(ctx.tokens) + " + " + show(after) + " you drafted " + show(a) + ", prompt lookup drafts " +
                       show(b) + " (the tokens that FOLLOWED the latest earlier occurrence of the last n <= max_ngram tokens, at most " +
                       "min(limit, max_draft) of them)";
        return mine;
    }
};

int main() {
    return course::run("exercise 4: an n-gram drafter that keeps its own text", [](course::Grade& g) {
        course::TinyModels m;
        const int V = m.cfg.vocab_size;
        // Repetitive prompts: the continuation of a tiny random target falls into loops, which lookup copies.
        const std::vector<std::vector<int>> prompts{{1, 4, 2, 1, 4, 2, 1, 4}, {3, 0, 5, 3, 0}, {2}};

        // 1. The drafter's own text and its drafts, over greedy generations of 40 tokens, with the default
        //    limits (max_ngram 3, max_draft 8 above the chain's gamma 4) and with others at their edge: gamma
        //    above max_draft, a max_ngram of 1 and of 5; over vocabularies of 6 and 11 tokens.
        struct Limits {
            int max_ngram, max_draft, gamma;
        };
        const Limits limits[] = {{3, 8, 4}, {1, 3, 7}, {5, 2, 10}, {2, 5, 12}};
        course::TinyModels m11(11);
        std::string problem, where;  // the first problem, and where it was seen
        double tokens = 0, forwards = 0;
        for (course::TinyModels* models : {&m, &m11})
            for (const Limits& l : limits)
                for (const std::vector<int>& prompt : prompts) {
                    Watched drafter{course::NGramDrafter{.vocab = models->cfg.vocab_size, .max_ngram = l.max_ngram, .max_draft = l.max_draft},
                                    &problem, 0};
                    Chain builder{.gamma = l.gamma};
                    TreeVerifier verifier;
                    GreedyMatch acceptor;
                    const Generation gen = speculative_generate(models->target, drafter, builder, verifier, acceptor, prompt,
                                                                GenerateOptions{.max_new_tokens = 40});
                    if (models == &m && l.gamma == 4) {  // tau: the default limits, gamma 4
                        tokens += static_cast<double>(gen.tokens.size());
                        forwards += gen.n_target_calls();
                    }
                    if (!problem.empty() && where.empty())
                        where = "with max_ngram " + std::to_string(l.max_ngram) + ", max_draft " + std::to_string(l.max_draft) +
                                ", gamma " + std::to_string(l.gamma) + ", vocabulary " + std::to_string(models->cfg.vocab_size) + ": ";
                }
        // And single calls on a text where the last 1, 2 and 3 tokens each last occurred before a different
        // continuation, with a limit above and below max_draft.
        const std::vector<int> text{2, 3, 4, 5, 1, 9, 3, 4, 7, 4, 8, 2, 3, 4};
        for (const Limits& l : limits)
            for (const int limit : {20, 2}) {
                if (!problem.empty()) break;
                const Sampling greedy;
                const StepContext ctx{.sampling = greedy, .rng = {}, .tokens = text, .prompt_len = static_cast<int>(text.size())};
                Watched drafter{course::NGramDrafter{.vocab = 10, .max_ngram = l.max_ngram, .max_draft = l.max_draft}, &problem, 0};
                drafter.start(text);
                drafter.draft({}, limit, ctx);
                if (!problem.empty())
                    where = "a single draft call with max_ngram " + std::to_string(l.max_ngram) + ", max_draft " + std::to_string(l.max_draft) +
                            ", limit " + std::to_string(limit) + ": ";
            }
        g.check(problem.empty(), "your drafter's text follows the committed text and it drafts what prompt lookup drafts" +
                                     (problem.empty() ? "" : " -- " + where + problem),
                "observe(): append the accepted drafts (path[1..]) and next_root; draft(): match the last max_ngram tokens "
                "(else fewer, down to 1), then at most min(limit, max_draft) tokens: the fields, never constants");

        // 2. Greedy identity: the drafts change the speed, never the text.
        const auto make = [&] { return check::Composition{course::NGramDrafter{.vocab = V}, Chain{.gamma = 4}, GreedyMatch{}}; };
        const check::Report greedy = check::check_lossless(m.target, make, prompts, Sampling{}, 1);
        g.check(greedy.lossless(), "greedy decoding through your drafter gives the tokens of plain greedy decoding");

        // 3. The law recorded with each token: speculative sampling at temperature 1 must stay exact.
        const auto make_sampled = [&] {
            return check::Composition{course::NGramDrafter{.vocab = V}, Chain{.gamma = 4}, SpeculativeSampling{}};
        };
        const check::Report sampled = check::check_lossless(m.target, make_sampled, {prompts[0]}, Sampling{.temperature = 1.0f}, 2000);
        std::cout << sampled;
        g.check(sampled.lossless(), "sampling: SpeculativeSampling over your drafts follows the target's law",
                "a token chosen deterministically is recorded as sampled = false (q one-hot); sampled = true claims "
                "the token was drawn at random from q, and the acceptor trusts that claim");

        // 4. Speed, in tokens per target forward (tau), on the repetitive prompts: plain decoding has 1.
        const double tau = tokens / forwards;
        std::cout << "  tau (tokens per target forward, greedy, gamma 4): " << tau << "\n";
        g.check(tau > 1.5, "tau > 1.5 on the repetitive prompts (yours: " + std::to_string(tau) + ")",
                "drafts that copy the right span are accepted: a low tau means they copy the wrong one");
    });
}
