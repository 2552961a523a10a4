// specdec/detail/core/philox.hpp — Philox4x32-10 as one function that host code and CUDA kernels share.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

// Marks a function compiled for host and device. Without nvcc it is plain `inline`, so host-only code
// includes this header without any CUDA header.
#if defined(__CUDACC__)
#define SPECDEC_HD __host__ __device__ inline
#else
#define SPECDEC_HD inline
#endif

namespace specdec::detail {

/// Four 32-bit words: a Philox counter, or the block it maps to.
struct PhiloxWords {
    std::uint32_t w[4];
};

/// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): the same
/// arithmetic as rng.hpp's philox4x32, written without std::array so that nvcc compiles it for the
/// device. tests/test_philox.cpp checks the two agree.
SPECDEC_HD PhiloxWords philox4x32_10(PhiloxWords ctr, std::uint32_t key0, std::uint32_t key1) {
    constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
    constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
        const std::uint64_t p0 = std::uint64_t{kMul0} * ctr.w[0];
        const std::uint64_t p1 = std::uint64_t{kMul1} * ctr.w[2];
        ctr = {{static_cast<std::uint32_t>(p1 >> 32) ^ ctr.w[1] ^ key0, static_cast<std::uint32_t>(p1),
                static_cast<std::uint32_t>(p0 >> 32) ^ ctr.w[3] ^ key1, static_cast<std::uint32_t>(p0)}};
        key0 += kWeyl0;
        key1 += kWeyl1;
    }
    return ctr;
}

/// StepRng::uniform's draw: counter (step, node, k, stream), key = the seed's two halves; the top 24
/// bits of the first word give a float in [0, 1) that is exactly representable and never 1.0f.
SPECDEC_HD float philox_uniform(std::uint64_t seed, std::uint32_t step, std::uint32_t stream, std::uint32_t node,
                                std::uint32_t k) {
    const PhiloxWords out = philox4x32_10({{step, node, k, stream}}, static_cast<std::uint32_t>(seed),
                                          static_cast<std::uint32_t>(seed >> 32));
    return static_cast<float>(out.w[0] >> 8) * 0x1p-24f;
}

}  // namespace specdec::detail
