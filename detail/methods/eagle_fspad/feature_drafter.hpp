// specdec/detail/methods/eagle_fspad/feature_drafter.hpp — EAGLE's feature drafter and FSPAD's: a connector, one decoder layer, the target's head.
// SPDX-License-Identifier: MIT
#pragma once

// EAGLE (Li et al. 2024b, §4.1) and FSPAD (fspad.txt, "Preliminaries", Fig. 5): the drafter predicts the
// target's next *feature* — its last hidden state before the LM head — rather than the next token.
// The feature is the target's final state AFTER the final norm (HF's outputs[0] of LlamaModel, what the
// LM head reads: EAGLE's ea_model.py takes `outputs[0]`, and its drafter feeds its output straight into
// the head). Input at position t: η_t = connector(e_{t+1}, f_t), the embedding of the next token and
// the feature of this one; one decoder layer (a CpuModel of one layer fed through forward_embeddings);
// its output, through the layer's own final norm, is the next feature f̂_{t+1}, and the target's LM
// head (a frozen copy) turns it into logits for token t+2.
//
// Connectors (a Connector value):
//   kFc       EAGLE: η = FC(concat(e, f)), a (D, 2D) matrix, with a bias (D) where the checkpoint has
//             one (EAGLE's cnets.py defaults to bias=True; the drafters trained here have none);
//   kSampler  FSPAD's Feature Sampler: η = Down(SiLU(Gate(e)) ⊙ Up(f)), Gate/Up (I, D) and Down (D, I),
//             I = the target's intermediate_size. No residual is added (NOTES.md §5.4: the text only
//             says the projector "allows for" one; we follow its formula as written).
// Partial Alignment Distillation is Config::partial_alignment on the layer: its MLP outputs 2D, the
// first half → norm → head (f̃, the token), the second → norm (f, the feature fed forward).
// The EAGLE layout (Config::identity_end_norms, "layout": "eagle" in config.json) is EAGLE-1/2's own
// layer, the one SGLang and vLLM serve: no input_layernorm on the layer and no final norm, so the layer's
// output is both the head's input and the feature fed forward (eagle_layout.hpp exports and imports it).
//
// Drafting is autoregressive at the feature level inside the tree: the root uses the target's feature
// of the last committed token; a node deeper down uses the drafter's predicted feature of its parent.
// Committed rows are recomputed from the target's features once verified (EAGLE's cnets.py keeps a
// "stable_kv" of rows computed from target features only), so after a step the drafter's cache holds
// exactly what a fresh drafter fed the committed text would hold.
//
// Positions: η_t sits at position t. With T tokens committed in the target (features f_0..f_{T-1}) and
// the root x_T pending, the drafter has committed η_0..η_{T-2} and the root node is η_{T-1} =
// connector(e_root, f_{T-1}) at position T-1 (one behind the target's numbering, as in training).
//
// The checkpoint is an HF-style folder: the layer's LlamaConfig (one layer) with model_type "eagle"
// (FC, no PAD) or "fspad" (any other combination), architectures ["EagleDrafter"] / ["FspadDrafter"],
// "connector" ("fc" or "feature_sampler"), "sampler_intermediate_size", and "target_config_hash"
// (fnv1a of the target's shape and RoPE scaling: a drafter for another target is refused);
// model.safetensors holds the layer, the final norm, the target's embedding/head copies and the
// connector under "fc.weight" (and "fc.bias" where it has one) or "sampler.{gate,up,down}_proj.weight";
// "layout": "eagle" marks a layer without its end norms (absent: the layer with both).

#include <chrono>
#include <concepts>
#include <type_traits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../../core/concepts.hpp"
#include "../../core/error.hpp"
#include "../../core/tree.hpp"
#include "../../io/checkpoint.hpp"
#include "../../io/json.hpp"
#include "../../model/cpu_model.hpp"
#include "../../model/softmax.hpp"
#include "../../policies/proposers.hpp"

