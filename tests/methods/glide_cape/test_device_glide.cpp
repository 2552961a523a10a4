// GLIDE's drafter trained by the device trainer, its kernels run on the host (HostDevice): the same logits,
// loss, gradients and AdamW steps as TrainableGlide, without and with the cross-attention (full-head,
// grouped-query and YaRN-scaled targets, target windows longer than the drafter's, the block-wise mask),
// and the same errors for a batch that does not fit.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "catch.hpp"
#include "device_checks.hpp"
#include "helpers.hpp"
#include "detail/methods/glide_cape/device_glide.hpp"
#include "detail/train/host_device.hpp"

namespace test_device_glide {  // a unity build compiles several test files as one

using namespace specdec;
using namespace specdec::train;
using test::relative_gap;

namespace {

struct Kind {
    const char* name;
    bool cross, gqa_target, tied;
    int extra_target_rows;  // Tk - T: the target's window runs past the drafter's
    bool yarn_target = false;  // the target's RoPE is YaRN-scaled: the cross queries turn as its keys, cos/sin scaled
};

/// A two-layer drafter of its own small shape, paired with `target` (as test_glide.cpp's small_glide).
GlideConfig small_glide(const Config& target, bool cross, bool tied) {
    const Config draft{.hidden_size = 16,
                       .intermediate_size = 24,
                       .num_hidden_layers = 2,
                       .num_attention_heads = 2,
                       .num_key_value_heads = 1,
                       .vocab_size = target.vocab_size,
                       .max_position_embeddings = 128,
                       .tie_word_embeddings = tied};
    return glide_config_for(draft, target, cross);
}

Config target_config(bool gqa, bool yarn = false) {
    Config tc = test::tiny_config(gqa, 24);
    tc.num_hidden_layers = 3;
    if (yarn)
        tc.rope_scaling = {.type = RopeScalingType::kYarn, .factor = 4.0f, .original_max_position_embeddings = 32, .attention_factor = 1.25f};
    return tc;
}

/// One batch of B windows: T drafter tokens, the target's KV of Tk >= T rows, the block-wise mask (L = 3).
struct Batch {
    int B, T;
    std::vector<int> tokens, targets;
    TargetKv<float> kv;
    std::vector<std::uint8_t> mask;

