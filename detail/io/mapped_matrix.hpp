// specdec/detail/io/mapped_matrix.hpp — a matrix in a memory-mapped file as MatrixRows: read in place, checked as read.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../model/bf16.hpp"
#include "../model/deferred_matrices.hpp"

// The loaders' half of LoadOptions::defer_matrices (model/deferred_matrices.hpp): each row is handed
// to the packer where it lies when the file stores it as the packer reads it (bf16 or float32, aligned),
// and converted row by row otherwise (F16, F64, GGUF's quantized blocks) into a per-thread buffer, so no
// whole-matrix float32 copy exists. Rows are checked finite as they are read, with the error a full
// load gives (a corrupted file's NaN would otherwise decode silently: argmax of NaN logits is token 0).

namespace specdec::detail {

/// How a stored matrix's rows reach float: in place as bf16, in place as float32, or converted.
enum class StoredRows { kBf16, kF32, kConverted };

/// A stored (m, k) matrix: row s begins at `data` + s * row_bytes. `stored_row(j)` (or the identity)
/// maps the model's row j to a stored row (GGUF keeps q and k rows in llama.cpp's RoPE order);
/// `convert(bytes, out)` turns one stored row into k floats when `how` is kConverted. `where` (file and
/// tensor, as errors name them) and `who` (the error's area) label a non-finite value.
struct StoredMatrix {
    std::span<const std::byte> data;
    int m = 0, k = 0;
    std::size_t row_bytes = 0;
    StoredRows how = StoredRows::kConverted;
    std::function<void(std::span<const std::byte>, float*)> convert;
    std::function<int(int)> stored_row;
    std::string where, who;
};

/// Whether a stored type can be read in place: the rows' first bytes aligned for the element.
inline StoredRows in_place_or_converted(StoredRows in_place, const std::byte* data, std::size_t row_bytes, std::size_t element) {
    const bool aligned = reinterpret_cast<std::uintptr_t>(data) % element == 0 && row_bytes % element == 0;
    return aligned ? in_place : StoredRows::kConverted;
}

/// Whether none of the n bf16 values at `src` is Inf or NaN (every exponent bit set). Four values per
/// 64-bit word: a lane is bad when (value & 0x7F80) ^ 0x7F80 is zero, found by the has-zero-lane test
/// (x - 0x0001) & ~x & 0x8000 per lane (Mycroft's, as in strlen); lanes of x never set bit 15, so it is
/// exact. Scalar code that any -O level runs at a few words per cycle: a load checks 1.1G values.
inline bool all_finite_bf16(const std::byte* src, std::size_t n) {
    constexpr std::uint64_t kExp = 0x7F807F807F807F80ull, kOne = 0x0001000100010001ull, kTop = 0x8000800080008000ull;
    std::uint64_t bad = 0;
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        std::uint64_t w;
        std::memcpy(&w, src + 2 * i, 8);
        const std::uint64_t x = (w & kExp) ^ kExp;
        bad |= (x - kOne) & ~x & kTop;
    }
    for (; i < n; ++i) {
        std::uint16_t b;
        std::memcpy(&b, src + 2 * i, 2);
        bad |= (b & 0x7F80u) == 0x7F80u;
    }
    return bad == 0;
}

/// `s` as MatrixRows. `owner` keeps the mapping alive while the rows are read.
inline MatrixRows mapped_matrix_rows(StoredMatrix s) {
    auto shared = std::make_shared<const StoredMatrix>(std::move(s));
    const StoredMatrix& st = *shared;
    MatrixRows out{.m = st.m, .k = st.k, .row = {}};
    out.row = [shared](int j) -> RowRef {
        const StoredMatrix& m = *shared;
        const int stored = m.stored_row ? m.stored_row(j) : j;
        const std::span<const std::byte> bytes = m.data.subspan(static_cast<std::size_t>(stored) * m.row_bytes, m.row_bytes);
        const auto not_finite = [&](std::size_t p, bool nan) {
            fail(m.who, m.where + " holds " + (nan ? "NaN" : "Inf") + " at element " +
                            std::to_string(static_cast<std::size_t>(stored) * static_cast<std::size_t>(m.k) + p) +
                            " (a corrupted file)");
        };
        const std::size_t k = static_cast<std::size_t>(m.k);
        if (m.how == StoredRows::kBf16) {
            const auto* row = reinterpret_cast<const bf16*>(bytes.data());
            if (!all_finite_bf16(bytes.data(), k))
                for (std::size_t p = 0; p < k; ++p)
                    if ((row[p].bits & 0x7F80u) == 0x7F80u) not_finite(p, (row[p].bits & 0x7Fu) != 0);
            return RowRef{.bf = row};
        }
        const float* row = nullptr;
        if (m.how == StoredRows::kF32) {
            row = reinterpret_cast<const float*>(bytes.data());
        } else {
            thread_local std::vector<float> converted;
            converted.resize(k);
            m.convert(bytes, converted.data());
            row = converted.data();
        }
        for (std::size_t p = 0; p < k; ++p)
            if (!std::isfinite(row[p])) not_finite(p, std::isnan(row[p]));
        return RowRef{.f32 = row};
    };
    return out;
}

}  // namespace specdec::detail
