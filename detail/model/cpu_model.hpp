// specdec/detail/model/cpu_model.hpp — the float32 CPU reference Llama: one forward pass verifies a whole token tree.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bf16.hpp"
#include "config.hpp"
#include "../core/compiled.hpp"
#include "../core/error.hpp"
#include "matmul.hpp"
#include "huge_pages.hpp"
#include "memory_budget.hpp"
#include "kv_cache.hpp"
#include "panel_matmul.hpp"
#include "row_ops.hpp"
#include "softmax.hpp"
#include "thread_pool.hpp"
#include "../core/tree.hpp"
#include "tree_attention.hpp"
#include "../core/views.hpp"
#include "weights.hpp"

namespace specdec {

namespace detail {

/// Without AVX-512 (where tree_attention.hpp does all of it), from this many query nodes on the fast
/// model computes attention as matrix products (CpuModel::attend_blocked); a single node takes
/// CpuModel::attend_one (split over key rows). The per-(node, head) loop (CpuModel::attend) is the
/// reference model's. Measured in isolation (1 thread, hd 64, 12 heads, 2-vCPU EPYC, T = 256 and 1000)
/// the loop beat the blocked path below n = 3, but inside the ~110M model, where each forward's
/// weights have pushed the cache out of L2, the blocked path is faster from n = 2 (2 threads, bf16,
/// T = 256: 7.2 -> 5.9 ms).
constexpr int kBlockedAttentionMinNodes = 2;

/// Query rows (a block of nodes times the heads of one GQA group) per work item of the blocked
/// attention: enough rows to amortise reading the keys and values, few enough that a prefill skips
/// most of the masked upper triangle (a block computes keys up to its last node only).
constexpr int kAttentionBlockRows = 64;

/// A weight matrix (m, k) as the model multiplies it: panels (panel_matmul.hpp) where the CPU has
/// AVX-512, else as stored, float32 or bfloat16 (widened in registers).
struct Matrix {
    const float* f32 = nullptr;
    std::vector<bf16> bf;       // (m, k) when stored as bfloat16
    std::vector<float> copied;  // (m, k) float32 rows that were not one tensor in memory, without a `store`
    PanelMatrix<float> panels_f32;
    PanelMatrix<bf16> panels_bf;
    int m = 0, k = 0;
};

/// One part of a matrix: a float32 tensor in memory ((size / k, k) row-major), or a matrix a loader
/// left in its file (Weights::deferred) of `rows` rows.
struct MatrixPart {
    MatrixPart(const std::vector<float>* v) : values(v) {}
    MatrixPart(const MatrixRows* f, int r) : in_file(f), rows(r) {}
    const std::vector<float>* values = nullptr;
    const MatrixRows* in_file = nullptr;
    int rows = 0;
};

/// The parts (stacked row-wise) as one matrix: fused q|k|v and gate|up mean fewer, larger products
/// (one pass over x, one thread dispatch instead of three). With `panels` they are packed (a copy in
/// either format, groups in parallel on `pool`); otherwise a single float32 part in memory is used in
/// place, and other rows are copied into `store` (float32; the Matrix's own `copied` when null) or
/// converted to bfloat16.
SPECDEC_INLINE Matrix make_matrix(std::vector<float>* store, const std::vector<MatrixPart>& parts, int m, int k, bool bf,
                                  bool panels, ThreadPool* pool);

/// Whether make_matrix uses the parts in place, copying nothing: one float32 tensor in memory, unpacked.
inline bool used_in_place(const std::vector<MatrixPart>& parts, bool bf, bool panels) {
    return !panels && !bf && parts.size() == 1 && parts[0].values != nullptr;
}

}  // namespace detail

enum class WeightFormat {
    kF32,   // float32 matrices: the reference numerics
    kBF16,  // bfloat16 matrices, float32 activations and accumulation: half the bytes per decode step
};

/// Options that are not part of the checkpoint.
struct ModelOptions {
    int max_tree_nodes = 256;                    // scratch KV rows for one forward beyond the committed context
    WeightFormat weight_format = WeightFormat::kF32;
    ThreadPool* pool = nullptr;                  // runs the parallel loops; null = one thread (the caller's)
    bool reference = false;                      // plain-loop matrix products: the oracle the fast path is tested against
    bool panels = true;                          // pack W as panels where the CPU has AVX-512 (panel_matmul.hpp): faster
                                                 // trees; false multiplies W as stored (no float32 copy)
    bool bf16_inputs = true;                     // bf16 weights only: x rounded to bf16 where it enters a product,
                                                 // as on the GPU, so AVX512-BF16 multiplies (PanelInput::kBf16)
};

namespace detail {

/// The format `options` ask matrices in: bfloat16 or float32, as panels unless the plain-loop
/// reference is asked for or the CPU cannot run them.
struct MatrixFormat {
    bool bf, panels;
};
inline MatrixFormat matrix_format(const ModelOptions& options) {
    return {options.weight_format == WeightFormat::kBF16, options.panels && !options.reference && panels_available()};
}

/// make_matrix(store, parts, m, k) in matrix_format(options).
inline auto matrix_maker(const ModelOptions& options) {
    return [f = matrix_format(options), pool = options.pool](std::vector<float>* store, const std::vector<MatrixPart>& parts,
                                                             int m, int k) {
        return make_matrix(store, parts, m, k, f.bf, f.panels, pool);
    };
}

/// y (n, m) = x (n, k) · Wᵀ: every matrix product of a model goes through here, the fast product or
/// (options.reference) the plain-loop oracle.
SPECDEC_INLINE void linear(const ModelOptions& options, float* y, const float* x, const Matrix& w, int n);

}  // namespace detail

/// The float32 reference model. KV cache: per layer (C, Hkv*hd), C growing as needed up to
/// max_position_embeddings + max_tree_nodes (detail::KvCache); rows [0, T) are committed, rows T + i
/// hold tree node i of the last forward.
class CpuModel {
public:
    CpuModel(Config config, Weights weights, ModelOptions options = {});

    // Matrices point into this object's buffers: moving keeps them valid (vectors keep their heap
    // storage), copying would not.
    CpuModel(const CpuModel&) = delete;
    CpuModel& operator=(const CpuModel&) = delete;
    CpuModel(CpuModel&&) = default;
    CpuModel& operator=(CpuModel&&) = default;

