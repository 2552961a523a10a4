// specdec/detail/methods/edd_pct/edd.hpp — EDD's drafter: one decoder layer reading the target's hidden states as a soft prompt.
// SPDX-License-Identifier: MIT
#pragma once

// EDD (edd-pct.txt §3.1): the drafter is the target's architecture cut to one layer, with the target's
// vocabulary and hidden size. The target works as an encoder: its hidden states of the fourth-to-last
// layer (App. B; NOTES.md §2.1 settles the index) enter the drafter as input vectors — a soft prompt,
// no adapter — in front of the tokens of the round being drafted.
//
// Positions: the state h_k of committed token k sits at position k, and the round's tokens continue
// after the last state (the pending root at position cache_len of the target). Training uses the same
// numbering (train_edd.hpp), so a block's first token sees states 0..jL-1 at positions 0..jL-1 and
// itself at jL, exactly what the root of a drafting round sees.
//
// The drafter is a CpuModel: the states go through forward_embeddings and commit as ordinary rows;
// the round's token rows are dropped after every step (the next round sees their states instead).
// Its checkpoint is an HF-style folder: a LlamaConfig with model_type "edd", architectures
// ["EddDrafter"] and edd_target_layer (the target's hidden-state index it reads), and model.safetensors.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "../../core/concepts.hpp"
#include "../../core/error.hpp"
#include "../../core/tree.hpp"
#include "../../io/checkpoint.hpp"
#include "../../io/json.hpp"
#include "../../model/cpu_model.hpp"
#include "../../policies/proposers.hpp"

namespace specdec {

/// The target's hidden-state index EDD reads, in CpuModel / HF numbering (0 embeddings, l the output of
/// layer l, L the final normed state): HF hidden_states[-4] = L - 3, the output of the fourth-to-last
/// decoder layer. For a 32-layer LLaMA2-7B that is 29, the output of 0-based block 28 — the paper's "28th
/// (fourth-to-last)" layer (App. B, Fig. 5).
inline int edd_hidden_layer(const Config& target) { return std::max(0, target.num_hidden_layers - 3); }

/// The drafter's shape for a target: its config with one decoder layer.
inline Config edd_drafter_config(const Config& target) {
    Config c = target;
    c.num_hidden_layers = 1;
    return c;
}

struct EddCheckpoint {
    Config config;
    Weights weights;
    int target_layer = 0;  // which of the target's hidden states the soft prompt is (edd_hidden_layer)
};

/// Refuses a drafter that cannot read `target`'s states: hidden size, vocabulary or layer index.
inline void check_edd_pair(const Config& drafter, int target_layer, const Config& target) {
    detail::require(drafter.hidden_size == target.hidden_size, "edd", [&] {
        return "the drafter's hidden_size " + std::to_string(drafter.hidden_size) + " differs from the target's " +
               std::to_string(target.hidden_size) + " (the soft prompt enters without an adapter)";
    });
    detail::require(drafter.vocab_size == target.vocab_size, "edd", [&] {
        return "the drafter's vocab_size " + std::to_string(drafter.vocab_size) + " differs from the target's " +
               std::to_string(target.vocab_size);
    });
    detail::require(target_layer >= 0 && target_layer <= target.num_hidden_layers, "edd", [&] {
        return "edd_target_layer " + std::to_string(target_layer) + " is not a hidden state of the target, which has " +
               std::to_string(target.num_hidden_layers) + " layers (states 0.." + std::to_string(target.num_hidden_layers) + ")";
    });
}

inline void save_edd_checkpoint(const std::filesystem::path& dir, const EddCheckpoint& ck,
                                SaveFormat format = SaveFormat::kBF16) {
    save_checkpoint(dir, ck.config, ck.weights, format);
    const std::filesystem::path path = dir / "config.json";
    json::Value root = json::parse(detail::read_text_file(path, "edd"), path.string());
    json::Object& o = root.as_object();
    o.set("architectures", json::Array{json::Value("EddDrafter")});
    o.set("model_type", "edd");
    o.set("edd_target_layer", ck.target_layer);
    std::ofstream out(path, std::ios::binary);
    detail::require(static_cast<bool>(out), "edd", [&] { return path.string() + ": cannot write"; });
    out << json::dump(root, 2) << "\n";
}

inline EddCheckpoint load_edd_checkpoint(const std::filesystem::path& dir) {
    detail::require(std::filesystem::is_directory(dir), "edd", [&] {
        return dir.string() + ": not a directory (an EDD drafter is a folder with config.json and model.safetensors)";
    });
    const std::filesystem::path path = dir / "config.json";
    const json::Value root = json::parse(detail::read_text_file(path, "edd"), path.string());
    const json::Value* type = root.is_object() ? root.find("model_type") : nullptr;
    detail::require(type != nullptr && type->is_string() && type->as_string() == "edd", "edd", [&] {
        return path.string() + ": model_type is not \"edd\" (an EDD drafter's config names it and edd_target_layer)";
    });
    const std::int64_t layer = detail::read_field(root, path.string(), "edd_target_layer", "edd", detail::as_int);
    detail::require(layer >= 0 && layer < (std::int64_t{1} << 20), "edd", [&] {
        return path.string() + ": edd_target_layer " + std::to_string(layer) + " is out of range";
    });
    EddCheckpoint ck;
    ck.config = load_config(path);
    ck.weights = load_weights(dir / "model.safetensors", ck.config);
    ck.target_layer = static_cast<int>(layer);
    return ck;
}

/// EDD's proposer: drafts from the pending root with the drafter, whose committed rows are the target's
/// hidden states of every committed token but the root (the target has not run the root yet). Each
/// step it first appends the states the target committed since the last step, then scores the
/// builder's tree; observe() drops the tree rows. Any ScoresNodes builder drives it (PCT, chains,
/// CAPE, EAGLE-2).
template <ExposesCommittedHidden Target>
class EddProposer {
public:
    /// Makes `target` keep the states of `target_layer` (call before the text is forwarded: the loop
    /// prefills after the proposer exists). Both models must outlive the proposer.
    EddProposer(Target& target, CpuModel& drafter, int target_layer)
        : target_(&target), drafter_(&drafter), layer_(target_layer) {
        detail::require(drafter.vocab_size() == target.vocab_size(), "edd", [&] {
            return "the drafter's vocabulary of " + std::to_string(drafter.vocab_size()) + " differs from the target's " +
                   std::to_string(target.vocab_size());
        });
        if constexpr (requires { target.config(); }) check_edd_pair(drafter.config(), target_layer, target.config());
        target.add_hidden_layer(target_layer);  // beside any other reader's layer (a FeatureProposer's L)
    }