namespace specdec {

/// How the drafter's input is built from (e_{t+1}, f_t).
enum class Connector {
    kFc,       // EAGLE: FC(concat(e, f)), (D, 2D)
    kSampler,  // FSPAD's Feature Sampler: Down(SiLU(Gate(e)) ⊙ Up(f)), through the target's intermediate size
};

inline const char* connector_name(Connector c) { return c == Connector::kFc ? "fc" : "feature_sampler"; }

/// The connector's parameters, (out, in) row-major as nn.Linear stores them.
struct ConnectorWeights {
    std::vector<float> fc;    // (D, 2D)  fc.weight, input concat(e, f) (EAGLE's order: embeddings first)
    std::vector<float> fc_bias;  // (D)   fc.bias; empty: none
    std::vector<float> gate;  // (I, D)   sampler.gate_proj.weight, reads e
    std::vector<float> up;    // (I, D)   sampler.up_proj.weight, reads f
    std::vector<float> down;  // (D, I)   sampler.down_proj.weight
};

/// Calls f(name, tensor, shape) for every connector tensor of kind `c` (D wide, sampler I wide); the
/// FC bias only where `w` holds one.
template <class W, class F>
void for_each_connector_tensor(W& w, Connector c, int D, int I, F&& f) {
    const std::int64_t d = D, i = I;
    if (c == Connector::kFc) {
        f(std::string("fc.weight"), w.fc, std::vector<std::int64_t>{d, 2 * d});
        if (!w.fc_bias.empty()) f(std::string("fc.bias"), w.fc_bias, std::vector<std::int64_t>{d});
    } else {
        f(std::string("sampler.gate_proj.weight"), w.gate, std::vector<std::int64_t>{i, d});
        f(std::string("sampler.up_proj.weight"), w.up, std::vector<std::int64_t>{i, d});
        f(std::string("sampler.down_proj.weight"), w.down, std::vector<std::int64_t>{d, i});
    }
}

/// The connector's shape, for the optimizer and gradient-norm helpers that walk tensors by config.
struct ConnectorShape {
    Connector kind = Connector::kFc;
    int D = 0, I = 0;
};

/// for_each_tensor over a connector (so AdamW, grad_norm and clipping take it as they take Weights).
template <class W, class F>
    requires std::same_as<std::remove_const_t<W>, ConnectorWeights>
void for_each_tensor(W& w, const ConnectorShape& s, F&& f) {
    for_each_connector_tensor(w, s.kind, s.D, s.I, [&](const std::string& name, auto& t, const std::vector<std::int64_t>& shape) {
        std::int64_t n = 1;
        for (std::int64_t extent : shape) n *= extent;
        f(name, t, static_cast<std::size_t>(n));
    });
}

/// A feature drafter as stored: the layer's config and weights (embedding and head are the target's),
/// the connector, and the fingerprint of the target it was trained on.
struct FeatureCheckpoint {
    Config config;               // the target's shape with one layer (partial_alignment for PAD)
    Weights weights;             // the layer, the final norm, the target's embedding (and head)
    Connector connector = Connector::kFc;
    int sampler_size = 0;        // I: the Feature Sampler's width (the target's intermediate_size)
    ConnectorWeights connector_weights;
    std::string target_hash;     // target_config_hash(target's config)
};

/// FNV-1a (64 bits, hex) of a config's shape fields: which target a drafter reads features from.
SPECDEC_INLINE std::string target_config_hash(const Config& c);

/// The drafter's layer for a target: its shape, one layer, PAD when asked.
inline Config feature_drafter_config(const Config& target, bool partial_alignment) {
    detail::require_llama_block(target, "eagle", "a feature drafter's layer (built in the target's shape)");
    Config c = target;
    c.num_hidden_layers = 1;
    c.partial_alignment = partial_alignment;
    return c;
}

/// Random connector weights (N(0, std)) of kind `c`.
SPECDEC_INLINE ConnectorWeights random_connector(Connector c, int D, int I, std::uint64_t seed, float std_dev);

/// The drafter's starting point: a random layer and connector, the target's embedding, head and final
/// norm (EAGLE freezes the head and embedding; the norm is trained).
SPECDEC_INLINE FeatureCheckpoint initial_feature_drafter(const Config& target_config, const Weights& target, Connector c,
                                                         bool partial_alignment, std::uint64_t seed, float std_dev = 0.02f);

/// Refuses a drafter that cannot read `target`'s features: width, vocabulary, connector shape, or a
/// drafter trained for another target (target_hash).
SPECDEC_INLINE void check_feature_pair(const FeatureCheckpoint& drafter, const Config& target);

SPECDEC_INLINE void save_feature_checkpoint(const std::filesystem::path& dir, const FeatureCheckpoint& ck,
                                            SaveFormat format = SaveFormat::kBF16);
SPECDEC_INLINE FeatureCheckpoint load_feature_checkpoint(const std::filesystem::path& dir);

/// The connector for inference: η (n, D) from e (n, D) and f (n, D), through the model's matrix
/// products (bf16 or float32 as the ModelOptions say).
class FeatureConnector {
public:
    FeatureConnector(Connector kind, ConnectorWeights w, int D, int I, ModelOptions options);
    FeatureConnector(const FeatureConnector&) = delete;  // matrices point into w_
    FeatureConnector& operator=(const FeatureConnector&) = delete;
    FeatureConnector(FeatureConnector&&) = default;
    FeatureConnector& operator=(FeatureConnector&&) = default;