    const Config& config() const { return cfg_; }
    /// The weights as given; matrices a loader left in its file (LoadOptions::defer_matrices) are empty
    /// here: they live only in the packed matrices, and the file is released once they are built.
    const Weights& weights() const { return w_; }
    int vocab_size() const { return cfg_.vocab_size; }
    int cache_len() const { return cache_len_; }
    int context_size() const { return cfg_.max_position_embeddings; }
    /// The nodes of a tree that always fit beside a full context (ModelOptions::max_tree_nodes); a longer
    /// forward fits only while the cache is short enough (a whole text scored at once).
    int max_tree_nodes() const { return opt_.max_tree_nodes; }

    /// Logits (N - first, V) for tree nodes first..N-1. Nodes before `first` must be exactly those of
    /// the previous forward (same tree, grown since): their KV rows are reused, so a drafter extends its
    /// tree one depth at a time without recomputing. The view lives until the next forward.
    Rows forward(const Tree& tree, int first = 0) { return run_forward(tree, first, nullptr); }

    /// forward(tree, first) with supplied input vectors instead of token embeddings (HF's
    /// inputs_embeds): node first + i enters the first layer as row i of `inputs` (N - first, D). The
    /// tree gives only the shape — parents, hence the mask and positions cache_len + depth; its tokens
    /// are not read (any id in the vocabulary). A soft prompt (EDD's hidden states of the target) or
    /// EAGLE-style features go through the same layers, cache and commit as tokens do; given the
    /// model's own embedding rows (embedding(t)) the logits are those of forward(), bit for bit.
    Rows forward_embeddings(const Tree& tree, int first, Rows inputs);
    /// Forwards run so far (forward and forward_embeddings alike): what a proposer's n_calls must equal
    /// when it drives this model alone, a load-independent cost count.
    long n_forwards() const { return n_forwards_; }

    /// The input vector (D) of `token`: its row of the embedding matrix.
    std::span<const float> embedding(int token) const {
        detail::require(token >= 0 && token < cfg_.vocab_size, "model", [&] {
            return "embedding(" + std::to_string(token) + "): outside the vocabulary [0, " +
                   std::to_string(cfg_.vocab_size) + ")";
        });
        return std::span<const float>(w_.embed).subspan(static_cast<std::size_t>(token) * cfg_.hidden_size,
                                                         cfg_.hidden_size);
    }

private:
    /// The forward pass; `inputs` (n, D) replaces the token embeddings when not null.
    Rows run_forward(const Tree& tree, int first, const float* inputs);

public:
    /// Keeps the KV rows of `path` (node indices of the last forward's tree, root first, each the
    /// parent of the next) as the next committed tokens, and drops every other tree row.
    void commit(std::span<const int> path);

    /// Forgets committed tokens beyond the first n.
    void truncate(int n);
    void reset() { truncate(0); }

    // ---- ExposesKV --------------------------------------------------------------------------------
    int num_layers() const { return cfg_.num_hidden_layers; }
    KvView kv(int layer) const;

    // ---- ExposesHidden ----------------------------------------------------------------------------
    /// Chooses which hidden states the next forwards keep, HF numbering: 0 = embeddings (or the
    /// supplied inputs), l = output of layer l, L = the final normed state. EDD reads L-3 (HF's
    /// hidden_states[-4], the output of the 4th-to-last layer), EAGLE/FSPAD read L. Call it before the
    /// text is forwarded (a drafter's constructor): committed_hidden() covers only tokens forwarded
    /// while these layers were captured.
    /// It replaces the captured set; a reader that shares the model with others (a drafter fed by the
    /// target's states) adds its layer with add_hidden_layer instead and looks it up by hidden_index.
    void capture_hidden(std::vector<int> layers);
    /// Adds `layer` to the captured set, keeping the layers there and their states, and returns its
    /// index (for hidden / committed_hidden). Several readers of one model each add their own layer
    /// (EDD reads L-3, EAGLE/FSPAD read L): the set is their union and each reads its own.
    int add_hidden_layer(int layer);
    /// The index of a captured layer; throws naming the layer and the captured set when it is not
    /// there (capture_hidden replaced the set a reader added its layer to).
    int hidden_index(int layer) const;
    /// (N - first, D) hidden states of the last forward for the i-th captured layer.
    Rows hidden(int i) const;

    /// (cache_len, D) hidden states of every committed token for the i-th captured layer: rows move
    /// with commit exactly as the KV rows do, so the prompt's prefill chunks and every accepted path
    /// are all here (a drafter fed by the target's states reads the whole text, not the last forward).
    Rows committed_hidden(int i) const;

private:
    /// Keeps x_ as the last forward's states of `layer` and in the committed-state rows of its nodes
    /// (rows cache_len + first + i, as the KV rows), where commit finds them.
    void capture(int layer) { capture(layer, x_); }
    void capture(int layer, const std::vector<float>& states);

    void linear(float* y, const float* x, const detail::Matrix& w, int n) { detail::linear(opt_, y, x, w, n); }

    /// Fuses q|k|v and gate|up into single matrices, in the format the options ask for (matrix_maker).
    void prepare_matrices();

    /// att_ (n, H*hd): softmax(q·kᵀ/√hd)·v over committed rows and each node's visible tree rows.
    /// One task per (node, head); scores live in scores_ (n*H, T + depth + 1). The reference model's
    /// path (the fast one takes attend_one or attend_blocked).
    void attend(const float* kc, const float* vc, const std::vector<std::vector<int>>& visible);

    /// att_ (1, H*hd) for a single node (a decode step) like attend(), split over the key rows instead
    /// of the heads: a task reads its rows whole (all heads, kvd contiguous floats) where a per-head
    /// task reads one hd-float segment of each row, kvd floats apart — after a forward's weights have
    /// streamed through, that strided read from memory cost about a fifth of a 110M bf16 decode step.
    /// Each chunk keeps per head its max score, sum of exponentials and weighted values; the chunks
    /// are merged as in flash-decoding (Dao et al., "Flash-Decoding for long-context inference", 2023).
    void attend_one(const float* kc, const float* vc, const std::vector<int>& tree_rows);

    /// How a forward of n nodes attends: the reference model loops per (node, head); the fast one
    /// takes tree_attention where AVX-512 runs (queries in vector lanes, the cache read in place, every
    /// node's result bit-identical to its decode step's), else attend_one for a single node and the
    /// blocked matrix products for more.
    enum class Attention { kLoop, kOne, kTree, kBlocked };
    Attention attention_path(int n) const {
        if (opt_.reference) return Attention::kLoop;
        if (detail::tree_attention_available()) return Attention::kTree;
        if (n == 1) return Attention::kOne;
        return n >= detail::kBlockedAttentionMinNodes ? Attention::kBlocked : Attention::kLoop;
    }
    detail::TreeAttentionShape tree_shape(int n, int first) const {
        return {.n = n, .first = first, .T = cache_len_, .H = cfg_.num_attention_heads, .Hkv = cfg_.num_key_value_heads,
                .hd = cfg_.head_dim(), .scale = 1.0f / std::sqrt(static_cast<float>(cfg_.head_dim()))};
    }

