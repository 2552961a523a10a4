// The GPU trainer against the CPU trainer: the product in its four orientations, every training kernel
// (the whole DeviceLlama forward and backward on the GPU against the same code on the host with the same
// bf16 rounding of product operands), gradients and AdamW steps against TrainableLlama, and EAGLE's and
// FSPAD's drafters against TrainableFeatureDrafter. Runs only with a GPU (tests/cuda/main.cpp exits 77).
//
// Bounds, as test_cuda.cu's, max|got - want| / max|want|:
//   kGemm   1e-4  bf16 operands rounded identically on both sides, fp32 accumulation in another order
//   kSame   2e-3  the device trainer on the GPU vs on the host with bf16-rounded products: the same
//                 arithmetic in another order, through a forward and a backward
//   kModel  4e-2  the GPU trainer vs TrainableLlama in fp32: every product operand rounded to bf16
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "catch.hpp"
#include "detail/cuda/train_device.cuh"
#include "detail/methods/eagle_fspad/device_feature_drafter.hpp"
#include "detail/train/device_llama.hpp"
#include "detail/train/host_device.hpp"
#include "device_checks.hpp"
#include "helpers.hpp"
#include "specdec.hpp"

using namespace specdec;
using namespace specdec::train;
using test::relative_gap;

namespace {

constexpr double kGemm = 1e-4, kSame = 2e-3, kModel = 4e-2;

std::vector<float> normal(std::size_t n, std::uint64_t seed, float std_dev = 1.0f) {
    detail::NormalStream s{seed};
    std::vector<float> v(n);
    for (float& x : v) x = std_dev * s.next();
    return v;
}

std::vector<float> bf16_rounded(const float* x, std::size_t n) {
    std::vector<float> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = to_float(to_bf16(x[i]));
    return out;
}

/// HostDevice whose products round both operands to bf16 first, as CudaDevice's do.
class RoundingHostDevice : public HostDevice {
public:
    using HostDevice::HostDevice;
    void gemm(float* C, const float* A, const float* B, int M, int N, int K, bool ta, bool tb, bool accumulate) {
        const std::vector<float> a = bf16_rounded(A, static_cast<std::size_t>(M) * K);
        const std::vector<float> b = bf16_rounded(B, static_cast<std::size_t>(K) * N);
        HostDevice::gemm(C, a.data(), b.data(), M, N, K, ta, tb, accumulate);
    }
};

template <class Device>
std::vector<float> fetch(Device& dev, const float* p, std::size_t n) {
    std::vector<float> out(n);
    dev.download(out.data(), p, n);
    return out;
}

/// One forward and backward with a soft-target loss on the logits and SmoothL1 on two captured states.
template <class Model, class Device>
double run_step(Model& m, Device& dev, const ModelInput& in, const std::vector<float>& laws, const std::vector<float>& feat) {
    const int N = in.B * in.T, V = m.config().vocab_size, D = m.config().hidden_size;
    auto p = dev.template alloc<float>(laws.size());
    auto f = dev.template alloc<float>(feat.size());
    dev.upload(p.data(), laws.data(), laws.size());
    dev.upload(f.data(), feat.data(), feat.size());
    m.forward(in);
    double loss = device_soft_target_loss(dev, m.dlogits(), m.logits(), p.data(), nullptr, N, N, V, 0.3);
    for (int c = 0; c < 2; ++c) loss += device_smooth_l1(dev, m.dhidden(c), m.hidden(c), f.data(), nullptr, N, N, D, 1.0, 0.5);
    m.backward();
    return loss;
}

/// A parameter set's tensors and their names, in checkpoint order.
template <class Tensors, class Shape>
std::vector<std::vector<float>> tensors_of(const Tensors& w, const Shape& c) {
    std::vector<std::vector<float>> out;
    for (auto& [name, t] : test::named_tensors(w, c)) out.push_back(std::move(t));
    return out;
}
template <class Tensors, class Shape>
std::vector<std::string> names_of(const Tensors& w, const Shape& c) {
    std::vector<std::string> out;
    for (auto& [name, t] : test::named_tensors(w, c)) out.push_back(name);
    return out;
}

}  // namespace