    /// eta (n, D) = connector(e, f).
    void apply(float* eta, const float* e, const float* f, int n);

private:
    Connector kind_;
    ConnectorWeights w_;
    int D_ = 0, I_ = 0;
    ModelOptions opt_;
    std::unique_ptr<ThreadPool> own_pool_;
    detail::Matrix fc_, gate_, up_, down_;
    std::vector<float> cat_;         // (n, 2D) concat(e, f)
    std::vector<float> g_, u_, h_;   // (n, I)
};

/// What FeatureProposer asks of a drafter (FeatureDrafter on the CPU; CudaFeatureDrafter,
/// detail/cuda/feature_drafter.cuh, on the GPU): the layer's shape, its cache, and two steps through
/// connector and layer with the features on the host, (n, D) row-major.
template <class D>
concept FeatureDrafterLike = requires(D& d, const D& cd, const Tree& tree, int n, std::span<const int> tokens,
                                      std::span<const float> f) {
    { cd.config() } -> std::convertible_to<const Config&>;
    { cd.context_size() } -> std::convertible_to<int>;
    { cd.target_hash } -> std::convertible_to<std::string>;
    d.reset();
    d.truncate(n);
    { d.score(tree, n, f) } -> std::same_as<Rows>;       // logits of nodes first.. of tree, fed f
    { cd.features() } -> std::same_as<Rows>;            // their predicted features
    d.append(tokens, f);                                // commits rows for (tokens, f)
    d.model;                                            // the layer's model: how usage() names the drafter
};

/// The drafter: connector + one decoder layer (CpuModel, the target's head) + which target it reads.
struct FeatureDrafter {
    FeatureDrafter(FeatureCheckpoint ck, ModelOptions options = {})
        : connector(ck.connector, std::move(ck.connector_weights), ck.config.hidden_size, ck.sampler_size, options),
          model(ck.config, std::move(ck.weights), options), kind(ck.connector), target_hash(std::move(ck.target_hash)) {
        model.capture_hidden({1});  // the predicted feature: the layer's final state (PAD: its feature branch)
    }
    FeatureConnector connector;
    CpuModel model;
    Connector kind;
    std::string target_hash;

    const Config& config() const { return model.config(); }
    int context_size() const { return model.context_size(); }
    void reset() { model.reset(); }
    void truncate(int n) { model.truncate(n); }

