// specdec/detail/cuda/train_device.cuh — the GPU for the device trainer: one thread per piece, cuBLASLt products in bf16.
// SPDX-License-Identifier: MIT
#pragma once

// CudaDevice is the Device of detail/train/device_llama.hpp on a GPU (HostDevice is the same on the CPU).
// Everything runs in order on the context's stream. Numerics, as llm.c's mixed precision: parameters,
// activations, gradients and AdamW's moments are fp32 (the master copy); each product rounds its two
// operands to bf16 into scratch (kernels::to_bf16) and accumulates in fp32 (CUBLAS_COMPUTE_32F), adding
// into C in place when asked (cuBLASLt's beta = 1 with C == D).
//
// The row-major product C (M, N) = op(A) · op(B) is the column-major Cᵀ (N, M) = op(B)ᵀ · op(A)ᵀ, so
// cuBLASLt's first operand is B and its second is A, each read with the flag that undoes its storage:
//   B stored (K, N) is column-major (N, K) = op(B)ᵀ: N;   B stored (N, K) (transpose_b): T of (K, N).
//   A stored (M, K) is column-major (K, M) = op(A)ᵀ: N;   A stored (K, M) (transpose_a): T of (M, K).

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "../../kernels.cuh"
#include "../core/error.hpp"
#include "../train/device_ops.hpp"
#include "context.cuh"
#include "gemm.cuh"

namespace specdec::train {

/// An owning device array, zero-filled on the context's stream when made.
template <class T>
class CudaArray {
public:
    CudaArray() = default;
    CudaArray(std::size_t n, cudaStream_t s) : buf_(n) {
        if (n > 0) SPECDEC_CUDA_CHECK(cudaMemsetAsync(buf_.get(), 0, buf_.bytes(), s));
    }
    T* data() { return buf_.get(); }
    const T* data() const { return buf_.get(); }
    std::size_t size() const { return buf_.size(); }

private:
    DeviceBuffer<T> buf_;
};

class CudaDevice {
public:
    template <class T>
    using Buffer = CudaArray<T>;

    explicit CudaDevice(CudaContext& ctx) : ctx_(&ctx) {}

    static std::string name() { return "cuda"; }
    CudaContext& context() { return *ctx_; }

    template <class T>
    Buffer<T> alloc(std::size_t n) { return Buffer<T>(n, ctx_->stream()); }
    /// Pageable host memory: the call returns once `host` may be reused.
    template <class T>
    void upload(T* dst, const T* host, std::size_t n) {
        if (n > 0) SPECDEC_CUDA_CHECK(cudaMemcpyAsync(dst, host, n * sizeof(T), cudaMemcpyHostToDevice, ctx_->stream()));
    }
    template <class T>
    void download(T* host, const T* src, std::size_t n) {
        if (n == 0) return;
        SPECDEC_CUDA_CHECK(cudaMemcpyAsync(host, src, n * sizeof(T), cudaMemcpyDeviceToHost, ctx_->stream()));
        ctx_->synchronize();
    }
    template <class T>
    void copy(T* dst, const T* src, std::size_t n) {
        if (n > 0) SPECDEC_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyDeviceToDevice, ctx_->stream()));
    }
    void fill(float* dst, std::size_t n, float value) {
        if (n == 0) return;
        if (value == 0.0f) return SPECDEC_CUDA_CHECK(cudaMemsetAsync(dst, 0, n * sizeof(float), ctx_->stream()));
        run(static_cast<ops::Index>(n), ops::Fill{dst, value});
    }

    template <class Op>
    void run(ops::Index n, const Op& op) { kernels::launch_pieces(ctx_->stream(), n, op); }

    /// C (M, N) = op(A) · op(B) (+ C when accumulate), row-major fp32, the operands rounded to bf16.
    void gemm(float* C, const float* A, const float* B, int M, int N, int K, bool transpose_a, bool transpose_b,
              bool accumulate) {
        if (M == 0 || N == 0) return;
        const std::size_t a_n = static_cast<std::size_t>(M) * K, b_n = static_cast<std::size_t>(K) * N;
        grow(a16_, a_n), grow(b16_, b_n);
        kernels::launch_to_bf16(ctx_->stream(), a16_.get(), A, static_cast<std::int64_t>(a_n));
        kernels::launch_to_bf16(ctx_->stream(), b16_.get(), B, static_cast<std::int64_t>(b_n));
        const Plan& p = plan(M, N, K, transpose_a, transpose_b);
        const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
        SPECDEC_CUDA_CHECK(cublasLtMatmul(ctx_->blas(), p.op, &alpha, b16_.get(), p.first, a16_.get(), p.second, &beta, C,
                                          p.out, C, p.out, &p.algo, ctx_->workspace(), ctx_->workspace_bytes(),
                                          ctx_->stream()));
        flops_ += 2.0 * M * N * K;
    }

    void synchronize() { ctx_->synchronize(); }

    /// Multiply-add work issued through gemm so far, in FLOPs (2 per multiply-add): for MFU.
    double gemm_flops() const { return flops_; }

