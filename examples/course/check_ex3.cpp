// examples/course/check_ex3.cpp — the checker of exercise 3 (ex3_topk_tree.md): compiled with the
// student's file as COURSE_FILE, it grades course::TopKTree's trees (node count, parents, depths, tokens,
// topological order) against the k-ary tree the configuration defines, and its greedy decoding.
// SPDX-License-Identifier: MIT
#include "grading.hpp"

#include COURSE_FILE

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
    });
}
