// The GPU trainer's arithmetic, run on the host: DeviceLlama<HostDevice> executes the same functors
// (device_ops.hpp) and the same product orientations as DeviceLlama<CudaDevice>, and must compute
// TrainableLlama's logits, gradients and optimizer steps. Only the launch and cuBLASLt's layouts are left
// to the GPU's own check (tests/cuda/test_cuda_train.cu).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "catch.hpp"
#include "device_checks.hpp"
#include "helpers.hpp"
#include "gradient_check.hpp"
#include "detail/train/device_llama.hpp"
#include "detail/train/host_device.hpp"
#include "detail/train/optimizer.hpp"

namespace test_device_llama {  // a unity build compiles several test files as one

using namespace specdec;
using namespace specdec::train;
using test::relative_gap;

namespace {

std::vector<int> tokens_of(int n, int V, std::uint64_t seed) {
    std::vector<int> t(static_cast<std::size_t>(n));
    StepRng rng{seed, 0, RngStream::kUser};
    for (int i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = static_cast<int>(rng.uniform(static_cast<std::uint32_t>(i)) * V) % V;
    return t;
}

std::vector<float> floats(std::size_t n, std::uint64_t seed, double scale = 1.0) {
    const std::vector<double> d = test::randn(n, seed, scale);
    return {d.begin(), d.end()};
}

/// Rows of a law: softmax of random logits.
std::vector<float> laws(int N, int V, std::uint64_t seed) {
    std::vector<float> z = floats(static_cast<std::size_t>(N) * V, seed, 2.0), p(z.size());
    ThreadPool one(1);
    softmax_rows(one, p.data(), z.data(), N, V);
    return p;
}

}  // namespace

TEST_CASE("the device trainer's kernels, run on the host, compute TrainableLlama's logits and gradients", "[train][device]") {
    const test::Variant v = GENERATE(from_range(std::begin(test::kVariants), std::end(test::kVariants)));
    CAPTURE(v.name);
    const Config cfg = test::variant_config(v, 40);
    const int B = 2, T = 6, N = B * T, D = cfg.hidden_size, V = cfg.vocab_size, L = cfg.num_hidden_layers;
    const Weights w = random_weights(cfg, 5, 0.3f);
    ThreadPool pool(2);
    TrainableLlama ref(cfg, w, pool, TrainOptions{.reference = true});
    HostDevice dev(pool);
    DeviceLlama<HostDevice> model(dev, cfg, w);
    ref.capture_hidden({1, L});
    model.capture_hidden({1, L});

    // Soft-prompt rows (EDD, EAGLE), a per-sequence mask that keeps the diagonal, shifted positions.
    std::vector<int> tokens = tokens_of(N, V, 9);
    tokens[0] = tokens[1] = tokens[T] = kEmbeddingInput;
    const std::vector<float> soft = floats(static_cast<std::size_t>(N) * D, 11);
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(B) * T * T);
    StepRng rng{12, 0, RngStream::kUser};
    for (int i = 0; i < B * T * T; ++i)
        mask[static_cast<std::size_t>(i)] = (i % T <= (i / T) % T) && (i % T == (i / T) % T || rng.uniform(static_cast<std::uint32_t>(i)) < 0.7f);
    std::vector<int> positions(static_cast<std::size_t>(N));
    for (int i = 0; i < N; ++i) positions[static_cast<std::size_t>(i)] = 2 + i % T;
    const std::vector<float> p = laws(N, V, 13);
    const std::vector<float> feature_target = floats(static_cast<std::size_t>(N) * D, 14);
    const ModelInput in{.B = B, .T = T, .tokens = tokens, .input_embeddings = soft, .positions = positions, .mask = mask};

    ref.forward(in);
    double ref_loss = soft_cross_entropy(pool, ref.dlogits().data(), ref.logits().data(), p.data(), N, V, 0.3, nullptr, false);
    for (int c = 0; c < 2; ++c)
        ref_loss += smooth_l1(pool, ref.dhidden(c).data(), ref.hidden(c).data(), feature_target.data(), N, D, 1.0, 0.5);
    ref.backward();

    model.forward(in);
    double loss = device_soft_target_loss(dev, model.dlogits(), model.logits(), p.data(), nullptr, N, N, V, 0.3);
    for (int c = 0; c < 2; ++c)
        loss += device_smooth_l1(dev, model.dhidden(c), model.hidden(c), feature_target.data(), nullptr, N, N, D, 1.0, 0.5);
    model.backward();

