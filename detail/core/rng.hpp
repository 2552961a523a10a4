// specdec/detail/core/rng.hpp — counter-based random numbers (Philox4x32-10), keyed by (seed, step, stream, scope, node, k).
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

/// How many scopes a step has: a scope rides in the top 24 bits of the counter word that holds the
/// stream (whose values fit in the low 8).
constexpr std::uint32_t kRngScopes = 1u << 24;

/// The uniforms of one decoding step. `uniform(node, k)` is the k-th draw for tree node `node`.
///
/// `scope` names the part of the composition that draws, so that two parts can never replay each
/// other's uniforms, however they are nested: the loop's tree builder and acceptor draw at scope 0,
/// the proposer they drive at scope 1, and a proposer made of parts (a cascade) hands each part its
/// own scopes (StepContext::scoped, rng_scopes_of). Scope 0 leaves the counter as it was before scopes
/// existed, so the acceptors' draws (which the CUDA kernels reproduce) did not move.
struct StepRng {
    std::uint64_t seed = 0;
    std::uint32_t step = 0;
    RngStream stream = RngStream::kAccept;
    std::uint32_t scope = 0;

    /// A float in [0, 1) with 24 random bits (exactly representable, never 1.0f).
    float uniform(std::uint32_t node, std::uint32_t k = 0) const {
        return detail::philox_uniform(seed, step, stream_word(), node, k);
    }

    /// The counter word that keys (stream, scope): distinct for every pair with scope < kRngScopes.
    std::uint32_t stream_word() const { return static_cast<std::uint32_t>(stream) | scope << 8; }

    StepRng with_stream(RngStream s) const { return {seed, step, s, scope}; }
};

}  // namespace specdec