    GlideBatch<float> input() const {
        return {.B = B, .T = T, .tokens = tokens, .target = kv.k.empty() ? nullptr : &kv, .cross_mask = mask};
    }
};

Batch make_batch(CpuModel& target, const GlideConfig& cfg, int B, int T, int Tk, int seed) {
    Batch b{B, T, test::window_tokens(B * T, cfg.draft.vocab_size, seed), test::window_tokens(B * T, cfg.draft.vocab_size, seed + 1), {}, {}};
    b.targets[1] = kIgnoreIndex;  // an ignored row: the mean counts the others only
    if (!cfg.glide_cross_attention) return b;
    b.kv = target_kv(target, cfg, test::window_tokens(B * Tk, cfg.draft.vocab_size, seed + 2), B, Tk);
    b.mask = glide_block_mask(T, Tk, 3);
    return b;
}

}  // namespace

TEST_CASE("the device GLIDE drafter, run on the host, has TrainableGlide's logits, loss and gradients", "[glide][device]") {
    const Kind k = GENERATE(Kind{"vanilla drafter (no cross-attention)", false, true, true, 0},
                            Kind{"cross-attention, full-head target, untied head", true, false, false, 0},
                            Kind{"cross-attention, GQA target (Hkt < Hc)", true, true, true, 0},
                            Kind{"cross-attention, GQA target, Tk > T", true, true, false, 4},
                            Kind{"cross-attention, YaRN-scaled GQA target", true, true, false, 0, true});
    CAPTURE(k.name);
    const Config tc = target_config(k.gqa_target, k.yarn_target);
    CpuModel target(tc, random_weights(tc, 30, 0.3f));
    const GlideConfig cfg = small_glide(tc, k.cross, k.tied);
    if (k.cross) REQUIRE((cfg.glide_target_kv_heads < cfg.glide_cross_heads) == k.gqa_target);
    ThreadPool pool(2);
    const int B = 2, T = 8;
    const Batch batch = make_batch(target, cfg, B, T, T + k.extra_target_rows, 5);
    const GlideWeights init = random_glide_weights(cfg, 31, 0.3f);
    TrainableGlide<float> ref(cfg, init, pool);
    HostDevice dev(pool);
    DeviceGlide<HostDevice> d(dev, cfg, init);

    ref.forward(batch.input());
    const double rl = ref.cross_entropy(batch.targets);
    ref.backward();
    d.forward(batch.input());
    const double l = d.cross_entropy(batch.targets);
    d.backward();
    REQUIRE(d.rows() == ref.rows());
    const std::size_t NV = static_cast<std::size_t>(d.rows()) * cfg.draft.vocab_size;
    CHECK(relative_gap(std::vector<float>(d.logits(), d.logits() + NV), {ref.logits().begin(), ref.logits().end()}) < 1e-5);
    CHECK(std::abs(l - rl) <= 1e-5 * std::abs(rl));

    const auto g = test::named_tensors(d.grads(), cfg), rg = test::named_tensors(ref.grads(), cfg);
    REQUIRE(g.size() == rg.size());
    REQUIRE(g.size() == 2 + (cfg.draft.tie_word_embeddings ? 0u : 1u) + 2u * (k.cross ? 12u : 9u));
    for (std::size_t i = 0; i < g.size(); ++i) {
        INFO(g[i].first);
        REQUIRE(g[i].first == rg[i].first);
        CHECK(relative_gap(g[i].second, rg[i].second) < 1e-4);
        // Every tensor is reached by the loss (the block mask leaves later blocks' queries rows to read),
        // so a branch left out of the backward cannot pass as two zeros.
        CHECK(std::any_of(rg[i].second.begin(), rg[i].second.end(), [](float x) { return x != 0.0f; }));
    }
    const auto p = test::named_tensors(d.params(), cfg), rp = test::named_tensors(init, cfg);
    for (std::size_t i = 0; i < p.size(); ++i) CHECK(p[i].second == rp[i].second);  // the upload round-trips
}

TEST_CASE("three AdamW steps of the device GLIDE drafter land where AdamW over GlideParams does", "[glide][device]") {
    const Config tc = target_config(true);
    CpuModel target(tc, random_weights(tc, 40, 0.3f));
    const GlideConfig cfg = small_glide(tc, true, false);
    ThreadPool pool(2);
    const GlideWeights init = random_glide_weights(cfg, 41, 0.3f);
    TrainableGlide<float> ref(cfg, init, pool);
    HostDevice dev(pool);
    DeviceGlide<HostDevice> d(dev, cfg, init);
    // The default decay (0.1) skips every tensor named "norm", cross_attn_layernorm included, on both sides:
    // a norm weight (1.0) decayed on one side only would move by lr · wd per step, far past the bound.
    AdamW<GlideConfig, GlideParams<float>> ref_opt(cfg, ref.params());
    DeviceAdamW<HostDevice> opt(dev, d.tensors());
    for (int step = 0; step < 3; ++step) {
        const Batch batch = make_batch(target, cfg, 2, 7, 7, 10 + 3 * step);
        ref.zero_grad();
        ref.forward(batch.input());
        ref.cross_entropy(batch.targets);
        ref.backward();
        ref_opt.step(pool, ref.params(), ref.grads(), 3e-3f);
        d.zero_grad();
        d.forward(batch.input());
        d.cross_entropy(batch.targets);
        d.backward();
        opt.step(3e-3f);
    }
    CHECK(opt.t() == 3);
    const auto p = test::named_tensors(d.params(), cfg), rp = test::named_tensors(ref.params(), cfg);
    const auto p0 = test::named_tensors(init, cfg);
    REQUIRE(p.size() == rp.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
        INFO(p[i].first);
        CHECK(relative_gap(p[i].second, rp[i].second) < 1e-4);
        CHECK(relative_gap(p[i].second, p0[i].second) > 1e-3);  // and every tensor moved
    }
}

TEST_CASE("a batch that does not fit the device GLIDE drafter is TrainableGlide's error naming the value", "[glide][device]") {
    const Config tc = target_config(true);
    CpuModel target(tc, random_weights(tc, 50, 0.3f));
    const GlideConfig cfg = small_glide(tc, true, true);
    ThreadPool pool(1);
    HostDevice dev(pool);
    const GlideWeights init = random_glide_weights(cfg, 51, 0.3f);
    DeviceGlide<HostDevice> d(dev, cfg, init);
    TrainableGlide<float> ref(cfg, init, pool);
    const Batch good = make_batch(target, cfg, 2, 6, 6, 3);
    CHECK_THROWS_WITH(d.backward(), Catch::StartsWith("[specdec.train] DeviceGlide::backward: no forward"));
    // Each bad batch throws on both trainers with the same message.
    const auto same_error = [&](const GlideBatch<float>& in, const std::string& says) {
        std::string device_message, reference_message;
        try {
            d.forward(in);
        } catch (const specdec::error& e) {
            device_message = e.what();
        }
        try {
            ref.forward(in);
        } catch (const specdec::error& e) {
            reference_message = e.what();
        }
        INFO(device_message);
        CHECK(device_message.rfind("[specdec.train] glide forward: ", 0) == 0);
        CHECK(device_message.find(says) != std::string::npos);
        CHECK(device_message == reference_message);
    };

    Batch kv_layers = good;
    kv_layers.kv.k.pop_back(), kv_layers.kv.v.pop_back();
    same_error(kv_layers.input(), "1 layers, expected B = 2 and N_D = 2 layers");

    Batch mask = good;
    mask.mask.pop_back();
    same_error(mask.input(), "cross mask of 35 entries, expected (T, Tk) = 36");

    Batch token = good;
    token.tokens[7] = tc.vocab_size;
    same_error(token.input(), "token 24 at row 7 is outside [0, 24)");

    GlideBatch<float> no_kv = good.input();
    no_kv.target = nullptr;
    same_error(no_kv, "cross-attention needs the target's KV");

    // Targets: one per row, each in the vocabulary or the ignore index.
    d.forward(good.input());
    std::vector<int> targets = good.targets;
    targets.pop_back();
    CHECK_THROWS_WITH(d.cross_entropy(targets), Catch::StartsWith("[specdec.train] cross_entropy: 11 targets for 12 rows"));
    targets = good.targets;
    targets[4] = -2;
    CHECK_THROWS_WITH(d.cross_entropy(targets), Catch::Contains("target -2 at row 4 is outside [0, 24)"));
    // A good batch still runs after the errors.
    CHECK(std::isfinite(d.cross_entropy(good.targets)));
}

}  // namespace test_device_glide
