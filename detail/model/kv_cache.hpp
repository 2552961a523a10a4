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

/// Rows of width W for each of L layers, (L, C, W): rows [0, T) committed, T + i tree node i of the
/// last forward. C grows by doubling as forwards need rows, up to `max_rows` (max_position_embeddings +
/// max_tree_nodes): real checkpoints declare 131072 positions or more, and allocating all of them up
/// front (L * C * W floats: 4 GB for a 1-layer toy declaring 10^7) would cost memory a generation never
/// touches. Growing copies the rows in use, O(log C) times per model. Keys, values and the committed
/// hidden states a drafter reads are each one RowCache.
class RowCache {
public:
    RowCache() = default;
    /// `who` prefixes errors ("model", "glide"); `what` names the buffer in them ("keys").
    RowCache(int layers, int width, std::int64_t max_rows, std::string_view who, std::string_view what)
        : layers_(layers), width_(width), max_rows_(max_rows), who_(who), what_(what) {}

    int capacity() const { return capacity_; }
    std::int64_t max_rows() const { return max_rows_; }
    float* rows(int layer) { return data_.data() + offset(layer); }
    const float* rows(int layer) const { return data_.data() + offset(layer); }
    /// Rows [0, n) of one layer.
    std::span<const float> first_rows(int layer, int n) const { return {rows(layer), static_cast<std::size_t>(n) * width_}; }

    /// Makes rows [0, rows) exist in every layer, keeping the contents of rows [0, keep). The caller
    /// has checked rows <= max_rows. Throws naming the bytes when the memory is not there.
    void reserve(int rows, int keep) {
        if (rows <= capacity_ || layers_ == 0) return;
        const std::int64_t grown = std::min<std::int64_t>(max_rows_, std::max<std::int64_t>({rows, 2 * std::int64_t{capacity_}, kMinRows}));
        const std::int64_t floats = std::int64_t{layers_} * grown * width_;
        HugeVector<float> data;
        try {
            data.resize(static_cast<std::size_t>(floats));
        } catch (const std::bad_alloc&) {
            fail(who_, what_ + " for " + std::to_string(grown) + " positions need " + std::to_string(floats * 4) +
                           " bytes (" + std::to_string(layers_) + " layers x " + std::to_string(grown) + " rows x " +
                           std::to_string(width_) + " floats x 4 bytes each), and that memory is not there; "
                           "hint: a shorter prompt + max_new_tokens needs fewer positions");
        }
        const std::size_t kept = static_cast<std::size_t>(keep) * width_;
        for (int l = 0; l < layers_; ++l)
            std::copy_n(data_.data() + offset(l), kept, data.data() + static_cast<std::size_t>(l) * static_cast<std::size_t>(grown) * width_);
        data_ = std::move(data);
        capacity_ = static_cast<int>(grown);
    }

    /// Moves the rows of `path` (node indices of the last forward's tree, root first, increasing) to
    /// rows cache_len.. of every layer: commit's gather. Sources are at or after their destinations and
    /// increase, so an in-order move never overwrites a row it still has to read.
    void gather(int cache_len, std::span<const int> path) {
        for (int l = 0; l < layers_; ++l)
            for (int j = 0; j < static_cast<int>(path.size()); ++j)
                if (path[j] != j)
                    std::copy_n(rows(l) + static_cast<std::size_t>(cache_len + path[j]) * width_, width_,
                                rows(l) + static_cast<std::size_t>(cache_len + j) * width_);
    }

private:
    static constexpr std::int64_t kMinRows = 256;  // the first allocation: a short generation never grows

    std::size_t offset(int layer) const { return static_cast<std::size_t>(layer) * capacity_ * width_; }

    int layers_ = 0, width_ = 0;
    std::int64_t max_rows_ = 0;  // max_position_embeddings + max_tree_nodes
    std::string who_, what_;
    int capacity_ = 0;           // C: rows allocated per layer
    HugeVector<float> data_;     // (L, C, W)
};

/// Keys and values of every layer, (L, C, kvd) each, grown together.
class KvCache {
public:
    KvCache() = default;
    KvCache(int layers, int kvd, std::int64_t max_rows, std::string_view who)
        : k_(layers, kvd, max_rows, who, "the KV cache's keys"), v_(layers, kvd, max_rows, who, "the KV cache's values") {}

    int capacity() const { return k_.capacity(); }
    std::int64_t max_rows() const { return k_.max_rows(); }
    float* k(int layer) { return k_.rows(layer); }
    float* v(int layer) { return v_.rows(layer); }
    const float* k(int layer) const { return k_.rows(layer); }
    const float* v(int layer) const { return v_.rows(layer); }
    std::span<const float> k_rows(int layer, int n) const { return k_.first_rows(layer, n); }
    std::span<const float> v_rows(int layer, int n) const { return v_.first_rows(layer, n); }
    void reserve(int rows, int keep) {
        k_.reserve(rows, keep);
        v_.reserve(rows, keep);
    }
    void gather(int cache_len, std::span<const int> path) {
        k_.gather(cache_len, path);
        v_.gather(cache_len, path);
    }

private:
    RowCache k_, v_;
};

}  // namespace specdec::detail