    /// tree_mask_ (n, N): row i marks the tree nodes that node first + i sees (its ancestors and
    /// itself). Built once per forward from `visible`; every layer and head reads it.
    void build_tree_mask(const std::vector<std::vector<int>>& visible, int N);

    /// att_ (n, H*hd) like attend(), as matrix products: the same result up to float32 summation
    /// order. For the N - first = n nodes of tree `N` nodes long, over R = T + N key rows.
    ///
    /// The tiling of flash-attention (Dao et al. 2022, Algorithm 1) and of llama.cpp's CPU
    /// flash-attention: a work item is one kv head against a block of query rows, and every query
    /// head of the head's GQA group is stacked into that block, so each gathered key and value row
    /// serves G heads. Unlike flash-attention the softmax is not online: a whole score row (at most
    /// C floats) fits in the work space, so it is masked and exponentiated in place, and only the
    /// division by its sum is deferred to the output row (flash-attention's final rescaling).
    /// Tree nodes see no tree row after themselves (parents precede children), so a block of nodes
    /// [i0, i1) needs only key rows [0, T + first + i1): a prefill computes the lower triangle block
    /// by block instead of the square (flash-attention's skipping of fully masked blocks).
    ///
    /// Parallel over work items, one level: each pool task owns a slot of work space and claims
    /// items from a shared counter, and the matmul calls inside run inline on their task's thread
    /// (a parallel_for issued from inside a task does). Items are many (Hkv per block of nodes);
    /// were there a single one, its parallel_for would run inline and the matmuls use the pool.
    void attend_blocked(const float* kc, const float* vc, int first, int N);

    struct LayerMatrices {
        detail::Matrix qkv, wo, gate_up, down;
    };

    Config cfg_;
    Weights w_;
    ModelOptions opt_;
    std::unique_ptr<ThreadPool> own_pool_;    // when the caller gave none
    std::vector<LayerMatrices> mats_;         // per layer, views into w_ or fused_ (or bf16 copies)
    std::vector<std::vector<float>> fused_;   // per layer: (H*hd + 2*Hkv*hd, D) and (2F, D) in float32
    detail::Matrix head_;                     // (V, D)
    std::vector<double> inv_freq_;            // (hd/2) RoPE frequencies
    std::vector<float> rope_cs_;              // (n, hd/2, 2) cos, sin per node
    int cache_len_ = 0;      // T
    long n_forwards_ = 0;    // run_forward calls (n_forwards)
    int n_computed_ = 0;     // nodes of the current tree whose KV rows sit after the committed ones
    detail::KvCache kv_;     // (L, C, Hkv*hd) keys and values
    std::vector<float> x_, xb_;             // (n, D)
    std::vector<float> qkv_;                // (n, H*hd + 2*Hkv*hd)
    std::vector<float> q_, att_;            // (n, H*hd)
    std::vector<float> scores_;             // (n*H, T + depth + 1); attend_one: (chunks, H, chunk)
    std::vector<float> partials_;           // attend_one: (chunks, H, 2 + hd) max, sum, weighted values
    std::vector<std::uint8_t> tree_mask_;   // (n, N) 1 where tree node j is visible to node first + i
    detail::TreeAttention tree_attention_;  // its work space
    // Blocked attention (no AVX-512, n >= kBlockedAttentionMinNodes), R = T + N key rows, B nodes per block:
    std::vector<float> k_heads_;            // (Hkv, R, hd) keys per kv head
    std::vector<float> vt_heads_;           // (Hkv, hd, R) values per kv head, transposed
    std::vector<float> slots_;              // (threads, 2*G*B*hd + G*B*R + hd*R + G*B) per-task work space
    std::vector<float> gate_up_;            // (n, 2F)
    std::vector<float> hidden_mlp_;         // (n, F)
    std::vector<float> logits_;             // (n, V)
    std::vector<float> pad_out_;            // (n, 2D) the last down_proj's output under partial_alignment
    std::vector<float> feature_;            // (n, D) its feature branch, normed (captured as state L)
    std::vector<int> hidden_layers_;
    std::vector<std::vector<float>> hidden_;  // per captured layer: (n, D)
    int hidden_first_ = 0;                    // the `first` of the last forward
    detail::RowCache committed_hidden_;       // (captured, C, D): rows [0, T) committed, T + i tree node i
    std::vector<int> hidden_from_;            // per captured layer: committed rows before it were forwarded before its capture
};

#if SPECDEC_BODIES
// ---------------------------------------------------------------------------------------------------
// The bodies: compiled in every translation unit (header-only use), or once, in the program's
// SPECDEC_IMPLEMENTATION unit (detail/core/compiled.hpp).

namespace detail {

// ---------------------------------------------------------------------------------------------------
// Transposes for the blocked attention (values as matmul's W operand).

#if defined(__x86_64__)
SPECDEC_INTRINSICS_BEGIN

/// dst[c * ld_dst + r] = src[r * ld_src + c] for a 16 x 16 block, in registers (transpose16).
SPECDEC_TARGET_AVX512 inline void transpose16x16(float* dst, std::ptrdiff_t ld_dst, const float* src, std::ptrdiff_t ld_src) {
    __m512 r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ld_src);
    transpose16(r);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ld_dst, r[i]);
}
SPECDEC_INTRINSICS_END
#endif

/// vt (hd, R) <- the first hd columns of `rows` (R rows, ld apart), transposed: by 16 x 16 register
/// blocks where AVX-512 runs (as a scalar loop it took ~8% of a 16-node tree forward, 110M shape).
inline void transpose_rows(float* vt, const float* rows, std::ptrdiff_t ld, int R, int hd) {
    int r0 = 0;
#if defined(__x86_64__)
    if (best_isa() == MatmulIsa::kAvx512 && hd % 16 == 0)
        for (; r0 + 16 <= R; r0 += 16)
            for (int d = 0; d < hd; d += 16) transpose16x16(vt + std::ptrdiff_t{d} * R + r0, R, rows + r0 * ld + d, ld);
#endif
    // 16 keys at a time, so that each row of vt gets a whole cache line in one burst: R is often a
    // power of two, and a row-at-a-time scatter to hd rows R floats apart thrashes one L1 set.
    for (; r0 < R; r0 += 16)
        for (int d = 0; d < hd; ++d)
            for (int r = r0; r < std::min(R, r0 + 16); ++r) vt[std::ptrdiff_t{d} * R + r] = rows[r * ld + d];
}

