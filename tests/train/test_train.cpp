// Training: every layer's backward against double-sided finite differences, the whole model's gradients,
// the optimizer, determinism, learning, and the dataset's file checks.
//
// Layer checks run in float64 (the layer functions are templates): with h = 1e-5 the central
// difference is exact to ~1e-10, so a tolerance of 1e-6 catches any wrong term. The whole model is
// float32 (it owns float Weights); there we compare directional derivatives along a random unit
// direction per tensor, with h = 1e-2: the truncation error is O(h²) ~ 1e-4 relative and float
// rounding of a loss of ~4 contributes ~4·6e-8·√N / 2h ~ 1e-4, so a 2% relative tolerance is loose
// enough never to flake and tight enough to catch a missing or doubled term (which shows as ≥ 10%).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "catch.hpp"
#include "helpers.hpp"
#include "gradient_check.hpp"
#include "detail/train/dataset.hpp"
#include "detail/train/optimizer.hpp"
#include "detail/util/progress.hpp"
#include "detail/util/svg.hpp"
#include "detail/io/train_state.hpp"
#include "detail/train/layers.hpp"
#include "detail/train/trainable_llama.hpp"

namespace test_train {  // a unity build compiles several test files as one

using namespace specdec;
using namespace specdec::train;
using test::randn;
using test::dot;
using test::check_model_gradient;

namespace {

/// Checks analytic[i] against (loss(x + h e_i) - loss(x - h e_i)) / 2h for every i.
template <class Loss>
void check_gradient(std::vector<double>& x, const std::vector<double>& analytic, Loss&& loss, const char* what,
                    double tol = 1e-6) {
    REQUIRE(analytic.size() == x.size());
    const double h = 1e-5;
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double saved = x[i];
        x[i] = saved + h;
        const double plus = loss();
        x[i] = saved - h;
        const double minus = loss();
        x[i] = saved;
        const double fd = (plus - minus) / (2 * h);
        worst = std::max(worst, std::abs(fd - analytic[i]) / std::max(1.0, std::abs(fd)));
    }
    INFO(what << ": worst relative error " << worst);
    CHECK(worst < tol);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Layers, in float64

TEST_CASE("embedding backward scatters gradients into the rows of the tokens used", "[train][layers]") {
    ThreadPool pool(2);
    const int V = 5, D = 3, N = 4;
    const std::vector<int> tokens{2, 0, 2, -1};  // a repeated token sums; -1 rows are left alone
    std::vector<double> embed = randn(V * D, 1), c = randn(N * D, 2);
    auto loss = [&] {
        std::vector<double> out(N * D, 0.0);
        embedding_forward(out.data(), tokens.data(), embed.data(), N, D, V);
        return dot(out, c);
    };
    std::vector<double> grad(V * D, 0.0);
    embedding_backward(pool, grad.data(), c.data(), tokens.data(), N, D);
    check_gradient(embed, grad, loss, "embed");
}

TEST_CASE("rmsnorm backward matches finite differences for input and weight", "[train][layers]") {
    ThreadPool pool(2);
    const int N = 3, D = 8;
    std::vector<double> x = randn(N * D, 3), w = randn(D, 4), c = randn(N * D, 5);
    auto loss = [&] {
        std::vector<double> out(N * D), rstd(N);
        rmsnorm_forward(pool, out.data(), rstd.data(), x.data(), w.data(), N, D, 1e-5f);
        return dot(out, c);
    };
    std::vector<double> out(N * D), rstd(N), dx(N * D, 0.0), dw(D, 0.0);
    rmsnorm_forward(pool, out.data(), rstd.data(), x.data(), w.data(), N, D, 1e-5f);
    rmsnorm_backward(pool, dx.data(), dw.data(), c.data(), x.data(), w.data(), rstd.data(), N, D);
    check_gradient(x, dx, loss, "dx");
    check_gradient(w, dw, loss, "dweight");
}

TEST_CASE("linear backward matches finite differences, and the float path through matmul agrees", "[train][layers]") {
    ThreadPool pool(2);
    SECTION("float64 finite differences") {
        const int n = 4, k = 5, m = 3;
        std::vector<double> x = randn(n * k, 6), W = randn(m * k, 7), c = randn(n * m, 8);
        auto loss = [&] {
            std::vector<double> y(n * m);
            linear_forward(pool, y.data(), x.data(), W.data(), n, k, m);
            return dot(y, c);
        };
        std::vector<double> dx(n * k, 0.0), dW(m * k, 0.0);
        LinearScratch<double> s;
        linear_backward(pool, dx.data(), dW.data(), c.data(), x.data(), W.data(), n, k, m, s);
        check_gradient(x, dx, loss, "dx");
        check_gradient(W, dW, loss, "dW");
    }
    SECTION("float32 through matmul equals float64, for small and packed-kernel shapes") {
        const int n = GENERATE(7, 130), k = 37, m = 45;
        const std::vector<double> x = randn(n * k, 9), W = randn(m * k, 10), dy = randn(n * m, 11);
        std::vector<double> dx(n * k, 0.5), dW(m * k, 0.25);  // non-zero: backward must add, not overwrite
        LinearScratch<double> sd;
        linear_backward(pool, dx.data(), dW.data(), dy.data(), x.data(), W.data(), n, k, m, sd);
        const std::vector<float> xf(x.begin(), x.end()), Wf(W.begin(), W.end()), dyf(dy.begin(), dy.end());
        std::vector<float> dxf(n * k, 0.5f), dWf(m * k, 0.25f);
        LinearScratch<float> sf;
        linear_backward(pool, dxf.data(), dWf.data(), dyf.data(), xf.data(), Wf.data(), n, k, m, sf);
        double worst = 0;
        for (int i = 0; i < n * k; ++i)
            worst = std::max(worst, std::abs(dxf[i] - dx[i]) / std::max(1.0, std::abs(dx[i])));
        for (int i = 0; i < m * k; ++i)
            worst = std::max(worst, std::abs(dWf[i] - dW[i]) / std::max(1.0, std::abs(dW[i])));
        CHECK(worst < 1e-5);
    }
}

TEST_CASE("rope backward is the inverse rotation", "[train][layers]") {
    ThreadPool pool(2);
    const int N = 3, heads = 2, hd = 8;
    const std::vector<int> positions{0, 5, 17};
    const RopeTable table = rope_table(positions, hd, 10000.0f);
    std::vector<double> x = randn(N * heads * hd, 12), c = randn(N * heads * hd, 13);
    auto loss = [&] {
        std::vector<double> y = x;
        rope_forward(pool, y.data(), table, N, heads, hd);
        return dot(y, c);
    };
    std::vector<double> dx = c;
    rope_backward(pool, dx.data(), table, N, heads, hd);
    check_gradient(x, dx, loss, "dx");
}

namespace {

/// Attention gradients of dot(out, c) checked against finite differences for q, k and v.
void check_attention(AttentionShape s, const std::vector<std::uint8_t>& mask, bool per_sequence, std::uint64_t seed) {
    ThreadPool pool(2);
    const std::size_t nq = static_cast<std::size_t>(s.B) * s.Tq * s.H * s.hd;
    const std::size_t nk = static_cast<std::size_t>(s.B) * s.Tk * s.Hkv * s.hd;
    std::vector<double> q = randn(nq, seed), k = randn(nk, seed + 1), v = randn(nk, seed + 2), c = randn(nq, seed + 3);
    const AttentionMask m{mask.data(), per_sequence};
    std::vector<double> probs(static_cast<std::size_t>(s.B) * s.H * s.Tq * s.Tk);
    auto loss = [&] {
        std::vector<double> out(nq);
        attention_forward(pool, out.data(), probs.data(), q.data(), k.data(), v.data(), s, m);
        return dot(out, c);
    };
    loss();
    std::vector<double> dq(nq, 0.0), dk(nk, 0.0), dv(nk, 0.0);
    attention_backward(pool, dq.data(), dk.data(), dv.data(), c.data(), probs.data(), q.data(), k.data(), v.data(), s);
    check_gradient(q, dq, loss, "dq");
    check_gradient(k, dk, loss, "dk");
    check_gradient(v, dv, loss, "dv");
}

}  // namespace

TEST_CASE("attention backward matches finite differences", "[train][layers][attention]") {
    SECTION("causal, multi-head") {
        const AttentionShape s{.B = 2, .Tq = 5, .Tk = 5, .H = 2, .Hkv = 2, .hd = 4};
        check_attention(s, causal_mask(5, 5), false, 20);
    }
    SECTION("grouped-query heads") {
        const AttentionShape s{.B = 2, .Tq = 4, .Tk = 4, .H = 4, .Hkv = 2, .hd = 4};
        check_attention(s, causal_mask(4, 4), false, 30);
    }
    SECTION("a random mask per sequence, including a row that sees nothing") {
        const AttentionShape s{.B = 2, .Tq = 5, .Tk = 5, .H = 2, .Hkv = 1, .hd = 4};
        std::vector<std::uint8_t> mask(2 * 5 * 5);
        StepRng rng{7, 0, RngStream::kUser};
        for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = rng.uniform(static_cast<std::uint32_t>(i)) < 0.5f;
        std::fill_n(mask.begin() + 5, 5, std::uint8_t{0});  // sequence 0, query 1: no key visible
        check_attention(s, mask, true, 40);
    }
    SECTION("extra key/value rows from outside in front of the self rows (GLIDE's cross-attention)") {
        // 4 external rows visible to every query (a target's KV cache) + 3 self rows, causal among themselves.
        const AttentionShape s{.B = 1, .Tq = 3, .Tk = 7, .H = 4, .Hkv = 2, .hd = 4};
        check_attention(s, causal_mask(3, 7), false, 50);
    }
}

TEST_CASE("a fully masked query row gives zero output", "[train][layers][attention]") {
    ThreadPool pool(1);
    const AttentionShape s{.B = 1, .Tq = 2, .Tk = 2, .H = 1, .Hkv = 1, .hd = 2};
    const std::vector<std::uint8_t> mask{0, 0, 1, 1};
    const std::vector<float> q{1, 2, 3, 4}, k{1, 0, 0, 1}, v{5, 6, 7, 8};
    std::vector<float> out(4), probs(4);
    attention_forward(pool, out.data(), probs.data(), q.data(), k.data(), v.data(), s, AttentionMask{mask.data()});
    CHECK(out[0] == 0.0f);
    CHECK(out[1] == 0.0f);
    CHECK(std::isfinite(out[2]));
}

TEST_CASE("swiglu backward matches finite differences", "[train][layers]") {
    ThreadPool pool(2);
    const int N = 3, F = 6;
    std::vector<double> gate = randn(N * F, 60, 2.0), up = randn(N * F, 61), c = randn(N * F, 62);
    auto loss = [&] {
        std::vector<double> out(N * F);
        swiglu_forward(pool, out.data(), gate.data(), up.data(), N, F);
        return dot(out, c);
    };
    std::vector<double> dgate(N * F, 0.0), dup(N * F, 0.0);
    swiglu_backward(pool, dgate.data(), dup.data(), c.data(), gate.data(), up.data(), N, F);
    check_gradient(gate, dgate, loss, "dgate");
    check_gradient(up, dup, loss, "dup");
}

// ---------------------------------------------------------------------------------------------------
// Losses, in float64

namespace {

std::vector<float> softmax_rows(const std::vector<double>& z, int N, int V) {
    std::vector<float> p(z.size());
    for (int r = 0; r < N; ++r) {
        double mx = -1e300, s = 0;
        for (int j = 0; j < V; ++j) mx = std::max(mx, z[r * V + j]);
        for (int j = 0; j < V; ++j) s += std::exp(z[r * V + j] - mx);
        for (int j = 0; j < V; ++j) p[r * V + j] = static_cast<float>(std::exp(z[r * V + j] - mx) / s);
    }
    return p;
}

}  // namespace

TEST_CASE("each loss's gradient matches finite differences of its value", "[train][loss]") {
    ThreadPool pool(2);
    const int N = 4, V = 7;
    std::vector<double> z = randn(N * V, 70, 2.0);
    const std::vector<float> p = softmax_rows(randn(N * V, 71, 2.0), N, V);
    const std::vector<std::uint8_t> rows{1, 0, 1, 1};
    const double w = 0.7;
    std::vector<double> grad(N * V, 0.0), scratch(N * V);

    SECTION("cross-entropy with an ignored row") {
        const std::vector<int> targets{3, kIgnoreIndex, 0, 6};
        auto loss = [&] { return w * cross_entropy(pool, scratch.data(), z.data(), targets.data(), N, V); };
        const double value = cross_entropy(pool, grad.data(), z.data(), targets.data(), N, V, w);
        check_gradient(z, grad, loss, "dlogits");
        // By hand: mean over the 3 counted rows of -log softmax(z)[target].
        double expected = 0;
        for (int r : {0, 2, 3}) {
            double s = 0;
            for (int j = 0; j < V; ++j) s += std::exp(z[r * V + j]);
            expected += std::log(s) - z[r * V + targets[r]];
        }
        CHECK_THAT(value, Catch::Matchers::WithinRel(expected / 3, 1e-12));
    }
    SECTION("soft-label cross-entropy") {
        auto loss = [&] {
            return w * soft_cross_entropy(pool, scratch.data(), z.data(), p.data(), N, V, 1.0, rows.data());
        };
        soft_cross_entropy(pool, grad.data(), z.data(), p.data(), N, V, w, rows.data());
        check_gradient(z, grad, loss, "dlogits");
    }
    SECTION("forward KL to a full target; zero at the target itself") {
        auto loss = [&] { return w * kl_divergence(pool, scratch.data(), z.data(), p.data(), N, V, 1.0, rows.data()); };
        kl_divergence(pool, grad.data(), z.data(), p.data(), N, V, w, rows.data());
        check_gradient(z, grad, loss, "dlogits");
        std::vector<double> zp(N * V);
        for (int i = 0; i < N * V; ++i) zp[i] = std::log(double(p[i]));
        CHECK(std::abs(kl_divergence(pool, scratch.data(), zp.data(), p.data(), N, V)) < 1e-6);
    }
    SECTION("forward KL to a top-k target with the tail as one event") {
        const int K = 3;
        std::vector<int> ids(N * K);
        std::vector<float> probs(N * K);
        for (int r = 0; r < N; ++r)
            for (int e = 0; e < K; ++e) ids[r * K + e] = (r + 2 * e) % V, probs[r * K + e] = p[r * V + (r + 2 * e) % V];
        const TopKRows target{ids.data(), probs.data(), K};
        auto loss = [&] {
            return w * kl_divergence_topk(pool, scratch.data(), z.data(), target, N, V, 1.0, rows.data());
        };
        kl_divergence_topk(pool, grad.data(), z.data(), target, N, V, w, rows.data());
        check_gradient(z, grad, loss, "dlogits");

        // With K = V nothing is left in the tail and the top-k KL is the full KL.
        std::vector<int> all_ids(N * V);
        for (int i = 0; i < N * V; ++i) all_ids[i] = i % V;
        const double full = kl_divergence(pool, scratch.data(), z.data(), p.data(), N, V);
        CHECK_THAT(kl_divergence_topk(pool, scratch.data(), z.data(), TopKRows{all_ids.data(), p.data(), V}, N, V),
                   Catch::Matchers::WithinRel(full, 1e-6));
        // Never more than the full KL (coarsening cannot increase a divergence), and 0 when the model
        // matches the kept entries and the tail mass.
        CHECK(kl_divergence_topk(pool, scratch.data(), z.data(), target, N, V) <= full + 1e-9);
        std::vector<double> zp(N * V);
        for (int i = 0; i < N * V; ++i) zp[i] = std::log(double(p[i]));
        CHECK(std::abs(kl_divergence_topk(pool, scratch.data(), zp.data(), target, N, V)) < 1e-6);
    }
    SECTION("a repeated top-k id is an error naming the row") {
        const std::vector<int> ids{1, 1, 2, 3, 4, 5, 6, 0};
        const std::vector<float> probs(8, 0.1f);
        CHECK_THROWS_WITH(kl_divergence_topk(pool, grad.data(), z.data(), TopKRows{ids.data(), probs.data(), 2}, N, V),
                          Catch::Contains("row 0") && Catch::Contains("repeated"));
    }
    SECTION("SmoothL1 on features, both sides of beta") {
        const int D = V;
        const std::vector<double> target = randn(N * D, 72);
        auto loss = [&] {
            return w * smooth_l1(pool, scratch.data(), z.data(), target.data(), N, D, 0.5, 1.0, rows.data());
        };
        smooth_l1(pool, grad.data(), z.data(), target.data(), N, D, 0.5, w, rows.data());
        check_gradient(z, grad, loss, "dpred");
    }
    SECTION("a weighted sum of losses is several calls into one gradient buffer") {
        const std::vector<int> targets{3, 1, 0, 6};
        auto loss = [&] {
            return 0.1 * soft_cross_entropy(pool, scratch.data(), z.data(), p.data(), N, V) +
                   cross_entropy(pool, scratch.data(), z.data(), targets.data(), N, V);
        };
        soft_cross_entropy(pool, grad.data(), z.data(), p.data(), N, V, 0.1);
        cross_entropy(pool, grad.data(), z.data(), targets.data(), N, V, 1.0);
        check_gradient(z, grad, loss, "dlogits");
    }
}

// ---------------------------------------------------------------------------------------------------
// The whole model, in float32

namespace {

/// Head size hd: 4 (the fast attention kernels with one masked vector) or 16 (one whole vector).
Config train_config(bool gqa, bool tied, int hd = 4) {
    Config c = test::tiny_config(gqa, /*vocab=*/48);
    c.hidden_size = 4 * hd;
    c.intermediate_size = 24;
    c.num_attention_heads = 4;
    c.num_key_value_heads = gqa ? 2 : 4;
    c.max_position_embeddings = 64;
    c.tie_word_embeddings = tied;
    return c;
}

std::vector<int> token_rows(int n, int vocab, std::uint64_t seed) {
    std::vector<int> t(n);
    StepRng rng{seed, 0, RngStream::kUser};
    for (int i = 0; i < n; ++i) t[i] = static_cast<int>(rng.uniform(static_cast<std::uint32_t>(i)) * vocab);
    return t;
}

}  // namespace

TEST_CASE("the trainable model computes CpuModel's logits under a causal mask", "[train][model]") {
    const bool gqa = GENERATE(false, true);
    const bool tied = GENERATE(false, true);
    const Config cfg = train_config(gqa, tied);
    const Weights w = random_weights(cfg, 3, 0.3f);
    ThreadPool pool(2);
    TrainableLlama model(cfg, w, pool);
    const int B = 2, T = 9;
    const std::vector<int> tokens = token_rows(B * T, cfg.vocab_size, 4);
    model.forward(ModelInput{.B = B, .T = T, .tokens = tokens});
    CpuModel reference(cfg, w);
    float worst = 0;
    for (int b = 0; b < B; ++b) {
        reference.reset();
        const Rows r = reference.forward(Tree::chain(std::span(tokens).subspan(b * T, T)));
        for (int i = 0; i < T * cfg.vocab_size; ++i)
            worst = std::max(worst, std::abs(r.data[i] - model.logits()[b * T * cfg.vocab_size + i]));
    }
    CHECK(worst < 1e-4f);
}

TEST_CASE("the model's parameter gradients match finite differences", "[train][model]") {
    const bool gqa = GENERATE(false, true);
    const bool tied = GENERATE(false, true);
    const int hd = GENERATE(4, 16);
    CAPTURE(gqa, tied, hd);
    const Config cfg = train_config(gqa, tied, hd);
    ThreadPool pool(2);
    TrainableLlama model(cfg, random_weights(cfg, 5, 0.3f), pool);
    const int B = 2, T = 6;
    const std::vector<int> tokens = token_rows(B * T, cfg.vocab_size, 6);
    std::vector<int> targets = token_rows(B * T, cfg.vocab_size, 7);
    targets[3] = kIgnoreIndex;
    check_model_gradient(model, cfg, [&](bool with_backward) {
        model.forward(ModelInput{.B = B, .T = T, .tokens = tokens});
        const double loss = model.cross_entropy(targets);
        if (with_backward) model.backward();
        return loss;
    });
}

TEST_CASE("a custom mask, positions, soft-prompt rows and a feature loss all get their gradients", "[train][model]") {
    const Config cfg = train_config(true, false);
    const int D = cfg.hidden_size, B = 2, T = 5;
    ThreadPool pool(2);
    TrainableLlama model(cfg, random_weights(cfg, 8, 0.3f), pool);
    model.capture_hidden({1, cfg.num_hidden_layers});
    // Rows 0-1 of each sequence are a soft prompt (EDD); a random mask that keeps the diagonal.
    std::vector<int> tokens = token_rows(B * T, cfg.vocab_size, 9);
    tokens[0] = tokens[1] = tokens[T] = tokens[T + 1] = kEmbeddingInput;
    const std::vector<int> targets = token_rows(B * T, cfg.vocab_size, 10);
    const std::vector<double> prompt_d = randn(B * T * D, 11);
    std::vector<float> prompt(prompt_d.begin(), prompt_d.end());
    std::vector<std::uint8_t> mask(B * T * T);
    StepRng rng{12, 0, RngStream::kUser};
    for (int i = 0; i < B * T * T; ++i)
        mask[i] = (i % T == (i / T) % T) || rng.uniform(static_cast<std::uint32_t>(i)) < 0.5f;
    const std::vector<int> positions{3, 4, 5, 6, 7, 0, 1, 2, 3, 4};
    const std::vector<double> feature_target_d = randn(B * T * D, 13);
    const std::vector<float> feature_target(feature_target_d.begin(), feature_target_d.end());
    auto loss = [&](bool with_backward) {
        model.forward(ModelInput{
            .B = B, .T = T, .tokens = tokens, .input_embeddings = prompt, .positions = positions, .mask = mask});
        double value = model.cross_entropy(targets);
        for (int c = 0; c < 2; ++c)
            value +=
                0.5 * smooth_l1(pool, model.dhidden(c).data(), model.hidden(c).data(), feature_target.data(), B * T, D,
                                /*beta=*/1.0, /*weight=*/0.5);  // returns the unweighted mean
        if (with_backward) model.backward();
        return value;
    };
    check_model_gradient(model, cfg, loss);

    SECTION("the soft prompt's gradient") {
        model.zero_grad();
        loss(true);
        const std::vector<float> analytic(model.input_embeddings_grad().begin(), model.input_embeddings_grad().end());
        const double h = 1e-2;
        for (int row : {0, 1, T + 1}) {
            const std::vector<double> u = randn(D, 200 + row);
            const double norm = std::sqrt(dot(u, u));
            double an = 0;
            for (int i = 0; i < D; ++i) an += analytic[row * D + i] * u[i] / norm;
            const std::vector<float> saved = prompt;
            for (int i = 0; i < D; ++i) prompt[row * D + i] = static_cast<float>(saved[row * D + i] + h * u[i] / norm);
            const double plus = loss(false);
            for (int i = 0; i < D; ++i) prompt[row * D + i] = static_cast<float>(saved[row * D + i] - h * u[i] / norm);
            const double minus = loss(false);
            prompt = saved;
            const double fd = (plus - minus) / (2 * h);
            INFO("row " << row << ": finite difference " << fd << ", backward " << an);
            CHECK(std::abs(fd - an) <= 0.02 * std::max(std::abs(fd), 1e-2));
        }
        for (int i = 2 * D; i < T * D; ++i) CHECK(analytic[i] == 0.0f);  // token rows: nothing
    }
}

// ---------------------------------------------------------------------------------------------------
// Optimizer, schedule, clipping, accumulation

TEST_CASE("AdamW takes the hand-computed step, without decay on norms and frozen tensors", "[train][optimizer]") {
    const Config cfg = train_config(true, false);
    ThreadPool pool(2);
    Weights params = random_weights(cfg, 1), grads = params;
    for_each_tensor(params, cfg, [](const std::string&, std::vector<float>& t, std::size_t) {
        std::fill(t.begin(), t.end(), 0.5f);
    });
    for_each_tensor(grads, cfg, [](const std::string&, std::vector<float>& t, std::size_t) {
        std::fill(t.begin(), t.end(), 0.2f);
    });
    AdamW opt(cfg, params, AdamWOptions{.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                                        .frozen = {"lm_head.weight"}});
    // Step 1: p = 0.5 - 0.1·0.1·0.5 = 0.495; m̂ = 0.2, v̂ = 0.04, so p -= 0.1 · 0.2 / 0.2 -> 0.395.
    opt.step(pool, params, grads, 0.1f);
    CHECK_THAT(params.layers[0].wq[7], Catch::Matchers::WithinAbs(0.395, 1e-6));
    CHECK_THAT(params.layers[1].attn_norm[3], Catch::Matchers::WithinAbs(0.4, 1e-6));  // no decay on norms
    CHECK(params.lm_head[5] == 0.5f);                                                    // frozen
    // Step 2 with the same gradient: bias correction keeps m̂ = 0.2, v̂ = 0.04.
    opt.step(pool, params, grads, 0.1f);
    CHECK_THAT(params.layers[0].wq[7], Catch::Matchers::WithinAbs(0.395 - 0.1 * 0.1 * 0.395 - 0.1, 1e-6));
    CHECK(opt.t() == 2);
    CHECK_THROWS_WITH(AdamW(cfg, params, AdamWOptions{.frozen = {"lm_head"}}), Catch::Contains("'lm_head'"));
}

TEST_CASE("the schedule warms up linearly and decays along a cosine to min_lr", "[train][optimizer]") {
    const CosineSchedule s{.max_lr = 1.0f, .min_lr = 0.1f, .warmup_steps = 10, .total_steps = 110};
    CHECK_THAT(s.at(0), Catch::Matchers::WithinAbs(0.1, 1e-7));
    CHECK_THAT(s.at(4), Catch::Matchers::WithinAbs(0.5, 1e-7));
    CHECK_THAT(s.at(10), Catch::Matchers::WithinAbs(1.0, 1e-7));
    CHECK_THAT(s.at(60), Catch::Matchers::WithinAbs(0.55, 1e-6));  // halfway: (max + min) / 2
    CHECK_THAT(s.at(110), Catch::Matchers::WithinAbs(0.1, 1e-7));
    CHECK_THAT(s.at(500), Catch::Matchers::WithinAbs(0.1, 1e-7));
}

TEST_CASE("clipping scales the global norm down to max_norm and leaves small gradients alone", "[train][optimizer]") {
    const Config cfg = train_config(true, true);
    Weights g = random_weights(cfg, 2, 1.0f);
    const double before = grad_norm(g, cfg);
    REQUIRE(before > 2.0);
    CHECK(clip_grad_norm(g, cfg, 2.0) == before);
    CHECK_THAT(grad_norm(g, cfg), Catch::Matchers::WithinRel(2.0, 1e-5));
    const Weights unchanged = g;
    clip_grad_norm(g, cfg, 100.0);
    CHECK(g.layers[1].w_up == unchanged.layers[1].w_up);
}

TEST_CASE("two micro-batches of one sequence accumulate the gradient of one batch of two", "[train][optimizer]") {
    const Config cfg = train_config(true, true);
    ThreadPool pool(2);
    TrainableLlama model(cfg, random_weights(cfg, 3, 0.3f), pool);
    const int T = 7;
    const std::vector<int> tokens = token_rows(2 * T, cfg.vocab_size, 4),
                           targets = token_rows(2 * T, cfg.vocab_size, 5);
    model.forward(ModelInput{.B = 2, .T = T, .tokens = tokens});
    model.cross_entropy(targets);
    model.backward();
    const Weights whole = model.grads();
    model.zero_grad();
    for (int b = 0; b < 2; ++b) {
        model.forward(ModelInput{.B = 1, .T = T, .tokens = std::span(tokens).subspan(b * T, T)});
        model.cross_entropy(std::span(targets).subspan(b * T, T), /*weight=*/0.5);
        model.backward();
    }
    std::vector<const std::vector<float>*> whole_tensors;
    for_each_tensor(whole, cfg,
                    [&](const std::string&, const std::vector<float>& t, std::size_t) { whole_tensors.push_back(&t); });
    std::size_t i = 0;
    for_each_tensor(model.grads(), cfg, [&](const std::string& name, const std::vector<float>& t, std::size_t) {
        const std::vector<float>& w = *whole_tensors[i++];
        float worst = 0, scale = 0;
        for (std::size_t j = 0; j < t.size(); ++j)
            worst = std::max(worst, std::abs(t[j] - w[j])), scale = std::max(scale, std::abs(w[j]));
        INFO(name);
        CHECK(worst <= 1e-5f * std::max(scale, 1.0f));
    });
}

// ---------------------------------------------------------------------------------------------------
// Training runs

namespace {

std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("specdec_test_train_" + name)).string();
}

/// `steps` steps of AdamW on random windows of the file; returns the last step's loss.
double train_steps(TrainableLlama& model, const TokenFile& file, int steps, int B, int T, std::uint64_t seed,
                   float lr) {
    AdamW opt(model.config(), model.params(), AdamWOptions{.weight_decay = 0.0f});
    const CosineSchedule schedule{.max_lr = lr, .min_lr = lr / 10, .warmup_steps = 10, .total_steps = steps};
    double loss = 0;
    for (int step = 0; step < steps; ++step) {
        const WindowBatch w =
            random_windows(file, TokenRange{0, file.size()}, B, T, seed, static_cast<std::uint32_t>(step));
        model.zero_grad();
        model.forward(ModelInput{.B = B, .T = T, .tokens = w.inputs});
        loss = model.cross_entropy(w.targets);
        model.backward();
        clip_grad_norm(model.pool(), model.grads(), model.config(), 1.0);
        opt.step(model.pool(), model.params(), model.grads(), schedule.at(step));
    }
    return loss;
}

}  // namespace

