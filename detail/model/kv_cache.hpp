// specdec/detail/model/kv_cache.hpp — a model's keys and values, grown as a generation reaches new positions.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <new>
#include <span>
#include <string>
#include <string_view>

#include "../core/error.hpp"
#include "huge_pages.hpp"

namespace specdec::detail {

/// max_position_embeddings + max_tree_nodes: the KV rows a model may need, computed in 64 bits and
/// checked to fit the int positions are counted in.
inline std::int64_t kv_rows(int max_position_embeddings, int max_tree_nodes, std::string_view who) {
    const std::int64_t rows = std::int64_t{max_position_embeddings} + max_tree_nodes;
    require(rows <= std::numeric_limits<int>::max(), who, [&] {
        return "max_position_embeddings " + std::to_string(max_position_embeddings) + " + max_tree_nodes " +
               std::to_string(max_tree_nodes) + " = " + std::to_string(rows) + " KV rows, more than the " +
               std::to_string(std::numeric_limits<int>::max()) + " positions an int counts";
    });
    return rows;
}

/// Keys and values of every layer, (L, C, kvd) each: rows [0, T) committed, T + i tree node i of the
/// last forward. C grows by doubling as forwards need rows, up to `max_rows` (max_position_embeddings +
/// max_tree_nodes): real checkpoints declare 131072 positions or more, and allocating all of them up
/// front (2 * L * C * kvd floats: 8 GB for a 1-layer toy declaring 10^7) would cost memory a
/// generation never touches. Growing copies the rows in use, O(log C) times per model.
class KvCache {
public:
    KvCache() = default;
    /// `who` prefixes errors ("model", "glide").
    KvCache(int layers, int kvd, std::int64_t max_rows, std::string_view who)
        : layers_(layers), kvd_(kvd), max_rows_(max_rows), who_(who) {}

    int capacity() const { return capacity_; }
    std::int64_t max_rows() const { return max_rows_; }
    float* k(int layer) { return k_.data() + offset(layer); }
    float* v(int layer) { return v_.data() + offset(layer); }
    const float* k(int layer) const { return k_.data() + offset(layer); }
    const float* v(int layer) const { return v_.data() + offset(layer); }
    /// Rows [0, n) of one layer's keys and values.
    std::span<const float> k_rows(int layer, int n) const { return {k(layer), static_cast<std::size_t>(n) * kvd_}; }
    std::span<const float> v_rows(int layer, int n) const { return {v(layer), static_cast<std::size_t>(n) * kvd_}; }

    /// Makes rows [0, rows) exist in every layer, keeping the contents of rows [0, keep). The caller
    /// has checked rows <= max_rows. Throws naming the bytes when the memory is not there.
    void reserve(int rows, int keep) {
        if (rows <= capacity_) return;
        const std::int64_t grown = std::min<std::int64_t>(max_rows_, std::max<std::int64_t>({rows, 2 * std::int64_t{capacity_}, kMinRows}));
        const std::int64_t floats = std::int64_t{layers_} * grown * kvd_;
        HugeVector<float> k, v;
        try {
            k.resize(static_cast<std::size_t>(floats));
            v.resize(static_cast<std::size_t>(floats));
        } catch (const std::bad_alloc&) {
            fail(who_, "the KV cache for " + std::to_string(grown) + " positions needs " + std::to_string(2 * floats * 4) +
                           " bytes (keys and values: " + std::to_string(layers_) + " layers x " + std::to_string(grown) +
                           " rows x " + std::to_string(kvd_) + " floats x 4 bytes each), and that memory is not there; "
                           "hint: a shorter prompt + max_new_tokens needs fewer positions");
        }
        const std::size_t kept = static_cast<std::size_t>(keep) * kvd_;
        for (int l = 0; l < layers_; ++l) {
            const std::size_t to = static_cast<std::size_t>(l) * static_cast<std::size_t>(grown) * kvd_;
            std::copy_n(k_.data() + offset(l), kept, k.data() + to);
            std::copy_n(v_.data() + offset(l), kept, v.data() + to);
        }
        k_ = std::move(k);
        v_ = std::move(v);
        capacity_ = static_cast<int>(grown);
    }

    /// Moves the rows of `path` (node indices of the last forward's tree, root first, increasing) to
    /// rows cache_len.. of every layer: commit's gather. Sources are at or after their destinations and
    /// increase, so an in-order move never overwrites a row it still has to read.
    void gather(int cache_len, std::span<const int> path) {
        for (int l = 0; l < layers_; ++l)
            for (float* rows : {k(l), v(l)})
                for (int j = 0; j < static_cast<int>(path.size()); ++j)
                    if (path[j] != j)
                        std::copy_n(rows + static_cast<std::size_t>(cache_len + path[j]) * kvd_, kvd_,
                                    rows + static_cast<std::size_t>(cache_len + j) * kvd_);
    }

private:
    static constexpr std::int64_t kMinRows = 256;  // the first allocation: a short generation never grows

    std::size_t offset(int layer) const { return static_cast<std::size_t>(layer) * capacity_ * kvd_; }

    int layers_ = 0, kvd_ = 0;
    std::int64_t max_rows_ = 0;  // max_position_embeddings + max_tree_nodes
    std::string who_;
    int capacity_ = 0;           // C: rows allocated per layer
    HugeVector<float> k_, v_;    // (L, C, kvd)
};

}  // namespace specdec::detail
