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
    detail::require_llama_block(target, "edd", "an EDD drafter's layer (built in the target's shape)");
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
    // model_type "edd" reads back as Llama's block: a Qwen block would lose its biases or norms.
    detail::require_llama_block(ck.config, "edd", "save_edd_checkpoint");
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
/// step's first forward carries the states the target committed since the last step as a catch-up
/// chain (fed as input vectors) with the builder's tree hanging from its end, one forward as
/// ModelProposer fuses its catch-up; observe() keeps the chain's rows and drops the tree's. Any
/// ScoresNodes builder drives it (PCT, chains, CAPE, EAGLE-2), and a step that starts from a deferred
/// bonus (target-initialised MCSD) too: its roots sit where a pending root would, after every state.
/// The drafter is a CpuModel, or a CudaModel beside a CUDA target (its max_tree_nodes must hold the
/// catch-up chain plus the tree: the prompt's states arrive in the first step's forward).
template <ExposesCommittedHidden Target, class Drafter = CpuModel>
    requires requires(Drafter& d, const Tree& t, Rows r) {
        { d.forward_embeddings(t, 0, r) } -> std::same_as<Rows>;
        d.embedding(0);
    }
class EddProposer {
public:
    /// Makes `target` keep the states of `target_layer` (call before the text is forwarded: the loop
    /// prefills after the proposer exists). Both models must outlive the proposer.
    EddProposer(Target& target, Drafter& drafter, int target_layer)
        : target_(&target), drafter_(&drafter), layer_(target_layer) {
        detail::require(drafter.vocab_size() == target.vocab_size(), "edd", [&] {
            return "the drafter's vocabulary of " + std::to_string(drafter.vocab_size()) + " differs from the target's " +
                   std::to_string(target.vocab_size());
        });
        if constexpr (requires { target.config(); }) check_edd_pair(drafter.config(), target_layer, target.config());
        target.add_hidden_layer(target_layer);  // beside any other reader's layer (a FeatureProposer's L)
    }

    int vocab_size() const { return drafter_->vocab_size(); }
    /// Drafter forwards so far, every one counted (the catch-up rides in the step's first).
    long n_calls() const { return n_calls_; }
    std::vector<DrafterUsage> usage() const { return {{drafter_, n_calls_, seconds_}}; }
    std::vector<DrafterContext> drafter_contexts() const { return {{"the EDD drafter", drafter_->context_size()}}; }

    void start(std::span<const int> prompt) {
        detail::require(!prompt.empty(), "edd", [] { return std::string("start: the prompt is empty"); });
        drafter_->reset();
        fed_ = 0;
        offset_ = 0;
        fresh_ = true;
    }

    Rows propose(const Tree& tree, std::span<const int> nodes) {
        const auto t0 = std::chrono::steady_clock::now();
        const int V = vocab_size(), D = drafter_->config().hidden_size;
        if (fresh_) {  // a new step: the catch-up chain of states, then the builder's tree hanging from it
            const Rows h = target_->committed_hidden(target_->hidden_index(layer_));
            detail::require(h.rows() >= fed_, "edd", [&] {
                return "the target holds " + std::to_string(h.rows()) + " committed states but the drafter was fed " +
                       std::to_string(fed_) + " (was the target truncated behind the proposer's back?)";
            });
            offset_ = h.rows() - fed_;
            inner_ = Tree::chain(std::vector<int>(static_cast<std::size_t>(offset_), 0));  // forward_embeddings reads no token
            inputs_.assign(h.data.begin() + static_cast<std::ptrdiff_t>(fed_) * D, h.data.end());
            computed_ = 0;
            mirrored_ = 0;
            logits_.clear();
            fresh_ = false;
        }
        detail::require(tree.size() >= mirrored_, "edd", [&] {
            return "propose: the tree shrank from " + std::to_string(mirrored_) + " to " + std::to_string(tree.size()) +
                   " nodes within one step (a builder may only grow its tree)";
        });
        for (int i = mirrored_; i < tree.size(); ++i) {  // the tree's tokens enter as the drafter's own embeddings
            const Node& n = tree[i];
            inner_.add(n.token, n.parent < 0 ? offset_ - 1 : n.parent + offset_, n.draft_prob, n.draw);
            const auto e = drafter_->embedding(n.token);
            inputs_.insert(inputs_.end(), e.begin(), e.end());
        }
        mirrored_ = tree.size();
        const std::size_t from = static_cast<std::size_t>(computed_) * D;
        const Rows fresh_rows = drafter_->forward_embeddings(
            inner_, computed_, Rows{std::span<const float>(inputs_).subspan(from), D});
        ++n_calls_;
        logits_.insert(logits_.end(), fresh_rows.data.begin(), fresh_rows.data.end());
        computed_ = inner_.size();
        seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        out_.resize(nodes.size() * static_cast<std::size_t>(V));
        for (std::size_t j = 0; j < nodes.size(); ++j) {
            detail::require(nodes[j] >= 0 && nodes[j] < mirrored_, "edd", [&] {
                return "propose: node " + std::to_string(nodes[j]) + " is not in the tree of " +
                       std::to_string(mirrored_) + " nodes";
            });
            std::copy_n(logits_.begin() + static_cast<std::ptrdiff_t>(nodes[j] + offset_) * V, V,
                        out_.begin() + static_cast<std::ptrdiff_t>(j) * V);
        }
        return Rows{out_, V};
    }

    /// Keeps the catch-up chain's rows; the tree's token rows are dropped: next step the target's states
    /// of the accepted tokens take their place (Eq. 3: a round sees the states of earlier rounds and its
    /// own tokens only). A step whose builder never asked leaves its states for the next step's chain.
    void observe(const StepOutcome&) {
        if (!fresh_ && offset_ > 0) {
            std::vector<int> chain(static_cast<std::size_t>(offset_));
            for (int i = 0; i < offset_; ++i) chain[static_cast<std::size_t>(i)] = i;
            drafter_->commit(chain);
            fed_ += offset_;
        }
        drafter_->truncate(fed_);
        fresh_ = true;
    }

    /// States fed so far: equal to the target's committed length at the start of every step that drafts.
    int states_fed() const { return fed_; }
    /// The target's hidden-state index the soft prompt is.
    int target_layer() const { return layer_; }

private:
    Target* target_;
    Drafter* drafter_;
    int layer_ = 0;
    int fed_ = 0;        // target states committed in the drafter
    int offset_ = 0;     // inner index of the builder's node 0: the catch-up chain's length this step
    int computed_ = 0;   // inner nodes the drafter scored this step
    int mirrored_ = 0;   // builder nodes copied into inner_
    bool fresh_ = true;
    long n_calls_ = 0;
    double seconds_ = 0.0;
    Tree inner_;                  // catch-up chain + the builder's tree
    std::vector<float> inputs_;   // (inner nodes, D): the chain's states, then the tree's token embeddings
    std::vector<float> logits_;   // (computed, V)
    std::vector<float> out_;      // (nodes, V)
};

}  // namespace specdec
