// specdec/detail/cuda/gemm.cuh — the one cuBLASLt matrix product: y (n, m) = x (n, k) · Wᵀ, bf16 in, fp32 out.
// SPDX-License-Identifier: MIT
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>

#include "../../kernels.cuh"
#include "context.cuh"
#include "../core/error.hpp"

namespace specdec {

/// Whether a product overwrites y or adds to it. kAccumulate is how the model adds the attention and
/// MLP outputs to the residual stream: cuBLASLt's epilogue computes y = x·Wᵀ + y in place (C == D with
/// identical layouts is supported), which saves a residual-add kernel and a pass over y.
enum class GemmMode { kOverwrite, kAccumulate };

/// How Gemm computes a product. The defaults are what bench_cuda measured fastest on an H100 (docs/cuda.md);
/// the others stay selectable so the benchmark can show the difference side by side.
struct GemmOptions {
    /// n ≤ skinny_max_n (a decode step, a tiny tree) with k % 8 == 0 streams W through
    /// kernels::skinny_product instead of cuBLASLt; 0 never does. The kernel takes n up to
    /// kernels::kSkinnyMaxN, but past n = 2 its re-reads of x cost more than cuBLASLt's tiles (bench_cuda).
    int skinny_max_n = 2;
    /// Time up to 8 of cuBLASLt's heuristic candidates once per shape (on scratch buffers) and keep the
    /// fastest, instead of trusting the heuristic's first choice. Off: on an H100 the timed choices were
    /// no faster over a 7B layer (bench_cuda's product table), and three timed runs of a 5 us product
    /// are noisy enough to pick a slower one.
    bool timed_choice = false;
};

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
/// The algorithm is chosen once per (m, n, k) and cached (GemmOptions says how); the pointers passed
/// must be 16-byte aligned (every CudaBuffer is 256-byte aligned). Skinny products (n up to
/// GemmOptions::skinny_max_n) bypass cuBLASLt, whose kernels for n = 1 take 6-12 us even where W is
/// read in 1-3 us. A plan is made on a shape's first eager call: CUDA graphs capture only shapes that
/// ran eagerly before (timing candidates synchronises the stream, which a capture forbids).
class Gemm {
public:
    explicit Gemm(CudaContext& ctx, GemmOptions options = {}) : ctx_(&ctx), opt_(options) {}

    void operator()(float* y, const __nv_bfloat16* x, const __nv_bfloat16* W, int n, int k, int m,
                    GemmMode mode = GemmMode::kOverwrite) {
        if (n == 0) return;
        const float alpha = 1.0f, beta = mode == GemmMode::kAccumulate ? 1.0f : 0.0f;
        if (takes_skinny(n, k)) return kernels::launch_skinny_product(ctx_->stream(), y, x, W, n, k, m, beta);
        const detail::GemmPlan& p = plan(m, n, k);
        SPECDEC_CUDA_CHECK(cublasLtMatmul(ctx_->blas(), p.op, &alpha, W, p.w, x, p.x, &beta, y, p.y, y, p.y, &p.algo,
                                          ctx_->workspace(), ctx_->workspace_bytes(), ctx_->stream()));
    }

    /// Whether (n, k) goes to the skinny kernel rather than cuBLASLt.
    bool takes_skinny(int n, int k) const {
        return n <= std::min(opt_.skinny_max_n, kernels::kSkinnyMaxN) && k % 8 == 0;
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
        constexpr int kCandidates = 8;
        cublasLtMatmulHeuristicResult_t results[kCandidates]{};
        int found = 0;
        const cublasStatus_t status = [&] {
            const cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
            if (s != CUBLAS_STATUS_SUCCESS) return s;
            return cublasLtMatmulAlgoGetHeuristic(ctx_->blas(), p->op, p->w, p->x, p->y, p->y, pref,
                                                  opt_.timed_choice ? kCandidates : 1, results, &found);
        }();
        cublasLtMatmulPreferenceDestroy(pref);
        detail::require(status == CUBLAS_STATUS_SUCCESS && found > 0, "cuda.gemm", [&] {
            return "cuBLASLt has no algorithm for bf16 x bf16 -> fp32 " + shape(m, n, k) + " (" +
                   cublasLtGetStatusName(status) + "); hint: k and m that are multiples of 8 keep rows 16-byte aligned";
        });
        p->algo = results[fastest(*p, std::span(results, static_cast<std::size_t>(found)), m, n, k)].algo;
        return *plans_.emplace(key, std::move(p)).first->second;
    }

private:
    /// Index of the candidate that runs y = x·Wᵀ fastest on zeroed scratch buffers of this shape
    /// (3 runs timed together after a warm-up, with events on the context's stream).
    /// Candidates that fail to launch are skipped; with one candidate nothing is run.
    std::size_t fastest(const detail::GemmPlan& p, std::span<const cublasLtMatmulHeuristicResult_t> candidates,
                        int m, int n, int k) {
        if (candidates.size() == 1) return 0;
        cudaStream_t s = ctx_->stream();
        DeviceBuffer<__nv_bfloat16> x(static_cast<std::size_t>(n) * k), W(static_cast<std::size_t>(m) * k);
        DeviceBuffer<float> y(static_cast<std::size_t>(n) * m);
        SPECDEC_CUDA_CHECK(cudaMemsetAsync(x.get(), 0, x.bytes(), s));
        SPECDEC_CUDA_CHECK(cudaMemsetAsync(W.get(), 0, W.bytes(), s));
        struct Events {  // destroyed on every way out, a failed check included
            cudaEvent_t start = nullptr, stop = nullptr;
            ~Events() {
                if (start != nullptr) cudaEventDestroy(start);
                if (stop != nullptr) cudaEventDestroy(stop);
            }
        } ev;
        SPECDEC_CUDA_CHECK(cudaEventCreate(&ev.start));
        SPECDEC_CUDA_CHECK(cudaEventCreate(&ev.stop));
        const float alpha = 1.0f, beta = 0.0f;
        std::size_t best = 0;
        float best_ms = INFINITY;
        for (std::size_t c = 0; c < candidates.size(); ++c) {
            const auto run = [&] {
                return cublasLtMatmul(ctx_->blas(), p.op, &alpha, W.get(), p.w, x.get(), p.x, &beta, y.get(), p.y,
                                      y.get(), p.y, &candidates[c].algo, ctx_->workspace(), ctx_->workspace_bytes(), s);
            };
            if (run() != CUBLAS_STATUS_SUCCESS) continue;
            SPECDEC_CUDA_CHECK(cudaEventRecord(ev.start, s));
            for (int r = 0; r < 3; ++r) SPECDEC_CUDA_CHECK(run());
            SPECDEC_CUDA_CHECK(cudaEventRecord(ev.stop, s));
            SPECDEC_CUDA_CHECK(cudaEventSynchronize(ev.stop));
            float ms = 0.0f;
            SPECDEC_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.start, ev.stop));
            if (ms < best_ms) best_ms = ms, best = c;
        }
        return best;
    }

    static std::string shape(int m, int n, int k) {
        return "y (n=" + std::to_string(n) + ", m=" + std::to_string(m) + ") = x (n, k=" + std::to_string(k) + ") * W^T";
    }

    CudaContext* ctx_;
    GemmOptions opt_;
    std::map<std::tuple<int, int, int>, std::unique_ptr<detail::GemmPlan>> plans_;  // (m, n, k) -> plan
};

}  // namespace specdec
