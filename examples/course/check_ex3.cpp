// examples/course/check_ex3.cpp — the checker of exercise 3 (ex3_topk_tree.md): compiled with the
// student's file as COURSE_FILE, it grades course::TopKTree's trees (node count, parents, depths, tokens,
// topological order) against the k-ary tree the configuration defines, its greedy decoding, and, on
// single builds under greedy decoding and under sampling, the recorded draws (Draw::kTopK, draft_prob =
// q[token], no law recorded), the depth cut by ctx.room and the draft forwards per build (one per depth).
// SPDX-License-Identifier: MIT
#include "grading.hpp"

#include COURSE_FILE

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

using namespace specdec;

/// GreedyMatch that keeps a copy of every tree it is handed: the trees the builder built, step by step.
struct RecordingGreedyMatch {
    std::vector<Tree>* seen;
    AcceptResult accept(const Tree& tree, Rows logits, const StepContext& ctx) const {
        seen->push_back(tree);
        return GreedyMatch{}.accept(tree, logits, ctx);
    }
};

/// The trees a builder builds over one greedy generation of 16 tokens from `prompt`.
template <class Builder>
std::vector<Tree> trees_of(course::TinyModels& m, Builder builder, const std::vector<int>& prompt) {
    std::vector<Tree> seen;
    ModelProposer proposer(m.draft);
    TreeVerifier verifier;
    RecordingGreedyMatch acceptor{&seen};
    speculative_generate(m.target, proposer, builder, verifier, acceptor, prompt, GenerateOptions{.max_new_tokens = 16});
    return seen;
}

/// The drafter, watched: a ModelProposer that counts its forwards (propose calls) and keeps the logits row
/// it returned for each node, so that each child's recorded draft_prob can be checked against its parent's q.
struct CountingProposer {
    ModelProposer<CpuModel> inner;
    int calls = 0;
    std::map<int, std::vector<float>> row_of;  // node -> the logits row it was last scored with

    int vocab_size() const { return inner.vocab_size(); }
    void start(std::span<const int> prompt) { inner.start(prompt); }
    void observe(const StepOutcome& outcome) { inner.observe(outcome); }
    Rows propose(const Tree& tree, std::span<const int> nodes) {
        ++calls;
        const Rows rows = inner.propose(tree, nodes);
        for (std::size_t j = 0; j < nodes.size(); ++j) {
            const auto r = rows.row(static_cast<int>(j));
            row_of[nodes[j]].assign(r.begin(), r.end());
        }
        return rows;
    }
};

std::string num(double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", x);
    return b;
}

std::string draw_name(Draw d) {
    switch (d) {
        case Draw::kGiven: return "Draw::kGiven";
        case Draw::kTopK: return "Draw::kTopK";
        case Draw::kSampledWithReplacement: return "Draw::kSampledWithReplacement";
        case Draw::kSampledWithoutReplacement: return "Draw::kSampledWithoutReplacement";
    }
    return "?";
}

/// The first way `got` differs from `want` (the k-ary tree), as a sentence; empty when they are equal.
std::string first_difference(const Tree& got, const Tree& want) {
    for (int i = 0; i < got.size(); ++i) {
        const Node& n = got[i];
        if (n.parent >= i) return "node " + std::to_string(i) + " has parent " + std::to_string(n.parent) + ": a parent must come before its child (topological order)";
        if (n.parent >= 0 && n.depth != got[n.parent].depth + 1)
            return "node " + std::to_string(i) + " has depth " + std::to_string(n.depth) + ", its parent's depth + 1 is " + std::to_string(got[n.parent].depth + 1);
    }
    if (got.size() != want.size())
        return std::to_string(got.size()) + " nodes, the k-ary tree has " + std::to_string(want.size());
    for (int i = 0; i < got.size(); ++i) {
        if (got[i].parent != want[i].parent)
            return "node " + std::to_string(i) + " hangs from node " + std::to_string(got[i].parent) + ", expected node " + std::to_string(want[i].parent);
        if (got[i].token != want[i].token)
            return "node " + std::to_string(i) + " holds token " + std::to_string(got[i].token) + ", expected token " +
                   std::to_string(want[i].token) + " (the drafter's next most likely token under node " + std::to_string(want[i].parent) + ")";
    }
    return {};
}

