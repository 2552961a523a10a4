// specdec/detail/policies/proposers.hpp — drafters: any LanguageModel as a Proposer, and the empty proposer.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "../core/concepts.hpp"
#include "../model/cpu_model.hpp"
#include "../core/error.hpp"
#include "../core/tree.hpp"
#include "next_token.hpp"

namespace specdec {

/// Forwards and seconds one drafter model spent (standardized walltime improvement prices each call).
struct DrafterUsage {
    const void* model = nullptr;
    long calls = 0;
    double seconds = 0.0;
};

/// A model a proposer drives and the positions it holds: the loop refuses a request that does not fit
/// (speculative_generate), naming the drafter.
struct DrafterContext {
    std::string drafter;  // which model, as its proposer calls it ("the model of a ModelProposer")
    int context = 0;      // its context_size()
};

namespace detail {

using specdec::prefill;  // the same function, under the name code inside detail:: calls it by

}  // namespace detail

/// A plain small model as the drafter (vanilla SD, SpecInfer, MCSD). It keeps its own KV cache in step
/// with the target: tokens the target accepted but the drafter never scored (the last token of a
/// chain, leaves it did not extend) are fed as a catch-up chain in front of the next step's tree, so
/// each step costs one draft forward per tree depth and nothing is recomputed.
template <LanguageModel M>
class ModelProposer {
public:
    explicit ModelProposer(M& model) : model_(&model) {}

    int vocab_size() const { return model_->vocab_size(); }
    /// Draft forwards so far (the loop records them per step; SWI counts them).
    long n_calls() const { return n_calls_; }
    /// The same as one entry per drafter model, with the seconds its forwards took.
    std::vector<DrafterUsage> usage() const { return {{model_, n_calls_, seconds_}}; }
    /// The drafter model's context: it holds the whole text, as the target does.
    std::vector<DrafterContext> drafter_contexts() const { return {{"the model of a ModelProposer", model_->context_size()}}; }

    void start(std::span<const int> prompt) {
        detail::require(!prompt.empty(), "proposer", [] { return std::string("start: the prompt is empty"); });
        model_->reset();
        detail::prefill(*model_, prompt.first(prompt.size() - 1));
        pending_.clear();
        fresh_ = true;
    }

    Rows propose(const Tree& tree, std::span<const int> nodes) {
        const int V = model_->vocab_size();
        if (fresh_) {  // a new step: the catch-up chain, then the builder's tree hanging from it
            inner_ = Tree::chain(pending_);
            offset_ = static_cast<int>(pending_.size());
            computed_ = 0;
            mirrored_ = 0;
            logits_.clear();
            fresh_ = false;
        }
        detail::require(tree.size() >= mirrored_, "proposer", [&] {
            return "propose: the tree shrank from " + std::to_string(mirrored_) + " to " + std::to_string(tree.size()) +
                   " nodes within one step (a builder may only grow its tree)";
        });
        for (int i = mirrored_; i < tree.size(); ++i) {
            const Node& n = tree[i];
            inner_.add(n.token, n.parent < 0 ? offset_ - 1 : n.parent + offset_, n.draft_prob, n.draw);
        }
        mirrored_ = tree.size();
        const auto t0 = std::chrono::steady_clock::now();
        const Rows fresh_rows = model_->forward(inner_, computed_);
        seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++n_calls_;
        logits_.insert(logits_.end(), fresh_rows.data.begin(), fresh_rows.data.end());
        computed_ = inner_.size();

        out_.resize(nodes.size() * static_cast<std::size_t>(V));
        for (std::size_t j = 0; j < nodes.size(); ++j) {
            const int inner = nodes[j] + offset_;
            detail::require(nodes[j] >= 0 && nodes[j] < tree.size(), "proposer", [&] {
                return "propose: node " + std::to_string(nodes[j]) + " is not in the tree of " +
                       std::to_string(tree.size()) + " nodes";
            });
            std::copy_n(logits_.begin() + static_cast<std::ptrdiff_t>(inner) * V, V,
                        out_.begin() + static_cast<std::ptrdiff_t>(j) * V);
        }
        return Rows{out_, V};
    }

    /// Keeps the KV rows of the accepted tokens the drafter scored. The verified tree may be a pruned
    /// or reordered copy of the one it was shown (StepOutcome), so the accepted path is matched by its
    /// tokens against the scored nodes, from the root down; the first token without a scored match and
    /// everything after it wait as the next step's catch-up chain.
    void observe(const StepOutcome& outcome) {
        std::vector<int> keep;  // inner indices of accepted tokens whose KV the drafter already has
        std::vector<int> later;
        if (!fresh_) {
            for (int i = 0; i < offset_; ++i) keep.push_back(i);
            int at = offset_ - 1;  // the scored inner node matched so far (the catch-up chain's end)
            for (int node : outcome.path) {
                const int token = outcome.tree[node].token;
                const int match = later.empty() ? scored_child(at, token) : -1;
                if (match >= 0) keep.push_back(at = match);
                else later.push_back(token);
            }
            model_->commit(keep);
            pending_ = std::move(later);
        } else {  // the builder never asked us this step: everything accepted is still pending
            for (int node : outcome.path) pending_.push_back(outcome.tree[node].token);
        }
        fresh_ = true;
    }

private:
    /// The first scored inner node under `parent` (offset_ - 1: the builder's roots) holding `token`,
    /// or -1. Siblings with equal tokens have equal KV rows, so the first is as good as any.
    int scored_child(int parent, int token) const {
        for (int i = std::max(parent + 1, offset_); i < computed_; ++i)
            if (inner_[i].parent == parent && inner_[i].token == token) return i;
        return -1;
    }

    M* model_;
    std::vector<int> pending_;   // committed tokens the drafter's cache lacks (before the root)
    Tree inner_;                 // catch-up chain + the builder's tree
    int offset_ = 0;             // inner index of the builder's node 0
    int computed_ = 0;           // inner nodes the model has scored this step
    int mirrored_ = 0;           // builder nodes copied into inner_
    bool fresh_ = true;
    long n_calls_ = 0;
    double seconds_ = 0.0;
    std::vector<float> logits_;  // (computed_ - ..., V): rows of every scored inner node this step
    std::vector<float> out_;     // (nodes, V)
};

/// The proposer of autoregressive decoding: it has nothing to say, and says so if asked.
struct NoProposer {
    int vocab = 0;
    int vocab_size() const { return vocab; }
    void start(std::span<const int>) {}
    Rows propose(const Tree&, std::span<const int>) {
        detail::fail("proposer", "NoProposer cannot draft; pair it with the RootOnly tree builder");
    }
    void observe(const StepOutcome&) {}
};

static_assert(Proposer<ModelProposer<CpuModel>>);
static_assert(Proposer<NoProposer>);
static_assert(ScoresNodes<ModelProposer<CpuModel>>);

}  // namespace specdec
