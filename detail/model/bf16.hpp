// specdec/detail/model/bf16.hpp — bfloat16 storage: the upper 16 bits of an IEEE float32.
// SPDX-License-Identifier: MIT
#pragma once

#include <bit>
#include <cstdint>

namespace specdec {

/// A bfloat16 value as stored in memory and in safetensors files. Arithmetic happens in float32.
struct bf16 {
    std::uint16_t bits = 0;
};

/// Exact widening: bf16 is a truncated float32.
inline float to_float(bf16 x) { return std::bit_cast<float>(static_cast<std::uint32_t>(x.bits) << 16); }

/// Round-to-nearest-even narrowing (what PyTorch and the hardware do); NaN stays NaN.
inline bf16 to_bf16(float f) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<std::uint16_t>((u >> 16) | 0x40u)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return bf16{static_cast<std::uint16_t>(u >> 16)};
}

}  // namespace specdec
