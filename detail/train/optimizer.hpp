// specdec/detail/train/optimizer.hpp — AdamW, a warm-up + cosine learning-rate schedule, global-norm clipping.
// SPDX-License-Identifier: MIT
#pragma once

// Gradient accumulation needs nothing here: TrainableLlama::backward adds into its gradients, so run
// forward/backward on several micro-batches (each loss weighted by its share of the batch), then one
// clip_grad_norm and one AdamW::step, then zero_grad.
//
// Determinism: every update is element-wise and every reduction (the global norm) runs in a fixed
// order, so a fixed seed and thread count give bit-identical parameters.

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "../model/config.hpp"
#include "../core/error.hpp"
#include "../model/thread_pool.hpp"
#include "layers.hpp"
#include "../model/weights.hpp"

namespace specdec::detail {

/// Every tensor of `tensors` cut into runs of at most 64Ki floats, in checkpoint order: the units
/// that clipping and its norm spread over a pool. The norm sums each run, then the runs in order, so
/// it has the same bits on any number of threads.
template <class Tensors, class Cfg>
std::vector<std::span<float>> tensor_runs(Tensors& tensors, const Cfg& cfg) {
    constexpr std::size_t kRun = 1 << 16;
    std::vector<std::span<float>> runs;
    for_each_tensor(tensors, cfg, [&](const std::string&, auto& t, const auto&) {
        for (std::size_t at = 0; at < t.size(); at += kRun)
            runs.emplace_back(const_cast<float*>(t.data()) + at, std::min(kRun, t.size() - at));
    });
    return runs;
}

}  // namespace specdec::detail

namespace specdec::train {

// ---------------------------------------------------------------------------------------------------
// Learning-rate schedule

/// Linear warm-up to max_lr over warmup_steps, then cosine decay to min_lr at total_steps, constant
/// after (llm.c's train_gpt2 and nanoGPT's get_lr). Steps count from 0; step 0 already has a
/// non-zero rate (max_lr / warmup_steps) so the first update is not wasted.
struct CosineSchedule {
    float max_lr = 3e-4f;
    float min_lr = 3e-5f;
    int warmup_steps = 100;
    int total_steps = 1000;

    float at(int step) const {
        if (step < warmup_steps) return max_lr * static_cast<float>(step + 1) / static_cast<float>(warmup_steps);
        if (step >= total_steps) return min_lr;
        const double progress = double(step - warmup_steps) / std::max(1, total_steps - warmup_steps);
        const double cosine = 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
        return static_cast<float>(min_lr + cosine * (max_lr - min_lr));
    }
};

// ---------------------------------------------------------------------------------------------------
// Gradient clipping

// Clipping and AdamW work on any tensor set that has a for_each_tensor(tensors, config, f) calling
// f(name, std::vector<float>&, shape-or-size) in checkpoint order: a Llama's Weights with its Config,
// a GLIDE drafter's GlideWeights with its GlideConfig.

/// √(Σ g²) over every gradient tensor, in double: each run of 64Ki floats summed, then the runs in
/// checkpoint order (the same bits on any number of threads).
template <class Tensors, class Cfg>
double grad_norm(ThreadPool& pool, const Tensors& grads, const Cfg& cfg) {
    const std::vector<std::span<float>> runs = detail::tensor_runs(grads, cfg);
    std::vector<double> sums(runs.size());
    pool.parallel_for(static_cast<int>(runs.size()), [&](int r) {
        sums[r] = detail::sum_squares(runs[r].data(), static_cast<int>(runs[r].size()));
    });
    double ss = 0.0;
    for (double v : sums) ss += v;
    return std::sqrt(ss);
}

template <class Tensors, class Cfg>
double grad_norm(const Tensors& grads, const Cfg& cfg) {
    ThreadPool calling_thread(1);
    return grad_norm(calling_thread, grads, cfg);
}

/// Scales all gradients by max_norm / norm when the global norm exceeds max_norm (PyTorch's
/// clip_grad_norm_). Returns the norm before clipping, the number worth logging.
template <class Tensors, class Cfg>
double clip_grad_norm(ThreadPool& pool, Tensors& grads, const Cfg& cfg, double max_norm) {
    detail::require(max_norm > 0, "train",
                    [&] { return "clip_grad_norm: max_norm must be > 0, got " + std::to_string(max_norm); });
    const double norm = grad_norm(pool, grads, cfg);
    if (norm > max_norm) {
        const float scale = static_cast<float>(max_norm / (norm + 1e-6));
        const std::vector<std::span<float>> runs = detail::tensor_runs(grads, cfg);
        pool.parallel_for(static_cast<int>(runs.size()), [&](int r) {
            for (float& v : runs[r]) v *= scale;
        });
    }
    return norm;
}

template <class Tensors, class Cfg>
double clip_grad_norm(Tensors& grads, const Cfg& cfg, double max_norm) {
    ThreadPool calling_thread(1);
    return clip_grad_norm(calling_thread, grads, cfg, max_norm);
}

// ---------------------------------------------------------------------------------------------------
// AdamW

struct AdamWOptions {
    float beta1 = 0.9f;
    float beta2 = 0.95f;         // llm.c / nanoGPT for transformers (PyTorch's default is 0.999)
    float eps = 1e-8f;
    float weight_decay = 0.1f;   // decoupled: applied to matrices and embeddings only (see AdamW)
    std::vector<std::string> frozen{};  // HF tensor names left untouched (EAGLE keeps the target's head)
};

/// AdamW (Loshchilov & Hutter, "Decoupled weight decay regularization"), PyTorch's update order:
///   p ← p − lr·wd·p;  m ← β1 m + (1−β1) g;  v ← β2 v + (1−β2) g²;  p ← p − lr · m̂ / (√v̂ + eps)
/// with m̂ = m / (1−β1ᵗ), v̂ = v / (1−β2ᵗ). Weight decay skips the RMSNorm weights (every 1-D tensor),
/// as nanoGPT's configure_optimizers does: they scale activations and have no size to shrink towards
/// zero; decaying them towards 0 would fight the normalisation.
template <class Cfg = Config, class Tensors = Weights>
class AdamW {
public:
    AdamW(const Cfg& cfg, const Tensors& params, AdamWOptions options = {}) : cfg_(cfg), opt_(std::move(options)) {
        m_ = params;
        for_each_tensor(m_, cfg_, [](const std::string&, std::vector<float>& t, const auto&) {
            std::fill(t.begin(), t.end(), 0.0f);
        });
        v_ = m_;
        for (const std::string& name : opt_.frozen) {
            bool found = false;
            for_each_tensor(params, cfg_,
                            [&](const std::string& n, const std::vector<float>&, const auto&) { found |= n == name; });
            detail::require(found, "train",
                            [&] { return "AdamW: frozen tensor '" + name + "' is not a tensor of this model"; });
        }
    }

