// specdec/detail/methods/glide_cape/widen_glide.hpp — a GLIDE drafter made to read a widened target (model/widen.hpp).
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "glide.hpp"
#include "../../core/error.hpp"
#include "../../model/config.hpp"
#include "../../model/widen.hpp"

// GLIDE's drafter has its own width; only its cross-attention meets the target: one query head per
// target query head, reading the target's KV heads of layer N_T - N_D + m (glide-cape.txt, §3). On a
// widened target (trained heads moved to (h / g) * g' + h % g, trained KV heads kept, trained layers
// last) the drafter reads the same keys and values when: N_T is the widened depth; it has a query head
// per widened head, the trained ones moved as the target's were; new heads' rows are free and their
// columns of the cross o_proj are zero, so they add nothing to the drafter's residual.

namespace specdec {

/// `g` (trained against `trained`) made to read `widened` (widened_config(trained, shape)): the same
/// drafts, tested. `seed` keys the new heads' free query rows. Throws `[specdec.glide]` when `g` was not
/// trained against `trained`'s shape.
inline GlideCheckpoint widen_glide(GlideCheckpoint g, const Config& trained, const Config& widened, std::uint64_t seed) {
    GlideConfig& c = g.config;
    const auto same = [](const char* field, long ours, const char* target_field, long theirs) {
        detail::require(ours == theirs, "glide", [&] {
            return std::string("widen_glide: ") + field + " is " + std::to_string(ours) + ", but the trained target has " +
                   target_field + " " + std::to_string(theirs);
        });
    };
    if (!c.glide_cross_attention) return g;  // the vanilla drafter reads only tokens
    same("glide_target_layers", c.glide_target_layers, "num_hidden_layers", trained.num_hidden_layers);
    same("glide_cross_heads", c.glide_cross_heads, "num_attention_heads", trained.num_attention_heads);
    same("glide_target_kv_heads", c.glide_target_kv_heads, "num_key_value_heads", trained.num_key_value_heads);
    same("glide_cross_head_dim", c.glide_cross_head_dim, "head_dim", trained.head_dim());
    same("widened head_dim", widened.head_dim(), "head_dim", trained.head_dim());
    const int hd = trained.head_dim(), D = c.draft.hidden_size, H = trained.num_attention_heads;
    const int group = H / trained.num_key_value_heads, group2 = widened.num_attention_heads / widened.num_key_value_heads;
    const int H2 = widened.num_attention_heads, cq2 = H2 * hd, cq = H * hd;
    const auto q_head = [&](int h) { return (h / group) * group2 + h % group; };  // as widen() moves the target's heads
    for (std::size_t m = 0; m < g.weights.layers.size(); ++m) {
        GlideLayer<float>& l = g.weights.layers[m];
        std::vector<float> wq(static_cast<std::size_t>(cq2) * D), wo(static_cast<std::size_t>(D) * cq2, 0.0f);
        for (int r = 0; r < cq2; ++r)  // new heads: free rows
            detail::free_row(&wq[static_cast<std::size_t>(r) * D], D, seed, 0x474C0000u + static_cast<std::uint32_t>(m),
                             static_cast<std::uint32_t>(r));
        for (int h = 0; h < H; ++h)
            for (int d = 0; d < hd; ++d) {
                const int from = h * hd + d, to = q_head(h) * hd + d;
                std::copy_n(&l.cross_wq[static_cast<std::size_t>(from) * D], D, &wq[static_cast<std::size_t>(to) * D]);
                for (int i = 0; i < D; ++i)
                    wo[static_cast<std::size_t>(i) * cq2 + to] = l.cross_wo[static_cast<std::size_t>(i) * cq + from];
            }
        l.cross_wq = std::move(wq);
        l.cross_wo = std::move(wo);
    }
    c.glide_target_layers = widened.num_hidden_layers;
    c.glide_cross_heads = H2;
    c.glide_target_kv_heads = widened.num_key_value_heads;
    c.validate();
    validate(g.weights, c);
    return g;
}

}  // namespace specdec