private:
    struct Plan {
        cublasLtMatmulDesc_t op = nullptr;
        cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
        cublasLtMatmulAlgo_t algo{};
        Plan() = default;
        Plan(const Plan&) = delete;
        Plan& operator=(const Plan&) = delete;
        ~Plan() {
            if (out != nullptr) cublasLtMatrixLayoutDestroy(out);
            if (second != nullptr) cublasLtMatrixLayoutDestroy(second);
            if (first != nullptr) cublasLtMatrixLayoutDestroy(first);
            if (op != nullptr) cublasLtMatmulDescDestroy(op);
        }
    };

    static void grow(DeviceBuffer<__nv_bfloat16>& b, std::size_t n) {
        if (b.size() < n) b = DeviceBuffer<__nv_bfloat16>(n);
    }

    const Plan& plan(int M, int N, int K, bool ta, bool tb) {
        const auto key = std::make_tuple(M, N, K, ta, tb);
        if (const auto it = plans_.find(key); it != plans_.end()) return *it->second;
        auto p = std::make_unique<Plan>();
        const cublasOperation_t op_first = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_second = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
        SPECDEC_CUDA_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        SPECDEC_CUDA_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
        SPECDEC_CUDA_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second));
        // Column-major (rows, cols, leading dimension) of each operand as stored.
        if (tb) SPECDEC_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->first, CUDA_R_16BF, K, N, K));
        else SPECDEC_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->first, CUDA_R_16BF, N, K, N));
        if (ta) SPECDEC_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->second, CUDA_R_16BF, M, K, M));
        else SPECDEC_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->second, CUDA_R_16BF, K, M, K));
        SPECDEC_CUDA_CHECK(cublasLtMatrixLayoutCreate(&p->out, CUDA_R_32F, N, M, N));
        cublasLtMatmulPreference_t pref = nullptr;
        SPECDEC_CUDA_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        const std::size_t ws = ctx_->workspace_bytes();
        cublasLtMatmulHeuristicResult_t result{};
        int found = 0;
        cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
        if (status == CUBLAS_STATUS_SUCCESS)
            status = cublasLtMatmulAlgoGetHeuristic(ctx_->blas(), p->op, p->first, p->second, p->out, p->out, pref, 1,
                                                    &result, &found);
        cublasLtMatmulPreferenceDestroy(pref);
        detail::require(status == CUBLAS_STATUS_SUCCESS && found > 0, "cuda.train", [&] {
            return "cuBLASLt has no algorithm for C (" + std::to_string(M) + ", " + std::to_string(N) + ") = op(A) op(B), K = " +
                   std::to_string(K) + (ta ? ", A transposed" : "") + (tb ? ", B transposed" : "") + " (" +
                   cublasLtGetStatusName(status) + ")";
        });
        p->algo = result.algo;
        return *plans_.emplace(key, std::move(p)).first->second;
    }

    CudaContext* ctx_;
    DeviceBuffer<__nv_bfloat16> a16_, b16_;
    std::map<std::tuple<int, int, int, bool, bool>, std::unique_ptr<Plan>> plans_;
    double flops_ = 0.0;
};

}  // namespace specdec::train
