// The models the loop's composition tests share (test_context_limit.cpp, test_soak.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "helpers.hpp"

namespace test {

/// A target (context 128), two drafters of decreasing quality (noise), a GLIDE drafter next to the
/// target and Max-Gram's bigram table, all over one 64-token vocabulary; drawn from `seed` and the
/// three seeds after it.
struct World {
    explicit World(std::uint64_t seed) : seed(seed) {}

    std::uint64_t seed;
    specdec::Config cfg = tiny_config();
    specdec::Weights w = specdec::random_weights(cfg, seed, 0.4f);
    specdec::CpuModel target{cfg, w};
    specdec::CpuModel mid{cfg, specdec::perturbed(cfg, w, 0.15f, seed + 1)};
    specdec::CpuModel small{cfg, specdec::perturbed(cfg, w, 0.35f, seed + 2)};
    specdec::GlideConfig glide_cfg = specdec::glide_config_for(specdec::Config{.hidden_size = 16,
                                                                               .intermediate_size = 24,
                                                                               .num_hidden_layers = 1,
                                                                               .num_attention_heads = 2,
                                                                               .num_key_value_heads = 1,
                                                                               .vocab_size = cfg.vocab_size,
                                                                               .max_position_embeddings =
                                                                                   cfg.max_position_embeddings,
                                                                               .tie_word_embeddings = true},
                                                               cfg);
    specdec::GlideModel<specdec::CpuModel> glide{glide_cfg, specdec::random_glide_weights(glide_cfg, seed + 3, 0.4f),
                                                 target};
    specdec::Bigram bigram = specdec::Bigram::build(corpus(), cfg.vocab_size);

    /// Text with repeats (Max-Gram finds matches) from the target's own greedy continuations.
    std::vector<int> corpus() {
        std::vector<int> text;
        for (int start : {3, 17, 42}) {
            const std::vector<int> p{start, 5};
            const specdec::Generation g =
                specdec::autoregressive_generate(target, p, specdec::GenerateOptions{.max_new_tokens = 60});
            text.insert(text.end(), g.tokens.begin(), g.tokens.end());
        }
        return text;
    }
};

/// CS Drafting's three-level cascade as example 06 composes it: CS(mid, small, Max-Gram), K-matrix
/// [[2,2,0],[0,1,0],[0,0,3]], lenience 3 at the mid level. A composition adds its builder and acceptor.
struct CsThreeLevels {
    using Small = specdec::Review<specdec::CpuModel, specdec::MaxGram>;
    using BelowMid = specdec::Horizontal<Small, specdec::MaxGram>;
    using Mid = specdec::Review<specdec::CpuModel, BelowMid>;
    specdec::MaxGram mag;
    Small small_level;
    BelowMid below_mid;
    Mid mid_level;
    specdec::Horizontal<Mid, Small, specdec::MaxGram> proposer;
    explicit CsThreeLevels(World& w)
        : mag(w.bigram),
          small_level(w.small, mag, {.budget = 3}),
          below_mid({1, 0}, small_level, mag),
          mid_level(w.mid, below_mid, {.budget = 1, .lenience = {3.0}}),
          proposer({2, 2, 0}, mid_level, small_level, mag) {}
};

}  // namespace test