SPECDEC_INLINE Matrix make_matrix(std::vector<float>* store, const std::vector<MatrixPart>& parts, int m, int k, bool bf,
                                  bool panels, ThreadPool* pool) {
    const std::size_t cols = static_cast<std::size_t>(k);
    std::vector<int> rows;  // per part
    for (const MatrixPart& p : parts) {
        rows.push_back(p.values != nullptr ? static_cast<int>(p.values->size() / std::max<std::size_t>(cols, 1)) : p.rows);
        require(p.in_file == nullptr || (p.in_file->m == p.rows && p.in_file->k == k), "model", [&] {
            return "a matrix left in its file is (" + std::to_string(p.in_file->m) + ", " + std::to_string(p.in_file->k) +
                   "), the config implies (" + std::to_string(p.rows) + ", " + std::to_string(k) + ")";
        });
    }
    const auto row = [&](int j) -> RowRef {  // row j of the stacked parts
        for (std::size_t i = 0; i < parts.size(); ++i) {
            if (j < rows[i])
                return parts[i].values != nullptr ? RowRef{.f32 = parts[i].values->data() + static_cast<std::size_t>(j) * cols}
                                                  : parts[i].in_file->row(j);
            j -= rows[i];
        }
        fail("model", "matrix row past its parts");
    };
    Matrix mat;
    mat.m = m;
    mat.k = k;
    if (panels) {
        if (bf) mat.panels_bf = PanelMatrix<bf16>(pool, m, k, row);
        else mat.panels_f32 = PanelMatrix<float>(pool, m, k, row);
        return mat;
    }
    if (used_in_place(parts, bf, panels)) {
        mat.f32 = parts[0].values->data();
        return mat;
    }
    if (store == nullptr) store = &mat.copied;
    if (bf) mat.bf.resize(static_cast<std::size_t>(m) * cols);
    else store->resize(static_cast<std::size_t>(m) * cols);
    for (int j = 0; j < m; ++j) {
        const RowRef r = row(j);
        const std::size_t at = static_cast<std::size_t>(j) * cols;
        for (std::size_t p = 0; p < cols; ++p) {
            if (bf) mat.bf[at + p] = r.bf != nullptr ? r.bf[p] : to_bf16(r.f32[p]);
            else (*store)[at + p] = r.bf != nullptr ? to_float(r.bf[p]) : r.f32[p];
        }
    }
    if (!bf) mat.f32 = store->data();
    return mat;
}

SPECDEC_INLINE void linear(const ModelOptions& options, float* y, const float* x, const Matrix& w, int n) {
    if (!w.panels_f32.empty()) return panel_matmul(*options.pool, y, x, w.panels_f32, n);
    const bool round_x = options.bf16_inputs && options.weight_format == WeightFormat::kBF16;
    if (!w.panels_bf.empty())
        return panel_matmul(*options.pool, y, x, w.panels_bf, n, round_x ? PanelInput::kBf16 : PanelInput::kFloat32);
    if (round_x) {  // the same numbers as the panels' kBf16 input, on any CPU
        const std::size_t count = static_cast<std::size_t>(n) * w.k;
        float* rounded = thread_scratch(2, count);
        for (std::size_t i = 0; i < count; ++i) rounded[i] = to_float(to_bf16(x[i]));
        x = rounded;
    }
    if (options.reference) {
        if (w.bf.empty()) matmul_reference(y, x, w.f32, n, w.k, w.m);
        else matmul_reference(y, x, w.bf.data(), n, w.k, w.m);
    } else {
        if (w.bf.empty()) matmul(*options.pool, y, x, w.f32, n, w.k, w.m);
        else matmul(*options.pool, y, x, w.bf.data(), n, w.k, w.m);
    }
}

}  // namespace detail

SPECDEC_INLINE CpuModel::CpuModel(Config config, Weights weights, ModelOptions options)
    : cfg_(config), w_(std::move(weights)), opt_(options) {
    cfg_.validate();
    validate(w_, cfg_, /*allow_deferred=*/true);
    if (opt_.pool == nullptr) {
        own_pool_ = std::make_unique<ThreadPool>(1);
        opt_.pool = own_pool_.get();
    }
    prepare_matrices();
    detail::require(opt_.max_tree_nodes > 0, "model", [&] {
        return "max_tree_nodes must be > 0, got " + std::to_string(opt_.max_tree_nodes);
    });
    kv_ = detail::KvCache(cfg_.num_hidden_layers, cfg_.kv_dim(),
                          detail::kv_rows(cfg_.max_position_embeddings, opt_.max_tree_nodes, "model"), "model");
}

SPECDEC_INLINE Rows CpuModel::forward_embeddings(const Tree& tree, int first, Rows inputs) {
    const int n = tree.size() - first;
    detail::require(inputs.cols == cfg_.hidden_size && inputs.rows() == n &&
                        inputs.data.size() == static_cast<std::size_t>(std::max(n, 0)) * cfg_.hidden_size,
                    "model", [&] {
                        return "forward_embeddings: inputs are (" + std::to_string(inputs.rows()) + ", " +
                               std::to_string(inputs.cols) + "), expected (N - first, hidden_size) = (" +
                               std::to_string(n) + ", " + std::to_string(cfg_.hidden_size) + ")";
                    });
    return run_forward(tree, first, inputs.data.data());
}