    /// One update of every parameter that is not frozen, with learning rate lr. Steps taken so far: t().
    void step(ThreadPool& pool, Tensors& params, const Tensors& grads, float lr) {
        ++t_;
        const float bias1 = 1.0f - std::pow(opt_.beta1, static_cast<float>(t_));
        const float bias2 = 1.0f - std::pow(opt_.beta2, static_cast<float>(t_));
        std::vector<Slot> slots;
        collect(params, grads, slots);
        for (const Slot& s : slots) {
            const float decay = s.decays ? lr * opt_.weight_decay : 0.0f;
            detail::parallel_rows(pool, static_cast<int>((s.n + 1023) / 1024), [&](int c0, int c1) {
                const std::size_t i0 = static_cast<std::size_t>(c0) * 1024;
                const std::size_t i1 = std::min(s.n, static_cast<std::size_t>(c1) * 1024);
#if defined(__x86_64__)
                if (detail::train_kernels_available())
                    return detail::adamw_avx512(s.p + i0, s.g + i0, s.m + i0, s.v + i0, i1 - i0,
                                                {opt_.beta1, opt_.beta2, opt_.eps, lr, decay, bias1, bias2});
#endif
                for (std::size_t i = i0; i < i1; ++i) {
                    const float g = s.g[i];
                    s.m[i] = opt_.beta1 * s.m[i] + (1.0f - opt_.beta1) * g;
                    s.v[i] = opt_.beta2 * s.v[i] + (1.0f - opt_.beta2) * g * g;
                    const float m_hat = s.m[i] / bias1, v_hat = s.v[i] / bias2;
                    s.p[i] -= decay * s.p[i];
                    s.p[i] -= lr * m_hat / (std::sqrt(v_hat) + opt_.eps);
                }
            });
        }
    }

    int t() const { return t_; }
    const AdamWOptions& options() const { return opt_; }

    /// The first and second moments, shaped like the parameters: with them, the parameters and t(),
    /// a run saved between steps continues bit for bit (io/train_state.hpp).
    const Tensors& first_moment() const { return m_; }
    const Tensors& second_moment() const { return v_; }

    /// Continues from a saved state: moments shaped like the parameters, `t` steps taken.
    void restore(Tensors m, Tensors v, int t) {
        const auto sizes = [&](const Tensors& set) {
            std::vector<std::size_t> n;
            for_each_tensor(set, cfg_, [&](const std::string&, const std::vector<float>& x, const auto&) { n.push_back(x.size()); });
            return n;
        };
        detail::require(sizes(m) == sizes(m_) && sizes(v) == sizes(v_) && t >= 0, "train", [&] {
            return "AdamW::restore: moments not shaped like this optimizer's parameters, or t = " + std::to_string(t) + " < 0";
        });
        m_ = std::move(m), v_ = std::move(v), t_ = t;
    }

private:
    struct Slot {
        float* p;
        const float* g;
        float* m;
        float* v;
        std::size_t n;
        bool decays;
    };

    void collect(Tensors& params, const Tensors& grads, std::vector<Slot>& slots) {
        std::vector<float*> ps, ms, vs;
        std::vector<const float*> gs;
        std::vector<std::string> names;
        std::vector<std::size_t> sizes;
        for_each_tensor(params, cfg_, [&](const std::string& name, std::vector<float>& t, const auto&) {
            ps.push_back(t.data()), names.push_back(name), sizes.push_back(t.size());
        });
        for_each_tensor(grads, cfg_, [&](const std::string& name, const std::vector<float>& t, const auto&) {
            detail::require(gs.size() < sizes.size() && t.size() == sizes[gs.size()], "train", [&] {
                return "AdamW: gradient '" + name + "' is not shaped like its parameter";
            });
            gs.push_back(t.data());
        });
        for_each_tensor(m_, cfg_, [&](const std::string&, std::vector<float>& t, const auto&) { ms.push_back(t.data()); });
        for_each_tensor(v_, cfg_, [&](const std::string&, std::vector<float>& t, const auto&) { vs.push_back(t.data()); });
        for (std::size_t i = 0; i < ps.size(); ++i) {
            if (std::find(opt_.frozen.begin(), opt_.frozen.end(), names[i]) != opt_.frozen.end()) continue;
            const bool is_norm = names[i].find("norm") != std::string::npos;
            slots.push_back({ps[i], gs[i], ms[i], vs[i], sizes[i], !is_norm});
        }
    }

    Cfg cfg_;
    AdamWOptions opt_;
    Tensors m_, v_;  // first and second moments, shaped like the parameters
    int t_ = 0;
};

}  // namespace specdec::train