TEST_CASE("the training product computes op(A)·op(B) in all four orientations, overwriting or accumulating", "[cuda][train]") {
    CudaContext ctx;
    CudaDevice gpu(ctx);
    ThreadPool pool(2);
    HostDevice host(pool);
    const int M = 24, N = 40, K = 56;
    for (bool ta : {false, true})
        for (bool tb : {false, true})
            for (bool acc : {false, true}) {
                CAPTURE(ta, tb, acc);
                const std::vector<float> a = bf16_rounded(normal(static_cast<std::size_t>(M) * K, 1).data(), static_cast<std::size_t>(M) * K);
                const std::vector<float> b = bf16_rounded(normal(static_cast<std::size_t>(K) * N, 2).data(), static_cast<std::size_t>(K) * N);
                std::vector<float> want = normal(static_cast<std::size_t>(M) * N, 3);
                auto da = gpu.alloc<float>(a.size()), db = gpu.alloc<float>(b.size()), dc = gpu.alloc<float>(want.size());
                gpu.upload(da.data(), a.data(), a.size());
                gpu.upload(db.data(), b.data(), b.size());
                gpu.upload(dc.data(), want.data(), want.size());
                host.gemm(want.data(), a.data(), b.data(), M, N, K, ta, tb, acc);
                gpu.gemm(dc.data(), da.data(), db.data(), M, N, K, ta, tb, acc);
                CHECK(relative_gap(fetch(gpu, dc.data(), want.size()), want) < kGemm);
            }
}

TEST_CASE("every training kernel on the GPU computes what the same code computes on the host", "[cuda][train]") {
    const test::Variant v = GENERATE(from_range(std::begin(test::kVariants), std::end(test::kVariants)));
    CAPTURE(v.name);
    const Config cfg = test::variant_config(v, 48);
    const int B = 2, T = 9, N = B * T, D = cfg.hidden_size, V = cfg.vocab_size, L = cfg.num_hidden_layers;
    const Weights w = random_weights(cfg, 5, 0.3f);
    CudaContext ctx;
    CudaDevice gpu(ctx);
    ThreadPool pool(2);
    RoundingHostDevice host(pool);
    DeviceLlama<CudaDevice> g(gpu, cfg, w);
    DeviceLlama<RoundingHostDevice> h(host, cfg, w);
    g.capture_hidden({1, L});
    h.capture_hidden({1, L});
    std::vector<int> tokens = test::window_tokens(N, V, 9);
    tokens[0] = tokens[T] = kEmbeddingInput;
    const std::vector<float> soft = normal(static_cast<std::size_t>(N) * D, 11);
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(B) * T * T);
    for (int i = 0; i < B * T * T; ++i) mask[static_cast<std::size_t>(i)] = (i % T <= (i / T) % T) && ((i * 7) % 5 != 0 || i % T == (i / T) % T);
    std::vector<float> laws = normal(static_cast<std::size_t>(N) * V, 13, 2.0f);
    ThreadPool one(1);
    softmax_rows(one, laws.data(), std::vector<float>(laws).data(), N, V);
    const std::vector<float> feat = normal(static_cast<std::size_t>(N) * D, 14);
    const ModelInput in{.B = B, .T = T, .tokens = tokens, .input_embeddings = soft, .mask = mask};
    const double lg = run_step(g, gpu, in, laws, feat), lh = run_step(h, host, in, laws, feat);
    CHECK(std::abs(lg - lh) <= kSame * std::abs(lh));
    CHECK(relative_gap(fetch(gpu, g.logits(), static_cast<std::size_t>(N) * V),
                       std::vector<float>(h.logits(), h.logits() + static_cast<std::size_t>(N) * V)) < kSame);
    const auto gg = tensors_of(g.grads(), cfg), hg = tensors_of(h.grads(), cfg);
    const auto names = names_of(g.grads(), cfg);
    for (std::size_t i = 0; i < gg.size(); ++i) {
        INFO(names[i]);
        CHECK(relative_gap(gg[i], hg[i]) < kSame);
    }
    CHECK(relative_gap(fetch(gpu, g.input_embeddings_grad(), static_cast<std::size_t>(N) * D),
                       std::vector<float>(h.input_embeddings_grad(), h.input_embeddings_grad() + static_cast<std::size_t>(N) * D)) < kSame);
}

