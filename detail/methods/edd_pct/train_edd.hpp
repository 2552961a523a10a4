// specdec/detail/methods/edd_pct/train_edd.hpp — training EDD's drafter: the dual-block mask, the frozen target as teacher, forward KL.
// SPDX-License-Identifier: MIT
#pragma once

// EDD §3.1, App. B: teacher forcing over windows of n tokens with, from the frozen target, the hidden
// states H = (h_0..h_{n-1}) of the layer the drafter reads and the next-token distributions. The
// drafter is a TrainableLlama of one layer fed 2n rows per window, [H ; T]: the states as input
// embeddings at positions 0..n-1, then the tokens at positions 0..n-1 (edd.hpp's numbering), under the
// dual-block mask of Eq. 3 with blocks of L tokens, L drawn uniformly from 5..10 every step. The loss
// on token row i is forward KL(P_target(.|t_<=i) || P_draft) (Eq. 4); the state rows carry no loss.
//
// Table 1's VDM and Table 3's ablations are options of the same code: no soft prompt (tokens alone,
// causal), cross-entropy instead of KL, a fixed L.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../../core/concepts.hpp"
#include "../../core/error.hpp"
#include "../../core/rng.hpp"
#include "../../core/tree.hpp"
#include "../../model/weights.hpp"
#include "../../train/dataset.hpp"
#include "../../train/layers.hpp"
#include "../../train/trainable_llama.hpp"
#include "edd.hpp"

namespace specdec::train {

/// Eq. 3's mask over the 2n rows [H ; T] of one window (row-major (2n, 2n), 1 = row may attend column):
///   state row k sees states 0..k (a causal encoder; a one-layer drafter never reads these rows' outputs);
///   token row n + i, in block j = i / L, sees the states of blocks 0..j-1 (columns k < jL) and the
///   tokens of its own block up to itself (columns n + jL .. n + i).
/// So a block's first token sees states 0..jL-1 and itself: a drafting round's root at position jL.
inline std::vector<std::uint8_t> dual_block_mask(int n, int block_length) {
    detail::require(n > 0 && block_length > 0, "edd", [&] {
        return "dual_block_mask: n = " + std::to_string(n) + " and block_length = " + std::to_string(block_length) +
               " must both be > 0";
    });
    const std::size_t R = 2 * static_cast<std::size_t>(n);
    std::vector<std::uint8_t> m(R * R, 0);
    for (int k = 0; k < n; ++k)
        for (int c = 0; c <= k; ++c) m[k * R + c] = 1;
    for (int i = 0; i < n; ++i) {
        const int first = i / block_length * block_length;
        std::uint8_t* row = m.data() + (static_cast<std::size_t>(n) + i) * R;
        for (int k = 0; k < first; ++k) row[k] = 1;
        for (int t = first; t <= i; ++t) row[n + t] = 1;
    }
    return m;
}

/// How one EDD drafter (or its ablation) trains.
struct EddTrainOptions {
    bool soft_prompt = true;  // false: VDM (Table 1), the same drafter on tokens alone, causal
    bool kl = true;           // false: next-token cross-entropy (Table 3, "w/o KL divergence")
    int min_block = 5;        // L uniform in [min_block, max_block] per step (App. B: 5..10);
    int max_block = 10;       // min == max fixes it (Table 3, "w/o random division length": 5)

    void validate() const {
        detail::require(min_block >= 1 && max_block >= min_block, "edd", [&] {
            return "block lengths " + std::to_string(min_block) + ".." + std::to_string(max_block) +
                   ": need 1 <= min_block <= max_block";
        });
    }
    /// The block length of `step`: uniform over [min_block, max_block], a pure function of (seed, step).
    int block_length(std::uint64_t seed, int step) const {
        const auto r = philox4x32({static_cast<std::uint32_t>(step), 0, 0, static_cast<std::uint32_t>(RngStream::kUser)},
                                  {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32) ^ 0xEDDu});
        return min_block + static_cast<int>(r[0] % static_cast<std::uint32_t>(max_block - min_block + 1));
    }
};

/// The frozen target's states of the drafter's layer and its next-token laws (train/dataset.hpp).
using EddTeacher = HiddenTeacher;

template <ExposesHidden Target>
EddTeacher edd_teacher(Target& target, ThreadPool& pool, int layer, const WindowBatch& w) {
    return hidden_teacher(target, pool, layer, w);
}

