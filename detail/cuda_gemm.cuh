// specdec/detail/cuda_gemm.cuh — the one cuBLASLt matrix product: y (n, m) = x (n, k) · Wᵀ, bf16 in, fp32 out.
// SPDX-License-Identifier: MIT
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "cuda_context.cuh"
#include "error.hpp"

namespace specdec {

/// Whether a product overwrites y or adds to it. kAccumulate is how the model adds the attention and
/// MLP outputs to the residual stream: cuBLASLt's epilogue computes y = x·Wᵀ + y in place (C == D with
/// identical layouts is supported), which saves a residual-add kernel and a pass over y.
enum class GemmMode { kOverwrite, kAccumulate };

namespace detail {

/// Descriptors and the chosen algorithm for one (m, n, k), created once and reused.
struct GemmPlan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
    cublasLtMatmulAlgo_t algo{};

    GemmPlan() = default;
    GemmPlan(const GemmPlan&) = delete;
    GemmPlan& operator=(const GemmPlan&) = delete;
    ~GemmPlan() {
        if (y != nullptr) cublasLtMatrixLayoutDestroy(y);
        if (x != nullptr) cublasLtMatrixLayoutDestroy(x);
        if (w != nullptr) cublasLtMatrixLayoutDestroy(w);
        if (op != nullptr) cublasLtMatmulDescDestroy(op);
    }
};

}  // namespace detail

/// Every matrix product of the CUDA backend goes through here (llm.c's matmul_cublaslt), so one place
/// owns the descriptors and states the numerics:
///   - W (m, k) row-major bf16, HF's (out_features, in_features) — the CPU's convention;
///   - x (n, k) row-major bf16: activations are rounded to bf16 where they enter a product (cuBLASLt
///     needs A and B of one type, and bf16 halves the bytes moved);
///   - y (n, m) row-major fp32, accumulated in fp32 (CUBLAS_COMPUTE_32F), so the residual stream and the
///     logits stay fp32.
/// Row-major y = x·Wᵀ is column-major yᵀ (m, n) = W (k, m)ᵀ · xᵀ (k, n): op(A) = T on W, op(B) = N on x.
/// The heuristic's first choice is cached per (m, n, k); the pointers passed must be 16-byte aligned
/// (every CudaBuffer is 256-byte aligned).
class Gemm {
public:
    explicit Gemm(CudaContext& ctx) : ctx_(&ctx) {}

    void operator()(float* y, const __nv_bfloat16* x, const __nv_bfloat16* W, int n, int k, int m,
                    GemmMode mode = GemmMode::kOverwrite) {
        if (n == 0) return;
        const detail::GemmPlan& p = plan(m, n, k);
        const float alpha = 1.0f, beta = mode == GemmMode::kAccumulate ? 1.0f : 0.0f;
        SPECDEC_CUDA_CHECK(cublasLtMatmul(ctx_->blas(), p.op, &alpha, W, p.w, x, p.x, &beta, y, p.y, y, p.y, &p.algo,
                                          ctx_->workspace(), ctx_->workspace_bytes(), ctx_->stream()));
    }

    /// Builds (or finds) the plan for y (n, m) = x (n, k) · Wᵀ; throws naming m, n, k when cuBLASLt has
    /// no algorithm for it.
    const detail::GemmPlan& plan(int m, int n, int k) {
        const auto key = std::make_tuple(m, n, k);
        if (const auto it = plans_.find(key); it != plans_.end()) return *it->second;
        detail::require(m > 0 && n > 0 && k > 0, "cuda.gemm", [&] { return "invalid shape " + shape(m, n, k); });
        auto p = std::make_unique<detail::GemmPlan>();
        const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
        SPECDEC_CUDA_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        SPECDEC_CUDA_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose));
        SPECDEC_CUDA_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep));
        SPECDEC_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->w, CUDA_R_16BF, k, m, k));  // W as column-major (k, m)
        SPECDEC_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->x, CUDA_R_16BF, k, n, k));  // x as column-major (k, n)
        SPECDEC_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->y, CUDA_R_32F, m, n, m));   // y as column-major (m, n)

        cublasLtMatmulPreference_t pref = nullptr;
        SPECDEC_CUDA_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        const std::size_t ws = ctx_->workspace_bytes();
        cublasLtMatmulHeuristicResult_t result{};
        int found = 0;
        const cublasStatus_t status = [&] {
            const cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
            if (s != CUBLAS_STATUS_SUCCESS) return s;
            return cublasLtMatmulAlgoGetHeuristic(ctx_->blas(), p->op, p->w, p->x, p->y, p->y, pref, 1, &result, &found);
        }();
        cublasLtMatmulPreferenceDestroy(pref);
        detail::require(status == CUBLAS_STATUS_SUCCESS && found > 0, "cuda.gemm", [&] {
            return "cuBLASLt has no algorithm for bf16 x bf16 -> fp32 " + shape(m, n, k) + " (" +
                   cublasLtGetStatusName(status) + "); hint: k and m that are multiples of 8 keep rows 16-byte aligned";
        });
        p->algo = result.algo;
        return *plans_.emplace(key, std::move(p)).first->second;
    }

private:
    static std::string shape(int m, int n, int k) {
        return "y (n=" + std::to_string(n) + ", m=" + std::to_string(m) + ") = x (n, k=" + std::to_string(k) + ") * W^T";
    }

    CudaContext* ctx_;
    std::map<std::tuple<int, int, int>, std::unique_ptr<detail::GemmPlan>> plans_;  // (m, n, k) -> plan
};

}  // namespace specdec
