// specdec/detail/core/rng.hpp — counter-based random numbers (Philox4x32-10), keyed by (seed, step, node).
// SPDX-License-Identifier: MIT
#pragma once

#include <array>
#include <cstdint>

#include "philox.hpp"

namespace specdec {

/// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11). A pure
/// function of (key, counter): a draw never depends on how many draws came before, so a CUDA kernel
/// and the CPU reference produce the same numbers for the same (seed, step, node, k). The arithmetic
/// lives in philox.hpp, shared with the kernels.
inline std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> ctr,
                                               std::array<std::uint32_t, 2> key) {
    const detail::PhiloxWords out = detail::philox4x32_10({{ctr[0], ctr[1], ctr[2], ctr[3]}}, key[0], key[1]);
    return {out.w[0], out.w[1], out.w[2], out.w[3]};
}

/// Which consumer draws: tree builders and acceptors read disjoint streams so that changing how a
/// tree is drawn never shifts the acceptor's coins.
enum class RngStream : std::uint32_t { kDraft = 1, kAccept = 2, kUser = 3, kCascade = 4 };

/// The uniforms of one decoding step. `uniform(node, k)` is the k-th draw for tree node `node`.
struct StepRng {
    std::uint64_t seed = 0;
    std::uint32_t step = 0;
    RngStream stream = RngStream::kAccept;

    /// A float in [0, 1) with 24 random bits (exactly representable, never 1.0f).
    float uniform(std::uint32_t node, std::uint32_t k = 0) const {
        return detail::philox_uniform(seed, step, static_cast<std::uint32_t>(stream), node, k);
    }

    StepRng with_stream(RngStream s) const { return {seed, step, s}; }
};

}  // namespace specdec