/// One build of the student's tree on `prompt`'s first step, as the loop would call it, against the library's
/// KAryTree (top-k) on a proposer of its own. Sets `shape` to the first difference of the tree, `record` to the
/// first wrongly recorded draw, `forwards` to a wrong number of draft forwards; each empty when right.
void one_build(CpuModel& draft, const std::vector<int>& k_config, const std::vector<int>& prompt, const Sampling& sampling, int room,
               const std::string& where, std::string& shape, std::string& record, std::string& forwards) {
    const StepContext ctx{.sampling = sampling, .rng = StepRng{.seed = 5, .step = 0, .stream = RngStream::kDraft, .scope = 0},
                          .tokens = prompt, .prompt_len = static_cast<int>(prompt.size()), .room = room};
    CountingProposer mine{ModelProposer<CpuModel>(draft), 0, {}};
    mine.start(prompt);
    const Tree got = course::TopKTree{k_config}.build(mine, prompt.back(), ctx);
    ModelProposer<CpuModel> theirs(draft);
    theirs.start(prompt);
    const Tree want = KAryTree{k_config, DrawPolicy::kTopK}.build(theirs, prompt.back(), ctx);
    if (shape.empty())
        if (const std::string d = first_difference(got, want); !d.empty()) shape = where + ": " + d;
    const int depths = std::min(static_cast<int>(k_config.size()), std::max(room, 0));
    if (forwards.empty() && mine.calls != depths)
        forwards = where + ": " + std::to_string(mine.calls) + " draft forwards (propose calls) for a tree of " + std::to_string(depths) +
                   " depths below the root, expected " + std::to_string(depths);
    std::vector<float> q(static_cast<std::size_t>(draft.vocab_size()));
    for (int i = 0; i < got.size() && record.empty(); ++i) {
        const Node& n = got[i];
        const std::string node = where + ": node " + std::to_string(i) + " (token " + std::to_string(n.token) + ")";
        if (got.has_child_dist(i)) {
            record = node + " has a law recorded for its children (set_child_dist): top-k children are chosen, not drawn, and record none";
            break;
        }
        if (n.parent < 0) continue;
        if (n.draw != Draw::kTopK) {
            record = node + " is recorded as " + draw_name(n.draw) + ", expected Draw::kTopK (chosen as one of the k most likely)";
            break;
        }
        const auto row = mine.row_of.find(n.parent);
        if (row == mine.row_of.end()) {
            record = node + ": its parent, node " + std::to_string(n.parent) + ", was never scored by proposer.propose";
            break;
        }
        draft_probs(row->second, ctx.sampling, q);
        const double want_q = q[static_cast<std::size_t>(std::clamp(n.token, 0, draft.vocab_size() - 1))];
        if (!(std::abs(n.draft_prob - want_q) <= 1e-6 * std::max(1.0, want_q)))
            record = node + " records draft_prob " + num(n.draft_prob) + ", expected q[token] = " + num(want_q) +
                     " (q = draft_probs of its parent's row under ctx.sampling)";
    }
}

