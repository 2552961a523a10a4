// examples/course/check_ex6.cpp — the checker of exercise 6 (ex6_forward_kl.md): compiled with the student's
// file as COURSE_FILE, it grades course::forward_kl: its loss and gradient equal the library's
// kl_divergence on fixed inputs (and the gradient the finite differences of the loss), and a long-double
// reference on large logits (hundreds: the maximum must be subtracted first), and a drafter
// distilled with it from a tiny frozen target reaches the stated tau.
// SPDX-License-Identifier: MIT
#include "grading.hpp"

#include "detail/train/optimizer.hpp"
#include "detail/train/trainable_llama.hpp"

#include COURSE_FILE

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

using namespace specdec;
using namespace specdec::train;

namespace {

// Tokens per target forward (greedy, gamma 4) the distilled drafter must beat: the reference solution
// reaches 1.68, the untrained drafter 1.17 (both printed by each run).
constexpr double kTauThreshold = 1.5;

std::string num(double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", x);
    return b;
}

/// Tokens per target forward of greedy speculative decoding with `drafter` over `prompts`.
double tau(CpuModel& target, CpuModel& drafter, const std::vector<std::vector<int>>& prompts) {
    double tokens = 0, forwards = 0;
    for (const std::vector<int>& prompt : prompts) {
        ModelProposer proposer(drafter);
        Chain builder{.gamma = 4};
        TreeVerifier verifier;
        GreedyMatch acceptor;
        const Generation g =
            speculative_generate(target, proposer, builder, verifier, acceptor, prompt, GenerateOptions{.max_new_tokens = 40});
        tokens += static_cast<double>(g.tokens.size());
        forwards += g.n_target_calls();
    }
    return tokens / forwards;
}

}  // namespace

