// specdec/detail/methods/eagle_fspad/widen_feature.hpp — an EAGLE / FSPAD feature drafter made to read a widened target (model/widen.hpp).
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "feature_drafter.hpp"
#include "../../core/error.hpp"
#include "../../model/config.hpp"
#include "../../model/widen.hpp"

// The feature drafter (feature_drafter.hpp; EAGLE, Li et al. 2024b, §4.1; FSPAD, fspad.txt) reads the
// target's final feature f (after the final norm) and the embedding e of the next token. On a target
// widened by widen() both arrive as [trained dims, exact zeros]: f' = [f, 0] (the final norm's rescaled
// gains restore f on the trained dims; the new dims are 0 times a gain) and e' = [e, 0]. The drafter
// drafts the same when its residual input η' is [η, 0], since its layer, widened as a one-layer model of
// the widened target's shape, then keeps η's function by the same argument as every target layer. So:
//   FC (D', 2D'): concat(e', f') holds e at columns 0..D and f at D'..D'+D. Rows < D hold the trained
//     block's halves at those columns; rows >= D are zero there (they would write η's new dims); the
//     other columns read zeros and are free.
//   Feature Sampler, I' = the widened intermediate_size: Gate/Up (I', D') keep the trained rows over
//     columns < D, new columns and new units' rows free; Down (D', I') keeps the trained rows over
//     columns < I, zero rows >= D (η's new dims) and zero columns >= I (new units would reach η).
//   The layer and its final norm: widen_weights with num_hidden_layers 1 (no layers added), the
//     target's widened heads, gains * sqrt(D / D') and eps * D / D' as for every norm; the embedding and
//     head copies as the target's (new embedding columns zero).
//   An FC bias (an imported EAGLE drafter's) keeps its D values and is 0 on the new rows. The EAGLE
//     layout (Config::identity_end_norms) carries over: its skipped norms read nothing, so [η, 0] still
//     enters attention as it is and [f̂, 0] reaches the head as it is.
//   PAD (FSPAD's partial alignment): the (2D', F') down_proj keeps both halves' meaning: trained rows
//     0..D at 0..D, trained rows D..2D at D'..D'+D, the rest zero, so the token half and the feature
//     half each write [trained, 0] to the shared residual (widen_weights).
// Then the predicted feature is [f̂, 0] again and feeds the next depth unchanged. The stored
// target_config_hash becomes the widened target's: the drafter now reads that model's features.

namespace specdec {

/// `ck` (trained against `trained`) made to read `widened` (widened_config(trained, shape)): the same
/// drafts, tested. `seed` keys the free parts. Throws `[specdec.eagle]` when `ck` was not trained for
/// `trained` (check_feature_pair: width, vocabulary, config hash), `[specdec.widen]` for a shape the
/// drafter's layer cannot grow to.
inline FeatureCheckpoint widen_feature(FeatureCheckpoint ck, const Config& trained, const Config& widened,
                                       std::uint64_t seed) {
    check_feature_pair(ck, trained);
    const int D = ck.config.hidden_size, D2 = widened.hidden_size, I = ck.sampler_size, I2 = widened.intermediate_size;
    detail::require(I2 >= I, "eagle", [&] {
        return "widen_feature: the widened intermediate_size " + std::to_string(I2) +
               " is narrower than the drafter's sampler_intermediate_size " + std::to_string(I);
    });

    // The layer: a one-layer model of the widened target's shape (widened_config refuses a PAD config,
    // which is no target; the PAD down_proj is widened by widen_weights).
    Config plain = ck.config;
    plain.partial_alignment = false;
    Config to = widened_config(plain, WidenShape{.hidden_size = D2, .intermediate_size = widened.intermediate_size,
                                                 .num_hidden_layers = ck.config.num_hidden_layers,
                                                 .num_attention_heads = widened.num_attention_heads,
                                                 .num_key_value_heads = widened.num_key_value_heads,
                                                 .head_dim = widened.head_dim()});
    to.partial_alignment = ck.config.partial_alignment;
    ck.weights = widen_weights(ck.config, std::move(ck.weights), to, seed);
    ck.config = to;

    // The connector, in memory (float32): its free values keyed apart from widen_weights' tensors.
    constexpr std::uint32_t kFc = 0x46450000u, kGate = kFc + 1, kUp = kFc + 2;  // "FE"
    ConnectorWeights& w = ck.connector_weights;
    const auto at = [](int r, int k) { return static_cast<std::size_t>(r) * static_cast<std::size_t>(k); };
    if (ck.connector == Connector::kFc) {
        std::vector<float> fc(at(D2, 2 * D2));  // (D', 2D')
        for (int r = 0; r < D2; ++r) {
            float* out = &fc[at(r, 2 * D2)];
            detail::free_row(out, 2 * D2, seed, kFc, static_cast<std::uint32_t>(r));
            if (r < D) {
                std::copy_n(&w.fc[at(r, 2 * D)], D, out);          // reads e
                std::copy_n(&w.fc[at(r, 2 * D) + D], D, out + D2);  // reads f
            } else {
                std::fill_n(out, D, 0.0f);
                std::fill_n(out + D2, D, 0.0f);
            }
        }
        w.fc = std::move(fc);
        if (!w.fc_bias.empty()) w.fc_bias.resize(static_cast<std::size_t>(D2), 0.0f);  // η's new dims stay 0
    } else {
        const auto input = [&](const std::vector<float>& t, std::uint32_t tensor) {  // (I, D) -> (I', D')
            std::vector<float> out(at(I2, D2));
            for (int r = 0; r < I2; ++r) {
                detail::free_row(&out[at(r, D2)], D2, seed, tensor, static_cast<std::uint32_t>(r));
                if (r < I) std::copy_n(&t[at(r, D)], D, &out[at(r, D2)]);
            }
            return out;
        };
        w.gate = input(w.gate, kGate);
        w.up = input(w.up, kUp);
        std::vector<float> down(at(D2, I2), 0.0f);  // (D', I')
        for (int r = 0; r < D; ++r) std::copy_n(&w.down[at(r, I)], I, &down[at(r, I2)]);
        w.down = std::move(down);
    }
    ck.sampler_size = I2;
    ck.target_hash = target_config_hash(widened);
    return ck;
}

}  // namespace specdec
