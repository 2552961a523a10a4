// specdec/detail/model/widen.hpp — a function-preserving widening of a trained Llama: the same outputs at a larger model's cost.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bf16.hpp"
#include "config.hpp"
#include "deferred_matrices.hpp"
#include "weights.hpp"
#include "../core/compiled.hpp"
#include "../core/error.hpp"
#include "../core/philox.hpp"

// Why: the methods' papers measure at 7B-13B, where a target forward costs tens of drafter steps; the
// shipped target is 14M. Without pretrained large weights, a trained model is grown (in the spirit of
// Net2Net, Chen et al. 2016, and zero-initialised growth) so that every new part enters the residual
// stream as an exact zero: the widened model has the trained model's next-token law (up to float
// rounding) at the memory traffic and FLOPs of the larger shape. A simulation device: every table
// that uses one says so (docs/widening.md).
//
// Zero (so nothing new reaches the residual stream x, whose new dims D..D' stay exactly 0):
//   - the embedding's new columns (and so a tied LM head's); an untied LM head's new input columns;
//   - o_proj: rows >= D (they would write new dims) and the columns of every new head (they would
//     read new heads' outputs);
//   - down_proj: rows >= D and columns >= F (new FFN units);
//   - whole new layers' o_proj and down_proj: such a layer adds 0 to x, an identity on the residual.
// Free (they read only dims that are 0, or write only where a zero matrix reads; their values cannot
// change the output): new q/k/v rows (new heads), the new columns of trained q/k/v/gate/up rows, new
// gate/up rows (new FFN units), new layers' q/k/v/gate/up. They are drawn from a seeded stream when a
// model packs them (MatrixRows, as a deferred loader's), so no float32 copy of the large model exists
// and nothing is stored: a CpuModel with WeightFormat::kBF16 packs the rows straight into bf16 panels.
//
// RMSNorm over D' dims: y = x / sqrt(mean(x^2) + eps) * g. With x's new dims 0, the mean over D' dims
// is mean' = mean * D / D'. Choosing eps' = eps * D / D' and g' = g * sqrt(D / D'):
//   x / sqrt(mean' + eps') * g' = x / (sqrt(D / D') * sqrt(mean + eps)) * sqrt(D / D') * g
//                               = x / sqrt(mean + eps) * g,
// exactly in real arithmetic, for every norm (both per layer, and the final one). New dims of a gain
// multiply 0 and are set to 1.
//
// Heads: head_dim is kept (RoPE's frequencies and the 1/sqrt(hd) scale stay), and each trained query
// head must still read its trained KV head. With trained groups g = H / Hkv and widened g' = H' / Hkv'
// >= g, trained KV head j stays at index j and trained query head h goes to (h / g) * g' + h % g, the
// first g slots of group h / g; the other query heads are new.
//
// Depth: the L' - L added layers go *before* the trained layers, the trained layers last. A state
// counted from the end keeps its meaning: hidden state L' - s of the widened model is hidden state L - s
// of the trained one (EDD's soft prompt, the 4th-to-last state; the final features EAGLE/FSPAD read).
// A drafter that names a target layer by absolute index (GLIDE's N_T - N_D + m, from the N_T it was
// trained with) would add `added_layers(trained, widened)`. A drafter that is a layer of the target's
// width reads the widened states only once widened itself: EDD's drafter widens with the same call
// (its one layer kept, no layers added) and its target_layer += added_layers (docs/widening.md);
// GLIDE's cross-attention is moved by widen_glide (methods/glide_cape); the EAGLE/FSPAD drafters (a
// connector and a layer, under FSPAD's PAD a (2D, F) down_proj) by widen_feature (methods/eagle_fspad).