    /// Logits (N - first, V) of tree nodes first..N-1, node first + i fed η = connector(e(token), f_i).
    Rows score(const Tree& tree, int first, std::span<const float> f) {
        const int n = tree.size() - first;
        embed(n, [&](int i) { return tree[first + i].token; }, f);
        return model.forward_embeddings(tree, first, Rows{eta_, model.config().hidden_size});
    }
    /// The features the last score predicted, (N - first, D).
    Rows features() const { return model.hidden(0); }
    /// Forwards and commits one row per token, fed η = connector(e(tokens_i), f_i).
    void append(std::span<const int> tokens, std::span<const float> f) {
        const int n = static_cast<int>(tokens.size());
        if (n == 0) return;
        embed(n, [&](int i) { return tokens[static_cast<std::size_t>(i)]; }, f);
        std::vector<int> zeros(static_cast<std::size_t>(n), 0), path(static_cast<std::size_t>(n));
        for (int i = 0; i < n; ++i) path[static_cast<std::size_t>(i)] = i;
        model.forward_embeddings(Tree::chain(zeros), 0, Rows{eta_, model.config().hidden_size});
        model.commit(path);
    }

private:
    template <class TokenOf>
    void embed(int n, TokenOf token_of, std::span<const float> f) {
        const int D = model.config().hidden_size;
        detail::require(f.size() == static_cast<std::size_t>(n) * D, "eagle", [&] {
            return "feature drafter: " + std::to_string(f.size()) + " feature values for " + std::to_string(n) +
                   " rows of " + std::to_string(D);
        });
        e_.resize(f.size());
        eta_.resize(f.size());
        for (int i = 0; i < n; ++i) {
            const auto e = model.embedding(token_of(i));
            std::copy(e.begin(), e.end(), e_.begin() + static_cast<std::ptrdiff_t>(i) * D);
        }
        connector.apply(eta_.data(), e_.data(), f.data(), n);
    }
    std::vector<float> e_, eta_;  // (n, D) scratch
};

/// The EAGLE / FSPAD proposer (ScoresNodes): drives any tree builder (Eagle2Tree, chains, CAPE). Reads
/// the target's committed features (ExposesCommittedHidden, state L) and keeps its own KV cache over the
/// committed text, recomputed from those features after every verification. The drafter runs on the
/// CPU (FeatureDrafter) or on the GPU (CudaFeatureDrafter); the features pass through the host.
template <ExposesCommittedHidden Target, FeatureDrafterLike Drafter = FeatureDrafter>
class FeatureProposer {
public:
    /// Makes `target` keep its final states (call before the text is forwarded: the loop prefills after
    /// the proposer exists). Both must outlive the proposer.
    FeatureProposer(Target& target, Drafter& drafter) : target_(&target), drafter_(&drafter) {
        const Config& dc = drafter.config();
        detail::require(dc.vocab_size == target.vocab_size(), "eagle", [&] {
            return "the drafter's vocab_size " + std::to_string(dc.vocab_size) + " differs from the target's " +
                   std::to_string(target.vocab_size());
        });
        if constexpr (requires { target.config(); }) {
            const Config& tc = target.config();
            detail::require(dc.hidden_size == tc.hidden_size, "eagle", [&] {
                return "the drafter's feature size (hidden_size) " + std::to_string(dc.hidden_size) +
                       " differs from the target's " + std::to_string(tc.hidden_size);
            });
            detail::require(drafter.target_hash.empty() || drafter.target_hash == target_config_hash(tc), "eagle", [&] {
                return "the drafter was trained for a target with config hash " + drafter.target_hash +
                       ", this target's is " + target_config_hash(tc) + " (another model's features)";
            });
            layer_ = tc.num_hidden_layers;
        } else {
            layer_ = target.num_layers();
        }
        target.add_hidden_layer(layer_);  // beside any other reader's layer (an EddProposer's L - 3)
    }

    int vocab_size() const { return drafter_->config().vocab_size; }
    long n_calls() const { return n_calls_; }
    std::vector<DrafterUsage> usage() const { return {{&drafter_->model, n_calls_, seconds_}}; }
    std::vector<DrafterContext> drafter_contexts() const {
        return {{"the feature drafter", drafter_->context_size()}};
    }

    void start(std::span<const int> prompt) {
        detail::require(!prompt.empty(), "eagle", [] { return std::string("start: the prompt is empty"); });
        drafter_->reset();
        tokens_.assign(prompt.begin(), prompt.end());
        root_pending_ = true;
        fed_ = 0;
        fresh_ = true;
    }