    int vocab_size() const { return drafter_->vocab_size(); }
    long n_calls() const { return n_calls_; }
    std::vector<DrafterUsage> usage() const { return {{drafter_, n_calls_, seconds_}}; }
    std::vector<DrafterContext> drafter_contexts() const { return {{"the EDD drafter", drafter_->context_size()}}; }

    void start(std::span<const int> prompt) {
        detail::require(!prompt.empty(), "edd", [] { return std::string("start: the prompt is empty"); });
        drafter_->reset();
        fed_ = 0;
        fresh_ = true;
    }

    Rows propose(const Tree& tree, std::span<const int> nodes) {
        const auto t0 = std::chrono::steady_clock::now();
        if (fresh_) {
            catch_up();
            computed_ = 0;
            logits_.clear();
            fresh_ = false;
        }
        const int V = vocab_size();
        const Rows fresh_rows = drafter_->forward(tree, computed_);
        ++n_calls_;
        logits_.insert(logits_.end(), fresh_rows.data.begin(), fresh_rows.data.end());
        computed_ = tree.size();
        seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        out_.resize(nodes.size() * static_cast<std::size_t>(V));
        for (std::size_t j = 0; j < nodes.size(); ++j) {
            detail::require(nodes[j] >= 0 && nodes[j] < computed_, "edd", [&] {
                return "propose: node " + std::to_string(nodes[j]) + " is not in the tree of " +
                       std::to_string(computed_) + " nodes";
            });
            std::copy_n(logits_.begin() + static_cast<std::ptrdiff_t>(nodes[j]) * V, V,
                        out_.begin() + static_cast<std::ptrdiff_t>(j) * V);
        }
        return Rows{out_, V};
    }

    /// The tree's token rows are not kept: next step the target's states of the accepted tokens take
    /// their place (Eq. 3: a round sees the states of earlier rounds and its own tokens only).
    void observe(const StepOutcome&) {
        drafter_->truncate(fed_);
        fresh_ = true;
    }

    /// States fed so far: equal to the target's committed length at the start of every step.
    int states_fed() const { return fed_; }
    /// The target's hidden-state index the soft prompt is.
    int target_layer() const { return layer_; }

private:
    /// Feeds the target's committed states the drafter lacks, as committed rows.
    void catch_up() {
        const Rows h = target_->committed_hidden(target_->hidden_index(layer_));
        const int n = h.rows();
        detail::require(n >= fed_, "edd", [&] {
            return "the target holds " + std::to_string(n) + " committed states but the drafter was fed " +
                   std::to_string(fed_) + " (was the target truncated behind the proposer's back?)";
        });
        drafter_->truncate(fed_);
        if (n == fed_) return;
        const int D = h.cols;
        std::vector<int> zeros(static_cast<std::size_t>(n - fed_), 0);  // forward_embeddings reads no token
        const Tree chain = Tree::chain(zeros);
        drafter_->forward_embeddings(chain, 0, Rows{h.data.subspan(static_cast<std::size_t>(fed_) * D), D});
        std::vector<int> path(zeros.size());
        for (std::size_t i = 0; i < path.size(); ++i) path[i] = static_cast<int>(i);
        drafter_->commit(path);
        fed_ = n;
    }

    Target* target_;
    CpuModel* drafter_;
    int layer_ = 0;
    int fed_ = 0;        // target states committed in the drafter
    int computed_ = 0;   // tree nodes the drafter scored this step
    bool fresh_ = true;
    long n_calls_ = 0;
    double seconds_ = 0.0;
    std::vector<float> logits_;
    std::vector<float> out_;
};

}  // namespace specdec