SPECDEC_INLINE Rows CpuModel::run_forward(const Tree& tree, int first, const float* inputs) {
    const int N = tree.size(), n = N - first;
    detail::require(first >= 0 && first <= n_computed_ && first <= N, "model", [&] {
        return "forward from node " + std::to_string(first) + ", but only " + std::to_string(n_computed_) +
               " nodes of this tree were computed before (pass 0 for a new tree)";
    });
    tree.validate(cfg_.vocab_size);
    ++n_forwards_;
    detail::require(cache_len_ + std::int64_t{N} <= kv_.max_rows(), "model", [&] {
        return "tree of " + std::to_string(N) + " nodes does not fit: cache holds " + std::to_string(cache_len_) +
               " tokens, capacity is " + std::to_string(kv_.max_rows()) + " (max_position_embeddings " +
               std::to_string(cfg_.max_position_embeddings) + " + max_tree_nodes " +
               std::to_string(opt_.max_tree_nodes) + ")";
    });
    kv_.reserve(cache_len_ + N, cache_len_ + first);  // the rows this forward writes; committed and reused ones kept
    committed_hidden_.reserve(cache_len_ + N, cache_len_ + first);
    n_computed_ = N;
    const int D = cfg_.hidden_size, hd = cfg_.head_dim(), H = cfg_.num_attention_heads;
    const int kvd = cfg_.kv_dim(), Fw = cfg_.intermediate_size, V = cfg_.vocab_size;
    const std::size_t nn = static_cast<std::size_t>(std::max(n, 0));
    x_.assign(nn * D, 0.0f);
    xb_.resize(nn * D);
    qkv_.resize(nn * (H * hd + 2 * kvd));
    q_.resize(nn * H * hd);
    att_.resize(nn * H * hd);
    gate_up_.resize(nn * 2 * Fw);
    hidden_mlp_.resize(nn * Fw);
    logits_.resize(nn * V);
    hidden_.assign(hidden_layers_.size(), std::vector<float>(nn * D));
    hidden_first_ = first;
    if (n == 0) return Rows{{}, V};

    // Each node attends to the committed cache plus its ancestors (the tree mask, derived from parents).
    std::vector<std::vector<int>> visible(n);
    for (int i = 0; i < n; ++i) visible[i] = tree.path_to(first + i);
    const Attention path = attention_path(n);
    if (path == Attention::kTree || path == Attention::kBlocked) build_tree_mask(visible, N);
    // RoPE angles once per node (position cache_len + depth), shared by every head and layer.
    std::vector<int> positions(nn);
    for (int i = 0; i < n; ++i) positions[i] = cache_len_ + tree[first + i].depth;
    detail::rope_table(rope_cs_, positions, inv_freq_, rope_attention_factor(cfg_));

    // The steps between products run per row; the fast model spreads rows over the pool.
    const bool fast = !opt_.reference;
    const auto rows = [&](auto&& f) { detail::for_rows(*opt_.pool, n, fast, f); };
    const float eps = cfg_.rms_norm_eps;
    const auto row = [](std::vector<float>& v, int i, int width) { return v.data() + static_cast<std::size_t>(i) * width; };

    if (inputs != nullptr) std::copy_n(inputs, nn * D, x_.begin());
    else
        for (int i = 0; i < n; ++i)
            std::copy_n(&w_.embed[static_cast<std::size_t>(tree[first + i].token) * D], D, row(x_, i, D));
    capture(0);
    const float* first_norm = cfg_.num_hidden_layers > 0 ? w_.layers[0].attn_norm.data() : w_.norm.data();
    if (cfg_.identity_end_norms) std::copy(x_.begin(), x_.end(), xb_.begin());  // EAGLE: no input_layernorm on layer 0
    else rows([&](int i) { detail::rmsnorm(row(xb_, i, D), row(x_, i, D), first_norm, D, eps, fast); });
    for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
        const LayerWeights& lw = w_.layers[l];
        float* kc = kv_.k(l);
        float* vc = kv_.v(l);
        // q, k and v in one product over the fused (H*hd + 2*Hkv*hd, D) matrix; xb_ holds the normed x.
        linear(qkv_.data(), xb_.data(), mats_[l].qkv, n);
        rows([&](int i) {
            const std::size_t at = static_cast<std::size_t>(cache_len_ + first + i) * kvd;
            if (!cfg_.llama_block())  // Qwen2's biases, Qwen3's q/k norms: before RoPE
                detail::qkv_extras(row(qkv_, i, H * hd + 2 * kvd), cfg_.qkv_bias ? lw.bq.data() : nullptr, lw.bk.data(),
                                   lw.bv.data(), cfg_.qk_norm ? lw.q_norm.data() : nullptr, lw.k_norm.data(), H,
                                   cfg_.num_key_value_heads, hd, eps, fast);
            detail::split_qkv(row(qkv_, i, H * hd + 2 * kvd), row(q_, i, H * hd), kc + at, vc + at, H,
                              cfg_.num_key_value_heads, hd, row(rope_cs_, i, hd), fast);
        });
        switch (path) {
            case Attention::kLoop: attend(kc, vc, visible); break;
            case Attention::kOne: attend_one(kc, vc, visible[0]); break;
            case Attention::kTree:
                tree_attention_.run(*opt_.pool, att_.data(), q_.data(), kc, vc, tree_mask_.data(), tree_shape(n, first));
                break;
            case Attention::kBlocked: attend_blocked(kc, vc, first, N); break;
        }
        linear(xb_.data(), att_.data(), mats_[l].wo, n);
        rows([&](int i) { detail::add_rmsnorm(row(xb_, i, D), row(x_, i, D), row(xb_, i, D), lw.mlp_norm.data(), D, eps, fast); });

        // SwiGLU over the fused (2F, D) gate|up matrix.
        linear(gate_up_.data(), xb_.data(), mats_[l].gate_up, n);
        rows([&](int i) {
            const float* g = row(gate_up_, i, 2 * Fw);
            detail::swiglu(row(hidden_mlp_, i, Fw), g, g + Fw, Fw, fast);
        });
        const bool last = l + 1 == cfg_.num_hidden_layers;
        if (last && cfg_.partial_alignment) {
            // FSPAD's PAD: the (2D, F) down_proj's second half, on the shared residual and through the
            // final norm, is the feature (captured as state L); the first half continues as usual to
            // the LM head.
            pad_out_.resize(nn * 2 * D);
            feature_.resize(nn * D);
            linear(pad_out_.data(), hidden_mlp_.data(), mats_[l].down, n);
            rows([&](int i) {
                const float* o = row(pad_out_, i, 2 * D);
                float* f = row(feature_, i, D);
                const float* x = row(x_, i, D);
                for (int d = 0; d < D; ++d) f[d] = x[d] + o[D + d];
                detail::rmsnorm(f, f, w_.norm.data(), D, eps, fast);
                std::copy_n(o, D, row(xb_, i, D));
            });
        } else {
            linear(xb_.data(), hidden_mlp_.data(), mats_[l].down, n);
        }
        // The residual add, then the next layer's attention norm (or the final norm) on the same row.
        const float* next_norm = last ? w_.norm.data() : w_.layers[l + 1].attn_norm.data();
        if (last && cfg_.identity_end_norms) {
            // EAGLE's layer: no final norm, the residual stream goes to the head as it is.
            rows([&](int i) {
                float* x = row(x_, i, D);
                float* o = row(xb_, i, D);
                for (int d = 0; d < D; ++d) o[d] = x[d] += o[d];
            });
        } else {
            rows([&](int i) { detail::add_rmsnorm(row(xb_, i, D), row(x_, i, D), row(xb_, i, D), next_norm, D, eps, fast); });
        }
        if (!last) capture(l + 1);
    }
    std::swap(x_, xb_);
    // HF's last hidden state is the normed one (under partial_alignment: the feature branch's).
    capture(cfg_.num_hidden_layers, cfg_.partial_alignment ? feature_ : x_);
    linear(logits_.data(), x_.data(), head_, n);
    return Rows{logits_, V};
}