    Rows propose(const Tree& tree, std::span<const int> nodes) {
        const auto t0 = std::chrono::steady_clock::now();
        const int D = drafter_->config().hidden_size, V = vocab_size();
        if (fresh_) {
            catch_up();
            computed_ = 0;
            logits_.clear();
            features_.clear();
            fresh_ = false;
        }
        const int N = tree.size(), n = N - computed_;
        if (n > 0) {
            // Inputs of the new nodes: the root reads the target's last committed feature, a deeper node
            // its parent's predicted one (feature-level autoregression, EAGLE §4.1).
            f_.resize(static_cast<std::size_t>(n) * D);
            const Rows target_f = target_->committed_hidden(target_->hidden_index(layer_));
            for (int i = 0; i < n; ++i) {
                const Node& node = tree[computed_ + i];
                float* f = f_.data() + static_cast<std::size_t>(i) * D;
                if (node.parent >= 0) {
                    // The parent's predicted feature is this node's input: the parent must have been
                    // scored by an earlier propose (builders grow the tree a depth per call).
                    detail::require(node.parent < computed_, "eagle", [&] {
                        return "propose: node " + std::to_string(computed_ + i) + " and its parent " +
                               std::to_string(node.parent) + " are both new in one call; a feature drafter needs "
                               "the parent's predicted feature first (score the tree a depth at a time)";
                    });
                    std::copy_n(features_.data() + static_cast<std::size_t>(node.parent) * D, D, f);
                } else if (target_f.rows() > 0) {
                    const auto last = target_f.row(target_f.rows() - 1);
                    std::copy(last.begin(), last.end(), f);
                } else {
                    std::fill_n(f, D, 0.0f);  // a one-token prompt: no feature yet
                }
            }
            const Rows rows = drafter_->score(tree, computed_, f_);
            ++n_calls_;
            logits_.insert(logits_.end(), rows.data.begin(), rows.data.end());
            const Rows h = drafter_->features();
            features_.insert(features_.end(), h.data.begin(), h.data.end());
            computed_ = N;
        }
        seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        out_.resize(nodes.size() * static_cast<std::size_t>(V));
        for (std::size_t j = 0; j < nodes.size(); ++j) {
            detail::require(nodes[j] >= 0 && nodes[j] < computed_, "eagle", [&] {
                return "propose: node " + std::to_string(nodes[j]) + " is not in the tree of " + std::to_string(computed_) +
                       " nodes";
            });
            std::copy_n(logits_.begin() + static_cast<std::ptrdiff_t>(nodes[j]) * V, V,
                        out_.begin() + static_cast<std::ptrdiff_t>(j) * V);
        }
        return Rows{out_, V};
    }

    /// Reads the accepted path by its tokens in the verified tree (StepOutcome); the drafter's tree rows
    /// are all dropped: the accepted ones were computed from predicted features, and the next step
    /// recomputes them from the target's (catch_up).
    /// A step that began without a pending root (the previous acceptor deferred its bonus: target-initialised
    /// MCSD) accepted a path whose first token is new too, and a deferred bonus leaves no root pending
    /// (next_root -1); the roots such a step draws read the last committed feature, as a pending root does.
    void observe(const StepOutcome& outcome) {
        for (std::size_t i = root_pending_ ? 1 : 0; i < outcome.path.size(); ++i)
            tokens_.push_back(outcome.tree[outcome.path[i]].token);
        root_pending_ = outcome.next_root >= 0;
        if (root_pending_) tokens_.push_back(outcome.next_root);
        drafter_->truncate(fed_);
        fresh_ = true;
    }

    /// Committed rows of the drafter: η_0..η_{fed-1}, one behind the target's cache at each step's start.
    int rows_fed() const { return fed_; }
    /// The drafter's predicted features (N, D) of the nodes scored this step.
    Rows node_features() const { return Rows{features_, drafter_->config().hidden_size}; }

private:
    /// Commits η_t = connector(e_{t+1}, f_t) for the target's committed tokens the drafter lacks, all but
    /// the last (the root node's row, recomputed in the tree).
    void catch_up() {
        const Rows f = target_->committed_hidden(target_->hidden_index(layer_));
        const int T = f.rows(), want = std::max(T - 1, 0), D = f.cols;
        detail::require(want >= fed_ && static_cast<int>(tokens_.size()) == T + (root_pending_ ? 1 : 0), "eagle", [&] {
            return "the target holds " + std::to_string(T) + " committed features for a text of " +
                   std::to_string(tokens_.size()) + " tokens, but the drafter was fed " + std::to_string(fed_) +
                   " (was the target truncated behind the proposer's back?)";
        });
        drafter_->truncate(fed_);
        const int n = want - fed_;
        if (n == 0) return;
        drafter_->append(std::span<const int>(tokens_).subspan(static_cast<std::size_t>(fed_ + 1), static_cast<std::size_t>(n)),
                         f.data.subspan(static_cast<std::size_t>(fed_) * D, static_cast<std::size_t>(n) * D));
        fed_ = want;
    }

