// specdec/detail/rng.hpp — counter-based random numbers (Philox4x32-10), keyed by (seed, step, node).
// SPDX-License-Identifier: MIT
#pragma once

#include <array>
#include <cstdint>

namespace specdec {

/// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11). A pure
/// function of (key, counter): a draw never depends on how many draws came before, so a CUDA kernel
/// and the CPU reference produce the same numbers for the same (seed, step, node, k).
inline std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> ctr,
                                               std::array<std::uint32_t, 2> key) {
    constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
    constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
        const std::uint64_t p0 = std::uint64_t{kMul0} * ctr[0];
        const std::uint64_t p1 = std::uint64_t{kMul1} * ctr[2];
        ctr = {static_cast<std::uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<std::uint32_t>(p1),
               static_cast<std::uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<std::uint32_t>(p0)};
        key = {key[0] + kWeyl0, key[1] + kWeyl1};
    }
    return ctr;
}

/// Which consumer draws: tree builders and acceptors read disjoint streams so that changing how a
/// tree is drawn never shifts the acceptor's coins.
enum class RngStream : std::uint32_t { kDraft = 1, kAccept = 2, kUser = 3 };

/// The uniforms of one decoding step. `uniform(node, k)` is the k-th draw for tree node `node`.
struct StepRng {
    std::uint64_t seed = 0;
    std::uint32_t step = 0;
    RngStream stream = RngStream::kAccept;

    /// A float in [0, 1) with 24 random bits (exactly representable, never 1.0f).
    float uniform(std::uint32_t node, std::uint32_t k = 0) const {
        const auto out = philox4x32({step, node, k, static_cast<std::uint32_t>(stream)},
                                    {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
        return static_cast<float>(out[0] >> 8) * 0x1p-24f;
    }

    StepRng with_stream(RngStream s) const { return {seed, step, s}; }
};

}  // namespace specdec