TEST_CASE("the GPU trainer's gradients and AdamW steps match TrainableLlama's within bf16's error", "[cuda][train]") {
    const Config cfg = test::variant_config(test::kVariants[0], 48);
    const int B = 2, T = 8, N = B * T, V = cfg.vocab_size, D = cfg.hidden_size, L = cfg.num_hidden_layers;
    const Weights w = random_weights(cfg, 6, 0.3f);
    CudaContext ctx;
    CudaDevice gpu(ctx);
    ThreadPool pool(2);
    TrainableLlama ref(cfg, w, pool);
    DeviceLlama<CudaDevice> g(gpu, cfg, w);
    ref.capture_hidden({1, L});
    g.capture_hidden({1, L});
    const std::vector<int> tokens = test::window_tokens(N, V, 4);
    std::vector<float> laws = normal(static_cast<std::size_t>(N) * V, 7, 2.0f);
    softmax_rows(pool, laws.data(), std::vector<float>(laws).data(), N, V);
    const std::vector<float> feat = normal(static_cast<std::size_t>(N) * D, 8);
    const ModelInput in{.B = B, .T = T, .tokens = tokens};
    ref.forward(in);
    double ref_loss = soft_cross_entropy(pool, ref.dlogits().data(), ref.logits().data(), laws.data(), N, V, 0.3);
    for (int c = 0; c < 2; ++c) ref_loss += smooth_l1(pool, ref.dhidden(c).data(), ref.hidden(c).data(), feat.data(), N, D, 1.0, 0.5);
    ref.backward();
    const double loss = run_step(g, gpu, in, laws, feat);
    CHECK(std::abs(loss - ref_loss) <= kModel * std::abs(ref_loss));
    const auto gg = tensors_of(g.grads(), cfg), rg = tensors_of(ref.grads(), cfg);
    const auto names = names_of(ref.grads(), cfg);
    for (std::size_t i = 0; i < gg.size(); ++i) {
        INFO(names[i]);
        CHECK(relative_gap(gg[i], rg[i]) < kModel);
    }
    // One AdamW step on each side from TrainableLlama's gradients: the updates (about lr each) agree to
    // float rounding. Comparing the parameters alone would pass a step that did nothing (lr / |w| ~ 3e-3).
    for (auto& [name, t] : test::named_tensors(ref.grads(), cfg))
        if (float* dg = g.tensors().has(name) ? g.tensors().grad(name) : nullptr) gpu.upload(dg, t.data(), t.size());
    AdamW<> ref_opt(cfg, ref.params());
    DeviceAdamW<CudaDevice> opt(gpu, g.tensors());
    ref_opt.step(pool, ref.params(), ref.grads(), 1e-3f);
    opt.step(1e-3f);
    const auto w0 = tensors_of(w, cfg), gp = tensors_of(g.params(), cfg), rp = tensors_of(ref.params(), cfg);
    for (std::size_t i = 0; i < gp.size(); ++i) {
        INFO(names[i]);
        std::vector<float> gd(gp[i].size()), rd(rp[i].size());
        for (std::size_t j = 0; j < gd.size(); ++j) gd[j] = gp[i][j] - w0[i][j], rd[j] = rp[i][j] - w0[i][j];
        CHECK(relative_gap(gd, rd) < 1e-3);
    }
}

