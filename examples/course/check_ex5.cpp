// examples/course/check_ex5.cpp — the checker of exercise 5 (ex5_cascade_level.md): compiled with the
// student's file as COURSE_FILE, it grades course::CascadeLevel: its drafts those of the library's own
// cascade level (Review over MaxGram, lenience 1) on the same texts (a Max-Gram of 10 and of 2 tokens per
// call, and single calls where the room binds), greedy identity with the target through it, and a valid
// recorded law under speculative sampling.
// SPDX-License-Identifier: MIT
#include "grading.hpp"

#include COURSE_FILE

#include <string>
#include <vector>

using namespace specdec;

static_assert(DraftsTokens<course::CascadeLevel>, "CascadeLevel needs vocab_size, start, observe and draft");

namespace {

std::string show(std::span<const int> t) {
    std::string s = "[";
    for (std::size_t i = 0; i < t.size(); ++i) s += (i ? " " : "") + std::to_string(t[i]);
    return s + "]";
}

/// The student's level, watched: at every draft call the library's level (its own reviewer model, its own
/// Max-Gram) drafts from the same text, and the two drafts must agree token for token.
struct Watched {
    course::CascadeLevel* inner;
    Review<CpuModel, MaxGram>* reference;
    std::string* problem;  // the first disagreement; empty: none
    long* calls;

    int vocab_size() const { return inner->vocab_size(); }
    void start(std::span<const int> prompt) {
        inner->start(prompt);
        reference->start(prompt);
    }
    void observe(const StepOutcome& outcome) {
        inner->observe(outcome);
        reference->observe(outcome);
    }
    Draft draft(std::span<const int> after, int limit, const StepContext& ctx) {
        Draft mine = inner->draft(after, limit, ctx);
        const Draft want = reference->draft(after, limit, ctx);
        ++*calls;
        std::vector<int> a, b;
        for (const DraftToken& t : mine) a.push_back(t.token);
        for (const DraftToken& t : want) b.push_back(t.token);
        if (problem->empty() && a != b)
            *problem = "on the text " + show(ctx.tokens) + " + " + show(after) + " (limit " + std::to_string(limit) +
                       ") you drafted " + show(a) + ", the library's cascade level drafts " + show(b);
        return mine;
    }
};

}  // namespace