TEST_CASE("the same seed and thread count give bit-identical parameters", "[train][determinism]") {
    const Config cfg = train_config(true, false);
    const std::string path = temp_path("determinism.bin");
    write_token_file(path, token_rows(500, cfg.vocab_size, 6));
    const TokenFile file(path);
    ThreadPool pool(2);
    TrainableLlama a(cfg, random_weights(cfg, 7, 0.1f), pool), b(cfg, random_weights(cfg, 7, 0.1f), pool);
    train_steps(a, file, 5, 3, 8, 11, 1e-2f);
    train_steps(b, file, 5, 3, 8, 11, 1e-2f);
    CHECK(a.params().embed == b.params().embed);
    CHECK(a.params().layers[1].wk == b.params().layers[1].wk);
    CHECK(a.params().norm == b.params().norm);
    std::filesystem::remove(path);
}

TEST_CASE("a tiny model learns a repeating sequence", "[train][learning]") {
    Config cfg = train_config(true, false);
    cfg.vocab_size = 16;
    cfg.hidden_size = 32;
    cfg.intermediate_size = 64;
    std::vector<int> tokens(400);
    for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int>((i * 7) % 16);  // a period of 16
    const std::string path = temp_path("repeat.bin");
    write_token_file(path, tokens);
    const TokenFile file(path);
    ThreadPool pool(2);
    TrainableLlama model(cfg, random_weights(cfg, 8, 0.02f), pool);
    const double first = train_steps(model, file, 1, 4, 16, 1, 1e-2f);
    const double last = train_steps(model, file, 150, 4, 16, 2, 1e-2f);
    INFO("loss " << first << " -> " << last);
    CHECK(first > 2.0);  // ~ln 16
    CHECK(last < 0.1);
    const EvalResult eval = evaluate(model, file, TokenRange{0, file.size()}, 16, 8);
    CHECK(eval.loss < 0.1);
    CHECK_THAT(eval.perplexity, Catch::Matchers::WithinRel(std::exp(eval.loss), 1e-9));
    std::filesystem::remove(path);
}

