// specdec/detail/core/views.hpp — read-only views over per-node outputs and over a model's KV cache.
// SPDX-License-Identifier: MIT
#pragma once

#include <span>

namespace specdec {

/// A read-only (rows, cols) view of row-major floats: logits or probabilities per tree node.
struct Rows {
    std::span<const float> data;  // (rows, cols)
    int cols = 0;

    int rows() const { return cols == 0 ? 0 : static_cast<int>(data.size()) / cols; }
    std::span<const float> row(int i) const { return data.subspan(static_cast<std::size_t>(i) * cols, cols); }
};

/// Read-only view of one layer's committed keys and values (what a GLIDE drafter attends to).
/// Rows are positions 0..len-1; each row holds Hkv heads of head_dim values, RoPE already applied to k.
struct KvView {
    std::span<const float> k;  // (len, Hkv*hd)
    std::span<const float> v;  // (len, Hkv*hd)
    int len = 0;
    int n_kv_heads = 0;
    int head_dim = 0;
};

}  // namespace specdec