TEST_CASE("EAGLE's and FSPAD's drafters train on the GPU as TrainableFeatureDrafter does", "[cuda][train][eagle]") {
    const Connector kind = GENERATE(Connector::kFc, Connector::kSampler);
    const bool pad = GENERATE(false, true);
    CAPTURE(static_cast<int>(kind), pad);
    Config tc = test::tiny_config(true, 48);
    const Weights tw = random_weights(tc, 30, 0.3f);
    CpuModel target(tc, tw);
    ThreadPool pool(2);
    const int B = 2, T = 9;
    const WindowBatch win{B, T, test::window_tokens(B * T, tc.vocab_size, 5), test::window_tokens(B * T, tc.vocab_size, 6), {0, 0}};
    const FeatureBatch batch = feature_batch(win, hidden_teacher(target, pool, tc.num_hidden_layers, win), tw.embed, 3);
    const FeatureCheckpoint init = initial_feature_drafter(tc, tw, kind, pad, 31, 0.3f);
    TrainableFeatureDrafter ref(init, pool);
    CudaContext ctx;
    CudaDevice gpu(ctx);
    const std::vector<std::string> frozen{"model.embed_tokens.weight", "lm_head.weight"};
    DeviceFeatureDrafter<CudaDevice> d(gpu, init, frozen);
    const FeatureLoss rl = ref.forward_loss(batch, 0.1, true);
    const FeatureLoss l = d.forward_loss(batch, 0.1, true);
    CHECK(std::abs(l.token - rl.token) <= kModel * rl.token);
    CHECK(std::abs(l.feature - rl.feature) <= kModel * rl.feature);
    const auto gg = tensors_of(d.layer().grads(), d.layer().config()), rg = tensors_of(ref.layer().grads(), ref.layer().config());
    const auto names = names_of(ref.layer().grads(), ref.layer().config());
    for (std::size_t i = 0; i < gg.size(); ++i) {
        if (std::find(frozen.begin(), frozen.end(), names[i]) != frozen.end()) continue;
        INFO(names[i]);
        CHECK(relative_gap(gg[i], rg[i]) < kModel);
    }
    const auto rc = tensors_of(ref.connector_grads(), ref.connector_shape()), gc = tensors_of(d.connector_grads(), d.connector_shape());
    REQUIRE(rc.size() == gc.size());
    for (std::size_t i = 0; i < rc.size(); ++i) CHECK(relative_gap(gc[i], rc[i]) < kModel);
}

TEST_CASE("a GPU-trained EAGLE drafter learns, its loss falling by 30% over 40 steps on one batch", "[cuda][train][eagle]") {
    Config tc = test::tiny_config(true, 48);
    const Weights tw = random_weights(tc, 50, 0.3f);
    CpuModel target(tc, tw);
    ThreadPool pool(2);
    const WindowBatch win{4, 12, test::window_tokens(48, tc.vocab_size, 2), test::window_tokens(48, tc.vocab_size, 3), {0, 0, 0, 0}};
    const FeatureBatch batch = feature_batch(win, hidden_teacher(target, pool, tc.num_hidden_layers, win), tw.embed);
    CudaContext ctx;
    CudaDevice gpu(ctx);
    const std::vector<std::string> frozen{"model.embed_tokens.weight", "lm_head.weight"};
    DeviceFeatureDrafter<CudaDevice> d(gpu, initial_feature_drafter(tc, tw, Connector::kFc, false, 51, 0.1f), frozen);
    DeviceAdamW<CudaDevice> opt(gpu, d.layer().tensors(), AdamWOptions{.frozen = frozen}), copt(gpu, d.connector());
    double first = 0.0, last = 0.0;
    for (int step = 0; step < 40; ++step) {
        d.zero_grad();
        const FeatureLoss l = d.forward_loss(batch, 0.1, true);
        d.clip_gradients(0.5);
        opt.step(3e-3f);
        copt.step(3e-3f);
        (step == 0 ? first : last) = l.total;
    }
    INFO("loss " << first << " -> " << last);
    CHECK(last < 0.7 * first);
    CHECK(gpu.gemm_flops() > 0.0);
}