namespace {

/// Steps [first, last) of a run of `total` steps (AdamW, clipping, warm-up + cosine), as train_demo
/// takes them; returns each step's loss.
std::vector<double> run_steps(TrainableLlama& model, AdamW<>& opt, const TokenFile& file, int first, int last, int total) {
    const CosineSchedule schedule{.max_lr = 1e-2f, .min_lr = 1e-3f, .warmup_steps = 10, .total_steps = total};
    std::vector<double> losses;
    for (int step = first; step < last; ++step) {
        const WindowBatch w = random_windows(file, TokenRange{0, file.size()}, 4, 16, 3, static_cast<std::uint32_t>(step));
        model.zero_grad();
        model.forward(ModelInput{.B = 4, .T = 16, .tokens = w.inputs});
        losses.push_back(model.cross_entropy(w.targets));
        model.backward();
        clip_grad_norm(model.pool(), model.grads(), model.config(), 1.0);
        opt.step(model.pool(), model.params(), model.grads(), schedule.at(step));
    }
    return losses;
}

}  // namespace

TEST_CASE("a run saved after 50 steps and resumed from the file equals one run of 100 steps", "[train][resume]") {
    const Config cfg = train_config(true, true, /*hd=*/16);  // head size 16: the fast kernels throughout
    const std::string tokens = temp_path("resume.bin"), state = temp_path("resume.safetensors");
    write_token_file(tokens, token_rows(600, cfg.vocab_size, 12));
    const TokenFile file(tokens);
    ThreadPool pool(2);
    const AdamWOptions adamw{.weight_decay = 0.1f};

    TrainableLlama whole(cfg, random_weights(cfg, 13, 0.1f), pool);
    AdamW<> whole_opt(cfg, whole.params(), adamw);
    const std::vector<double> expected = run_steps(whole, whole_opt, file, 0, 100, 100);

    std::vector<double> losses;
    {
        TrainableLlama first(cfg, random_weights(cfg, 13, 0.1f), pool);
        AdamW<> first_opt(cfg, first.params(), adamw);
        losses = run_steps(first, first_opt, file, 0, 50, 100);
        json::Object record;
        record.set("step", 50);
        record.set("adamw_t", first_opt.t());
        save_train_state(state, cfg, first.params(), first_opt.first_moment(), first_opt.second_moment(),
                         json::Value(std::move(record)));
    }
    // Fresh objects from other weights: everything the second half needs must come from the file.
    TrainableLlama second(cfg, random_weights(cfg, 99, 0.5f), pool);
    AdamW<> second_opt(cfg, second.params(), adamw);
    Weights m = second_opt.first_moment(), v = second_opt.second_moment();
    const json::Value record = load_train_state(state, cfg, second.params(), m, v);
    REQUIRE(record.at("step").as_int() == 50);
    second_opt.restore(std::move(m), std::move(v), static_cast<int>(record.at("adamw_t").as_int()));
    const std::vector<double> rest = run_steps(second, second_opt, file, 50, 100, 100);
    losses.insert(losses.end(), rest.begin(), rest.end());

    CHECK(losses == expected);  // every step's loss, bit for bit
    std::vector<const std::vector<float>*> want;
    for_each_tensor(whole.params(), cfg, [&](const std::string&, const std::vector<float>& t, std::size_t) { want.push_back(&t); });
    std::size_t i = 0;
    for_each_tensor(second.params(), cfg, [&](const std::string& name, const std::vector<float>& t, std::size_t) {
        INFO(name);
        CHECK(t == *want[i++]);
    });
    CHECK(second_opt.first_moment().layers[1].w_up == whole_opt.first_moment().layers[1].w_up);

    SECTION("a state of another model is refused, naming the tensor") {
        Config other = cfg;
        other.intermediate_size = 32;
        Weights p = random_weights(other, 1), om = p, ov = p;
        CHECK_THROWS_WITH(load_train_state(state, other, p, om, ov),
                          Catch::Contains("gate_proj") && Catch::Contains("another model"));
    }
    std::filesystem::remove(tokens);
    std::filesystem::remove(state);
}