SPECDEC_INLINE void CpuModel::commit(std::span<const int> path) {
    validate_commit(path, n_computed_, cache_len_, cfg_.max_position_embeddings, "model");
    kv_.gather(cache_len_, path);
    committed_hidden_.gather(cache_len_, path);
    cache_len_ += static_cast<int>(path.size());
    n_computed_ = 0;
}

SPECDEC_INLINE void CpuModel::truncate(int n) {
    detail::require(n >= 0 && n <= cache_len_, "model", [&] {
        return "truncate to " + std::to_string(n) + " tokens, but the cache holds " + std::to_string(cache_len_);
    });
    cache_len_ = n;
    n_computed_ = 0;
    for (int& from : hidden_from_) from = std::min(from, n);
}

SPECDEC_INLINE KvView CpuModel::kv(int layer) const {
    detail::require(layer >= 0 && layer < cfg_.num_hidden_layers, "model", [&] {
        return "kv(" + std::to_string(layer) + "): the model has " + std::to_string(cfg_.num_hidden_layers) + " layers";
    });
    return {kv_.k_rows(layer, cache_len_), kv_.v_rows(layer, cache_len_), cache_len_, cfg_.num_key_value_heads,
            cfg_.head_dim()};
}

SPECDEC_INLINE void CpuModel::capture_hidden(std::vector<int> layers) {
    for (int l : layers)
        detail::require(l >= 0 && l <= cfg_.num_hidden_layers, "model", [&] {
            return "capture_hidden: layer " + std::to_string(l) + " is outside [0, " +
                   std::to_string(cfg_.num_hidden_layers) + "]";
        });
    if (layers == hidden_layers_) return;  // the same layers: the committed states stay valid
    hidden_layers_ = std::move(layers);
    hidden_.clear();
    committed_hidden_ = detail::RowCache(static_cast<int>(hidden_layers_.size()), cfg_.hidden_size, kv_.max_rows(), "model",
                                         "the committed hidden states");
    committed_hidden_.reserve(kv_.capacity(), 0);
    hidden_from_.assign(hidden_layers_.size(), cache_len_);
}

SPECDEC_INLINE int CpuModel::add_hidden_layer(int layer) {
    for (std::size_t i = 0; i < hidden_layers_.size(); ++i)
        if (hidden_layers_[i] == layer) return static_cast<int>(i);
    detail::require(layer >= 0 && layer <= cfg_.num_hidden_layers, "model", [&] {
        return "add_hidden_layer: layer " + std::to_string(layer) + " is outside [0, " +
               std::to_string(cfg_.num_hidden_layers) + "]";
    });
    // A cache one layer taller: the captured layers' rows (committed and the last forward's tree rows,
    // which commit still gathers) are copied over whole.
    const int n_old = static_cast<int>(hidden_layers_.size()), D = cfg_.hidden_size;
    detail::RowCache grown(n_old + 1, D, kv_.max_rows(), "model", "the committed hidden states");
    const int rows = std::max(committed_hidden_.capacity(), kv_.capacity());
    grown.reserve(rows, 0);
    for (int i = 0; i < n_old; ++i)
        std::copy_n(committed_hidden_.rows(i), static_cast<std::size_t>(committed_hidden_.capacity()) * D, grown.rows(i));
    committed_hidden_ = std::move(grown);
    hidden_layers_.push_back(layer);
    if (hidden_.size() == static_cast<std::size_t>(n_old)) hidden_.emplace_back();  // no states of the last forward
    hidden_from_.push_back(cache_len_);
    return n_old;
}

SPECDEC_INLINE int CpuModel::hidden_index(int layer) const {
    for (std::size_t i = 0; i < hidden_layers_.size(); ++i)
        if (hidden_layers_[i] == layer) return static_cast<int>(i);
    std::string captured;
    for (int l : hidden_layers_) captured += (captured.empty() ? "" : ", ") + std::to_string(l);
    detail::fail("model", "hidden_index: layer " + std::to_string(layer) + " is not captured (captured: {" + captured +
                              "}); was the set replaced by capture_hidden after a reader added its layer with "
                              "add_hidden_layer?");
}

SPECDEC_INLINE Rows CpuModel::hidden(int i) const {
    detail::require(i >= 0 && i < static_cast<int>(hidden_.size()), "model", [&] {
        return "hidden(" + std::to_string(i) + "): " + std::to_string(hidden_.size()) +
               " layers captured in the last forward (see capture_hidden)";
    });
    return Rows{hidden_[i], cfg_.hidden_size};
}

SPECDEC_INLINE Rows CpuModel::committed_hidden(int i) const {
    detail::require(i >= 0 && i < static_cast<int>(hidden_layers_.size()), "model", [&] {
        return "committed_hidden(" + std::to_string(i) + "): " + std::to_string(hidden_layers_.size()) +
               " layers are captured (see capture_hidden)";
    });
    detail::require(hidden_from_[static_cast<std::size_t>(i)] == 0, "model", [&] {
        return "committed_hidden: capture_hidden was called after " + std::to_string(hidden_from_[static_cast<std::size_t>(i)]) +
               " tokens were committed, whose states of layer " + std::to_string(hidden_layers_[static_cast<std::size_t>(i)]) +
               " were not kept; call it (or add_hidden_layer) before the text is forwarded (or reset the model)";
    });
    return Rows{committed_hidden_.first_rows(i, cache_len_), cfg_.hidden_size};
}

SPECDEC_INLINE void CpuModel::capture(int layer, const std::vector<float>& states) {
    for (std::size_t i = 0; i < hidden_layers_.size(); ++i)
        if (hidden_layers_[i] == layer) {
            std::copy_n(states.begin(), hidden_[i].size(), hidden_[i].begin());
            float* rows = committed_hidden_.rows(static_cast<int>(i));
            std::copy_n(states.begin(), hidden_[i].size(), rows + static_cast<std::size_t>(cache_len_ + hidden_first_) * cfg_.hidden_size);
        }
}