TEST_CASE("a widened model uploads its generated rows layer by layer and computes the trained model's logits", "[cuda][train][widen]") {
    Config c = test::tiny_config(true, 48);
    c.rms_norm_eps = 1e-3f;
    const Weights w = random_weights(c, 11, 0.3f);
    const Checkpoint wide = widen(Checkpoint{c, w}, WidenShape{.hidden_size = 96, .intermediate_size = 144, .num_hidden_layers = 4,
                                                                .num_attention_heads = 12, .num_key_value_heads = 4}, 5);
    REQUIRE(wide.weights.deferred != nullptr);  // the matrices are generated rows, never a float32 copy
    CudaContext ctx;
    CudaModel small(c, w, ctx), widened(wide.config, wide.weights, ctx);
    const std::vector<int> prompt = test::window_tokens(12, c.vocab_size, 3);
    const Rows a = small.forward(Tree::chain(prompt), 0), b = widened.forward(Tree::chain(prompt), 0);
    REQUIRE(a.data.size() == b.data.size());
    CHECK(relative_gap({b.data.begin(), b.data.end()}, {a.data.begin(), a.data.end()}) < kModel);  // each model rounds its own products to bf16
}

TEST_CASE("EDD's drafter trains on the GPU as edd_forward_loss over TrainableLlama does", "[cuda][train][edd]") {
    Config tc = test::tiny_config(true, 48);
    tc.num_hidden_layers = 4;
    const Config dc = edd_drafter_config(tc);
    const bool kl = GENERATE(true, false);
    CAPTURE(kl);
    const Weights tw = random_weights(tc, 30, 0.3f);
    CpuModel target(tc, tw);
    ThreadPool pool(2);
    const int B = 2, n = 8;
    const WindowBatch win{B, n, test::window_tokens(B * n, tc.vocab_size, 5), test::window_tokens(B * n, tc.vocab_size, 6), {0, 0}};
    const EddBatch batch = edd_batch(win, edd_teacher(target, pool, edd_hidden_layer(tc), win), 3, EddTrainOptions{.kl = kl});
    const Weights init = edd_initial_weights(dc, tw, 31, 0.3f);
    TrainableLlama ref(dc, init, pool);
    CudaContext ctx;
    CudaDevice gpu(ctx);
    DeviceEdd<CudaDevice> d(gpu, dc, init);
    const double rl = edd_forward_loss(ref, batch, kl);
    ref.backward();
    const double l = d.forward_loss(batch, kl);
    d.model().backward();
    CHECK(std::abs(l - rl) <= kModel * std::abs(rl));
    const auto gg = tensors_of(d.model().grads(), dc), rg = tensors_of(ref.grads(), dc);
    const auto names = names_of(ref.grads(), dc);
    for (std::size_t i = 0; i < gg.size(); ++i) {
        INFO(names[i]);
        CHECK(relative_gap(gg[i], rg[i]) < kModel);
    }
}

TEST_CASE("GLIDE's drafter trains on the GPU as TrainableGlide does", "[cuda][train][glide]") {
    Config tc = test::tiny_config(true, 48);  // grouped-query target: 4 cross heads read 2 kv heads
    tc.num_hidden_layers = 3;
    CpuModel target(tc, random_weights(tc, 30, 0.3f));
    const Config draft{.hidden_size = 16, .intermediate_size = 24, .num_hidden_layers = 2, .num_attention_heads = 2,
                       .num_key_value_heads = 1, .vocab_size = tc.vocab_size, .max_position_embeddings = 128};
    const GlideConfig cfg = glide_config_for(draft, tc, true);
    ThreadPool pool(2);
    const int B = 2, T = 10, Tk = 12;  // the target's windows run past the drafter's
    const std::vector<int> tokens = test::window_tokens(B * T, tc.vocab_size, 5), targets = test::window_tokens(B * T, tc.vocab_size, 6);
    const TargetKv<float> kv = target_kv(target, cfg, test::window_tokens(B * Tk, tc.vocab_size, 7), B, Tk);
    const std::vector<std::uint8_t> mask = glide_block_mask(T, Tk, 3);
    const GlideBatch<float> in{.B = B, .T = T, .tokens = tokens, .target = &kv, .cross_mask = mask};
    const GlideWeights init = random_glide_weights(cfg, 31, 0.3f);
    TrainableGlide<float> ref(cfg, init, pool);
    CudaContext ctx;
    CudaDevice gpu(ctx);
    DeviceGlide<CudaDevice> d(gpu, cfg, init);
    ref.forward(in);
    const double rl = ref.cross_entropy(targets);
    ref.backward();
    d.forward(in);
    const double l = d.cross_entropy(targets);
    d.backward();
    CHECK(std::abs(l - rl) <= kModel * std::abs(rl));
    const auto gg = tensors_of(d.grads(), cfg), rg = tensors_of(ref.grads(), cfg);
    const auto names = names_of(ref.grads(), cfg);
    REQUIRE(gg.size() == rg.size());
    for (std::size_t i = 0; i < gg.size(); ++i) {
        INFO(names[i]);
        CHECK(relative_gap(gg[i], rg[i]) < kModel);
    }
    // One AdamW step from the same gradients ("norm" tensors, cross_attn_layernorm too, skip the decay on both).
    AdamW<GlideConfig, GlideParams<float>> ref_opt(cfg, ref.params());
    DeviceAdamW<CudaDevice> opt(gpu, d.tensors());
    ref_opt.step(pool, ref.params(), ref.grads(), 1e-3f);
    opt.step(1e-3f);
    const auto gp = tensors_of(d.params(), cfg), rp = tensors_of(ref.params(), cfg);
    for (std::size_t i = 0; i < gp.size(); ++i) {
        INFO(names[i]);
        CHECK(relative_gap(gp[i], rp[i]) < 1e-2);
    }
}