int main() {
    return course::run("exercise 5: a cascade level, a draft model reviewing Max-Gram", [](course::Grade& g) {
        course::TinyModels m(8);
        const int V = m.cfg.vocab_size;
        // The reference level needs a reviewer of its own (one model object has one KV cache): the same weights.
        CpuModel reference_reviewer(m.cfg, perturbed(m.cfg, random_weights(m.cfg, 2024, 0.3f), 0.8f, 77));
        // Max-Gram's bigram fallback, from a fixed text: its proposals are sometimes right, often not.
        const std::vector<int> corpus{0, 1, 2, 3, 4, 5, 6, 7, 1, 3, 5, 7, 2, 4, 6, 0, 3, 6, 1, 4, 7, 2, 5, 0};
        const Bigram bigram = Bigram::build(corpus, V);
        const std::vector<std::vector<int>> prompts{{1, 4, 2, 1, 4, 2, 1, 4}, {3, 0, 5, 3, 0}, {2}, {7, 6, 5, 4}};

        // 1. The drafts: token for token those of Review(reviewer, MaxGram) with lenience 1, greedy, budgets
        //    4 and 10 (a review shorter and longer than the target's gamma), over a Max-Gram giving up to 10
        //    tokens per call and one giving 2 (so that a proposal takes several calls).
        std::string problem, where;  // the first disagreement, and under which Max-Gram and budget
        long calls = 0;
        for (const int per_call : {10, 2})
            for (const int budget : {4, 10})
                for (const std::vector<int>& prompt : prompts) {
                    MaxGram mine_below(bigram, per_call), reference_below(bigram, per_call);
                    course::CascadeLevel level(m.draft, mine_below, budget);
                    Review<CpuModel, MaxGram> reference(reference_reviewer, reference_below, {.budget = budget});
                    Watched watched{&level, &reference, &problem, &calls};
                    Chain builder{.gamma = 6};
                    TreeVerifier verifier;
                    GreedyMatch acceptor;
                    speculative_generate(m.target, watched, builder, verifier, acceptor, prompt, GenerateOptions{.max_new_tokens = 30});
                    if (!problem.empty() && where.empty())
                        where = "Max-Gram giving up to " + std::to_string(per_call) + " tokens per call, budget " + std::to_string(budget) + ": ";
                }
        g.check(problem.empty(), "your level drafts what the library's cascade level drafts, token for token (" +
                                     std::to_string(calls) + " draft calls)" + (problem.empty() ? "" : " -- " + where + problem),
                "take min(budget, limit, room - after) tokens of Max-Gram continuing ctx.tokens + after, asking again while it "
                "gives fewer; with from = (ctx.tokens + after).size() - 1, row i of score(text, from) predicts proposal[i]; keep a "
                "proposed token only while it is the reviewer's argmax, then emit one token of the reviewer's own");

        // 2. The room: single calls, as a builder other than Chain may make them, with a limit of 10 and
        //    ctx.room - after.size() of 0 to 3 tokens: at most that many come out, the library's level's.
        std::string room_problem;
        for (const std::vector<int>& prompt : prompts)
            for (const std::vector<int>& after : {std::vector<int>{}, std::vector<int>{prompt.front(), 3}})
                for (int left = 0; left <= 3 && room_problem.empty(); ++left) {
                    MaxGram mine_below(bigram, 2), reference_below(bigram, 2);
                    course::CascadeLevel level(m.draft, mine_below, 10);
                    Review<CpuModel, MaxGram> reference(reference_reviewer, reference_below, {.budget = 10});
                    level.start(prompt);
                    reference.start(prompt);
                    const Sampling greedy;
                    const int room = static_cast<int>(after.size()) + left;
                    const StepContext ctx{.sampling = greedy, .rng = StepRng{.seed = 3, .step = 0, .stream = RngStream::kCascade, .scope = 1},
                                          .tokens = prompt, .prompt_len = static_cast<int>(prompt.size()), .room = room};
                    std::vector<int> a, b;
                    for (const DraftToken& t : level.draft(after, 10, ctx)) a.push_back(t.token);
                    for (const DraftToken& t : reference.draft(after, 10, ctx)) b.push_back(t.token);
                    if (a != b || static_cast<int>(a.size()) > left)
                        room_problem = "on the text " + show(prompt) + " + " + show(after) + " (limit 10, ctx.room " + std::to_string(room) +
                                       ": room for " + std::to_string(left) + " more) you drafted " + show(a) +
                                       ", the library's cascade level drafts " + show(b);
                }
        g.check(room_problem.empty(), "with the room binding (ctx.room - after.size() of 0 to 3, limit 10) your level drafts "
                                      "no more than the room, as the library's level does" +
                                          (room_problem.empty() ? "" : " -- " + room_problem),
                "limit = min(limit, ctx.room - after.size()) before anything else (none left: return {}): a caller's limit "
                "need not be cut by the room already (docs: DraftsTokens drafts at most ctx.room - after.size() tokens)");

        // 3. Greedy identity: whatever the level drafts, the target's verification gives plain greedy's text.
        MaxGram below(bigram);
        const auto make = [&] { return check::Composition{course::CascadeLevel(m.draft, below, 4), Chain{.gamma = 4}, GreedyMatch{}}; };
        const check::Report greedy = check::check_lossless(m.target, make, prompts, Sampling{}, 1);
        g.check(greedy.lossless(), "greedy decoding through your level gives the tokens of plain greedy decoding");

        // 4. The recorded law: speculative sampling over the level's drafts at temperature 1 stays exact.
        const auto make_sampled = [&] {
            return check::Composition{course::CascadeLevel(m.draft, below, 4), Chain{.gamma = 4}, SpeculativeSampling{}};
        };
        const check::Report sampled = check::check_lossless(m.target, make_sampled, {prompts[0]}, Sampling{.temperature = 1.0f}, 2000);
        std::cout << sampled;
        g.check(sampled.lossless(), "sampling: SpeculativeSampling over your level's drafts follows the target's law",
                "the level chooses its tokens (the reviewer's argmax): record sampled = false; sampled = true claims "
                "the token was drawn at random from q, and the acceptor trusts that claim");
    });
}
