// The fast path of training against the plain loops: the three products of gemm.hpp, each layer's
// float kernels (kernels.hpp, through layers.hpp's `fast`), and the whole model's logits and
// gradients. Tolerances are stated per check: float summation in another order moves a sum of k
// products of unit-size numbers by ~√k ulp, so products are held to 1e-5 relative to √k, and the
// layers, whose exp differs from libm's by a few ulp, to 1e-5 (2e-5 where two exps meet).
#include <cmath>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"
#include "detail/train/gemm.hpp"
#include "detail/train/layers.hpp"
#include "detail/train/trainable_llama.hpp"

namespace test_kernels {  // a unity build compiles several test files as one

using namespace specdec;
using namespace specdec::train;

namespace {

std::vector<float> randn(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
    detail::NormalStream normal{seed};
    std::vector<float> v(n);
    for (float& x : v) x = scale * normal.next();
    return v;
}

/// max |a - b| / max(1, |b|).
double worst_relative(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
        worst = std::max(worst, std::abs(double(a[i]) - b[i]) / std::max(1.0, std::abs(double(b[i]))));
    return worst;
}

}  // namespace

TEST_CASE("gemm computes the three products of a linear layer as the plain loops do", "[train][gemm]") {
    ThreadPool pool(2);
    const auto op = GENERATE(detail::GemmOp::kNT, detail::GemmOp::kNN, detail::GemmOp::kTN);
    const bool accumulate = GENERATE(false, true);
    // Ragged everywhere: rows not a multiple of the 6-row tile, columns of the 64-wide panel, k of the
    // 256-step block (and more than one block), down to single rows, columns and k steps.
    const int n = GENERATE(1, 7, 13, 200), k = GENERATE(1, 37, 300, 530), m = GENERATE(1, 45, 64, 131);
    CAPTURE(static_cast<int>(op), accumulate, n, k, m);
    const std::vector<float> A = randn(static_cast<std::size_t>(n) * k, 1), B = randn(static_cast<std::size_t>(k) * m, 2);
    std::vector<float> C = randn(static_cast<std::size_t>(n) * m, 3), expected = C;
    std::vector<float> via_matmul = C;  // the path of CPUs without AVX-512
    detail::gemm(pool, op, C.data(), A.data(), B.data(), n, k, m, accumulate);
    detail::gemm_via_matmul(pool, op, via_matmul.data(), A.data(), B.data(), n, k, m, accumulate);
    detail::gemm_reference(op, expected.data(), A.data(), B.data(), n, k, m, accumulate);
    CHECK(worst_relative(C, expected) < 1e-5 * std::sqrt(double(k)));
    CHECK(worst_relative(via_matmul, expected) < 1e-5 * std::sqrt(double(k)));
}

TEST_CASE("gemm gives the same bits on one thread and on three", "[train][gemm]") {
    ThreadPool one(1), three(3);
    const int n = 200, k = 530, m = 131;
    const std::vector<float> A = randn(static_cast<std::size_t>(n) * k, 4), B = randn(static_cast<std::size_t>(k) * m, 5);
    for (const auto op : {detail::GemmOp::kNT, detail::GemmOp::kNN, detail::GemmOp::kTN}) {
        std::vector<float> a = randn(static_cast<std::size_t>(n) * m, 6), b = a;
        detail::gemm(one, op, a.data(), A.data(), B.data(), n, k, m, true);
        detail::gemm(three, op, b.data(), A.data(), B.data(), n, k, m, true);
        CHECK(a == b);
    }
}

TEST_CASE("each layer's fast float path matches its plain loops", "[train][layers]") {
    ThreadPool pool(2);
    const int N = 37, D = GENERATE(16, 45);  // 45: a row that ends in a partial vector
    CAPTURE(D);
    const std::vector<float> x = randn(N * D, 10), w = randn(D, 11), g = randn(N * D, 12);

    SECTION("rmsnorm forward and backward") {
        std::vector<float> out(N * D), rstd(N), out_ref(N * D), rstd_ref(N);
        rmsnorm_forward(pool, out.data(), rstd.data(), x.data(), w.data(), N, D, 1e-5f, true);
        rmsnorm_forward(pool, out_ref.data(), rstd_ref.data(), x.data(), w.data(), N, D, 1e-5f, false);
        CHECK(worst_relative(out, out_ref) < 1e-5);
        CHECK(worst_relative(rstd, rstd_ref) < 1e-5);
        std::vector<float> dx(N * D, 0.5f), dw(D, 0.25f), dx_ref = dx, dw_ref = dw;  // backward adds
        rmsnorm_backward(pool, dx.data(), dw.data(), g.data(), x.data(), w.data(), rstd.data(), N, D, true);
        rmsnorm_backward(pool, dx_ref.data(), dw_ref.data(), g.data(), x.data(), w.data(), rstd.data(), N, D, false);
        CHECK(worst_relative(dx, dx_ref) < 1e-5);
        CHECK(worst_relative(dw, dw_ref) < 1e-5);
    }
    SECTION("swiglu forward and backward, including gates past exp's range") {
        std::vector<float> gate = randn(N * D, 13, 3.0f);
        gate[0] = -100.0f, gate[1] = 100.0f;
        const std::vector<float> up = randn(N * D, 14);
        std::vector<float> out(N * D), out_ref(N * D);
        swiglu_forward(pool, out.data(), gate.data(), up.data(), N, D, true);
        swiglu_forward(pool, out_ref.data(), gate.data(), up.data(), N, D, false);
        CHECK(worst_relative(out, out_ref) < 1e-5);
        std::vector<float> dg(N * D, 0.5f), du(N * D, 0.25f), dg_ref = dg, du_ref = du;
        swiglu_backward(pool, dg.data(), du.data(), g.data(), gate.data(), up.data(), N, D, true);
        swiglu_backward(pool, dg_ref.data(), du_ref.data(), g.data(), gate.data(), up.data(), N, D, false);
        CHECK(worst_relative(dg, dg_ref) < 2e-5);
        CHECK(worst_relative(du, du_ref) < 2e-5);
    }
    SECTION("cross-entropy value and gradient, with an ignored row") {
        const std::vector<float> z = randn(N * D, 15, 4.0f);
        std::vector<int> targets(N);
        for (int r = 0; r < N; ++r) targets[r] = (r * 7) % D;
        targets[3] = kIgnoreIndex;
        std::vector<float> dz(N * D, 0.5f), dz_ref = dz;
        const double loss = cross_entropy(pool, dz.data(), z.data(), targets.data(), N, D, 0.7, true);
        const double loss_ref = cross_entropy(pool, dz_ref.data(), z.data(), targets.data(), N, D, 0.7, false);
        CHECK_THAT(loss, Catch::Matchers::WithinRel(loss_ref, 1e-6));
        CHECK(worst_relative(dz, dz_ref) < 1e-6);
    }
    SECTION("softmax rows, and the losses against a full target distribution, with a masked row") {
        const std::vector<float> z = randn(N * D, 16, 4.0f), teacher = randn(N * D, 17, 4.0f);
        std::vector<float> p(N * D), p_ref(N * D);
        softmax_rows(pool, p.data(), teacher.data(), N, D, true);
        softmax_rows(pool, p_ref.data(), teacher.data(), N, D, false);
        CHECK(worst_relative(p, p_ref) < 1e-6);
        p_ref[5] = 0.0f;  // a target probability of exactly 0: no log term
        std::vector<std::uint8_t> rows(N, 1);
        rows[2] = 0;
        for (const bool entropy : {false, true}) {
            std::vector<float> dz(N * D, 0.5f), dz_ref = dz;
            const auto loss = [&](std::vector<float>& d, bool fast) {
                return entropy ? kl_divergence(pool, d.data(), z.data(), p_ref.data(), N, D, 0.7, rows.data(), fast)
                               : soft_cross_entropy(pool, d.data(), z.data(), p_ref.data(), N, D, 0.7, rows.data(), fast);
            };
            const double fast = loss(dz, true), plain = loss(dz_ref, false);
            CAPTURE(entropy);
            CHECK_THAT(fast, Catch::Matchers::WithinAbs(plain, 1e-5 * std::max(1.0, std::abs(plain))));
            CHECK(worst_relative(dz, dz_ref) < 1e-6);
        }
    }
}

namespace {

/// attention_forward and _backward, fast against plain, on the same inputs.
void compare_attention(AttentionShape s, const std::vector<std::uint8_t>& mask, bool per_sequence) {
    ThreadPool pool(2);
    const std::size_t nq = static_cast<std::size_t>(s.B) * s.Tq * s.H * s.hd;
    const std::size_t nk = static_cast<std::size_t>(s.B) * s.Tk * s.Hkv * s.hd;
    const std::size_t np = static_cast<std::size_t>(s.B) * s.H * s.Tq * s.Tk;
    const std::vector<float> q = randn(nq, 20), k = randn(nk, 21), v = randn(nk, 22), dout = randn(nq, 23);
    const AttentionMask m{mask.data(), per_sequence};
    std::vector<float> out(nq), probs(np), out_ref(nq), probs_ref(np);
    attention_forward(pool, out.data(), probs.data(), q.data(), k.data(), v.data(), s, m, true);
    attention_forward(pool, out_ref.data(), probs_ref.data(), q.data(), k.data(), v.data(), s, m, false);
    CHECK(worst_relative(out, out_ref) < 1e-5);
    CHECK(worst_relative(probs, probs_ref) < 1e-5);
    for (std::size_t i = 0; i < np; ++i)
        if (probs_ref[i] == 0.0f) REQUIRE(probs[i] == 0.0f);  // masked stays exactly 0
    std::vector<float> dq(nq, 0.5f), dk(nk, 0.25f), dv(nk, -0.5f), dq_ref = dq, dk_ref = dk, dv_ref = dv;
    attention_backward(pool, dq.data(), dk.data(), dv.data(), dout.data(), probs_ref.data(), q.data(), k.data(),
                       v.data(), s, true);
    attention_backward(pool, dq_ref.data(), dk_ref.data(), dv_ref.data(), dout.data(), probs_ref.data(), q.data(),
                       k.data(), v.data(), s, false);
    CHECK(worst_relative(dq, dq_ref) < 1e-5);
    CHECK(worst_relative(dk, dk_ref) < 1e-5);
    CHECK(worst_relative(dv, dv_ref) < 1e-5);
}

}  // namespace

TEST_CASE("attention's fast float path matches its plain loops", "[train][layers][attention]") {
    const int hd = GENERATE(16, 24, 32, 40, 64, 128);  // 24, 40: the last vector masked
    CAPTURE(hd);
    SECTION("causal, grouped-query heads, rows not a multiple of 16") {
        compare_attention({.B = 2, .Tq = 37, .Tk = 37, .H = 4, .Hkv = 2, .hd = hd}, causal_mask(37, 37), false);
    }
    SECTION("a random mask per sequence, including a row that sees nothing") {
        const int T = 21;
        std::vector<std::uint8_t> mask(2 * T * T);
        StepRng rng{7, 0, RngStream::kUser};
        for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = rng.uniform(static_cast<std::uint32_t>(i)) < 0.5f;
        std::fill_n(mask.begin() + 3 * T, T, std::uint8_t{0});  // sequence 0, query 3: no key visible
        compare_attention({.B = 2, .Tq = T, .Tk = T, .H = 2, .Hkv = 1, .hd = hd}, mask, true);
    }
    SECTION("more key rows than queries (GLIDE's cross-attention on a target's rows)") {
        compare_attention({.B = 1, .Tq = 9, .Tk = 40, .H = 4, .Hkv = 4, .hd = hd}, causal_mask(9, 40), false);
    }
}

TEST_CASE("rope by the table turns back exactly with its inverse", "[train][layers]") {
    ThreadPool pool(2);
    const int N = 5, heads = 3, hd = 32;
    const std::vector<int> positions{0, 1, 7, 100, 511};
    const RopeTable table = rope_table(positions, hd, 10000.0f);
    const std::vector<float> x = randn(N * heads * hd, 30);
    std::vector<float> fast = x, plain = x;
    rope_forward(pool, fast.data(), table, N, heads, hd, true);
    rope_forward(pool, plain.data(), table, N, heads, hd, false);
    CHECK(worst_relative(fast, plain) < 1e-6);
    rope_backward(pool, fast.data(), table, N, heads, hd, true);
    CHECK(worst_relative(fast, x) < 1e-5);
}

// ---------------------------------------------------------------------------------------------------
// The whole model

namespace {

/// Head size 16: one whole vector per head in the attention kernels.
Config fast_path_config(bool tied) {
    Config c = test::tiny_config(true, /*vocab=*/67);
    c.hidden_size = 32;
    c.intermediate_size = 40;
    c.num_attention_heads = 2;
    c.num_key_value_heads = 1;
    c.tie_word_embeddings = tied;
    return c;
}

}  // namespace

TEST_CASE("the fast model's logits, loss and gradients match the reference model's", "[train][model]") {
    const bool tied = GENERATE(false, true);
    CAPTURE(tied);
    const Config cfg = fast_path_config(tied);
    const Weights w = random_weights(cfg, 3, 0.3f);
    ThreadPool pool(2);
    TrainableLlama fast(cfg, w, pool), reference(cfg, w, pool, TrainOptions{.reference = true});
    const int B = 3, T = 19;
    std::vector<int> tokens(B * T), targets(B * T);
    for (int i = 0; i < B * T; ++i) tokens[i] = (i * 13) % cfg.vocab_size, targets[i] = (i * 29 + 5) % cfg.vocab_size;
    double losses[2];
    int i = 0;
    for (TrainableLlama* model : {&fast, &reference}) {
        model->forward(ModelInput{.B = B, .T = T, .tokens = tokens});
        losses[i++] = model->cross_entropy(targets);
        model->backward();
    }
    CHECK_THAT(losses[0], Catch::Matchers::WithinRel(losses[1], 1e-5));
    const std::vector<float> lf(fast.logits().begin(), fast.logits().end()), lr(reference.logits().begin(), reference.logits().end());
    CHECK(worst_relative(lf, lr) < 1e-4);
    std::vector<const std::vector<float>*> ref_grads;
    for_each_tensor(reference.grads(), cfg, [&](const std::string&, const std::vector<float>& t, std::size_t) { ref_grads.push_back(&t); });
    std::size_t t = 0;
    for_each_tensor(fast.grads(), cfg, [&](const std::string& name, const std::vector<float>& g, std::size_t) {
        // Relative to the tensor's largest gradient: elements near 0 carry the others' rounding.
        const std::vector<float>& r = *ref_grads[t++];
        float worst = 0, scale = 0;
        for (std::size_t j = 0; j < g.size(); ++j) worst = std::max(worst, std::abs(g[j] - r[j])), scale = std::max(scale, std::abs(r[j]));
        INFO(name << ": worst " << worst << " of " << scale);
        CHECK(worst <= 1e-4f * scale);
    });
}

TEST_CASE("a fast training step gives the same bits on one thread and on two", "[train][determinism]") {
    const Config cfg = fast_path_config(true);
    ThreadPool one(1), two(2);
    TrainableLlama a(cfg, random_weights(cfg, 4, 0.3f), one), b(cfg, random_weights(cfg, 4, 0.3f), two);
    const int B = 2, T = 40;
    std::vector<int> tokens(B * T), targets(B * T);
    for (int i = 0; i < B * T; ++i) tokens[i] = (i * 11) % cfg.vocab_size, targets[i] = (i * 3 + 1) % cfg.vocab_size;
    for (TrainableLlama* model : {&a, &b}) {
        model->forward(ModelInput{.B = B, .T = T, .tokens = tokens});
        model->cross_entropy(targets);
        model->backward();
    }
    CHECK(std::vector<float>(a.logits().begin(), a.logits().end()) == std::vector<float>(b.logits().begin(), b.logits().end()));
    CHECK(a.grads().embed == b.grads().embed);
    CHECK(a.grads().layers[1].wq == b.grads().layers[1].wq);
    CHECK(a.grads().layers[0].attn_norm == b.grads().layers[0].attn_norm);
}

}  // namespace test_kernels
