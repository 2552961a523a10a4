// specdec/detail/train/host_device.hpp — the device trainer's kernels run on the CPU: the bridge that tests the GPU trainer's arithmetic here.
// SPDX-License-Identifier: MIT
#pragma once

// A Device, for DeviceLlama and the trainers built on it, is: Buffer<T> (owning, zero-filled, data() and
// size()), upload/download/copy/fill, run(n, op) for the functors of device_ops.hpp, gemm, synchronize.
// CudaDevice (detail/cuda/train_device.cuh) launches one GPU thread per piece and multiplies with
// cuBLASLt in bf16; HostDevice runs the same functors over the thread pool and multiplies in fp32 with
// plain loops. It is not a fast CPU trainer (TrainableLlama is): it exists so that everything the GPU
// trainer does except the launch and the product's layout is checked against TrainableLlama on any
// machine, with the same orientation flags the GPU's product receives.

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "../model/thread_pool.hpp"
#include "device_ops.hpp"
#include "layers.hpp"

namespace specdec::train {

class HostDevice {
public:
    template <class T>
    using Buffer = std::vector<T>;

    explicit HostDevice(ThreadPool& pool) : pool_(&pool) {}

    static std::string name() { return "host"; }

    template <class T>
    Buffer<T> alloc(std::size_t n) { return Buffer<T>(n, T{}); }
    template <class T>
    void upload(T* dst, const T* host, std::size_t n) { std::copy_n(host, n, dst); }
    template <class T>
    void download(T* host, const T* src, std::size_t n) { std::copy_n(src, n, host); }
    template <class T>
    void copy(T* dst, const T* src, std::size_t n) { std::copy_n(src, n, dst); }
    void fill(float* dst, std::size_t n, float value) { std::fill_n(dst, n, value); }

    /// op(i) for every i in [0, n), in contiguous bands over the pool.
    template <class Op>
    void run(ops::Index n, const Op& op) {
        if (n <= 0) return;
        const int bands = static_cast<int>(std::min<ops::Index>(n, 4 * pool_->size()));
        pool_->parallel_for(bands, [&](int b) {
            const ops::Index i0 = n * b / bands, i1 = n * (b + 1) / bands;
            for (ops::Index i = i0; i < i1; ++i) op(i);
        });
    }

    /// C (M, N) = op(A) · op(B) (+ C when accumulate), row-major: op(A) (M, K) is A (M, K) or, with
    /// transpose_a, A stored (K, M); op(B) (K, N) is B (K, N) or, with transpose_b, B stored (N, K).
    void gemm(float* C, const float* A, const float* B, int M, int N, int K, bool transpose_a, bool transpose_b,
              bool accumulate) {
        run(M, [=](ops::Index m) {
            for (int n = 0; n < N; ++n) {
                float s = 0.0f;
                for (int k = 0; k < K; ++k) {
                    const float a = transpose_a ? A[std::size_t(k) * M + m] : A[std::size_t(m) * K + k];
                    const float b = transpose_b ? B[std::size_t(n) * K + k] : B[std::size_t(k) * N + n];
                    s += a * b;
                }
                float& c = C[std::size_t(m) * N + n];
                c = accumulate ? c + s : s;
            }
        });
    }

    void synchronize() {}

private:
    ThreadPool* pool_;
};

}  // namespace specdec::train
