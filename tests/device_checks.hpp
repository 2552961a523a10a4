// What the device trainer's tests share (tests/train, tests/methods, tests/cuda): the bound they compare
// tensors by, deterministic windows of tokens, and a parameter set's tensors in checkpoint order.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"

namespace test {

/// max |got - want| / max |want|: the difference relative to the tensor's scale (test_cuda.cu's bound).
inline double relative_gap(const std::vector<float>& got, const std::vector<float>& want) {
    REQUIRE(got.size() == want.size());
    double gap = 0.0, scale = 1e-6;
    for (std::size_t i = 0; i < got.size(); ++i) {
        gap = std::max(gap, std::abs(double(got[i]) - want[i]));
        scale = std::max(scale, std::abs(double(want[i])));
    }
    return gap / scale;
}

/// n tokens in [0, vocab) that vary with position and seed.
inline std::vector<int> window_tokens(int n, int vocab, int seed) {
    std::vector<int> t(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = (seed * 7 + i * 5 + i * i) % vocab;
    return t;
}

/// The model variants the device trainer is checked on: each option of TrainableLlama's forward.
struct Variant {
    const char* name;
    bool gqa, tied, identity_end_norms, pad;
};

inline const Variant kVariants[] = {{"GQA, untied head", true, false, false, false},
                                    {"full heads, tied head", false, true, false, false},
                                    {"EAGLE layout (no end norms)", true, false, true, false},
                                    {"PAD's doubled down_proj", true, false, false, true}};

inline specdec::Config variant_config(const Variant& v, int vocab) {
    specdec::Config c = tiny_config(v.gqa, vocab);
    c.tie_word_embeddings = v.tied;
    c.identity_end_norms = v.identity_end_norms;
    c.partial_alignment = v.pad;
    return c;
}

/// (name, values) of every tensor of a parameter set (Weights, ConnectorWeights or GlideParams), in checkpoint order.
template <class Tensors, class Shape>
std::vector<std::pair<std::string, std::vector<float>>> named_tensors(const Tensors& w, const Shape& shape) {
    std::vector<std::pair<std::string, std::vector<float>>> out;
    for_each_tensor(w, shape, [&](const std::string& n, const std::vector<float>& t, const auto&) { out.emplace_back(n, t); });
    return out;
}

}  // namespace test