int main() {
    return course::run("exercise 3: a k-ary top-k tree builder", [](course::Grade& g) {
        course::TinyModels m;
        const std::vector<std::vector<int>> prompts{{1, 4, 2}, {3, 0}};
        for (const std::vector<int>& k_config : {std::vector<int>{3, 2, 1}, std::vector<int>{2, 2, 2, 2}}) {
            std::string config = "k_config {";
            for (std::size_t d = 0; d < k_config.size(); ++d) config += std::to_string(k_config[d]) + (d + 1 < k_config.size() ? ", " : "}");
            // 1. The shape, step by step, against the library's KAryTree (top-k draws) on the same text.
            std::string why;
            for (const std::vector<int>& prompt : prompts) {
                const std::vector<Tree> got = trees_of(m, course::TopKTree{k_config}, prompt);
                const std::vector<Tree> want = trees_of(m, KAryTree{k_config, DrawPolicy::kTopK}, prompt);
                for (std::size_t s = 0; s < want.size() && why.empty(); ++s) {
                    if (s >= got.size()) why = "your builder ran " + std::to_string(got.size()) + " steps, expected " + std::to_string(want.size());
                    else if (const std::string d = first_difference(got[s], want[s]); !d.empty()) why = "step " + std::to_string(s) + ": " + d;
                }
            }
            g.check(why.empty(), config + ": the trees have the k-ary shape, the top-k tokens in order, parents and depths right" +
                                     (why.empty() ? "" : " -- " + why),
                    "per depth d: one proposer.propose(tree, frontier), row j is frontier[j]'s; its k_config[d] most likely "
                    "tokens (draft_probs, then rank: most likely first, ties to the lower id) as children of frontier[j]; the next frontier is the new nodes in order");

            // 2. Greedy identity: GreedyMatch over the tree must decode what plain greedy decoding does.
            const auto make = [&] { return check::Composition{ModelProposer(m.draft), course::TopKTree{k_config}, GreedyMatch{}}; };
            const check::Report greedy = check::check_lossless(m.target, make, prompts, Sampling{}, 1);
            g.check(greedy.lossless(), config + ": GreedyMatch over your trees gives the tokens of plain greedy decoding",
                    "every node must be a real continuation of its parent (tokens in range, depths right)");
            std::cout << greedy;
        }

        // 3. Single builds, as the loop calls them, under greedy decoding and under sampling (temperature 0.7),
        //    with the room past the tree and cutting it, over vocabularies of 6 and 11 tokens: the shape against
        //    the library's KAryTree, every child's recorded draw (Draw::kTopK, draft_prob = q[token] of its
        //    parent's q, no law recorded) and the draft forwards (one per depth: propose over the whole frontier).
        course::TinyModels m11(11);
        std::string shape, record, forwards;
        int builds = 0;
        for (course::TinyModels* models : {&m, &m11})
            for (const std::vector<int>& k_config : {std::vector<int>{3, 2, 1}, std::vector<int>{2, 2, 2, 2}})
                for (const Sampling& sampling : {Sampling{}, Sampling{.temperature = 0.7f}})
                    for (const int room : {100, 2})
                        for (const std::vector<int>& prompt : prompts) {
                            std::string where = "vocabulary " + std::to_string(models->cfg.vocab_size) + ", k_config {";
                            for (std::size_t d = 0; d < k_config.size(); ++d) where += std::to_string(k_config[d]) + (d + 1 < k_config.size() ? ", " : "}");
                            where += ", temperature " + num(sampling.temperature) + ", room " + std::to_string(room);
                            one_build(models->draft, k_config, prompt, sampling, room, where, shape, record, forwards);
                            ++builds;
                        }
        g.check(shape.empty(), "single builds (" + std::to_string(builds) + ": greedy and temperature 0.7, room 100 and 2, vocabularies 6 and 11) have the k-ary top-k shape, no deeper than ctx.room" +
                                   (shape.empty() ? "" : " -- " + shape),
                "q = draft_probs(row, ctx.sampling, q) (the step's sampling, not greedy's); depth d < min(k_config.size(), ctx.room)");
        g.check(record.empty(), "every child is recorded as chosen: Draw::kTopK, draft_prob = q[token] of its parent's q, no law recorded" +
                                    (record.empty() ? "" : " -- " + record),
                "tree.add(token, frontier[j], q[token], Draw::kTopK): the acceptors read the draw kind and q[token]; "
                "a tree that claims its top-k children were drawn at random (set_child_dist, kSampled...) makes "
                "MultiDraftSampling lossy, and a logit is not a probability");
        g.check(forwards.empty(), "one draft forward per depth (proposer.propose over the whole frontier)" +
                                      (forwards.empty() ? "" : " -- " + forwards),
                "each propose is a forward of the draft model: score the whole frontier in one call, row j for frontier[j]");
    });
}
