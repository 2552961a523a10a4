// train_demo's GPU trainers (examples/device_trainers.hpp), run on the host, against its CPU trainers
// (examples/lm_trainer.hpp): the small LM distilled from a teacher, EDD's layer and GLIDE's drafter take the
// same steps, evaluate the same, and save a state from which a second trainer continues as the first. A GPU
// run then differs from a CPU run only by the GPU's arithmetic (bf16 products), which
// tests/cuda/test_cuda_train.cu bounds.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "catch.hpp"
#include "detail/train/host_device.hpp"
#include "device_checks.hpp"
#include "examples/device_trainers.hpp"
#include "helpers.hpp"

namespace test_lm_trainers {  // a unity build compiles several test files as one

using namespace specdec;
using namespace specdec::train;
using namespace lm_training;
using test::relative_gap;

namespace {

WindowBatch windows(int B, int T, int V, std::uint64_t seed) {
    return {B, T, test::window_tokens(B * T, V, seed), test::window_tokens(B * T, V, seed + 1),
            std::vector<std::size_t>(static_cast<std::size_t>(B), 0)};
}

/// Three steps of both trainers on the same batches (losses and evaluations agree), then the parameters.
template <class Params, class Batch, class Shape>
void check_same_steps(Trainer<Params, Batch>& cpu, Trainer<Params, Batch>& device, const std::vector<Batch>& batches,
                      const Shape& shape) {
    for (std::size_t s = 0; s < batches.size(); ++s) {
        INFO("step " << s);
        const double want = cpu.step(batches[s], 1e-2f), got = device.step(batches[s], 1e-2f);
        CHECK(std::abs(got - want) <= 1e-4 * std::abs(want));
    }
    const Evaluation want = cpu.evaluate(batches[0]), got = device.evaluate(batches[0]);
    CHECK(std::abs(got.loss - want.loss) <= 1e-4 * std::abs(want.loss));
    CHECK(got.top1 == want.top1);
    // AdamW moves each element by about lr whatever its gradient's size, so where a gradient is near zero
    // the CPU's fast exp (its KL) can turn that element's step: the parameters agree to a few lr, not to 1e-4.
    const auto w = test::named_tensors(cpu.state().params, shape), g = test::named_tensors(device.state().params, shape);
    REQUIRE(w.size() == g.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
        INFO(w[i].first);
        CHECK(relative_gap(g[i].second, w[i].second) < 1e-2);
    }
}

/// A second trainer restored from the first's state takes the same next step, to the bit.
template <class Params, class Batch, class Shape>
void check_restore(Trainer<Params, Batch>& first, Trainer<Params, Batch>& second, const Batch& batch, const Shape& shape) {
    TrainerState<Params> s = first.state();
    CHECK(s.t == 3);
    second.restore(std::move(s));
    CHECK(second.step(batch, 1e-2f) == first.step(batch, 1e-2f));
    const auto a = test::named_tensors(first.state().params, shape), b = test::named_tensors(second.state().params, shape);
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO(a[i].first);
        CHECK(b[i].second == a[i].second);
    }
}

}  // namespace

TEST_CASE("train_demo's device trainer for a small LM takes the CPU trainer's steps, distilled or not", "[train][device]") {
    const bool distilled = GENERATE(false, true);
    CAPTURE(distilled);
    const Config teacher_cfg = test::tiny_config(true, 40), cfg = test::tiny_config(false, 40);
    const Checkpoint teacher{teacher_cfg, random_weights(teacher_cfg, 3, 0.3f)};
    ModelSetup setup{cfg, random_weights(cfg, 4, 0.3f), AdamWOptions{.weight_decay = 0.1f}};
    if (distilled) setup.teacher = &teacher, setup.distill = 0.7;
    ThreadPool pool(2);
    HostDevice dev(pool);
    CpuModelTrainer cpu(setup, pool);
    DeviceModelTrainer<HostDevice> device(dev, setup), resumed(dev, setup);
    std::vector<WindowBatch> batches;
    for (int s = 0; s < 3; ++s) batches.push_back(windows(2, 7, cfg.vocab_size, 10 + 2 * s));
    check_same_steps(cpu, device, batches, cfg);
    check_restore(device, resumed, batches[1], cfg);
}