SPECDEC_INLINE void CpuModel::prepare_matrices() {
    const int D = cfg_.hidden_size, Fw = cfg_.intermediate_size, qd = cfg_.num_attention_heads * cfg_.head_dim();
    const int kvd = cfg_.kv_dim();
    fused_.resize(2 * static_cast<std::size_t>(cfg_.num_hidden_layers));
    mats_.resize(cfg_.num_hidden_layers);
    // A tensor in memory, or the rows a loader left in its file (validate() vouched for one of them).
    const auto part = [&](const std::vector<float>& t, const std::string& name, int rows) {
        const MatrixRows* in_file = t.empty() && w_.deferred ? w_.deferred->find(name) : nullptr;
        return in_file != nullptr ? detail::MatrixPart(in_file, rows) : detail::MatrixPart(&t);
    };
    struct Job {
        detail::Matrix* out;
        std::vector<float>* store;
        std::vector<detail::MatrixPart> parts;
        int m, k;
    };
    std::vector<Job> jobs;
    for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
        const LayerWeights& lw = w_.layers[l];
        const std::string p = "model.layers." + std::to_string(l) + ".";
        jobs.push_back({&mats_[l].qkv, &fused_[2 * l],
                        {part(lw.wq, p + "self_attn.q_proj.weight", qd), part(lw.wk, p + "self_attn.k_proj.weight", kvd),
                         part(lw.wv, p + "self_attn.v_proj.weight", kvd)},
                        qd + 2 * kvd, D});
        jobs.push_back({&mats_[l].wo, nullptr, {part(lw.wo, p + "self_attn.o_proj.weight", D)}, D, qd});
        jobs.push_back({&mats_[l].gate_up, &fused_[2 * l + 1],
                        {part(lw.w_gate, p + "mlp.gate_proj.weight", Fw), part(lw.w_up, p + "mlp.up_proj.weight", Fw)}, 2 * Fw, D});
        jobs.push_back({&mats_[l].down, nullptr, {part(lw.w_down, p + "mlp.down_proj.weight", cfg_.down_rows(l))}, cfg_.down_rows(l), Fw});
    }
    jobs.push_back({&head_, nullptr,
                    {cfg_.tie_word_embeddings ? part(w_.embed, "model.embed_tokens.weight", cfg_.vocab_size)
                                              : part(w_.lm_head, "lm_head.weight", cfg_.vocab_size)},
                    cfg_.vocab_size, D});
    // The copies make_matrix will make, asked for before any is made.
    const auto [bf, panels] = detail::matrix_format(opt_);
    std::int64_t copied = 0;
    for (const Job& j : jobs)
        if (!detail::used_in_place(j.parts, bf, panels)) copied += std::int64_t{j.m} * j.k * (bf ? 2 : 4);
    detail::require_memory(copied, detail::available_memory_bytes(), "model",
                           "the " + std::string(bf ? "bf16" : "float32") + " matrices of this model (hidden_size " +
                               std::to_string(D) + ", intermediate_size " + std::to_string(Fw) + ", " +
                               std::to_string(cfg_.num_hidden_layers) + " layers, " + std::to_string(copied / (bf ? 2 : 4)) +
                               " weights)",
                           bf ? "free memory, or a smaller model"
                              : "bf16 matrices (ModelOptions::weight_format = WeightFormat::kBF16) take half, or free memory");
    const auto make = detail::matrix_maker(opt_);
    for (Job& j : jobs) *j.out = make(j.store, j.parts, j.m, j.k);
    w_.deferred.reset();  // packed: a loader's mapped file is no longer read
    inv_freq_ = rope_inverse_frequencies(cfg_);  // rope_scaling applied
}

SPECDEC_INLINE void CpuModel::attend(const float* kc, const float* vc, const std::vector<std::vector<int>>& visible) {
    const int n = static_cast<int>(visible.size()), H = cfg_.num_attention_heads, hd = cfg_.head_dim();
    const int kvd = cfg_.kv_dim(), group = H / cfg_.num_key_value_heads, T = cache_len_;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    std::size_t stride = 0;
    for (const auto& v : visible) stride = std::max(stride, static_cast<std::size_t>(T) + v.size());
    scores_.resize(static_cast<std::size_t>(n) * H * stride);
    const auto task = [&](int t) {
        const int i = t / H, h = t % H, kvh = h / group;
        const float* q = &q_[(static_cast<std::size_t>(i) * H + h) * hd];
        float* s = &scores_[static_cast<std::size_t>(t) * stride];
        const auto key_row = [&](std::size_t r) { return static_cast<std::size_t>(r < static_cast<std::size_t>(T) ? r : T + visible[i][r - T]); };
        const std::size_t len = T + visible[i].size();
        float mx = -INFINITY;
        for (std::size_t r = 0; r < len; ++r) {
            s[r] = dot(q, kc + key_row(r) * kvd + kvh * hd, hd) * scale;
            mx = std::max(mx, s[r]);
        }
        float sum = 0.0f;
        for (std::size_t r = 0; r < len; ++r) sum += (s[r] = std::exp(s[r] - mx));
        float* out = &att_[(static_cast<std::size_t>(i) * H + h) * hd];
        std::fill(out, out + hd, 0.0f);
        const float inv = 1.0f / sum;
        for (std::size_t r = 0; r < len; ++r) axpy(out, s[r] * inv, vc + key_row(r) * kvd + kvh * hd, hd);
    };
    if (opt_.reference) {
        for (int t = 0; t < n * H; ++t) task(t);
    } else {
        opt_.pool->parallel_for(n * H, task);
    }
}

SPECDEC_INLINE void CpuModel::attend_one(const float* kc, const float* vc, const std::vector<int>& tree_rows) {
    const int H = cfg_.num_attention_heads, hd = cfg_.head_dim(), kvd = cfg_.kv_dim();
    const int group = H / cfg_.num_key_value_heads, T = cache_len_;
    const int len = T + static_cast<int>(tree_rows.size());
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int chunk = std::max(32, (len + 4 * opt_.pool->size() - 1) / (4 * opt_.pool->size()));
    const int n_chunks = (len + chunk - 1) / chunk;
    const std::size_t part = static_cast<std::size_t>(hd) + 2;  // per (chunk, head): max, sum, hd values
    scores_.resize(static_cast<std::size_t>(n_chunks) * H * chunk);
    partials_.resize(static_cast<std::size_t>(n_chunks) * H * part);
    const auto row = [&](const float* cache, int r) {
        return cache + static_cast<std::size_t>(r < T ? r : T + tree_rows[r - T]) * kvd;
    };
    opt_.pool->parallel_for(n_chunks, [&](int c) {
        const int r0 = c * chunk, rows = std::min(len, r0 + chunk) - r0;
        float* s = &scores_[static_cast<std::size_t>(c) * H * chunk];  // (H, chunk)
        for (int r = 0; r < rows; ++r) {
            const float* k = row(kc, r0 + r);
            for (int h = 0; h < H; ++h) s[h * chunk + r] = dot(&q_[static_cast<std::size_t>(h) * hd], k + (h / group) * hd, hd);
        }
        float* out = &partials_[static_cast<std::size_t>(c) * H * part];
        for (int h = 0; h < H; ++h) {
            float* p = out + h * part;
            p[0] = scale * *std::max_element(s + h * chunk, s + h * chunk + rows);
            p[1] = detail::softmax_numerators(s + h * chunk, rows, scale);
            std::fill(p + 2, p + part, 0.0f);
        }
        for (int r = 0; r < rows; ++r) {
            const float* v = row(vc, r0 + r);
            for (int h = 0; h < H; ++h) axpy(out + h * part + 2, s[h * chunk + r], v + (h / group) * hd, hd);
        }
    });
    for (int h = 0; h < H; ++h) {
        float M = -INFINITY, L = 0.0f;
        for (int c = 0; c < n_chunks; ++c) M = std::max(M, partials_[(static_cast<std::size_t>(c) * H + h) * part]);
        float* o = &att_[static_cast<std::size_t>(h) * hd];
        std::fill(o, o + hd, 0.0f);
        for (int c = 0; c < n_chunks; ++c) {
            const float* p = &partials_[(static_cast<std::size_t>(c) * H + h) * part];
            const float w = std::exp(p[0] - M);
            L += w * p[1];
            axpy(o, w, p + 2, hd);
        }
        for (int d = 0; d < hd; ++d) o[d] /= L;
    }
}