int main() {
    return course::run("exercise 6: distil a drafter with forward KL", [](course::Grade& g) {
        ThreadPool pool(1);
        // 1. Loss and gradient on fixed inputs: rows of random logits against target rows with zeros and a
        //    one-hot row; dlogits starts nonzero (the loss adds to it) and the weight is not 1.
        const int N = 5, V = 7;
        const double weight = 0.7;
        std::mt19937 rng(11);
        std::normal_distribution<float> normal(0.0f, 2.0f);
        std::vector<float> z(N * V), p(N * V), start(N * V);
        for (float& x : z) x = normal(rng);
        for (float& x : start) x = 0.1f * normal(rng);
        for (int r = 0; r < N; ++r) {
            double s = 0;
            for (int j = 0; j < V; ++j) s += p[r * V + j] = (r == 1 && j != 3) ? 0.0f : (j == r ? 0.0f : std::exp(normal(rng)));
            for (int j = 0; j < V; ++j) p[r * V + j] = static_cast<float>(p[r * V + j] / s);
        }
        std::vector<float> mine = start, want = start;
        const double loss = course::forward_kl(p, z, mine, N, V, weight);
        const double want_loss = kl_divergence(pool, want.data(), z.data(), p.data(), N, V, weight, nullptr, false);
        g.check(std::abs(loss - want_loss) <= 1e-5 * (1 + std::abs(want_loss)),
                "the loss: yours " + num(loss) + ", KL(p || q) averaged over the rows " + num(want_loss),
                "KL(p || q) = sum_j p_j (log p_j - log q_j) with q = softmax(logits), p the target's row; 0 log 0 = 0; "
                "the mean over the N rows, not weighted (weight scales the gradient only)");
        double worst = 0;
        for (int i = 0; i < N * V; ++i) worst = std::max(worst, std::abs(double(mine[i]) - want[i]));
        g.check(worst <= 1e-5, "the gradient added to dlogits equals the library's (largest difference " + num(worst) + ")",
                "d KL(p || softmax(z)) / d z_j = q_j - p_j: the softmax Jacobian folds d/dq = -p/q into q - p; "
                "add weight / N times it to dlogits (+=, other losses share the buffer)");
        // The gradient is that of your own loss: central differences of forward_kl, weight 1.
        double fd_worst = 0;
        for (int i = 0; i < N * V; i += 3) {
            std::vector<float> zp = z, zm = z, scratch(N * V, 0.0f), grad(N * V, 0.0f);
            course::forward_kl(p, z, grad, N, V, 1.0);
            const float h = 1e-2f;
            zp[i] += h, zm[i] -= h;
            const double fd = (course::forward_kl(p, zp, scratch, N, V, 1.0) - course::forward_kl(p, zm, scratch, N, V, 1.0)) /
                              (double(zp[i]) - zm[i]);
            fd_worst = std::max(fd_worst, std::abs(fd - grad[i]));
        }
        g.check(fd_worst <= 1e-3, "your gradient is the derivative of your loss (finite differences, largest gap " + num(fd_worst) + ")",
                "a loss and a gradient that disagree train something other than what the loss measures");

        // 1. (cont.) Large logits (a trained model's logits reach the hundreds): the same loss and gradient, finite, as
        //    a long-double reference that subtracts the maximum first. Rows: one logit far above the others,
        //    one far below them (with target mass on it), all in the hundreds, all far below zero.
        {
            const int NL = 5, VL = 4;
            const double wl = 0.7;
            const std::vector<float> zl{100, 0, 0, 0,  0, -120, 0, 0,  200, 199, 150, -50,  -300, -301, -299, -305,  90, 89, 0, 0};
            const std::vector<float> pl{0.25f, 0.25f, 0.25f, 0.25f,  0.25f, 0.25f, 0.25f, 0.25f,  0.1f, 0.2f, 0.3f, 0.4f,
                                        0.4f, 0.3f, 0.2f, 0.1f,  0.0f, 0.5f, 0.5f, 0.0f};
            long double ref_loss = 0;
            std::vector<long double> ref_grad(NL * VL);
            for (int r = 0; r < NL; ++r) {
                long double mx = zl[r * VL], sum = 0;
                for (int j = 1; j < VL; ++j) mx = std::max<long double>(mx, zl[r * VL + j]);
                for (int j = 0; j < VL; ++j) sum += std::exp(static_cast<long double>(zl[r * VL + j]) - mx);
                const long double lse = mx + std::log(sum);
                for (int j = 0; j < VL; ++j) {
                    const long double pj = pl[r * VL + j], logq = zl[r * VL + j] - lse;
                    if (pj > 0) ref_loss += pj * (std::log(pj) - logq);
                    ref_grad[r * VL + j] = wl / NL * (std::exp(logq) - pj);
                }
            }
            ref_loss /= NL;
            std::vector<float> gl(NL * VL, 0.0f);
            const double ll = course::forward_kl(pl, zl, gl, NL, VL, wl);
            double gworst = 0;
            bool finite = std::isfinite(ll);
            for (int i = 0; i < NL * VL; ++i) {
                finite = finite && std::isfinite(gl[i]);
                gworst = std::max(gworst, static_cast<double>(std::abs(static_cast<long double>(gl[i]) - ref_grad[i])));
            }
            const bool ok = finite && std::abs(ll - static_cast<double>(ref_loss)) <= 1e-6 * (1 + std::abs(static_cast<double>(ref_loss))) &&
                            gworst <= 1e-6;
            g.check(ok, "large logits (rows such as [100 0 0 0] and [0 -120 0 0] against a uniform target, and logits of -300 and +200): "
                        "your loss " + num(ll) + ", the exact " + num(static_cast<double>(ref_loss)) +
                        "; the gradient's largest difference " + (finite ? num(gworst) : std::string("not finite")),
                    "log q_j = z_j - log sum_k exp z_k with the maximum subtracted first: z_j - m - log sum_k exp(z_k - m); "
                    "exp of a logit above ~88 overflows a float, and the log of a float softmax of a logit 120 below the "
                    "maximum is log 0 = -inf");
        }

        // 2. Distillation: a 1-layer drafter learns a 2-layer frozen target's next-token law with your loss
        //    over the target's own sampled text (400 AdamW steps of 8 x 24 tokens, one thread, under a second
        //    in Release); tau (greedy, gamma 4) must beat kTauThreshold.
        const Config tcfg{.hidden_size = 32, .intermediate_size = 64, .num_hidden_layers = 2, .num_attention_heads = 4,
                          .num_key_value_heads = 2, .vocab_size = 16, .max_position_embeddings = 64};
        Config dcfg = tcfg;
        dcfg.num_hidden_layers = 1;
        const Weights target_weights = random_weights(tcfg, 2024, 0.3f);
        CpuModel target(tcfg, target_weights);
        TrainableLlama teacher(tcfg, target_weights, pool);
        const int B = 8, T = 24, steps = 400, n_seq = 256;
        std::vector<int> corpus;  // (n_seq, T): random 3-token prompts and the target's own text, sampled at temperature 1
        std::mt19937 corpus_rng(3);
        for (int s = 0; s < n_seq; ++s) {
            std::vector<int> prompt(3);
            for (int& x : prompt) x = static_cast<int>(corpus_rng() % tcfg.vocab_size);
            const Generation gen = autoregressive_generate(
                target, prompt, GenerateOptions{.max_new_tokens = T - 3, .sampling = {.temperature = 1.0f}, .seed = 100u + s});
            corpus.insert(corpus.end(), prompt.begin(), prompt.end());
            corpus.insert(corpus.end(), gen.tokens.begin(), gen.tokens.end());
            corpus.resize(static_cast<std::size_t>(s + 1) * T, 0);
        }
        const std::vector<std::vector<int>> prompts{{1, 4, 2}, {3, 0}, {7}, {12, 9, 5, 5}};
        TrainableLlama drafter(dcfg, random_weights(dcfg, 5, 0.02f), pool);
        {
            CpuModel untrained(dcfg, drafter.params());
            std::cout << "  tau of the untrained drafter: " << tau(target, untrained, prompts) << "\n";
        }
        AdamW optimizer(dcfg, drafter.params(), AdamWOptions{.weight_decay = 0.0f});
        const CosineSchedule schedule{.max_lr = 1e-2f, .min_lr = 1e-3f, .warmup_steps = 10, .total_steps = steps};
        std::vector<float> teacher_probs;
        double first = 0, last = 0;
        for (int step = 0; step < steps; ++step) {
            const std::span<const int> batch(corpus.data() + static_cast<std::size_t>(step * B % n_seq) * T,
                                             static_cast<std::size_t>(B) * T);
            teacher.forward(ModelInput{.B = B, .T = T, .tokens = batch});
            teacher_probs.resize(teacher.logits().size());
            softmax_rows(pool, teacher_probs.data(), teacher.logits().data(), B * T, dcfg.vocab_size);
            drafter.zero_grad();
            drafter.forward(ModelInput{.B = B, .T = T, .tokens = batch});
            const double l = course::forward_kl(teacher_probs, drafter.logits(), drafter.dlogits(), B * T, dcfg.vocab_size);
            drafter.backward();
            clip_grad_norm(pool, drafter.grads(), dcfg, 1.0);
            optimizer.step(pool, drafter.params(), drafter.grads(), schedule.at(step));
            (step == 0 ? first : last) = l;
        }
        std::cout << "  your loss over training: " << first << " -> " << last << "\n";
        CpuModel trained(dcfg, drafter.params());
        const double t = tau(target, trained, prompts);
        g.check(t > kTauThreshold, "the distilled drafter's tau " + num(t) + " > " + num(kTauThreshold) + " (greedy, gamma 4)",
                "the drafter learns from your gradient: a wrong sign or scale trains it away from the target");
    });
}