TEST_CASE("train_demo's device trainer for EDD takes the CPU trainer's steps", "[train][device][edd]") {
    Config tc = test::tiny_config(true, 24);
    tc.num_hidden_layers = 4;
    const Weights tw = random_weights(tc, 30, 0.3f);
    CpuModel target(tc, tw);
    ThreadPool pool(2);
    HostDevice dev(pool);
    const Config cfg = edd_drafter_config(tc);
    const bool kl = GENERATE(true, false);
    CAPTURE(kl);
    const EddTrainOptions eo{.soft_prompt = true, .kl = kl};
    std::vector<EddBatch> batches;
    for (int s = 0; s < 3; ++s) {
        const WindowBatch w = windows(2, 7, tc.vocab_size, 40 + 2 * s);
        batches.push_back(edd_batch(w, edd_teacher(target, pool, edd_hidden_layer(tc), w), 3, eo));
    }
    EddSetup setup{cfg, edd_initial_weights(cfg, tw, 31, 0.3f), AdamWOptions{.weight_decay = 0.1f}, kl};
    CpuEddTrainer cpu(setup, pool);
    DeviceEddTrainer<HostDevice> device(dev, setup), resumed(dev, setup);
    check_same_steps(cpu, device, batches, cfg);
    check_restore(device, resumed, batches[1], cfg);

    // EDD's frozen embedding and norm stay as they were on the device.
    setup.adamw.frozen = {"model.embed_tokens.weight", "model.norm.weight"};
    DeviceEddTrainer<HostDevice> frozen(dev, setup);
    for (const EddBatch& b : batches) frozen.step(b, 1e-2f);
    const Weights after = frozen.state().params;
    CHECK(after.embed == setup.initial.embed);
    CHECK(after.norm == setup.initial.norm);
    CHECK(after.layers[0].wq != setup.initial.layers[0].wq);
}

TEST_CASE("train_demo's device trainer for GLIDE takes the CPU trainer's steps beside the same target", "[train][device][glide]") {
    const bool cross = GENERATE(true, false);
    CAPTURE(cross);
    Config tc = test::tiny_config(true, 48);
    tc.num_hidden_layers = 3;
    CpuModel target(tc, random_weights(tc, 50, 0.3f));
    const Config draft{.hidden_size = 16, .intermediate_size = 24, .num_hidden_layers = 2, .num_attention_heads = 2,
                       .num_key_value_heads = 1, .vocab_size = tc.vocab_size, .max_position_embeddings = 128};
    const GlideConfig cfg = glide_config_for(draft, tc, cross);
    const GlideSetup setup{cfg, random_glide_weights(cfg, 51, 0.3f), AdamWOptions{.weight_decay = 0.1f}};
    ThreadPool pool(2);
    HostDevice dev(pool);
    const int T = 9;
    const std::vector<std::uint8_t> mask = glide_block_mask(T, T, 3);
    std::vector<WindowBatch> w;
    for (int s = 0; s < 3; ++s) w.push_back(windows(2, T, tc.vocab_size, 60 + 2 * s));
    std::vector<GlideWindows> batches;
    for (const WindowBatch& b : w) batches.push_back(GlideWindows{&b, mask});
    CpuGlideTrainer cpu(setup, target, pool);
    DeviceGlideTrainer<HostDevice, CpuModel> device(dev, setup, target), resumed(dev, setup, target);
    check_same_steps(cpu, device, batches, cfg);
    check_restore(device, resumed, batches[1], cfg);
}

}  // namespace test_lm_trainers