// ---------------------------------------------------------------------------------------------------
// Dataset

TEST_CASE("a token file round-trips and bad files are errors naming the file and the problem", "[train][dataset]") {
    const std::string path = temp_path("tokens.bin");
    SECTION("uint16 and uint32 round trips") {
        const std::vector<int> small{0, 1, 65535, 7}, big{0, 70000, 3};
        write_token_file(path, small);
        const TokenFile a(path);
        CHECK(a.bytes_per_token() == 2);
        CHECK(std::vector<int>{a[0], a[1], a[2], a[3]} == small);
        write_token_file(path + "32", big);
        const TokenFile b(path + "32");
        CHECK(b.bytes_per_token() == 4);
        CHECK(b[1] == 70000);
        CHECK_THROWS_WITH(b.check_vocab(1000), Catch::Contains("70000") && Catch::Contains("index 1"));
        std::filesystem::remove(path + "32");
    }
    SECTION("truncated below the header") {
        std::ofstream(path, std::ios::binary) << "SDTOK";
        CHECK_THROWS_WITH(TokenFile(path),
                          Catch::Contains(path) && Catch::Contains("truncated") && Catch::Contains("5 bytes"));
    }
    SECTION("a bad magic number") {
        write_token_file(path, std::vector<int>{1, 2, 3});
        std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
        f.write("GPT2", 4);
        f.close();
        CHECK_THROWS_WITH(TokenFile(path), Catch::Contains(path) && Catch::Contains("bad magic"));
    }
    SECTION("a count beyond the end of the file") {
        write_token_file(path, std::vector<int>{1, 2, 3, 4});
        std::filesystem::resize_file(path, kTokenFileHeaderBytes + 5);
        CHECK_THROWS_WITH(TokenFile(path), Catch::Contains("truncated") && Catch::Contains("counts 4 tokens"));
    }
    SECTION("a missing file") {
        CHECK_THROWS_WITH(TokenFile(path + ".missing"), Catch::Contains("cannot open") && Catch::Contains(".missing"));
    }
    SECTION("a uint32 id of 2^31 or more cannot pass as a negative int") {
        write_token_file(path, std::vector<int>{1, 70000, 3});
        std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
        f.seekp(static_cast<std::streamoff>(kTokenFileHeaderBytes) + 4);
        const std::uint32_t huge = 0xFFFFFFFFu;  // -1 as an int: the ignore and embedding-input markers
        f.write(reinterpret_cast<const char*>(&huge), 4);
        f.close();
        CHECK_THROWS_WITH(TokenFile(path).check_vocab(4096), Catch::Contains("token 4294967295 at index 1"));
    }
    SECTION("a count whose byte size overflows 64 bits") {
        write_token_file(path, std::vector<int>{1, 70000});
        std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
        f.seekp(16);
        const std::uint64_t count = 0x8000000000000001ull;  // x 4 bytes wraps to 4
        f.write(reinterpret_cast<const char*>(&count), 8);
        f.close();
        CHECK_THROWS_WITH(TokenFile(path), Catch::Contains("counts 9223372036854775809 tokens of 4 bytes"));
    }
    std::filesystem::remove(path);
}