/// One batch for the drafter, rows laid out per window as [H ; T] (soft prompt) or T (VDM).
struct EddBatch {
    int B = 0, rows_per_window = 0, n = 0;
    std::vector<int> tokens;            // (B, R): kEmbeddingInput for state rows
    std::vector<float> embeddings;      // (B, R, D) where the state rows read their input
    std::vector<int> positions;         // (B, R)
    std::vector<std::uint8_t> mask;     // (R, R) shared
    std::vector<float> probs;           // (B, R, V) the target's law for token rows (zeros elsewhere)
    std::vector<int> targets;           // (B, R) next tokens of token rows, kIgnoreIndex elsewhere
    std::vector<std::uint8_t> counted;  // (B, R) 1 on token rows

    ModelInput input() const {
        return ModelInput{.B = B, .T = rows_per_window, .tokens = tokens, .input_embeddings = embeddings,
                          .positions = positions, .mask = mask};
    }
};

inline EddBatch edd_batch(const WindowBatch& w, const EddTeacher& t, int block_length, const EddTrainOptions& o) {
    const int n = w.T, R = o.soft_prompt ? 2 * n : n, off = R - n, D = t.D, V = t.V;
    EddBatch b{w.B, R, n, {}, {}, {}, {}, {}, {}, {}};
    b.tokens.resize(static_cast<std::size_t>(w.B) * R);
    b.positions.resize(b.tokens.size());
    b.targets.assign(b.tokens.size(), kIgnoreIndex);
    b.counted.assign(b.tokens.size(), 0);
    b.probs.assign(b.tokens.size() * V, 0.0f);
    if (o.soft_prompt) {
        b.embeddings.assign(b.tokens.size() * D, 0.0f);
        b.mask = dual_block_mask(n, block_length);
    }
    for (int s = 0; s < w.B; ++s)
        for (int i = 0; i < n; ++i) {
            const std::size_t src = static_cast<std::size_t>(s) * n + i;
            const std::size_t row = static_cast<std::size_t>(s) * R + off + i;
            b.tokens[row] = w.inputs[src];
            b.positions[row] = i;
            b.targets[row] = w.targets[src];
            b.counted[row] = 1;
            std::copy_n(t.probs.data() + src * V, V, b.probs.data() + row * V);
            if (o.soft_prompt) {
                const std::size_t state = static_cast<std::size_t>(s) * R + i;
                b.tokens[state] = kEmbeddingInput;
                b.positions[state] = i;
                std::copy_n(t.states.data() + src * D, D, b.embeddings.data() + state * D);
            }
        }
    return b;
}

/// Runs the drafter on the batch and adds the loss's gradient (scaled by `weight`) into its dlogits:
/// forward KL to the target (Eq. 4) or next-token cross-entropy. Returns the mean loss over token rows.
inline double edd_forward_loss(TrainableLlama& drafter, const EddBatch& b, bool kl, double weight = 1.0) {
    drafter.forward(b.input());
    const int N = b.B * b.rows_per_window, V = drafter.config().vocab_size;
    if (kl)
        return kl_divergence(drafter.pool(), drafter.dlogits().data(), drafter.logits().data(), b.probs.data(), N, V,
                             weight, b.counted.data());
    return cross_entropy(drafter.pool(), drafter.dlogits().data(), drafter.logits().data(), b.targets.data(), N, V, weight);
}

/// Held-out measures of a drafter after edd_forward_loss: how often its argmax is the target's (what
/// greedy drafting is accepted on) over token rows.
inline double top1_agreement(const TrainableLlama& drafter, const EddBatch& b) {
    const int V = drafter.config().vocab_size;
    long hits = 0, rows = 0;
    for (std::size_t r = 0; r < b.counted.size(); ++r) {
        if (!b.counted[r]) continue;
        const float* z = drafter.logits().data() + r * V;
        const float* p = b.probs.data() + r * V;
        hits += std::max_element(z, z + V) - z == std::max_element(p, p + V) - p;
        ++rows;
    }
    return rows == 0 ? 0.0 : double(hits) / rows;
}

/// The drafter's starting point (§3.1): embedding, LM head and final norm copied from the target, the
/// decoder layer drawn at random.
inline Weights edd_initial_weights(const Config& drafter, const Weights& target, std::uint64_t seed, float std_dev = 0.02f) {
    Weights w = random_weights(drafter, seed, std_dev);
    w.embed = target.embed;
    w.norm = target.norm;
    w.lm_head = target.lm_head;
    validate(w, drafter);
    return w;
}

}  // namespace specdec::train