namespace specdec {

/// The widened shape. Every field >= the trained model's; head_dim and vocab_size, when given (> 0),
/// must equal the trained ones (they are kept, never changed).
struct WidenShape {
    int hidden_size = 0;          // D'
    int intermediate_size = 0;    // F'
    int num_hidden_layers = 0;    // L' (the L trained layers last)
    int num_attention_heads = 0;  // H'
    int num_key_value_heads = 0;  // Hkv' (H' / Hkv' >= the trained H / Hkv)
    int head_dim = 0;             // 0 = the trained head_dim (the only value accepted)
    int vocab_size = 0;           // 0 = the trained vocabulary (the only value accepted)
};

/// The named costs: "110m" (~110M parameters: llama2.c's stories110M layer shape, 15 layers), "1b"
/// (TinyLlama-1.1B's D, F and depth; 48 query heads of 64 over 16 KV heads), "7b" (Llama-2-7B's D, F,
/// depth and attention bytes: 96 query heads of 64 over 32 KV heads is 4 D^2 per layer, as 32 heads of
/// 128 are). Shapes for a target with head_dim 64 and GQA groups <= 3 (the shipped target: 6 heads over 2).
/// Throws naming the valid names.
SPECDEC_INLINE WidenShape widen_preset(std::string_view name);

/// The widened Config: `trained` with shape's sizes, head_dim explicit, rms_norm_eps * D / D'. Throws
/// `[specdec.widen]` naming the field for a shape that cannot keep the trained model's function.
SPECDEC_INLINE Config widened_config(const Config& trained, const WidenShape& shape);

/// The widened weights for `to` (from widened_config): embedding and norms in memory (float32), every
/// matrix as rows generated on demand (Weights::deferred), so a CpuModel packs them in its own format.
/// `trained` may itself hold deferred matrices (LoadOptions::defer_matrices). `seed` keys the free parts.
SPECDEC_INLINE Weights widen_weights(const Config& from, Weights trained, const Config& to, std::uint64_t seed);

/// How many layers widening put before the trained ones.
inline int added_layers(const Config& trained, const Config& widened) {
    return widened.num_hidden_layers - trained.num_hidden_layers;
}

/// `trained` (a Checkpoint, or anything with .config and .weights) widened to `shape`. A model tool
/// for judging methods at a larger model's cost: the result serves CpuModel (matrices are generated
/// as it packs them); materialize() gives every tensor in memory (small shapes only: float32).
template <class Model>
    requires requires(const Model& m) {
        { m.config } -> std::convertible_to<Config>;
        { m.weights } -> std::convertible_to<Weights>;
    }
Model widen(const Model& trained, const WidenShape& shape, std::uint64_t seed = 0) {
    Model out = trained;
    out.config = widened_config(trained.config, shape);
    out.weights = widen_weights(trained.config, trained.weights, out.config, seed);
    return out;
}

/// `w` with every deferred matrix read into memory (float32), so it can be saved, trained or compared
/// tensor by tensor.
SPECDEC_INLINE Weights materialize(const Config& c, Weights w);

namespace detail {

/// Fills `row` (k values) with free values for (seed, tensor, row j): Philox keys the row, a splitmix64
/// walk fills it (10 Philox rounds per 4 values would make a 7B-cost build take a minute), uniform in
/// [-a, a] with a = 0.02 sqrt(3): standard deviation 0.02, HF's initializer_range.
inline void free_row(float* row, int k, std::uint64_t seed, std::uint32_t tensor, std::uint32_t j) {
    const PhiloxWords key = philox4x32_10({{j, tensor, 0x57494445u /* "WIDE" */, 0}}, static_cast<std::uint32_t>(seed),
                                          static_cast<std::uint32_t>(seed >> 32));
    std::uint64_t s = (std::uint64_t{key.w[0]} << 32) | key.w[1];
    constexpr float a = 0.02f * 1.7320508f, scale = a / 32768.0f;
    for (int c = 0; c < k; c += 4) {
        s += 0x9E3779B97F4A7C15ull;
        std::uint64_t z = s;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        for (int i = 0; i < 4 && c + i < k; ++i)
            row[c + i] = (static_cast<float>((z >> (16 * i)) & 0xFFFFu) - 32767.5f) * scale;
    }
}

}  // namespace detail

#if SPECDEC_BODIES

SPECDEC_INLINE WidenShape widen_preset(std::string_view name) {
    if (name == "110m")
        return {.hidden_size = 768, .intermediate_size = 2048, .num_hidden_layers = 15, .num_attention_heads = 18,
                .num_key_value_heads = 6};
    if (name == "1b")
        return {.hidden_size = 2048, .intermediate_size = 5632, .num_hidden_layers = 22, .num_attention_heads = 48,
                .num_key_value_heads = 16};
    if (name == "7b")
        return {.hidden_size = 4096, .intermediate_size = 11008, .num_hidden_layers = 32, .num_attention_heads = 96,
                .num_key_value_heads = 32};
    detail::fail("widen", "unknown target scale '" + std::string(name) + "': the presets are 110m, 1b and 7b");
}

SPECDEC_INLINE Config widened_config(const Config& t, const WidenShape& s) {
    t.validate();
    detail::require_llama_block(t, "widen", "widening");
    detail::require(!t.partial_alignment, "widen", [] {
        return std::string("a partial_alignment layer (FSPAD's drafter) is not a target: widen the target it reads, "
                           "and the drafter with widen_feature");
    });
    const auto at_least = [](int widened, int trained, const char* field) {
        detail::require(widened >= trained, "widen", [&] {
            return std::string(field) + " " + std::to_string(widened) + " is narrower than the trained model's " +
                   std::to_string(trained) + " (widening only adds)";
        });
    };
    at_least(s.hidden_size, t.hidden_size, "hidden_size");
    at_least(s.intermediate_size, t.intermediate_size, "intermediate_size");
    at_least(s.num_hidden_layers, t.num_hidden_layers, "num_hidden_layers");
    at_least(s.num_attention_heads, t.num_attention_heads, "num_attention_heads");
    at_least(s.num_key_value_heads, t.num_key_value_heads, "num_key_value_heads");
    const int hd = t.head_dim();
    detail::require(s.head_dim == 0 || s.head_dim == hd, "widen", [&] {
        return "head_dim " + std::to_string(s.head_dim) + " differs from the trained " + std::to_string(hd) +
               " (RoPE's frequencies and the score scale depend on it: it is kept)";
    });
    detail::require(s.vocab_size == 0 || s.vocab_size == t.vocab_size, "widen", [&] {
        return "vocab_size " + std::to_string(s.vocab_size) + " differs from the trained " + std::to_string(t.vocab_size) +
               " (the tokens are the trained model's: it is kept)";
    });
    detail::require(s.num_attention_heads % s.num_key_value_heads == 0, "widen", [&] {
        return "num_attention_heads " + std::to_string(s.num_attention_heads) + " is not a multiple of num_key_value_heads " +
               std::to_string(s.num_key_value_heads);
    });
    const int g = t.num_attention_heads / t.num_key_value_heads, g2 = s.num_attention_heads / s.num_key_value_heads;
    detail::require(g2 >= g, "widen", [&] {
        return "the GQA grouping " + std::to_string(s.num_attention_heads) + " / " + std::to_string(s.num_key_value_heads) +
               " = " + std::to_string(g2) + " query heads per KV head cannot keep the trained heads' mapping (" +
               std::to_string(g) + " trained query heads share each trained KV head): choose heads / kv heads >= " +
               std::to_string(g);
    });
    Config c = t;
    c.hidden_size = s.hidden_size;
    c.intermediate_size = s.intermediate_size;
    c.num_hidden_layers = s.num_hidden_layers;
    c.num_attention_heads = s.num_attention_heads;
    c.num_key_value_heads = s.num_key_value_heads;
    c.attention_head_dim = hd;
    c.rms_norm_eps = static_cast<float>(static_cast<double>(t.rms_norm_eps) * t.hidden_size / s.hidden_size);
    c.validate();
    return c;
}

SPECDEC_INLINE Weights widen_weights(const Config& from, Weights trained, const Config& to, std::uint64_t seed) {
    detail::require_llama_block(from, "widen", "widening");
    detail::require_llama_block(to, "widen", "widening");
    validate(trained, from, /*allow_deferred=*/true);
    detail::require(from.partial_alignment == to.partial_alignment, "widen", [&] {
        return std::string("partial_alignment is ") + (from.partial_alignment ? "true" : "false") +
               " in the trained config and " + (to.partial_alignment ? "true" : "false") + " in the widened one";
    });
    const int D = from.hidden_size, D2 = to.hidden_size, F = from.intermediate_size, F2 = to.intermediate_size;
    const int hd = from.head_dim(), g = from.num_attention_heads / from.num_key_value_heads;
    const int g2 = to.num_attention_heads / to.num_key_value_heads, Hkv = from.num_key_value_heads;
    const int added = added_layers(from, to), V = from.vocab_size;
    const float gain_scale = static_cast<float>(std::sqrt(static_cast<double>(D) / D2));

    Weights w;
    w.layers.resize(to.num_hidden_layers);
    // Small tensors in memory: the embedding (read by row in float32) and the norms.
    w.embed.assign(static_cast<std::size_t>(V) * D2, 0.0f);
    auto src = std::make_shared<const Weights>(std::move(trained));
    for (int v = 0; v < V; ++v)
        std::copy_n(src->embed.data() + static_cast<std::size_t>(v) * D, D, w.embed.data() + static_cast<std::size_t>(v) * D2);
    const auto norm = [&](const std::vector<float>* gain) {
        std::vector<float> out(static_cast<std::size_t>(D2), 1.0f);
        if (gain != nullptr)
            for (int i = 0; i < D; ++i) out[i] = (*gain)[i] * gain_scale;
        return out;
    };
    w.norm = norm(&src->norm);

    // A trained matrix's row j in float32, into `out` (k values): from memory or from its file.
    struct Source {
        const std::vector<float>* values = nullptr;
        const MatrixRows* rows = nullptr;
        int k = 0;
        void row(int j, float* out) const {
            if (values != nullptr) {
                std::copy_n(values->data() + static_cast<std::size_t>(j) * k, k, out);
                return;
            }
            const RowRef r = rows->row(j);
            for (int p = 0; p < k; ++p) out[p] = r.bf != nullptr ? to_float(r.bf[p]) : r.f32[p];
        }
    };
    const auto source = [&](const std::vector<float>& t, const std::string& name, int k) {
        Source s{.values = &t, .rows = nullptr, .k = k};
        if (t.empty() && src->deferred) {
            s.values = nullptr;
            s.rows = src->deferred->find(name);
        }
        return s;
    };

    // How row j of a widened matrix is made, given a scratch row of its k2 columns.
    enum class Kind { kInput, kOutput, kFree, kZero };
    auto deferred = std::make_shared<DeferredMatrices>();
    deferred->owner = src;
    std::uint32_t tensor = 0;
    // kInput (q/k/v/gate/up): free values, then the trained row over columns [0, k) where `trained_of`
    // maps j to one. kOutput (o/down): zeros, then trained row trained_of(j) through `column_of`.
    const auto add = [&](const std::string& name, int m, int k2, Kind kind, Source s, std::function<int(int)> trained_of,
                         std::function<int(int)> column_of) {
        const std::uint32_t id = tensor++;
        MatrixRows rows{.m = m, .k = k2, .row = {}};
        rows.row = [=](int j) -> RowRef {
            thread_local std::vector<float> scratch, trained_values;
            scratch.resize(static_cast<std::size_t>(k2));
            float* out = scratch.data();
            if (kind == Kind::kInput || kind == Kind::kFree) detail::free_row(out, k2, seed, id, static_cast<std::uint32_t>(j));
            else std::fill_n(out, k2, 0.0f);
            const int t = kind == Kind::kInput || kind == Kind::kOutput ? trained_of(j) : -1;
            if (t >= 0) {
                trained_values.resize(static_cast<std::size_t>(s.k));
                s.row(t, trained_values.data());
                if (kind == Kind::kInput) std::copy_n(trained_values.data(), s.k, out);
                else
                    for (int p = 0; p < s.k; ++p) out[column_of(p)] = trained_values[p];
            }
            return RowRef{.f32 = out};
        };
        deferred->matrices.emplace(name, std::move(rows));
    };
    const auto identity = [](int p) { return p; };
    const auto below = [](int n) { return [n](int j) { return j < n ? j : -1; }; };
    // Widened query head of trained head h: the first g slots of group h / g.
    const auto q_head = [=](int h) { return (h / g) * g2 + h % g; };
    std::vector<int> trained_q_head(static_cast<std::size_t>(to.num_attention_heads), -1);  // widened head -> trained
    for (int h = 0; h < from.num_attention_heads; ++h) trained_q_head[q_head(h)] = h;
    const int q2 = to.q_dim(), kv2 = to.kv_dim();

    for (int l = 0; l < to.num_hidden_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const int tl = l - added;  // the trained layer, or < 0 for a new one
        LayerWeights& lw = w.layers[l];
        if (tl < 0) {
            lw.attn_norm = norm(nullptr);
            lw.mlp_norm = norm(nullptr);
            const Source none{};
            add(p + "self_attn.q_proj.weight", q2, D2, Kind::kFree, none, {}, {});
            add(p + "self_attn.k_proj.weight", kv2, D2, Kind::kFree, none, {}, {});
            add(p + "self_attn.v_proj.weight", kv2, D2, Kind::kFree, none, {}, {});
            add(p + "self_attn.o_proj.weight", D2, q2, Kind::kZero, none, {}, {});
            add(p + "mlp.gate_proj.weight", F2, D2, Kind::kFree, none, {}, {});
            add(p + "mlp.up_proj.weight", F2, D2, Kind::kFree, none, {}, {});
            add(p + "mlp.down_proj.weight", D2, F2, Kind::kZero, none, {}, {});
            continue;
        }
        const LayerWeights& t = src->layers[tl];
        const std::string tp = "model.layers." + std::to_string(tl) + ".";
        lw.attn_norm = norm(&t.attn_norm);
        lw.mlp_norm = norm(&t.mlp_norm);
        add(p + "self_attn.q_proj.weight", q2, D2, Kind::kInput, source(t.wq, tp + "self_attn.q_proj.weight", D),
            [=](int j) {
                const int h = trained_q_head[j / hd];
                return h < 0 ? -1 : h * hd + j % hd;
            },
            identity);
        add(p + "self_attn.k_proj.weight", kv2, D2, Kind::kInput, source(t.wk, tp + "self_attn.k_proj.weight", D),
            below(Hkv * hd), identity);
        add(p + "self_attn.v_proj.weight", kv2, D2, Kind::kInput, source(t.wv, tp + "self_attn.v_proj.weight", D),
            below(Hkv * hd), identity);
        add(p + "self_attn.o_proj.weight", D2, q2, Kind::kOutput,
            source(t.wo, tp + "self_attn.o_proj.weight", from.q_dim()), below(D),
            [=](int c) { return q_head(c / hd) * hd + c % hd; });
        add(p + "mlp.gate_proj.weight", F2, D2, Kind::kInput, source(t.w_gate, tp + "mlp.gate_proj.weight", D), below(F),
            identity);
        add(p + "mlp.up_proj.weight", F2, D2, Kind::kInput, source(t.w_up, tp + "mlp.up_proj.weight", D), below(F), identity);
        // Under FSPAD's PAD (a drafter's layer, widen_feature) the last down_proj is (2D, F): each half
        // keeps its D dims, the second at rows D'..D'+D, so both halves write [trained, 0].
        std::function<int(int)> down_row = below(D);
        if (to.down_rows(l) != D2) down_row = [=](int j) { return j < D ? j : j >= D2 && j < D2 + D ? j - D2 + D : -1; };
        add(p + "mlp.down_proj.weight", to.down_rows(l), F2, Kind::kOutput, source(t.w_down, tp + "mlp.down_proj.weight", F),
            down_row, identity);
    }
    if (!to.tie_word_embeddings)
        add("lm_head.weight", V, D2, Kind::kOutput, source(src->lm_head, "lm_head.weight", D), below(V), identity);
    w.deferred = std::move(deferred);
    validate(w, to, /*allow_deferred=*/true);
    return w;
}

SPECDEC_INLINE Weights materialize(const Config& c, Weights w) {
    const std::shared_ptr<const DeferredMatrices> deferred = std::move(w.deferred);
    for_each_tensor(w, c, [&](const std::string& name, std::vector<float>& t, std::size_t n) {
        const MatrixRows* rows = t.empty() && deferred ? deferred->find(name) : nullptr;
        if (rows == nullptr) return;
        t.resize(n);
        for (int j = 0; j < rows->m; ++j) {
            const RowRef r = rows->row(j);
            float* out = t.data() + static_cast<std::size_t>(j) * rows->k;
            for (int p = 0; p < rows->k; ++p) out[p] = r.bf != nullptr ? to_float(r.bf[p]) : r.f32[p];
        }
    });
    validate(w, c);
    return w;
}

#endif  // SPECDEC_BODIES

}  // namespace specdec