TEST_CASE("windows are deterministic per (seed, step) and stay inside their split", "[train][dataset]") {
    std::vector<int> tokens(1000);
    for (int i = 0; i < 1000; ++i) tokens[i] = i % 97;
    const std::string path = temp_path("windows.bin");
    write_token_file(path, tokens);
    const TokenFile file(path);
    const Split split = split_tail(file.size(), 0.1);
    CHECK(split.train.end == 900);
    CHECK(split.held_out.begin == 900);
    const WindowBatch a = random_windows(file, split.train, 8, 16, 5, 3),
                      b = random_windows(file, split.train, 8, 16, 5, 3);
    const WindowBatch c = random_windows(file, split.train, 8, 16, 5, 4);
    CHECK(a.inputs == b.inputs);
    CHECK(a.starts != c.starts);
    for (std::size_t s : a.starts) CHECK(s + 16 < split.train.end);
    for (int t = 0; t < 15; ++t) CHECK(a.targets[t] == a.inputs[t + 1]);
    const WindowBatch held = spaced_windows(file, split.held_out, 16, 4, 0, 4);
    CHECK(held.starts.front() == 900);
    CHECK(held.starts.back() == 1000 - 17);
    CHECK_THROWS_WITH(random_windows(file, TokenRange{0, 10}, 1, 16, 0, 0), Catch::Contains("T + 1 = 17"));
    std::filesystem::remove(path);
}