TEST_CASE("a teacher's law and AdamW's saved moments on the GPU are the host's, and a restored GPU run continues as the first", "[cuda][train]") {
    CudaContext ctx;
    CudaDevice gpu(ctx);
    ThreadPool pool(2);
    // ops::SoftmaxRow: the law a distillation teacher's logits give, computed where they are.
    const int N = 6, V = 300;
    const std::vector<float> z = normal(static_cast<std::size_t>(N) * V, 21, 3.0f);
    std::vector<float> want(z.size());
    softmax_rows(pool, want.data(), z.data(), N, V);
    auto dz = gpu.alloc<float>(z.size()), dp = gpu.alloc<float>(z.size());
    gpu.upload(dz.data(), z.data(), z.size());
    gpu.run(N, ops::SoftmaxRow{dp.data(), dz.data(), V});
    CHECK(relative_gap(fetch(gpu, dp.data(), z.size()), want) < 1e-5);

    // Two steps, the state downloaded, a second trainer restored from it: the third step agrees.
    const Config cfg = test::variant_config(test::kVariants[0], 48);
    const int B = 2, T = 6, n = B * T, Vc = cfg.vocab_size;
    const Weights init = random_weights(cfg, 22, 0.3f);
    const AdamWOptions ao{.weight_decay = 0.1f};
    DeviceLlama<CudaDevice> model(gpu, cfg, init);
    DeviceAdamW<CudaDevice> opt(gpu, model.tensors(), ao);
    const std::vector<int> tokens = test::window_tokens(n, Vc, 23), targets = test::window_tokens(n, Vc, 24);
    auto dt = gpu.alloc<int>(targets.size());
    gpu.upload(dt.data(), targets.data(), targets.size());
    const auto step = [&](DeviceLlama<CudaDevice>& m, DeviceAdamW<CudaDevice>& o) {
        m.zero_grad();
        m.forward(ModelInput{.B = B, .T = T, .tokens = tokens});
        device_cross_entropy(gpu, m.dlogits(), m.logits(), dt.data(), n, n, Vc);
        m.backward();
        o.step(1e-2f);
    };
    step(model, opt);
    step(model, opt);
    Weights m = init, v = init;
    opt.download_moments(m, v, cfg);
    CHECK(std::any_of(m.layers[0].wq.begin(), m.layers[0].wq.end(), [](float x) { return x != 0.0f; }));
    DeviceLlama<CudaDevice> resumed(gpu, cfg, init);
    resumed.tensors().upload(model.params(), cfg);
    DeviceAdamW<CudaDevice> resumed_opt(gpu, resumed.tensors(), ao);
    resumed_opt.restore(m, v, cfg, opt.t());
    step(model, opt);
    step(resumed, resumed_opt);
    const auto a = tensors_of(model.params(), cfg), b = tensors_of(resumed.params(), cfg);
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(relative_gap(b[i], a[i]) < 1e-6);
}
