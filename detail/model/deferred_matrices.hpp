// specdec/detail/model/deferred_matrices.hpp — weight matrices left in their (memory-mapped) file until a model packs them.
// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "bf16.hpp"

// Why: loading a model for inference used to widen every matrix to a float32 Weights, which the model
// then packed again into its own layout — for a 1.1B bf16 checkpoint 4.4 GB written and read again, and
// for a 7B one more memory than a 24 GB machine has. A loader asked to defer (LoadOptions) reads only the
// small tensors (embedding, norms) into Weights and describes each matrix by a row reader over the
// mapped file; CpuModel packs its panels from those rows directly, so a bf16 file is copied once, into
// the layout the products read (llama.cpp's mmap loading, for the same reason).

namespace specdec {

/// Row j of a matrix as a loader gives it: bfloat16 values read in place where the file stores them so
/// (2-byte aligned), else float32 (the file's values, or values converted into the calling thread's
/// scratch, valid until its next call). Exactly one pointer is set.
struct RowRef {
    const bf16* bf = nullptr;
    const float* f32 = nullptr;
};

/// A matrix (m, k) whose rows are read on demand. `row` may be called from several threads at once;
/// it throws specdec::error naming the file and tensor for a value that is not finite.
struct MatrixRows {
    int m = 0, k = 0;
    std::function<RowRef(int j)> row;
};

/// The matrices a loader left in the file (Weights::deferred), by HF tensor name. `owner` keeps the
/// file mapped for as long as anything reads the rows.
struct DeferredMatrices {
    std::shared_ptr<const void> owner;
    std::map<std::string, MatrixRows, std::less<>> matrices;

    const MatrixRows* find(std::string_view name) const {
        const auto it = matrices.find(name);
        return it == matrices.end() ? nullptr : &it->second;
    }
};

/// How a loader reads a model.
struct LoadOptions {
    bool defer_matrices = false;  // leave the matrices in the mapped file for CpuModel to pack (no float32 copy
                                  // of the model); such Weights serve inference only: saving, training or the
                                  // CUDA backend need them loaded, and say so
};

/// Whether HF tensor `name` is one a loader may defer: every matrix except the embedding, which the
/// model reads by row in float32 (norms and biases are vectors).
inline bool deferrable_tensor(std::string_view name) {
    return name != "model.embed_tokens.weight" && name.find("norm") == std::string_view::npos && !name.ends_with(".bias");
}

}  // namespace specdec