TEST_CASE("the teacher cache keeps the target's top-k probabilities and hidden states", "[train][dataset]") {
    const Config cfg = train_config(true, false);
    const Weights w = random_weights(cfg, 9, 0.3f);
    CpuModel target(cfg, w);
    WindowBatch windows{2, 6, token_rows(12, cfg.vocab_size, 10), token_rows(12, cfg.vocab_size, 11), {0, 0}};
    const TeacherCache cache =
        build_teacher_cache(target, windows, TeacherOptions{.top_k = 4, .hidden_layers = {cfg.num_hidden_layers}});
    REQUIRE(cache.n_windows() == 2);
    REQUIRE(cache.top_probs.size() == 2u * 6 * 4);
    for (int r = 0; r < 12; ++r) {
        double kept = 0;
        for (int e = 0; e < 4; ++e) kept += cache.top_probs[r * 4 + e];
        CHECK(kept <= 1.0 + 1e-6);
        CHECK(cache.top_probs[r * 4] >= cache.top_probs[r * 4 + 3]);
    }
    // A student with the target's weights has zero top-k KL to it, and the same final hidden states.
    ThreadPool pool(2);
    TrainableLlama student(cfg, w, pool);
    student.capture_hidden({cfg.num_hidden_layers});
    student.forward(ModelInput{.B = 2, .T = 6, .tokens = cache.inputs});
    const double kl =
        kl_divergence_topk(pool, student.dlogits().data(), student.logits().data(), cache.topk(0), 12, cfg.vocab_size);
    CHECK(std::abs(kl) < 1e-5);
    float worst = 0;
    for (std::size_t i = 0; i < cache.hidden[0].size(); ++i)
        worst = std::max(worst, std::abs(cache.hidden[0][i] - student.hidden(0)[i]));
    CHECK(worst < 1e-4f);
}