    CHECK(std::abs(loss - ref_loss) <= 1e-5 * std::abs(ref_loss));
    const std::vector<float> logits(model.logits(), model.logits() + static_cast<std::size_t>(N) * V);
    CHECK(relative_gap(logits, std::vector<float>(ref.logits().begin(), ref.logits().end())) < 1e-5);
    for (int c = 0; c < 2; ++c) {
        const std::vector<float> h(model.hidden(c), model.hidden(c) + static_cast<std::size_t>(N) * D);
        CHECK(relative_gap(h, std::vector<float>(ref.hidden(c).begin(), ref.hidden(c).end())) < 1e-5);
    }
    const Weights g = model.grads();
    const Weights& rg = ref.grads();
    const auto ref_tensors = test::named_tensors(rg, cfg);
    std::size_t i = 0;
    for_each_tensor(g, cfg, [&](const std::string& name, const std::vector<float>& t, std::size_t) {
        INFO(name);
        CHECK(relative_gap(t, ref_tensors[i++].second) < 1e-4);
    });
    const std::vector<float> dsoft(model.input_embeddings_grad(), model.input_embeddings_grad() + static_cast<std::size_t>(N) * D);
    CHECK(relative_gap(dsoft, std::vector<float>(ref.input_embeddings_grad().begin(), ref.input_embeddings_grad().end())) < 1e-4);
    CHECK(std::any_of(dsoft.begin(), dsoft.end(), [](float x) { return x != 0.0f; }));
}

TEST_CASE("a frozen tensor gets no gradient on the device, and the others are unchanged", "[train][device]") {
    const Config cfg = test::variant_config(test::kVariants[0], 40);
    const int B = 1, T = 5, N = B * T, V = cfg.vocab_size;
    const Weights w = random_weights(cfg, 6, 0.3f);
    ThreadPool pool(2);
    HostDevice dev(pool);
    DeviceLlama<HostDevice> all(dev, cfg, w), frozen(dev, cfg, w, {"model.embed_tokens.weight", "lm_head.weight"});
    const std::vector<int> tokens = tokens_of(N, V, 3);
    const std::vector<float> p = laws(N, V, 4);
    for (DeviceLlama<HostDevice>* m : {&all, &frozen}) {
        m->forward(ModelInput{.B = B, .T = T, .tokens = tokens});
        device_soft_target_loss(dev, m->dlogits(), m->logits(), p.data(), nullptr, N, N, V, 1.0);
        m->backward();
    }
    const Weights ga = all.grads(), gf = frozen.grads();
    CHECK(std::all_of(gf.embed.begin(), gf.embed.end(), [](float x) { return x == 0.0f; }));
    CHECK(std::all_of(gf.lm_head.begin(), gf.lm_head.end(), [](float x) { return x == 0.0f; }));
    CHECK(std::any_of(ga.lm_head.begin(), ga.lm_head.end(), [](float x) { return x != 0.0f; }));
    CHECK(gf.layers[0].wq == ga.layers[0].wq);
    CHECK(gf.norm == ga.norm);
    CHECK_THROWS_WITH((DeviceLlama<HostDevice>(dev, cfg, w, {"lm_head.weigth"})),
                      Catch::Matchers::Contains("frozen tensor 'lm_head.weigth'"));
}

TEST_CASE("the device's AdamW and clipping take optimizer.hpp's steps", "[train][device][optimizer]") {
    const Config cfg = test::variant_config(test::kVariants[0], 40);
    const int B = 2, T = 4, N = B * T, V = cfg.vocab_size;
    ThreadPool pool(2);
    HostDevice dev(pool);
    TrainableLlama ref(cfg, random_weights(cfg, 7, 0.3f), pool, TrainOptions{.reference = true});
    DeviceLlama<HostDevice> model(dev, cfg, ref.params());
    const AdamWOptions ao{.weight_decay = 0.1f, .frozen = {"model.embed_tokens.weight"}};
    AdamW<> ref_opt(cfg, ref.params(), ao);
    DeviceAdamW<HostDevice> opt(dev, model.tensors(), ao);
    const std::vector<int> tokens = tokens_of(N, V, 8);
    for (int step = 0; step < 3; ++step) {
        INFO("step " << step);
        const std::vector<float> p = laws(N, V, 20 + step);
        ref.zero_grad();
        ref.forward(ModelInput{.B = B, .T = T, .tokens = tokens});
        soft_cross_entropy(pool, ref.dlogits().data(), ref.logits().data(), p.data(), N, V, 1.0, nullptr, false);
        ref.backward();
        const double ref_norm = clip_grad_norm(pool, ref.grads(), cfg, 0.05);  // small enough to clip
        ref_opt.step(pool, ref.params(), ref.grads(), 1e-2f);

        model.zero_grad();
        model.forward(ModelInput{.B = B, .T = T, .tokens = tokens});
        device_soft_target_loss(dev, model.dlogits(), model.logits(), p.data(), nullptr, N, N, V, 1.0);
        model.backward();
        const double norm = device_clip_gradients(dev, {&model.tensors()}, 0.05);
        CHECK(norm > 0.05);
        CHECK(std::abs(norm - ref_norm) < 1e-4 * ref_norm);
        opt.step(1e-2f);
        const Weights w = model.params();
        CHECK(w.embed == ref.params().embed);  // frozen in both optimizers
        CHECK(relative_gap(w.layers[1].wq, ref.params().layers[1].wq) < 1e-4);
        CHECK(relative_gap(w.lm_head, ref.params().lm_head) < 1e-4);
        CHECK(relative_gap(w.norm, ref.params().norm) < 1e-4);
    }
    CHECK(opt.t() == 3);
}

TEST_CASE("the device's AdamW state leaves the device and returns: a restored run takes the same steps", "[train][device][optimizer]") {
    const Config cfg = test::variant_config(test::kVariants[0], 40);
    const int B = 2, T = 4, N = B * T, V = cfg.vocab_size;
    ThreadPool pool(2);
    HostDevice dev(pool);
    const Weights init = random_weights(cfg, 9, 0.3f);
    const AdamWOptions ao{.weight_decay = 0.1f, .frozen = {"model.embed_tokens.weight"}};
    TrainableLlama ref(cfg, init, pool, TrainOptions{.reference = true});
    AdamW<> ref_opt(cfg, ref.params(), ao);
    DeviceLlama<HostDevice> model(dev, cfg, init, {"model.embed_tokens.weight"});
    DeviceAdamW<HostDevice> opt(dev, model.tensors(), ao);
    const std::vector<int> tokens = tokens_of(N, V, 10);
    const auto step = [&](DeviceLlama<HostDevice>& m, DeviceAdamW<HostDevice>& o, int s) {
        const std::vector<float> p = laws(N, V, 40 + s);
        m.zero_grad();
        m.forward(ModelInput{.B = B, .T = T, .tokens = tokens});
        device_soft_target_loss(dev, m.dlogits(), m.logits(), p.data(), nullptr, N, N, V, 1.0);
        m.backward();
        o.step(1e-2f);
    };
    for (int s = 0; s < 2; ++s) {
        step(model, opt, s);
        const std::vector<float> p = laws(N, V, 40 + s);
        ref.zero_grad();
        ref.forward(ModelInput{.B = B, .T = T, .tokens = tokens});
        soft_cross_entropy(pool, ref.dlogits().data(), ref.logits().data(), p.data(), N, V, 1.0, nullptr, false);
        ref.backward();
        ref_opt.step(pool, ref.params(), ref.grads(), 1e-2f);
    }
    // The moments, named and ordered as AdamW<>'s (a frozen tensor's stay zero).
    Weights m = init, v = init;
    opt.download_moments(m, v, cfg);
    CHECK(std::all_of(m.embed.begin(), m.embed.end(), [](float x) { return x == 0.0f; }));
    CHECK(relative_gap(m.layers[1].w_up, ref_opt.first_moment().layers[1].w_up) < 1e-4);
    CHECK(relative_gap(v.layers[0].wk, ref_opt.second_moment().layers[0].wk) < 1e-4);
    CHECK(relative_gap(m.lm_head, ref_opt.first_moment().lm_head) < 1e-4);

    // A second trainer built from the saved parameters and moments continues bit for bit.
    DeviceLlama<HostDevice> resumed(dev, cfg, model.params(), {"model.embed_tokens.weight"});
    DeviceAdamW<HostDevice> resumed_opt(dev, resumed.tensors(), ao);
    resumed_opt.restore(m, v, cfg, opt.t());
    step(model, opt, 2);
    step(resumed, resumed_opt, 2);
    CHECK(resumed_opt.t() == 3);
    CHECK(resumed.params().layers[1].w_down == model.params().layers[1].w_down);
    CHECK(resumed.params().lm_head == model.params().lm_head);
    Weights short_m = m;
    short_m.layers[0].wq.pop_back();
    CHECK_THROWS_WITH(resumed_opt.restore(short_m, v, cfg, 2), Catch::Matchers::Contains("model.layers.0.self_attn.q_proj.weight"));
}

TEST_CASE("the device's softmax rows are softmax_rows's: a teacher's law for distillation", "[train][device]") {
    const int N = 5, V = 37;
    ThreadPool pool(2);
    HostDevice dev(pool);
    const std::vector<float> z = floats(static_cast<std::size_t>(N) * V, 3, 4.0);
    std::vector<float> want(z.size()), got(z.size());
    softmax_rows(pool, want.data(), z.data(), N, V);
    dev.run(N, ops::SoftmaxRow{got.data(), z.data(), V});
    CHECK(relative_gap(got, want) < 1e-6);
}

TEST_CASE("the device trainer refuses bad inputs by name", "[train][device]") {
    const Config cfg = test::variant_config(test::kVariants[0], 40);
    ThreadPool pool(1);
    HostDevice dev(pool);
    DeviceLlama<HostDevice> model(dev, cfg, random_weights(cfg, 1, 0.3f));
    const std::vector<int> three{1, 2, 3}, bad{1, 99, 3}, soft{1, kEmbeddingInput, 3};
    CHECK_THROWS_WITH(model.forward(ModelInput{.B = 1, .T = 4, .tokens = three}), Catch::Matchers::Contains("3 tokens"));
    CHECK_THROWS_WITH(model.forward(ModelInput{.B = 1, .T = 3, .tokens = bad}), Catch::Matchers::Contains("token 99 at row 1"));
    CHECK_THROWS_WITH(model.forward(ModelInput{.B = 1, .T = 3, .tokens = soft}), Catch::Matchers::Contains("input_embeddings"));
    CHECK_THROWS_WITH(model.hidden(0), Catch::Matchers::Contains("0 layers captured"));
}

}  // namespace test_device_llama
