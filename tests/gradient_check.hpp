// tests/gradient_check.hpp — finite-difference checks of a TrainableLlama's gradients, for every drafter that trains on it.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "catch.hpp"
#include "detail/model/weights.hpp"
#include "detail/train/trainable_llama.hpp"

namespace test {

inline std::vector<double> randn(std::size_t n, std::uint64_t seed, double scale = 1.0) {
    specdec::detail::NormalStream normal{seed};
    std::vector<double> v(n);
    for (double& x : v) x = scale * normal.next();
    return v;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

/// For each tensor of `params` (walked by for_each_tensor with `cfg`: a Weights, a connector, ...), the
/// derivative of `loss` along a random unit direction in that tensor, by finite differences, against
/// the projection of `grads` (the analytic gradient, shaped like params) on the same direction.
template <class Tensors, class Cfg, class Loss>
void check_tensor_gradient(Tensors& params, const Tensors& grads, const Cfg& cfg, Loss&& loss, double tol = 0.02,
                           std::uint64_t seed = 100) {
    std::vector<const std::vector<float>*> grad_tensors;
    for_each_tensor(grads, cfg, [&](const std::string&, const std::vector<float>& g, std::size_t) { grad_tensors.push_back(&g); });
    std::size_t index = 0;
    for_each_tensor(params, cfg, [&](const std::string& name, std::vector<float>& p, std::size_t n) {
        const std::vector<double> u = randn(n, seed + index);
        const double norm = std::sqrt(dot(u, u));
        const std::vector<float>& g = *grad_tensors[index++];
        double analytic = 0;
        for (std::size_t i = 0; i < n; ++i) analytic += g[i] * u[i] / norm;
        const std::vector<float> saved = p;
        const double h = 1e-2;
        for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<float>(saved[i] + h * u[i] / norm);
        const double plus = loss(false);
        for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<float>(saved[i] - h * u[i] / norm);
        const double minus = loss(false);
        p = saved;
        const double fd = (plus - minus) / (2 * h);
        INFO(name << ": finite difference " << fd << ", backward " << analytic);
        CHECK(std::abs(fd - analytic) <= tol * std::max(std::abs(fd), 1e-2));
    });
}

/// check_tensor_gradient over every parameter of a TrainableLlama.
template <class Loss>
void check_model_gradient(specdec::train::TrainableLlama& model, const specdec::Config& cfg, Loss&& loss, double tol = 0.02) {
    model.zero_grad();
    loss(/*with_backward=*/true);
    const specdec::Weights grads = model.grads();
    check_tensor_gradient(model.params(), grads, cfg, loss, tol);
}

}  // namespace test