// ---------------------------------------------------------------------------------------------------
// Progress line and chart

TEST_CASE("the progress line shows step, loss, rate, elapsed time and ETA", "[train][progress]") {
    CHECK(format_progress(ProgressState{120, 2000, 3.2141, 1200.0 * 42, 42}) ==
          "step 120/2000 | loss 3.214 | 1.2k tok/s | 00:42 elapsed | ETA 10:58");
    CHECK(format_duration(3727) == "1:02:07");
    // A run resumed at step 100: the rate and ETA come from the 50 steps of this run.
    CHECK(format_progress(ProgressState{150, 200, 2.0, 50.0 * 100, 100, 100}) ==
          "step 150/200 | loss 2.000 | 50 tok/s | 01:40 elapsed | ETA 01:40");
    std::ostringstream plain;
    ProgressLine line(plain, 100, ProgressOptions{.terminal = false, .plain_every_s = 10});
    line.update_at(1, 4.0, 100, 0.5);   // first: written
    line.update_at(2, 3.9, 200, 5.0);   // within 10 s: not
    line.update_at(3, 3.8, 300, 11.0);  // written
    line.finish();                      // the last state again: once
    CHECK(plain.str() ==
          format_progress({1, 100, 4.0, 100, 0.5}) + "\n" + format_progress({3, 100, 3.8, 300, 11.0}) + "\n");
    std::ostringstream tty;
    ProgressLine redraw(tty, 10, ProgressOptions{.terminal = true});
    redraw.update_at(10, 1.0, 10, 1.0);
    redraw.finish();
    CHECK(tty.str().front() == '\r');
    CHECK(tty.str().back() == '\n');
}

