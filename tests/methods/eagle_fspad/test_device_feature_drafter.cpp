// EAGLE's and FSPAD's drafter trained by the device trainer, its kernels run on the host (HostDevice):
// the same loss, top-1 agreement, gradients and AdamW steps as TrainableFeatureDrafter, for the FC
// connector with and without its bias (the EAGLE layout), the Feature Sampler and PAD.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "catch.hpp"
#include "device_checks.hpp"
#include "helpers.hpp"
#include "detail/methods/eagle_fspad/device_feature_drafter.hpp"
#include "detail/train/host_device.hpp"

namespace test_device_feature_drafter {  // a unity build compiles several test files as one

using namespace specdec;
using namespace specdec::train;
using test::relative_gap;

namespace {

struct Kind {
    const char* name;
    Connector connector;
    bool pad, eagle_layout;
};

}  // namespace

TEST_CASE("the device feature drafter, run on the host, trains as TrainableFeatureDrafter", "[eagle][fspad][device]") {
    const Kind k = GENERATE(Kind{"EAGLE (FC)", Connector::kFc, false, false},
                            Kind{"EAGLE layout (FC + bias, no end norms)", Connector::kFc, false, true},
                            Kind{"Feature Sampler", Connector::kSampler, false, false},
                            Kind{"FSPAD (Feature Sampler + PAD)", Connector::kSampler, true, false});
    CAPTURE(k.name);
    Config tc = test::tiny_config(true, 24);
    tc.num_hidden_layers = 2;
    const Weights tw = random_weights(tc, 30, 0.3f);
    CpuModel target(tc, tw);
    ThreadPool pool(2);
    const int B = 2, T = 7;
    const WindowBatch w{B, T, test::window_tokens(B * T, tc.vocab_size, 5), test::window_tokens(B * T, tc.vocab_size, 6), {0, 0}};
    const FeatureBatch batch = feature_batch(w, hidden_teacher(target, pool, tc.num_hidden_layers, w), tw.embed, 3);

    FeatureCheckpoint init = initial_feature_drafter(tc, tw, k.connector, k.pad, 31, 0.3f);
    std::vector<std::string> frozen{"model.embed_tokens.weight", "lm_head.weight"};
    if (k.eagle_layout) {
        init.config.identity_end_norms = true;
        init.connector_weights.fc_bias.assign(static_cast<std::size_t>(tc.hidden_size), 0.0f);
        for (std::size_t i = 0; i < init.connector_weights.fc_bias.size(); ++i)
            init.connector_weights.fc_bias[i] = 0.05f * static_cast<float>(i % 5) - 0.1f;
        frozen.insert(frozen.end(), {"model.norm.weight", "model.layers.0.input_layernorm.weight"});
    }
    TrainableFeatureDrafter ref(init, pool, TrainOptions{.reference = true});
    HostDevice dev(pool);
    DeviceFeatureDrafter<HostDevice> d(dev, init, frozen);

    const FeatureLoss rl = ref.forward_loss(batch, 0.1, true);
    const FeatureLoss l = d.forward_loss(batch, 0.1, true);
    CHECK(std::abs(l.token - rl.token) <= 1e-5 * rl.token);
    CHECK(std::abs(l.feature - rl.feature) <= 1e-5 * rl.feature);
    CHECK(d.top1_agreement(batch) == ref.top1_agreement(batch));

    // Every trained tensor's gradient; the frozen ones are zero on the device.
    const Weights g = d.layer().grads();
    const auto ref_grads = test::named_tensors(ref.layer().grads(), ref.layer().config());
    std::size_t i = 0;
    double trained_ss = 0.0;
    for_each_tensor(g, d.layer().config(), [&](const std::string& name, const std::vector<float>& t, std::size_t) {
        INFO(name);
        const std::vector<float>& r = ref_grads[i++].second;
        if (std::find(frozen.begin(), frozen.end(), name) != frozen.end()) {
            CHECK(std::all_of(t.begin(), t.end(), [](float x) { return x == 0.0f; }));
            return;
        }
        CHECK(relative_gap(t, r) < 1e-4);
        for (float x : r) trained_ss += double(x) * x;
    });
    const ConnectorWeights cg = d.connector_grads();
    const ConnectorWeights& rcg = ref.connector_grads();
    const auto ref_connector = test::named_tensors(rcg, ref.connector_shape());
    i = 0;
    for_each_tensor(cg, d.connector_shape(), [&](const std::string& name, const std::vector<float>& t, std::size_t) {
        INFO(name);
        CHECK(relative_gap(t, ref_connector[i].second) < 1e-4);
        for (float x : ref_connector[i++].second) trained_ss += double(x) * x;
    });
    CHECK(i == (k.connector == Connector::kFc ? (k.eagle_layout ? 2u : 1u) : 3u));

    // The clipping norm counts the trained tensors only (PyTorch's clip over the optimizer's parameters).
    const double norm = d.clip_gradients(1e9);
    CHECK(std::abs(norm - std::sqrt(trained_ss)) < 1e-4 * norm);
}

TEST_CASE("three AdamW steps of the device feature drafter land where the CPU trainer's do", "[eagle][fspad][device]") {
    Config tc = test::tiny_config(true, 24);
    tc.num_hidden_layers = 2;
    const Weights tw = random_weights(tc, 40, 0.3f);
    CpuModel target(tc, tw);
    ThreadPool pool(2);
    const int B = 2, T = 6;
    const FeatureCheckpoint init = initial_feature_drafter(tc, tw, Connector::kFc, false, 41, 0.3f);
    TrainableFeatureDrafter ref(init, pool, TrainOptions{.reference = true});
    HostDevice dev(pool);
    const std::vector<std::string> frozen{"model.embed_tokens.weight", "lm_head.weight"};
    DeviceFeatureDrafter<HostDevice> d(dev, init, frozen);
    const AdamWOptions ao{.weight_decay = 0.01f, .frozen = frozen};
    AdamW<> ref_opt(ref.layer().config(), ref.layer().params(), ao);
    AdamW<ConnectorShape, ConnectorWeights> ref_copt(ref.connector_shape(), ref.connector_params(), AdamWOptions{.weight_decay = 0.01f});
    DeviceAdamW<HostDevice> opt(dev, d.layer().tensors(), ao), copt(dev, d.connector(), AdamWOptions{.weight_decay = 0.01f});
    for (int step = 0; step < 3; ++step) {
        const WindowBatch w{B, T, test::window_tokens(B * T, tc.vocab_size, 10 + step), test::window_tokens(B * T, tc.vocab_size, 20 + step), {0, 0}};
        const FeatureBatch batch = feature_batch(w, hidden_teacher(target, pool, tc.num_hidden_layers, w), tw.embed);
        ref.zero_grad();
        ref.forward_loss(batch, 0.1, true);
        ref_opt.step(pool, ref.layer().params(), ref.layer().grads(), 3e-3f);
        ref_copt.step(pool, ref.connector_params(), ref.connector_grads(), 3e-3f);
        d.zero_grad();
        d.forward_loss(batch, 0.1, true);
        opt.step(3e-3f);
        copt.step(3e-3f);
    }
    const FeatureCheckpoint a = d.checkpoint(), b = ref.checkpoint();
    CHECK(relative_gap(a.connector_weights.fc, b.connector_weights.fc) < 1e-4);
    CHECK(relative_gap(a.weights.layers[0].w_down, b.weights.layers[0].w_down) < 1e-4);
    CHECK(relative_gap(a.weights.layers[0].wq, b.weights.layers[0].wq) < 1e-4);
    CHECK(a.weights.lm_head == b.weights.lm_head);  // frozen
    CHECK(a.target_hash == b.target_hash);
}

}  // namespace test_device_feature_drafter