    Target* target_;
    Drafter* drafter_;
    int layer_ = 0;
    std::vector<int> tokens_;   // the committed text, ending with the pending root if one is pending
    bool root_pending_ = true;  // false after a deferred bonus (StepOutcome::next_root -1)
    int fed_ = 0;               // committed drafter rows
    int computed_ = 0;          // tree nodes scored this step
    bool fresh_ = true;
    long n_calls_ = 0;
    double seconds_ = 0.0;
    std::vector<float> logits_;    // (computed, V)
    std::vector<float> features_;  // (computed, D) predicted features
    std::vector<float> out_;
    std::vector<float> f_;         // (n, D) the new nodes' input features
};

#if SPECDEC_BODIES

SPECDEC_INLINE std::string target_config_hash(const Config& c) {
    char text[256];
    std::snprintf(text, sizeof text, "D%d F%d L%d H%d Hkv%d V%d theta%.6g eps%.6g ctx%d tie%d", c.hidden_size,
                  c.intermediate_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.vocab_size,
                  static_cast<double>(c.rope_theta), static_cast<double>(c.rms_norm_eps), c.max_position_embeddings,
                  c.tie_word_embeddings ? 1 : 0);
    // A Qwen block, an explicit head size and a RoPE scaling are named only where present, so every target
    // without them keeps the hash it had. The scaling changes every position's features: a drafter trained
    // on a target's features under one scaling has not seen them under another.
    std::string key = text;
    if (c.qkv_bias) key += " qkv_bias";
    if (c.qk_norm) key += " qk_norm";
    if (c.attention_head_dim != 0 && c.attention_head_dim * c.num_attention_heads != c.hidden_size)
        key += " hd" + std::to_string(c.attention_head_dim);
    if (const RopeScaling& r = c.rope_scaling; r.type != RopeScalingType::kNone) {
        std::snprintf(text, sizeof text, " rope%d f%.6g lo%.6g hi%.6g orig%d bf%.6g bs%.6g af%.6g tr%d", static_cast<int>(r.type),
                      static_cast<double>(r.factor), static_cast<double>(r.low_freq_factor),
                      static_cast<double>(r.high_freq_factor), r.original_max_position_embeddings,
                      static_cast<double>(r.beta_fast), static_cast<double>(r.beta_slow),
                      static_cast<double>(r.attention_factor), r.truncate ? 1 : 0);
        key += text;
        for (const float f : r.factors) {
            std::snprintf(text, sizeof text, " %.6g", static_cast<double>(f));
            key += text;
        }
    }
    std::uint64_t h = 1469598103934665603ull;
    for (const char ch : key) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return hex;
}

SPECDEC_INLINE ConnectorWeights random_connector(Connector c, int D, int I, std::uint64_t seed, float std_dev) {
    ConnectorWeights w;
    detail::NormalStream normal{seed};
    for_each_connector_tensor(w, c, D, I, [&](const std::string&, std::vector<float>& t, const std::vector<std::int64_t>& s) {
        std::int64_t n = 1;
        for (std::int64_t extent : s) n *= extent;
        t.resize(static_cast<std::size_t>(n));
        for (float& v : t) v = std_dev * normal.next();
    });
    return w;
}

SPECDEC_INLINE FeatureCheckpoint initial_feature_drafter(const Config& target_config, const Weights& target, Connector c,
                                                         bool partial_alignment, std::uint64_t seed, float std_dev) {
    FeatureCheckpoint ck;
    ck.config = feature_drafter_config(target_config, partial_alignment);
    ck.weights = random_weights(ck.config, seed, std_dev);
    ck.weights.embed = target.embed;
    ck.weights.norm = target.norm;
    ck.weights.lm_head = target.lm_head;
    validate(ck.weights, ck.config);
    ck.connector = c;
    ck.sampler_size = target_config.intermediate_size;
    ck.connector_weights = random_connector(c, target_config.hidden_size, ck.sampler_size, seed + 1, std_dev);
    ck.target_hash = target_config_hash(target_config);
    return ck;
}

SPECDEC_INLINE void check_feature_pair(const FeatureCheckpoint& d, const Config& target) {
    detail::require(d.config.hidden_size == target.hidden_size, "eagle", [&] {
        return "the drafter's feature size (hidden_size) " + std::to_string(d.config.hidden_size) +
               " differs from the target's " + std::to_string(target.hidden_size);
    });
    detail::require(d.config.vocab_size == target.vocab_size, "eagle", [&] {
        return "the drafter's vocab_size " + std::to_string(d.config.vocab_size) + " differs from the target's " +
               std::to_string(target.vocab_size);
    });
    detail::require(d.target_hash.empty() || d.target_hash == target_config_hash(target), "eagle", [&] {
        return "the drafter was trained for a target with config hash " + d.target_hash + ", this target's is " +
               target_config_hash(target) + " (another model's features)";
    });
}

SPECDEC_INLINE void save_feature_checkpoint(const std::filesystem::path& dir, const FeatureCheckpoint& ck,
                                            SaveFormat format) {
    // model_type "eagle"/"fspad" reads back as Llama's block: a Qwen block would lose its biases or norms.
    detail::require_llama_block(ck.config, "eagle", "save_feature_checkpoint");
    validate(ck.weights, ck.config);
    std::filesystem::create_directories(dir);
    const std::filesystem::path path = dir / "config.json";
    save_config(ck.config, path, format == SaveFormat::kBF16 ? "bfloat16" : "float32");
    json::Value root = json::parse(detail::read_text_file(path, "eagle"), path.string());
    json::Object& o = root.as_object();
    const bool eagle = ck.connector == Connector::kFc && !ck.config.partial_alignment;
    o.set("architectures", json::Array{json::Value(eagle ? "EagleDrafter" : "FspadDrafter")});
    o.set("model_type", eagle ? "eagle" : "fspad");
    o.set("connector", connector_name(ck.connector));
    o.set("sampler_intermediate_size", ck.sampler_size);
    o.set("partial_alignment", ck.config.partial_alignment);
    o.set("target_config_hash", ck.target_hash);
    if (ck.config.identity_end_norms) o.set("layout", "eagle");
    std::ofstream out(path, std::ios::binary);
    detail::require(static_cast<bool>(out), "eagle", [&] { return path.string() + ": cannot write"; });
    out << json::dump(root, 2) << "\n";
    out.close();
    detail::write_tensors(dir / "model.safetensors", format, [&](auto&& put) {
        for_each_tensor(ck.weights, ck.config, [&](const std::string& name, const std::vector<float>& t, std::size_t) {
            put(name, t, detail::hf_shape(name, ck.config));
        });
        for_each_connector_tensor(ck.connector_weights, ck.connector, ck.config.hidden_size, ck.sampler_size,
                                  [&](const std::string& name, const std::vector<float>& t,
                                      const std::vector<std::int64_t>& shape) { put(name, t, shape); });
    });
}

SPECDEC_INLINE FeatureCheckpoint load_feature_checkpoint(const std::filesystem::path& dir) {
    detail::require(std::filesystem::is_directory(dir), "eagle", [&] {
        return dir.string() + ": not a directory (a feature drafter is a folder with config.json and model.safetensors)";
    });
    const std::filesystem::path path = dir / "config.json";
    const json::Value root = json::parse(detail::read_text_file(path, "eagle"), path.string());
    const json::Value* type = root.is_object() ? root.find("model_type") : nullptr;
    detail::require(type != nullptr && type->is_string() && (type->as_string() == "eagle" || type->as_string() == "fspad"),
                    "eagle", [&] {
                        return path.string() + ": model_type is not \"eagle\" or \"fspad\" (a feature drafter's config names "
                                               "it, its connector and its target's config hash)";
                    });
    const std::string file = path.string();
    const std::string conn = detail::read_field(root, file, "connector", "eagle", detail::as_string);
    detail::require(conn == "fc" || conn == "feature_sampler", "eagle", [&] {
        return file + ": connector '" + conn + "' is neither \"fc\" nor \"feature_sampler\"";
    });
    const std::int64_t I = detail::read_field(root, file, "sampler_intermediate_size", "eagle", detail::as_int);
    detail::require(I > 0 && I < (std::int64_t{1} << 24), "eagle", [&] {
        return file + ": sampler_intermediate_size " + std::to_string(I) + " is out of range";
    });
    FeatureCheckpoint ck;
    ck.config = load_config(path);
    detail::require(ck.config.num_hidden_layers == 1, "eagle", [&] {
        return file + ": num_hidden_layers " + std::to_string(ck.config.num_hidden_layers) +
               " (a feature drafter is one decoder layer)";
    });
    ck.connector = conn == "fc" ? Connector::kFc : Connector::kSampler;
    ck.sampler_size = static_cast<int>(I);
    ck.target_hash = detail::read_field(root, file, "target_config_hash", "eagle", detail::as_string);
    if (root.find("layout") != nullptr) {
        const std::string layout = detail::read_field(root, file, "layout", "eagle", detail::as_string);
        detail::require(layout == "eagle", "eagle", [&] {
            return file + ": layout '" + layout + "' is not \"eagle\" (absent: the layer with its input and final norms)";
        });
        ck.config.identity_end_norms = true;
        try {
            ck.config.validate();
        } catch (const error& e) {
            detail::fail("eagle", file + ": " + e.what());
        }
    }
    const std::filesystem::path tensors = dir / "model.safetensors";
    ck.weights = load_weights(tensors, ck.config);
    const SafetensorsFile st = SafetensorsFile::open(tensors);
    if (ck.connector == Connector::kFc && st.find("fc.bias") != nullptr)
        ck.connector_weights.fc_bias.resize(static_cast<std::size_t>(ck.config.hidden_size));
    for_each_connector_tensor(ck.connector_weights, ck.connector, ck.config.hidden_size, ck.sampler_size,
                              [&](const std::string& name, std::vector<float>& t, const std::vector<std::int64_t>& shape) {
                                  detail::read_tensor(st, tensors, name, shape, t, "eagle");
                              });
    return ck;
}

SPECDEC_INLINE FeatureConnector::FeatureConnector(Connector kind, ConnectorWeights w, int D, int I, ModelOptions options)
    : kind_(kind), w_(std::move(w)), D_(D), I_(I), opt_(options) {
    if (opt_.pool == nullptr) {
        own_pool_ = std::make_unique<ThreadPool>(1);
        opt_.pool = own_pool_.get();
    }
    for_each_connector_tensor(w_, kind_, D_, I_, [&](const std::string& name, const std::vector<float>& t,
                                                     const std::vector<std::int64_t>& s) {
        std::int64_t n = 1;
        for (std::int64_t extent : s) n *= extent;
        detail::require(t.size() == static_cast<std::size_t>(n), "eagle", [&] {
            return "connector tensor '" + name + "': expected " + std::to_string(n) + " floats, got " +
                   std::to_string(t.size());
        });
    });
    const auto make = detail::matrix_maker(opt_);
    if (kind_ == Connector::kFc) {
        fc_ = make(nullptr, {&w_.fc}, D_, 2 * D_);
    } else {
        gate_ = make(nullptr, {&w_.gate}, I_, D_);
        up_ = make(nullptr, {&w_.up}, I_, D_);
        down_ = make(nullptr, {&w_.down}, D_, I_);
    }
}

SPECDEC_INLINE void FeatureConnector::apply(float* eta, const float* e, const float* f, int n) {
    if (n <= 0) return;
    const std::size_t nn = static_cast<std::size_t>(n);
    if (kind_ == Connector::kFc) {
        cat_.resize(nn * 2 * D_);
        for (std::size_t i = 0; i < nn; ++i) {
            std::copy_n(e + i * D_, D_, cat_.data() + i * 2 * D_);
            std::copy_n(f + i * D_, D_, cat_.data() + i * 2 * D_ + D_);
        }
        detail::linear(opt_, eta, cat_.data(), fc_, n);
        if (!w_.fc_bias.empty())
            for (std::size_t i = 0; i < nn; ++i)
                for (int d = 0; d < D_; ++d) eta[i * D_ + d] += w_.fc_bias[static_cast<std::size_t>(d)];
        return;
    }
    g_.resize(nn * I_);
    u_.resize(nn * I_);
    h_.resize(nn * I_);
    detail::linear(opt_, g_.data(), e, gate_, n);
    detail::linear(opt_, u_.data(), f, up_, n);
    for (std::size_t i = 0; i < nn; ++i)
        detail::swiglu(h_.data() + i * I_, g_.data() + i * I_, u_.data() + i * I_, I_, !opt_.reference);
    detail::linear(opt_, eta, h_.data(), down_, n);
}

#endif  // SPECDEC_BODIES

static_assert(ScoresNodes<FeatureProposer<CpuModel>>);

}  // namespace specdec