TEST_CASE("the SVG chart has a line per series, escaped text and nice ticks", "[train][svg]") {
    const std::vector<Series> series{{"train <loss>", {0, 1, 2, 3}, {4.0, 3.0, 2.5, NAN}},
                                     {"held-out", {0, 3}, {4.1, 2.2}}};
    const std::string svg = svg_chart("Loss & friends", series);
    CHECK(svg.rfind("<svg", 0) == 0);
    CHECK(svg.find("</svg>") != std::string::npos);
    CHECK(svg.find("Loss &amp; friends") != std::string::npos);
    CHECK(svg.find("train &lt;loss&gt;") != std::string::npos);
    std::size_t lines = 0;
    for (std::size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++lines;
    CHECK(lines == 2);
    const auto ticks = detail::nice_ticks(2.2, 4.1);
    CHECK(ticks.step == Approx(0.5));
    CHECK(ticks.lo == Approx(2.0));
    CHECK(ticks.hi == Approx(4.5));
}

TEST_CASE("bad model inputs are errors naming the value", "[train][model]") {
    const Config cfg = train_config(true, false);
    ThreadPool pool(1);
    TrainableLlama model(cfg, random_weights(cfg, 1), pool);
    const std::vector<int> tokens{1, 2, 99, 3};
    CHECK_THROWS_WITH(model.forward(ModelInput{.B = 1, .T = 4, .tokens = tokens}),
                      Catch::Contains("token 99 at row 2"));
    const std::vector<int> ok{1, 2, 3, 4};
    const std::vector<std::uint8_t> mask(5, 1);
    CHECK_THROWS_WITH(model.forward(ModelInput{.B = 1, .T = 4, .tokens = ok, .mask = mask}),
                      Catch::Contains("mask of 5 entries"));
    const std::vector<int> soft{kEmbeddingInput, 2, 3, 4};
    CHECK_THROWS_WITH(model.forward(ModelInput{.B = 1, .T = 4, .tokens = soft}), Catch::Contains("input_embeddings"));
    CHECK_THROWS_WITH(model.capture_hidden({7}), Catch::Contains("layer 7"));
}

}  // namespace test_train