SPECDEC_INLINE void CpuModel::build_tree_mask(const std::vector<std::vector<int>>& visible, int N) {
    const std::size_t n = visible.size();
    tree_mask_.assign(n * N, 0);
    for (std::size_t i = 0; i < n; ++i)
        for (int j : visible[i]) tree_mask_[i * N + j] = 1;
}

SPECDEC_INLINE void CpuModel::attend_blocked(const float* kc, const float* vc, int first, int N) {
    const int n = N - first, H = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads, hd = cfg_.head_dim();
    const int kvd = cfg_.kv_dim(), G = H / Hkv, T = cache_len_, R = T + N;
    const int B = std::max(1, detail::kAttentionBlockRows / G);  // nodes per block: G*B query rows
    const int n_blocks = (n + B - 1) / B, n_items = Hkv * n_blocks;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const auto at = [](auto... i) { return (std::size_t{1} * ... * static_cast<std::size_t>(i)); };  // an offset
    ThreadPool& pool = *opt_.pool;

    // Step 1: each kv head's keys (R, hd) and values transposed (hd, R), contiguous, the shape
    // of matmul's W operand.
    k_heads_.resize(at(Hkv, R, hd));
    vt_heads_.resize(at(Hkv, hd, R));
    pool.parallel_for(Hkv, [&](int kvh) {
        float* k = &k_heads_[at(kvh, R, hd)];
        float* vt = &vt_heads_[at(kvh, hd, R)];
        for (int r = 0; r < R; ++r) std::copy_n(kc + at(r, kvd) + at(kvh, hd), hd, k + at(r, hd));
        detail::transpose_rows(vt, vc + at(kvh, hd), kvd, R, hd);
    });

    // Step 2: one work item, kv head `kvh` against nodes [i0, i1), G*(i1 - i0) query rows,
    // node-major (row = node * G + g is query head kvh*G + g), and key rows [0, Rk).
    const std::size_t slot_size = at(2 * G * B, hd) + at(G * B, R) + at(hd, R) + at(G * B);
    slots_.resize(at(std::min(pool.size(), n_items), slot_size));
    const auto block = [&](int item, float* slot) {
        const int kvh = item % Hkv, b = n_blocks - 1 - item / Hkv;  // longest key ranges first
        const int i0 = b * B, i1 = std::min(n, i0 + B), rows = G * (i1 - i0), Rk = T + first + i1;
        float* q = slot;                   // (rows, hd) queries
        float* s = q + at(G * B, hd);      // (rows, Rk) scores, then probabilities
        float* vt = s + at(G * B, R);      // (hd, Rk) values of keys [0, Rk), transposed
        float* o = vt + at(hd, R);         // (rows, hd) outputs
        float* inv_sum = o + at(G * B, hd);  // (rows) 1 / softmax denominator

        // 2a. Queries: a node's query heads of one group are adjacent in q_.
        for (int i = i0; i < i1; ++i) std::copy_n(&q_[at(i * H + kvh * G, hd)], G * hd, q + at((i - i0) * G, hd));

        // 2b. S = Q·Kᵀ (rows, Rk).
        matmul(pool, s, q, &k_heads_[at(kvh, R, hd)], rows, hd, Rk);

        // 2c. Mask, then softmax numerators per row; the division by the row sum waits for O
        // (hd values a row instead of Rk). Keys after the row's node (its descendants, later
        // branches) are masked for every node: zero probability.
        for (int row = 0; row < rows; ++row) {
            const int i = i0 + row / G, len = T + first + i + 1;
            const std::uint8_t* seen = &tree_mask_[at(i, N)];  // (N) tree rows this node sees
            float* p = s + at(row, Rk);
            for (int j = 0; j < first + i; ++j)
                if (!seen[j]) p[T + j] = -INFINITY;
            inv_sum[row] = 1.0f / detail::softmax_numerators(p, len, scale);  // sum >= 1: the max is 1
            std::fill(p + len, p + Rk, 0.0f);
        }

        // 2d. O = P·V (rows, hd), with Vᵀ cut to the block's keys (matmul's W rows are Rk apart).
        const float* v = &vt_heads_[at(kvh, hd, R)];
        if (Rk < R) {
            for (int d = 0; d < hd; ++d) std::copy_n(v + at(d, R), Rk, vt + at(d, Rk));
            v = vt;
        }
        matmul(pool, o, s, v, rows, Rk, hd);

        // 2e. Outputs, divided by their row sums, back to att_ (n, H*hd), the layout of q_.
        for (int row = 0; row < rows; ++row) {
            const int i = i0 + row / G, g = row % G;
            float* out = &att_[at(i * H + kvh * G + g, hd)];
            for (int d = 0; d < hd; ++d) out[d] = o[at(row, hd) + d] * inv_sum[row];
        }
    };

    // Step 3: run the items, one slot of work space per pool task.
    std::atomic<int> next_item{0};
    pool.parallel_for(std::min(pool.size(), n_items), [&](int task) {
        for (int item; (item = next_item.fetch_add(1, std::memory_order_relaxed)) < n_items;)
            block(item, &slots_[at(task, slot_size)]);
    });
}

#endif  // SPECDEC_BODIES

}  // namespace specdec
