// Helpers the CUDA test files share: random values, bf16 rounding, the normalised error every
// comparison with the CPU reference uses, random trees, and the greedy-equality check.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"
#include "specdec.hpp"

namespace specdec::cuda_test {

/// A whole model against CpuModel holding the same bf16-rounded matrices: the GPU also rounds every
/// GEMM input and the KV cache to bf16, compounding over the layers.
inline constexpr float kModel = 3e-2f;

inline std::vector<float> normal(std::size_t n, std::uint64_t seed, float std_dev = 1.0f) {
    detail::NormalStream s{seed};
    std::vector<float> v(n);
    for (float& x : v) x = std_dev * s.next();
    return v;
}

inline std::vector<bf16> narrow(std::span<const float> v) {
    std::vector<bf16> out(v.size());
    std::transform(v.begin(), v.end(), out.begin(), to_bf16);
    return out;
}

inline std::vector<float> widen(std::span<const bf16> v) {
    std::vector<float> out(v.size());
    std::transform(v.begin(), v.end(), out.begin(), [](bf16 b) { return to_float(b); });
    return out;
}

/// The float32 values a bf16 store of `v` keeps.
inline std::vector<float> rounded(std::span<const float> v) { return widen(narrow(v)); }

/// max |got - want| / max |want|.
inline float normalized_error(std::span<const float> got, std::span<const float> want) {
    REQUIRE(got.size() == want.size());
    float diff = 0.0f, scale = 1e-30f;
    for (std::size_t i = 0; i < got.size(); ++i) {
        diff = std::max(diff, std::abs(got[i] - want[i]));
        scale = std::max(scale, std::abs(want[i]));
    }
    return diff / scale;
}

/// A random tree of n nodes below one root (parents drawn uniformly among earlier nodes).
inline Tree random_tree(int n, int vocab, std::uint64_t seed) {
    Tree t;
    StepRng rng{seed, 0, RngStream::kUser};
    t.add_root(static_cast<int>(rng.uniform(0, 0) * vocab));
    for (int i = 1; i < n; ++i) t.add(static_cast<int>(rng.uniform(i, 1) * vocab), static_cast<int>(rng.uniform(i, 0) * i));
    return t;
}

/// `w` with every matrix rounded to bf16 and the norms kept: what CudaModel computes with.
inline Weights bf16_matrices(const Config& c, Weights w) {
    for_each_tensor(w, c, [](const std::string& name, std::vector<float>& t, std::size_t) {
        if (name.find("norm") == std::string::npos) t = rounded(t);
    });
    return w;
}

inline std::vector<float> copy_rows(const Rows& r) { return {r.data.begin(), r.data.end()}; }

/// The whole-model tests' weight scale, 1/sqrt(hidden). Larger weights make attention nearly one-hot
/// and the model ill-conditioned: on the CPU alone, 2e-3 relative noise on the matrices (bf16's size)
/// moves the logits by 0.035 (hidden 256) and 0.072 (hidden 512) at scale 0.3, past kModel, but by
/// 0.008 and 0.010 at this scale — so kModel then measures the backend, not the conditioning.
inline float model_scale(const Config& c) { return 1.0f / std::sqrt(static_cast<float>(c.hidden_size)); }

/// Greedy speculative output must equal greedy autoregressive output. The two runs multiply different
/// row counts, so a divergence is accepted only where the target's top two logits are within that
/// rounding of each other (checked with the CPU oracle holding the same weights).
inline void check_greedy_equal(const Config& cfg, const Weights& w, std::span<const int> prompt,
                               const std::vector<int>& plain, const std::vector<int>& spec) {
    REQUIRE(plain.size() == spec.size());
    const auto diverge = std::mismatch(plain.begin(), plain.end(), spec.begin());
    if (diverge.first == plain.end()) return;
    const int at = static_cast<int>(diverge.first - plain.begin());
    std::vector<int> context(prompt.begin(), prompt.end());
    context.insert(context.end(), plain.begin(), plain.begin() + at);
    CpuModel cpu(cfg, w);
    detail::prefill(cpu, std::span<const int>(context).first(context.size() - 1));
    const std::vector<float> logits = copy_rows(cpu.forward(Tree::chain(std::vector<int>{context.back()}), 0));
    std::vector<float> sorted = logits;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    const float scale = std::max(std::abs(sorted[0]), std::abs(sorted.back()));
    WARN("greedy outputs diverge at token " << at << ": top-2 margin " << sorted[0] - sorted[1] << " of scale " << scale);
    CHECK(sorted[0] - sorted[1] <= 2 * kModel * scale);
}

}  // namespace specdec::cuda_test
